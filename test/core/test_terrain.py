"""Tests of wmr_model.terrain.surface and wmr_model.io.terrain_files.

Oracles: closed forms (plane, linear functions), finite differences of the height for normals,
scipy's RegularGridInterpolator and np.interp for interpolation, sample autocorrelation for the
rough-terrain generator (and the thesis library's own benchmark terrains), a per-point loop over
the scalar kernel for the vectorized methods, Pillow and an independent PNG encoder for the PNG
reader.
"""

from __future__ import annotations

import dataclasses
import math
import struct
import zlib
from pathlib import Path

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.interpolate import RegularGridInterpolator

from wmr_model._jit import JIT_ENABLED, njit
from wmr_model.errors import TerrainError
from wmr_model.io import terrain_files as TF
from wmr_model.terrain import surface as T

# The benchmark terrains ship as package data (wmr_model/data/wmrde_terrains): never skipped.
SHIPPED_TERRAINS = TF.WMRDE_TERRAIN_DIR

FD_STEP = 1e-6  # central-difference step [m]; heights are piecewise (bi)linear, so FD is exact
FD_TOL = 1e-7  # up to rounding of h / FD_STEP


def _fd_normal(terrain: T.Terrain, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    hx = (terrain.height(x + FD_STEP, y) - terrain.height(x - FD_STEP, y)) / (2 * FD_STEP)
    hy = (terrain.height(x, y + FD_STEP) - terrain.height(x, y - FD_STEP)) / (2 * FD_STEP)
    n = np.stack([-hx, -hy, np.ones_like(hx)], axis=-1)
    return n / np.linalg.norm(n, axis=-1, keepdims=True)


def _small_grid(seed: int = 3) -> T.Terrain:
    rng = np.random.default_rng(seed)
    return T.height_map(rng.normal(size=(7, 9)), (0.3, 0.2), origin=(-1.0, 0.5))


# ---------------------------------------------------------------------------------------------
# Plane
# ---------------------------------------------------------------------------------------------


def test_plane_matches_closed_form() -> None:
    rng = np.random.default_rng(0)
    for _ in range(50):
        slope = rng.uniform(-1.4, 1.4)
        heading = rng.uniform(-math.pi, math.pi)
        z0 = rng.uniform(-2, 2)
        t = T.inclined_plane(slope, heading, z0)
        x, y = rng.uniform(-20, 20, size=(2, 30))
        h, n = t.height_normal(x, y)
        along = x * math.cos(heading) + y * math.sin(heading)
        np.testing.assert_allclose(h, z0 + math.tan(slope) * along, rtol=1e-12, atol=1e-12)
        uphill = np.array([math.cos(heading), math.sin(heading), 0.0])
        across = np.array([-math.sin(heading), math.cos(heading), 0.0])
        np.testing.assert_allclose(n @ uphill, -math.sin(slope), atol=1e-12)
        np.testing.assert_allclose(n @ across, 0.0, atol=1e-12)
        np.testing.assert_allclose(np.arccos(n[:, 2]), abs(slope), atol=1e-7)
        np.testing.assert_allclose(np.linalg.norm(n, axis=-1), 1.0, atol=1e-14)


def test_flat_is_level() -> None:
    h, n = T.flat(0.7).height_normal([[1.0, -3.0]], [2.0])
    assert h.shape == (1, 2) and n.shape == (1, 2, 3)
    assert np.all(h == 0.7)
    assert np.all(n == [0.0, 0.0, 1.0])


# ---------------------------------------------------------------------------------------------
# Normals vs finite differences, on every kind
# ---------------------------------------------------------------------------------------------


def _grid_interior_points(t: T.Terrain, rng: np.random.Generator, m: int) -> tuple:
    x0, y0, dx, dy = t.params
    ny, nx = t.grid.shape
    i = rng.integers(0, nx - 1, m) + rng.uniform(0.05, 0.95, m)
    j = rng.integers(0, ny - 1, m) + rng.uniform(0.05, 0.95, m)
    return x0 + i * dx, y0 + j * dy


def _profile_points(
    s_breaks: np.ndarray, heading: float, half_width: float, rng: np.random.Generator, m: int
) -> tuple:
    lo, hi = s_breaks[0] - 1.0, s_breaks[-1] + 1.0
    s = rng.uniform(lo, hi, 4 * m)
    s = s[np.min(np.abs(s[:, None] - s_breaks[None, :]), axis=1) > 1e-3][:m]
    w = min(half_width - 1e-3, 3.0)
    lat = rng.uniform(-w, w, s.shape)
    c, sn = math.cos(heading), math.sin(heading)
    return s * c - lat * sn, s * sn + lat * c


def _fd_cases() -> list:
    rng = np.random.default_rng(11)
    cases = []
    t = T.inclined_plane(0.4, 2.0, -0.3)
    cases.append(("plane", t, rng.uniform(-10, 10, (2, 40))))
    for name, t, s_b, heading, hw in [
        ("ramp", T.ramp(0.5, 1.0, 0.4, 2.0, 1.5, heading=0.7, half_width=2.0),
         np.array([1.5, 2.5, 2.9, 4.9]), 0.7, 2.0),
        ("zoe_ramp", T.zoe_ramp(start=1.0, heading=-2.5), np.array([1.0, 1.59, 2.2, 2.79]),
         -2.5, math.inf),
        ("profile", T.profile([-1.0, 0.0, 0.5, 0.5, 2.0], [0.2, -0.1, 0.3, 0.6, 0.0],
                              heading=1.1), np.array([-1.0, 0.0, 0.5, 2.0]), 1.1, math.inf),
    ]:
        cases.append((name, t, _profile_points(s_b, heading, hw, rng, 40)))
    t = T.rough(0.1, 0.4, seed=5, x_range=(0, 3), y_range=(-1, 1), resolution=0.05)
    cases.append(("rough", t, _grid_interior_points(t, rng, 60)))
    g = _small_grid()
    cases.append(("grid", g, _grid_interior_points(g, rng, 60)))
    # Outside the grid: clamped height, so no slope across the edge, the edge's slope along it.
    xs = np.concatenate([rng.uniform(-4, -1.05, 20), rng.uniform(1.45, 5, 20),
                         -1 + 0.3 * (rng.integers(0, 8, 20) + rng.uniform(0.05, 0.95, 20))])
    ys = np.concatenate([0.5 + 0.2 * (rng.integers(0, 6, 40) + rng.uniform(0.05, 0.95, 40)),
                         rng.choice([-1.0, 3.0], 20)])
    cases.append(("grid_outside", g, (xs, ys)))
    return cases


FD_CASES = _fd_cases()


@pytest.mark.parametrize("name, terrain, points", FD_CASES, ids=[c[0] for c in FD_CASES])
def test_normal_matches_finite_differences(name: str, terrain: T.Terrain, points: tuple) -> None:
    x, y = (np.asarray(p) for p in points)
    _, n = terrain.height_normal(x, y)
    assert x.size >= 20
    np.testing.assert_allclose(np.linalg.norm(n, axis=-1), 1.0, atol=1e-14)
    assert np.all(n[:, 2] > 0.0)
    np.testing.assert_allclose(n, _fd_normal(terrain, x, y), atol=FD_TOL)
    assert not np.allclose(n[:, 2], 1.0)  # the check is not trivially on level ground


def test_normals_outside_grid_corner_vertical() -> None:
    g = _small_grid()
    _, n = g.height_normal([-5.0, 10.0, 10.0, -5.0], [-5.0, -5.0, 10.0, 10.0])
    assert np.all(n == [0.0, 0.0, 1.0])


# ---------------------------------------------------------------------------------------------
# Bilinear grid
# ---------------------------------------------------------------------------------------------


def test_grid_reproduces_nodes_exactly() -> None:
    rng = np.random.default_rng(1)
    heights = rng.normal(size=(23, 31))
    x0, y0, dx, dy = -6.0, -5.0, 0.1, 0.07
    t = T.height_map(heights, (dx, dy), origin=(x0, y0))
    jj, ii = np.mgrid[0:23, 0:31]
    h = t.height(x0 + ii * dx, y0 + jj * dy)
    assert np.array_equal(h, heights)


def _grid_axis_by_rounding(u: float, n: int) -> tuple[int, float, bool]:
    """The cell rule of :func:`wmr_model.terrain.surface._grid_axis` written the plain way:
    snap u onto the nearest integer when within the snap distance, then clamp or split."""
    r = np.floor(u + 0.5)
    if np.isfinite(u) and abs(u - r) <= T._NODE_SNAP:
        u = float(r)
    if u < 0.0:
        return 0, 0.0, False
    if u >= n - 1:
        return n - 2, 1.0, False
    i = int(np.floor(u))
    return i, u - i, True


def test_grid_axis_snaps_and_clamps_as_rounding_does() -> None:
    """The one-floor cell rule against rounding to the nearest integer: points a few snap
    distances either side of every node (both signs of zero included), random points, the
    last node, and coordinates far outside or infinite, which clamp to their own end."""
    n = 12
    snap = T._NODE_SNAP
    us = [0.0, -0.0, n - 1.0, np.inf, -np.inf, 1e300, -1e300, 2.0 ** 63, -(2.0 ** 63), 1e19]
    for node in range(-2, n + 2):
        for k in (-3.0, -1.0, -0.5, 0.5, 1.0, 1.0001, 3.0):
            us.append(node + k * snap)
        us += [np.nextafter(float(node), -np.inf), np.nextafter(float(node), np.inf)]
    us += list(np.random.default_rng(5).uniform(-3.0, n + 3.0, 2000))
    for u in us:
        got = T._grid_axis(u, n)
        want = _grid_axis_by_rounding(u, n)
        assert (got[0], got[2]) == (want[0], want[2]), u
        assert got[1] == want[1], u
    assert T._grid_axis(np.inf, n) == (n - 2, 1.0, False)


def test_grid_exact_for_linear_function() -> None:
    rng = np.random.default_rng(2)
    a, b, c = 0.3, -1.7, 0.25
    x0, y0, dx, dy = 1.0, -2.0, 0.25, 0.4
    xs = x0 + dx * np.arange(12)
    ys = y0 + dy * np.arange(9)
    heights = a * xs[None, :] + b * ys[:, None] + c
    t = T.height_map(heights, (dx, dy), origin=(x0, y0))
    x = rng.uniform(xs[0], xs[-1], 500)
    y = rng.uniform(ys[0], ys[-1], 500)
    h, n = t.height_normal(x, y)
    np.testing.assert_allclose(h, a * x + b * y + c, atol=1e-12)
    expected_n = np.array([-a, -b, 1.0]) / math.sqrt(a * a + b * b + 1.0)
    np.testing.assert_allclose(n, np.broadcast_to(expected_n, n.shape), atol=1e-12)


def test_grid_matches_scipy_bilinear_and_clamps_outside() -> None:
    rng = np.random.default_rng(4)
    g = _small_grid()
    x0, y0, dx, dy = g.params
    ny, nx = g.grid.shape
    xs, ys = x0 + dx * np.arange(nx), y0 + dy * np.arange(ny)
    oracle = RegularGridInterpolator((ys, xs), g.grid, method="linear")
    x = rng.uniform(xs[0] - 2, xs[-1] + 2, 400)
    y = rng.uniform(ys[0] - 2, ys[-1] + 2, 400)
    expected = oracle(np.stack([np.clip(y, ys[0], ys[-1]), np.clip(x, xs[0], xs[-1])], -1))
    np.testing.assert_allclose(g.height(x, y), expected, atol=1e-12)


# ---------------------------------------------------------------------------------------------
# Rough terrain
# ---------------------------------------------------------------------------------------------


def _autocorrelation(h: np.ndarray, lag: int, axis: int) -> float:
    h = h - h.mean()
    a = np.take(h, np.arange(h.shape[axis] - lag), axis=axis)
    b = np.take(h, np.arange(lag, h.shape[axis]), axis=axis)
    return float(np.mean(a * b) / np.mean(h * h))


def test_rough_rms_and_mean_exact() -> None:
    t = T.rough(0.15, 0.8, seed=7)
    assert t.kind == T.GRID
    assert t.grid.shape == (201, 401)  # (-5, 15) x (-5, 5) at 0.05 m
    np.testing.assert_allclose(t.params, [-5.0, -5.0, 0.05, 0.05])
    assert abs(t.grid.mean()) < 1e-15
    assert math.isclose(math.sqrt(np.mean(t.grid**2)), 0.15, rel_tol=1e-12)


def test_rough_autocorrelation_is_one_over_e_at_correlation_length() -> None:
    # Definition: rho(tau) = exp(-(tau / L)^2). Sampling error on a 60 m x 60 m grid with
    # L = 0.8 m is about 0.015 (measured over seeds); the tolerance is 0.04.
    L, res = 0.8, 0.05
    t = T.rough(1.0, L, seed=2024, x_range=(0, 60), y_range=(0, 60), resolution=res)
    for frac in (0.5, 1.0, 1.5):
        lag = round(frac * L / res)
        expected = math.exp(-(frac**2))
        for axis in (0, 1):
            assert abs(_autocorrelation(t.grid, lag, axis) - expected) < 0.04, (frac, axis)


def test_correlation_length_definition_matches_thesis_benchmark_terrains() -> None:
    # The thesis' Zoë benchmark terrains (RMS 0.15 m, correlation length 0.8 m, §2.5.4) follow
    # rho(tau) = exp(-(tau / 0.8)^2): an independent check of our definition of L.
    terrains = TF.load_wmrde_benchmark_terrains(SHIPPED_TERRAINS)
    rms = np.mean([np.sqrt(np.mean((t.grid - t.grid.mean()) ** 2)) for t in terrains])
    assert abs(rms - 0.15) < 0.01
    for lag in (4, 8, 10):  # 0.1 m spacing
        rho = np.mean([_autocorrelation(t.grid, lag, ax) for t in terrains for ax in (0, 1)])
        assert abs(rho - math.exp(-((lag * 0.1 / 0.8) ** 2))) < 0.03, lag


def test_rough_seeds() -> None:
    a = T.rough(0.05, 0.2, seed=1, x_range=(0, 2), y_range=(0, 1))
    b = T.rough(0.05, 0.2, seed=1, x_range=(0, 2), y_range=(0, 1))
    c = T.rough(0.05, 0.2, seed=2, x_range=(0, 2), y_range=(0, 1))
    assert np.array_equal(a.grid, b.grid)
    assert not np.allclose(a.grid, c.grid, atol=1e-3)


def test_rough_grid_covers_range() -> None:
    t = T.rough(0.1, 0.3, seed=0, x_range=(0.0, 1.02), y_range=(-0.5, 0.5), resolution=0.1)
    x0, y0, dx, _ = t.params
    ny, nx = t.grid.shape
    assert (x0, y0) == (0.0, -0.5) and (ny, nx) == (11, 12)
    assert x0 + (nx - 1) * dx >= 1.02


# ---------------------------------------------------------------------------------------------
# Profiles and ramps
# ---------------------------------------------------------------------------------------------


def test_zoe_ramp_geometry() -> None:
    heading = 0.6
    t = T.zoe_ramp(start=2.0, heading=heading)
    ds = 1e-4
    s = np.arange(0.0, 6.0, ds)
    h = t.height(s * math.cos(heading), s * math.sin(heading))
    assert h.max() == 0.41
    top = s[h == 0.41]
    raised = s[h > 0.0]
    assert abs(top[-1] - top[0] - 0.61) < 2 * ds
    assert abs(raised[-1] - raised[0] - 1.79) < 2 * ds
    assert abs(raised[0] - 2.0) < 2 * ds
    _, n = t.height_normal(2.3 * math.cos(heading), 2.3 * math.sin(heading))
    assert math.isclose(math.acos(n[2]), math.atan(0.41 / 0.59), rel_tol=1e-12)


def test_profile_matches_np_interp_and_lateral_extent() -> None:
    rng = np.random.default_rng(8)
    s_b = np.array([-1.0, 0.3, 0.8, 2.5])
    h_b = np.array([0.1, 0.6, -0.2, 0.4])
    heading, origin, hw = -0.9, (1.0, 2.0), 0.75
    t = T.profile(s_b, h_b, heading=heading, origin=origin, half_width=hw, base=-0.5)
    s = rng.uniform(-3, 4, 300)
    lat = rng.uniform(-2, 2, 300)
    c, sn = math.cos(heading), math.sin(heading)
    x, y = origin[0] + s * c - lat * sn, origin[1] + s * sn + lat * c
    expected = np.where(np.abs(lat) <= hw, np.interp(s, s_b, h_b), -0.5)
    np.testing.assert_allclose(t.height(x, y), expected, atol=1e-12)


def test_profile_tie_rules_and_step() -> None:
    t = T.profile([0.0, 1.0, 2.0, 2.0, 3.0], [0.0, 1.0, 0.0, 0.5, 1.5])
    h, n = t.height_normal(np.array([1.0, 2.0, 2.0 - 1e-9, 0.0]), 0.0)
    # At s = 1 the segment starting there (slope -1) gives the normal.
    np.testing.assert_allclose(n[0], np.array([1.0, 0.0, 1.0]) / math.sqrt(2), atol=1e-15)
    # Exactly on the vertical step: value after the step, vertical normal.
    assert h[1] == 0.5 and np.all(n[1] == [0.0, 0.0, 1.0])
    assert math.isclose(h[2], 0.0, abs_tol=1e-8)
    # At the first breakpoint: the +s segment (slope +1).
    np.testing.assert_allclose(n[3], np.array([-1.0, 0.0, 1.0]) / math.sqrt(2), atol=1e-15)
    st_ = T.step(0.2, 1.5, heading=math.pi / 2)
    h, n = st_.height_normal(0.0, [1.5 - 1e-12, 1.5, 3.0])
    assert h.tolist() == [0.0, 0.2, 0.2] and np.all(n == [0.0, 0.0, 1.0])


# ---------------------------------------------------------------------------------------------
# Vectorized methods vs the scalar kernel; compiled callers
# ---------------------------------------------------------------------------------------------

VECTOR_TERRAINS = {
    "plane": T.inclined_plane(0.3, 1.0, 0.2),
    "profile": T.profile([0.0, 1.0, 1.0, 2.0], [0.0, 0.5, 0.8, 0.1], heading=0.4,
                         half_width=1.5, base=-0.1),
    "grid": T.rough(0.1, 0.5, seed=9, x_range=(-2, 3), y_range=(-1, 2), resolution=0.1),
}
VECTOR_TERRAINS["grid_nodal"] = T.height_map(VECTOR_TERRAINS["grid"].grid, 0.1, (-2.0, -1.0),
                                             normals="nodal")
_coords = st.floats(-6.0, 6.0, allow_nan=False)


@pytest.mark.parametrize("key", sorted(VECTOR_TERRAINS))
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_vectorized_equals_scalar_loop(key: str, data: st.DataObject) -> None:
    terrain = VECTOR_TERRAINS[key]
    shape = data.draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4))
    x = data.draw(hnp.arrays(np.float64, shape, elements=_coords))
    y = data.draw(hnp.arrays(np.float64, shape[-1:] if shape else (), elements=_coords))
    h, n = terrain.height_normal(x, y)
    xb, yb = np.broadcast_arrays(x, y)
    assert h.shape == xb.shape and n.shape == xb.shape + (3,)
    args = terrain.kernel_args()
    for idx in np.ndindex(xb.shape):
        ref = T.terrain_height_normal(*args, float(xb[idx]), float(yb[idx]))
        assert (h[idx], *n[idx]) == ref
    assert np.array_equal(terrain.height(x, y), h)


