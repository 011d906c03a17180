"""Deformable terrain: mass/volume conservation, angle of repose, ruts and the multipass effect."""

import math

import numpy as np
import pytest

from wmr_model.errors import ParameterError, TerrainError
from wmr_model.experiments.soil import multipass
from wmr_model.terrain.deformable import RELAX_TOL, DeformableTerrain, relax_to_repose
from wmr_model.terrain.soil import SOIL_PRESETS

REPOSE = math.radians(30.0)


def _strip(xi, res=0.01):
    return DeformableTerrain.flat((0.0, 1.0), (-0.2, 0.2), res, 1600.0, REPOSE, xi, z=0.3)


@pytest.mark.parametrize("xi", [0.0, 0.3, 1.0])
def test_wheel_passes_conserve_soil_mass(xi):
    dt = _strip(xi)
    m0, v0 = dt.soil_mass(), dt.volume()
    for k, (y, depth) in enumerate([(0.0, 0.02), (0.0, 0.01), (0.07, 0.03), (-0.05, 0.015)]):
        dt.roll((0.1 + 0.05 * k, y), (0.9, y + 0.02), 0.05, depth)
    assert abs(dt.soil_mass() - m0) <= 1e-9 * m0
    assert dt.zc.sum() * dt.resolution[0] * dt.resolution[1] == pytest.approx(
        v0 - dt.volume(), rel=1e-9)  # what the surface lost is exactly the compaction
    if xi == 1.0:  # incompressible: the height-map volume itself is conserved
        assert abs(dt.volume() - v0) <= 1e-9 * abs(v0) + 1e-12
        assert np.all(dt.zc == 0.0)
    assert dt.max_slope() <= math.tan(REPOSE) + 1e-6


def test_mass_conserved_relative_to_a_nonzero_datum():
    dt = DeformableTerrain.flat((0.0, 0.5), (0.0, 0.5), 0.02, 1500.0, REPOSE, 0.5, z=1.0)
    m0 = dt.soil_mass()
    dt.roll((0.1, 0.25), (0.4, 0.25), 0.06, 0.04)
    assert abs(dt.soil_mass() - m0) <= 1e-9 * m0


def test_pile_relaxes_to_angle_of_repose_keeping_volume():
    dt = DeformableTerrain.flat((-0.5, 0.5), (-0.5, 0.5), 0.02, 1600.0, REPOSE)
    X, Y = dt.node_xy()
    dt.h[:] = np.maximum(0.0, 0.3 - 2.0 * np.hypot(X, Y))  # cone at tan = 2 > tan 30°
    rng = np.random.default_rng(3)
    dt.h += 0.01 * rng.random(dt.h.shape)  # rough, steep grains on top
    v0 = dt.volume()
    assert dt.max_slope() > 1.5
    sweeps = dt.relax()
    assert sweeps < 100000
    assert dt.max_slope() <= math.tan(REPOSE) + RELAX_TOL + 1e-12
    assert abs(dt.volume() - v0) <= 1e-9 * v0
    assert dt.h.max() < 0.3  # the top came down


def _every_pair_sweeps(h, fixed, dx, dy, tan_repose, tol, max_sweeps):
    """Oracle: the avalanche sweeps visiting every pair, in plain Python."""
    ny, nx = h.shape
    for sweep in range(max_sweeps):
        worst = 0.0
        for lim, spacing, pairs in (
                (tan_repose * dx, dx, [((j, i), (j, i + 1)) for j in range(ny)
                                       for i in range(nx - 1)]),
                (tan_repose * dy, dy, [((j, i), (j + 1, i)) for j in range(ny - 1)
                                       for i in range(nx)])):
            for a, b in pairs:
                if fixed[a] or fixed[b]:
                    continue
                d = h[a] - h[b]
                ex = abs(d) - lim
                if ex > 0.0:
                    q = 0.5 * ex if d > 0.0 else -0.5 * ex
                    h[a] -= q
                    h[b] += q
                    worst = max(worst, ex / spacing)
        if worst <= tol:
            return sweep + 1
    return max_sweeps


