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
from wmr_model.dynamics.crba import force_to_parent, motion_subspace, relative_transforms
from wmr_model.spatial import crf, quat_to_rot
from wmr_model.vehicles.tree import forward_kinematics

__all__ = ["rnea", "rnea_into", "rnea_workspace", "bias_force", "bias_force_into",
           "bias_force_fused"]


@njit
def _motion_to_child(R_up, p_up, i, m, mi, out, oi):
    """``out[oi]`` (6,) = the parent's motion vector ``m[mi]`` (6,) in the coordinates of child
    ``i``, (B.11): ``[R^T m_ang; R^T (m_lin + m_ang x p)]`` for the child's ``T = [R, p; 0, 1]``
    in its parent, ``R = R_up[i]``, ``p = p_up[i]`` (``plucker_from_transform(
    transform_inverse(T)) @ m`` without the 6 x 6 matrix or per-call views)."""
    m0, m1, m2 = m[mi, 0], m[mi, 1], m[mi, 2]
    u0 = m[mi, 3] + m1 * p_up[i, 2] - m2 * p_up[i, 1]
    u1 = m[mi, 4] + m2 * p_up[i, 0] - m0 * p_up[i, 2]
    u2 = m[mi, 5] + m0 * p_up[i, 1] - m1 * p_up[i, 0]
    for r in range(3):
        out[oi, r] = R_up[i, 0, r] * m0 + R_up[i, 1, r] * m1 + R_up[i, 2, r] * m2
        out[oi, 3 + r] = R_up[i, 0, r] * u0 + R_up[i, 1, r] * u1 + R_up[i, 2, r] * u2


@njit
def rnea_workspace(nf, nv):
    """Scratch of :func:`rnea_into`: ``(v, a, f (nf, 6), S, Iv (6,), zero accelerations (nv,),
    zero external forces (nf, 6))``."""
    return (np.empty((nf, 6)), np.empty((nf, 6)), np.empty((nf, 6)), np.empty(6), np.empty(6),
            np.zeros(nv), np.zeros((nf, 6)))


@njit
def rnea(m, I_frame, gravity, q, qdot, qddot, f_ext, T_world, tau):
    """Recursive Newton-Euler inverse dynamics, Algorithm 4 with acceleration and f_ext.

    .. math::
        \\vec v_i = X_{p(i)}^i \\vec v_{p(i)} + S_i \\dot\\theta_i, \\quad
        \\vec a_i = X_{p(i)}^i \\vec a_{p(i)} + S_i \\ddot\\theta_i + \\vec v_i \\times_m
        S_i \\dot\\theta_i, \\quad
        \\vec f_i = I_i \\vec a_i + \\vec v_i \\times_f I_i \\vec v_i - \\vec f_i^{ext}

    with ``a_1 = qddot'[0:6] - [0; R_b^T g]`` (Alg. 4 line 2), then the backward pass
    ``tau_i = S_i . f_i``, ``f_p += (X_p^i)^T f_i`` (lines 12-16). Forward kinematics and the
    relative transforms are computed here; :func:`rnea_into` takes them from the CRBA.

    Args:
        m: the tree (``parent``, ``jtype``, ``axis``, ``T0``) of a
            :class:`~wmr_model.vehicles.model.KernelModel`.
        I_frame: (nf, 6, 6) per-frame spatial inertias about each frame origin (B.13).
        gravity: (3,) world gravitational acceleration.
        q: (nq,); qdot, qddot: (nv,).
        f_ext: (nf, 6) external spatial forces on each frame, in that frame's coordinates.
        T_world: (nf, 4, 4) written (Algorithm 1).
        tau: (nv,) output, the joint-space force.

    Returns:
        ``tau`` (nv,).
    """
    nf = m.parent.shape[0]
    forward_kinematics(m.parent, m.jtype, m.axis, m.T0, q, T_world)
    R_up = np.empty((nf, 3, 3))
    p_up = np.empty((nf, 3))
    relative_transforms(m.parent, T_world, R_up, p_up)
    rnea_into(m, I_frame, gravity, qdot, qddot, f_ext, T_world, (R_up, p_up), tau,
              rnea_workspace(nf, qdot.shape[0]))
    return tau


