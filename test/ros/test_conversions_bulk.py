"""Bulk message builders of :mod:`wmr_model.ros.conversions` and the prediction response fill:
identical on the wire (rclpy serialization: same CDR size, equal after a round trip) to the
per-element public-constructor path."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]


def _same_wire(a, b):
    """Both messages serialize to the same CDR size and deserialize to equal messages.

    CDR leaves alignment padding (e.g. after a string) uninitialized, so the raw bytes of two
    equal messages may differ there; size plus round trip compares what goes on the wire.
    """
    from rclpy.serialization import deserialize_message, serialize_message

    wa, wb = serialize_message(a), serialize_message(b)
    return (len(wa) == len(wb)
            and deserialize_message(wa, type(a)) == deserialize_message(wb, type(b)) == b)


@pytest.mark.parametrize("fast", [True, False])
def test_pose_stamped_list_equals_public_constructors(monkeypatch, fast):
    from geometry_msgs.msg import PoseStamped
    from nav_msgs.msg import Path as PathMsg
    from std_msgs.msg import Header

    from wmr_model.ros import conversions as cv

    assert cv.FAST_BUILD  # the Jazzy wheels have the expected slots
    monkeypatch.setattr(cv, "FAST_BUILD", fast)
    rng = np.random.default_rng(0)
    q = rng.normal(size=(7, 9))
    headers = [Header(frame_id="odom", stamp=s) for s in cv.stamp_list(0.1 * np.arange(7))]
    got = cv.pose_stamped_list(headers, q)
    want = []
    for h, row in zip(headers, q):
        ps = PoseStamped()
        ps.header = h
        ps.pose = cv.arrays_to_pose(row[4:7], row[0:4])
        want.append(ps)
    assert got == want
    assert _same_wire(PathMsg(poses=got), PathMsg(poses=want))
    with pytest.raises(ValueError, match="6 headers for 7 poses"):
        cv.pose_stamped_list(headers[:6], q)


@pytest.mark.parametrize("fast", [True, False])
def test_trajectory_points_equal_public_constructors(monkeypatch, fast):
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

    from wmr_model.ros import conversions as cv

    monkeypatch.setattr(cv, "FAST_BUILD", fast)
    rng = np.random.default_rng(1)
    P, V = rng.normal(size=(5, 3)), rng.normal(size=(5, 3))
    d = cv.duration_list(0.05 * np.arange(5))
    got = cv.trajectory_points(P, V, d)
    want = [JointTrajectoryPoint(positions=P[t].tolist(), velocities=V[t].tolist(),
                                 time_from_start=cv.seconds_to_duration(0.05 * t))
            for t in range(5)]
    assert got == want
    assert _same_wire(JointTrajectory(points=got), JointTrajectory(points=want))
    got[0].positions.append(1.0)  # rows are independent arrays
    assert len(got[1].positions) == 3
    assert cv.trajectory_points(P, np.empty((5, 0)), d)[0].velocities.tolist() == []
    with pytest.raises(ValueError, match="positions"):
        cv.trajectory_points(P, V[:4], d)


def test_stamp_lists_match_the_scalar_conversions():
    from wmr_model.ros import conversions as cv

    t = np.array([0.0, 1e-9, 0.1, 1.5, 12345.999999999])
    assert cv.stamp_list(t) == [cv.seconds_to_stamp(v) for v in t]
    assert cv.duration_list(t) == [cv.seconds_to_duration(v) for v in t]


def test_fill_response_matches_the_per_element_fill_on_the_wire():
    from wmr_model.estimation.odometry import DEFAULT_QPRIME_U
    from wmr_model.io.vehicles import load_vehicle
    from wmr_model.kinematics.uncertainty import qprime_from_parameters
    from wmr_model.prediction.predict import predict
    from wmr_model.ros.prediction_node import fill_response, prediction_inputs
    from wmr_model.srv import PredictTrajectory
    from wmr_model.terrain import surface as tr

    sys.path.insert(0, str(REPO / "bench"))
    try:
        from bench_nodes import fill_response_per_element
    finally:
        sys.path.remove(str(REPO / "bench"))
    model = load_vehicle("diffdrive")
    req = PredictTrajectory.Request()
    req.header.frame_id = "odom"
    req.header.stamp.sec = 3
    req.step_size, req.num_candidates, req.num_steps = 0.1, 4, 6
    req.initial_pose.orientation.w = 1.0
    req.command_joint_names = ["left_wheel_joint", "right_wheel_joint"]
    req.joint_commands = np.random.default_rng(3).uniform(0, 5, 4 * 6 * 2).tolist()
    inp = prediction_inputs(model, req, None, max_candidates=10, max_steps=10, max_horizon=10)
    pred = predict(model, tr.flat(), inp.q0, inp.commands, inp.dt,
                   Qprime=qprime_from_parameters(DEFAULT_QPRIME_U))
    new = fill_response(model, inp, pred, PredictTrajectory.Response())
    old = fill_response_per_element(model, inp, pred, PredictTrajectory.Response())
    assert _same_wire(new, old)
    assert new == old
