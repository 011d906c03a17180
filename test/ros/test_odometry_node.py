"""The odometry node as a real process over DDS: its output equals the core's offline result.

Synthetic JointState and Imu streams are published from the test process; the offline reference
is :class:`wmr_model.odometry.Odometry3D` fed the same samples (same stamp conversion). Also:
bad messages show up in /diagnostics and do not stop the node, a bag-loop time jump resets,
runtime parameter updates apply from the next step, and the vehicle can come from the
robot_description topic.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np
import pytest
from harness import DiagnosticsRecorder

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SCRIPT = REPO / "scripts" / "odometry_node"
WHEELS = ["left_wheel_joint", "right_wheel_joint"]

pytestmark = pytest.mark.timeout(180)


def _qos(depth=1000):
    from rclpy.qos import QoSProfile, ReliabilityPolicy

    return QoSProfile(depth=depth, reliability=ReliabilityPolicy.RELIABLE)


class Feed:
    """Publishers into the node and a collector of its odometry and diagnostics."""

    def __init__(self, ros, ns):
        from nav_msgs.msg import Odometry
        from sensor_msgs.msg import Imu, JointState

        self.ros, self.ns = ros, ns
        self.js = ros.node.create_publisher(JointState, f"/{ns}/joint_states", _qos())
        self.imu = ros.node.create_publisher(Imu, f"/{ns}/imu/data", _qos())
        self.odom: list = []
        ros.node.create_subscription(Odometry, f"/{ns}/odom", self.odom.append, _qos())
        self.diagnostics = DiagnosticsRecorder(ros, f"/{ns}/odometry_node", _qos(100))
        deadline = time.monotonic() + 20
        while (self.js.get_subscription_count() < 1 or self.imu.get_subscription_count() < 1
               or ros.node.count_publishers(f"/{ns}/odom") < 1):
            assert time.monotonic() < deadline, "node did not subscribe in 20 s"
            ros.spin_once(0.05)

    @staticmethod
    def stamp(ns_total):
        from builtin_interfaces.msg import Time

        return Time(sec=ns_total // 10**9, nanosec=ns_total % 10**9)

    def joint_state(self, ns_total, velocities, names=WHEELS, positions=()):
        from sensor_msgs.msg import JointState

        m = JointState()
        m.header.stamp = self.stamp(ns_total)
        m.name = list(names)
        m.velocity = [float(v) for v in velocities]
        m.position = [float(v) for v in positions]
        self.js.publish(m)

    def imu_sample(self, ns_total, w, gyro_var=None):
        from sensor_msgs.msg import Imu

        m = Imu()
        m.header.stamp = self.stamp(ns_total)
        m.header.frame_id = "imu_link"
        m.angular_velocity.x, m.angular_velocity.y, m.angular_velocity.z = (float(v) for v in w)
        m.orientation_covariance[0] = -1.0  # REP-145: orientation not provided
        if gyro_var is not None:
            m.angular_velocity_covariance = [gyro_var, 0., 0., 0., gyro_var, 0., 0., 0.,
                                             gyro_var]
        self.imu.publish(m)

    def settle(self, seconds=0.01):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.ros.spin_once(0.002)

    def wait_odom(self, count, timeout=20):
        deadline = time.monotonic() + timeout
        while len(self.odom) < count:
            self.ros.check_alive()
            assert time.monotonic() < deadline, f"got {len(self.odom)} of {count} odometry"
            self.ros.spin_once(0.02)


def _start(ros, ns, *params):
    args = ["--ros-args", "-r", f"__ns:=/{ns}", "-p", "diagnostics_period:=0.2"]
    for p in params:
        args += ["-p", p]
    ros.start(SCRIPT, *args, name=f"odometry_node_{ns}")
    ros.wait_for(topics=[f"/{ns}/odom"], timeout=60)
    return Feed(ros, ns)


def _sec(ns_total):
    from wmr_model.ros.conversions import stamp_to_seconds

    return stamp_to_seconds(Feed.stamp(ns_total))


def test_output_equals_the_core_offline_result(ros):
    from wmr_model.odometry import Odometry3D
    from wmr_model.vehicles import load_vehicle

    feed = _start(ros, "odo_eq", "vehicle:=diffdrive")
    offline = Odometry3D(load_vehicle("diffdrive"))
    rng = np.random.default_rng(5)
    t_ns = 100 * 10**9
    dt_ns = 20_000_000
    N = 60
    feed.joint_state(t_ns, [0.0, 0.0])
    offline.update_encoders(_sec(t_ns), WHEELS, velocities=[0.0, 0.0])
    feed.settle(0.05)
    expected = []
    for k in range(N):
        w = [rng.normal(0, 0.01), rng.normal(0, 0.01), rng.uniform(-0.5, 0.5)]
        rates = rng.uniform(1.0, 5.0, 2)
        mid = t_ns + dt_ns // 2
        t_ns += dt_ns
        feed.imu_sample(mid, w, gyro_var=1e-6)
        offline.update_imu(_sec(mid), w, angular_velocity_covariance=np.eye(3) * 1e-6)
        feed.settle(0.01)
        feed.joint_state(t_ns, rates)
        assert offline.update_encoders(_sec(t_ns), WHEELS, velocities=rates).stepped
        expected.append((offline.q.copy(), offline.pose_covariance_ros, offline.qdot.copy(),
                         offline.twist_covariance_ros))
        feed.wait_odom(k + 1)
    for msg, (q, pc, qd, tc) in zip(feed.odom, expected):
        p, o = msg.pose.pose.position, msg.pose.pose.orientation
        np.testing.assert_allclose([p.x, p.y, p.z], q[4:7], atol=1e-12)
        np.testing.assert_allclose([o.w, o.x, o.y, o.z], q[0:4], atol=1e-12)
        np.testing.assert_allclose(msg.pose.covariance, pc, atol=1e-15)
        tw = msg.twist.twist
        np.testing.assert_allclose([tw.linear.x, tw.linear.y, tw.linear.z], qd[3:6], atol=1e-12)
        np.testing.assert_allclose([tw.angular.x, tw.angular.y, tw.angular.z], qd[0:3],
                                   atol=1e-12)
        np.testing.assert_allclose(msg.twist.covariance, tc, atol=1e-15)
    last = feed.odom[-1]
    assert (last.header.frame_id, last.child_frame_id) == ("odom", "base_link")
    assert _sec(last.header.stamp.sec * 10**9 + last.header.stamp.nanosec) == _sec(t_ns)
    assert last.pose.covariance[0] > feed.odom[5].pose.covariance[0] > 0  # propagated

    # --- bad input: reported, node keeps running -------------------------------------------
    feed.joint_state(t_ns + dt_ns, [math.nan, 1.0])
    feed.joint_state(t_ns + dt_ns, [1.0, 1.0, 1.0])
    feed.joint_state(t_ns + dt_ns, [1.0], names=["left_wheel_joint"])
    feed.joint_state(t_ns, [1.0, 1.0])  # duplicate stamp
    st, kv = feed.diagnostics.wait(lambda st, kv: "rejected missing_joints" in kv
                            and "rejected duplicate" in kv)
    assert kv["rejected non_finite"] == "1" and kv["rejected bad_length"] == "1"
    assert kv["missing joints"] == "right_wheel_joint"
    assert st.level >= st.WARN and "rejected" in st.message

    # --- runtime parameter update applies from the next step -------------------------------
    from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue
    from rcl_interfaces.srv import SetParameters

    client = ros.node.create_client(SetParameters, "/odo_eq/odometry_node/set_parameters")
    req = SetParameters.Request()
    req.parameters = [Parameter(name=f"wheel.{w}.radius", value=ParameterValue(
        type=ParameterType.PARAMETER_DOUBLE, double_value=0.1005)) for w in WHEELS]
    req.parameters.append(Parameter(name="slip.p9", value=ParameterValue(
        type=ParameterType.PARAMETER_DOUBLE, double_value=0.0)))
    resp = ros.call(client, req)
    assert [r.successful for r in resp.results[:2]] == [True, True]
    bad = SetParameters.Request()
    bad.parameters = [Parameter(name="wheel.left_wheel_joint.radius", value=ParameterValue(
        type=ParameterType.PARAMETER_DOUBLE, double_value=-1.0))]
    assert not ros.call(client, bad).results[0].successful
    offline.set_parameters({f"wheel.{w}.radius": 0.1005 for w in WHEELS})
    n = len(feed.odom)
    for k in range(3):
        t_ns += dt_ns
        feed.joint_state(t_ns, [2.0, 2.0])
        offline.update_encoders(_sec(t_ns), WHEELS, velocities=[2.0, 2.0])
        feed.wait_odom(n + k + 1)
    p = feed.odom[-1].pose.pose.position
    np.testing.assert_allclose([p.x, p.y, p.z], offline.q[4:7], atol=1e-12)

    # --- a bag loop: the clock jumps back 30 s -> clean reset ------------------------------
    n = len(feed.odom)
    t_ns -= 30 * 10**9
    feed.joint_state(t_ns, [2.0, 2.0])
    feed.settle(0.05)
    feed.joint_state(t_ns + dt_ns, [2.0, 2.0])
    feed.wait_odom(n + 1)
    p = feed.odom[-1].pose.pose.position
    assert p.x == pytest.approx(0.02 * 2.0 * 0.1005, rel=1e-6) and abs(p.y) < 1e-12
    assert feed.odom[-1].pose.covariance[0] < 1e-3
    st, kv = feed.diagnostics.wait(lambda st, kv: kv.get("resets") == "1")
    assert "backwards" in kv["last reset reason"]
    ros.check_alive()


def test_vehicle_from_robot_description_topic(ros):
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from std_msgs.msg import String

    qos = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL,
                     reliability=ReliabilityPolicy.RELIABLE)
    pub = ros.node.create_publisher(String, "/odo_rd/robot_description", qos)
    pub.publish(String(data=(REPO / "urdf" / "warthog.urdf").read_text()))
    sidecar = REPO / "config" / "vehicles" / "warthog.yaml"
    feed = _start(ros, "odo_rd", f"sidecar:={sidecar}", "use_gyro:=false")
    # the encoder map: Warthog reports one joint per side
    names = ["left_wheel_joint", "right_wheel_joint"]
    deadline = time.monotonic() + 20
    k = 0
    while not feed.odom:
        assert time.monotonic() < deadline, "no odometry from the robot_description vehicle"
        feed.joint_state(10**9 + k * 50_000_000, [1.0, 1.0], names=names)
        k += 1
        feed.settle(0.1)
    v = feed.odom[-1].twist.twist.linear.x
    assert v == pytest.approx(0.3, rel=1e-6)  # radius 0.3 m
    st, _ = feed.diagnostics.wait(lambda st, kv: "imu age [s]" in kv)
    assert "stale" not in st.message or "imu" not in st.message  # gyro off: IMU not needed
