"""Symplectic Euler integration of the dynamics (Seegmiller 2014, eqs. 2.85-2.86)."""

from __future__ import annotations

from wmr_model._jit import njit
from wmr_model.kinematics.integrate import integrate_euler

__all__ = ["symplectic_euler"]


@njit(refcount=False)
def symplectic_euler(q, qdot_next, dt, q_next):
    """State update with the *new* velocity, (2.86): ``q[i+1] = q[i] + V(q[i]) qdot'[i+1] dt``.

    The velocity update (2.85) ``qdot'[i+1] = qdot'[i] + qddot' dt`` is done by the force
    balance (2.83); this applies the kinematic Euler step of (2.39) (exact quaternion exponential
    for the orientation) to ``qdot_next`` (nv,). Writes ``q_next`` (nq,).
    """
    integrate_euler(q, qdot_next, dt, q_next)
