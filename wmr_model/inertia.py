"""Spatial inertias of the vehicle's frames and their composites (Seegmiller 2014, Alg. 3, B.13).

The composite inertia :math:`I_i^c` of frame *i* is the spatial inertia of the subtree rooted at
*i* fused into one rigid body, expressed in frame *i* coordinates about its origin. The body's
composite :math:`I_b^c = I_1^c` is the whole vehicle as one rigid body for the current joint
configuration; enhanced kinematics (2.44) and the approximate bias force (2.89) use it, and the
CRBA (Algorithm 3) needs every :math:`I_i^c`.

Kernels (numba, loop form):

* :func:`frame_spatial_inertias` - (B.13) for every frame, once per model;
* :func:`composite_inertias` - the backward pass of Algorithm 3 (lines 1-4), from the world
  transforms of Algorithm 1;
* :func:`inertia_mass_com` - mass and centre of mass encoded in a spatial inertia.

Python entry point: :func:`composite_inertia` ``(model, q) -> (6, 6)``.
"""

from __future__ import annotations

import numpy as np

from wmr_model._jit import njit
from wmr_model.errors import ShapeError
from wmr_model.model import VehicleModel
from wmr_model.spatial import spatial_inertia

__all__ = [
    "frame_spatial_inertias",
    "composite_inertias",
    "composite_workspace",
    "relative_transform",
    "inertia_mass_com",
    "mass_com_into",
    "composite_inertia",
    "model_frame_inertias",
]


@njit
def frame_spatial_inertias(mass, com, inertia, out):
    """Spatial inertia of every frame about its own origin in its own coordinates, (B.13).

    ``mass`` (nf,), ``com`` (nf, 3), ``inertia`` (nf, 3, 3) about the com (model arrays);
    writes ``out`` (nf, 6, 6).
    """
    for i in range(mass.shape[0]):
        out[i] = spatial_inertia(mass[i], com[i], np.ascontiguousarray(inertia[i]))


@njit
def relative_transform(T_world, p, i, R, t):
    """Frame *i* in frame *p*'s coordinates, :math:`T_i^p = (T_p^w)^{-1} T_i^w = [R, t; 0, 1]`
    (B.3), from the world transforms ``T_world`` (nf, 4, 4); writes ``R`` (3, 3) and ``t`` (3,)
    without allocating."""
    for r in range(3):
        acc = 0.0
        for k in range(3):
            acc += T_world[p, k, r] * (T_world[i, k, 3] - T_world[p, k, 3])
        t[r] = acc
        for c in range(3):
            acc = 0.0
            for k in range(3):
                acc += T_world[p, k, r] * T_world[i, k, c]
            R[r, c] = acc


@njit
def composite_workspace():
    """Scratch of :func:`composite_inertias` (``Xf`` (6, 6), ``XI`` (6, 6), ``R`` (3, 3), ``t``
    (3,), a row accumulator (6,)), created once per trajectory by the simulation loops."""
    return (np.zeros((6, 6)), np.empty((6, 6)), np.empty((3, 3)), np.empty(3), np.empty(6))


@njit
def composite_inertias(parent, I_frame, T_world, Ic, ws=None):
    """Composite rigid-body inertias, the backward pass of Algorithm 3 (lines 1-4).

    .. math:: I_{p(i)}^c \\leftarrow I_{p(i)}^c + (X_{p(i)}^i)^T I_i^c X_{p(i)}^i

    ``(X_{p(i)}^i)^T`` is the force transform from frame *i* to its parent (B.12), built from
    :math:`T_i^{p(i)} = (T_{p(i)}^w)^{-1} T_i^w`.

    Args:
        parent: (nf,) parent indices, ``parent[i] < i``.
        I_frame: (nf, 6, 6) per-frame spatial inertias (:func:`frame_spatial_inertias`).
        T_world: (nf, 4, 4) frame-to-world transforms for the current state (Algorithm 1).
        Ic: (nf, 6, 6) output; ``Ic[i]`` in frame *i* coordinates about its origin.
        ws: optional scratch from :func:`composite_workspace` (allocated when omitted).

    Returns:
        ``Ic[0]``, the body composite :math:`I_b^c` (6, 6) in body coordinates.
    """
    if ws is None:
        return _composite_inertias(parent, I_frame, T_world, Ic, composite_workspace())
    return _composite_inertias(parent, I_frame, T_world, Ic, ws)


