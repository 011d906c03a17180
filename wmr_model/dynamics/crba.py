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
from wmr_model.inertia import composite_inertias, relative_transform
from wmr_model.kinematics.kernels import forward_kinematics
from wmr_model.model import REVOLUTE

__all__ = ["motion_subspace", "relative_transforms", "force_to_parent", "crba"]


@njit
def motion_subspace(jtype, axis_i, S):
    """Motion subspace (6,) of a single-DOF joint in its frame: ``[a; 0]`` revolute, ``[0; a]``.

    Generalizes the thesis' spatial index ``s(i)`` (RX=1 ... PZ=6, Alg. 3-4) to any unit axis.
    """
    for r in range(6):
        S[r] = 0.0
    off = 0 if jtype == REVOLUTE else 3
    S[off] = axis_i[0]
    S[off + 1] = axis_i[1]
    S[off + 2] = axis_i[2]


@njit
def relative_transforms(parent, T_world, R_up, p_up):
    """Rotation ``R_up`` (nf, 3, 3) and origin ``p_up`` (nf, 3) of each frame in its parent's
    coordinates, :math:`T_i^{p(i)} = (T_{p(i)}^w)^{-1} T_i^w = [R, p; 0, 1]` from Algorithm 1's
    world transforms (:func:`wmr_model.inertia.relative_transform`, as the composite-inertia
    pass). Index 0 is left untouched."""
    for i in range(1, parent.shape[0]):
        relative_transform(T_world, parent[i], i, R_up[i], p_up[i])


@njit
def force_to_parent(R, p, f, out):
    """``out`` (6,) += the spatial force ``f`` (6,) of a frame expressed in its parent, (B.12):
    ``[R n + p x (R f_lin); R f_lin]``, i.e. ``plucker_force_from_transform(T) @ f`` for
    ``T = [R, p; 0, 1]`` without forming the 6 x 6 matrix."""
    n0 = R[0, 0] * f[0] + R[0, 1] * f[1] + R[0, 2] * f[2]
    n1 = R[1, 0] * f[0] + R[1, 1] * f[1] + R[1, 2] * f[2]
    n2 = R[2, 0] * f[0] + R[2, 1] * f[1] + R[2, 2] * f[2]
    l0 = R[0, 0] * f[3] + R[0, 1] * f[4] + R[0, 2] * f[5]
    l1 = R[1, 0] * f[3] + R[1, 1] * f[4] + R[1, 2] * f[5]
    l2 = R[2, 0] * f[3] + R[2, 1] * f[4] + R[2, 2] * f[5]
    out[0] += n0 + p[1] * l2 - p[2] * l1
    out[1] += n1 + p[2] * l0 - p[0] * l2
    out[2] += n2 + p[0] * l1 - p[1] * l0
    out[3] += l0
    out[4] += l1
    out[5] += l2


@njit
def crba(parent, jtype, axis, T0, I_frame, q, T_world, Ic, M):
    """Joint-space inertia ``M`` (nv, nv), Algorithm 3 (modified CRBA).

    Lines 1-4 (composite inertias) are :func:`wmr_model.inertia.composite_inertias`; lines 5-22
    walk from each joint to the body carrying the force ``f^c = I_i^c S_i`` needed to accelerate
    that joint alone by one unit, transforming it to each ancestor with :math:`(X_{p}^{i})^T`
    (B.12, :func:`force_to_parent`) and reading off ``S_j . f^c`` (line 18) or the whole 6-vector
    at the body (line 15).
    Line 12 as printed transforms with :math:`X_{p(i)}^i` at every level; the transform of the
    current frame *j* (:math:`X_{p(j)}^j`) is meant and used here.

    Writes ``T_world`` (nf, 4, 4), ``Ic`` (nf, 6, 6) and ``M`` (nv, nv); returns ``M``.
    """
    nf = parent.shape[0]
    forward_kinematics(parent, jtype, axis, T0, q, T_world)
    composite_inertias(parent, I_frame, T_world, Ic)
    R_up = np.empty((nf, 3, 3))
    p_up = np.empty((nf, 3))
    relative_transforms(parent, T_world, R_up, p_up)
    M[:, :] = 0.0
    M[0:6, 0:6] = Ic[0]
    S = np.empty(6)
    Sj = np.empty(6)
    fc = np.empty(6)
    fp = np.empty(6)
    for i in range(1, nf):
        motion_subspace(jtype[i], axis[i], S)
        for r in range(6):
            acc = 0.0
            for k in range(6):
                acc += Ic[i, r, k] * S[k]
            fc[r] = acc
        M[i + 5, i + 5] = S @ fc
        j = i
        while j > 0:
            fp[:] = 0.0
            force_to_parent(R_up[j], p_up[j], fc, fp)
            fc[:] = fp
            j = parent[j]
            if j == 0:
                for r in range(6):
                    M[r, i + 5] = fc[r]
                    M[i + 5, r] = fc[r]
            else:
                motion_subspace(jtype[j], axis[j], Sj)
                M[j + 5, i + 5] = Sj @ fc
                M[i + 5, j + 5] = M[j + 5, i + 5]
    return M
