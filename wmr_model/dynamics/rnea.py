"""Inverse dynamics and bias force by the modified RNEA (Seegmiller 2014, Alg. 4; eq. 2.89).

Algorithm 4 computes the joint-space bias force ``c(q, qdot')`` of (2.53) as the inverse dynamics
at zero joint-space acceleration, with gravity entering as a fictitious base acceleration
``a_1 = -g`` (line 2). :func:`rnea` is the same recursion with a joint-space acceleration and
external forces, ``tau = M qddot' + c - sum_i J_i^T f_i^ext``, so that ``rnea(q, 0, e_k) -
rnea(q, 0, 0)`` is column ``k`` of ``M`` (the cross-check of Alg. 3 against Alg. 4).

The contact frames of Alg. 4 (indices nf+1..nf+nw) are massless; without external forces they
contribute nothing, so the recursion runs over the nf model frames and contact forces enter as
``A_wheel^T f_c`` (2.65) instead.

Spatial vectors are ``[angular; linear]`` (see :mod:`wmr_model.spatial`); the body's spatial
acceleration ``qddot'[0:6]`` is the time derivative of its body-coordinate velocity ``[w; v]``.
``gravity`` (3,) is the world-frame gravitational acceleration [m/s^2].
"""

from __future__ import annotations

import numpy as np

from wmr_model._jit import njit
from wmr_model.dynamics.crba import motion_subspace, parent_transforms
from wmr_model.kinematics.kernels import forward_kinematics
from wmr_model.spatial import (
    crf,
    crm,
    plucker_force_from_transform,
    plucker_from_transform,
    quat_to_rot,
    transform_inverse,
)

__all__ = ["GRAVITY", "rnea", "bias_force", "bias_force_fused"]

#: Standard gravity in world coordinates [m/s^2] (REP-103: z up).
GRAVITY = np.array([0.0, 0.0, -9.80665])


@njit
def rnea(parent, jtype, axis, T0, I_frame, gravity, q, qdot, qddot, f_ext, T_world, tau):
    """Recursive Newton-Euler inverse dynamics, Algorithm 4 with acceleration and f_ext.

    .. math::
        \\vec v_i = X_{p(i)}^i \\vec v_{p(i)} + S_i \\dot\\theta_i, \\quad
        \\vec a_i = X_{p(i)}^i \\vec a_{p(i)} + S_i \\ddot\\theta_i + \\vec v_i \\times_m
        S_i \\dot\\theta_i, \\quad
        \\vec f_i = I_i \\vec a_i + \\vec v_i \\times_f I_i \\vec v_i - \\vec f_i^{ext}

    with ``a_1 = qddot'[0:6] - [0; R_b^T g]`` (Alg. 4 line 2), then the backward pass
    ``tau_i = S_i . f_i``, ``f_p += (X_p^i)^T f_i`` (lines 12-16).

    Args:
        I_frame: (nf, 6, 6) per-frame spatial inertias about each frame origin (B.13).
        gravity: (3,) world gravitational acceleration.
        q: (nq,); qdot, qddot: (nv,).
        f_ext: (nf, 6) external spatial forces on each frame, in that frame's coordinates.
        T_world: (nf, 4, 4) written (Algorithm 1).
        tau: (nv,) output, the joint-space force.

    Returns:
        ``tau`` (nv,).
    """
    nf = parent.shape[0]
    forward_kinematics(parent, jtype, axis, T0, q, T_world)
    T_up = np.empty((nf, 4, 4))
    parent_transforms(parent, T_world, T_up)
    v = np.empty((nf, 6))
    a = np.empty((nf, 6))
    f = np.empty((nf, 6))
    Rb = T_world[0, :3, :3]
    gb = Rb.T @ gravity
    for r in range(3):
        v[0, r] = qdot[r]
        v[0, 3 + r] = qdot[3 + r]
        a[0, r] = qddot[r]
        a[0, 3 + r] = qddot[3 + r] - gb[r]
    S = np.empty(6)
    for i in range(1, nf):
        X = plucker_from_transform(transform_inverse(np.ascontiguousarray(T_up[i])))
        motion_subspace(jtype[i], axis[i], S)
        vJ = S * qdot[i + 5]
        v[i] = X @ v[parent[i]] + vJ
        a[i] = X @ a[parent[i]] + S * qddot[i + 5] + crm(v[i]) @ vJ
    for i in range(nf):
        Iv = I_frame[i] @ v[i]
        f[i] = I_frame[i] @ a[i] + crf(v[i]) @ Iv - f_ext[i]
    for i in range(nf - 1, 0, -1):
        motion_subspace(jtype[i], axis[i], S)
        tau[i + 5] = S @ f[i]
        f[parent[i]] += plucker_force_from_transform(np.ascontiguousarray(T_up[i])) @ f[i]
    for r in range(6):
        tau[r] = f[0, r]
    return tau


@njit
def bias_force(parent, jtype, axis, T0, I_frame, gravity, q, qdot, T_world, c):
    """Joint-space bias force ``c(q, qdot')`` (nv,), Algorithm 4: :func:`rnea` at zero accel."""
    nv = qdot.shape[0]
    return rnea(parent, jtype, axis, T0, I_frame, gravity, q, qdot, np.zeros(nv),
                np.zeros((parent.shape[0], 6)), T_world, c)


@njit
def bias_force_fused(Ic_body, gravity, q, qdot, c):
    """Approximate bias force treating the vehicle as one fused rigid body, (2.89).

    .. math:: \\mathbf c = [-I_b^c \\vec g + \\vec v_b \\times_f I_b^c \\vec v_b;\\ \\mathbf 0]

    ``Ic_body`` (6, 6) is the body composite inertia :math:`I_b^c` (Alg. 3 line 6) and ``\\vec g
    = [0; R_b^T g]`` the spatial gravitational acceleration, both in body coordinates. ``c`` (nv,)
    is written and returned.
    """
    Rb = quat_to_rot(q[0:4])
    g = np.zeros(6)
    g[3:] = Rb.T @ gravity
    vb = np.ascontiguousarray(qdot[0:6])
    top = -(Ic_body @ g) + crf(vb) @ (Ic_body @ vb)
    c[:] = 0.0
    c[0:6] = top
    return c