@pytest.mark.parametrize("shape", [(23, 41), (40, 17), (6, 33), (1, 37)])
def test_skipped_avalanche_visits_change_nothing(shape):
    """The sweeps skip runs of pairs whose nodes have not changed: heights (to the last bit)
    and sweep counts must equal visiting every pair, with held nodes, a rut and steep grains,
    for grids that are and are not a multiple of the skip block wide, and for a single row
    (x pairs only: a run must be visited again after it moved soil itself)."""
    rng = np.random.default_rng(shape[0] * 100 + shape[1])
    ny, nx = shape
    h = 0.2 + 0.004 * rng.random(shape)
    h[ny // 3: ny // 3 + 3, 2: nx - 4] -= 0.03  # a rut
    h[rng.random(shape) < 0.02] += 0.05  # grains
    h[0, min(20, nx - 3)] += 0.08  # a spike inside a skip block of the first row
    fixed = np.zeros(shape, dtype=bool)
    fixed[(ny - 1) // 2, nx // 2: nx // 2 + 6] = True
    for max_sweeps in (3, 100000):
        got, want = h.copy(), h.copy()
        n_got = relax_to_repose(got, fixed, 0.01, 0.012, math.tan(REPOSE), RELAX_TOL, max_sweeps)
        n_want = _every_pair_sweeps(want, fixed, 0.01, 0.012, math.tan(REPOSE), RELAX_TOL,
                                    max_sweeps)
        assert n_got == n_want
        np.testing.assert_array_equal(got, want)
    assert n_got > 20  # the case needs many sweeps (where skipping matters)


def test_rut_shape_berms_and_snapshot():
    dt = _strip(1.0, res=0.01)
    dt.roll((0.2, 0.0), (0.8, 0.0), 0.05, 0.004, relax=False)
    ter = dt.terrain()
    X, Y = dt.node_xy()
    np.testing.assert_allclose(ter.height(X, Y), dt.h, atol=1e-12)
    assert ter.height(0.5, 0.0) == pytest.approx(0.3 - 0.004)
    assert ter.height(0.5, 0.03) > 0.3  # berm beside the rut
    assert ter.height(0.05, 0.0) == 0.3  # untouched soil ahead of the wheel


@pytest.mark.parametrize("soil", ["dry_sand", "sandy_loam"])
@pytest.mark.parametrize("pull_ratio", [0.0, 0.03])
def test_second_wheel_in_rut_sinks_less_and_slips_less(soil, pull_ratio):
    W = 18.0
    states, dt = multipass(SOIL_PRESETS[soil], W, 0.065, 0.05, n_passes=3,
                           pull=pull_ratio * W)
    first, second, third = states
    assert second.h < 0.7 * first.h
    assert second.s < first.s
    assert third.h <= second.h  # (its slip need not drop further: a shallower, shorter
    # contact arc mobilises less shear at a given slip)
    assert all(st.fz == pytest.approx(W, rel=1e-9) for st in states)
    assert all(abs(st.fx - pull_ratio * W) < 1e-6 * W for st in states)
    _, zc, js = dt.compaction_at((0.3, 0.0), (0.7, 0.0), 0.05)
    assert zc == pytest.approx(first.h + second.h + third.h, rel=1e-9)  # xi = 0: all compaction
    assert js == pytest.approx(third.j_exit, rel=1e-9)


def test_bad_input_errors():
    with pytest.raises(ParameterError, match="xi must be in"):
        DeformableTerrain.flat((0, 1), (0, 1), 0.1, 1600.0, REPOSE, xi=1.5)
    with pytest.raises(ParameterError, match="repose must be in"):
        DeformableTerrain.flat((0, 1), (0, 1), 0.1, 1600.0, 0.0)
    with pytest.raises(TerrainError, match="zc: expected"):
        DeformableTerrain(np.zeros((3, 3)), np.zeros((2, 3)), (0, 0), (0.1, 0.1), 1600.0, REPOSE)
    dt = _strip(0.0)
    with pytest.raises(ParameterError, match="sinkage must be >= 0"):
        dt.roll((0.1, 0.0), (0.5, 0.0), 0.05, -0.01)
    with pytest.raises(ParameterError, match="covers no grid node"):
        dt.roll((5.1, 0.0), (5.5, 0.0), 0.05, 0.01)
