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
           "LagFilter", "SteerAngles", "with_steer_angles"]

#: How a steering joint's angle is known (module docstring).
STEER_SOURCES = ("measured", "commanded")

#: a commanded joint's lag is followed this many time constants back before a query window:
#: the start-up transient has decayed to e^-40 (4e-18) of a command step by then, below double
#: precision, so a live node (which keeps this history) and a replay of its bag give the same
#: angles to round-off however much of the log each has seen
_LAG_HISTORY = 40.0


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


class SteerAngles:
    """The steering angles of a live stream (the nodes' steering topic): :meth:`add` each
    JointState sample, :meth:`at` gives every known joint's angle at a stamp - a measured angle
    on the line through its last two samples (extrapolated over at most one sample period,
    held before the first), a commanded one followed with its lag over the commands of the
    last seconds (:func:`lagged_command`).

    Args:
        inputs: steering joint -> :class:`SteerInput` (:func:`steer_inputs`).
    """

    #: [s] commands kept beyond the lag's own history (stamps a reorder window holds back)
    KEEP = 5.0
    #: [s] a sample stamped this far before the newest one starts a new time base
    JUMP = 1.0

    def __init__(self, inputs: Mapping[str, SteerInput]) -> None:
        self.inputs = dict(inputs)
        self._last: dict[str, list[tuple[float, float]]] = {}

    def add(self, stamp: float, names: Any, positions: Any) -> int:
        """Take the steering joints' finite positions of one sample; returns how many."""
        n = 0
        for name, p in zip(names, positions):
            if name not in self.inputs or not math.isfinite(float(p)):
                continue
            t = float(stamp)
            hist = self._last.setdefault(name, [])
            if hist and t < hist[-1][0] - self.JUMP:
                hist.clear()  # the stamps went back (a bag loop, a clock reset): start again
            if hist and t <= hist[-1][0]:
                continue
            hist.append((t, float(p)))
            si = self.inputs[name]
            if si.source == "commanded":  # the lag's history, plus what a reorder may hold
                while hist and hist[0][0] < t - _LAG_HISTORY * si.lag - self.KEEP:
                    hist.pop(0)
            else:
                del hist[:-2]
            n += 1
        return n

    def at(self, stamp: float) -> dict[str, float]:
        """Angle [rad] of every steering joint seen so far at ``stamp`` [s]; a commanded one
        is the offline :func:`lagged_command` of the commands received (those stamped after
        ``stamp`` do not act on it), so a live node and a replay of its bag agree."""
        out = {}
        for name, hist in self._last.items():
            si = self.inputs[name]
            if si.source == "commanded":
                t, u = np.array(hist).T
                out[name] = float(lagged_command(t, u, si.lag, np.array([float(stamp)]))[0])
                continue
            t1, p1 = hist[-1]
            if len(hist) < 2:
                out[name] = p1
                continue
            t0, p0 = hist[0]
            span = t1 - t0
            x = min(max(float(stamp), t0), t1 + span)  # at most one period beyond the last
            out[name] = p0 + (p1 - p0) * (x - t0) / span
        return out

    def reset(self) -> None:
        """Forget every sample (a time jump)."""
        self._last = {}


def with_steer_angles(names: Any, positions: Any, velocities: Any,
                      angles: Mapping[str, float]) -> tuple[list[str], np.ndarray, np.ndarray]:
    """An encoder sample ``(names, positions, velocities)`` (arrays empty when not provided)
    with the steering ``angles`` [rad] set: each joint's position becomes its angle and its
    velocity NaN (differentiated by the odometry), appended when the sample lacks the joint,
    replaced when it carries it (a commanded angle is the lagged one, not the raw command).
    NaN angles (no sample yet) are left out."""
    names = list(names)
    n = len(names)
    pos = np.asarray(positions, dtype=float).reshape(-1)
    vel = np.asarray(velocities, dtype=float).reshape(-1)
    use = {j: a for j, a in angles.items() if math.isfinite(a)}
    if not use:
        return names, pos, vel
    pos = pos.copy() if pos.size == n else np.full(n, np.nan)
    vel = vel.copy() if vel.size == n else np.full(n, np.nan)
    for j, a in use.items():
        if j in names:
            k = names.index(j)
            pos[k], vel[k] = a, np.nan
        else:
            names.append(j)
            pos, vel = np.append(pos, a), np.append(vel, np.nan)
    return names, pos, vel