@pytest.mark.skipif(not JIT_ENABLED, reason="numba not available")
@pytest.mark.parametrize("key", sorted(VECTOR_TERRAINS))
def test_compiled_kernel_matches_python(key: str) -> None:
    terrain = VECTOR_TERRAINS[key]
    rng = np.random.default_rng(5)
    args = terrain.kernel_args()
    for x, y in rng.uniform(-6, 6, (200, 2)):
        got = T.terrain_height_normal(*args, x, y)
        ref = T.terrain_height_normal.py_func(*args, x, y)
        np.testing.assert_allclose(got, ref, rtol=1e-15, atol=1e-15)


@njit
def _sum_heights_in_loop(kind, params, grid, xs, ys):  # type: ignore[no-untyped-def]
    total = 0.0
    for k in range(xs.shape[0]):
        h, _, _, nz = T.terrain_height_normal(kind, params, grid, xs[k], ys[k])
        total += h + nz
    return total


def test_kernel_args_usable_in_compiled_loop() -> None:
    rng = np.random.default_rng(6)
    xs, ys = rng.uniform(-3, 3, (2, 100))
    for terrain in VECTOR_TERRAINS.values():
        h, n = terrain.height_normal(xs, ys)
        total = _sum_heights_in_loop(*terrain.kernel_args(), xs, ys)
        assert math.isclose(total, float(np.sum(h + n[:, 2])), rel_tol=1e-12)


