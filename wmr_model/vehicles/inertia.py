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
* :func:`fold_spinning_leaves` and :func:`body_composite_inertia` - the body's composite
  :math:`I_b^c` alone, faster: the frames whose inertia their joint's motion cannot change (a
  rigid, axisymmetric wheel spinning about its axis) are merged into their parents once per
  model, and :func:`composite_inertias` runs on the remaining (reduced) tree;
* :func:`inertia_mass_com` - mass and centre of mass encoded in a spatial inertia.

Python entry point: :func:`composite_inertia` ``(model, q) -> (6, 6)``.
"""

from __future__ import annotations

import numpy as np

from wmr_model._jit import njit
from wmr_model.errors import ParameterError, ShapeError
from wmr_model.spatial import STANDARD_GRAVITY, rot_axis_angle, spatial_inertia
from wmr_model.vehicles.model import REVOLUTE, VehicleModel
from wmr_model.vehicles.tree import forward_kinematics

__all__ = [
    "frame_spatial_inertias",
    "composite_inertias",
    "composite_workspace",
    "fold_spinning_leaves",
    "body_composite_inertia",
    "body_composite_inertia_into",
    "composite_inertias_into",
    "composite_from_transforms",
    "add_child_inertia",
    "relative_transform",
    "inertia_mass_com",
    "mass_com_into",
    "composite_inertia",
    "model_frame_inertias",
    "GRAVITY",
    "gravity_of",
]

#: Standard gravity in world coordinates [m/s^2] (REP-103: z up).
GRAVITY = np.array([0.0, 0.0, -STANDARD_GRAVITY])


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
    """Scratch of :func:`composite_inertias` (``R`` (3, 3), ``t`` (3,), ``RA`` (3, 3), ``g``
    (3,)), created once per trajectory by the simulation loops."""
    return (np.empty((3, 3)), np.empty(3), np.empty((3, 3)), np.empty(3))


@njit
def composite_inertias(parent, I_frame, T_world, Ic, ws=None):
    """Composite rigid-body inertias, the backward pass of Algorithm 3 (lines 1-4).

    .. math:: I_{p(i)}^c \\leftarrow I_{p(i)}^c + (X_{p(i)}^i)^T I_i^c X_{p(i)}^i

    ``(X_{p(i)}^i)^T`` is the force transform from frame *i* to its parent (B.12), built from
    :math:`T_i^{p(i)} = (T_{p(i)}^w)^{-1} T_i^w`; the product is evaluated for the structure
    of a spatial inertia (:func:`add_child_inertia`).

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
        composite_inertias_into(parent, I_frame, T_world, Ic, composite_workspace())
    else:
        composite_inertias_into(parent, I_frame, T_world, Ic, ws)
    return Ic[0]


@njit(refcount=False)
def _copy_inertias(I_frame, Ic):
    """``Ic[:] = I_frame`` (nf, 6, 6) without a temporary: the start of the backward pass."""
    for i in range(I_frame.shape[0]):
        for r in range(6):
            for c in range(6):
                Ic[i, r, c] = I_frame[i, r, c]


@njit(refcount=False)
def composite_inertias_into(parent, I_frame, T_world, Ic, ws):
    """:func:`composite_inertias` with its scratch ``ws``, writing ``Ic`` only."""
    R, t, RA, g = ws
    nf = parent.shape[0]
    _copy_inertias(I_frame, Ic)
    for i in range(nf - 1, 0, -1):
        p = parent[i]
        relative_transform(T_world, p, i, R, t)
        add_child_inertia(Ic, i, p, R, t, RA, g)


@njit(refcount=False)
def composite_from_transforms(parent, I_frame, R_up, p_up, Ic, ws):
    """:func:`composite_inertias_into` from each frame's rotation ``R_up`` (nf, 3, 3) and
    origin ``p_up`` (nf, 3) in its parent's coordinates (:func:`relative_transform` of every
    frame, as the CRBA keeps them): the same operations on the same numbers."""
    RA, g = ws[2], ws[3]
    nf = parent.shape[0]
    _copy_inertias(I_frame, Ic)
    for i in range(nf - 1, 0, -1):
        add_child_inertia(Ic, i, parent[i], R_up[i], p_up[i], RA, g)


