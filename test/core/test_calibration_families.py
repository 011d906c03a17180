"""Parameter families of IPEM beyond slip/radius/sensor: steering-potentiometer maps
(``steer.<joint>.gain/offset``) and the centre of gravity (``vehicle.cg.x/y/z``).

Each test generates ground truth with known "true" values (truth -> log), starts the online
calibrator from the wrong nominal values and requires the truth within 3 standard deviations
of the estimate, with the estimate's uncertainty well below its prior.
"""

import numpy as np
import pytest

from wmr_model import kinematics as kin
from wmr_model.calibration import (
    CalibrationLog,
    IntervalPolicy,
    ModelPredictor,
    OnlineCalibrator,
    select_intervals,
    synthetic_log,
)
from wmr_model.errors import ParameterError
from wmr_model.io.vehicles import load_vehicle
from wmr_model.parameters import get_spec
from wmr_model.prediction.predict import predict
from wmr_model.terrain import surface as tr
from wmr_model.vehicles.parameters import get_parameter, with_parameters

STEER_TRUE = {"steer.S1.gain": 1.15, "steer.S1.offset": 0.06, "steer.S2.gain": 0.9,
              "steer.S2.offset": -0.04}


def _within_3_sigma(cal, truth):
    z = {n: (cal.estimate[n] - truth[n]) / cal.std[n] for n in truth}
    assert all(abs(v) < 3.0 for v in z.values()), (z, cal.estimate, cal.std)


def _steered_log(seed=0, duration=80.0, dt=0.02):
    """Rocky 7 on flat ground: wheel rates logged, steer angles only as pot readings
    (reading = (angle - offset) / gain + noise); ground truth at 5 Hz."""
    rng = np.random.default_rng(seed)
    m = load_vehicle("rocky7")
    act = [m.joint_names[int(k)] for k in m.actuated_joints]
    T = int(round(duration / dt))
    t = np.arange(T + 1) * dt
    steer = {"S1": 0.35 * np.sin(0.4 * t + 0.3), "S2": -0.25 * np.sin(0.23 * t + 1.0)}
    cmds = np.zeros((T, len(act)))
    for a, jn in enumerate(act):
        cmds[:, a] = np.diff(steer[jn]) / dt if jn in steer else 0.3 / 0.065
    q = m.neutral_state()
    for jn, ang in steer.items():
        q[7 + m.joint_names.index(jn)] = ang[0]
    q0, _ = kin.initialize_contact(m, tr.flat(), q)
    traj = predict(m, tr.flat(), q0, cmds, dt).q[0]
    wheels = [a for a, jn in enumerate(act) if jn not in steer]
    k = np.arange(0, T + 1, 10)
    pose = traj[k, :7].copy()
    pose[:, 4:6] += 0.005 * rng.standard_normal((len(k), 2))
    cov = np.repeat(np.diag([1e-4] * 3 + [2.5e-5] * 3)[None], len(k), axis=0)
    reading = np.stack([(steer[j] - STEER_TRUE[f"steer.{j}.offset"])
                        / STEER_TRUE[f"steer.{j}.gain"] for j in ("S1", "S2")], axis=1)
    reading += 0.002 * rng.standard_normal(reading.shape)
    log = CalibrationLog(joint_names=tuple(act[a] for a in wheels),
                         joint_time=(np.arange(T) + 0.5) * dt, joint_rate=cmds[:, wheels],
                         pose_time=t[k], pose=pose, pose_covariance=cov,
                         pot_names=("S1", "S2"), pot_time=t, pot_reading=reading,
                         source="steered rocky7")
    return m, log


def test_steering_pot_gain_and_offset_are_recovered():
    m, log = _steered_log()
    pred = ModelPredictor(m, tr.flat(), fidelity="kinematic", dt=0.02)
    iv = select_intervals(log.pose_time, IntervalPolicy("time", 2.0))
    names = list(STEER_TRUE)
    std0 = {n: 0.3 if n.endswith("gain") else 0.2 for n in names}
    cal = OnlineCalibrator(pred, names, std0=std0, fixed_noise={"noise.U.wz_wz": 1e-3})
    cal.run(log, iv)  # starts at gain 1, offset 0
    _within_3_sigma(cal, STEER_TRUE)
    assert all(cal.std[n] < 0.2 * std0[n] for n in names), cal.std
    with pytest.raises(ParameterError, match="not an actuated joint"):
        pred.check_names(["steer.D1.gain"])


def test_cg_offset_is_recovered_from_turning_slip():
    nominal = load_vehicle("warthog")
    truth = {"vehicle.cg.x": 0.3}
    slip = {"slip.p3": 0.3, "slip.p4": 0.15, "slip.p6": -0.3}
    Q = np.diag([0.0, 0.0, 1e-3, 2e-3, 1e-3, 0.0])
    run = synthetic_log(with_parameters(nominal, truth), tr.flat(), duration=160.0, slip=slip,
                        Qprime=Q, yaw_rate=0.6, seed=7)
    pred = ModelPredictor(nominal, tr.flat(), dt=0.02, base=dict(slip))
    iv = select_intervals(run.log.pose_time, IntervalPolicy("time", 2.0))
    fixed = dict(zip(["noise.U.wz_wz", "noise.U.vx_vx", "noise.U.vy_vy"],
                     np.sqrt([1e-3, 2e-3, 1e-3])))
    cal = OnlineCalibrator(pred, ["vehicle.cg.x"], std0={"vehicle.cg.x": 0.5},
                           fixed_noise=fixed)
    assert cal.estimate["vehicle.cg.x"] == pytest.approx(0.0)  # the description's cg
    cal.run(run.log, iv)
    _within_3_sigma(cal, truth)
    assert cal.std["vehicle.cg.x"] < 0.1


def test_cg_parameters_move_the_composite_cg():
    m = load_vehicle("warthog")
    z0 = get_parameter(m, "vehicle.cg.z")
    m2 = with_parameters(m, {"vehicle.cg.x": 0.2, "vehicle.cg.y": -0.1})
    assert [get_parameter(m2, f"vehicle.cg.{c}") for c in "xyz"] == pytest.approx(
        [0.2, -0.1, z0])
    assert m2.total_mass == pytest.approx(m.total_mass)
    assert get_spec("steer.S1.gain").default == 1.0
    with pytest.raises(ParameterError, match=r"vehicle\.cg\.x"):
        with_parameters(m, {"vehicle.cg.x": 50.0})
