"""``wmr play``: a bag's messages arrive over DDS unchanged, in recording order, with /clock.

The oracle is the bag itself read by ``rosbags`` (deserialized there, compared field by field
with what rclpy delivered), plus the recording's time base for /clock.
"""

from __future__ import annotations

import subprocess
import time

import numpy as np
import pytest
from launching import BIN


@pytest.fixture(scope="module")
def short_bag(tmp_path_factory):
    out = tmp_path_factory.mktemp("player") / "bag"
    res = subprocess.run([str(BIN / "wmr"), "synth", "--out", str(out), "--duration", "4",
                          "--seed", "2"], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    return out


def _bag_messages(bag, topic):
    from rosbags.highlevel import AnyReader

    with AnyReader([bag]) as reader:
        conns = [c for c in reader.connections if c.topic == topic]
        return [(t, reader.deserialize(raw, c.msgtype)) for c, t, raw in reader.messages(conns)]


def test_play_delivers_the_bag_in_order_with_clock(ros, short_bag):
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from rosgraph_msgs.msg import Clock
    from sensor_msgs.msg import JointState

    joints, clock = [], []
    qos = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
    ros.node.create_subscription(JointState, "/renamed/joints", joints.append, qos)
    ros.node.create_subscription(Clock, "/clock", clock.append, qos)
    t0 = time.monotonic()
    proc = subprocess.Popen([str(BIN / "wmr"), "play", str(short_bag), "--rate", "2",
                             "--topics", "/joint_states", "--remap",
                             "/joint_states:=/renamed/joints", "--wait-for", "/renamed/joints",
                             # the first /clock samples are asserted on: wait for that reader too
                             # (under load it can be matched later than the joints' one)
                             "--wait-for", "/clock"],
                            env=ros.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    while proc.poll() is None and time.monotonic() - t0 < 120:
        ros.spin_once(0.02)
    out, err = proc.communicate(timeout=10)
    wall = time.monotonic() - t0
    assert proc.returncode == 0, err
    for _ in range(50):
        ros.spin_once(0.02)
    expected = _bag_messages(short_bag, "/joint_states")
    assert len(joints) == len(expected) == 4 * 50, out
    for got, (_, want) in zip(joints, expected):
        assert (got.header.stamp.sec, got.header.stamp.nanosec) == (
            want.header.stamp.sec, want.header.stamp.nanosec)
        assert list(got.name) == list(want.name)
        np.testing.assert_array_equal(got.velocity, want.velocity)
        np.testing.assert_array_equal(got.position, want.position)
    # /clock: the recording's time (from the bag's start, over all its topics, to the last
    # message played), never backwards
    t_clock = np.array([c.clock.sec + 1e-9 * c.clock.nanosec for c in clock])
    t_bag = np.array([t * 1e-9 for t, _ in expected])
    assert np.all(np.diff(t_clock) >= 0)
    assert t_bag[0] - 0.1 <= t_clock[0] <= t_bag[0] and abs(t_clock[-1] - t_bag[-1]) < 1e-6
    # paced at twice real time: 4 s of bag take about 2 s of wall time (not as fast as possible)
    assert wall > 1.9
    assert "played 200 messages" in out
