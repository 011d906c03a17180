"""Warm-started wheel-terrain collision detection for W lanes, float32, (2.8)-(2.9).

The lane form of :func:`wmr_model.kinematics.wheel_collision.wheel_contact_into` with a warm
workspace (Seegmiller 2014, §2.2.3): per wheel and lane the contact angle δ on the wheel circle
minimizing the contact height error Δz (2.8) and the contact frame there (Figure 2.3, (2.9)).
Every lane makes the scalar kernel's decisions, with its comparisons in its order:

* warm start (has-previous flag set and the wheel centre within WARM_CONTACT_MAX_TRAVEL wheel
  radii of where its last fan search ran): the bracket ``(δ - h, δ, δ + h)`` about the previous
  angle, slid downhill at most WARM_CONTACT_MAX_WALK times, then, when the centre is the lowest
  of the three, one parabolic fit (``_bracket_fit``, which keeps the centre when the fitted
  point is higher);
* otherwise (first call, travelled too far, minimum not bracketed) the full fan search
  (``_wheel_fan``: the normal under the centre, CONTACT_FAN_POINTS points, the lowest kept as
  its loop keeps it, a parabolic fit) and the same fine fit. The scalar search leaves out fan
  points that cannot be the lowest (FAN_BOUND_RTOL), with the same result as evaluating them;
  here every point is evaluated.

Vectorization. The kernel is a sequence of loops over lanes (``for l in range(W)``) with
straight-line bodies. A terrain lookup on a GRID, the core of every Δz, is split in three: cell
indices and fractions for all lanes (vectorized), the gather of the cells' grid nodes into
float32 scratch (a plain scalar loop over the lanes that need it: this CPU has no usable gather
instructions, and the separate loop lets the others vectorize), then the bilinear height and
the normal (vectorized). The bracket walk is masked: each slide looks up its new end point only
for the lanes that move (their indices compacted for the gather) and the walk stops when no
lane moves; a lane that does not move keeps its bracket, so it would not move later either, as
the scalar loop's ``break``. The lanes that need the fan search, of all wheels, are compacted
into a second block of scratch and searched together (about a seventh of the lane-wheels on the
rough batch terrain; searched in place they would fill a vector poorly). Other terrain kinds
are looked up per lane by the scalar :func:`~wmr_model.terrain.surface.terrain_height_normal`;
the only transcendental left is the fan's ``atan2`` (a scalar loop over the fan's lanes).

The scratch is one flat float32 array of rows LANES_MAX floats apart (the lane index within a
row), a compile-time stride: LLVM then sees that rows never overlap and vectorizes loops that
read and write many of them (with a run-time stride it would need a run-time overlap check per
pair of rows and gives up). Outputs are copied out of it by one-row loops.

Workspace (:func:`contact_lanes_workspace`): ``(state, scratch, counts)``. ``state``
(nw, CONTACT_WS_WIDTH, W) float32 holds per wheel and lane what a row of the scalar
``contact_ws`` holds (has-previous flag, wheel centre at the last fan, last angle with its sine
and cosine); zeros: no previous angle, so the first call runs the fan for every lane.
``scratch`` (2 _NROWS LANES_MAX,) float32. ``counts`` (float64, :data:`COUNT_NAMES`)
accumulates how often each branch ran (lane-wheel events), for tests and benchmarks.

Differences from the scalar kernel: float32 arithmetic (the inputs are float32); the wheel
centre stored at a fan is the float32 one; a grid coordinate is the wheel centre's plus the
point's offset from it, split into integer part and fraction (the same value, without the
rounding of a float32 coordinate of a few hundred cells); sines and cosines of the fan's angles
follow from the middle point's by the angle-sum identities (``sin(atan2(a, b)) = a / hypot``);
decisions between values equal to float32 round-off (ties) may go the other way, to an equally
low contact, and a contact point within round-off of a grid line may take the neighbouring
cell's normal (bilinear normals jump there). NaN inputs give NaN outputs, as the scalar kernel.
"""

from __future__ import annotations

import math

import numpy as np

from wmr_model._jit import njit
from wmr_model.kinematics.lanes import F32, HALF, INF, ONE, TWO, ZERO
from wmr_model.kinematics.wheel_collision import (
    _BRACKET_COS,
    _BRACKET_SIN,
    _FAN_COS,
    _FAN_SIN,
    _FAN_STEP,
    CONTACT_FAN_POINTS,
    CONTACT_WS_WIDTH,
    WARM_CONTACT_BRACKET,
    WARM_CONTACT_MAX_TRAVEL,
    WARM_CONTACT_MAX_WALK,
)
from wmr_model.terrain.surface import (
    _NODE_SNAP,
    GRID,
    GRID_NORMALS,
    _node_slope,
    grid_reciprocal_spacing,
    terrain_height_normal,
)

__all__ = ["COUNT_NAMES", "LANES_MAX", "contact_lanes_workspace", "contact_lanes",
           "terrain_height_normal_lanes"]

_KW = dict(refcount=False, error_model="numpy", fastmath={"contract"})
_MINUS_ONE = F32(-1.0)
_NAN = F32(np.nan)
_SNAP = F32(_NODE_SNAP)
_CN_MIN = F32(1e-6)  # wheel_collision._write_contact_frame
_H = F32(WARM_CONTACT_BRACKET)
_BS = F32(_BRACKET_SIN)
_BC = F32(_BRACKET_COS)
_NODAL = float(GRID_NORMALS["nodal"])
# the fan (wheel_collision._wheel_fan): offsets' sines and cosines, spacing, middle index
_FAN_S = _FAN_SIN.astype(np.float32)
_FAN_C = _FAN_COS.astype(np.float32)
_FAN_H = F32(_FAN_STEP)
_FAN_S0 = F32(_FAN_SIN[0])
_FAN_C0 = F32(_FAN_COS[0])
_FAN_MID = CONTACT_FAN_POINTS // 2
_FAN_LAST = F32(CONTACT_FAN_POINTS - 1)
# _sin_cos_small's Taylor coefficients as float32 reciprocals (x2 / k == x2 * (1 / k) to
# float32 round-off; the series' remainder is below 1e-16 for the fits' |x| <= 0.175)
_R6, _R20, _R42, _R72 = F32(1 / 6), F32(1 / 20), F32(1 / 42), F32(1 / 72)
_R12, _R30, _R56, _R90 = F32(1 / 12), F32(1 / 30), F32(1 / 56), F32(1 / 90)