@njit(refcount=False)
def rnea_into(m, I_frame, gravity, qdot, qddot, f_ext, T_world, up, tau, ws):
    """:func:`rnea` at the state whose world transforms ``T_world`` (nf, 4, 4) and relative
    transforms ``up = (R_up (nf, 3, 3), p_up (nf, 3))`` are given (as the CRBA leaves them,
    :func:`wmr_model.dynamics.crba.crba_into`), in the scratch ``ws`` of
    :func:`rnea_workspace` (nothing allocated). Writes ``tau`` (nv,); a refcount-free kernel
    (:mod:`wmr_model._jit`)."""
    parent, jtype, axis = m.parent, m.jtype, m.axis
    R_up, p_up = up
    nf = parent.shape[0]
    v, a, f, S, Iv, _, _ = ws
    for r in range(3):
        gb = 0.0  # R_b^T g
        for k in range(3):
            gb += T_world[0, k, r] * gravity[k]
        v[0, r] = qdot[r]
        v[0, 3 + r] = qdot[3 + r]
        a[0, r] = qddot[r]
        a[0, 3 + r] = qddot[3 + r] - gb
    for i in range(1, nf):
        motion_subspace(jtype, axis, i, S)
        pi = parent[i]
        _motion_to_child(R_up, p_up, i, v, pi, v, i)
        _motion_to_child(R_up, p_up, i, a, pi, a, i)
        qd = qdot[i + 5]
        for r in range(6):
            v[i, r] += S[r] * qd
            a[i, r] += S[r] * qddot[i + 5]
        # v_i x_m (S qd): [w x sw; w x sv + v_lin x sw] qd
        w0, w1, w2, l0, l1, l2 = v[i, 0], v[i, 1], v[i, 2], v[i, 3], v[i, 4], v[i, 5]
        sw0, sw1, sw2, sv0, sv1, sv2 = S[0] * qd, S[1] * qd, S[2] * qd, S[3] * qd, S[4] * qd, \
            S[5] * qd
        a[i, 0] += w1 * sw2 - w2 * sw1
        a[i, 1] += w2 * sw0 - w0 * sw2
        a[i, 2] += w0 * sw1 - w1 * sw0
        a[i, 3] += w1 * sv2 - w2 * sv1 + l1 * sw2 - l2 * sw1
        a[i, 4] += w2 * sv0 - w0 * sv2 + l2 * sw0 - l0 * sw2
        a[i, 5] += w0 * sv1 - w1 * sv0 + l0 * sw1 - l1 * sw0
    for i in range(nf):
        for r in range(6):
            acc_v = 0.0
            acc_a = 0.0
            for k in range(6):
                acc_v += I_frame[i, r, k] * v[i, k]
                acc_a += I_frame[i, r, k] * a[i, k]
            Iv[r] = acc_v
            f[i, r] = acc_a - f_ext[i, r]
        # v_i x_f (I_i v_i): [w x n + v_lin x f_lin; w x f_lin]
        w0, w1, w2, l0, l1, l2 = v[i, 0], v[i, 1], v[i, 2], v[i, 3], v[i, 4], v[i, 5]
        f[i, 0] += w1 * Iv[2] - w2 * Iv[1] + l1 * Iv[5] - l2 * Iv[4]
        f[i, 1] += w2 * Iv[0] - w0 * Iv[2] + l2 * Iv[3] - l0 * Iv[5]
        f[i, 2] += w0 * Iv[1] - w1 * Iv[0] + l0 * Iv[4] - l1 * Iv[3]
        f[i, 3] += w1 * Iv[5] - w2 * Iv[4]
        f[i, 4] += w2 * Iv[3] - w0 * Iv[5]
        f[i, 5] += w0 * Iv[4] - w1 * Iv[3]
    for i in range(nf - 1, 0, -1):
        motion_subspace(jtype, axis, i, S)
        t = 0.0
        for r in range(6):
            t += S[r] * f[i, r]
        tau[i + 5] = t
        force_to_parent(R_up, p_up, i, f, i, f, parent[i])
    for r in range(6):
        tau[r] = f[0, r]


@njit
def bias_force(m, I_frame, gravity, q, qdot, T_world, c):
    """Joint-space bias force ``c(q, qdot')`` (nv,), Algorithm 4: :func:`rnea` at zero accel."""
    nv = qdot.shape[0]
    return rnea(m, I_frame, gravity, q, qdot, np.zeros(nv), np.zeros((m.parent.shape[0], 6)),
                T_world, c)


@njit(refcount=False)
def bias_force_into(m, I_frame, gravity, qdot, T_world, up, c, ws):
    """:func:`bias_force` reusing the CRBA's forward kinematics and relative transforms ``up =
    (R_up, p_up)`` (:func:`rnea_into` at zero acceleration and external force; ``ws`` from
    :func:`rnea_workspace`, whose zero arrays are never written). Writes ``c`` (nv,) and
    returns nothing, so that refcount-free kernels may call it (:mod:`wmr_model._jit`)."""
    rnea_into(m, I_frame, gravity, qdot, ws[5], ws[6], T_world, up, c, ws)


@njit
def bias_force_fused(Ic_body, gravity, q, qdot, c):
    """Approximate bias force treating the vehicle as one fused rigid body, (2.89).

    .. math:: \\mathbf c = [-I_b^c \\vec g + \\vec v_b \\times_f I_b^c \\vec v_b;\\ \\mathbf 0]

    ``Ic_body`` (6, 6) is the body composite inertia :math:`I_b^c` (Alg. 3 line 6) and ``\\vec g
    = [0; R_b^T g]`` the spatial gravitational acceleration, both in body coordinates. ``c`` (nv,)
    is written (nothing is returned, so that refcount-free kernels may call it).
    """
    Rb = quat_to_rot(q[0:4])
    g = np.zeros(6)
    g[3:] = Rb.T @ gravity
    vb = np.ascontiguousarray(qdot[0:6])
    top = -(Ic_body @ g) + crf(vb) @ (Ic_body @ vb)
    c[:] = 0.0
    c[0:6] = top
