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
from wmr_model.inertia import composite_inertias
from wmr_model.kinematics.kernels import forward_kinematics
from wmr_model.model import REVOLUTE
from wmr_model.spatial import plucker_force_from_transform, transform_inverse

__all__ = ["motion_subspace", "parent_transforms", "crba"]


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
def parent_transforms(parent, T_world, T_up):
    """Homogeneous transforms :math:`T_i^{p(i)}` (frame to parent) of every frame, (nf, 4, 4).

    Derived from Algorithm 1's world transforms as :math:`(T_{p(i)}^w)^{-1} T_i^w`, the same
    expression the composite-inertia pass uses, so both see identical Plücker transforms.
    ``T_up[0]`` is left untouched.
    """
    for i in range(1, parent.shape[0]):
        T_up[i] = transform_inverse(np.ascontiguousarray(T_world[parent[i]])) @ T_world[i]


@njit
def crba(parent, jtype, axis, T0, I_frame, q, T_world, Ic, M):
    """Joint-space inertia ``M`` (nv, nv), Algorithm 3 (modified CRBA).

    Lines 1-4 (composite inertias) are :func:`wmr_model.inertia.composite_inertias`; lines 5-22
    walk from each joint to the body carrying the force ``f^c = I_i^c S_i`` needed to accelerate
    that joint alone by one unit, transforming it to each ancestor with :math:`(X_{p}^{i})^T`
    (B.12) and reading off ``S_j . f^c`` (line 18) or the whole 6-vector at the body (line 15).
    Line 12 as printed transforms with :math:`X_{p(i)}^i` at every level; the transform of the
    current frame *j* (:math:`X_{p(j)}^j`) is meant and used here.

    Writes ``T_world`` (nf, 4, 4), ``Ic`` (nf, 6, 6) and ``M`` (nv, nv); returns ``M``.
    """
    nf = parent.shape[0]
    forward_kinematics(parent, jtype, axis, T0, q, T_world)
    composite_inertias(parent, I_frame, T_world, Ic)
    T_up = np.empty((nf, 4, 4))
    parent_transforms(parent, T_world, T_up)
    M[:, :] = 0.0
    M[0:6, 0:6] = Ic[0]
    S = np.empty(6)
    Sj = np.empty(6)
    for i in range(1, nf):
        motion_subspace(jtype[i], axis[i], S)
        fc = Ic[i] @ S
        M[i + 5, i + 5] = S @ fc
        j = i
        while j > 0:
            fc = plucker_force_from_transform(np.ascontiguousarray(T_up[j])) @ fc
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
