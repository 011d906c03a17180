"""The calibrator node as a real process over DDS, fed a synthetic log with known truth.

The Warthog's true wheel radius (0.315 m; the model believes 0.30 m) and yaw slip
(``slip.p6 = -0.3``) and a true Q' are simulated by
:func:`wmr_model.calibration.synthetic.synthetic_log` on flat ground; its encoder rates, a gyro
and the GPS/INS poses (``nav_msgs/Odometry`` with the pose covariance as Sigma_meas) are
published in stamp order. Checked: one CalibrationState per interval with every field filled;
the estimates equal the batch :meth:`OnlineCalibrator.run` on the same log (an independent
offline computation) and are within 3 sigma of the truth; the accepted estimates reach the
running odometry and prediction nodes' parameters; ``~/save`` writes a loadable overlay through
a temporary file and a rename; ``~/reset`` restarts the filter; bad inputs are counted in
/diagnostics and the node keeps serving.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path

import numpy as np
import pytest
import yaml
from harness import DiagnosticsRecorder

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
CALIBRATOR = REPO / "scripts" / "calibrator_node"
ODOMETRY = REPO / "scripts" / "odometry_node"
PREDICTION = REPO / "scripts" / "prediction_node"

RADIUS = "wheel.front_left_wheel.radius"
SYS = ["slip.p6", RADIUS]
NOISE = ["noise.U.wz_wz", "noise.U.vx_vx", "noise.U.vy_vy"]
STD0 = {"slip.p6": 0.5, RADIUS: 0.02, **{n: 0.05 for n in NOISE}}
Q_TRUE = np.diag([0.0, 0.0, 2e-3, 4e-3, 2e-3, 0.0])
DURATION = 100.0
# Q' starts large (then bounded, end of §3.2.4): from the small defaults (0.01 rad/s^0.5 yaw) the
# first residuals look like outliers and the radius/slip estimates can lock in wrong values
NOISE_START = 0.1

pytestmark = pytest.mark.timeout(300)


def _qos(depth=1000):
    from rclpy.qos import QoSProfile, ReliabilityPolicy

    return QoSProfile(depth=depth, reliability=ReliabilityPolicy.RELIABLE)


@pytest.fixture(scope="module")
def synthetic():
    """The synthetic run and the offline (batch) calibration of the same log."""
    from wmr_model.calibration import (
        IntervalPolicy,
        ModelPredictor,
        OnlineCalibrator,
        select_intervals,
        synthetic_log,
    )
    from wmr_model.estimation.odometry import DEFAULT_QPRIME_U
    from wmr_model.io.vehicles import load_vehicle
    from wmr_model.terrain import surface as tr
    from wmr_model.vehicles.parameters import with_parameters

    nominal = load_vehicle("warthog")
    dims = {RADIUS: 0.315}
    run = synthetic_log(with_parameters(nominal, dims), tr.flat(), duration=DURATION, dt=0.02,
                        slip={"slip.p6": -0.3}, Qprime=Q_TRUE, truth=dims, seed=1)
    iv = select_intervals(run.log.pose_time, IntervalPolicy("time", 2.0))
    pred = ModelPredictor(nominal, tr.flat(), dt=0.05)
    fixed = {k: v for k, v in DEFAULT_QPRIME_U.items() if k.startswith("noise.U.")
             and k not in NOISE}
    x0 = {n: NOISE_START for n in NOISE}
    batch = OnlineCalibrator(pred, SYS + NOISE, x0=x0, std0=STD0, fixed_noise=fixed,
                             qprime_bound={n: 0.1 for n in NOISE}, qprime_bound_intervals=20)
    batch.run(run.log, iv)
    return run, iv, batch


def _stamp(t):
    from builtin_interfaces.msg import Time

    ns = int(round(t * 1e9))
    return Time(sec=ns // 10**9, nanosec=ns % 10**9)


#: ground-truth topic and type of each pose_source
SOURCES = {"odometry": ("ground_truth/odom", "nav_msgs.msg.Odometry"),
           "pose": ("ground_truth/pose", "geometry_msgs.msg.PoseWithCovarianceStamped"),
           "navsatfix": ("gps/fix", "sensor_msgs.msg.NavSatFix")}


def _msg_type(path):
    import importlib

    mod, name = path.rsplit(".", 1)
    return getattr(importlib.import_module(mod), name)


class Feed:
    """Publishers into the calibrator and collectors of its state and diagnostics."""

    def __init__(self, ros, ns, source="odometry"):
        from sensor_msgs.msg import Imu, JointState

        from wmr_model.msg import CalibrationState

        self.ros, self.ns = ros, ns
        self.js = ros.node.create_publisher(JointState, f"/{ns}/joint_states", _qos())
        self.imu = ros.node.create_publisher(Imu, f"/{ns}/imu/data", _qos())
        topic, typ = SOURCES[source]
        self.gt = ros.node.create_publisher(_msg_type(typ), f"/{ns}/{topic}", _qos())
        self.states: list = []
        ros.node.create_subscription(CalibrationState, f"/{ns}/calibrator_node/state",
                                     self.states.append, _qos())
        self.diagnostics = DiagnosticsRecorder(ros, f"/{ns}/calibrator_node", _qos(100))
        deadline = time.monotonic() + 30
        while (self.js.get_subscription_count() < 1 or self.gt.get_subscription_count() < 1
               or self.imu.get_subscription_count() < 1
               or ros.node.count_publishers(f"/{ns}/calibrator_node/state") < 1):
            assert time.monotonic() < deadline, "calibrator did not connect in 30 s"
            ros.spin_once(0.05)
        # the writers see the readers; give the readers time to see the writers (samples sent
        # before that are not delivered)
        self.spin(1.0)

    def joint_state(self, t, names, velocities=(), positions=()):
        from sensor_msgs.msg import JointState

        m = JointState()
        m.header.stamp = _stamp(t)
        m.name = list(names)
        m.velocity = [float(v) for v in velocities]
        m.position = [float(v) for v in positions]
        self.js.publish(m)

    def imu_sample(self, t, w):
        from sensor_msgs.msg import Imu

        m = Imu()
        m.header.stamp = _stamp(t)
        m.angular_velocity.x, m.angular_velocity.y, m.angular_velocity.z = (float(v) for v in w)
        m.orientation_covariance[0] = -1.0
        self.imu.publish(m)

    def imu_attitude(self, t, q_wxyz, cov_q, w):
        """An INS/IMU sample with orientation (REP-145, ENU) and its covariance, and a gyro."""
        from sensor_msgs.msg import Imu

        m = Imu()
        m.header.stamp = _stamp(t)
        o = m.orientation
        o.w, o.x, o.y, o.z = (float(v) for v in q_wxyz)
        m.orientation_covariance = [float(v) for v in np.asarray(cov_q).ravel()]
        m.angular_velocity.x, m.angular_velocity.y, m.angular_velocity.z = (float(v) for v in w)
        self.imu.publish(m)

    def fix(self, t, lat, lon, alt, cov_enu):
        from sensor_msgs.msg import NavSatFix, NavSatStatus

        m = NavSatFix()
        m.header.stamp = _stamp(t)
        m.header.frame_id = "gps"
        m.status.status = NavSatStatus.STATUS_FIX
        m.latitude, m.longitude, m.altitude = float(lat), float(lon), float(alt)
        m.position_covariance = [float(v) for v in np.asarray(cov_enu).ravel()]
        m.position_covariance_type = NavSatFix.COVARIANCE_TYPE_KNOWN
        self.gt.publish(m)

    def pose(self, t, pose, cov_ros):
        from nav_msgs.msg import Odometry

        m = Odometry()
        m.header.stamp = _stamp(t)
        m.header.frame_id = "map"
        m.child_frame_id = "base_link"
        p = m.pose.pose
        p.orientation.w, p.orientation.x, p.orientation.y, p.orientation.z = (
            float(v) for v in pose[:4])
        p.position.x, p.position.y, p.position.z = (float(v) for v in pose[4:7])
        m.pose.covariance = [float(v) for v in cov_ros]
        self.gt.publish(m)

    def spin(self, seconds):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.ros.spin_once(0.005)

    def wait_states(self, count, timeout=60):
        deadline = time.monotonic() + timeout
        while len(self.states) < count:
            self.ros.check_alive()
            assert time.monotonic() < deadline, f"got {len(self.states)} of {count} states"
            self.ros.spin_once(0.02)


def _start_calibrator(ros, ns, save_path, *params, sys_names=SYS, std0=STD0,
                      source="odometry", wait=True):
    args = ["--ros-args", "-r", f"__ns:=/{ns}", "-p", "vehicle:=warthog",
            "-p", "diagnostics_period:=0.2", "-p", f"params:={sys_names}".replace("'", '"'),
            "-p", f"noise:={NOISE}".replace("'", '"'), "-p", "push.period:=0.3",
            "-p", "push.min_intervals:=5", "-p", f"save_path:={save_path}",
            "-p", f"pose_source:={source}"]
    for n, s in std0.items():
        args += ["-p", f"initial_std.{n}:={s}"]
    for n in NOISE:
        args += ["-p", f"{n}:={NOISE_START}"]
    for p in params:
        args += ["-p", p]
    ros.start(CALIBRATOR, *args, name=f"calibrator_node_{ns}")
    if not wait:
        return None
    ros.wait_for(services=[f"/{ns}/calibrator_node/save", f"/{ns}/calibrator_node/reset"],
                 timeout=60)
    return Feed(ros, ns, source)


def _get_parameters(ros, node, names):
    from rcl_interfaces.srv import GetParameters

    client = ros.node.create_client(GetParameters, f"{node}/get_parameters")
    resp = ros.call(client, GetParameters.Request(names=list(names)))
    return {n: v.double_value for n, v in zip(names, resp.values)}


def _trigger(ros, service):
    from std_srvs.srv import Trigger

    client = ros.node.create_client(Trigger, service)
    return ros.call(client, Trigger.Request(), timeout=20)


def _play(feed, run, iv):
    """Publish the run's encoders, gyro and Odometry poses in stamp order, paced so that at
    most ~2 intervals are in flight; wait for one state per interval."""
    from wmr_model.kinematics.uncertainty import to_ros_pose_covariance

    log = run.log
    # gyro: true yaw rate from the true states (the calibrator buffers it)
    yaw = np.unwrap(np.arctan2(2 * (run.q[:, 0] * run.q[:, 3] + run.q[:, 1] * run.q[:, 2]),
                               1 - 2 * (run.q[:, 2] ** 2 + run.q[:, 3] ** 2)))
    wz = np.diff(yaw) / np.diff(run.time)
    cov_ros = to_ros_pose_covariance(log.pose_covariance)
    events = sorted([(t, 0, k) for k, t in enumerate(log.joint_time)]
                    + [(t, 1, k) for k, t in enumerate(log.pose_time)])
    names = list(log.joint_names)
    ends = log.pose_time[iv[:, 1]]
    for t, kind, k in events:
        if kind == 0:
            feed.joint_state(t, names, velocities=log.joint_rate[k])
            if k % 2 == 0:
                feed.imu_sample(t, (0.0, 0.0, wz[min(k, len(wz) - 1)]))
        else:
            feed.pose(t, log.pose[k], cov_ros[k])
            if k % 10 == 0:  # pace: keep at most ~2 intervals in flight
                done = int(np.searchsorted(ends, t, side="right"))
                feed.wait_states(max(done - 2, 0))
        if kind == 0 and k % 25 == 0:
            feed.spin(0.001)
    feed.wait_states(len(iv))


def test_calibrator_converges_pushes_saves_and_resets(ros, synthetic, tmp_path):
    from wmr_model.io.calibration_file import OVERLAY_VERSION
    from wmr_model.io.sidecar import parse_parameters

    run, iv, batch = synthetic
    log = run.log
    ns = "cal"
    ros.start(ODOMETRY, "--ros-args", "-r", f"__ns:=/{ns}", "-p", "vehicle:=warthog",
              "-p", "publish_tf:=false", name="odometry_node")
    ros.start(PREDICTION, "--ros-args", "-r", f"__ns:=/{ns}", "-p", "vehicle:=warthog",
              name="prediction_node")
    save = tmp_path / "out" / "warthog.calibration.yaml"
    feed = _start_calibrator(ros, ns, save)
    ros.wait_for(services=[f"/{ns}/odometry_node/set_parameters",
                           f"/{ns}/prediction_node/set_parameters"], timeout=60)
    before = _get_parameters(ros, f"/{ns}/odometry_node", SYS + NOISE)
    assert before["slip.p6"] == 0.0 and before[RADIUS] == pytest.approx(0.30)

    t_wall = time.monotonic()
    _play(feed, run, iv)
    feed_seconds = time.monotonic() - t_wall
    states = feed.states[:len(iv)]

    # one CalibrationState per interval, every field filled
    assert len(feed.states) == len(iv)
    for k, s in enumerate(states):
        n = len(s.parameter_names)
        assert list(s.parameter_names) == SYS and list(s.stochastic_names) == NOISE
        assert len(s.values) == n and len(s.covariance) == n * n
        assert len(s.stochastic_values) == len(NOISE)
        assert len(s.last_innovation) == 3 and s.last_nis >= 0.0
        assert s.interval_count == k + 1
        assert s.header.frame_id == "base_link"
        assert abs(s.header.stamp.sec + 1e-9 * s.header.stamp.nanosec
                   - log.pose_time[iv[k, 1]]) < 1e-6
        C = np.array(s.covariance).reshape(n, n)
        np.testing.assert_allclose(C, C.T, atol=1e-15)
        assert np.all(np.linalg.eigvalsh(C) > 0)
    assert sum(s.last_accepted for s in states) == len(iv) - states[-1].rejected_count

    # equals the offline batch run of the same log (independent computation) ...
    final = states[-1]
    got = dict(zip(SYS, final.values)) | dict(zip(NOISE, final.stochastic_values))
    for n in SYS + NOISE:
        assert got[n] == pytest.approx(batch.estimate[n], rel=1e-6, abs=1e-9), n
    np.testing.assert_allclose(np.array(final.covariance).reshape(2, 2),
                               batch.P[:2, :2], rtol=1e-6, atol=1e-12)
    # ... and converged to the truth within 3 sigma
    std = np.sqrt(np.diag(np.array(final.covariance).reshape(2, 2)))
    for n, s in zip(SYS, std):
        assert abs(got[n] - run.truth[n]) < 3 * s, (n, got[n], run.truth[n], s)
    assert abs(got[RADIUS] - 0.315) < 0.005
    print(f"\nDDS convergence: {len(iv)} intervals ({DURATION:.0f} s of data) in "
          f"{feed_seconds:.1f} s wall; {RADIUS} = {got[RADIUS]:.4f} +- {std[1]:.4f} (truth "
          f"0.315), slip.p6 = {got['slip.p6']:.3f} +- {std[0]:.3f} (truth -0.3); converged "
          f"after {batch.converged_after()} intervals")

    # the accepted, confident estimates reached the odometry and prediction nodes
    deadline = time.monotonic() + 15
    while True:
        odo = _get_parameters(ros, f"/{ns}/odometry_node", SYS + NOISE)
        if all(odo[n] == pytest.approx(got[n], rel=1e-12) for n in SYS + NOISE):
            break
        assert time.monotonic() < deadline, (odo, got)
        feed.spin(0.2)
    assert odo[RADIUS] != before[RADIUS] and odo["slip.p6"] != before["slip.p6"]
    pred = _get_parameters(ros, f"/{ns}/prediction_node", SYS + NOISE)
    for n in SYS + NOISE:
        assert pred[n] == pytest.approx(got[n], rel=1e-12), n

    # ~/save: an atomic write (no temporary left behind) of a loadable overlay
    resp = _trigger(ros, f"/{ns}/calibrator_node/save")
    assert resp.success, resp.message
    assert Path(resp.message) == save
    ino = os.stat(save).st_ino
    resp = _trigger(ros, f"/{ns}/calibrator_node/save")  # replaced by rename: a new inode
    assert resp.success and os.stat(save).st_ino != ino
    assert sorted(p.name for p in save.parent.iterdir()) == [save.name]
    doc = yaml.safe_load(save.read_text())
    assert doc["version"] == OVERLAY_VERSION and doc["vehicle"] == "warthog"
    values = parse_parameters(doc["parameters"], str(save))
    for n in SYS + NOISE:
        assert values[n] == pytest.approx(got[n], rel=1e-9), n
    _restart_from_calibration_file(ros, save, got, dict(zip(SYS, std)))

    # ~/reset: back to the initial values, counts restart, a state says so
    resp = _trigger(ros, f"/{ns}/calibrator_node/reset")
    assert resp.success, resp.message
    feed.wait_states(len(iv) + 1)
    s = feed.states[-1]
    assert s.interval_count == 0 and s.rejected_count == 0 and len(s.last_innovation) == 0
    assert list(s.values) == [0.0, pytest.approx(0.30)]
    assert list(s.stochastic_values) == [NOISE_START] * len(NOISE)
    feed.diagnostics.wait(lambda st, kv: kv.get("last reset reason") == "~/reset called")


def _restart_from_calibration_file(ros, save, got, std):
    """New odometry, prediction and calibrator nodes started with ``calibration_file`` take
    the saved values as their parameters; the calibrator also starts its estimate (its state
    after ~/reset) and its prior sigma from the file."""
    ns = "cal2"
    file_arg = ("-p", f"calibration_file:={save}")
    ros.start(ODOMETRY, "--ros-args", "-r", f"__ns:=/{ns}", "-p", "vehicle:=warthog",
              "-p", "publish_tf:=false", *file_arg, name="odometry_node_cal2")
    ros.start(PREDICTION, "--ros-args", "-r", f"__ns:=/{ns}", "-p", "vehicle:=warthog",
              *file_arg, name="prediction_node_cal2")
    ros.start(CALIBRATOR, "--ros-args", "-r", f"__ns:=/{ns}", "-p", "vehicle:=warthog",
              "-p", f"params:={SYS}".replace("'", '"'), "-p",
              f"noise:={NOISE}".replace("'", '"'), *file_arg, name="calibrator_node_cal2")
    ros.wait_for(services=[f"/{ns}/{n}/get_parameters" for n in
                           ("odometry_node", "prediction_node", "calibrator_node")]
                 + [f"/{ns}/calibrator_node/reset"], timeout=60)
    odo = _get_parameters(ros, f"/{ns}/odometry_node", SYS + NOISE)
    for n in SYS + NOISE:
        assert odo[n] == pytest.approx(got[n], rel=1e-12), n
    pred = _get_parameters(ros, f"/{ns}/prediction_node", SYS + NOISE)
    for n in SYS + NOISE:
        assert pred[n] == pytest.approx(got[n], rel=1e-12), n
    names = ["slip.p6"] + NOISE + [f"initial_std.{n}" for n in SYS]
    cal = _get_parameters(ros, f"/{ns}/calibrator_node", names)
    for n in ["slip.p6"] + NOISE:
        assert cal[n] == pytest.approx(got[n], rel=1e-12), n
    for n in SYS:
        assert cal[f"initial_std.{n}"] == pytest.approx(std[n], rel=1e-3), n
    feed = Feed(ros, ns)
    assert _trigger(ros, f"/{ns}/calibrator_node/reset").success
    feed.wait_states(1)
    s = feed.states[-1]
    assert list(s.parameter_names) == SYS
    np.testing.assert_allclose(s.values, [got[n] for n in SYS], rtol=1e-9)
    np.testing.assert_allclose(np.sqrt(np.diag(np.array(s.covariance).reshape(2, 2))),
                               [std[n] for n in SYS], rtol=1e-3)
    np.testing.assert_allclose(s.stochastic_values, [got[n] for n in NOISE], rtol=1e-9)


def test_confounded_parameters_are_reported_and_not_pushed(ros, synthetic, tmp_path):
    """slip.p2, p5 and one wheel's radius on a skid steer: the radius acts as p2 plus p5, so
    the data cannot pin it (its sigma stays ~0.9 of the prior). The calibrator reports it in
    /diagnostics (WARN) and pushes slip.p6 but never the radius."""
    run, iv, _ = synthetic
    ns = "conf"
    ros.start(ODOMETRY, "--ros-args", "-r", f"__ns:=/{ns}", "-p", "vehicle:=warthog",
              "-p", "publish_tf:=false", name="odometry_node_conf")
    conf = ["slip.p2", "slip.p5", "slip.p6", RADIUS]
    feed = _start_calibrator(ros, ns, tmp_path / "c.yaml", "push.targets:=[\"odometry_node\"]",
                             sys_names=conf, std0={**STD0, "slip.p2": 0.5, "slip.p5": 0.5})
    ros.wait_for(services=[f"/{ns}/odometry_node/set_parameters"], timeout=60)
    _play(feed, run, iv)
    st, kv = feed.diagnostics.wait(lambda st, kv: f"not identifiable {RADIUS}" in kv
                                   and int(kv.get("push not_identifiable", "0")) > 0)
    assert st.level == st.WARN and "not identifiable" in st.message and RADIUS in st.message
    assert kv[f"not identifiable {RADIUS}"].startswith("unobserved")
    assert not any(k == "not identifiable slip.p6" for k in kv)
    deadline = time.monotonic() + 15
    while True:
        odo = _get_parameters(ros, f"/{ns}/odometry_node", ["slip.p6", RADIUS])
        if odo["slip.p6"] != 0.0:
            break
        assert time.monotonic() < deadline, odo
        feed.spin(0.2)
    assert odo[RADIUS] == pytest.approx(0.30, rel=1e-12)  # never pushed


def test_bad_inputs_are_diagnosed_and_the_node_keeps_serving(ros, tmp_path):
    # arrival order (no reorder window), so the order faults reach the calibration as sent
    feed = _start_calibrator(ros, "bad", tmp_path / "bad.yaml", "reorder_window:=0.0")
    wheels = ["left_wheel_joint", "right_wheel_joint"]  # through the encoder map
    ident = [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    cov = list(np.diag([1e-4] * 6).ravel())
    for k in range(10):
        feed.joint_state(0.1 * k, wheels, velocities=[1.0, 1.0])
    feed.joint_state(1.0, wheels, velocities=[math.nan, 1.0])  # non-finite
    feed.joint_state(1.1, wheels, velocities=[1.0])  # length mismatch
    feed.joint_state(1.2, ["left_wheel_joint"], velocities=[1.0])  # missing joint
    feed.joint_state(0.5, wheels, velocities=[1.0, 1.0])  # out of order
    feed.joint_state(0.9, wheels, velocities=[1.0, 1.0])  # duplicate stamp
    feed.pose(0.0, ident, cov)
    feed.pose(0.2, [math.nan] * 7, cov)  # non-finite pose
    feed.pose(0.3, [0.0] * 7, cov)  # not a quaternion
    feed.pose(0.4, ident, [-1.0] + [0.0] * 35)  # REP-145 "no covariance": default used
    feed.imu_sample(0.5, (math.inf, 0.0, 0.0))  # non-finite gyro
    feed.joint_state(100.0, wheels, velocities=[1.0, 1.0])  # one stray stamp, 99 s ahead ...
    feed.joint_state(1.3, wheels, velocities=[1.0, 1.0])  # ... refuted: dropped and counted
    for t in (200.0, 200.1, 200.2):  # a jump confirmed by 3 messages is followed
        feed.joint_state(t, wheels, velocities=[1.0, 1.0])
    for t in (2.0, 2.1, 2.2):  # bag loop: 198 s back, confirmed: buffers cleared
        feed.joint_state(t, wheels, velocities=[1.0, 1.0])
    st, kv = feed.diagnostics.wait(lambda st, kv: kv.get("rejected missing_joints") == "1"
                            and kv.get("rejected bad_quaternion") == "1"
                            and kv.get("resets") == "1")
    assert kv["rejected stray_stamp"] == "1" and "100.0" in kv["last stray stamp"]
    assert kv["time base changes"] == "2"
    assert st.level == st.WARN and "rejected" in st.message
    assert kv["rejected non_finite"] == "3"
    assert kv["rejected length_mismatch"] == "1"
    assert kv["rejected out_of_order"] == "1" and kv["rejected duplicate"] == "1"
    assert kv["default pose covariances"] == "1"
    assert "time jump" in kv["last reset reason"]
    ros.check_alive()
    # still serving
    resp = _trigger(ros, "/bad/calibrator_node/save")
    assert resp.success, resp.message
    assert Path(resp.message).exists()


@pytest.mark.parametrize("window", [0.0, 8.0])
def test_reorder_window_follows_a_stream_delivered_ahead(ros, synthetic, tmp_path, window):
    """Poses delivered 6 s (stamp time) ahead of the encoders, as a replay whose pose topic
    runs ahead of a backlogged encoder topic: without a window (0) the intervals time out
    waiting for the encoders (max_wait 5 s) and are skipped; with an 8 s window the poses wait
    in stamp order, nothing is skipped or rejected, and the estimates equal the batch filter's
    interval by interval."""
    from wmr_model.kinematics.uncertainty import to_ros_pose_covariance

    run, iv, batch = synthetic
    log = run.log
    n_iv = 12
    t_end = log.pose_time[iv[n_iv - 1, 1]] + 0.5
    ns = f"reorder{int(window)}"
    feed = _start_calibrator(ros, ns, tmp_path / "r.yaml", f"reorder_window:={window}",
                             "reorder_idle:=5.0")
    cov_ros = to_ros_pose_covariance(log.pose_covariance)
    lead = 6.0
    events = sorted([(t, 1, k) for k, t in enumerate(log.joint_time) if t < t_end]
                    + [(t - lead, 0, k) for k, t in enumerate(log.pose_time) if t < t_end])
    names = list(log.joint_names)
    ends = log.pose_time[iv[:, 1]]
    for t, kind, k in events:
        if kind == 1:
            feed.joint_state(t, names, velocities=log.joint_rate[k])
            if k % 50 == 0 and window > 0:  # pace: at most ~2 intervals in flight
                done = int(np.searchsorted(ends, t, side="right"))
                feed.wait_states(max(min(done, n_iv) - 2, 0))
            elif k % 50 == 0:  # no states to wait for (skipped): give the node time
                feed.spin(0.1)
        else:
            feed.pose(log.pose_time[k], log.pose[k], cov_ros[k])
    if window == 0.0:
        _, kv = feed.diagnostics.wait(
            lambda st, kv: int(kv.get("skipped intervals encoders_do_not_cover_interval", 0)) > 0)
        return
    feed.wait_states(n_iv)
    for k in range(n_iv):
        np.testing.assert_allclose(feed.states[k].values, batch.history[k].x[:2], rtol=1e-6,
                                   atol=1e-9)
    _, kv = feed.diagnostics.wait(lambda st, kv: int(kv.get("accepted encoders", 0)) == sum(
        1 for e in events if e[1] == 1))
    assert not any(k.startswith(("rejected", "skipped")) and v != "0" for k, v in kv.items()), kv
    assert float(kv["reorder max hold [s]"]) > lead - 0.5


def test_unusable_fixes_are_counted(ros, tmp_path):
    """NavSatFix without a fix, with an UNKNOWN covariance (rejected by default), or without
    an attitude near its stamp: each rejected with its reason; a good one is accepted."""
    from sensor_msgs.msg import NavSatFix, NavSatStatus

    feed = _start_calibrator(ros, "badfix", tmp_path / "b.yaml", "reorder_window:=0.0",
                             source="navsatfix")
    cov = np.diag([1e-4] * 3)
    ident = [1.0, 0.0, 0.0, 0.0]
    feed.imu_attitude(0.0, ident, np.diag([1e-4] * 3), (0.0, 0.0, 0.0))
    feed.spin(0.3)
    feed.fix(0.0, *DATUM, cov)  # accepted: the first fix is the datum
    m = NavSatFix()
    m.header.stamp = _stamp(0.01)
    m.status.status = NavSatStatus.STATUS_NO_FIX
    feed.gt.publish(m)
    m = NavSatFix()
    m.header.stamp = _stamp(0.02)
    m.status.status = NavSatStatus.STATUS_FIX
    m.latitude, m.longitude, m.altitude = DATUM
    m.position_covariance_type = NavSatFix.COVARIANCE_TYPE_UNKNOWN
    feed.gt.publish(m)
    feed.fix(0.5, *DATUM, cov)  # the nearest attitude is 0.5 s away
    _, kv = feed.diagnostics.wait(lambda st, kv: kv.get("rejected gps/fix no_attitude") == "1")
    assert kv["rejected gps/fix no_fix"] == "1"
    assert kv["rejected gps/fix covariance_type_0_unusable"] == "1"
    assert kv["accepted pose"] == "1"
    ros.check_alive()


def test_calibrator_without_a_vehicle_reports_and_refuses(ros, tmp_path):
    ros.start(CALIBRATOR, "--ros-args", "-r", "__ns:=/novehicle", "-p",
              "vehicle:=/nonexistent/robot.urdf", "-p", "diagnostics_period:=0.2",
              name="calibrator_novehicle")
    ros.wait_for(services=["/novehicle/calibrator_node/save"], timeout=60)
    resp = _trigger(ros, "/novehicle/calibrator_node/save")
    assert not resp.success and "no calibration set up" in resp.message
    ros.check_alive()


def test_write_text_atomically_keeps_the_old_file_on_failure(tmp_path, monkeypatch):
    from wmr_model.ros import calibrator_node as cn

    path = tmp_path / "v.yaml"
    cn.write_text_atomically(path, "old: 1\n")
    assert path.read_text() == "old: 1\n"

    def boom(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(cn.os, "replace", boom)
    with pytest.raises(OSError, match="disk full"):
        cn.write_text_atomically(path, "new: 2\n")
    assert path.read_text() == "old: 1\n"
    assert [p.name for p in tmp_path.iterdir()] == ["v.yaml"]  # temporary removed


@pytest.mark.parametrize("vehicle", ["warthog", "diffdrive", "rocky7"])
def test_config_sections_are_declared_parameters(rclpy_context, vehicle):
    """Every key of config/nodes/<vehicle>.yaml's calibrator section is a parameter the node
    declares, with the declared type, and the calibration sets up with them."""
    from rclpy.parameter import Parameter

    from wmr_model.ros.calibrator_node import CalibratorNode

    doc = yaml.safe_load((REPO / "config" / "nodes" / f"{vehicle}.yaml").read_text())
    section = doc["/**/calibrator_node"]["ros__parameters"]
    overrides = [Parameter("vehicle", value=vehicle)] + [Parameter(k, value=v)
                                                         for k, v in section.items()]
    node = CalibratorNode(context=rclpy_context, parameter_overrides=overrides,
                          namespace=f"/cfg_{vehicle}")
    try:
        assert node.stream is not None, node.model_error
        for k, v in section.items():
            assert node.has_parameter(k), k
            assert node.get_parameter(k).value == v, k
    finally:
        node.destroy_node()


# ---- GPS: one pose source, NavSatFix in a local ENU frame, antenna lever arm ------------------
GPS_TRUE = (0.4, -0.25, 0.8)  # [m] true antenna position on the body; the URDF has no antenna
DATUM = (45.5017, -73.5673, 50.0)  # [deg, deg, m] local ENU origin
LEVER = ["slip.p6", "sensor.gps.x", "sensor.gps.y"]
LEVER_STD0 = {"slip.p6": 0.5, "sensor.gps.x": 0.3, "sensor.gps.y": 0.3,
              **{n: 0.05 for n in NOISE}}


@pytest.fixture(scope="module")
def gps_run():
    """60 s of a Warthog whose GPS antenna is at GPS_TRUE (built through the vehicle spec, as
    ``wmr synth`` does), poses of the antenna."""
    from wmr_model.calibration import IntervalPolicy, select_intervals, synthetic_log
    from wmr_model.io.synth_bag import synth_models
    from wmr_model.terrain import surface as tr

    _, true, dims = synth_models("warthog", (0.0, 0.0, GPS_TRUE[2]), GPS_TRUE)
    run = synthetic_log(true, tr.flat(), duration=60.0, dt=0.02, slip={"slip.p6": -0.3},
                        Qprime=Q_TRUE, pose_sensor="gps", truth=dims, seed=1)
    return run, select_intervals(run.log.pose_time, IntervalPolicy("time", 2.0))


def test_navsatfix_source_equals_odometry_and_calibrates_the_lever_arm(ros, gps_run, tmp_path):
    """Two calibrators of a Warthog without an antenna in its URDF, ``pose_source`` odometry
    and navsatfix, get the same run: Odometry poses, and fixes made from the same ENU positions
    through pymap3d's inverse (ENU -> geodetic) plus the attitude on imu/data. Each subscribes
    to its own source only; both calibrate the antenna lever arm ``sensor.gps.x/y`` (declared
    from ``pose_sensor: gps``) to within 3 sigma of the truth, and their estimates agree."""
    import pymap3d

    run, iv = gps_run
    log = run.log
    common = ("pose_sensor:=gps", f"sensor.gps.z:={GPS_TRUE[2]}")
    _start_calibrator(ros, "gpsodo", tmp_path / "o.yaml", *common, sys_names=LEVER,
                      std0=LEVER_STD0, wait=False)
    _start_calibrator(ros, "gpsfix", tmp_path / "f.yaml", *common, "datum.first_fix:=false", f"datum.latitude:={DATUM[0]}",
                      f"datum.longitude:={DATUM[1]}", f"datum.altitude:={DATUM[2]}",
                      sys_names=LEVER, std0=LEVER_STD0, source="navsatfix", wait=False)
    ros.wait_for(services=[f"/{ns}/calibrator_node/save" for ns in ("gpsodo", "gpsfix")],
                 timeout=60)
    odo, fix = Feed(ros, "gpsodo"), Feed(ros, "gpsfix", "navsatfix")
    # one pose source each: nothing listens on the other sources' topics
    assert ros.node.count_subscribers("/gpsodo/ground_truth/pose") == 0
    assert ros.node.count_subscribers("/gpsodo/gps/fix") == 0
    assert ros.node.count_subscribers("/gpsfix/ground_truth/odom") == 0
    assert ros.node.count_subscribers("/gpsfix/ground_truth/pose") == 0
    for ns in ("gpsodo", "gpsfix"):
        got = _get_parameters(ros, f"/{ns}/calibrator_node", ["sensor.gps.x", "sensor.gps.z"])
        assert got == {"sensor.gps.x": 0.0, "sensor.gps.z": GPS_TRUE[2]}

    from wmr_model.kinematics.uncertainty import to_ros_pose_covariance

    cov_ros = to_ros_pose_covariance(log.pose_covariance)
    P = log.pose[:, 4:7]
    lat, lon, alt = pymap3d.enu2geodetic(P[:, 0], P[:, 1], P[:, 2], *DATUM)
    # the attitude goes out 50 ms (stamp time) ahead of its fix, so it is there when the fix is
    events = sorted([(t, 1, k) for k, t in enumerate(log.joint_time)]
                    + [(t - 0.05, 0, k) for k, t in enumerate(log.pose_time)]
                    + [(t, 2, k) for k, t in enumerate(log.pose_time)])
    names = list(log.joint_names)
    ends = log.pose_time[iv[:, 1]]
    for t, kind, k in events:
        if kind == 1:
            for f in (odo, fix):
                f.joint_state(t, names, velocities=log.joint_rate[k])
        elif kind == 0:
            tk, C = log.pose_time[k], log.pose_covariance[k]
            for f in (odo, fix):
                f.imu_attitude(tk, log.pose[k, :4], C[:3, :3], (0.0, 0.0, 0.0))
        else:
            odo.pose(t, log.pose[k], cov_ros[k])
            fix.fix(t, lat[k], lon[k], alt[k], log.pose_covariance[k][3:, 3:])
            if k % 10 == 0:
                done = int(np.searchsorted(ends, t, side="right"))
                odo.wait_states(max(done - 2, 0))
                fix.wait_states(max(done - 2, 0))
    odo.wait_states(len(iv))
    fix.wait_states(len(iv))
    a, b = odo.states[len(iv) - 1], fix.states[len(iv) - 1]
    assert b.interval_count == a.interval_count == len(iv)
    np.testing.assert_allclose(b.values, a.values, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(b.covariance, a.covariance, rtol=1e-6, atol=1e-12)
    np.testing.assert_allclose(b.stochastic_values, a.stochastic_values, rtol=1e-6, atol=1e-9)
    std = np.sqrt(np.diag(np.array(a.covariance).reshape(3, 3)))
    est = dict(zip(a.parameter_names, a.values))
    truth = {"slip.p6": -0.3, "sensor.gps.x": GPS_TRUE[0], "sensor.gps.y": GPS_TRUE[1]}
    for n, s in zip(a.parameter_names, std):
        assert abs(est[n] - truth[n]) < 3 * s, (n, est[n], s, truth[n])
    print(f"\nlever arm over DDS ({len(iv)} intervals): x {est['sensor.gps.x']:.3f} +- "
          f"{std[1]:.3f} (truth {GPS_TRUE[0]}), y {est['sensor.gps.y']:.3f} +- {std[2]:.3f} "
          f"(truth {GPS_TRUE[1]}); NavSatFix vs Odometry max |diff| "
          f"{np.max(np.abs(np.subtract(b.values, a.values))):.2e}")
    _, kv = fix.diagnostics.wait(lambda st, kv: kv.get("accepted pose") == str(len(log.pose)))
    assert not any(k.startswith("rejected gps/fix") for k in kv), kv