#: Most lanes per call: the scratch rows' stride. 33 cache lines, so that consecutive rows
#: start in different L1 sets (a power-of-two stride would put them all in a few).
LANES_MAX = 528
_S = LANES_MAX

# Scratch rows (offsets into the flat scratch; each row holds W lanes). Geometry of the current
# wheel: centre and x, y, z axes of the wheel frame without spin (world), the centre's grid
# coordinates (integer part, rest), the wheel radius.
_PX, _PY, _PZ, _XX, _XY, _XZ, _YX, _YY, _YZ, _ZX, _ZY, _ZZ = range(0, 12 * _S, _S)
_UI, _UF, _VI, _VF, _RW = range(12 * _S, 17 * _S, _S)
# bracket: centre angle; sines and cosines of minus end, centre, plus end; Δz there and at a
# new evaluation; contact point and normal of the last evaluation; the angle of a new one
_D, _SM, _CM, _S0, _C0, _SP, _CP = range(17 * _S, 24 * _S, _S)
_FM, _F0, _FP, _FN = range(24 * _S, 28 * _S, _S)
_RX, _RY, _RZ, _NX, _NY, _NZ = range(28 * _S, 34 * _S, _S)
_SN, _CN = range(34 * _S, 36 * _S, _S)
# grid lookup: cell (i, j) as floats, fractions, inside flags, cell's first node (uint32 flat
# index), gathered heights, nodal slopes, slopes, height (non-GRID kinds)
_GI, _GJ, _FX, _FY, _INX, _INY, _GF = range(36 * _S, 43 * _S, _S)
_H00, _H10, _H01, _H11 = range(43 * _S, 47 * _S, _S)
_SX00, _SX10, _SX01, _SX11, _SY00, _SY10, _SY01, _SY11 = range(47 * _S, 55 * _S, _S)
_DHX, _DHY, _HT = range(55 * _S, 58 * _S, _S)
# lane masks: warm (1/0), bracketed (1/0), slide (-1, 0, +1), fit offset, centre kept (1/0);
# compacted lane indices (uint32)
_WARM, _OK, _MOVE, _OFF, _KEEP, _IDX = range(58 * _S, 64 * _S, _S)
# fan search: best index (as a float), its Δz, Δz at the previous point, before and after the
# best, the best point's sine and cosine, the middle point's angle and atan2 arguments; the
# wheel and lane each fan lane came from (uint32)
_BEST, _FBEST, _FPREV, _FBEF, _FAFT, _SB, _CB, _D0, _A0, _B0 = range(64 * _S, 74 * _S, _S)
_FK, _FL = range(74 * _S, 76 * _S, _S)
# the contact frame's rotation, row-major
_RC = 76 * _S
_NROWS = 85
# a second block of _NROWS rows (the same layout): the lanes of every wheel that need the fan
# search, compacted
_BLOCK = _NROWS * _S

#: Entries of a workspace's ``counts`` (lane-wheel events, accumulated over calls).
COUNT_NAMES = ("warm bracket fit", "bracket slide", "fit rejected (centre lower)",
               "fan search", "fan search (unbracketed)", "angle sine/cosine recomputed")
_NCOUNTS = len(COUNT_NAMES)


@njit
def contact_lanes_workspace(nw, W):
    """Fresh collision workspace for ``nw`` wheels and ``W`` (<= LANES_MAX) lanes, no previous
    angle: the lane form of :func:`~wmr_model.kinematics.wheel_collision.contact_workspace`.
    ``(state (nw, CONTACT_WS_WIDTH, W) float32, scratch (2 * _NROWS * LANES_MAX,) float32,
    counts (len(COUNT_NAMES),) float64)``."""
    if not 0 < W <= LANES_MAX:
        raise ValueError("contact_lanes_workspace: W must be in 1..LANES_MAX")
    return (np.zeros((nw, CONTACT_WS_WIDTH, W), dtype=np.float32),
            np.zeros(2 * _BLOCK, dtype=np.float32),
            np.zeros(_NCOUNTS))


@njit(inline="always", **_KW)
def _split(u):
    """Grid coordinate ``u`` as ``(floor(u), u - floor(u))``; NaN and infinities pass (the
    lookup's last clamp handles them)."""
    i0 = np.floor(u)
    return i0, u - i0


@njit(inline="always", **_KW)
def _axis(base, u, nm1):
    """Cell index (as a float), fraction and inside flag (1/0) of the grid coordinate
    ``base + u`` (``base`` an integer, ``u`` small) on an axis of ``nm1 + 1`` nodes:
    :func:`wmr_model.terrain.surface._grid_axis` (snap onto a node within _NODE_SNAP, clamp
    outside the grid) in select form. A non-finite coordinate gives cell 0 (its lookup is NaN
    or clamped), so the gather's index is always valid."""
    f0 = np.floor(u)
    snap_lo = u - f0 <= _SNAP
    snap_hi = ((f0 + ONE) - u <= _SNAP) & (not snap_lo)
    f0 = f0 + ONE if snap_hi else f0
    frac = ZERO if (snap_lo | snap_hi) else u - f0
    i0 = base + f0
    below = i0 < ZERO
    above = i0 >= nm1
    top = nm1 - ONE
    cell = ZERO if below else (top if above else i0)
    cell = cell if (cell >= ZERO) & (cell <= top) else ZERO
    frac = ZERO if below else (ONE if above else frac)
    inside = ZERO if (below | above) else ONE
    return cell, frac, inside