def test_unknown_kind_raises_in_compiled_callers_too() -> None:
    # terrain_height_normal is inlined into its compiled callers (the analytic kinds stay a
    # call): the error for an unknown kind must survive that, as it does in a direct call
    grid = VECTOR_TERRAINS["grid"]
    for call in (T.terrain_height_normal, _sum_heights_in_loop):
        xs = np.zeros(1) if call is _sum_heights_in_loop else 0.0
        with pytest.raises(ValueError, match="unknown terrain kind"):
            call(7, grid.params, grid.grid, xs, xs)


def test_terrain_is_immutable_data() -> None:
    t = _small_grid()
    assert not t.params.flags.writeable and not t.grid.flags.writeable
    assert t.params.dtype == np.float64 and t.grid.dtype == np.float64
    with pytest.raises(ValueError):
        t.grid[0, 0] = 1.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        t.kind = T.PLANE  # type: ignore[misc]
    assert T.flat().grid.shape == (1, 1)
    src = np.zeros((3, 3))
    g = T.height_map(src, 1.0)
    src[0, 0] = 5.0
    assert g.grid[0, 0] == 0.0


def test_nan_query_gives_nan() -> None:
    for terrain in VECTOR_TERRAINS.values():
        h, n = terrain.height_normal(np.nan, 0.0)
        if terrain.kind != T.PLANE:
            assert np.isnan(h) and np.all(np.isnan(n))


