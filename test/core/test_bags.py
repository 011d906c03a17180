"""Bag reading: a write-then-read roundtrip with rosbags' writer, and the real Warthog log."""

import json
from pathlib import Path

import numpy as np
import pytest
from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.typesys import Stores, get_typestore

from wmr_model.errors import BagError
from wmr_model.io.bags import bag_topics, read_streams

TS = get_typestore(Stores.ROS2_JAZZY)
WARTHOG_LOG = Path(__file__).resolve().parents[2] / "data" / "warthog_grass_A"  # shipped real field log


def _t(sec):
    Time = TS.types["builtin_interfaces/msg/Time"]
    return Time(sec=int(sec), nanosec=int(round((sec % 1) * 1e9)))


def _header(sec, frame=""):
    return TS.types["std_msgs/msg/Header"](stamp=_t(sec), frame_id=frame)


def _write_bag(path, plugin, rng):
    JS = TS.types["sensor_msgs/msg/JointState"]
    Imu = TS.types["sensor_msgs/msg/Imu"]
    Odom = TS.types["nav_msgs/msg/Odometry"]
    V3 = TS.types["geometry_msgs/msg/Vector3"]
    Q = TS.types["geometry_msgs/msg/Quaternion"]
    P = TS.types["geometry_msgs/msg/Point"]
    Pose = TS.types["geometry_msgs/msg/Pose"]
    PwC = TS.types["geometry_msgs/msg/PoseWithCovariance"]
    Tw = TS.types["geometry_msgs/msg/Twist"]
    TwC = TS.types["geometry_msgs/msg/TwistWithCovariance"]
    truth = {"js": [], "imu": [], "odom": []}
    with Writer(path, version=8, storage_plugin=plugin) as w:
        cj = w.add_connection("/joint_states", "sensor_msgs/msg/JointState", typestore=TS)
        ci = w.add_connection("/imu/data", "sensor_msgs/msg/Imu", typestore=TS)
        co = w.add_connection("/gt", "nav_msgs/msg/Odometry", typestore=TS)
        for k in range(20):
            t = 100.0 + 0.05 * k
            names = ["a", "b"] if k % 2 == 0 else ["b", "a", "c"]  # order and set vary
            pos = rng.normal(size=len(names))
            vel = rng.normal(size=len(names)) if k % 3 else np.array([])  # empty = absent
            m = JS(header=_header(t), name=names, position=pos, velocity=vel,
                   effort=np.array([]))
            w.write(cj, int(t * 1e9) + 1000, TS.serialize_cdr(m, "sensor_msgs/msg/JointState"))
            truth["js"].append((t, names, pos, vel))
            g = rng.normal(size=3)
            qv = rng.normal(size=4)
            qv /= np.linalg.norm(qv)
            provided = k % 4 != 0
            oc = np.zeros(9) if provided else np.array([-1.0] + [0.0] * 8)
            mi = Imu(header=_header(t, "imu_link"),
                     orientation=Q(x=qv[1], y=qv[2], z=qv[3], w=qv[0]),
                     orientation_covariance=oc, angular_velocity=V3(x=g[0], y=g[1], z=g[2]),
                     angular_velocity_covariance=np.eye(3).ravel() * 1e-4,
                     linear_acceleration=V3(x=0.0, y=0.0, z=9.81),
                     linear_acceleration_covariance=np.zeros(9))
            w.write(ci, int(t * 1e9), TS.serialize_cdr(mi, "sensor_msgs/msg/Imu"))
            truth["imu"].append((t, g, qv if provided else None))
            p = rng.normal(size=3)
            cov = np.diag(rng.uniform(0.01, 1, 6)).ravel()
            mo = Odom(header=_header(t, "odom"), child_frame_id="base_link",
                      pose=PwC(pose=Pose(position=P(x=p[0], y=p[1], z=p[2]),
                                         orientation=Q(x=0.0, y=0.0, z=0.0, w=1.0)),
                               covariance=cov),
                      twist=TwC(twist=Tw(linear=V3(x=1.0, y=0.0, z=0.0),
                                         angular=V3(x=0.0, y=0.0, z=0.5)),
                                covariance=np.zeros(36)))
            w.write(co, int(t * 1e9), TS.serialize_cdr(mo, "nav_msgs/msg/Odometry"))
            truth["odom"].append((t, p, cov))
    return truth