@njit(inline="always", **_KW)
def _points(scr, uscr, W, s_row, c_row, rdx, rdy, nxm1, nym1, nxu):
    """Wheel-circle points at the angles of rows ``s_row``, ``c_row`` (2.9, ``_wheel_point``)
    into rows _RX, _RY, _RZ and their grid cells (:func:`_axis`) into the lookup rows: the
    vectorized first part of :func:`_eval`. A point's grid coordinate is the wheel centre's
    (rows _UI, _UF, _VI, _VF) plus its offset's, ``(x - x0) / dx`` of ``_grid``; row _GF the
    cell's first node as a flat index into the grid (``nxu`` nodes a row)."""
    for l in range(W):
        s = scr[s_row + l]
        c = scr[c_row + l]
        Rw = scr[_RW + l]
        ox = Rw * (s * scr[_XX + l] + c * scr[_ZX + l])
        oy = Rw * (s * scr[_XY + l] + c * scr[_ZY + l])
        oz = Rw * (s * scr[_XZ + l] + c * scr[_ZZ + l])
        scr[_RX + l] = scr[_PX + l] - ox
        scr[_RY + l] = scr[_PY + l] - oy
        scr[_RZ + l] = scr[_PZ + l] - oz
        ci, fx, inx = _axis(scr[_UI + l], scr[_UF + l] - ox * rdx, nxm1)
        cj, fy, iny = _axis(scr[_VI + l], scr[_VF + l] - oy * rdy, nym1)
        scr[_GI + l] = ci
        scr[_GJ + l] = cj
        scr[_FX + l] = fx
        scr[_FY + l] = fy
        scr[_INX + l] = inx
        scr[_INY + l] = iny
        uscr[_GF + l] = np.uint32(cj) * nxu + np.uint32(ci)


@njit(inline="always", **_KW)
def _gather(scr, uscr, tgrid, cnt, nodal, rdx64, rdy64):
    """The four nodes of each listed lane's cell (with nodal normals also their nodal slopes,
    ``surface._node_slope`` in float64) into float32 rows: a plain scalar loop over the
    ``cnt`` lanes listed in row _IDX."""
    nx = tgrid.shape[1]
    g = tgrid.reshape(tgrid.size)
    nxu = np.uint32(nx)
    one = np.uint32(1)
    for n in range(cnt):
        l = uscr[_IDX + n]
        f = uscr[_GF + l]
        scr[_H00 + l] = g[f]
        scr[_H10 + l] = g[f + one]
        scr[_H01 + l] = g[f + nxu]
        scr[_H11 + l] = g[f + nxu + one]
    if nodal:
        for n in range(cnt):
            l = uscr[_IDX + n]
            i = int(scr[_GI + l])
            j = int(scr[_GJ + l])
            sx, sy = _node_slope(tgrid, i, j, rdx64, rdy64)
            scr[_SX00 + l] = sx
            scr[_SY00 + l] = sy
            sx, sy = _node_slope(tgrid, i + 1, j, rdx64, rdy64)
            scr[_SX10 + l] = sx
            scr[_SY10 + l] = sy
            sx, sy = _node_slope(tgrid, i, j + 1, rdx64, rdy64)
            scr[_SX01 + l] = sx
            scr[_SY01 + l] = sy
            sx, sy = _node_slope(tgrid, i + 1, j + 1, rdx64, rdy64)
            scr[_SX11 + l] = sx
            scr[_SY11 + l] = sy


@njit(inline="always", **_KW)
def _interpolate(scr, W, f_row, nodal, rdx, rdy):
    """Bilinear height and normal from the gathered rows (:func:`wmr_model.terrain.surface.
    _grid`, both :data:`~wmr_model.terrain.surface.GRID_NORMALS`): the normal into rows _NX,
    _NY, _NZ, Δz (2.8) into row ``f_row``; NaN for a NaN point."""
    if nodal:  # nodal slopes, bilinearly interpolated (_grid_nodal_slopes)
        for l in range(W):
            fx = scr[_FX + l]
            fy = scr[_FY + l]
            gx = ONE - fx
            gy = ONE - fy
            scr[_DHX + l] = (gy * (gx * scr[_SX00 + l] + fx * scr[_SX10 + l])
                             + fy * (gx * scr[_SX01 + l] + fx * scr[_SX11 + l]))
            scr[_DHY + l] = (gy * (gx * scr[_SY00 + l] + fx * scr[_SY10 + l])
                             + fy * (gx * scr[_SY01 + l] + fx * scr[_SY11 + l]))
    else:  # the bilinear patch's own slopes
        for l in range(W):
            fx = scr[_FX + l]
            fy = scr[_FY + l]
            gx = ONE - fx
            gy = ONE - fy
            h00 = scr[_H00 + l]
            h10 = scr[_H10 + l]
            h01 = scr[_H01 + l]
            h11 = scr[_H11 + l]
            scr[_DHX + l] = (gy * (h10 - h00) + fy * (h11 - h01)) * rdx
            scr[_DHY + l] = (gx * (h01 - h00) + fx * (h11 - h10)) * rdy
    for l in range(W):
        fx = scr[_FX + l]
        fy = scr[_FY + l]
        gx = ONE - fx
        gy = ONE - fy
        h = (gy * (gx * scr[_H00 + l] + fx * scr[_H10 + l])
             + fy * (gx * scr[_H01 + l] + fx * scr[_H11 + l]))
        sx = scr[_DHX + l]
        sy = scr[_DHY + l]
        inx = scr[_INX + l]
        iny = scr[_INY + l]
        rx = scr[_RX + l]
        ry = scr[_RY + l]
        rz = scr[_RZ + l]
        dhdx = sx if inx > ZERO else ZERO
        dhdy = sy if iny > ZERO else ZERO
        inv = ONE / np.sqrt(dhdx * dhdx + dhdy * dhdy + ONE)
        bad = (rx != rx) | (ry != ry)
        nz = _NAN if bad else inv
        scr[_NX + l] = _NAN if bad else -dhdx * inv
        scr[_NY + l] = _NAN if bad else -dhdy * inv
        scr[_NZ + l] = nz
        scr[_HT + l] = _NAN if bad else h
        scr[f_row + l] = (rz - h) * nz


