"""Integration of the state: the Euler step (2.39) and the state derivative (2.14) in quaternion
form (Seegmiller 2014, §2.2.6; Appendix A for the quaternion).

``q`` (nq,) = [quaternion w x y z, position (3), joints (nj)]; ``qdot`` (nv,) = [body angular
velocity (3), body linear velocity (3), joint rates (nj)] in body coordinates.
"""

from __future__ import annotations

import math

import numpy as np

from wmr_model._jit import njit
from wmr_model.spatial import (
    quat_exp_body_into,
    quat_mul,
    quat_normalize_into,
    quat_rot_entries,
    quat_to_rot,
)

__all__ = [
    "integrate_euler", "state_derivative", "normalize_state", "rescale_quaternion",
]


@njit(refcount=False)
def integrate_euler(q, qdot, dt, q_next):
    """One Euler step of (2.39), ``q + V(q) qdot dt``, with a unit-quaternion orientation.

    The orientation row uses the exact exponential map for constant body angular velocity (no
    gimbal lock, norm preserved); position uses R_b at the start of the step, joints are linear.
    """
    quat_exp_body_into(q, qdot, dt, q_next)
    Rb = quat_rot_entries(q[0], q[1], q[2], q[3])
    v0, v1, v2 = qdot[3], qdot[4], qdot[5]
    for r in range(3):
        q_next[4 + r] = q[4 + r] + (Rb[3 * r] * v0 + Rb[3 * r + 1] * v1 + Rb[3 * r + 2] * v2) * dt
    for k in range(7, q.shape[0]):
        q_next[k] = q[k] + qdot[k - 1] * dt


@njit
def state_derivative(q, qdot, out):
    """Time derivative of the state, ``qdot_state = V(q) qdot`` (2.14), quaternion form.

    Orientation rate is ``0.5 * o * [0, w]``; position rate ``R_b v``; joint rates unchanged.
    """
    w = np.zeros(4)
    w[1:] = qdot[0:3]
    out[0:4] = 0.5 * quat_mul(q[0:4], w)
    out[4:7] = quat_to_rot(q[0:4]) @ qdot[3:6]
    out[7:] = qdot[6:]


@njit(refcount=False)
def normalize_state(q):
    """Renormalize the quaternion part of ``q`` in place (scalar part made non-negative)."""
    quat_normalize_into(q, q)


@njit(refcount=False)
def rescale_quaternion(q):
    """Scale the quaternion part of ``q`` to unit length in place, keeping its sign.

    For RK4 stage states: the stage derivatives are added to the step's start state, so they
    must be taken on the same sign of the quaternion (``o`` and ``-o`` are one attitude but
    ``0.5 o [0, w]`` flips with them). Flipping a stage state whose scalar part crossed zero
    (a yaw of +-pi about the start) cancels the stage derivatives and the attitude stalls.
    """
    n = math.sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3])
    for i in range(4):
        q[i] = q[i] / n
