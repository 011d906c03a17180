"""IPEM on synthetic logs with known truth: online (systematic + stochastic), outliers,
consistency (NEES for 1, 2, 4 s), offline (3.44)/(3.46)."""

import numpy as np
import pytest

from wmr_model.calibration import (
    IntervalPolicy,
    ModelPredictor,
    OnlineCalibrator,
    calibrate_offline,
    evaluate,
    inject_outliers,
    nees_bounds,
    select_intervals,
    synthetic_log,
)
from wmr_model.io.vehicles import load_vehicle_spec
from wmr_model.terrain import surface as tr
from wmr_model.vehicles.model import SensorSpec, compile_vehicle
from wmr_model.vehicles.parameters import with_parameters

SYS = ["slip.p1", "slip.p3", "slip.p4", "slip.p6", "wheel.front_left_wheel.radius",
       "sensor.gps.x", "sensor.gps.y"]
NOISE = ["noise.U.wz_wz", "noise.U.vx_vx", "noise.U.vy_vy"]
STD0 = {"slip.p1": 0.5, "slip.p3": 0.5, "slip.p4": 0.5, "slip.p6": 0.5,
        "wheel.front_left_wheel.radius": 0.02, "sensor.gps.x": 0.5, "sensor.gps.y": 0.5,
        **{n: 0.05 for n in NOISE}}
Q_TRUE = np.diag([0.0, 0.0, 2e-3, 4e-3, 2e-3, 0.0])
U_TRUE = dict(zip(NOISE, np.sqrt([2e-3, 4e-3, 2e-3])))


@pytest.fixture(scope="module")
def setup():
    spec = load_vehicle_spec("warthog")
    spec.sensors.append(SensorSpec("gps", "base_link", (0.0, 0.0, 0.8)))
    nominal = compile_vehicle(spec)  # believes: radius 0.30, antenna above the body origin
    dims = {"wheel.front_left_wheel.radius": 0.315, "sensor.gps.x": 0.3, "sensor.gps.y": -0.2}
    terrain = tr.rough(0.3, 4.0, seed=3, x_range=(-30, 30), y_range=(-30, 30), resolution=0.2)
    slip = {"slip.p1": 0.1, "slip.p3": 0.3, "slip.p4": 0.15, "slip.p6": -0.3}
    kw = dict(terrain=terrain, slip=slip, Qprime=Q_TRUE, pose_sensor="gps",
              truth=dims, box=20)
    true_model = with_parameters(nominal, dims)
    runs = [synthetic_log(true_model, seed=s, duration=d, **kw) for s, d in ((1, 300), (2, 200))]
    return nominal, terrain, runs


def _within_3_sigma(cal_est, cal_std, truth, names):
    z = {n: (cal_est[n] - truth[n]) / cal_std[n] for n in names}
    assert all(abs(v) < 3.0 for v in z.values()), z
    return z


def test_online_systematic_and_stochastic_converge_and_are_consistent(setup):
    nominal, terrain, (run, val) = setup
    pred = ModelPredictor(nominal, terrain, dt=0.02)
    iv = select_intervals(run.log.pose_time, IntervalPolicy("time", 2.0))
    cal = OnlineCalibrator(pred, SYS + NOISE, std0=STD0, x0={n: 0.1 for n in NOISE},
                           qprime_bound={n: 0.1 for n in NOISE}, qprime_bound_intervals=30)
    cal.run(run.log, iv)
    # started wrong: slip 0, radius 0.30 (true 0.315), antenna (0, 0) (true (0.3, -0.2))
    _within_3_sigma(cal.estimate, cal.std, run.truth, SYS)
    _within_3_sigma(cal.estimate, cal.std, U_TRUE, NOISE)
    assert cal.converged_after() < 80  # of 150 intervals (measured: ~40)
    # consistency (Fig. 3.8): average NEES on an independent log within chi-square bounds
    for L in (1.0, 2.0, 4.0):
        ivL = select_intervals(val.log.pose_time, IntervalPolicy("time", L))
        ev = evaluate(pred, val.log, ivL, cal.estimate)
        lo, hi = nees_bounds(len(ivL), 3, 0.99)
        assert lo < ev.mean_nees < hi, (L, ev.mean_nees, lo, hi)


def test_outliers_are_rejected_and_do_not_move_the_estimate(setup):
    nominal, terrain, (run, _) = setup
    pred = ModelPredictor(nominal, terrain, dt=0.02)
    iv = select_intervals(run.log.pose_time, IntervalPolicy("time", 2.0))[:70]
    bad_idx = iv[50:53, 1]  # three bad ground-truth poses late in the run
    bad = inject_outliers(run.log, bad_idx, offset=1.0)
    kw = dict(std0=STD0, fixed_noise=U_TRUE)
    clean = OnlineCalibrator(pred, SYS, **kw)
    dirty = OnlineCalibrator(pred, SYS, **kw)
    clean.run(run.log, iv)
    rec = dirty.run(bad, iv)
    touched = [k for k, (a, b) in enumerate(iv) if a in bad_idx or b in bad_idx]
    assert all(not rec[k].accepted for k in touched)
    assert sum(not r.accepted for r in rec) == len(touched)
    x_clean = np.array([h.x for h in clean.history])
    x_dirty = np.array([h.x for h in dirty.history])
    keep = [k for k in range(len(iv)) if k not in touched]
    # only the skipped (good) information is lost: final estimates agree within 1 sigma
    std = np.sqrt(np.diag(clean.P))
    assert np.all(np.abs(x_clean[-1] - x_dirty[-1]) < 1.0 * std)
    assert len(keep) == len(iv) - len(touched)


def test_offline_recovers_truth(setup):
    nominal, terrain, (run, _) = setup
    pred = ModelPredictor(nominal, terrain, dt=0.02)
    iv = select_intervals(run.log.pose_time, IntervalPolicy("time", 2.0))[:100]
    res = calibrate_offline(pred, run.log, iv, SYS + NOISE, x0={n: 0.1 for n in NOISE},
                            rounds=1, gate_rounds=1, max_nfev=6)
    _within_3_sigma(res.values, res.std, run.truth, SYS)
    for n in NOISE:  # (3.46) maximum likelihood: within 30 % of the truth
        assert abs(res.values[n] / U_TRUE[n] - 1) < 0.3, (n, res.values[n])
    # Q' standard deviations from the Fisher information: finite, and the truth within 3 sigma
    assert all(np.isfinite(res.std[n]) and res.std[n] > 0 for n in NOISE), res.std
    _within_3_sigma(res.values, res.std, U_TRUE, NOISE)
    # information bound: a standard deviation estimated from K m residual components has a
    # relative std of at least 1 / sqrt(2 K m) (all variance explained by that one entry); the
    # measurement noise and the other entries share the residuals, so the std is above that
    # bound but of its order
    rel = np.array([res.std[n] / res.values[n] for n in NOISE])
    rule = 1.0 / np.sqrt(2 * res.inliers.sum() * 3)
    assert np.all((rel > 0.9 * rule) & (rel < 5 * rule)), (rel, rule)