# Not inlined: its callers make two dozen evaluations, and inlined they made a kernel that
# took numba minutes to compile; a call costs little against the work on W lanes.
@njit(**_KW)
def _eval(t, scr, uscr, W, cnt):
    """``_contact_height_error_sc`` for the lanes: the wheel point at the angles of rows _SN,
    _CN into rows _RX.._RZ, the terrain height and normal there into _HT, _NX.._NZ, Δz (2.8)
    into row _FN. Computed for every lane, valid for the ``cnt`` lanes listed in row _IDX (only
    those are looked up; every other lane's result is recomputed from its last lookup's
    nodes)."""
    tkind, tparams, tgrid = t.kind, t.params, t.grid
    if tkind == GRID:
        rdx64, rdy64 = grid_reciprocal_spacing(tparams)
        nodal = tparams.shape[0] > 4 and tparams[4] == _NODAL
        rdx = F32(rdx64)
        rdy = F32(rdy64)
        nxm1 = F32(tgrid.shape[1] - 1)
        nym1 = F32(tgrid.shape[0] - 1)
        _points(scr, uscr, W, _SN, _CN, rdx, rdy, nxm1, nym1, np.uint32(tgrid.shape[1]))
        _gather(scr, uscr, tgrid, cnt, nodal, rdx64, rdy64)
        _interpolate(scr, W, _FN, nodal, rdx, rdy)
        return
    # other kinds: the scalar lookup per listed lane
    _points(scr, uscr, W, _SN, _CN, ONE, ONE, ONE, ONE, np.uint32(0))
    for n in range(cnt):
        l = uscr[_IDX + n]
        h, nx, ny, nz = terrain_height_normal(tkind, tparams, tgrid, float(scr[_RX + l]),
                                              float(scr[_RY + l]))
        scr[_HT + l] = h
        scr[_NX + l] = nx
        scr[_NY + l] = ny
        scr[_NZ + l] = nz
    for l in range(W):
        scr[_FN + l] = (scr[_RZ + l] - scr[_HT + l]) * scr[_NZ + l]


@njit(**_KW)
def _eval_bracket(t, scr, uscr, W, cnt):
    """:func:`_eval` at the bracket's three angles (rows _SM, _CM; _S0, _C0; _SP, _CP): Δz
    into rows _FM, _F0, _FP (the contact point and normal rows hold the last's)."""
    for s_row, c_row, f_row in ((_SM, _CM, _FM), (_S0, _C0, _F0), (_SP, _CP, _FP)):
        for l in range(W):
            scr[_SN + l] = scr[s_row + l]
        for l in range(W):
            scr[_CN + l] = scr[c_row + l]
        _eval(t, scr, uscr, W, cnt)
        for l in range(W):
            scr[f_row + l] = scr[_FN + l]


@njit(inline="always", **_KW)
def _list_lanes(scr, uscr, W, row, value):
    """Indices of the lanes whose row ``row`` is (with ``value`` True) or is not nonzero into
    row _IDX (branch-free compaction); returns their count."""
    cnt = 0
    for l in range(W):
        uscr[_IDX + cnt] = l
        cnt += (scr[row + l] != ZERO) == value
    return cnt


@njit(inline="always", **_KW)
def _wheel_geometry(m, t, R, p, scr, W, k):
    """Rows _PX.._ZZ: the wheel frame without its spin rotation, columns of
    ``T_world[parent] @ T0[i]`` (``compose_column``, Algorithm 1); rows _UI.._VF: its
    centre's grid coordinates on a GRID; row _RW its radius."""
    i = m.wheel_frame[k]
    a = m.parent[i]
    T0 = m.T0
    b0 = F32(T0[i, 0, 0])
    b1 = F32(T0[i, 1, 0])
    b2 = F32(T0[i, 2, 0])
    c0 = F32(T0[i, 0, 1])
    c1 = F32(T0[i, 1, 1])
    c2 = F32(T0[i, 2, 1])
    d0 = F32(T0[i, 0, 2])
    d1 = F32(T0[i, 1, 2])
    d2 = F32(T0[i, 2, 2])
    e0 = F32(T0[i, 0, 3])
    e1 = F32(T0[i, 1, 3])
    e2 = F32(T0[i, 2, 3])
    for r in range(3):
        o = r * _S
        for l in range(W):
            a0 = R[a, r, 0, l]
            a1 = R[a, r, 1, l]
            a2 = R[a, r, 2, l]
            pr = p[a, r, l]
            scr[_XX + o + l] = a0 * b0 + a1 * b1 + a2 * b2
            scr[_YX + o + l] = a0 * c0 + a1 * c1 + a2 * c2
            scr[_ZX + o + l] = a0 * d0 + a1 * d1 + a2 * d2
            scr[_PX + o + l] = a0 * e0 + a1 * e1 + a2 * e2 + pr
    Rw = F32(m.wheel_radius[k])
    for l in range(W):
        scr[_RW + l] = Rw
    _centre_grid(t, scr, W)


