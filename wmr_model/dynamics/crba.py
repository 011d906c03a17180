"""Joint-space inertia by the modified Composite Rigid Body Algorithm (Seegmiller 2014, Alg. 3).

.. math:: M(\\mathbf q) \\ddot{\\mathbf q}' + \\mathbf c(\\mathbf q, \\dot{\\mathbf q}')
   = \\boldsymbol\\tau \\qquad (2.53)

The mobile base is a 6-DOF "joint" whose velocity is the body's spatial velocity ``[w; v]`` in
body coordinates (2.14), so ``M[0:6, 0:6]`` is the body composite inertia (Alg. 3 line 6). Every
other frame has one revolute or prismatic joint about an arbitrary unit axis; its motion subspace
``S`` (the thesis' column ``s(i)``) is ``[axis; 0]`` or ``[0; axis]`` in the frame's own
coordinates, so the thesis' ``f(s(i))`` becomes ``S . f``.

Kernel argument names: ``parent, jtype, axis, T0`` model tree arrays (nf,), (nf,), (nf, 3),
(nf, 4, 4); ``I_frame`` (nf, 6, 6) per-frame spatial inertias (B.13) about each frame origin;
``q`` (nq,); ``T_world`` (nf, 4, 4) from Algorithm 1.
"""

from __future__ import annotations

import numpy as np

from wmr_model._jit import njit
from wmr_model.vehicles.inertia import (
    composite_from_transforms,
    composite_workspace,
    relative_transform,
)
from wmr_model.vehicles.model import REVOLUTE
from wmr_model.vehicles.tree import forward_kinematics

__all__ = ["motion_subspace", "relative_transforms", "force_to_parent", "crba", "crba_workspace",
           "crba_into"]


@njit(refcount=False)
def motion_subspace(jtype, axis, i, S):
    """Motion subspace ``S`` (6,) of frame ``i``'s single-DOF joint in its frame: ``[a; 0]``
    revolute, ``[0; a]`` prismatic, ``a = axis[i]`` (``jtype``, ``axis``: (nf,), (nf, 3)).

    Generalizes the thesis' spatial index ``s(i)`` (RX=1 ... PZ=6, Alg. 3-4) to any unit axis.
    """
    for r in range(6):
        S[r] = 0.0
    off = 0 if jtype[i] == REVOLUTE else 3
    S[off] = axis[i, 0]
    S[off + 1] = axis[i, 1]
    S[off + 2] = axis[i, 2]


@njit(refcount=False)
def relative_transforms(parent, T_world, R_up, p_up):
    """Rotation ``R_up`` (nf, 3, 3) and origin ``p_up`` (nf, 3) of each frame in its parent's
    coordinates, :math:`T_i^{p(i)} = (T_{p(i)}^w)^{-1} T_i^w = [R, p; 0, 1]` from Algorithm 1's
    world transforms (:func:`wmr_model.vehicles.inertia.relative_transform`, as the
    composite-inertia pass). Index 0 is left untouched."""
    for i in range(1, parent.shape[0]):
        relative_transform(T_world, parent[i], i, R_up[i], p_up[i])


@njit
def force_to_parent(R_up, p_up, j, f, fi, out, oi):
    """``out[oi]`` (6,) += the spatial force ``f[fi]`` (6,) of frame ``j`` expressed in its
    parent, (B.12): ``[R n + p x (R f_lin); R f_lin]`` with ``R = R_up[j]``, ``p = p_up[j]``
    (:func:`relative_transforms`), i.e. ``plucker_force_from_transform(T) @ f`` for
    ``T = [R, p; 0, 1]`` without forming the 6 x 6 matrix. ``f``, ``out``: (n, 6) rows; the
    arrays are indexed in place (no per-call views)."""
    f0, f1, f2, f3, f4, f5 = f[fi, 0], f[fi, 1], f[fi, 2], f[fi, 3], f[fi, 4], f[fi, 5]
    n0 = R_up[j, 0, 0] * f0 + R_up[j, 0, 1] * f1 + R_up[j, 0, 2] * f2
    n1 = R_up[j, 1, 0] * f0 + R_up[j, 1, 1] * f1 + R_up[j, 1, 2] * f2
    n2 = R_up[j, 2, 0] * f0 + R_up[j, 2, 1] * f1 + R_up[j, 2, 2] * f2
    l0 = R_up[j, 0, 0] * f3 + R_up[j, 0, 1] * f4 + R_up[j, 0, 2] * f5
    l1 = R_up[j, 1, 0] * f3 + R_up[j, 1, 1] * f4 + R_up[j, 1, 2] * f5
    l2 = R_up[j, 2, 0] * f3 + R_up[j, 2, 1] * f4 + R_up[j, 2, 2] * f5
    p0, p1, p2 = p_up[j, 0], p_up[j, 1], p_up[j, 2]
    out[oi, 0] += n0 + p1 * l2 - p2 * l1
    out[oi, 1] += n1 + p2 * l0 - p0 * l2
    out[oi, 2] += n2 + p0 * l1 - p1 * l0
    out[oi, 3] += l0
    out[oi, 4] += l1
    out[oi, 5] += l2