@njit(refcount=False)
def add_child_inertia(Ic, i, p, R, t, RA, g):
    """``Ic[p] += (X_p^i)^T Ic[i] X_p^i`` for child frame *i* at ``[R, t; 0, 1]`` in frame *p*'s
    coordinates (Alg. 3 line 3 with the force transform (B.12)), written for the structure of a
    spatial inertia instead of as a 6 x 6 product.

    A spatial inertia about a frame's origin is ``[[A, [h]x], [[h]x^T, m 1]]`` (B.13: ``A`` the
    rotational inertia about the origin, ``h = m c`` the first moment). With the rotation ``R``
    orthonormal the product is again one, with mass ``m``, first moment ``g = R h + m t`` and

    .. math:: A' = R A R^T - (R h) t^T - t (R h)^T - m t t^T
              + (2 t \\cdot R h + m t \\cdot t) 1

    (from ``[a]x [b]x = b a^T - (a . b) 1``): about 100 multiply-adds against about 320 for the
    6 x 6 product, and ``A'`` is symmetric by construction (its upper triangle is mirrored).
    ``m``, ``h`` and ``A`` are read from ``Ic[i]`` (the top-left block and the upper-right
    ``[h]x``), so it must have that structure, as every inertia of the model has (B.13 and
    these sums). It differs from the 6 x 6 product by round-off (``R R^T = 1`` is used exactly;
    ``test_inertia.py`` bounds the difference). ``RA`` (3, 3) and ``g`` (3,) are scratch.
    """
    m = Ic[i, 3, 3]
    h0 = Ic[i, 2, 4]
    h1 = Ic[i, 0, 5]
    h2 = Ic[i, 1, 3]
    for r in range(3):  # R h, R A
        g[r] = R[r, 0] * h0 + R[r, 1] * h1 + R[r, 2] * h2
        for c in range(3):
            RA[r, c] = R[r, 0] * Ic[i, 0, c] + R[r, 1] * Ic[i, 1, c] + R[r, 2] * Ic[i, 2, c]
    t0, t1, t2 = t[0], t[1], t[2]
    diag = 2.0 * (t0 * g[0] + t1 * g[1] + t2 * g[2]) + m * (t0 * t0 + t1 * t1 + t2 * t2)
    for r in range(3):
        for c in range(r, 3):
            a = (RA[r, 0] * R[c, 0] + RA[r, 1] * R[c, 1] + RA[r, 2] * R[c, 2]
                 - (g[r] * t[c] + t[r] * g[c]) - m * t[r] * t[c])
            if r == c:
                Ic[p, r, r] += a + diag
            else:
                Ic[p, r, c] += a
                Ic[p, c, r] += a
    for r in range(3):  # g = R h + m t: the first moment about p's origin
        g[r] += m * t[r]
    # [g]x in the upper-right block (row r: -g[k] in column j, +g[j] in column k, for the
    # cyclic successors j, k of r), its transpose in the lower-left, m 1 in the lower-right
    for r in range(3):
        j = (r + 1) % 3
        k = (r + 2) % 3
        Ic[p, r, 3 + j] -= g[k]
        Ic[p, r, 3 + k] += g[j]
        Ic[p, 3 + j, r] -= g[k]
        Ic[p, 3 + k, r] += g[j]
        Ic[p, 3 + r, 3 + r] += m


# A frame's spatial inertia counts as unchanged by its joint's rotation when every entry of the
# rotated inertia is within this fraction of its largest entry (round-off of the rotation).
FOLD_RTOL = 1e-12


@njit
def _child_inertia_in_parent(I_child, R, t, ws):
    """``(X_p^i)^T I_child X_p^i`` (6, 6) for a child frame at ``[R, t; 0, 1]`` in its parent's
    coordinates: :func:`add_child_inertia` into a massless parent (``ws`` from
    :func:`composite_workspace`)."""
    Ic = np.zeros((2, 6, 6))
    Ic[1] = I_child
    add_child_inertia(Ic, 1, 0, R, t, ws[2], ws[3])
    return Ic[0].copy()


