"""The shipped Husky A200 (issue 21): public dimensions, masses and inertias recomputed from the
shapes the URDF comment states, and the skid-steer yaw track the sanity check uses; a synthetic
Husky run calibrates p2/p6 within 3 sigma of the truth; the wrong vehicle is reported."""

import numpy as np
import pytest

from wmr_model.calibration import (
    IntervalPolicy,
    ModelPredictor,
    OnlineCalibrator,
    select_intervals,
    synthetic_log,
)
from wmr_model.calibration.predictors import DiffDrivePredictor
from wmr_model.calibration.reference import reference_faults, sanity_warnings, yaw_track
from wmr_model.io.vehicles import list_vehicles, load_vehicle
from wmr_model.kinematics import api
from wmr_model.terrain import surface as tr
from wmr_model.vehicles.parameters import with_parameters


def test_husky_dimensions_masses_and_inertias():
    m = load_vehicle("husky")
    assert "husky" in list_vehicles()
    assert m.nw == 4 and np.allclose(m.wheel_radius, 0.1651)
    Tw = api.forward_kinematics(m, api.create_data(m), m.neutral_state())
    p = {n: Tw[f, :3, 3] for n, f in zip(m.wheel_names, m.wheel_frame)}
    assert p["front_left_wheel"][0] - p["rear_left_wheel"][0] == pytest.approx(0.512)
    assert p["front_left_wheel"][1] - p["front_right_wheel"][1] == pytest.approx(0.555)
    assert m.A_joint.shape[0] == 0  # rigid: no suspension constraint
    assert float(np.sum(m.mass)) == pytest.approx(50.0)
    # body box 0.99 x 0.67 x 0.25 m, 40 kg; wheels solid cylinders r 0.1651, h 0.1143, 2.5 kg
    body = np.diag(m.inertia[0])
    assert body[2] == pytest.approx(40 / 12 * (0.99 ** 2 + 0.67 ** 2), rel=1e-6)
    w = int(m.wheel_frame[0])
    assert m.inertia[w][1, 1] == pytest.approx(2.5 * 0.1651 ** 2 / 2, rel=1e-6)
    # skid-steer yaw track B (1 + (L / B)^2)
    assert yaw_track(m) == pytest.approx(0.555 * (1 + (0.512 / 0.555) ** 2))


def test_husky_calibrates_and_a_wrong_radius_is_reported():
    m = load_vehicle("husky")
    run = synthetic_log(m, tr.flat(), duration=60.0, dt=0.02, slip={"slip.p6": -0.2,
                        "slip.p2": -0.05}, speed=(0.3, 1.0), pose_rate=10.0, seed=4)
    log = run.log
    iv = select_intervals(log.pose_time, IntervalPolicy("time", 2.0, min_distance=0.5,
                                                        min_turn=0.2), log.pose[:, 4:7],
                          __import__("wmr_model.calibration.intervals", fromlist=["x"])
                          .unwrapped_yaw(log.pose[:, :4]))
    cal = OnlineCalibrator(ModelPredictor(m, dt=0.05), ["slip.p2", "slip.p6"],
                           std0={"slip.p2": 0.5, "slip.p6": 0.5})
    cal.run(log, iv)
    for n, v in (("slip.p2", -0.05), ("slip.p6", -0.2)):
        assert abs(cal.estimate[n] - v) < 3 * cal.std[n], (n, cal.estimate[n], cal.std[n])
    dd = DiffDrivePredictor.from_model(m)
    f = reference_faults(log, dd)
    warn, ratios = sanity_warnings(log, dd, yaw_track(m), f, "run")
    assert not warn and 0.8 < ratios["speed"] < 1.2, ratios
    # the same log read with a radius twice too large: the speed ratio ~0.5 is reported
    big = with_parameters(m, {f"wheel.{n}.radius": 0.33 for n in m.wheel_names})
    dd2 = DiffDrivePredictor.from_model(big)
    warn, ratios = sanity_warnings(log, dd2, yaw_track(big), reference_faults(log, dd2), "run")
    assert ratios["speed"] == pytest.approx(0.5, rel=0.2)
    assert any("wheel radius" in w and "right vehicle" in w for w in warn), warn