# ---------------------------------------------------------------------------------------------
# Loaders
# ---------------------------------------------------------------------------------------------


def _png_chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def _write_png(path: Path, gray: np.ndarray, depth: int = 16, color: int = 0) -> None:
    """Minimal PNG encoder cycling through all five row filters (None/Sub/Up/Average/Paeth)."""
    h, w = gray.shape
    bpp = depth // 8
    raw = (gray.astype(">u2").view(np.uint8) if depth == 16 else gray.astype(np.uint8))
    raw = raw.reshape(h, w * bpp).astype(np.int64)
    prev = np.zeros(w * bpp, np.int64)
    rows = []
    for r in range(h):
        cur = raw[r]
        a = np.concatenate([np.zeros(bpp, np.int64), cur[:-bpp]])
        c = np.concatenate([np.zeros(bpp, np.int64), prev[:-bpp]])
        b = prev
        ftype = r % 5
        if ftype == 0:
            pred = np.zeros_like(cur)
        elif ftype == 1:
            pred = a
        elif ftype == 2:
            pred = b
        elif ftype == 3:
            pred = (a + b) // 2
        else:
            p = a + b - c
            pa, pb, pc = np.abs(p - a), np.abs(p - b), np.abs(p - c)
            pred = np.where((pa <= pb) & (pa <= pc), a, np.where(pb <= pc, b, c))
        rows.append(bytes([ftype]) + ((cur - pred) % 256).astype(np.uint8).tobytes())
        prev = cur
    ihdr = struct.pack(">IIBBBBB", w, h, depth, color, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + _png_chunk(b"IHDR", ihdr)
                     + _png_chunk(b"IDAT", zlib.compress(b"".join(rows)))
                     + _png_chunk(b"IEND", b""))


