"""Property: damaged bags (stamps, values, types, bytes) give finite results or one error line.

Reading runs through the Python API (fast, many examples); a few mutations go through
``wmr calibrate`` end to end.
"""

from __future__ import annotations

import math

import numpy as np
from bagtools import TS, empty, rewrite, set_stamp, stamp_of
from hypothesis import given, settings
from hypothesis import strategies as st
from rosbags.rosbag2 import StoragePlugin, Writer
from wmrcontract import FUZZ, run_wmr

from wmr_model.errors import WmrError

MUTATIONS = ("jitter", "duplicate", "reverse", "nan_velocity", "empty_velocity",
             "nan_pose", "huge_velocity", "empty_names", "zero_stamp")


def _mutator(kind: str, fraction: float, seed: int):
    rng = np.random.default_rng(seed)
    held: list = []

    def edit(k, topic, m):
        hit = rng.random() < fraction
        if kind == "jitter" and hit and stamp_of(m) is not None:
            set_stamp(m, stamp_of(m) + rng.uniform(-0.5, 0.5))
        elif kind == "duplicate" and hit:
            return [m, m]
        elif kind == "reverse" and topic == "/joint_states" and 50 <= k < 80:
            held.append(m)
            return held[::-1] if k == 79 else []
        elif kind in ("nan_velocity", "empty_velocity", "huge_velocity", "empty_names") \
                and topic == "/joint_states" and hit:
            if kind == "nan_velocity":
                m.velocity = np.full(len(m.name), np.nan)
            elif kind == "empty_velocity":
                m.velocity = empty()
            elif kind == "huge_velocity":
                m.velocity = np.full(len(m.name), 1e30)
            else:
                m.name, m.position, m.velocity, m.effort = [], empty(), empty(), empty()
        elif kind == "nan_pose" and topic in ("/gps/odom", "/ground_truth/odom") and hit:
            m.pose.pose.orientation.w = math.nan
        elif kind == "zero_stamp" and hit and stamp_of(m) is not None:
            set_stamp(m, 0.0)
        return None

    return edit


@settings(FUZZ, max_examples=3)
@given(kind=st.sampled_from(MUTATIONS), fraction=st.sampled_from([0.02, 0.1, 0.5]),
       seed=st.integers(0, 100))
def test_calibrate_on_mutated_bag(synth_bag, tmp_path_factory, kind, fraction, seed):
    bag = rewrite(synth_bag, tmp_path_factory.mktemp("m") / "b", _mutator(kind, fraction, seed))
    res = run_wmr("calibrate", bag, "--vehicle", "warthog", "--pose-topic", "/gps/odom",
                  "--json")
    if res.code == 0:
        assert all(r["mean_pos_m"] is not None and r["mean_pos_m"] < 5.0
                   for r in res.data["rows"])


@settings(FUZZ, max_examples=8)
@given(kind=st.sampled_from(MUTATIONS), fraction=st.sampled_from([0.02, 0.1, 0.5, 1.0]),
       seed=st.integers(0, 100))
def test_read_and_build_log(synth_bag, tmp_path_factory, kind, fraction, seed):
    from wmr_model.io.bags import log_from_bag
    from wmr_model.io.vehicles import load_vehicle

    bag = rewrite(synth_bag, tmp_path_factory.mktemp("m") / "b", _mutator(kind, fraction, seed))
    try:
        log = log_from_bag(bag, load_vehicle("warthog"), pose_topic="/gps/odom")
    except WmrError:
        return
    assert np.all(np.isfinite(log.joint_rate)) and np.all(np.diff(log.joint_time) > 0)
    assert np.all(np.isfinite(log.pose)) and np.all(np.diff(log.pose_time) > 0)


@FUZZ
@given(where=st.floats(0.05, 0.95), cut=st.booleans(), junk=st.binary(min_size=8,
                                                                       max_size=4096))
def test_truncated_or_corrupt_file(bag_copy, where, cut, junk):
    bag = bag_copy(f"c{abs(hash((where, cut, junk)))}")
    mcap = next(bag.glob("*.mcap"))
    data = bytearray(mcap.read_bytes())
    i = int(where * len(data))
    data = data[:i] if cut else data[:i] + junk + data[i + len(junk):]
    mcap.write_bytes(bytes(data))
    from wmr_model.io.bags import read_streams

    try:
        s = read_streams(bag, {"e": "/joint_states"}, {"e": "joint_states"})
    except WmrError:
        return
    assert np.all(np.diff(s["e"].stamp) > 0)


def test_wrong_message_type_on_encoder_topic(tmp_path, synth_bag):
    with Writer(tmp_path / "b", version=8, storage_plugin=StoragePlugin.MCAP) as w:
        c = w.add_connection("/joint_states", "geometry_msgs/msg/Twist", typestore=TS)
        V3 = TS.types["geometry_msgs/msg/Vector3"]
        m = TS.types["geometry_msgs/msg/Twist"](linear=V3(x=1.0, y=0.0, z=0.0),
                                                angular=V3(x=0.0, y=0.0, z=0.0))
        w.write(c, 1, TS.serialize_cdr(m, "geometry_msgs/msg/Twist"))
    res = run_wmr("calibrate", tmp_path / "b", "--vehicle", "warthog")
    assert res.code == 2 and "'/joint_states' has type geometry_msgs/msg/Twist" in res.err
