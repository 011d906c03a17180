"""Steering angles as inputs (measured or commanded with a lag), differential encoders and
the planar baseline of each vehicle kind, against closed forms."""

from __future__ import annotations

import math

import numpy as np
import pytest

from wmr_model.calibration.logs import CalibrationLog
from wmr_model.calibration.predictors import (
    BicyclePredictor,
    DiffDrivePredictor,
    ModelPredictor,
    planar_predictor,
)
from wmr_model.errors import ModelError
from wmr_model.estimation.steering import (
    LagFilter,
    lagged_command,
    steer_inputs,
    steer_joints,
)
from wmr_model.io.urdf import load_urdf
from wmr_model.io.vehicles import load_vehicle, vehicle_files
from wmr_model.vehicles.model import compile_vehicle

# ---- the lag of a commanded steering joint ---------------------------------------------------


def test_lag_step_response_is_the_first_order_closed_form():
    tau = 0.2
    t = np.array([0.0, 1.0, 3.0])  # commands: 0, then a step to 0.3 at 1 s, then 0.1 at 3 s
    u = np.array([0.0, 0.3, 0.1])
    tq = np.linspace(0.0, 5.0, 501)
    y = lagged_command(t, u, tau, tq)
    y3 = 0.3 * (1 - math.exp(-2.0 / tau))  # the angle when the second step arrives
    want = np.where(tq < 1.0, 0.0, np.where(
        tq < 3.0, 0.3 * (1 - np.exp(-(tq - 1.0) / tau)),
        0.1 + (y3 - 0.1) * np.exp(-(tq - 3.0) / tau)))
    np.testing.assert_allclose(y, want, atol=1e-12)
    # no lag: the held command
    np.testing.assert_array_equal(lagged_command(t, u, 0.0, tq), u[np.clip(
        np.searchsorted(t, tq, side="right") - 1, 0, 2)])


def test_lag_filter_run_message_by_message_equals_the_batch():
    rng = np.random.default_rng(3)
    t = np.cumsum(rng.uniform(0.02, 0.08, 200))
    u = np.cumsum(rng.normal(0, 0.05, 200))
    f = LagFilter(0.15)
    assert math.isnan(f.at(0.0))
    got = []
    tq = t[1:] - 0.01  # just before each next command
    for k in range(len(t) - 1):
        f.update(t[k], u[k])
        got.append(f.at(tq[k]))
    # the batch follows only a window of history; its start-up differs by < e^-8 of a step
    np.testing.assert_allclose(got, lagged_command(t, u, 0.15, tq), atol=1e-4)


# ---- which joints steer -----------------------------------------------------------------------


def test_steering_joints_of_the_shipped_vehicles():
    assert steer_joints(load_vehicle("tricycle")) == ["front_steer_joint"]
    assert steer_joints(load_vehicle("f1tenth")) == ["front_steer_joint"]
    assert steer_joints(load_vehicle("rocky7")) == ["S1", "S2"]
    assert steer_joints(load_vehicle("warthog")) == []
    assert steer_joints(load_vehicle("zoe")) == []  # passive steering: no input
    si = steer_inputs(load_vehicle("f1tenth"))["front_steer_joint"]
    assert (si.source, si.lag, si.topic) == ("commanded", 0.1, "/joint_states_cmd_steer")
    assert steer_inputs(load_vehicle("tricycle"))["front_steer_joint"].source == "measured"


def _with_sidecar(name: str, edit) -> dict:
    import yaml

    urdf, sidecar = vehicle_files(name)
    data = yaml.safe_load(sidecar.read_text())
    edit(data)
    return {"urdf": str(urdf), "sidecar": data}


@pytest.mark.parametrize("edit, match", [
    (lambda d: d.update(steering={"front_wheel_joint": {"source": "measured"}}),
     r"steering.front_wheel_joint: not a steering joint .* the steering joints are "
     r"\['front_steer_joint'\]"),
    (lambda d: d.update(steering={"front_steer_joint": {"source": "guessed"}}),
     r"steering.front_steer_joint.source: expected one of \['measured', 'commanded'\], got "
     r"'guessed'"),
    (lambda d: d.update(steering={"front_steer_joint": {"source": "commanded", "lag": -1}}),
     r"steering.front_steer_joint.lag: must be in \[0, 10\] s, got -1"),
])
def test_steering_entry_errors_are_one_line(edit, match):
    f = _with_sidecar("tricycle", edit)
    model = compile_vehicle(load_urdf(f["urdf"], f["sidecar"]))
    with pytest.raises(ModelError, match=match) as e:
        steer_inputs(model)
    assert "\n" not in str(e.value)


