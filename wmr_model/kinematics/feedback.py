"""State feedback of the closed-loop vehicle controllers, for the compiled loops.

A closed-loop controller (:mod:`wmr_model.prediction.controllers`) turns a commanded body twist
into actuated joint rates from the state at the start of every step. Its part that depends on
the twist only (steer-angle targets, feed-forward wheel speeds) is computed for all steps before
the loop; the part that reads the state is :func:`feedback_rates`, evaluated at the start of
each step inside the prediction loop (:func:`wmr_model.kinematics.loops.predict_trajectory`)
and the dynamics loop (:func:`wmr_model.dynamics.simulate.simulate_loop`), and by
:func:`feedback_rates_batch` for the rates at given states
(:func:`wmr_model.prediction.controllers.controller_rates`). One implementation serves all, so
a prediction run in one call equals the same prediction stepped one call per step.

Laws (``delta_j = sign_j q[steer_j]``, the measured steer angle of axle ``j``, left positive;
``j(k)`` the axle steering wheel ``k``; wheel rates ``u_k = v_k / r_k``):

* :data:`PASSIVE_STEER` (Zoë's controller in the thesis' C++ library): the steer error turns
  the axle through the left/right wheel-speed difference,
  ``dv_j = clip(K (target_j - delta_j), -dv_max, dv_max)``,
  ``v_k = a_k - dv_j(k) sign_k`` (``a_k`` the feed-forward speed, ``sign_k`` the sign of the
  wheel's lateral offset from its pivot; unsteered wheels: ``v_k = a_k``);
* :data:`ACKERMANN`: steer joints at ``clip((target_j - delta_j) / dt, +-max_rate)``, wheels at
  their no-slip speed projected on the measured heading, ``v_k = a_k cos delta_j(k) +
  b_k sin delta_j(k)`` (``a_k = vx - wz y_k``, ``b_k = wz (x_k - x_rear)``).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from wmr_model._jit import njit
from wmr_model.errors import ParameterError, ShapeError

__all__ = ["NO_FEEDBACK", "PASSIVE_STEER", "ACKERMANN", "FeedbackLaw", "FeedbackInputs",
           "Feedback", "no_feedback", "no_feedback_inputs", "check_feedback", "feedback_rates",
           "feedback_command", "feedback_rates_batch"]

NO_FEEDBACK = 0
PASSIVE_STEER = 1
ACKERMANN = 2


class FeedbackLaw(NamedTuple):
    """The constants of a feedback law, shared by every candidate (kernel record).

    ``kind`` :data:`NO_FEEDBACK`, :data:`PASSIVE_STEER` or :data:`ACKERMANN`; ``actuated_v``
    (na,) joint-space velocity index of each actuated joint; ``steer_q`` (ns,) state index of
    each steer joint, ``steer_sign`` (ns,) +1 when a positive angle turns left, ``steer_col``
    (ns,) its actuated column or -1; ``wheel_col`` (nw,) actuated column of each wheel or -1,
    ``wheel_radius`` (nw,) [m], ``wheel_steer`` (nw,) the steer joint (index into ``steer_q``)
    of each wheel or -1, ``wheel_sign`` (nw,) sign of its lateral offset from its pivot;
    ``gain`` [m/s per rad], ``max_speed_difference`` [m/s] (passive steer),
    ``max_steer_rate`` [rad/s] and ``dt`` [s] (Ackermann).
    """

    kind: int
    actuated_v: np.ndarray
    steer_q: np.ndarray
    steer_sign: np.ndarray
    steer_col: np.ndarray
    wheel_col: np.ndarray
    wheel_radius: np.ndarray
    wheel_steer: np.ndarray
    wheel_sign: np.ndarray
    gain: float
    max_speed_difference: float
    max_steer_rate: float
    dt: float


class FeedbackInputs(NamedTuple):
    """The twist-only parts of a feedback law per step: ``target`` (T, ns) steer-angle targets
    [rad], ``a`` and ``b`` (T, nw) feed-forward wheel speed terms [m/s] (module docstring); in
    a batch with a leading axis N, or 1 when shared; (0, 0) per candidate without feedback."""

    target: np.ndarray
    a: np.ndarray
    b: np.ndarray


class Feedback(NamedTuple):
    """A closed-loop law with its per-step inputs: what a prediction needs to run a controller
    inside its compiled loop."""

    law: FeedbackLaw
    inputs: FeedbackInputs


def no_feedback(na: int = 0) -> FeedbackLaw:
    """The law of an open-loop run (the actuated rates are the commands)."""
    i = np.zeros(0, dtype=np.int64)
    f = np.zeros(0)
    return FeedbackLaw(NO_FEEDBACK, np.zeros(na, dtype=np.int64), i, f, i, i, f, i, f, 0.0, 0.0,
                       0.0, 0.0)


def no_feedback_inputs(batched: bool = True) -> FeedbackInputs:
    """Empty :class:`FeedbackInputs` (leading 1 when ``batched``)."""
    shape = (1, 0, 0) if batched else (0, 0)
    return FeedbackInputs(np.zeros(shape), np.zeros(shape), np.zeros(shape))


def check_feedback(feedback: Feedback, na: int, T: int, N: int | None = None) -> Feedback:
    """``feedback`` checked against a batch of ``N`` runs (None: any) of ``T`` steps of a model
    with ``na`` actuated joints, before the compiled loops index it (they do not check)."""
    law, fb = feedback
    if law.actuated_v.shape != (na,):
        raise ShapeError(f"feedback: the law has {law.actuated_v.shape[0]} actuated joints, "
                         f"the model {na}")
    ns, nw = law.steer_q.shape[0], law.wheel_col.shape[0]
    for name, a, width in (("target", fb.target, ns), ("a", fb.a, nw), ("b", fb.b, nw)):
        if a.ndim != 3 or a.shape[1:] != (T, width) or (N is not None and
                                                         a.shape[0] not in (1, N)):
            lead = "N" if N is None else f"1 or {N}"
            raise ShapeError(f"feedback.{name}: expected ({lead}, {T}, {width}), got {a.shape}")
        if not np.all(np.isfinite(a)):
            raise ParameterError(f"feedback.{name}: must be finite")
    return feedback


@njit(refcount=False)
def _steer_angle(c, q, j):
    """Measured steer angle of axle ``j`` [rad], left positive."""
    return q[c.steer_q[j]] * c.steer_sign[j]


@njit(refcount=False)
def feedback_rates(c, target, a, b, q, u):
    """Actuated joint rates ``u`` (na,) of the law ``c`` (:class:`FeedbackLaw`) at the state
    ``q`` from one step's ``target`` (ns,), ``a`` and ``b`` (nw,) (module docstring)."""
    for i in range(u.shape[0]):
        u[i] = 0.0
    for k in range(c.wheel_col.shape[0]):
        col = c.wheel_col[k]
        if col < 0:
            continue
        j = c.wheel_steer[k]
        if c.kind == PASSIVE_STEER:
            dv = 0.0
            if j >= 0:
                dv = min(max(c.gain * (target[j] - _steer_angle(c, q, j)),
                             -c.max_speed_difference), c.max_speed_difference)
            u[col] = (a[k] - dv * c.wheel_sign[k]) / c.wheel_radius[k]
        else:
            dk = _steer_angle(c, q, j) if j >= 0 else 0.0
            u[col] = (a[k] * math.cos(dk) + b[k] * math.sin(dk)) / c.wheel_radius[k]
    if c.kind == ACKERMANN:
        for j in range(c.steer_q.shape[0]):
            col = c.steer_col[j]
            if col >= 0:
                rate = min(max((target[j] - _steer_angle(c, q, j)) / c.dt, -c.max_steer_rate),
                           c.max_steer_rate)
                u[col] = rate * c.steer_sign[j]


@njit(refcount=False)
def feedback_command(c, target, a, b, q, qdot_cmd, u, cmd):
    """The step's commanded joint-space velocity ``cmd`` (nv,): ``qdot_cmd`` (nv,) with the
    actuated entries replaced by :func:`feedback_rates` at ``q`` (``u`` (na,) scratch)."""
    for i in range(cmd.shape[0]):
        cmd[i] = qdot_cmd[i]
    feedback_rates(c, target, a, b, q, u)
    for i in range(u.shape[0]):
        cmd[c.actuated_v[i]] = u[i]


@njit
def feedback_rates_batch(c, target, a, b, q, u):
    """:func:`feedback_rates` for N states: ``target`` (N, ns), ``a``, ``b`` (N, nw), ``q``
    (N, nq); writes ``u`` (N, na)."""
    for n in range(q.shape[0]):
        feedback_rates(c, target[n], a[n], b[n], q[n], u[n])
