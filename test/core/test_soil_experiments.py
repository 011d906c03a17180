"""Rocker-bogie on soft-soil slopes: slip vs slope, stall limit, energy balance, variability,
soil calibration (seed 001 test matrix, seed 004 power on a slope)."""

import math

import numpy as np
import pytest

from wmr_model.errors import ParameterError
from wmr_model.experiments.soil import (
    calibrate_soil,
    max_climbable_slope,
    run_slope,
    slip_vs_slope,
    wheel_params,
)
from wmr_model.io.vehicles import load_vehicle
from wmr_model.terrain.soil import bekker_params, roams_params

SOIL = "sandy_loam"
SHORT = {"duration": 4.0, "settle": 2.0, "window": 1.0}


@pytest.fixture(scope="module")
def rocky7():
    return load_vehicle("rocky7")


@pytest.fixture(scope="module")
def uphill(rocky7):
    return slip_vs_slope(rocky7, (0.0, 2.5, 5.0, 7.5), ("uphill",),
                         contact_params=bekker_params(SOIL), **SHORT)


def test_slip_rises_monotonically_with_uphill_slope(uphill):
    slips = [r.slip_mean for r in uphill]
    assert np.all(np.diff(slips) > 0.0)
    assert 0.0 < slips[0] < 1.0 and not any(r.stalled for r in uphill)
    # steady driving: the window slips agree (spread << mean)
    assert all(r.slip_std < 1e-3 for r in uphill)


def test_stall_limit_matches_quasi_static_estimate(rocky7):
    p = wheel_params(SOIL, float(rocky7.wheel_radius[0]), float(rocky7.wheel_width[0]))
    limit = max_climbable_slope(p, rocky7.total_mass, rocky7.nw)
    assert math.radians(8.0) < limit < math.radians(14.0)
    below, _ = run_slope(rocky7, limit - math.radians(2.0), contact_params=bekker_params(SOIL),
                         **SHORT)
    above, _ = run_slope(rocky7, limit + math.radians(2.0), contact_params=bekker_params(SOIL),
                         **SHORT)
    assert below.slip_mean < 1.0 and not below.stalled
    assert above.stalled and above.slip_mean > 1.0  # no progress: slides back


def test_downhill_slip_falls_below_flat(rocky7, uphill):
    down = slip_vs_slope(rocky7, (5.0, 15.0), ("downhill",), contact_params=bekker_params(SOIL),
                         **SHORT)
    assert uphill[0].slip_mean > down[0].slip_mean > down[1].slip_mean
    assert down[1].slip_mean < 0.0  # skids ahead of the wheels on the steep descent


def test_energy_balance_closes_on_constant_slope(uphill):
    """Constant speed up a plane: motor work = m g Δh + ΔKE + contact dissipation."""
    for r in uphill:
        assert abs(r.energy.residual) < 0.01
    e = uphill[2].energy  # 5°: potential gain is a large share of the motor work
    assert 0.2 < e.potential / e.motor < 0.9
    assert abs(e.kinetic) < 1e-3 * e.motor
    assert e.soil_power > e.power > 0.0  # compaction work is on top of the pull's work


def test_crosshill_drifts_downhill_and_balances_energy(rocky7):
    (r,) = slip_vs_slope(rocky7, (10.0,), ("crosshill",), contact_params=bekker_params(SOIL),
                         **SHORT)
    assert r.drift_deg > 1.0
    assert abs(r.energy.residual) < 0.01


def test_roams_variability_seeded_and_switchable(rocky7):
    kw = dict(contact_model="roams", contact_params=roams_params(SOIL), duration=3.0,
              settle=1.0, window=0.5)
    _, ta = run_slope(rocky7, math.radians(10.0), variability=(0.3, 0.2), seed=4, **kw)
    _, tb = run_slope(rocky7, math.radians(10.0), variability=(0.3, 0.2), seed=4, **kw)
    np.testing.assert_array_equal(ta.q, tb.q)
    _, tc = run_slope(rocky7, math.radians(10.0), variability=(0.3, 0.2), seed=5, **kw)
    assert np.abs(tc.q - ta.q).max() > 1e-6
    _, td = run_slope(rocky7, math.radians(10.0), variability=(0.0, 0.0), seed=4, **kw)
    _, tp = run_slope(rocky7, math.radians(10.0), **kw)
    np.testing.assert_allclose(td.q, tp.q, atol=1e-6)  # only the warm start differs
    with pytest.raises(ParameterError, match="variability needs contact_model='roams'"):
        run_slope(rocky7, 0.1, variability=(0.1, 0.1))
    with pytest.raises(ParameterError, match="direction must be one of"):
        run_slope(rocky7, 0.1, "sideways")


def test_calibration_recovers_observable_soil_constants(rocky7):
    fit = calibrate_soil(rocky7, SOIL, names=("phi", "kphi"), start_scale=(0.85, 1.3),
                         duration=4.0, slope_deg=8.0, noise=2e-4, seed=1)
    err = np.abs(fit.estimate - fit.truth)
    assert np.all(err < 3.0 * fit.sigma)
    assert fit.sigma[0] < 0.02 * fit.truth[0]  # phi is well observed on a slope
    assert fit.rms < 3 * 2e-4 * math.sqrt(2)