def test_sidecar_steering_keys_are_checked():
    f = _with_sidecar("tricycle", lambda d: d.update(
        steering={"front_steer_joint": {"source": "measured", "gain": 2}}))
    with pytest.raises(ModelError, match=r"steering.front_steer_joint: unknown key"):
        load_urdf(f["urdf"], f["sidecar"])


# ---- a differential encoder -------------------------------------------------------------------


def test_differential_encoder_drives_the_mean_of_its_wheels():
    """F1TENTH: one motor through an open differential. Turning at steer angle delta about
    the rear axle, the kinematics gives the two rear wheels their own speeds (1 -+ b/(2R)) v
    whose mean is the encoder's, and the yaw rate of the bicycle closed form v tan(delta)/L."""
    from wmr_model import kinematics as kin
    from wmr_model.prediction.predict import predict
    from wmr_model.terrain.surface import flat

    m = load_vehicle("f1tenth")
    assert "differential_rear_axle_wheel_joint" in m.joint_constraint_names
    act = [m.joint_names[k] for k in m.actuated_joints]
    assert act == ["front_steer_joint", "rear_axle_wheel_joint"]
    r, L, b, delta, v = 0.050770426846314616, 0.32, 0.28, 0.2, 1.5
    q0 = m.neutral_state()
    q0[7 + m.joint_index("front_steer_joint")] = delta
    q0, _ = kin.initialize_contact(m, flat(), q0)
    T, dt = 50, 0.02
    cmds = np.zeros((1, T, 2))
    cmds[0, :, 1] = v / r
    p = predict(m, flat(), q0, cmds, dt)
    qd = p.qdot[0, -1]
    wl = qd[6 + m.joint_index("rear_left_wheel_joint")]
    wr = qd[6 + m.joint_index("rear_right_wheel_joint")]
    R = L / math.tan(delta)
    assert 0.5 * (wl + wr) == pytest.approx(v / r, rel=1e-6)
    assert wl * r == pytest.approx(v * (1 - b / (2 * R)), rel=1e-3)
    assert wr * r == pytest.approx(v * (1 + b / (2 * R)), rel=1e-3)
    assert qd[2] == pytest.approx(v * math.tan(delta) / L, rel=1e-3)


def test_differential_entry_errors_are_one_line():
    f = _with_sidecar("f1tenth", lambda d: d["encoder_map"].update(
        rear_axle_wheel_joint={"differential": ["rear_left_wheel_joint", "nosuch"]}))
    with pytest.raises(ModelError, match=r"encoder_map.rear_axle_wheel_joint.differential.*"
                       r"'nosuch'") as e:
        load_urdf(f["urdf"], f["sidecar"])
    assert "\n" not in str(e.value)
    f = _with_sidecar("f1tenth", lambda d: d["encoder_map"].update(
        rear_axle_wheel_joint={"differential": ["rear_left_wheel_joint"], "ratio": 1}))
    with pytest.raises(ModelError, match=r"needs two or more distinct wheel joints"):
        load_urdf(f["urdf"], f["sidecar"])


# ---- the planar baseline of each kind ---------------------------------------------------------


def test_planar_predictor_follows_the_kind():
    assert type(planar_predictor(load_vehicle("warthog"))) is DiffDrivePredictor
    assert type(planar_predictor(load_vehicle("pathfinder"))) is DiffDrivePredictor
    for name in ("tricycle", "f1tenth", "rocky7", "recbot"):
        assert type(planar_predictor(load_vehicle(name))) is BicyclePredictor, name
    dd = planar_predictor(load_vehicle("diffdrive"))
    assert "caster" not in " ".join(dd.left + dd.right)  # the caster is not a side
    pf = planar_predictor(load_vehicle("pathfinder"))  # left joints mirrored (axis 0 -1 0)
    assert pf.sign == {"front_left_wheel": -1.0, "rear_left_wheel": -1.0}


def _tricycle_log(delta: float, omega: float, T: float = 2.0,
                  commanded: tuple[str, ...] = ()) -> CalibrationLog:
    t = np.linspace(0.0, T, 41)
    return CalibrationLog(
        joint_names=("front_wheel_joint",), joint_time=t, joint_rate=np.full((41, 1), omega),
        pose_time=np.array([0.0, T]), pose=np.array([[1, 0, 0, 0, 0, 0, 0.0325]] * 2, float),
        pose_covariance=np.repeat(np.eye(6)[None] * 1e-4, 2, axis=0),
        pot_names=("front_steer_joint",), pot_time=t, pot_reading=np.full((41, 1), delta),
        steer_commanded=commanded)