@njit
def _composite_inertias(parent, I_frame, T_world, Ic, ws):
    """:func:`composite_inertias` with its scratch ``ws``."""
    Xf, XI, R, t, acc = ws
    nf = parent.shape[0]
    for i in range(nf):
        Ic[i] = I_frame[i]
    for r in range(3):
        for c in range(3):
            Xf[3 + r, c] = 0.0
    for i in range(nf - 1, 0, -1):
        p = parent[i]
        # Xf = [[R, skew(t) R], [0, R]] (B.12) of T_i^p = [R, t; 0, 1], formed in place
        relative_transform(T_world, p, i, R, t)
        for r in range(3):
            for c in range(3):
                Xf[r, c] = R[r, c]
                Xf[3 + r, 3 + c] = R[r, c]
        for c in range(3):
            Xf[0, 3 + c] = t[1] * R[2, c] - t[2] * R[1, c]
            Xf[1, 3 + c] = t[2] * R[0, c] - t[0] * R[2, c]
            Xf[2, 3 + c] = t[0] * R[1, c] - t[1] * R[0, c]
        # XI = Xf Ic_i, then Ic_p += XI Xf^T, each entry summed from +0.0 over k ascending.
        # The terms with Xf's zero lower-left block are skipped: adding the exact zeros 0 * x
        # (x finite) would leave a sum that started at +0.0 unchanged, so the result is the
        # full product's bit for bit. Loops run k outside and columns c inside (contiguous rows,
        # the per-entry order of additions unchanged).
        for r in range(6):
            k0 = 0 if r < 3 else 3
            for c in range(6):
                XI[r, c] = 0.0
            for k in range(k0, 6):
                x = Xf[r, k]
                for c in range(6):
                    XI[r, c] += x * Ic[i, k, c]
        for r in range(6):
            for c in range(6):
                acc[c] = 0.0
            for k in range(3):
                x = XI[r, k]
                for c in range(3):
                    acc[c] += x * Xf[c, k]
            for k in range(3, 6):
                x = XI[r, k]
                for c in range(6):
                    acc[c] += x * Xf[c, k]
            for c in range(6):
                Ic[p, r, c] += acc[c]
    return Ic[0]


@njit
def inertia_mass_com(I):
    """Mass and centre of mass (3,) encoded in a spatial inertia (B.13).

    ``I[3:, 3:] = m I_3`` and ``I[:3, 3:] = m [c]_x``. Returns ``(m, c)``; ``c`` is zero when
    ``m == 0`` (a massless model has no centre of mass; callers treat it as the frame origin).
    """
    c = np.empty(3)
    return mass_com_into(I, c), c


@njit
def mass_com_into(I, c):
    """:func:`inertia_mass_com` writing the centre of mass into ``c`` (3,); returns ``m``."""
    m = I[5, 5]
    c[0] = 0.0
    c[1] = 0.0
    c[2] = 0.0
    if m > 0.0:
        c[0] = I[2, 4] / m
        c[1] = I[0, 5] / m
        c[2] = I[1, 3] / m
    return m


def model_frame_inertias(model: VehicleModel) -> np.ndarray:
    """(nf, 6, 6) per-frame spatial inertias of ``model`` (B.13), about each frame's origin."""
    out = np.empty((model.nf, 6, 6))
    frame_spatial_inertias(model.mass, model.com, model.inertia, out)
    return out


def composite_inertia(model: VehicleModel, q: np.ndarray, *,
                      out: np.ndarray | None = None) -> np.ndarray:
    """Composite inertia :math:`I_b^c` (6, 6) of the whole vehicle in body coordinates.

    Args:
        q: (nq,) state; only the joint displacements matter.
        out: optional (nf, 6, 6) array receiving every frame's composite inertia.

    Returns:
        (6, 6) spatial inertia about the body frame origin, in body coordinates.
    """
    from wmr_model.kinematics.kernels import forward_kinematics

    q = np.ascontiguousarray(q, dtype=float)
    if q.shape != (model.nq,):
        raise ShapeError(f"q: expected shape ({model.nq},) for {model.name}, got {q.shape}")
    if out is None:
        out = np.empty((model.nf, 6, 6))
    elif out.shape != (model.nf, 6, 6):
        raise ShapeError(f"out: expected shape ({model.nf}, 6, 6), got {out.shape}")
    T_world = np.empty((model.nf, 4, 4))
    forward_kinematics(model.parent, model.joint_type, model.axis, model.T0, q, T_world)
    return composite_inertias(model.parent, model_frame_inertias(model), T_world, out).copy()