@njit(inline="always", **_KW)
def _centre_grid(t, scr, W):
    """Rows _UI, _UF, _VI, _VF: the grid coordinates ``(x - x0) * (1/dx)`` (``_grid``) of the
    wheel centres (rows _PX, _PY), integer part and rest (:func:`_split`); on a GRID only."""
    if t.kind == GRID:
        rdx64, rdy64 = grid_reciprocal_spacing(t.params)
        x0 = F32(t.params[0])
        y0 = F32(t.params[1])
        rdx = F32(rdx64)
        rdy = F32(rdy64)
        for l in range(W):
            ui, uf = _split((scr[_PX + l] - x0) * rdx)
            vi, vf = _split((scr[_PY + l] - y0) * rdy)
            scr[_UI + l] = ui
            scr[_UF + l] = uf
            scr[_VI + l] = vi
            scr[_VF + l] = vf


@njit(inline="always", **_KW)
def _bracket(scr, W):
    """Rows _SM, _CM, _SP, _CP: the bracket's ends about rows _S0, _C0 (``_rotate_angle`` by
    -+WARM_CONTACT_BRACKET)."""
    for l in range(W):
        s0 = scr[_S0 + l]
        c0 = scr[_C0 + l]
        scr[_SM + l] = s0 * _BC - c0 * _BS
        scr[_CM + l] = c0 * _BC + s0 * _BS
        scr[_SP + l] = s0 * _BC + c0 * _BS
        scr[_CP + l] = c0 * _BC - s0 * _BS


@njit(inline="always", **_KW)
def _warm_start(state, angle, scr, counts, W, k, lim2):
    """Row _WARM: the lanes that start from their previous angle (has previous and travelled
    at most WARM_CONTACT_MAX_TRAVEL radii since the last fan); rows _D.._CP: the bracket about
    that angle (its sine and cosine from the workspace while ``angle`` still holds it)."""
    mism = 0
    for l in range(W):
        ex = scr[_PX + l] - state[k, 1, l]
        ey = scr[_PY + l] - state[k, 2, l]
        ez = scr[_PZ + l] - state[k, 3, l]
        has = state[k, 0, l] > ZERO
        d = angle[k, l]
        d_ws = state[k, 4, l]
        s0 = state[k, 5, l]
        c0 = state[k, 6, l]
        warm = has & (ex * ex + ey * ey + ez * ez <= lim2)
        scr[_WARM + l] = ONE if warm else ZERO
        scr[_D + l] = d
        scr[_S0 + l] = s0
        scr[_C0 + l] = c0
        mism += warm & (d_ws != d)
    if mism > 0:  # angle changed by the caller: its sine and cosine (rare)
        counts[5] += mism
        for l in range(W):
            if scr[_WARM + l] > ZERO and state[k, 4, l] != scr[_D + l]:
                d64 = float(scr[_D + l])
                scr[_S0 + l] = math.sin(d64)
                scr[_C0 + l] = math.cos(d64)
    _bracket(scr, W)


@njit(inline="always", **_KW)
def _slide(scr, W):
    """One slide of the bracket walk for every lane (the scalar walk's loop body): row _MOVE
    -1 (down), +1 (up) or 0; the bracket and its values shifted; rows _SN, _CN the new end's
    angle (its value, row _FN, is looked up next). Returns the number of moving lanes."""
    moving = 0
    for l in range(W):
        warm = scr[_WARM + l] > ZERO
        d = scr[_D + l]
        fm = scr[_FM + l]
        f0 = scr[_F0 + l]
        fp = scr[_FP + l]
        sm = scr[_SM + l]
        cm = scr[_CM + l]
        s0 = scr[_S0 + l]
        c0 = scr[_C0 + l]
        sp = scr[_SP + l]
        cp = scr[_CP + l]
        down = warm & (fm < f0) & (fm <= fp)
        up = warm & (fp < f0) & (not down)
        mv = _MINUS_ONE if down else (ONE if up else ZERO)
        moving += mv != ZERO
        # new centre: the end moved to; new ends: the old centre and the point beyond
        ns0 = sm if down else (sp if up else s0)
        nc0 = cm if down else (cp if up else c0)
        nsm = s0 if up else (ns0 * _BC - nc0 * _BS if down else sm)
        ncm = c0 if up else (nc0 * _BC + ns0 * _BS if down else cm)
        nsp = s0 if down else (ns0 * _BC + nc0 * _BS if up else sp)
        ncp = c0 if down else (nc0 * _BC - ns0 * _BS if up else cp)
        scr[_MOVE + l] = mv
        scr[_D + l] = d + mv * _H
        scr[_S0 + l] = ns0
        scr[_C0 + l] = nc0
        scr[_SM + l] = nsm
        scr[_CM + l] = ncm
        scr[_SP + l] = nsp
        scr[_CP + l] = ncp
        scr[_SN + l] = nsm if down else nsp
        scr[_CN + l] = ncm if down else ncp
        scr[_FM + l] = f0 if up else fm
        scr[_F0 + l] = fm if down else (fp if up else f0)
        scr[_FP + l] = f0 if down else fp
    return moving


@njit(inline="always", **_KW)
def _parabola(fm, f0, fp, step):
    """``wheel_collision._parabola_offset`` in select form: vertex abscissa of the parabola
    through (-step, fm), (0, f0), (step, fp), clamped to +-step; 0 unless it opens upwards."""
    den = fm - TWO * f0 + fp
    off = HALF * step * (fm - fp) / den
    off = off if off < step else step
    off = off if off > -step else -step
    return off if den > ZERO else ZERO


