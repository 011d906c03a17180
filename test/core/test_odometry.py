"""Odometry3D without ROS: closed forms, message policy, offline agreement, the real Warthog log."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from wmr_model import kinematics as kin
from wmr_model.errors import ParameterError
from wmr_model.estimation.odometry import Odometry3D
from wmr_model.io.vehicles import load_vehicle
from wmr_model.kinematics.integrate import integrate_euler
from wmr_model.prediction.predict import predict
from wmr_model.spatial import quat_to_rot, quats_to_euler
from wmr_model.terrain.surface import rough

WARTHOG_LOG = Path(__file__).resolve().parents[2] / "data" / "warthog_grass_A"  # shipped real field log
WHEELS = ["left_wheel_joint", "right_wheel_joint"]


@pytest.fixture(scope="module")
def diffdrive():
    return load_vehicle("diffdrive")


def _geometry(model):
    r = float(model.wheel_radius[0])
    y = model.T0[model.wheel_frame[:2], 1, 3]
    return r, float(y[0] - y[1])  # radius, track


def _drive(odo, wl, wr, T, dt, t0=0.0, gyro=None):
    """Constant wheel rates for T seconds; gyro (3,) fed at the same stamps, before encoders."""
    n = int(round(T / dt))
    odo.update_encoders(t0, WHEELS, velocities=[wl, wr])
    for k in range(1, n + 1):
        t = t0 + k * dt
        if gyro is not None:
            odo.update_imu(t, gyro)
        odo.update_encoders(t, WHEELS, velocities=[wl, wr])
    return t0 + n * dt


def test_straight_line_closed_form(diffdrive):
    r, _ = _geometry(diffdrive)
    odo = Odometry3D(diffdrive, use_gyro=False)
    z0 = odo.q[6]
    _drive(odo, 2.0, 2.0, 3.0, 0.01)
    p, o = odo.pose
    np.testing.assert_allclose(p, [2.0 * r * 3.0, 0.0, z0], atol=1e-9)
    np.testing.assert_allclose(o, [1, 0, 0, 0], atol=1e-9)
    lin, ang = odo.twist
    np.testing.assert_allclose(lin, [2.0 * r, 0, 0], atol=1e-9)
    np.testing.assert_allclose(ang, 0.0, atol=1e-9)


def test_spin_in_place_closed_form(diffdrive):
    r, track = _geometry(diffdrive)
    odo = Odometry3D(diffdrive, use_gyro=False)
    p0 = odo.pose[0]
    w = 1.5
    T = 2.0
    _drive(odo, -w, w, T, 0.005)
    yaw_rate = 2 * r * w / track
    p, o = odo.pose
    yaw = float(quats_to_euler(o)[2])
    assert yaw == pytest.approx(yaw_rate * T, abs=1e-6)
    np.testing.assert_allclose(p, p0, atol=1e-6)
    assert odo.twist[1][2] == pytest.approx(yaw_rate, abs=1e-9)


def test_arc_closed_form(diffdrive):
    r, track = _geometry(diffdrive)
    v, wz = 0.5, 0.5  # radius 1 m
    wl = (v - wz * track / 2) / r
    wr = (v + wz * track / 2) / r
    odo = Odometry3D(diffdrive, use_gyro=False)
    T = math.pi / 2 / wz
    dt = 0.001
    T = _drive(odo, wl, wr, T, dt)
    p, o = odo.pose
    th = wz * T
    R = v / wz
    # Euler integration error ~ v wz dt T / 2 = 4e-4 m
    np.testing.assert_allclose(p[:2], [R * math.sin(th), R * (1 - math.cos(th))], atol=1e-3)
    assert float(quats_to_euler(o)[2]) == pytest.approx(th, abs=1e-6)


def test_gyro_is_a_known_element(diffdrive):
    """With the gyro known, yaw follows the gyro, not the wheel rates (skid)."""
    odo = Odometry3D(diffdrive, use_gyro=True)
    _drive(odo, 2.0, 2.0, 1.0, 0.01, gyro=[0.0, 0.0, 0.3])
    assert float(quats_to_euler(odo.pose[1])[2]) == pytest.approx(0.3, abs=1e-9)
    assert odo.twist[1][2] == pytest.approx(0.3)
    assert odo.diagnostics.gyro_stale_steps == 0


def test_positions_differentiated_when_velocities_absent(diffdrive):
    a = Odometry3D(diffdrive, use_gyro=False)
    b = Odometry3D(diffdrive, use_gyro=False)
    rng = np.random.default_rng(3)
    pos = np.zeros(2)
    t = 0.0
    a.update_encoders(t, WHEELS, velocities=[0.0, 0.0])
    b.update_encoders(t, WHEELS, positions=pos)
    for _ in range(200):
        dt = rng.uniform(0.005, 0.02)
        v = rng.uniform(0.5, 3.0, size=2)
        pos = pos + v * dt
        t += dt
        a.update_encoders(t, WHEELS, velocities=v)
        b.update_encoders(t, WHEELS, positions=pos, velocities=[math.nan, math.nan])
    np.testing.assert_allclose(b.q[:7], a.q[:7], atol=1e-10)
    assert b.diagnostics.steps == a.diagnostics.steps == 200


def test_agrees_with_predict_and_its_covariance(diffdrive):
    """Encoder-only odometry on a rough terrain = kinematic prediction of the same rates."""
    terrain = rough(0.03, 0.5, seed=4, x_range=(-2, 6), y_range=(-3, 3))
    Q = np.diag([1e-4, 1e-4, 4e-4, 2e-3, 1e-3, 1e-4])
    odo = Odometry3D(diffdrive, terrain, use_gyro=False, Qprime=Q)
    dt, T = 0.02, 150
    rates = np.empty((T, 2))
    rates[:, 0] = np.linspace(2.0, 4.0, T)
    rates[:, 1] = np.linspace(4.0, 2.0, T)
    odo.update_encoders(10.0, WHEELS, velocities=rates[0])
    qs, Ps = [], []
    for k in range(T):
        odo.update_encoders(10.0 + (k + 1) * dt, WHEELS, velocities=rates[k])
        qs.append(odo.q.copy())
        Ps.append(odo.pose_covariance)
    q0, _ = kin.initialize_contact(diffdrive, terrain)
    pred = predict(diffdrive, terrain, q0, rates, dt, Qprime=Q)
    np.testing.assert_allclose(np.array(qs), pred.q[0, 1:], atol=1e-9)
    np.testing.assert_allclose(np.array(Ps), pred.covariance[0, 1:], atol=1e-12)
    # the covariance grows: propagated, not constant
    assert Ps[-1][5, 5] > Ps[10][5, 5] > 0 and Ps[-1][2, 2] > Ps[10][2, 2]


def test_agrees_with_offline_estimation_loop_with_gyro():
    """Warthog (encoder map, gyro) on rough terrain vs a loop over the kinematics API."""
    m = load_vehicle("warthog")
    terrain = rough(0.05, 1.0, seed=7, x_range=(-5, 10), y_range=(-6, 6))
    rng = np.random.default_rng(11)
    odo = Odometry3D(m, terrain, use_gyro=True)
    q, _ = kin.initialize_contact(m, terrain)
    np.testing.assert_array_equal(odo.q, q)
    known = kin.estimation_known(m, list(m.wheel_names), gyro=True)
    data = kin.create_data(m)
    t = 5.0
    odo.update_encoders(t, ["left_wheel_joint", "right_wheel_joint"], velocities=[0, 0])
    for _ in range(200):
        dt = rng.uniform(0.01, 0.03)
        t += dt
        wl, wr = rng.uniform(1.0, 4.0, 2)
        gyro = np.array([rng.normal(0, 0.05), rng.normal(0, 0.05), 0.3 * (wr - wl)])
        odo.update_imu(t, gyro)
        odo.update_encoders(t, ["left_wheel_joint", "right_wheel_joint"], velocities=[wl, wr])
        qk = np.zeros(m.nv)
        qk[0:3] = gyro
        for j, w in zip(m.wheel_names, (wl, wl, wr, wr)):  # encoder map order
            qk[6 + m.joint_index(j)] = w
        qdot = kin.joint_space_velocity(m, data, terrain, q, known, qk, 0.5 / dt)
        q_next = np.empty(m.nq)
        integrate_euler(q, qdot, dt, q_next)
        q = q_next
    np.testing.assert_allclose(odo.q, q, atol=1e-9)
    assert odo.diagnostics.steps == 200 and odo.diagnostics.rejected_total == 0


def test_asynchronous_imu_is_averaged_over_the_interval(diffdrive):
    odo = Odometry3D(diffdrive, use_gyro=True)
    odo.update_encoders(0.0, WHEELS, velocities=[0, 0])
    for k, wz in enumerate([0.1, 0.2, 0.3, 0.4]):  # 4 IMU samples inside (0, 0.1]
        odo.update_imu(0.025 * (k + 1), [0, 0, wz])
    odo.update_imu(0.12, [0, 0, 9.0])  # belongs to the next interval
    odo.update_encoders(0.1, WHEELS, velocities=[0, 0])
    assert odo.twist[1][2] == pytest.approx(0.25)
    odo.update_encoders(0.2, WHEELS, velocities=[0, 0])
    assert odo.twist[1][2] == pytest.approx(9.0)
    # no samples: held for gyro_timeout, then encoder-only
    odo.update_encoders(0.3, WHEELS, velocities=[0, 0])
    assert odo.twist[1][2] == pytest.approx(9.0)
    odo.update_encoders(0.75, WHEELS, velocities=[0, 0])
    assert odo.twist[1][2] == pytest.approx(0.0)
    assert odo.diagnostics.gyro_stale_steps == 1
    # an IMU sample older than the interval it could contribute to is late
    res = odo.update_imu(0.6, [0, 0, 1.0])
    assert not res.accepted and res.reason == "late"


def test_bad_messages_are_rejected_and_change_nothing(diffdrive):
    clean = Odometry3D(diffdrive, use_gyro=True)
    odo = Odometry3D(diffdrive, use_gyro=True)
    ts = np.arange(0.0, 1.0001, 0.05)
    for o in (clean, odo):
        for t in ts:
            o.update_imu(t, [0, 0, 0.2])
            o.update_encoders(t, WHEELS, velocities=[1.0, 1.2])
            if o is odo and t > 0.3:
                assert not o.update_encoders(t, WHEELS, velocities=[1.0, 1.2]).accepted
                assert not o.update_encoders(t - 0.02, WHEELS, velocities=[5, 5]).accepted
                assert not o.update_encoders(t + 0.01, WHEELS, velocities=[math.nan, 1]).accepted
                assert not o.update_encoders(math.inf, WHEELS, velocities=[1, 1]).accepted
                assert not o.update_encoders(t + 0.01, WHEELS, velocities=[1, 1, 1]).accepted
                assert not o.update_imu(t, [0, 0, 7.0]).accepted
                assert not o.update_imu(t - 0.01, [0, 0, 7.0]).accepted
                assert not o.update_imu(t + 0.01, [math.nan, 0, 0]).accepted
    np.testing.assert_array_equal(odo.q, clean.q)
    np.testing.assert_array_equal(odo.pose_covariance, clean.pose_covariance)
    d = odo.diagnostics
    n = int((ts > 0.3).sum())
    assert d.rejected["duplicate"] == 2 * n
    assert d.rejected["out_of_order"] == 2 * n
    assert d.rejected["non_finite"] == 3 * n
    assert d.rejected["bad_length"] == n
    assert d.rejected_by_stream[("imu", "duplicate")] == n
    assert d.last_rejection.startswith("imu: non_finite: angular_velocity [nan, 0.0, 0.0]")
    assert d.resets == 0 and clean.diagnostics.rejected_total == 0


def test_missing_joint_is_named(diffdrive):
    odo = Odometry3D(diffdrive, use_gyro=False)
    res = odo.update_encoders(0.0, ["left_wheel_joint", "arm_joint"], velocities=[1.0, 2.0])
    assert not res.accepted and res.reason == "missing_joints"
    assert odo.diagnostics.missing_joints == ("right_wheel_joint",)
    assert "right_wheel_joint" in odo.diagnostics.last_rejection
    # extra joints are fine and reported as unknown
    assert odo.update_encoders(0.0, WHEELS + ["arm_joint"], velocities=[1, 1, 0]).accepted
    assert odo.diagnostics.unknown_joints == ("arm_joint",)


def test_time_jump_backwards_resets(diffdrive):
    odo = Odometry3D(diffdrive, use_gyro=False)
    start = odo.q.copy()
    _drive(odo, 2.0, 2.0, 1.0, 0.01, t0=100.0)
    assert odo.q[4] > 0.1
    res = odo.update_encoders(50.0, WHEELS, velocities=[2.0, 2.0])  # bag loop
    assert res.accepted and not res.stepped and "backwards" in res.reset
    np.testing.assert_array_equal(odo.q, start)
    np.testing.assert_array_equal(odo.pose_covariance, np.zeros((6, 6)))
    assert odo.diagnostics.resets == 1 and "bag loop" in odo.diagnostics.last_reset_reason
    res = odo.update_encoders(50.01, WHEELS, velocities=[2.0, 2.0])
    assert res.stepped
    assert odo.q[4] == pytest.approx(0.01 * 2.0 * 0.1)


def test_forward_gap_is_not_integrated(diffdrive):
    odo = Odometry3D(diffdrive, use_gyro=False, max_step=0.5)
    _drive(odo, 2.0, 2.0, 1.0, 0.01)
    x = odo.q[4]
    res = odo.update_encoders(30.0, WHEELS, velocities=[2.0, 2.0])
    assert not res.stepped and "gap" in res.reset
    assert odo.q[4] == x  # pose kept
    odo.update_encoders(30.01, WHEELS, velocities=[2.0, 2.0])
    assert odo.q[4] == pytest.approx(x + 0.002)
    reset = Odometry3D(diffdrive, use_gyro=False, reset_on_gap=True)
    _drive(reset, 2.0, 2.0, 1.0, 0.01)
    reset.update_encoders(30.0, WHEELS, velocities=[2.0, 2.0])
    assert reset.q[4] == pytest.approx(0.0, abs=1e-12)


def test_parameter_updates_take_effect_next_step(diffdrive):
    odo = Odometry3D(diffdrive, use_gyro=False)
    odo.update_encoders(0.0, WHEELS, velocities=[1.0, 1.0])
    odo.update_encoders(0.1, WHEELS, velocities=[1.0, 1.0])
    x1 = odo.q[4]
    assert x1 == pytest.approx(0.1 * 0.1)
    odo.set_parameters({"wheel.left_wheel_joint.radius": 0.102,
                        "wheel.right_wheel_joint.radius": 0.102, "noise.U.vx_vx": 0.5})
    assert odo.q[4] == x1 and odo.parameters()["wheel.left_wheel_joint.radius"] == 0.1
    odo.update_encoders(0.2, WHEELS, velocities=[1.0, 1.0])
    assert odo.parameters()["wheel.left_wheel_joint.radius"] == 0.102
    assert odo.q[4] - x1 != pytest.approx(0.1 * 0.1, rel=1e-3)
    for k in range(3, 40):  # the body settles on the larger wheels (Baumgarte), then rolls
        odo.update_encoders(0.1 * k, WHEELS, velocities=[1.0, 1.0])
    x = odo.q[4]
    odo.update_encoders(4.0, WHEELS, velocities=[1.0, 1.0])
    assert odo.q[4] - x == pytest.approx(0.1 * 0.102, rel=1e-4)
    assert odo.parameters()["noise.U.vx_vx"] == 0.5
    assert odo.Qprime[3, 3] == pytest.approx(0.25)
    with pytest.raises(ParameterError, match=r"wheel\.FL\.radius: diffdrive has no wheel 'FL'"):
        odo.set_parameters({"wheel.FL.radius": 0.2})
    with pytest.raises(ParameterError, match=r"slip\.p9: not an odometry parameter"):
        odo.set_parameters({"slip.p9": 0.0})
    with pytest.raises(ParameterError, match=r"slip\.p2: must be finite"):
        odo.set_parameters({"slip.p2": math.nan})


def test_enhanced_slip_parameter_changes_the_estimate(diffdrive):
    base = Odometry3D(diffdrive, use_gyro=False, fidelity="enhanced")
    slow = Odometry3D(diffdrive, use_gyro=False, fidelity="enhanced")
    slow.set_parameters({"slip.p2": -0.2})  # rolling resistance: 20 % slower
    for o in (base, slow):
        _drive(o, 2.0, 2.0, 1.0, 0.01)
    assert slow.q[4] == pytest.approx(0.8 * base.q[4], rel=1e-3)
    m2 = load_vehicle("diffdrive")
    base.set_model(m2)
    _drive(base, 2.0, 2.0, 0.1, 0.01, t0=1.0)
    assert base.model is not diffdrive and base.diagnostics.resets == 0


def test_imu_attitude_imposed(diffdrive):
    odo = Odometry3D(diffdrive, use_gyro=True, impose_imu_attitude=True)
    roll = 0.1
    o = np.array([math.cos(roll / 2), math.sin(roll / 2), 0.0, 0.0])
    odo.update_encoders(0.0, WHEELS, velocities=[1, 1])
    odo.update_imu(0.01, [0, 0, 0], orientation=o)
    odo.update_encoders(0.01, WHEELS, velocities=[1, 1])
    assert float(quats_to_euler(odo.q[0:4])[0]) == pytest.approx(roll)
    R = quat_to_rot(odo.q[0:4])
    assert R[2, 1] == pytest.approx(math.sin(roll))


def test_twist_covariance_uses_the_gyro_covariance(diffdrive):
    odo = Odometry3D(diffdrive, use_gyro=True)
    odo.update_encoders(0.0, WHEELS, velocities=[1, 1])
    odo.update_imu(0.02, [0, 0, 0], angular_velocity_covariance=np.eye(3) * 4e-6)
    odo.update_encoders(0.02, WHEELS, velocities=[1, 1])
    C = odo.twist_covariance
    np.testing.assert_allclose(np.diag(C)[:3], 4e-6)
    assert C[3, 3] == pytest.approx(odo.Qprime[3, 3] / 0.02)
    ros = odo.twist_covariance_ros.reshape(6, 6)
    assert ros[0, 0] == C[3, 3] and ros[5, 5] == C[2, 2]


@pytest.mark.parametrize("use_gyro, limit", [(True, 0.01), (False, 0.07)])
def test_real_warthog_log_drift(use_gyro, limit):
    """End-point drift vs ICP over the 83 m run: 0.8 % with the gyro, 5.8 % encoders only."""
    from wmr_model.io.bags import read_streams

    s = read_streams(WARTHOG_LOG / "bag", {"enc": "/joint_states", "imu": "/imu/data",
                                      "icp": "/icp/odom"},
                     {"enc": "joint_states", "imu": "imu", "icp": "pose"})
    enc, imu, icp = s["enc"], s["imu"], s["icp"]
    odo = Odometry3D(load_vehicle("warthog"), use_gyro=use_gyro)
    events = sorted([(t, 0, i) for i, t in enumerate(imu.stamp)]
                    + [(t, 1, i) for i, t in enumerate(enc.stamp)])
    ts, qs = [], []
    for t, kind, i in events:
        if kind == 0:
            odo.update_imu(t, imu.angular_velocity[i])
        elif odo.update_encoders(t, enc.names, enc.position[i], enc.velocity[i]).stepped:
            ts.append(t)
            qs.append(odo.q[:7].copy())
    assert odo.diagnostics.rejected_total == 0 and odo.diagnostics.gyro_stale_steps == 0
    ts, qs = np.array(ts), np.array(qs)

    def T(p, o):
        M = np.eye(4)
        M[:3, :3] = quat_to_rot(np.ascontiguousarray(o))
        M[:3, 3] = p
        return M

    def odo_at(t):
        k = min(int(np.searchsorted(ts, t)), len(ts) - 1)
        return T(qs[k, 4:7], qs[k, 0:4])

    align = T(icp.position[0], icp.orientation[0]) @ np.linalg.inv(odo_at(icp.stamp[0]))
    end = align @ odo_at(icp.stamp[-1])
    length = np.linalg.norm(np.diff(icp.position[:, :2], axis=0), axis=1).sum()
    drift = np.linalg.norm(end[:2, 3] - icp.position[-1, :2]) / length
    assert length == pytest.approx(83.1, abs=0.1)
    assert drift < limit