@njit
def crba_workspace(nf):
    """Scratch of :func:`crba_into`: ``(R_up (nf, 3, 3), p_up (nf, 3), S, Sj, fc (6,), fp (1, 6),
    composite_workspace)``. ``R_up``/``p_up`` hold the relative transforms of the last call,
    which the bias force (:func:`wmr_model.dynamics.rnea.bias_force_into`) reuses."""
    return (np.empty((nf, 3, 3)), np.empty((nf, 3)), np.empty(6), np.empty(6),
            np.empty((1, 6)), np.empty((1, 6)), composite_workspace())


@njit
def crba(parent, jtype, axis, T0, I_frame, q, T_world, Ic, M):
    """Joint-space inertia ``M`` (nv, nv), Algorithm 3 (modified CRBA): :func:`crba_into` with
    fresh scratch. Writes ``T_world`` (nf, 4, 4), ``Ic`` (nf, 6, 6) and ``M``; returns ``M``."""
    crba_into(parent, jtype, axis, T0, I_frame, q, T_world, Ic, M,
              crba_workspace(parent.shape[0]))
    return M


@njit(refcount=False)
def crba_into(parent, jtype, axis, T0, I_frame, q, T_world, Ic, M, ws):
    """Joint-space inertia ``M`` (nv, nv), Algorithm 3 (modified CRBA), in the scratch ``ws``
    of :func:`crba_workspace` (nothing allocated).

    Lines 1-4 (composite inertias) are :func:`wmr_model.vehicles.inertia.composite_inertias`
    (:func:`~wmr_model.vehicles.inertia.composite_from_transforms`, from the relative transforms
    of :func:`relative_transforms` that the walk needs too: the same numbers); lines
    5-22 walk from each joint to the body carrying the force ``f^c = I_i^c S_i`` needed to
    accelerate that joint alone by one unit, transforming it to each ancestor with
    :math:`(X_{p}^{i})^T` (B.12, :func:`force_to_parent`) and reading off ``S_j . f^c`` (line 18) or
    the whole 6-vector at the body (line 15).
    Line 12 as printed transforms with :math:`X_{p(i)}^i` at every level; the transform of the
    current frame *j* (:math:`X_{p(j)}^j`) is meant and used here.

    Writes ``T_world`` (nf, 4, 4), ``Ic`` (nf, 6, 6), ``M`` (nv, nv) and the relative transforms
    ``ws[0]``, ``ws[1]``; a refcount-free kernel (:mod:`wmr_model._jit`).
    """
    nf = parent.shape[0]
    R_up, p_up, S, Sj, fc, fp, cws = ws
    forward_kinematics(parent, jtype, axis, T0, q, T_world)
    # lines 1-4 from the relative transforms that lines 5-22 use too (each computed once)
    relative_transforms(parent, T_world, R_up, p_up)
    composite_from_transforms(parent, I_frame, R_up, p_up, Ic, cws)
    M[:, :] = 0.0
    for r in range(6):
        for k in range(6):
            M[r, k] = Ic[0, r, k]
    for i in range(1, nf):
        motion_subspace(jtype, axis, i, S)
        d = 0.0
        for r in range(6):
            acc = 0.0
            for k in range(6):
                acc += Ic[i, r, k] * S[k]
            fc[0, r] = acc
            d += S[r] * acc
        M[i + 5, i + 5] = d
        j = i
        while j > 0:
            for r in range(6):
                fp[0, r] = 0.0
            force_to_parent(R_up, p_up, j, fc, 0, fp, 0)
            for r in range(6):
                fc[0, r] = fp[0, r]
            j = parent[j]
            if j == 0:
                for r in range(6):
                    M[r, i + 5] = fc[0, r]
                    M[i + 5, r] = fc[0, r]
            else:
                motion_subspace(jtype, axis, j, Sj)
                d = 0.0
                for r in range(6):
                    d += Sj[r] * fc[0, r]
                M[j + 5, i + 5] = d
                M[i + 5, j + 5] = d