@njit(inline="always", **_KW)
def _sin_cos(x):
    """``wheel_collision._sin_cos_small``: sine and cosine of a small angle (|x| <= 0.18) by
    their Taylor series (remainders below 1e-16)."""
    x2 = x * x
    sn = x * (ONE - x2 * _R6 * (ONE - x2 * _R20 * (ONE - x2 * _R42 * (ONE - x2 * _R72))))
    cs = ONE - x2 * HALF * (ONE - x2 * _R12 * (ONE - x2 * _R30 * (
        ONE - x2 * _R56 * (ONE - x2 * _R90))))
    return sn, cs


@njit(inline="always", **_KW)
def _fit_angles(scr, W, check):
    """Row _OK: the lanes to fit (with ``check`` the warm lanes whose minimum is bracketed, the
    warm path's test; else all, as after a fan); rows _OFF, _SN, _CN: the offset of the fitted
    parabola's vertex and its angle (``_bracket_fit``'s ``_parabola_offset``,
    ``_sin_cos_small``, ``_rotate_angle``)."""
    for l in range(W):
        warm = scr[_WARM + l] > ZERO
        fm = scr[_FM + l]
        f0 = scr[_F0 + l]
        fp = scr[_FP + l]
        s0 = scr[_S0 + l]
        c0 = scr[_C0 + l]
        ok = (warm & (f0 <= fm) & (f0 <= fp)) | (not check)
        off = _parabola(fm, f0, fp, _H)
        so, co = _sin_cos(off)
        scr[_OK + l] = ONE if ok else ZERO
        scr[_OFF + l] = off
        scr[_SN + l] = s0 * co + c0 * so
        scr[_CN + l] = c0 * co - s0 * so


@njit(inline="always", **_KW)
def _fit_choose(scr, W):
    """``_bracket_fit``'s choice: the fitted point unless the centre is lower (a kink: the
    vertex is higher). Rows _D, _S0, _C0 the chosen angle, _F0 its Δz; rows _SN, _CN the
    centre's angle where it was kept (re-evaluated for its point and normal), row _KEEP 1 there.
    Returns the number of lanes that kept the centre."""
    kept = 0
    for l in range(W):
        ok = scr[_OK + l] > ZERO
        f0 = scr[_F0 + l]
        fn = scr[_FN + l]
        d = scr[_D + l]
        off = scr[_OFF + l]
        s0 = scr[_S0 + l]
        c0 = scr[_C0 + l]
        sn = scr[_SN + l]
        cn = scr[_CN + l]
        keep = ok & (f0 < fn)
        take = ok & (not keep)
        kept += keep
        scr[_KEEP + l] = ONE if keep else ZERO
        scr[_D + l] = d + off if take else d
        scr[_S0 + l] = sn if take else s0
        scr[_C0 + l] = cn if take else c0
        scr[_F0 + l] = fn if take else f0
        scr[_SN + l] = s0 if keep else sn
        scr[_CN + l] = c0 if keep else cn
    return kept


@njit(inline="always", **_KW)
def _contact_frame(scr, W):
    """Contact frame (Figure 2.3, ``_write_contact_frame``) into rows _RC..: z = n,
    x = unit(y_wheel x n) (x_wheel projected on the tangent plane when they are parallel),
    y = z x x."""
    for l in range(W):
        nx = scr[_NX + l]
        ny = scr[_NY + l]
        nz = scr[_NZ + l]
        ax = scr[_YX + l]
        ay = scr[_YY + l]
        az = scr[_YZ + l]
        fx = scr[_XX + l]
        fy = scr[_XY + l]
        fz = scr[_XZ + l]
        cx = ay * nz - az * ny
        cy = az * nx - ax * nz
        cz = ax * ny - ay * nx
        cn = np.sqrt(cx * cx + cy * cy + cz * cz)
        dd = fx * nx + fy * ny + fz * nz
        gx = fx - dd * nx
        gy = fy - dd * ny
        gz = fz - dd * nz
        gn = np.sqrt(gx * gx + gy * gy + gz * gz)
        small = cn < _CN_MIN
        cx = (gx if small else cx) / (gn if small else cn)
        cy = (gy if small else cy) / (gn if small else cn)
        cz = (gz if small else cz) / (gn if small else cn)
        scr[_RC + l] = cx
        scr[_RC + 3 * _S + l] = cy
        scr[_RC + 6 * _S + l] = cz
        scr[_RC + 1 * _S + l] = ny * cz - nz * cy
        scr[_RC + 4 * _S + l] = nz * cx - nx * cz
        scr[_RC + 7 * _S + l] = nx * cy - ny * cx
        scr[_RC + 2 * _S + l] = nx
        scr[_RC + 5 * _S + l] = ny
        scr[_RC + 8 * _S + l] = nz


@njit(inline="always", **_KW)
def _fit(t, scr, uscr, W, check):
    """The fine parabolic fit (``_bracket_fit``) about rows _D, _S0, _C0 with the bracket's
    values in _FM, _F0, _FP, for the lanes :func:`_fit_angles` selects (row _OK): rows _D, _S0,
    _C0, _F0 the chosen contact angle and its Δz, rows _RX.._NZ its point and normal."""
    _fit_angles(scr, W, check)
    cnt = _list_lanes(scr, uscr, W, _OK, True)
    if cnt == 0:
        return 0, 0
    _eval(t, scr, uscr, W, cnt)
    kept = _fit_choose(scr, W)
    if kept > 0:  # the centre's point and normal
        _eval(t, scr, uscr, W, _list_lanes(scr, uscr, W, _KEEP, True))
    return cnt, kept