ROLES = {"encoders": "/joint_states", "imu": "/imu/data", "truth": "/gt"}
KINDS = {"encoders": "joint_states", "imu": "imu", "truth": "pose"}


@pytest.mark.parametrize("plugin", [StoragePlugin.MCAP, StoragePlugin.SQLITE3])
def test_roundtrip_every_field(tmp_path, plugin):
    truth = _write_bag(tmp_path / "bag", plugin, np.random.default_rng(0))
    s = read_streams(tmp_path / "bag", ROLES, KINDS)
    js = s["encoders"]
    assert js.names == ("a", "b", "c")
    for r, (t, names, pos, vel) in enumerate(truth["js"]):
        assert js.stamp[r] == pytest.approx(t, abs=1e-9)
        assert js.receive_time[r] == pytest.approx(t + 1e-6, abs=1e-9)
        for n, v in zip(names, pos):
            assert js.position[r, js.names.index(n)] == v
        if vel.size:
            for n, v in zip(names, vel):
                assert js.velocity[r, js.names.index(n)] == v
        else:
            assert np.all(np.isnan(js.velocity[r]))
        if "c" not in names:
            assert np.isnan(js.position[r, 2])
    imu = s["imu"]
    assert imu.frame_id == "imu_link"
    for r, (t, g, qv) in enumerate(truth["imu"]):
        assert imu.stamp[r] == pytest.approx(t, abs=1e-9)
        np.testing.assert_array_equal(imu.angular_velocity[r], g)
        if qv is None:
            assert np.all(np.isnan(imu.orientation[r]))
        else:
            np.testing.assert_array_equal(imu.orientation[r], qv)
    gt = s["truth"]
    assert (gt.frame_id, gt.child_frame_id) == ("odom", "base_link")
    for r, (t, p, cov) in enumerate(truth["odom"]):
        assert gt.stamp[r] == pytest.approx(t, abs=1e-9)
        np.testing.assert_array_equal(gt.position[r], p)
        np.testing.assert_array_equal(gt.covariance[r].ravel(), cov)
    np.testing.assert_array_equal(gt.twist[0], [1, 0, 0, 0, 0, 0.5])


def test_missing_topic_lists_the_bag_topics(tmp_path):
    _write_bag(tmp_path / "bag", StoragePlugin.MCAP, np.random.default_rng(1))
    with pytest.raises(BagError, match=r"topic '/gps/odom' for truth is not in the bag; its "
                                        r"topics are: /gt \[nav_msgs/msg/Odometry\], /imu/data"):
        read_streams(tmp_path / "bag", {"truth": "/gps/odom"}, {"truth": "pose"})
    with pytest.raises(BagError, match=r"topic '/imu/data' has type sensor_msgs/msg/Imu, but "
                                        r"truth needs one of"):
        read_streams(tmp_path / "bag", {"truth": "/imu/data"}, {"truth": "pose"})
    s = read_streams(tmp_path / "bag", {"truth": "/gps/odom", "imu": "/imu/data"},
                     {"truth": "pose", "imu": "imu"}, optional=("truth",))
    assert "truth" not in s.streams and s["imu"].stamp.size == 20
    with pytest.raises(BagError, match=r"no such bag"):
        read_streams(tmp_path / "nope", ROLES, KINDS)


def test_real_warthog_log_matches_its_metadata():
    bag = WARTHOG_LOG / "bag"
    topics = bag_topics(bag)
    assert topics["/joint_states"] == ("sensor_msgs/msg/JointState", 7259)
    s = read_streams(bag, {"enc": "/joint_states", "imu": "/imu/data", "icp": "/icp/odom",
                           "cmd": "/cmd_vel"},
                     {"enc": "joint_states", "imu": "imu", "icp": "pose", "cmd": "twist"})
    facts = json.loads((WARTHOG_LOG / "analysis.json").read_text())
    assert s["enc"].names == ("left_wheel_joint", "right_wheel_joint")
    assert s["icp"].stamp.size == facts["icp_updates"]
    assert np.all(np.isnan(s["imu"].orientation))  # orientation_covariance[0] = -1
    steps = np.linalg.norm(np.diff(s["icp"].position[:, :2], axis=0), axis=1)
    assert steps.sum() == pytest.approx(facts["icp_path_length_xy_m"], rel=1e-9)
    dur = s["enc"].stamp[-1] - s["enc"].stamp[0]
    assert dur == pytest.approx(facts["duration_s"], abs=1e-6)
