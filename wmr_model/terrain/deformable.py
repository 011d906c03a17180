"""Deformable terrain: a height map that wheels press ruts into, with compaction and avalanching.

The layer is a regular grid of soil columns (Grand et al. 2001, seed 004 §3.2: "column cells").
Per column it stores the surface height ``h`` [m] and the compacted depth ``zc`` [m], the
depth by which wheels have pressed soil down into a denser state. A wheel pass lowers the
columns under it by its sinkage Δ; of that,

* a fraction ``1 - xi`` is compaction (Bekker's pressure-sinkage is a compaction law: the soil
  gets denser, its height map volume is not conserved): ``zc += (1 - xi) Δ``;
* a fraction ``xi`` is displaced: that volume is pushed into the berm columns bordering the
  rut (seed 004: "volume variation ... defines the column matter flows toward the adjacent
  columns"), in equal shares.

Soil mass :math:`M = \\rho\\,dx\\,dy\\sum_{cols}(h + z_c)` (loose-soil density ρ; a compacted
column holds the same mass in less height) is therefore conserved by every operation for any
``xi``, and the height-map volume :math:`dx\\,dy\\sum h` is conserved when ``xi = 1``
(incompressible soil) and by avalanching.

Avalanching (seed 004 eqs. 14-19 move matter between neighbouring columns when the slope
exceeds a critical angle; their flow rate comes from a viscous sliding law whose constants the
paper does not give). We use the quasi-static limit of that column flow, as in Li and Moshell
(1993, seed 004 ref. [11]): whenever the slope between two axis neighbours exceeds
tan(repose), half the excess height moves from the higher to the lower column, which brings the
pair exactly to the angle of repose; sweeps repeat (Gauss-Seidel) until no pair exceeds it by
more than a tolerance. Transfers are pairwise and equal-area, so volume and mass are conserved
to rounding. Slopes are checked between x and y neighbours (not diagonals).

Each column also stores ``js`` [m], the longitudinal shear displacement wheels have left in
it (cumulative for following wheels, see :mod:`wmr_model.contact.bekker`).

The multipass state seen by a later wheel is (rut surface ``h``, ``zc``, ``js``):
:meth:`DeformableTerrain.terrain` gives the surface as a GRID
:class:`~wmr_model.terrain.surface.Terrain` for any simulation or prediction, and
:meth:`DeformableTerrain.compaction_at` the ``zc`` and ``js`` to pass to the ``bekker`` contact
model (its ``zc`` and ``j0``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from wmr_model._jit import njit
from wmr_model.errors import ParameterError, TerrainError
from wmr_model.terrain.surface import Terrain, height_map

__all__ = ["DeformableTerrain", "relax_to_repose", "RELAX_TOL"]

#: Slope tolerance of the avalanche sweeps [-] (tan units): stop when every neighbour slope is
#: within this of tan(repose). Far below any measured repose angle's uncertainty.
RELAX_TOL = 1e-9


#: Columns per block of the avalanche sweeps' bookkeeping (see :func:`relax_to_repose`).
_RELAX_BLOCK = 16


@njit
def relax_to_repose(h, fixed, dx, dy, tan_repose, tol, max_sweeps):
    """Avalanche the height grid ``h`` (ny, nx) in place to slopes <= tan_repose; returns sweeps.

    Pairwise transfers of half the excess height between x neighbours (spacing dx) and y
    neighbours (dy); pairs with a ``fixed`` (ny, nx) node (soil held by a wheel) are skipped;
    stops when the largest excess slope of the other pairs is <= tol or after max_sweeps.

    Each sweep visits the x pairs row by row, then the y pairs, in index order (Gauss-Seidel).
    A run of :data:`_RELAX_BLOCK` pairs is skipped when none of its nodes has changed since
    the run was last visited and moved nothing: it would find the same heights and move nothing
    again. So the result, the sweep count and the order of every transfer are those of visiting
    every pair; only the visits that cannot move soil are left out (late sweeps move soil only
    near the rut edges).
    """
    ny, nx = h.shape
    lim_x = tan_repose * dx
    lim_y = tan_repose * dy
    B = _RELAX_BLOCK
    nb = (nx + B - 1) // B
    # changed[j, c]: visit number of the last change of a node in row j, columns [cB, cB + B);
    # seen_x[j, c] / seen_y[j, c]: visit number of the last visit of the run of x pairs (j, i),
    # i in [cB, cB + B) / of y pairs (j, i)-(j + 1, i), i in [cB, cB + B).
    changed = np.zeros((ny, nb), dtype=np.int64)
    seen_x = np.full((ny, nb), -1, dtype=np.int64)
    seen_y = np.full((ny, nb), -1, dtype=np.int64)
    visit = 0
    for sweep in range(max_sweeps):
        worst = 0.0
        for j in range(ny):
            for c in range(nb):
                i0 = c * B
                i1 = min(i0 + B, nx - 1)
                if i0 >= i1:
                    continue
                last = changed[j, c]
                if c + 1 < nb:
                    last = max(last, changed[j, c + 1])
                if last < seen_x[j, c]:
                    continue
                visit += 1
                seen_x[j, c] = visit
                for i in range(i0, i1):
                    if fixed[j, i] or fixed[j, i + 1]:
                        continue
                    d = h[j, i] - h[j, i + 1]
                    ex = abs(d) - lim_x
                    if ex > 0.0:
                        q = 0.5 * ex if d > 0.0 else -0.5 * ex
                        h[j, i] -= q
                        h[j, i + 1] += q
                        worst = max(worst, ex / dx)
                        changed[j, c] = visit
                        changed[j, (i + 1) // B] = visit
        for j in range(ny - 1):
            for c in range(nb):
                i0 = c * B
                i1 = min(i0 + B, nx)
                if max(changed[j, c], changed[j + 1, c]) < seen_y[j, c]:
                    continue
                visit += 1
                seen_y[j, c] = visit
                for i in range(i0, i1):
                    if fixed[j, i] or fixed[j + 1, i]:
                        continue
                    d = h[j, i] - h[j + 1, i]
                    ex = abs(d) - lim_y
                    if ex > 0.0:
                        q = 0.5 * ex if d > 0.0 else -0.5 * ex
                        h[j, i] -= q
                        h[j + 1, i] += q
                        worst = max(worst, ex / dy)
                        changed[j, c] = visit
                        changed[j + 1, c] = visit
        if worst <= tol:
            return sweep + 1
    return max_sweeps


@dataclass
class DeformableTerrain:
    """Mutable soil height map with compaction state (per-step data, not a compiled model).

    Attributes:
        h: (ny, nx) surface heights [m], ``h[j, i]`` at (x0 + i dx, y0 + j dy).
        zc: (ny, nx) compacted depth [m] (0 = virgin soil).
        origin: (x0, y0) [m]; resolution: (dx, dy) [m].
        rho: loose-soil bulk density [kg/m^3]; repose: angle of repose [rad].
        xi: displaced fraction of a wheel's sinkage in [0, 1] (0: pure compaction, Bekker;
            1: incompressible, all volume pushed into berms).
        js: (ny, nx) accumulated longitudinal shear displacement [m] (default zeros).
    """

    h: np.ndarray
    zc: np.ndarray
    origin: tuple[float, float]
    resolution: tuple[float, float]
    rho: float
    repose: float
    xi: float = 0.0
    js: np.ndarray | None = None

    def __post_init__(self) -> None:
        self.h = np.array(self.h, dtype=float)
        self.zc = np.array(self.zc, dtype=float)
        self.js = np.zeros_like(self.h) if self.js is None else np.array(self.js, dtype=float)
        if self.js.shape != self.h.shape:
            raise TerrainError(f"DeformableTerrain: js: expected {self.h.shape}, "
                               f"got {self.js.shape}")
        if self.h.ndim != 2 or self.h.shape[0] < 2 or self.h.shape[1] < 2:
            raise TerrainError(f"DeformableTerrain: h must be (ny, nx) with ny, nx >= 2, "
                               f"got {self.h.shape}")
        if self.zc.shape != self.h.shape:
            raise TerrainError(f"DeformableTerrain: zc: expected {self.h.shape}, "
                               f"got {self.zc.shape}")
        if not (np.all(np.isfinite(self.h)) and np.all(np.isfinite(self.zc))):
            raise TerrainError("DeformableTerrain: h and zc must be finite")
        dx, dy = (float(v) for v in self.resolution)
        if not (dx > 0 and dy > 0):
            raise TerrainError(f"DeformableTerrain: resolution must be > 0 m, got {(dx, dy)}")
        self.resolution = (dx, dy)
        self.origin = (float(self.origin[0]), float(self.origin[1]))
        if not 0.0 <= self.xi <= 1.0:
            raise ParameterError(f"DeformableTerrain: xi must be in [0, 1], got {self.xi}")
        if not 0.0 < self.repose < 0.5 * math.pi:
            raise ParameterError(f"DeformableTerrain: repose must be in (0, pi/2) rad, "
                                 f"got {self.repose}")
        if not self.rho > 0.0:
            raise ParameterError(f"DeformableTerrain: rho must be > 0 kg/m^3, got {self.rho}")

    @classmethod
    def flat(cls, x_range: tuple[float, float], y_range: tuple[float, float],
             resolution: float, rho: float, repose: float, xi: float = 0.0,
             z: float = 0.0) -> DeformableTerrain:
        """Virgin flat soil at height ``z`` over the given ranges [m]."""
        nx = int(math.ceil((x_range[1] - x_range[0]) / resolution - 1e-9)) + 1
        ny = int(math.ceil((y_range[1] - y_range[0]) / resolution - 1e-9)) + 1
        return cls(np.full((ny, nx), float(z)), np.zeros((ny, nx)),
                   (x_range[0], y_range[0]), (resolution, resolution), rho, repose, xi)

    # -- queries --------------------------------------------------------------------------------
    def node_xy(self) -> tuple[np.ndarray, np.ndarray]:
        """Node coordinates (ny, nx) each [m]."""
        ny, nx = self.h.shape
        x = self.origin[0] + self.resolution[0] * np.arange(nx)
        y = self.origin[1] + self.resolution[1] * np.arange(ny)
        return np.meshgrid(x, y)

    def volume(self) -> float:
        """Height-map volume above z = 0, dx dy sum(h) [m^3]."""
        return float(self.h.sum() * self.resolution[0] * self.resolution[1])

    def soil_mass(self) -> float:
        """Soil mass above z = 0, rho dx dy sum(h + zc) [kg] (conserved by every operation)."""
        return float(self.rho * self.resolution[0] * self.resolution[1]
                     * (self.h.sum() + self.zc.sum()))

    def max_slope(self) -> float:
        """Largest |slope| between x or y neighbours [-]."""
        sx = np.abs(np.diff(self.h, axis=1)).max() / self.resolution[0]
        sy = np.abs(np.diff(self.h, axis=0)).max() / self.resolution[1]
        return float(max(sx, sy))

    def terrain(self, name: str = "deformable") -> Terrain:
        """Snapshot of the surface as a GRID terrain (bilinear) for simulation and prediction."""
        return height_map(self.h.copy(), self.resolution, self.origin, name=name)

    def footprint(self, p0: tuple[float, float] | np.ndarray,
                  p1: tuple[float, float] | np.ndarray, width: float) -> np.ndarray:
        """Boolean (ny, nx) mask of nodes swept by a wheel of ``width`` [m] from p0 to p1 [m]:
        along the segment within [0, |p1 - p0|] and within ``width / 2`` of its line."""
        (j0, j1, i0, i1), local = self.swept(p0, p1, width)
        out = np.zeros(self.h.shape, dtype=bool)
        out[j0:j1, i0:i1] = local
        return out

    def swept(self, p0: tuple[float, float] | np.ndarray, p1: tuple[float, float] | np.ndarray,
               width: float) -> tuple[tuple[int, int, int, int], np.ndarray]:
        """:meth:`footprint` as its index window ``(j0, j1, i0, i1)`` (half-open) and the mask
        inside that window (the nodes outside it are not swept)."""
        p0 = np.asarray(p0, float)
        p1 = np.asarray(p1, float)
        d = p1 - p0
        L = float(np.hypot(d[0], d[1]))
        if L <= 0.0:
            raise ParameterError("DeformableTerrain: p0 and p1 must differ")
        u = d / L
        # Only nodes in the segment's bounding box widened by width/2 can be swept: evaluate
        # those (the cost follows the footprint, not the grid; same nodes as a full scan).
        j0, j1, i0, i1 = self.window(np.minimum(p0, p1) - 0.5 * width,
                                     np.maximum(p0, p1) + 0.5 * width)
        j1, i1 = max(j1, j0), max(i1, i0)
        x = self.origin[0] + self.resolution[0] * np.arange(i0, i1)
        y = self.origin[1] + self.resolution[1] * np.arange(j0, j1)
        X, Y = np.meshgrid(x, y)
        along = (X - p0[0]) * u[0] + (Y - p0[1]) * u[1]
        lateral = -(X - p0[0]) * u[1] + (Y - p0[1]) * u[0]
        return (j0, j1, i0, i1), (along >= 0.0) & (along <= L) & (np.abs(lateral) <= 0.5 * width)

    def window(self, lo: np.ndarray, hi: np.ndarray) -> tuple[int, int, int, int]:
        """Index window ``(j0, j1, i0, i1)`` (half-open, clipped to the grid) of the nodes with
        ``lo <= (x, y) <= hi`` [m], one node of slack on each side."""
        ny, nx = self.h.shape
        (x0, y0), (dx, dy) = self.origin, self.resolution
        i0 = max(int(math.floor((lo[0] - x0) / dx)) - 1, 0)
        i1 = min(int(math.ceil((hi[0] - x0) / dx)) + 2, nx)
        j0 = max(int(math.floor((lo[1] - y0) / dy)) - 1, 0)
        j1 = min(int(math.ceil((hi[1] - y0) / dy)) + 2, ny)
        return j0, j1, i0, i1

    def compaction_at(self, p0: tuple[float, float], p1: tuple[float, float],
                      width: float) -> tuple[float, float, float]:
        """Mean surface height, compacted depth ``zc`` and shear displacement ``js`` over a
        wheel's swept path [m]."""
        (j0, j1, i0, i1), m = self.swept(p0, p1, width)
        if not m.any():
            raise ParameterError("compaction_at: path covers no grid node")
        assert self.js is not None
        w = np.s_[j0:j1, i0:i1]
        return (float(self.h[w][m].mean()), float(self.zc[w][m].mean()),
                float(self.js[w][m].mean()))

    # -- updates --------------------------------------------------------------------------------
    def roll(self, p0: tuple[float, float], p1: tuple[float, float], width: float,
             sinkage: float, shear: float = 0.0, relax: bool = True) -> int:
        """Press a rut: lower the nodes swept by a wheel of ``width`` from p0 to p1 by ``sinkage``.

        ``(1 - xi) sinkage`` becomes compaction ``zc``; the displaced ``xi`` part is shared
        equally by the unswept 4-neighbours of the swept nodes (berms); ``shear`` [m] is added
        to the swept nodes' ``js``. Then, if ``relax``, avalanche to the angle of repose.
        Returns the number of avalanche sweeps.
        """
        m = self.footprint(p0, p1, width)
        if not m.any():
            raise ParameterError("roll: path covers no grid node")
        return self.press(m, sinkage, shear, relax)

    def press(self, mask: np.ndarray, sinkage: float, shear: float = 0.0,
              relax: bool = True) -> int:
        """Lower the nodes of ``mask`` (ny, nx) by ``sinkage`` [m]: the update of :meth:`roll`.

        ``(1 - xi) sinkage`` becomes compaction ``zc``; the displaced ``xi`` part is shared
        equally by the unmasked 4-neighbours of the masked nodes (berms); ``shear`` [m] is added
        to their ``js``; then, if ``relax``, avalanche. Returns the number of avalanche sweeps.
        """
        if not (math.isfinite(sinkage) and sinkage >= 0.0):
            raise ParameterError(f"DeformableTerrain: sinkage must be >= 0 m, got {sinkage}")
        m = np.asarray(mask, dtype=bool)
        if m.shape != self.h.shape:
            raise TerrainError(f"DeformableTerrain.press: mask: expected {self.h.shape}, "
                               f"got {m.shape}")
        rows = np.flatnonzero(m.any(axis=1))
        if not rows.size:
            return 0
        cols = np.flatnonzero(m.any(axis=0))
        # Work in the mask's bounding box plus one node (its berms): the same nodes, in the
        # same order, as on the whole grid; the cost follows the rut, not the grid.
        ny, nx = self.h.shape
        w = np.s_[max(rows[0] - 1, 0):min(rows[-1] + 2, ny), max(cols[0] - 1, 0):
                  min(cols[-1] + 2, nx)]
        mw = m[w]
        h, zc = self.h[w], self.zc[w]
        assert self.js is not None
        h[mw] -= sinkage
        zc[mw] += (1.0 - self.xi) * sinkage
        self.js[w][mw] += shear
        moved = self.xi * sinkage * int(mw.sum())
        if moved > 0.0:
            berm = np.zeros_like(mw)
            berm[:, 1:] |= mw[:, :-1]
            berm[:, :-1] |= mw[:, 1:]
            berm[1:, :] |= mw[:-1, :]
            berm[:-1, :] |= mw[1:, :]
            berm &= ~mw
            if not berm.any():
                raise ParameterError("DeformableTerrain: the rut covers the whole grid; "
                                     "no room for berms")
            h[berm] += moved / int(berm.sum())
        return self.relax() if relax else 0

    def relax(self, max_sweeps: int = 100000, fixed: np.ndarray | None = None,
              window: tuple[int, int, int, int] | None = None) -> int:
        """Avalanche the surface to the angle of repose (see module docstring); returns sweeps.

        ``fixed`` (ny, nx) marks nodes whose soil is held in place (e.g. under a wheel): no
        avalanche moves soil into or out of them. ``window`` ``(j0, j1, i0, i1)`` relaxes only
        those nodes (pairs across its border are left alone): for a change known to be local,
        with room around it for the avalanche (a rut of depth d spreads ~d / tan(repose)).
        """
        if fixed is None:
            fixed = np.zeros(self.h.shape, dtype=bool)
        elif np.shape(fixed) != self.h.shape:
            raise TerrainError(f"DeformableTerrain.relax: fixed: expected {self.h.shape}, "
                               f"got {np.shape(fixed)}")
        args = (self.resolution[0], self.resolution[1], math.tan(self.repose), RELAX_TOL,
                max_sweeps)
        if window is None:
            return int(relax_to_repose(self.h, np.ascontiguousarray(fixed, dtype=np.bool_),
                                       *args))
        j0, j1, i0, i1 = window
        h = np.ascontiguousarray(self.h[j0:j1, i0:i1])
        n = int(relax_to_repose(h, np.ascontiguousarray(fixed[j0:j1, i0:i1], dtype=np.bool_),
                                *args))
        self.h[j0:j1, i0:i1] = h
        return n