@njit(inline="always", **_KW)
def _fan(t, scr, uscr, W):
    """Full fan search and its refinement for W lanes (the cold branch of ``wheel_contact_into``:
    ``_wheel_fan``, then ``_bracket_fit``), on a block whose geometry rows are filled: rows _D,
    _S0, _C0, _F0, _RX.._NZ the contact. The same decisions as the scalar search: every fan
    point is evaluated (the scalar search leaves out points that cannot be the lowest, with
    the same result), the lowest kept as its loop does."""
    for l in range(W):
        uscr[_IDX + l] = l
        scr[_SN + l] = ZERO
        scr[_CN + l] = ZERO
    # _fan_start: the terrain normal under the centre projected on the wheel plane
    _eval(t, scr, uscr, W, W)
    for l in range(W):
        nx = scr[_NX + l]
        ny = scr[_NY + l]
        nz = scr[_NZ + l]
        yx = scr[_YX + l]
        yy = scr[_YY + l]
        yz = scr[_YZ + l]
        dot = nx * yx + ny * yy + nz * yz
        ux = nx - dot * yx
        uy = ny - dot * yy
        uz = nz - dot * yz
        a = ux * scr[_XX + l] + uy * scr[_XY + l] + uz * scr[_XZ + l]
        b = ux * scr[_ZX + l] + uy * scr[_ZY + l] + uz * scr[_ZZ + l]
        r = np.sqrt(a * a + b * b)
        zero = r == ZERO  # atan2(0, 0) = 0
        scr[_A0 + l] = a
        scr[_B0 + l] = b
        s0 = ZERO if zero else a / r  # sin(atan2(a, b))
        c0 = ONE if zero else b / r
        scr[_S0 + l] = s0
        scr[_C0 + l] = c0
        scr[_SB + l] = s0 * _FAN_C0 + c0 * _FAN_S0  # the first point, the scalar's best = 0
        scr[_CB + l] = c0 * _FAN_C0 - s0 * _FAN_S0
        scr[_BEST + l] = ZERO
        scr[_FBEST + l] = INF
        scr[_FPREV + l] = INF
        scr[_FBEF + l] = INF
        scr[_FAFT + l] = INF
    for l in range(W):  # the angle itself (scalar: no vector atan2)
        scr[_D0 + l] = math.atan2(float(scr[_A0 + l]), float(scr[_B0 + l]))
    for j in range(CONTACT_FAN_POINTS):
        sj = _FAN_S[j]
        cj = _FAN_C[j]
        jf = F32(j)
        for l in range(W):
            s0 = scr[_S0 + l]
            c0 = scr[_C0 + l]
            scr[_SN + l] = s0 * cj + c0 * sj
            scr[_CN + l] = c0 * cj - s0 * sj
        _eval(t, scr, uscr, W, W)
        for l in range(W):  # the scalar loop's bookkeeping, in select form
            f = scr[_FN + l]
            best = scr[_BEST + l]
            fbest = scr[_FBEST + l]
            fprev = scr[_FPREV + l]
            fbef = scr[_FBEF + l]
            faft = scr[_FAFT + l]
            sb = scr[_SB + l]
            cb = scr[_CB + l]
            sn = scr[_SN + l]
            cn = scr[_CN + l]
            lower = f < fbest
            after = (not lower) & (jf == best + ONE)
            scr[_FBEST + l] = f if lower else fbest
            scr[_BEST + l] = jf if lower else best
            scr[_FBEF + l] = fprev if lower else fbef
            scr[_SB + l] = sn if lower else sb
            scr[_CB + l] = cn if lower else cb
            scr[_FAFT + l] = f if after else faft
            scr[_FPREV + l] = f
    for l in range(W):  # the fan's parabolic fit, then the bracket about its angle
        best = scr[_BEST + l]
        inner = (best > ZERO) & (best < _FAN_LAST)
        off = _parabola(scr[_FBEF + l], scr[_FBEST + l], scr[_FAFT + l], _FAN_H)
        off = off if inner else ZERO
        so, co = _sin_cos(off)
        sb = scr[_SB + l]
        cb = scr[_CB + l]
        scr[_D + l] = scr[_D0 + l] + (best - F32(_FAN_MID)) * _FAN_H + off
        scr[_S0 + l] = sb * co + cb * so
        scr[_C0 + l] = cb * co - sb * so
    _bracket(scr, W)
    _eval_bracket(t, scr, uscr, W, W)
    _fit(t, scr, uscr, W, False)


@njit(**_KW)
def _flush_fans(t, scr, uscr, nfan, state, Rc, pc, dz, angle):
    """The fan search (:func:`_fan`) for the ``nfan`` lanes compacted into the second block,
    their contact frames, and their outputs and workspace entries written back to their
    wheels and lanes (rows _FK, _FL)."""
    fan = scr[_BLOCK:]
    ufan = uscr[_BLOCK:]
    _fan(t, fan, ufan, nfan)
    _contact_frame(fan, nfan)
    for n in range(nfan):
        k = ufan[_FK + n]
        l = ufan[_FL + n]
        dz[k, l] = fan[_F0 + n]
        angle[k, l] = fan[_D + n]
        state[k, 0, l] = ONE
        state[k, 1, l] = fan[_PX + n]
        state[k, 2, l] = fan[_PY + n]
        state[k, 3, l] = fan[_PZ + n]
        state[k, 4, l] = fan[_D + n]
        state[k, 5, l] = fan[_S0 + n]
        state[k, 6, l] = fan[_C0 + n]
        for r in range(3):
            pc[k, r, l] = fan[_RX + r * _S + n]
            for c in range(3):
                Rc[k, r, c, l] = fan[_RC + (3 * r + c) * _S + n]


