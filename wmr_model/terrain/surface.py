"""Terrain height and normal for wheel-ground collision detection.

Collision detection needs, at any horizontal location (x, y), the terrain height and the unit
upward surface normal; the contact height error of Seegmiller (2014) eq. 2.8 is

.. math::

    \\Delta z = (\\vec r_{contact} - \\vec r_{terrain}) \\cdot \\hat n, \\qquad
    \\vec r_{terrain} = [x, y, h(x, y)]^T, \\qquad
    \\hat n = \\frac{[-\\partial h / \\partial x, -\\partial h / \\partial y, 1]^T}
                   {\\lVert [-\\partial h / \\partial x, -\\partial h / \\partial y, 1] \\rVert}.

Every terrain here is plain data, a :class:`Terrain` of ``(kind, params, grid)``, so compiled
simulation loops can query it through the single scalar kernel :func:`terrain_height_normal`.
The normal returned is the exact normal of the height function returned (where the height is
not differentiable a one-sided rule, documented per kind, picks the normal), except for a GRID
with nodal normals (:data:`GRID_NORMALS`), which follows the thesis' C++ library instead.

Kinds and the layout of ``params`` (all float64, world frame, SI units):

==========  ==========================================================================  ========
kind        params                                                                      grid
==========  ==========================================================================  ========
PLANE (0)   ``[z0, gx, gy]``: h = z0 + gx x + gy y                                      (1, 1)
PROFILE (1) ``[ox, oy, cos_psi, sin_psi, half_width, base, n, s_0..s_{n-1},             (1, 1)
            h_0..h_{n-1}]`` (length 7 + 2 n)
GRID (2)    ``[x0, y0, dx, dy]`` or ``[x0, y0, dx, dy, normals]``: ``grid[j, i]`` is the  (ny, nx)
            height at (x0 + i dx, y0 + j dy); ``normals`` 0 (default) or 1, see
            :data:`GRID_NORMALS`
==========  ==========================================================================  ========

Random rough terrains (:func:`rough`) follow the thesis' description in §2.5.1 (Rocky 7: RMS
height 0.05 m, correlation length 0.2 m) and §2.5.4 (Zoë: RMS 0.15 m, correlation length 0.8 m).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
from scipy import ndimage

from wmr_model._jit import njit
from wmr_model.errors import TerrainError

__all__ = [
    "PLANE",
    "PROFILE",
    "GRID",
    "KIND_NAMES",
    "GRID_NORMALS",
    "Terrain",
    "terrain_height_normal",
    "terrain_height_normal_many",
    "GRID_KERNEL_PARAMS",
    "grid_kernel_params",
    "grid_reciprocal_spacing",
    "flat",
    "inclined_plane",
    "profile",
    "ramp",
    "step",
    "zoe_ramp",
    "height_map",
    "rough",
]

PLANE = 0
PROFILE = 1
GRID = 2
KIND_NAMES = {PLANE: "PLANE", PROFILE: "PROFILE", GRID: "GRID"}

#: Normal conventions of a GRID terrain (``params[4]``; absent means 0). The height is bilinear
#: in both. ``"bilinear"`` (0): the exact normal of that bilinear patch, which jumps where a
#: point crosses a grid line. ``"nodal"`` (1): the convention of the thesis' C++ library (wmrde,
#: whose benchmark terrains are these grids): slopes at the nodes by central differences
#: (one-sided on the border), bilinearly interpolated between nodes, so the normal is
#: continuous (not the exact normal of the height between nodes).
GRID_NORMALS = {"bilinear": 0, "nodal": 1}
_NODAL = float(GRID_NORMALS["nodal"])  # params[4] of a GRID with nodal normals

# Index of the fields of a PROFILE params vector (see module docstring).
_P_OX, _P_OY, _P_COS, _P_SIN, _P_HALF_WIDTH, _P_BASE, _P_N = range(7)
_PROFILE_HEADER = 7

# Grid coordinates (in cells) that are within this distance of an integer are snapped onto it.
# Reason: a node coordinate written as x0 + i*dx does not map back to exactly i through
# (x - x0)/dx in floating point (e.g. x0 = -6, dx = 0.1, i = 3 gives 2.999...98), which would
# blend in a neighbour with weight ~1e-15. Snapping makes nodes reproduce their stored values
# exactly; the height changes by at most 1e-9 of one cell's height difference.
_NODE_SNAP = 1e-9


# ---------------------------------------------------------------------------------------------
# Compiled kernels
# ---------------------------------------------------------------------------------------------


@njit(refcount=False)
def _unit_normal(dhdx: float, dhdy: float) -> tuple[float, float, float]:
    """Unit upward normal of a height function with gradient (dhdx, dhdy)."""
    inv = 1.0 / math.sqrt(dhdx * dhdx + dhdy * dhdy + 1.0)
    return -dhdx * inv, -dhdy * inv, inv


@njit(refcount=False)
def _plane(params: Any, x: float, y: float) -> tuple[float, float, float, float]:
    """PLANE: h = z0 + gx x + gy y, constant normal."""
    gx = params[1]
    gy = params[2]
    h = params[0] + gx * x + gy * y
    nx, ny, nz = _unit_normal(gx, gy)
    return h, nx, ny, nz


@njit(refcount=False)
def _profile(params: Any, x: float, y: float) -> tuple[float, float, float, float]:
    """PROFILE: piecewise-linear h(s) along a heading, optional lateral extent.

    Tie rules: a point exactly at a breakpoint belongs to the segment starting there (the +s
    side); exactly on a zero-length segment (vertical step) the height is the value after the
    step and the normal is vertical; on the lateral edge (|lateral| == half_width) the point is
    inside.
    """
    c = params[_P_COS]
    sn = params[_P_SIN]
    dx = x - params[_P_OX]
    dy = y - params[_P_OY]
    s = dx * c + dy * sn
    lateral = -dx * sn + dy * c
    if s != s or lateral != lateral:
        return np.nan, np.nan, np.nan, np.nan
    if abs(lateral) > params[_P_HALF_WIDTH]:
        return params[_P_BASE], 0.0, 0.0, 1.0
    n = int(params[_P_N])
    i_s = _PROFILE_HEADER
    i_h = _PROFILE_HEADER + n
    if s < params[i_s]:
        return params[i_h], 0.0, 0.0, 1.0
    if s >= params[i_s + n - 1]:
        return params[i_h + n - 1], 0.0, 0.0, 1.0
    # Largest k with s_k <= s (invariant s_lo <= s < s_hi, so s_lo < s_hi at the end).
    lo = 0
    hi = n - 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if params[i_s + mid] <= s:
            lo = mid
        else:
            hi = mid
    s_k = params[i_s + lo]
    h_k = params[i_h + lo]
    ds = params[i_s + lo + 1] - s_k
    dh = params[i_h + lo + 1] - h_k
    h = h_k + dh * ((s - s_k) / ds)
    if lo > 0 and s == s_k and params[i_s + lo - 1] == s_k:
        return h, 0.0, 0.0, 1.0  # exactly on a vertical step
    m = dh / ds  # dh/ds
    nx, ny, nz = _unit_normal(m * c, m * sn)
    return h, nx, ny, nz


@njit(refcount=False)
def _grid_axis(u: float, n: int) -> tuple[int, float, bool]:
    """Cell index, fraction and 'inside' flag of grid coordinate ``u`` on an axis of n nodes.

    Outside [0, n - 1] the coordinate is clamped (inside = False: the clamped height does not
    vary along this axis). A point on a cell boundary belongs to the cell on its + side, so
    u == n - 1 counts as outside.
    """
    # One floor: the distances to the integers below and above, u - i0 and (i0 + 1) - u, are
    # exact wherever they can be within the snap distance (Sterbenz), so this snaps exactly
    # where rounding to the nearest integer would. A float floor (math.floor gives an integer,
    # which wraps for |u| >= 2^63 and infinity; those must clamp like any far coordinate).
    i0 = float(np.floor(u))
    if u - i0 <= _NODE_SNAP:
        u = i0
    elif (i0 + 1.0) - u <= _NODE_SNAP:
        i0 += 1.0
        u = i0
    if u < 0.0:
        return 0, 0.0, False
    if u >= n - 1:
        return n - 2, 1.0, False
    return int(i0), u - i0, True


@njit(refcount=False)
def _node_slope(grid: Any, i: int, j: int, rdx: float, rdy: float) -> tuple[float, float]:
    """Slopes (dh/dx, dh/dy) at node (i, j) by central differences, one-sided on the border
    (the nodal normals of :data:`GRID_NORMALS`); ``rdx``, ``rdy``: the reciprocal spacings
    (:func:`grid_kernel_params`; halved exactly for the central difference)."""
    ny, nx = grid.shape
    im, ip = max(i - 1, 0), min(i + 1, nx - 1)
    jm, jp = max(j - 1, 0), min(j + 1, ny - 1)
    return ((grid[j, ip] - grid[j, im]) * (rdx / (ip - im)),
            (grid[jp, i] - grid[jm, i]) * (rdy / (jp - jm)))


@njit(refcount=False)
def _grid_nodal_slopes(grid: Any, i: int, j: int, rdx: float, rdy: float, fx: float,
                       fy: float, in_x: bool, in_y: bool) -> tuple[float, float]:
    """Slopes (dh/dx, dh/dy) in cell (i, j) at fractions (fx, fy): the nodal slopes of its four
    corners interpolated bilinearly (:data:`GRID_NORMALS` "nodal"); 0 along an axis the point
    is clamped on."""
    gx = 1.0 - fx
    gy = 1.0 - fy
    sx00, sy00 = _node_slope(grid, i, j, rdx, rdy)
    sx10, sy10 = _node_slope(grid, i + 1, j, rdx, rdy)
    sx01, sy01 = _node_slope(grid, i, j + 1, rdx, rdy)
    sx11, sy11 = _node_slope(grid, i + 1, j + 1, rdx, rdy)
    dhdx = gy * (gx * sx00 + fx * sx10) + fy * (gx * sx01 + fx * sx11) if in_x else 0.0
    dhdy = gy * (gx * sy00 + fx * sy10) + fy * (gx * sy01 + fx * sy11) if in_y else 0.0
    return dhdx, dhdy


#: Length of a GRID's params as the kernels get them from :meth:`Terrain.kernel_args`
#: (:func:`grid_kernel_params`): ``[x0, y0, dx, dy, normals, 1/dx, 1/dy]``.
GRID_KERNEL_PARAMS = 7


def grid_kernel_params(params: np.ndarray) -> np.ndarray:
    """A GRID's ``params`` (4 or 5) as the kernels read them, :data:`GRID_KERNEL_PARAMS` long:
    the normals convention filled in (0 when absent) and the reciprocal spacings 1/dx, 1/dy
    appended, which :func:`terrain_height_normal` otherwise computes at every lookup (the same
    correctly rounded quotients either way, so the results do not depend on which form a
    caller passes)."""
    out = np.zeros(GRID_KERNEL_PARAMS)
    out[:params.shape[0]] = params
    out[5] = 1.0 / out[2]
    out[6] = 1.0 / out[3]
    return out


@njit(refcount=False, inline="always")
def grid_reciprocal_spacing(params: Any) -> tuple[float, float]:
    """``(1/dx, 1/dy)`` of a GRID's params: read from kernel params
    (:func:`grid_kernel_params`), computed from a user's own ``[x0, y0, dx, dy[, normals]]``
    (the same values). Every grid coordinate of a lookup, and of anything that must agree with
    its cells (the collision search's fan bound), is ``(x - x0) * (1/dx)``."""
    if params.shape[0] >= GRID_KERNEL_PARAMS:
        return params[5], params[6]
    return 1.0 / params[2], 1.0 / params[3]


# Inlined where it is called (numba inline="always"): a grid lookup is a few dozen instructions,
# and an out-of-line call passes each array as 7-9 scalars and keeps the callers' searches
# from sharing loads; the rarer nodal-slope branch stays a call to keep the inlined body small.
# Grid coordinates and slopes are products with the reciprocal spacings, not quotients: a
# lookup made four divisions (with the square root, the slowest of its operations; a
# collision search makes about 14 lookups per wheel), and the kernels' params carry 1/dx and
# 1/dy (grid_kernel_params). Within a few ulp of exact arithmetic, as the quotients were
# (test_terrain.py bounds both).
@njit(refcount=False, inline="always")
def _grid(params: Any, grid: Any, x: float, y: float) -> tuple[float, float, float, float]:
    """GRID: bilinear interpolation, edge-clamped outside the grid; normal per
    :data:`GRID_NORMALS`."""
    if x != x or y != y:
        return np.nan, np.nan, np.nan, np.nan
    rdx, rdy = grid_reciprocal_spacing(params)
    i, fx, in_x = _grid_axis((x - params[0]) * rdx, grid.shape[1])
    j, fy, in_y = _grid_axis((y - params[1]) * rdy, grid.shape[0])
    h00 = grid[j, i]
    h10 = grid[j, i + 1]
    h01 = grid[j + 1, i]
    h11 = grid[j + 1, i + 1]
    gx = 1.0 - fx
    gy = 1.0 - fy
    h = gy * (gx * h00 + fx * h10) + fy * (gx * h01 + fx * h11)
    if params.shape[0] > 4 and params[4] == _NODAL:  # nodal slopes, bilinearly interpolated
        dhdx, dhdy = _grid_nodal_slopes(grid, i, j, rdx, rdy, fx, fy, in_x, in_y)
    else:
        dhdx = (gy * (h10 - h00) + fy * (h11 - h01)) * rdx if in_x else 0.0
        dhdy = (gx * (h01 - h00) + fx * (h11 - h10)) * rdy if in_y else 0.0
    nx, ny, nz = _unit_normal(dhdx, dhdy)
    return h, nx, ny, nz


@njit(refcount=False)
def _analytic_height_normal(kind: int, params: Any, x: float,
                            y: float) -> tuple[float, float, float, float]:
    """:func:`terrain_height_normal` of the analytic kinds (PLANE, PROFILE)."""
    if kind == PLANE:
        return _plane(params, x, y)
    if kind == PROFILE:
        return _profile(params, x, y)
    raise ValueError("terrain_height_normal: unknown terrain kind (expected 0, 1 or 2)")


# Inlined where it is called (see _grid): the grid path in line, the analytic kinds a call.
@njit(refcount=False, inline="always")
def terrain_height_normal(
    kind: int, params: Any, grid: Any, x: float, y: float
) -> tuple[float, float, float, float]:
    """Terrain height and unit upward normal at one horizontal point.

    The quantities of Seegmiller (2014) eq. 2.8: ``terrainHeight(x, y)`` and
    ``terrainNormal(x, y)``, with

    .. math:: \\hat n \\propto [-\\partial h / \\partial x, -\\partial h / \\partial y, 1]^T .

    Parameters
    ----------
    kind : int
        ``PLANE``, ``PROFILE`` or ``GRID``.
    params : ndarray, shape (k,)
        float64 parameters of that kind (layout in the module docstring).
    grid : ndarray, shape (ny, nx)
        float64 height grid for ``GRID``; ignored (shape (1, 1)) for the analytic kinds.
    x, y : float
        World position [m].

    Returns
    -------
    h, nx, ny, nz : float
        Height [m] and unit normal (nz > 0). NaN for NaN input.
    """
    if kind == GRID:
        return _grid(params, grid, x, y)
    return _analytic_height_normal(kind, params, x, y)


@njit
def terrain_height_normal_many(
    kind: int, params: Any, grid: Any, x: Any, y: Any, h_out: Any, n_out: Any
) -> None:
    """Apply :func:`terrain_height_normal` to N points.

    Parameters
    ----------
    kind, params, grid
        As :func:`terrain_height_normal`.
    x, y : ndarray, shape (N,)
        World positions [m].
    h_out : ndarray, shape (N,)
        Output heights [m].
    n_out : ndarray, shape (N, 3)
        Output unit normals.
    """
    for k in range(x.shape[0]):
        h, nx, ny, nz = terrain_height_normal(kind, params, grid, x[k], y[k])
        h_out[k] = h
        n_out[k, 0] = nx
        n_out[k, 1] = ny
        n_out[k, 2] = nz


# ---------------------------------------------------------------------------------------------
# Terrain data
# ---------------------------------------------------------------------------------------------


def _readonly(a: np.ndarray) -> np.ndarray:
    out = np.array(a, dtype=np.float64, order="C", copy=True)
    out.flags.writeable = False
    return out


def _check_finite_grid(where: str, name: str, heights: np.ndarray) -> None:
    if heights.ndim != 2 or heights.shape[0] < 2 or heights.shape[1] < 2:
        raise TerrainError(
            f"{where}: {name} must be a 2-D (ny, nx) array with ny >= 2 and nx >= 2, "
            f"got shape {heights.shape}"
        )
    if np.isfinite(heights).all():  # the common case; the search below names the first bad one
        return
    bad = np.argwhere(~np.isfinite(heights))
    if bad.size:
        j, i = (int(v) for v in bad[0])
        raise TerrainError(
            f"{where}: {name} must be finite, got {heights[j, i]} at [{j}, {i}] "
            f"({len(bad)} non-finite values)"
        )


class TerrainArrays(NamedTuple):
    """A terrain as the numba kernels read it (``t`` in their arguments): the arrays of
    :func:`terrain_height_normal`, one record; it still unpacks as ``(kind, params, grid)``."""

    kind: int
    params: np.ndarray
    grid: np.ndarray


@dataclass(frozen=True, eq=False)
class Terrain:
    """A terrain as plain arrays, queried by :func:`terrain_height_normal`.

    Build terrains with the constructors of this module (:func:`flat`, :func:`inclined_plane`,
    :func:`profile`, :func:`ramp`, :func:`step`, :func:`zoe_ramp`, :func:`height_map`,
    :func:`rough`) or :mod:`wmr_model.io.terrain_files`. Equality is identity (arrays inside).

    Attributes
    ----------
    kind : int
        ``PLANE``, ``PROFILE`` or ``GRID``.
    params : ndarray, shape (k,)
        float64, read-only; layout per kind in the module docstring.
    grid : ndarray, shape (ny, nx)
        float64, read-only height grid; (1, 1) zeros for the analytic kinds.
    name : str
        Free label (file name, generator settings).
    """

    kind: int
    params: np.ndarray
    grid: np.ndarray
    name: str = ""
    #: ``params`` as the kernels read them (a GRID's with its reciprocal spacings,
    #: :func:`grid_kernel_params`); derived, not an argument
    _kernel_params: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        where = f"Terrain({self.name!r})" if self.name else "Terrain"
        if self.kind not in KIND_NAMES:
            raise TerrainError(
                f"{where}: kind must be one of PLANE (0), PROFILE (1), GRID (2), "
                f"got {self.kind!r}"
            )
        params = np.asarray(self.params, dtype=np.float64)
        grid = np.asarray(self.grid, dtype=np.float64)
        if params.ndim != 1:
            raise TerrainError(f"{where}: params must be 1-D, got shape {params.shape}")
        if grid.ndim != 2:
            raise TerrainError(f"{where}: grid must be 2-D, got shape {grid.shape}")
        kind_name = KIND_NAMES[self.kind]
        if self.kind == PLANE:
            expected = 3
        elif self.kind == GRID:
            expected = 5 if params.shape[0] == 5 else 4
        else:
            n = int(params[_P_N]) if params.shape[0] > _P_N and np.isfinite(params[_P_N]) else 0
            expected = _PROFILE_HEADER + 2 * n
        if params.shape[0] != expected:
            raise TerrainError(
                f"{where}: {kind_name} params must have length {expected}, "
                f"got {params.shape[0]}"
            )
        if self.kind == GRID:
            _check_finite_grid(where, "grid", grid)
            if not np.all(np.isfinite(params)) or params[2] <= 0.0 or params[3] <= 0.0:
                raise TerrainError(
                    f"{where}: GRID params [x0, y0, dx, dy] must be finite with dx, dy > 0, "
                    f"got {params.tolist()}"
                )
            if params.shape[0] == 5 and params[4] not in GRID_NORMALS.values():
                raise TerrainError(
                    f"{where}: GRID params[4] (normals) must be one of "
                    f"{sorted(GRID_NORMALS.values())} ({', '.join(GRID_NORMALS)}), "
                    f"got {params[4]!r}"
                )
        else:
            if grid.shape != (1, 1):
                raise TerrainError(
                    f"{where}: {kind_name} grid must have shape (1, 1), got {grid.shape}"
                )
            finite = np.isfinite(params)
            if self.kind == PROFILE:
                finite[_P_HALF_WIDTH] = params[_P_HALF_WIDTH] > 0.0  # +inf allowed
                if n < 2:
                    raise TerrainError(
                        f"{where}: PROFILE needs at least 2 breakpoints, got {n}"
                    )
            if not np.all(finite):
                raise TerrainError(
                    f"{where}: {kind_name} params must be finite, got {params.tolist()}"
                )
            if self.kind == PROFILE:
                s = params[_PROFILE_HEADER:_PROFILE_HEADER + n]
                if np.any(np.diff(s) < 0.0) or np.any(s[2:] == s[:-2]):
                    raise TerrainError(
                        f"{where}: PROFILE breakpoints must be non-decreasing with at most two "
                        f"equal in a row, got {s.tolist()}"
                    )
        object.__setattr__(self, "params", _readonly(params))
        object.__setattr__(self, "grid", _readonly(grid))
        object.__setattr__(self, "_kernel_params", _readonly(
            grid_kernel_params(params) if self.kind == GRID else params))

    def __repr__(self) -> str:
        return (
            f"Terrain(kind={KIND_NAMES[self.kind]}, params={self.params.shape[0]} values, "
            f"grid={self.grid.shape}, name={self.name!r})"
        )

    def kernel_args(self) -> TerrainArrays:
        """The record compiled loops take (:class:`TerrainArrays`: kind, params, grid); a
        GRID's params with the reciprocal spacings (:func:`grid_kernel_params`)."""
        return TerrainArrays(self.kind, self._kernel_params, self.grid)

    def height_normal(self, x: Any, y: Any) -> tuple[np.ndarray, np.ndarray]:
        """Terrain height and unit upward normal at many points (eq. 2.8 quantities).

        Parameters
        ----------
        x, y : array_like, broadcastable to a common shape (...)
            World positions [m].

        Returns
        -------
        h : ndarray, shape (...)
            Heights [m].
        n : ndarray, shape (..., 3)
            Unit upward normals.
        """
        xb, yb = np.broadcast_arrays(np.asarray(x, dtype=np.float64),
                                     np.asarray(y, dtype=np.float64))
        shape = xb.shape
        xs = np.array(xb, dtype=np.float64, order="C").reshape(-1)
        ys = np.array(yb, dtype=np.float64, order="C").reshape(-1)
        h = np.empty(xs.shape[0])
        n = np.empty((xs.shape[0], 3))
        terrain_height_normal_many(*self.kernel_args(), xs, ys, h, n)
        return h.reshape(shape), n.reshape(shape + (3,))

    def height(self, x: Any, y: Any) -> np.ndarray:
        """Terrain height [m] at points x, y (array_like, broadcast to shape (...))."""
        return self.height_normal(x, y)[0]


# ---------------------------------------------------------------------------------------------
# Constructors
# ---------------------------------------------------------------------------------------------

_UNUSED_GRID = np.zeros((1, 1))


def _finite(where: str, name: str, value: Any, unit: str) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise TerrainError(f"{where}: {name} must be a number [{unit}], got {value!r}") from None
    if not math.isfinite(v):
        raise TerrainError(f"{where}: {name} must be finite [{unit}], got {v}")
    return v


def _positive(where: str, name: str, value: Any, unit: str) -> float:
    v = _finite(where, name, value, unit)
    if v <= 0.0:
        raise TerrainError(f"{where}: {name} must be > 0 {unit}, got {v}")
    return v


def _pair(where: str, name: str, value: Any, unit: str) -> tuple[float, float]:
    a = np.asarray(value, dtype=np.float64) if not isinstance(value, str) else None
    if a is None or a.shape != (2,):
        raise TerrainError(f"{where}: {name} must be a pair (x, y) [{unit}], got {value!r}")
    return _finite(where, f"{name}[0]", a[0], unit), _finite(where, f"{name}[1]", a[1], unit)


def flat(z: float = 0.0) -> Terrain:
    """Horizontal plane at height ``z`` [m]."""
    z = _finite("flat", "z", z, "m")
    return Terrain(PLANE, np.array([z, 0.0, 0.0]), _UNUSED_GRID, name=f"flat(z={z:g})")


def inclined_plane(slope: float, heading: float = 0.0, z0: float = 0.0) -> Terrain:
    """Inclined plane rising at angle ``slope`` in direction ``heading``.

    .. math:: h(x, y) = z_0 + \\tan(\\text{slope}) (x \\cos\\psi + y \\sin\\psi)

    Parameters
    ----------
    slope : float
        Inclination [rad], |slope| < pi/2; negative values fall along ``heading``.
    heading : float
        Direction of steepest ascent psi [rad], measured from +x toward +y.
    z0 : float
        Height at the origin [m].
    """
    where = "inclined_plane"
    slope = _finite(where, "slope", slope, "rad")
    heading = _finite(where, "heading", heading, "rad")
    z0 = _finite(where, "z0", z0, "m")
    if abs(slope) >= 0.5 * math.pi:
        raise TerrainError(f"{where}: slope must satisfy |slope| < pi/2 rad, got {slope}")
    g = math.tan(slope)
    return Terrain(
        PLANE,
        np.array([z0, g * math.cos(heading), g * math.sin(heading)]),
        _UNUSED_GRID,
        name=f"inclined_plane(slope={slope:g}, heading={heading:g}, z0={z0:g})",
    )


def _profile_breaks(where: str, s_breaks: Any, heights: Any) -> tuple[np.ndarray, np.ndarray]:
    """Checked (n,) breakpoints and heights of :func:`profile`: n >= 2, same shape, finite,
    breakpoints non-decreasing with at most two equal in a row."""
    s = np.asarray(s_breaks, dtype=np.float64)
    h = np.asarray(heights, dtype=np.float64)
    if s.ndim != 1 or s.shape[0] < 2:
        raise TerrainError(
            f"{where}: s_breaks must be 1-D with at least 2 breakpoints, got shape {s.shape}"
        )
    if h.shape != s.shape:
        raise TerrainError(
            f"{where}: heights must have shape {s.shape} to match s_breaks, got {h.shape}"
        )
    for arr, label in ((s, "s_breaks"), (h, "heights")):
        bad = np.flatnonzero(~np.isfinite(arr))
        if bad.size:
            raise TerrainError(
                f"{where}: {label} must be finite, got {arr[bad[0]]} at index {bad[0]}"
            )
    dec = np.flatnonzero(np.diff(s) < 0.0)
    if dec.size:
        k = int(dec[0]) + 1
        raise TerrainError(
            f"{where}: s_breaks must be non-decreasing, got s_breaks[{k}] = {s[k]} < "
            f"s_breaks[{k - 1}] = {s[k - 1]}"
        )
    triple = np.flatnonzero(s[2:] == s[:-2])
    if triple.size:
        k = int(triple[0])
        raise TerrainError(
            f"{where}: s_breaks may repeat a value at most twice (one vertical step), got "
            f"s_breaks[{k}:{k + 3}] = {s[k:k + 3].tolist()}"
        )
    return s, h


def profile(
    s_breaks: Any,
    heights: Any,
    heading: float = 0.0,
    origin: Any = (0.0, 0.0),
    half_width: float = math.inf,
    base: float = 0.0,
    name: str = "",
) -> Terrain:
    """Piecewise-linear height profile along a heading (a 2.5-D extruded terrain).

    With ``d = [x, y] - origin``, ``s = d . [cos psi, sin psi]`` (distance along the heading) and
    ``l = d . [-sin psi, cos psi]`` (lateral offset, + to the left):

    .. math::

        h(x, y) = \\begin{cases} \\mathrm{interp}(s; s_k, h_k) & |l| \\le w \\\\
                                 \\text{base} & |l| > w \\end{cases}

    where interp is linear between breakpoints and constant (h_0, h_{n-1}) outside them.

    Tie rules (height is continuous except at steps and the lateral edges): a point exactly at
    a breakpoint takes the normal of the segment starting there (its +s side). Two equal
    breakpoints make a vertical step: the height jumps, a point exactly on it gets the value
    after the step and a vertical normal. Points with |l| == w are inside.

    Parameters
    ----------
    s_breaks : array_like, shape (n,)
        Breakpoint distances s_k [m], n >= 2, non-decreasing, at most two equal in a row.
    heights : array_like, shape (n,)
        Heights h_k [m] at the breakpoints.
    heading : float
        Direction psi of increasing s [rad], from +x toward +y.
    origin : (float, float)
        World point where s = 0 and l = 0 [m].
    half_width : float
        Lateral half-extent w [m] (> 0, may be inf).
    base : float
        Height outside the lateral extent [m].
    name : str
        Label.
    """
    where = "profile"
    s, h = _profile_breaks(where, s_breaks, heights)
    heading = _finite(where, "heading", heading, "rad")
    ox, oy = _pair(where, "origin", origin, "m")
    hw = float(half_width)
    if not hw > 0.0:
        raise TerrainError(f"{where}: half_width must be > 0 m (inf allowed), got {hw}")
    base = _finite(where, "base", base, "m")
    n = s.shape[0]
    params = np.concatenate(
        ([ox, oy, math.cos(heading), math.sin(heading), hw, base, float(n)], s, h)
    )
    return Terrain(PROFILE, params, _UNUSED_GRID, name=name or f"profile(n={n})")


def ramp(
    height: float,
    up_length: float,
    top_length: float,
    down_length: float,
    start: float,
    heading: float = 0.0,
    half_width: float = math.inf,
    *,
    origin: Any = (0.0, 0.0),
) -> Terrain:
    """Trapezoidal ramp: up, flat top, down, on flat ground at height 0.

    Breakpoints along s (see :func:`profile`): ``[start, start + up, start + up + top,
    start + up + top + down]`` with heights ``[0, height, height, 0]``. ``up_length`` or
    ``down_length`` may be 0 (a vertical face), ``top_length`` may be 0 (a triangle); all
    lengths [m], ``start`` [m] along ``heading`` [rad] from ``origin`` [m].
    """
    where = "ramp"
    height = _finite(where, "height", height, "m")
    lengths = [_finite(where, k, v, "m") for k, v in
               (("up_length", up_length), ("top_length", top_length),
                ("down_length", down_length))]
    for label, v in zip(("up_length", "top_length", "down_length"), lengths):
        if v < 0.0:
            raise TerrainError(f"{where}: {label} must be >= 0 m, got {v}")
    if lengths[0] + lengths[1] + lengths[2] <= 0.0:
        raise TerrainError(f"{where}: total length must be > 0 m, got {sum(lengths)}")
    if lengths[1] == 0.0 and (lengths[0] == 0.0 or lengths[2] == 0.0):
        raise TerrainError(
            f"{where}: a zero top_length needs up_length and down_length > 0 m, "
            f"got {lengths[0]} and {lengths[2]}"
        )
    start = _finite(where, "start", start, "m")
    up, top, down = lengths
    s = [start, start + up, start + up + top, start + up + top + down]
    return profile(s, [0.0, height, height, 0.0], heading=heading, origin=origin,
                   half_width=half_width, base=0.0,
                   name=f"ramp(height={height:g}, up={up:g}, top={top:g}, down={down:g})")


def step(height: float, at: float, heading: float = 0.0) -> Terrain:
    """Vertical step from 0 to ``height`` [m] at distance ``at`` [m] along ``heading`` [rad].

    Exactly at the step the height is ``height`` and the normal vertical (see :func:`profile`).
    """
    height = _finite("step", "height", height, "m")
    at = _finite("step", "at", at, "m")
    return profile([at, at], [0.0, height], heading=heading,
                   name=f"step(height={height:g}, at={at:g})")


ZOE_RAMP_HEIGHT = 0.41
ZOE_RAMP_LENGTH = 1.79
ZOE_RAMP_TOP = 0.61


def zoe_ramp(
    start: float = 2.0,
    heading: float = 0.0,
    *,
    half_width: float = math.inf,
    origin: Any = (0.0, 0.0),
) -> Terrain:
    """The ramp obstacle of the Zoë 3D odometry experiments, Seegmiller (2014) §3.4.3.

    0.41 m high, 1.79 m long in total with a 0.61 m flat top, so the up and down slopes are
    each (1.79 - 0.61) / 2 = 0.59 m long. It starts ``start`` [m] along ``heading`` [rad]
    from ``origin``; ``half_width`` [m] limits its lateral extent (e.g. under one wheel side).
    """
    side = 0.5 * (ZOE_RAMP_LENGTH - ZOE_RAMP_TOP)
    t = ramp(ZOE_RAMP_HEIGHT, side, ZOE_RAMP_TOP, side, start, heading, half_width,
             origin=origin)
    return Terrain(t.kind, t.params, t.grid, name=f"zoe_ramp(start={float(start):g})")


def height_map(
    heights: Any,
    resolution: Any,
    origin: Any = (0.0, 0.0),
    name: str = "",
    normals: str = "bilinear",
) -> Terrain:
    """Height map on a regular grid, bilinearly interpolated.

    ``heights[j, i]`` is the height at ``(x0 + i dx, y0 + j dy)``. Inside cell (i, j), with
    ``fx = (x - x0)/dx - i`` and ``fy = (y - y0)/dy - j`` in [0, 1):

    .. math::

        h = (1 - f_y)[(1 - f_x) h_{j,i} + f_x h_{j,i+1}] + f_y [(1 - f_x) h_{j+1,i}
            + f_x h_{j+1,i+1}]

    and the normal is that of this bilinear patch (exact derivatives). A point on a cell
    boundary belongs to the cell on its +x/+y side (so its normal is that cell's). With
    ``normals="nodal"`` the slopes are instead those of the nodes (central differences,
    one-sided on the border) interpolated the same way, as the thesis' C++ library computes
    the normals of its grid terrains (:data:`GRID_NORMALS`): continuous across cell boundaries.

    Outside the grid, x and y are clamped to the grid's extent: the height is that of the
    nearest edge, and the normal is that of the clamped function (no slope across the edge;
    along an edge the slope of the edge remains; beyond a corner the normal is vertical).

    Parameters
    ----------
    heights : array_like, shape (ny, nx)
        Heights [m], finite, ny >= 2 and nx >= 2.
    resolution : float or (float, float)
        Node spacing (dx, dy) [m], > 0.
    origin : (float, float)
        Position (x0, y0) of ``heights[0, 0]`` [m].
    name : str
        Label.
    normals : {"bilinear", "nodal"}
        Normal convention (:data:`GRID_NORMALS`).
    """
    where = "height_map"
    if normals not in GRID_NORMALS:
        raise TerrainError(
            f"{where}: normals must be one of {', '.join(GRID_NORMALS)}, got {normals!r}"
        )
    h = np.asarray(heights, dtype=np.float64)
    _check_finite_grid(where, "heights", h)
    r = np.asarray(resolution, dtype=np.float64)
    if r.shape == ():
        dx = dy = _positive(where, "resolution", r, "m")
    elif r.shape == (2,):
        dx = _positive(where, "resolution[0]", r[0], "m")
        dy = _positive(where, "resolution[1]", r[1], "m")
    else:
        raise TerrainError(
            f"{where}: resolution must be a float or a pair (dx, dy) [m], got shape {r.shape}"
        )
    x0, y0 = _pair(where, "origin", origin, "m")
    params = [x0, y0, dx, dy] + ([float(GRID_NORMALS[normals])] if normals != "bilinear" else [])
    return Terrain(GRID, np.array(params), h,
                   name=name or f"height_map({h.shape[0]}x{h.shape[1]})")


def _axis_nodes(where: str, name: str, rng: Any, resolution: float) -> tuple[float, int]:
    lo, hi = _pair(where, name, rng, "m")
    if not hi > lo:
        raise TerrainError(f"{where}: {name} must be (min, max) with max > min, got {rng!r}")
    n = int(math.ceil((hi - lo) / resolution - 1e-9)) + 1
    return lo, max(n, 2)


def rough(
    rms: float,
    correlation_length: float,
    seed: Any,
    x_range: Any = (-5.0, 15.0),
    y_range: Any = (-5.0, 5.0),
    resolution: float = 0.05,
) -> Terrain:
    """Random rough terrain: Gaussian-filtered white noise (Seegmiller 2014 §2.5.1, §2.5.4).

    White Gaussian noise w on the grid nodes is convolved with the isotropic kernel
    g(r) = exp(-|r|^2 / (2 sigma^2)). The autocorrelation of g * w is that of g with itself,

    .. math::

        \\rho(\\tau) = \\exp\\left(-\\frac{|\\tau|^2}{4 \\sigma^2}\\right)
                     = \\exp\\left(-\\frac{|\\tau|^2}{L^2}\\right),

    so we define the **correlation length** L as the lag at which the normalized
    autocorrelation falls to 1/e, giving sigma = L / 2. The field is then shifted and scaled so
    that over the grid nodes the mean height is 0 and the RMS height equals ``rms`` (to
    rounding). The noise is drawn on a grid padded by the kernel's support (4 sigma), so the
    terrain is statistically the same near its edges as in its middle (not periodic).

    The grid spans ``x_range`` and ``y_range`` from their minima with spacing ``resolution``;
    the node count is rounded up so the grid covers each range (it may overshoot the maximum
    by less than one cell). L should span a few cells (L >= 2 resolution) for rho to follow the
    formula above.

    Parameters
    ----------
    rms : float
        RMS height [m], >= 0 (thesis: 0.05 for Rocky 7, 0.15 for Zoë).
    correlation_length : float
        L [m], > 0 (thesis: 0.2 for Rocky 7, 0.8 for Zoë).
    seed : int or numpy SeedSequence
        Seed of ``np.random.default_rng``; same seed, same terrain.
    x_range, y_range : (float, float)
        Extent [m].
    resolution : float
        Node spacing [m], > 0.

    Returns
    -------
    Terrain
        A ``GRID`` terrain of shape (ny, nx).
    """
    where = "rough"
    rms = _finite(where, "rms", rms, "m")
    if rms < 0.0:
        raise TerrainError(f"{where}: rms must be >= 0 m, got {rms}")
    corr = _positive(where, "correlation_length", correlation_length, "m")
    res = _positive(where, "resolution", resolution, "m")
    x0, nx = _axis_nodes(where, "x_range", x_range, res)
    y0, ny = _axis_nodes(where, "y_range", y_range, res)
    sigma_cells = 0.5 * corr / res
    truncate = 4.0
    pad = int(math.ceil(truncate * sigma_cells)) + 1
    from wmr_model.budgets import MAX_GRID_POINTS, check_budget

    check_budget(f"{where}: grid nodes ({ny + 2 * pad} x {nx + 2 * pad} at resolution {res:g} m, "
                 f"padding included)", float(ny + 2 * pad) * float(nx + 2 * pad),
                 MAX_GRID_POINTS, "use a coarser resolution or a longer correlation length")
    if isinstance(seed, (int, np.integer)) and seed < 0:
        raise TerrainError(f"{where}: seed must be an integer >= 0, got {seed}")
    rng = np.random.default_rng(seed)
    noise = rng.standard_normal((ny + 2 * pad, nx + 2 * pad))
    field = ndimage.gaussian_filter(noise, sigma_cells, mode="constant", truncate=truncate)
    field = field[pad:pad + ny, pad:pad + nx]
    field = field - field.mean()
    current = math.sqrt(float(np.mean(field * field)))
    heights = field * (rms / current) if current > 0.0 else np.zeros_like(field)
    return height_map(heights, res, (x0, y0),
                      name=f"rough(rms={rms:g}, correlation_length={corr:g}, seed={seed})")