@njit
def fold_spinning_leaves(parent, jtype, axis, T0, I_frame):
    """Merge each frame that its joint's motion cannot change into its parent, once per model.

    A leaf frame *i* (no children) on a revolute joint whose spatial inertia is invariant under
    rotation about the joint axis (a rigid wheel with its centre of mass on the spin axis and
    equal moments about the other two axes, or a massless frame) adds the same
    :math:`(X_{p(i)}^i)^T I_i X_{p(i)}^i` to its parent at every joint angle: the one at zero
    displacement, :math:`T_i^{p(i)} = T0_i` (Algorithm 1). Invariance is tested at two joint
    angles to :data:`FOLD_RTOL`.

    Returns the reduced tree ``(keep, parent_k, I_k)``: the kept frames' indices (nk,) in
    increasing order (the body first), their parents as positions in ``keep`` (nk,) and their
    inertias with the folded children added (nk, 6, 6). :func:`body_composite_inertia` runs
    :func:`composite_inertias` on it.
    """
    nf = parent.shape[0]
    ws = composite_workspace()
    leaf = np.ones(nf, dtype=np.bool_)
    for i in range(1, nf):
        leaf[parent[i]] = False
    folded = np.zeros(nf, dtype=np.bool_)
    I_fold = I_frame.copy()
    zero = np.zeros(3)
    for i in range(1, nf):
        if not leaf[i] or jtype[i] != REVOLUTE:
            continue
        scale = 0.0
        for r in range(6):
            for c in range(6):
                scale = max(scale, abs(I_frame[i, r, c]))
        invariant = True
        for angle in (1.0, 2.5):
            rotated = _child_inertia_in_parent(
                I_frame[i], rot_axis_angle(np.ascontiguousarray(axis[i]), angle), zero, ws)
            for r in range(6):
                for c in range(6):
                    if abs(rotated[r, c] - I_frame[i, r, c]) > FOLD_RTOL * scale:
                        invariant = False
        if invariant:
            I_fold[parent[i]] += _child_inertia_in_parent(
                I_frame[i], np.ascontiguousarray(T0[i, :3, :3]),
                np.ascontiguousarray(T0[i, :3, 3]), ws)
            folded[i] = True
    nk = nf - int(folded.sum())
    keep = np.empty(nk, dtype=np.int64)
    position = np.full(nf, -1, dtype=np.int64)
    j = 0
    for i in range(nf):
        if not folded[i]:
            keep[j] = i
            position[i] = j
            j += 1
    parent_k = np.empty(nk, dtype=np.int64)
    I_k = np.empty((nk, 6, 6))
    for j in range(nk):
        parent_k[j] = -1 if j == 0 else position[parent[keep[j]]]
        I_k[j] = I_fold[keep[j]]
    return keep, parent_k, I_k


@njit
def body_composite_inertia(keep, parent_k, I_k, T_world, T_k, Ic_k, ws):
    """The body composite :math:`I_b^c` (6, 6) on the reduced tree of
    :func:`fold_spinning_leaves`: the kept frames' world transforms are gathered into ``T_k``
    (nk, 4, 4), then :func:`composite_inertias` (``Ic_k`` (nk, 6, 6), ``ws`` its scratch).
    Equals ``composite_inertias(...)[0]`` of the whole tree to round-off (the folded frames'
    terms are formed once, at zero joint displacement, and summed in another order).
    """
    body_composite_inertia_into(keep, parent_k, I_k, T_world, T_k, Ic_k, ws)
    return Ic_k[0]


@njit(refcount=False)
def body_composite_inertia_into(keep, parent_k, I_k, T_world, T_k, Ic_k, ws):
    """:func:`body_composite_inertia` writing ``Ic_k`` only (``Ic_k[0]`` is the result)."""
    for j in range(keep.shape[0]):
        i = keep[j]
        for r in range(4):
            for c in range(4):
                T_k[j, r, c] = T_world[i, r, c]
    composite_inertias_into(parent_k, I_k, T_k, Ic_k, ws)


@njit
def inertia_mass_com(I):
    """Mass and centre of mass (3,) encoded in a spatial inertia (B.13).

    ``I[3:, 3:] = m I_3`` and ``I[:3, 3:] = m [c]_x``. Returns ``(m, c)``; ``c`` is zero when
    ``m == 0`` (a massless model has no centre of mass; callers treat it as the frame origin).
    """
    c = np.empty(3)
    return mass_com_into(I, c), c


@njit(refcount=False)
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


def gravity_of(model: VehicleModel) -> np.ndarray:
    """World gravity (3,) of ``model``: ``options["gravity"]`` or :data:`GRAVITY`."""
    g = model.options.get("gravity", GRAVITY)
    try:
        g = np.asarray(g, dtype=float).reshape(3)
    except (TypeError, ValueError):
        raise ParameterError(
            f"{model.source}: options.gravity must be 3 numbers [m/s^2], got {g!r}") from None
    if not np.all(np.isfinite(g)):
        raise ParameterError(f"{model.source}: options.gravity must be finite, got {g.tolist()}")
    return g


def composite_inertia(model: VehicleModel, q: np.ndarray, *,
                      out: np.ndarray | None = None) -> np.ndarray:
    """Composite inertia :math:`I_b^c` (6, 6) of the whole vehicle in body coordinates.

    Args:
        q: (nq,) state; only the joint displacements matter.
        out: optional (nf, 6, 6) array receiving every frame's composite inertia.

    Returns:
        (6, 6) spatial inertia about the body frame origin, in body coordinates.
    """
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