@pytest.mark.parametrize("delta", [0.0, 0.15, -0.3])
def test_bicycle_and_3d_model_drive_the_tricycle_on_its_closed_form_arc(delta):
    """A front wheel driven at rim speed s, steered by delta, at L ahead of the rear axle: the
    rear axle moves at v = s cos(delta) on a circle of radius L / tan(delta)."""
    m = load_vehicle("tricycle")
    r, L, omega, T = 0.0325, 0.15, 20.0, 2.0
    s = r * omega
    v, w = s * math.cos(delta), s * math.sin(delta) / L
    yaw = w * T
    x = v / w * math.sin(yaw) if w else v * T
    y = v / w * (1 - math.cos(yaw)) if w else 0.0
    log = _tricycle_log(delta, omega, T)
    bp = planar_predictor(m, dt=0.01)
    end = bp.simulate(log, 0, 1, [], np.zeros((1, 0))).pose[0]
    np.testing.assert_allclose(end[4:6], [x, y], atol=1e-9)
    # the 3D kinematics' Euler steps lag the heading by w dt / 2: first order in dt
    for dt, tol in ((0.004, 2e-3), (0.001, 5e-4)):
        mp = ModelPredictor(m, fidelity="kinematic", dt=dt)
        end3 = mp.simulate(log, 0, 1, [], np.zeros((1, 0))).pose[0]
        np.testing.assert_allclose(end3[4:6], [x, y], atol=tol * s * T)


def test_a_commanded_steering_joint_follows_its_lag_in_every_prediction():
    """The command steps to delta at t = 0 from a wheel at 0: the predicted yaw change is that
    of the lagged angle, less than the instantaneous one by about tau w."""
    m = load_vehicle("tricycle")
    delta, omega, T, tau = 0.3, 20.0, 2.0, 0.25
    t = np.linspace(-1.0, T, 61)
    log = _tricycle_log(delta, omega, T, commanded=("front_steer_joint",))
    log = type(log)(**{**log.__dict__, "pot_time": t, "pot_reading":
                       np.where(t[:, None] < 0, 0.0, delta)})
    bp = planar_predictor(m, dt=0.002)
    bp.lag = {"front_steer_joint": tau}
    end = bp.simulate(log, 0, 1, [], np.zeros((1, 0))).pose[0]
    # yaw = int s sin(delta(t)) / L dt with delta(t) = delta (1 - exp(-t / tau))
    tt = np.linspace(0.0, T, 20001)
    d = delta * (1 - np.exp(-tt / tau))
    want = np.trapezoid(0.0325 * omega * np.sin(d) / 0.15, tt)
    got = 2 * math.atan2(end[3], end[0])
    assert got == pytest.approx(want, rel=2e-3)
    mp = ModelPredictor(m, fidelity="kinematic", dt=0.01)
    mp._steer_lag["front_steer_joint"] = tau
    end3 = mp.simulate(log, 0, 1, [], np.zeros((1, 0))).pose[0]
    assert 2 * math.atan2(end3[3], end3[0]) == pytest.approx(want, rel=2e-2)
    # calibrating the lag: the candidate's value is the one used
    e2 = mp.simulate(log, 0, 1, ["steer.front_steer_joint.lag"], np.array([[0.0]])).pose[0]
    inst = 0.0325 * omega * math.sin(delta) / 0.15 * T
    assert 2 * math.atan2(e2[3], e2[0]) == pytest.approx(inst, rel=2e-2)


def test_live_steering_angles_equal_the_offline_merge():
    """SteerAngles fed message by message (commands arriving ahead of the encoder stamps
    they are asked for, as a reorder window releases them) gives the offline angles."""
    from wmr_model.estimation.steering import SteerAngles, SteerInput

    rng = np.random.default_rng(5)
    t = np.cumsum(rng.uniform(0.02, 0.07, 400))
    u = np.clip(np.cumsum(rng.normal(0, 0.03, 400)), -0.4, 0.4)
    sa = SteerAngles({"s": SteerInput("s", "commanded", 0.12),
                      "m": SteerInput("m", "measured")})
    got_c, got_m, tq = [], [], []
    for k in range(len(t)):
        sa.add(t[k], ["s", "m"], [u[k], 2 * u[k]])
        if k >= 5:  # ask for a stamp three commands back
            q = 0.5 * (t[k - 3] + t[k - 2])
            a = sa.at(q)
            tq.append(q)
            got_c.append(a["s"])
            got_m.append(a["m"])
    tq = np.array(tq)
    np.testing.assert_allclose(got_c, lagged_command(t, u, 0.12, tq), atol=1e-12)
    # measured: two samples kept, so only stamps within the last period interpolate exactly
    last = sa.at(t[-1] - 0.001)["m"]
    assert last == pytest.approx(np.interp(t[-1] - 0.001, t, 2 * u), abs=1e-12)
