"""Identifiability of a calibrated set (wmr_model.calibration.identifiability).

Closed forms: the posterior of a linear-Gaussian identification, ``P = (P0^-1 + H^T H /
sigma^2)^-1``, over regressors ``H`` built with a known structure - two columns that are
multiples of each other (confounded pair), one a sum of two others (a triple whose pairwise
correlations stay moderate), a column of zeros (unobserved), and independent columns
(identifiable). A real filter check runs the identification EKF on a synthetic Warthog log.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from wmr_model.calibration.identifiability import check_identifiability
from wmr_model.errors import ParameterError

REPO = Path(__file__).resolve().parents[2]
STD0 = 0.5
NAMES = ("a", "b", "c")


def _posterior(H, sigma=0.01, std0=STD0):
    n = H.shape[1]
    return np.linalg.inv(np.eye(n) / std0**2 + H.T @ H / sigma**2)


def _regressors(seed=0, m=300):
    return np.random.default_rng(seed).normal(size=(m, 3))


def test_independent_regressors_are_identifiable():
    H = _regressors()
    res = check_identifiability(NAMES, _posterior(H), dict.fromkeys(NAMES, STD0), 50)
    assert res.ok and res.checked, res.confounded
    assert all(r < 0.3 for r in res.multiple_correlation.values())
    assert all(r < 0.01 for r in res.std_ratio.values())
    assert res.pairs == ()


def test_a_confounded_pair_is_flagged_and_the_third_parameter_is_not():
    H = _regressors()
    H[:, 2] = -2.0 * H[:, 0]  # c's effect is exactly -2 x a's: only a - 2 c is observable
    res = check_identifiability(NAMES, _posterior(H), dict.fromkeys(NAMES, STD0), 50)
    assert set(res.confounded) == {"a", "c"}
    assert res.confounded["a"].startswith("confounded with c: the combination a +0.5 c")
    assert res.confounded["c"].startswith("confounded with a: the combination c +2 a")
    assert "keeps 1.00 of its prior std" in res.confounded["a"]
    assert [(p[0], p[1]) for p in res.pairs] == [("a", "c")]
    assert res.pairs[0][2] > 0.99  # the prior pulls both the same way: rho -> +1
    assert res.multiple_correlation["b"] < 0.3


def test_a_confounded_triple_is_flagged():
    H = _regressors()
    H[:, 2] = H[:, 0] + H[:, 1]  # c = a + b: each pair alone is independent in H
    res = check_identifiability(NAMES, _posterior(H), dict.fromkeys(NAMES, STD0), 50)
    assert set(res.confounded) == set(NAMES)
    assert all("confounded with" in why for why in res.confounded.values())
    assert all(r > 0.999 for r in res.multiple_correlation.values())


def test_strongly_correlated_but_well_determined_parameters_pass():
    """Two wheel radii of a differential drive: distance measures their sum well, heading
    their difference less well - correlation near 1, yet both are pinned far below the
    prior; that is not a confounded pair."""
    u_sum, u_diff = np.array([1.0, 1.0]) / 2**0.5, np.array([1.0, -1.0]) / 2**0.5
    # information: the difference known to 1e-5 m (heading), the sum to 1e-4 m (distance)
    info = np.eye(2) / 0.005**2 + np.outer(u_sum, u_sum) / 1e-4**2 + np.outer(
        u_diff, u_diff) / 1e-5**2
    P = np.linalg.inv(info)
    res = check_identifiability(("left", "right"), P, {"left": 0.005, "right": 0.005}, 90)
    assert res.pairs and res.pairs[0][2] > 0.95  # reported as information ...
    assert res.ok, res.confounded  # ... not flagged
    assert max(res.std_ratio.values()) < 0.3


def test_an_unexcited_parameter_is_unobserved_only_after_min_intervals():
    H = _regressors()
    H[:, 1] = 0.0  # b never acts on the residuals (p1 on flat ground)
    P = _posterior(H)
    std0 = dict.fromkeys(NAMES, STD0)
    early = check_identifiability(NAMES, P, std0, 5, min_intervals=20)
    assert early.ok and not early.checked
    late = check_identifiability(NAMES, P, std0, 20, min_intervals=20)
    assert list(late.confounded) == ["b"] and late.confounded["b"].startswith("unobserved")
    assert late.std_ratio["b"] == pytest.approx(1.0)


def test_bad_arguments_name_the_problem():
    with pytest.raises(ParameterError, match=r"expected shape \(3, 3\)"):
        check_identifiability(NAMES, np.eye(2), dict.fromkeys(NAMES, 1.0), 0)
    with pytest.raises(ParameterError, match=r"no prior standard deviation for \['c'\]"):
        check_identifiability(NAMES, np.eye(3), {"a": 1.0, "b": 1.0}, 0)
    with pytest.raises(ParameterError, match=r"finite and > 0: \['b'\]"):
        check_identifiability(NAMES, np.eye(3), {"a": 1.0, "b": 0.0, "c": 1.0}, 0)


# ---- the identification EKF on a synthetic Warthog grass run -----------------------------------
RADIUS = "wheel.front_left_wheel.radius"
GRASS = {"slip.p1": 0.10, "slip.p2": -0.05, "slip.p3": 0.30, "slip.p4": 0.15, "slip.p6": -0.40}


@pytest.fixture(scope="module")
def grass_run():
    """200 s of a Warthog on flat grass with a 3 % too large first wheel (wmr synth's truth)."""
    from wmr_model.calibration import IntervalPolicy, select_intervals, synthetic_log
    from wmr_model.io.vehicles import load_vehicle
    from wmr_model.terrain import surface as tr
    from wmr_model.vehicles.parameters import with_parameters

    nominal = load_vehicle("warthog")
    dims = {RADIUS: float(nominal.wheel_radius[0]) * 1.03}
    U = np.diag([0.0, 0.0, 0.045, 0.065, 0.045, 0.0])
    run = synthetic_log(with_parameters(nominal, dims), tr.flat(), duration=200.0, dt=0.02,
                        slip=GRASS, Qprime=U.T @ U, truth=dims, seed=3)
    iv = select_intervals(run.log.pose_time, IntervalPolicy("time", 2.0, min_distance=0.3),
                          positions=run.log.pose[:, 4:7])
    return nominal, run, iv


def _calibrate(nominal, run, iv, params, noise, std0, noise0):
    from wmr_model.calibration import ModelPredictor, OnlineCalibrator
    from wmr_model.calibration.table import initial_std
    from wmr_model.estimation.odometry import DEFAULT_QPRIME_U
    from wmr_model.terrain import surface as tr

    names = list(params) + list(noise)
    std = {n: float(std0.get(n, initial_std([n])[n])) for n in names}
    fixed = {k: v for k, v in DEFAULT_QPRIME_U.items() if k.startswith("noise.U.")
             and k not in noise}
    cal = OnlineCalibrator(ModelPredictor(nominal, tr.flat(), dt=0.05), names,
                           x0={n: noise0.get(n, 0.1) for n in noise}, std0=std,
                           fixed_noise=fixed, qprime_bound=dict.fromkeys(noise, 0.1))
    cal.run(run.log, iv)
    return cal, std


def test_shipped_warthog_set_is_identifiable_and_recovers_the_radius(grass_run):
    """The calibrator section of config/nodes/warthog.yaml, run on the synthetic truth: the
    check passes and every estimate is within 3 sigma (with the former set slip.p5, p6 and the
    radius, the radius came out 0.2605 +- 0.0055 m against 0.309: -9 sigma)."""
    import yaml

    from wmr_model.calibration.identifiability import check_identifiability

    nominal, run, iv = grass_run
    doc = yaml.safe_load((REPO / "config" / "nodes" / "warthog.yaml").read_text())
    sec = doc["/**/calibrator_node"]["ros__parameters"]
    std0 = {k[len("initial_std."):]: v for k, v in sec.items() if k.startswith("initial_std.")}
    noise0 = {k: v for k, v in sec.items() if k.startswith("noise.U.")}
    cal, prior = _calibrate(nominal, run, iv, sec["params"], sec["noise"], std0, noise0)
    res = check_identifiability(cal.names, cal.P, prior, cal.n_accepted)
    assert res.ok, res.confounded
    truth = {**GRASS, **run.truth}
    for n in sec["params"]:
        assert abs(cal.estimate[n] - truth.get(n, 0.0)) < 3 * cal.std[n], (
            n, cal.estimate[n], cal.std[n], truth.get(n, 0.0))


def test_p5_next_to_p2_and_one_wheel_radius_is_reported(grass_run):
    """On a skid steer one wheel's radius acts as p2 plus p5: that set is not identifiable."""
    from wmr_model.calibration.identifiability import check_identifiability

    nominal, run, iv = grass_run
    params = ["slip.p2", "slip.p5", "slip.p6", RADIUS]
    cal, prior = _calibrate(nominal, run, iv, params, [], {RADIUS: 0.02}, {})
    res = check_identifiability(cal.names, cal.P, prior, cal.n_accepted)
    assert RADIUS in res.confounded, res
    assert "slip.p6" not in res.confounded


@pytest.mark.parametrize("vehicle", ["diffdrive", "rocky7"])
def test_other_shipped_sets_are_identifiable(vehicle):
    """The calibrator sections of the other shipped configs on a synthetic run (diffdrive:
    flat, radii 2 % / -1 % off; rocky7: the 'dirt' preset's rough terrain and slip): the check
    passes (the former rocky7 set with p1, p3 and p4 left them at 0.57-0.87 of the prior)."""
    import yaml

    from wmr_model.calibration import (
        IntervalPolicy,
        ModelPredictor,
        OnlineCalibrator,
        select_intervals,
        synthetic_log,
    )
    from wmr_model.calibration.identifiability import check_identifiability
    from wmr_model.calibration.table import initial_std
    from wmr_model.estimation.odometry import DEFAULT_QPRIME_U
    from wmr_model.io.synth_bag import synth_terrain
    from wmr_model.io.vehicles import load_vehicle
    from wmr_model.terrain import surface as tr
    from wmr_model.vehicles.parameters import with_parameters

    sec = yaml.safe_load((REPO / "config" / "nodes" / f"{vehicle}.yaml").read_text())[
        "/**/calibrator_node"]["ros__parameters"]
    nominal = load_vehicle(vehicle)
    params, noise = list(sec["params"]), list(sec["noise"])
    fidelity = sec.get("fidelity", "enhanced")
    slip = {"slip.p1": 0.06, "slip.p2": -0.03, "slip.p3": 0.15, "slip.p4": 0.08,
            "slip.p6": -0.25} if fidelity == "enhanced" else {}
    dims = {}
    for n in params:
        if n.startswith("wheel."):
            i = nominal.wheel_names.index(n.split(".")[1])
            dims[n] = float(nominal.wheel_radius[i]) * (1.02 if "left" in n else 0.99)
    terrain = synth_terrain("dirt", 1, 20.0) if vehicle == "rocky7" else tr.flat()
    extra = {"speed": (0.05, 0.3), "yaw_rate": 0.3} if vehicle == "rocky7" else {}
    U = np.diag([0.0, 0.0, 0.02, 0.03, 0.02, 0.0])
    run = synthetic_log(with_parameters(nominal, dims), terrain, duration=300.0, dt=0.02,
                        slip=slip, Qprime=U.T @ U, truth=dims, seed=2, **extra)
    policy = IntervalPolicy(sec.get("interval.kind", "time"), float(sec["interval.length"]),
                            min_distance=float(sec.get("interval.min_distance", 0.5)),
                            max_duration=float(sec.get("interval.max_duration", 60.0)))
    iv = select_intervals(run.log.pose_time, policy, positions=run.log.pose[:, 4:7])
    names = params + noise
    std0 = {n: float(sec.get(f"initial_std.{n}", initial_std([n])[n])) for n in names}
    fixed = {k: v for k, v in DEFAULT_QPRIME_U.items() if k.startswith("noise.U.")
             and k not in noise}
    cal = OnlineCalibrator(ModelPredictor(nominal, terrain, fidelity=fidelity, dt=0.05), names,
                           x0={n: sec.get(n, 0.1) for n in noise}, std0=std0,
                           fixed_noise=fixed, qprime_bound=dict.fromkeys(noise, 0.1),
                           components=tuple(sec.get("components", ("x", "y", "yaw"))))
    cal.run(run.log, iv)
    res = check_identifiability(cal.names, cal.P, std0, cal.n_accepted)
    assert res.checked and res.ok, res.confounded
    for n, v in dims.items():  # the radii are recovered
        assert abs(cal.estimate[n] - v) < 3 * cal.std[n], (n, cal.estimate[n], cal.std[n], v)
