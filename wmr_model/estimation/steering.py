"""Steering angles as inputs: which joints are steered, and how their angle is known.

A steered vehicle (a tricycle AGV, an Ackermann car, Rocky 7, Zoë) has actuated joints that are
not wheels: steering joints about the vertical, whose *angle* is the input (a rate integrated
from the encoder stream drifts, and a prediction that starts every interval at angle 0 turns
the wrong way). Their angle is known in one of two ways, per joint, from the vehicle sidecar's
``steering`` entry (:mod:`wmr_model.io.sidecar`):

* ``measured`` (default): an angle sensor (potentiometer, servo feedback) published as the
  joint's JointState position. Between samples it is interpolated linearly, like wheel rates.
* ``commanded``: only the command sent to the steering actuator is logged (a hobby servo, a
  steer-by-wire set point). The wheel follows it with a lag; modelled as a first-order lag of
  the zero-order-held command with time constant ``steer.<joint>.lag`` [s] (a calibratable
  parameter; the sidecar gives the nominal one), the usual servo model:

  .. math:: \\dot\\delta = (\\delta_{cmd} - \\delta) / \\tau

The functions here are plain arrays and ``dt`` (no ROS, no files): the calibration log, the
planar baselines, the bag merge and the odometry node share them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from wmr_model.errors import ModelError

__all__ = ["STEER_SOURCES", "SteerInput", "steer_joints", "steer_inputs", "lagged_command",
           "LagFilter"]

#: How a steering joint's angle is known (module docstring).
STEER_SOURCES = ("measured", "commanded")

#: [s] a commanded joint's lag is followed this many time constants back before a query window
#: (the start-up transient is below e^-8 = 3e-4 of the command step by then).
_LAG_HISTORY = 8.0


@dataclass(frozen=True)
class SteerInput:
    """How one steering joint's angle is known.

    Attributes:
        joint: model joint name.
        source: ``"measured"`` or ``"commanded"`` (:data:`STEER_SOURCES`).
        lag: [s] nominal first-order lag of a commanded joint (0 for measured ones).
        topic: JointState topic carrying the angle, when it is not the encoder topic (None: the
            encoder topic).
    """

    joint: str
    source: str = "measured"
    lag: float = 0.0
    topic: str | None = None


def steer_joints(model: Any) -> list[str]:
    """Names of the model's steering joints: actuated revolute joints that are not wheels, whose
    axis is within 30 degrees of the body's vertical at the neutral state and that carry a wheel
    (a steering knuckle, a steered fork). Suspension or flipper joints are not among them."""
    from wmr_model.kinematics import api

    wheels = {int(f) for f in model.wheel_frame}
    data = api.create_data(model)
    Tw = api.forward_kinematics(model, data, model.neutral_state())
    out = []
    for k in model.actuated_joints:
        f = int(k) + 1
        if f in wheels or int(model.joint_type[f]) != 1 or not model.chain[:, f].any():
            continue
        axis_world = Tw[f, :3, :3] @ np.asarray(model.axis[f], dtype=float)
        if abs(float(axis_world[2])) >= math.cos(math.radians(30.0)):
            out.append(model.joint_names[int(k)])
    return out


def steer_inputs(model: Any) -> dict[str, SteerInput]:
    """Steering joint -> :class:`SteerInput`: the sidecar's ``steering`` entries
    (``model.options["steering"]``), every other steering joint measured.

    Raises:
        ModelError: a ``steering`` entry names a joint that is not a steering joint of the
            model, or has an unknown source or a negative lag.
    """
    joints = steer_joints(model)
    given: Mapping[str, Mapping[str, Any]] = model.options.get("steering", {}) or {}
    out = {j: SteerInput(j) for j in joints}
    for j, e in given.items():
        where = f"{model.name}: steering.{j}"
        if j not in joints:
            raise ModelError(f"{where}: not a steering joint (actuated, vertical axis, carrying "
                             f"a wheel); the steering joints are {joints}")
        src = str(e.get("source", "measured"))
        if src not in STEER_SOURCES:
            raise ModelError(f"{where}.source: expected one of {list(STEER_SOURCES)}, got "
                             f"{src!r}")
        lag = float(e.get("lag", 0.0 if src == "measured" else 0.1))
        if not (math.isfinite(lag) and 0.0 <= lag <= 10.0):
            raise ModelError(f"{where}.lag: must be in [0, 10] s, got {lag}")
        topic = e.get("topic")
        out[j] = SteerInput(j, src, lag if src == "commanded" else 0.0,
                            None if topic in (None, "") else str(topic))
    return out


def lagged_command(t: np.ndarray, u: np.ndarray, tau: float, tq: np.ndarray) -> np.ndarray:
    """Angle (Q,) at ``tq`` of a first-order lag (module docstring) driven by the zero-order-held
    commands ``u`` (N,) stamped ``t`` (N,) [s, increasing]; ``tau`` [s] >= 0 (0: the held
    command itself). Exact for a held input: between commands ``delta`` relaxes toward the
    command as ``exp(-dt / tau)``. The lag starts settled on the first command it is given;
    only the commands from ``_LAG_HISTORY`` time constants before the first query are
    followed, so a query window costs its own samples, not the whole log."""
    t = np.asarray(t, dtype=float)
    u = np.asarray(u, dtype=float)
    tq = np.asarray(tq, dtype=float)
    k = np.clip(np.searchsorted(t, tq, side="right") - 1, 0, len(t) - 1)
    if tau <= 0.0 or len(t) < 2:
        return u[k]
    i0 = max(0, int(np.searchsorted(t, float(tq.min()) - _LAG_HISTORY * tau, side="right")) - 1)
    i1 = int(k.max()) + 1
    y = np.empty(i1 - i0)  # angle at each command stamp, just before that command applies
    y[0] = u[i0]
    a = np.exp(-np.diff(t[i0:i1]) / tau)
    for n in range(1, i1 - i0):
        y[n] = u[i0 + n - 1] + (y[n - 1] - u[i0 + n - 1]) * a[n - 1]
    kk = np.maximum(k, i0)
    dtq = np.maximum(tq - t[kk], 0.0)
    return u[kk] + (y[kk - i0] - u[kk]) * np.exp(-dtq / tau)


class LagFilter:
    """The same lag run message by message (a node following a command topic live): call
    :meth:`update` with each command and :meth:`at` for the angle at a later stamp."""

    def __init__(self, tau: float) -> None:
        self.tau = float(tau)
        self._t: float | None = None
        self._u = 0.0
        self._y = 0.0

    def at(self, t: float) -> float:
        """Angle at ``t`` [s] (the last command held since it arrived); NaN before any."""
        if self._t is None:
            return math.nan
        if self.tau <= 0.0:
            return self._u
        return self._u + (self._y - self._u) * math.exp(-max(t - self._t, 0.0) / self.tau)

    def update(self, t: float, u: float) -> None:
        """A new command ``u`` [rad] stamped ``t`` [s]."""
        if self._t is None:
            self._y = float(u)
        elif t >= self._t:
            self._y = self.at(t)
        self._t, self._u = float(t), float(u)