@pytest.mark.parametrize("suffix", [".npy", ".csv", ".png"])
def test_array_formats_roundtrip(tmp_path: Path, suffix: str) -> None:
    rng = np.random.default_rng(12)
    path = tmp_path / f"terrain{suffix}"
    kw: dict = {}
    if suffix == ".png":
        gray = rng.integers(0, 65536, (13, 17)).astype(np.uint16)
        gray[0, 0], gray[-1, -1] = 0, 65535
        _write_png(path, gray)
        kw = {"z_scale": 1e-4, "z_offset": -3.0}
        expected = -3.0 + 1e-4 * gray.astype(np.float64)
    else:
        expected = rng.normal(size=(13, 17))
        if suffix == ".npy":
            np.save(path, expected)
        else:
            np.savetxt(path, expected, delimiter=",", fmt="%.17g")
    t = TF.load_height_map(path, resolution=(0.1, 0.2), origin=(-1.0, 4.0), **kw)
    assert t.kind == T.GRID and t.name == path.name
    assert np.array_equal(t.grid, expected)
    np.testing.assert_array_equal(t.params, [-1.0, 4.0, 0.1, 0.2])
    assert t.height(-1.0 + 0.1 * 3, 4.0 + 0.2 * 2) == expected[2, 3]


def test_png_reader_against_pillow(tmp_path: Path) -> None:
    image = pytest.importorskip("PIL.Image")
    rng = np.random.default_rng(13)
    for gray in (rng.integers(0, 65536, (40, 33)).astype(np.uint16),
                 np.add.outer(np.arange(40), 3 * np.arange(33)).astype(np.uint16) * 300,
                 rng.integers(0, 256, (21, 9)).astype(np.uint8)):
        path = tmp_path / "pil.png"
        image.fromarray(gray).save(path)
        assert np.array_equal(TF.read_png_gray(path), gray)


def test_parse_wmrde_gridsurfdata1() -> None:
    path = SHIPPED_TERRAINS / "gridsurfdata1.txt"
    t = TF.load_wmrde_grid(path)
    assert t.grid.shape == (101, 201)
    np.testing.assert_allclose(t.params, [-6.0, -5.0, 0.1, 0.1], rtol=1e-15)
    tokens = path.read_text().split(",")
    assert tokens[:6] == ["-6.000000000", "14.000000000", "201", "-5.000000000", "5.000000000",
                          "101"]
    # x varies fastest: token 6 + i + 201 j is node (i, j).
    for i, j in [(0, 0), (1, 0), (200, 0), (0, 1), (57, 33), (200, 100)]:
        assert t.grid[j, i] == float(tokens[6 + i + 201 * j])
        assert t.height(-6.0 + 0.1 * i, -5.0 + 0.1 * j) == float(tokens[6 + i + 201 * j])
    assert np.abs(t.grid).max() < 1.0
    assert np.array_equal(TF.load_height_map(path).grid, t.grid)