@njit(**_KW)
def contact_lanes(m, t, R, p, Rc, pc, dz, angle, ws):
    """Wheel-terrain collision detection (§2.2.1, eqs. 2.8-2.9) for W lanes, warm-started:
    :func:`~wmr_model.kinematics.wheel_collision.wheel_contact_into` with a workspace, per lane.

    ``m`` the :class:`~wmr_model.vehicles.model.KernelModel` (``parent``, ``T0``,
    ``wheel_frame``, ``wheel_radius``), ``t`` the terrain
    (:class:`~wmr_model.terrain.surface.TerrainArrays`); ``R`` (nf, 3, 3, W), ``p`` (nf, 3, W)
    the world frames (Algorithm 1), float32. Writes ``Rc`` (nw, 3, 3, W), ``pc`` (nw, 3, W),
    ``dz`` (nw, W), ``angle`` (nw, W) and the workspace ``ws``
    (:func:`contact_lanes_workspace`). ``angle`` must hold the previous call's angles (the warm
    start reads them, as the scalar kernel reads ``contact_angle``).
    """
    state, scr, counts = ws
    W = angle.shape[1]
    if W > _S or scr.shape[0] < 2 * _BLOCK:
        raise ValueError("contact_lanes: W > LANES_MAX or scratch too small")
    uscr = scr.view(np.uint32)
    nw = m.wheel_frame.shape[0]
    pending = 0  # lanes in the fan block
    for k in range(nw):
        lim = F32(WARM_CONTACT_MAX_TRAVEL * m.wheel_radius[k])
        _wheel_geometry(m, t, R, p, scr, W, k)
        _warm_start(state, angle, scr, counts, W, k, lim * lim)
        cnt = _list_lanes(scr, uscr, W, _WARM, True)
        if cnt > 0:
            _eval_bracket(t, scr, uscr, W, cnt)
            for _ in range(WARM_CONTACT_MAX_WALK):  # slide the brackets downhill
                moving = _slide(scr, W)
                if moving == 0:
                    break
                counts[1] += moving
                _eval(t, scr, uscr, W, _list_lanes(scr, uscr, W, _MOVE, True))
                for l in range(W):
                    mv = scr[_MOVE + l]
                    fn = scr[_FN + l]
                    fm = scr[_FM + l]
                    fp = scr[_FP + l]
                    scr[_FM + l] = fn if mv < ZERO else fm
                    scr[_FP + l] = fn if mv > ZERO else fp
            # minimum bracketed: one fine fit
            fitted, kept = _fit(t, scr, uscr, W, True)
            counts[0] += fitted
            counts[2] += kept
        else:
            for l in range(W):
                scr[_OK + l] = ZERO
        # outputs and workspace of the warm lanes (every lane written, one row per loop; the
        # fan's lanes are overwritten when their search has run)
        _contact_frame(scr, W)
        for l in range(W):
            dz[k, l] = scr[_F0 + l]
        for l in range(W):
            angle[k, l] = scr[_D + l]
        for l in range(W):
            state[k, 4, l] = scr[_D + l]
        for l in range(W):
            state[k, 5, l] = scr[_S0 + l]
        for l in range(W):
            state[k, 6, l] = scr[_C0 + l]
        for r in range(3):
            for l in range(W):
                pc[k, r, l] = scr[_RX + r * _S + l]
            for c in range(3):
                for l in range(W):
                    Rc[k, r, c, l] = scr[_RC + (3 * r + c) * _S + l]
        # the other lanes: full fan search, compacted into the second block with those of the
        # other wheels
        nfan = _list_lanes(scr, uscr, W, _OK, False)
        if nfan > 0:
            counts[3] += nfan
            if pending + nfan > _S:
                _flush_fans(t, scr, uscr, pending, state, Rc, pc, dz, angle)
                pending = 0
            for n in range(nfan):
                l = uscr[_IDX + n]
                counts[4] += scr[_WARM + l]
                for row in range(_PX, _RW + 1, _S):  # geometry rows
                    scr[_BLOCK + row + pending] = scr[row + l]
                uscr[_BLOCK + _FK + pending] = k
                uscr[_BLOCK + _FL + pending] = l
                pending += 1
    if pending > 0:
        _flush_fans(t, scr, uscr, pending, state, Rc, pc, dz, angle)


@njit(**_KW)
def terrain_height_normal_lanes(t, x, y, h, nrm, ws):
    """Terrain height and unit upward normal at W points (eq. 2.8's ``terrainHeight``,
    ``terrainNormal``): :func:`~wmr_model.terrain.surface.terrain_height_normal` per lane, by
    the lookup :func:`contact_lanes` makes (on a GRID vectorized with a gather; other kinds per
    lane by the scalar lookup). ``x``, ``y``, ``h`` (W,), ``nrm`` (3, W) float32; ``ws`` a
    :func:`contact_lanes_workspace` (its scratch is used). NaN for a NaN point."""
    scr = ws[1]
    uscr = scr.view(np.uint32)
    W = x.shape[0]
    if W > _S or scr.shape[0] < 2 * _BLOCK:
        raise ValueError("terrain_height_normal_lanes: W > LANES_MAX or scratch too small")
    for row in range(_XX, _ZZ + 1, _S):
        for l in range(W):
            scr[row + l] = ZERO
    for l in range(W):
        scr[_PX + l] = x[l]
        scr[_PY + l] = y[l]
        scr[_PZ + l] = ZERO
        scr[_RW + l] = ZERO
        scr[_SN + l] = ZERO
        scr[_CN + l] = ZERO
        uscr[_IDX + l] = l
    _centre_grid(t, scr, W)
    _eval(t, scr, uscr, W, W)
    for l in range(W):
        h[l] = scr[_HT + l]
    for r in range(3):
        for l in range(W):
            nrm[r, l] = scr[_NX + r * _S + l]