def test_benchmark_terrains_default_and_env_override(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WMR_SHARED", raising=False)
    ts = TF.load_wmrde_benchmark_terrains()  # the shipped package data
    assert [t.name for t in ts] == [f"gridsurfdata{k}" for k in range(1, 11)]
    assert all(t.grid.shape == (101, 201) for t in ts)
    assert not np.array_equal(ts[0].grid, ts[1].grid)
    assert (SHIPPED_TERRAINS / "LICENSE").is_file() and (SHIPPED_TERRAINS / "PROVENANCE.md").is_file()
    # WMR_SHARED overrides the default: a folder whose file 1 holds terrain 2's heights.
    other = tmp_path / "data" / "wmrde_terrains"
    other.mkdir(parents=True)
    for k in range(1, 11):
        src = SHIPPED_TERRAINS / f"gridsurfdata{2 if k == 1 else k}.txt"
        (other / f"gridsurfdata{k}.txt").symlink_to(src)
    monkeypatch.setenv("WMR_SHARED", str(tmp_path))
    swapped = TF.load_wmrde_benchmark_terrains()
    assert np.array_equal(swapped[0].grid, ts[1].grid)
    assert np.array_equal(swapped[9].grid, ts[9].grid)


def test_benchmark_terrains_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WMR_SHARED", str(tmp_path / "nowhere"))
    with pytest.raises(TerrainError, match=r"nowhere.*folder not found \(from WMR_SHARED="):
        TF.load_wmrde_benchmark_terrains()
    (tmp_path / "gridsurfdata1.txt").write_text("0,1,2,0,1,2,0,0,0,0")
    with pytest.raises(TerrainError, match=r"missing wmrde benchmark terrain files "
                                           r"\['gridsurfdata2.txt'"):
        TF.load_wmrde_benchmark_terrains(tmp_path)


@pytest.mark.parametrize("content, message", [
    ("-6,14,3,-5,5,2,1,2,3,4,5,", r"expected nx\*ny = 3\*2 = 6 heights after the header, got 5"),
    ("-6,14,3,-5,5,2,1,2,3,4,5,6,7", r"expected nx\*ny = 3\*2 = 6 heights after the header, got 7"),
    ("-6,14,3,-5", r"bad header, expected 'xmin,xmax,nx,ymin,ymax,ny,' then heights, got 4"),
    ("-6,14,three,-5,5,2,1,2,3,4,5,6", r"bad header, expected .* as numbers, got '-6,14,three"),
    ("-6,14,2.5,-5,5,2,1,2,3,4,5", r"bad header, nx and ny must be integers >= 2"),
    ("14,-6,2,-5,5,2,1,2,3,4", r"bad header, expected xmax > xmin and ymax > ymin"),
    ("0,1,2,0,1,2,1,2,x3,4", r"height 2 \(x index 0, y index 1\) is not a number: 'x3'"),
    ("0,1,2,0,1,2,1,nan,3,4", r"heights must be finite, got nan at \[0, 1\]"),
])
def test_malformed_wmrde_file(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "gridsurfdata_bad.txt"
    path.write_text(content)
    with pytest.raises(TerrainError, match="gridsurfdata_bad.txt: " + message):
        TF.load_height_map(path)


def test_malformed_array_files(tmp_path: Path) -> None:
    p = tmp_path / "one_d.npy"
    np.save(p, np.arange(5.0))
    with pytest.raises(TerrainError, match=r"one_d.npy: heights must be a 2-D "
                                           r"\(ny, nx\) array .* got shape \(5,\)"):
        TF.load_height_map(p, 0.1, (0, 0))
    p = tmp_path / "ragged.csv"
    p.write_text("1,2,3\n4,5\n")
    with pytest.raises(TerrainError, match=r"ragged.csv: cannot read CSV height map"):
        TF.load_height_map(p, 0.1, (0, 0))
    with pytest.raises(TerrainError, match=r"ragged.csv: resolution and origin required, "
                                           r".csv files store heights only"):
        TF.load_height_map(p)
    with pytest.raises(TerrainError, match=r"absent.npy: cannot read .npy file"):
        TF.load_height_map(tmp_path / "absent.npy", 0.1, (0, 0))
    with pytest.raises(TerrainError, match=r"map.tif: unsupported height map suffix '.tif'"):
        TF.load_height_map(tmp_path / "map.tif", 0.1, (0, 0))
    with pytest.raises(TerrainError, match=r"absent.txt: cannot read wmrde grid file"):
        TF.load_height_map(tmp_path / "absent.txt")
    with pytest.raises(TerrainError, match=r"carry their own grid; pass neither resolution"):
        TF.load_height_map(tmp_path / "absent.txt", resolution=0.1)


def test_malformed_png_files(tmp_path: Path) -> None:
    gray = np.arange(12, dtype=np.uint16).reshape(3, 4)
    p = tmp_path / "ok.png"
    _write_png(p, gray)
    with pytest.raises(TerrainError, match=r"ok.png: z_scale \[m per gray level\] is required"):
        TF.load_height_map(p, 0.1, (0, 0))
    bad = tmp_path / "sig.png"
    bad.write_bytes(b"GIF89a" + p.read_bytes())
    with pytest.raises(TerrainError, match=r"sig.png: not a PNG file \(bad signature\)"):
        TF.read_png_gray(bad)
    data = bytearray(p.read_bytes())
    data[-20] ^= 0xFF  # inside the IDAT body
    bad = tmp_path / "crc.png"
    bad.write_bytes(bytes(data))
    with pytest.raises(TerrainError, match=r"crc.png: PNG chunk b'IDAT' fails its CRC check"):
        TF.read_png_gray(bad)
    rgb = tmp_path / "rgb.png"
    _write_png(rgb, gray, depth=8, color=2)
    with pytest.raises(TerrainError, match=r"rgb.png: expected a non-interlaced 8- or 16-bit "
                                           r"grayscale PNG \(color type 0\), got color type 2"):
        TF.read_png_gray(rgb)
    trunc = tmp_path / "trunc.png"
    trunc.write_bytes(p.read_bytes()[:-12])
    with pytest.raises(TerrainError, match=r"trunc.png: truncated PNG \(no IEND chunk\)"):
        TF.read_png_gray(trunc)


# ---------------------------------------------------------------------------------------------
# Bad inputs
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("build, message", [
    (lambda: T.height_map(np.zeros((1, 5)), 0.1),
     r"height_map: heights must be a 2-D \(ny, nx\) array with ny >= 2 and nx >= 2, "
     r"got shape \(1, 5\)"),
    (lambda: T.height_map(np.zeros(5), 0.1), r"got shape \(5,\)"),
    (lambda: T.height_map(np.array([[0.0, np.nan], [np.inf, 0.0]]), 0.1),
     r"height_map: heights must be finite, got nan at \[0, 1\] \(2 non-finite values\)"),
    (lambda: T.height_map(np.zeros((2, 2)), 0.0),
     r"height_map: resolution must be > 0 m, got 0.0"),
    (lambda: T.height_map(np.zeros((2, 2)), (0.1, -0.2)),
     r"height_map: resolution\[1\] must be > 0 m, got -0.2"),
    (lambda: T.height_map(np.zeros((2, 2)), (0.1, 0.1, 0.1)),
     r"height_map: resolution must be a float or a pair \(dx, dy\) \[m\], got shape \(3,\)"),
    (lambda: T.height_map(np.zeros((2, 2)), 0.1, origin=(0.0, np.nan)),
     r"height_map: origin\[1\] must be finite \[m\], got nan"),
    (lambda: T.profile([0.0, 1.0, 2.0], [0.0, 1.0]),
     r"profile: heights must have shape \(3,\) to match s_breaks, got \(2,\)"),
    (lambda: T.profile([0.0, 1.0, 0.5], [0.0, 1.0, 0.0]),
     r"profile: s_breaks must be non-decreasing, got s_breaks\[2\] = 0.5 < "
     r"s_breaks\[1\] = 1.0"),
    (lambda: T.profile([0.0, 1.0, 1.0, 1.0], [0.0, 1.0, 2.0, 3.0]),
     r"profile: s_breaks may repeat a value at most twice"),
    (lambda: T.profile([0.0], [0.0]),
     r"profile: s_breaks must be 1-D with at least 2 breakpoints, got shape \(1,\)"),
    (lambda: T.profile([0.0, 1.0], [0.0, np.inf]),
     r"profile: heights must be finite, got inf at index 1"),
    (lambda: T.profile([0.0, 1.0], [0.0, 1.0], half_width=0.0),
     r"profile: half_width must be > 0 m \(inf allowed\), got 0.0"),
    (lambda: T.ramp(0.4, -1.0, 0.5, 1.0, 0.0), r"ramp: up_length must be >= 0 m, got -1.0"),
    (lambda: T.inclined_plane(2.0), r"inclined_plane: slope must satisfy \|slope\| < pi/2 rad"),
    (lambda: T.flat(np.nan), r"flat: z must be finite \[m\], got nan"),
    (lambda: T.rough(0.1, 0.0, seed=0), r"rough: correlation_length must be > 0 m, got 0.0"),
    (lambda: T.rough(-0.1, 0.2, seed=0), r"rough: rms must be >= 0 m, got -0.1"),
    (lambda: T.rough(0.1, 0.2, seed=0, x_range=(1, 1)),
     r"rough: x_range must be \(min, max\) with max > min, got \(1, 1\)"),
    (lambda: T.Terrain(7, np.zeros(3), np.zeros((1, 1))),
     r"Terrain: kind must be one of PLANE \(0\), PROFILE \(1\), GRID \(2\), got 7"),
    (lambda: T.Terrain(T.PLANE, np.zeros(4), np.zeros((1, 1)), name="p"),
     r"Terrain\('p'\): PLANE params must have length 3, got 4"),
    (lambda: T.Terrain(T.GRID, np.array([0.0, 0.0, 0.0, 1.0]), np.zeros((2, 2))),
     r"Terrain: GRID params \[x0, y0, dx, dy\] must be finite with dx, dy > 0"),
    (lambda: T.Terrain(T.PROFILE, np.r_[0, 0, 1, 0, 1, 0, 2, 1.0, 0.0, 0, 0], np.zeros((1, 1))),
     r"Terrain: PROFILE breakpoints must be non-decreasing .* got \[1.0, 0.0\]"),
    (lambda: T.Terrain(T.PLANE, np.zeros(3), np.zeros((2, 2))),
     r"Terrain: PLANE grid must have shape \(1, 1\), got \(2, 2\)"),
])
def test_bad_inputs_raise_pinned_messages(build, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(TerrainError, match=message):
        build()


def _exact_bilinear(t: T.Terrain, x: float, y: float):
    """Height and slopes of the bilinear GRID patch at (x, y) in exact rational arithmetic
    (the doubles x, y, params and nodes taken as exact numbers; points inside the grid, not on
    a grid line)."""
    from fractions import Fraction as F

    x0, y0, dx, dy = (F(float(v)) for v in t.params[:4])
    u, v = (F(x) - x0) / dx, (F(y) - y0) / dy
    i, j = math.floor(u), math.floor(v)
    fx, fy = u - i, v - j
    h00, h10 = F(float(t.grid[j, i])), F(float(t.grid[j, i + 1]))
    h01, h11 = F(float(t.grid[j + 1, i])), F(float(t.grid[j + 1, i + 1]))
    h = (1 - fy) * ((1 - fx) * h00 + fx * h10) + fy * ((1 - fx) * h01 + fx * h11)
    hx = ((1 - fy) * (h10 - h00) + fy * (h11 - h01)) / dx
    hy = ((1 - fx) * (h01 - h00) + fx * (h11 - h10)) / dy
    return float(h), float(hx), float(hy)


@pytest.mark.parametrize("which", ["benchmark", "odd spacing"])
def test_grid_lookup_with_reciprocal_spacing_is_within_ulps_of_exact(which: str) -> None:
    """The lookup's grid coordinates and slopes are products with 1/dx, 1/dy (read from the
    kernel params, or computed from a user's own params: the same values). Against the exact
    bilinear patch at the same doubles: the height within 4 ulp of the cell's largest |node|
    plus the coordinate's rounding times the cell's height range, the slopes within 8 ulp of
    the cell's largest |node| / spacing; and no worse than quotients computed in floating
    point (the form before), within the same bound."""
    if which == "benchmark":
        t = TF.load_wmrde_benchmark_terrains()[0]
    else:  # spacings whose reciprocals are far from exact, origin off the lattice
        rng0 = np.random.default_rng(3)
        t = T.height_map(rng0.normal(0.0, 0.7, (40, 60)), (0.0731, 0.0573), origin=(-1.37, 2.11))
    kp = t.kernel_args().params
    assert kp.shape[0] == T.GRID_KERNEL_PARAMS and kp[5] == 1.0 / kp[2] and kp[6] == 1.0 / kp[3]
    nyg, nxg = t.grid.shape
    x0, y0, dx, dy = (float(v) for v in t.params[:4])
    rng = np.random.default_rng(11)
    eps = np.finfo(float).eps
    worst = 0.0
    for _ in range(3000):
        u, v = rng.uniform(0.0, nxg - 1.0), rng.uniform(0.0, nyg - 1.0)
        x, y = x0 + u * dx, y0 + v * dy
        uu, vv = (x - x0) / dx, (y - y0) / dy
        if min(abs(uu - round(uu)), abs(vv - round(vv))) < 1e-6 or uu >= nxg - 1 or vv >= nyg - 1:
            continue  # snapped onto a node line or on the far border: another rule
        h, nx, ny, nz = T.terrain_height_normal(*t.kernel_args(), x, y)
        assert (h, nx, ny, nz) == T.terrain_height_normal(t.kind, t.params, t.grid, x, y)
        he, hxe, hye = _exact_bilinear(t, x, y)
        i, j = int(math.floor(uu)), int(math.floor(vv))
        cell = t.grid[j:j + 2, i:i + 2]
        big = float(np.abs(cell).max())
        spread = float(cell.max() - cell.min())
        bound_h = 4 * eps * big + 2 * eps * max(abs(uu), abs(vv)) * spread
        assert abs(h - he) <= bound_h, (x, y, h - he, bound_h)
        hx, hy = -nx / nz, -ny / nz
        # the node differences' rounding and the fractions' (a coordinate's rounding times the
        # cell's range), over the spacing; then the normal's own (recovered slope = -n_x/n_z)
        bound_s = ((8 * eps * big + 4 * eps * max(abs(uu), abs(vv)) * spread) / min(dx, dy)
                   + 8 * eps * (abs(hxe) + abs(hye)))
        assert abs(hx - hxe) <= bound_s, (x, y, hx - hxe, bound_s)
        assert abs(hy - hye) <= bound_s, (x, y, hy - hye, bound_s)
        # the quotient form: the same cell and fractions by division, within the same bounds
        fx, fy = uu - i, vv - j
        hq = ((1 - fy) * ((1 - fx) * cell[0, 0] + fx * cell[0, 1])
              + fy * ((1 - fx) * cell[1, 0] + fx * cell[1, 1]))
        hxq = ((1 - fy) * (cell[0, 1] - cell[0, 0]) + fy * (cell[1, 1] - cell[1, 0])) / dx
        assert abs(hq - he) <= bound_h and abs(hxq - hxe) <= bound_s
        worst = max(worst, abs(h - he) / (eps * big))
    assert worst > 0.0  # the oracle resolves the rounding (it is not comparing equal numbers)
