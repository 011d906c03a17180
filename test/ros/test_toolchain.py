"""The ROS 2 toolchain end to end: generated wmr_model interfaces over DDS between processes.

``echo_node.py`` runs as its own process on the session's isolated domain; this process calls
its PredictTrajectory service and receives its CalibrationState messages with the generated
types, and checks every field.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from harness import NodeProcessError

HERE = Path(__file__).resolve().parent
ECHO = HERE / "echo_node.py"

pytestmark = pytest.mark.timeout(90)


def _start_echo(ros, namespace: str) -> str:
    ros.start(ECHO, "--namespace", namespace, name=f"echo_node_{namespace}")
    prefix = f"/{namespace}/wmr_echo"
    ros.wait_for(
        services=[f"{prefix}/predict_trajectory"], topics=[f"{prefix}/calibration_state"]
    )
    return prefix


def _request():
    from geometry_msgs.msg import Twist

    from wmr_model.srv import PredictTrajectory

    req = PredictTrajectory.Request()
    req.header.frame_id = "odom"
    req.header.stamp.sec = 12
    req.header.stamp.nanosec = 345
    req.fidelity = PredictTrajectory.Request.ENHANCED
    req.step_size = 0.25
    req.use_latest_odometry = False
    req.initial_pose.position.x = 1.0
    req.initial_pose.position.y = -2.0
    req.initial_pose.orientation.z = math.sin(0.25)
    req.initial_pose.orientation.w = math.cos(0.25)
    req.initial_twist.linear.x = 0.5
    req.joint_names = ["steer_FL", "steer_FR"]
    req.joint_positions = [0.1, -0.1]
    req.joint_rates = [0.01, -0.01]
    req.command_type = PredictTrajectory.Request.JOINT_RATES
    req.num_candidates = 2
    req.num_steps = 3
    req.command_joint_names = ["wheel_L", "wheel_R"]
    # [candidate][step][joint]
    req.joint_commands = [
        100 * c + 10 * t + j for c in range(2) for t in range(3) for j in range(2)
    ]
    tw = Twist()
    tw.angular.z = 0.75
    req.twist_commands = [tw, Twist()]
    req.twist_durations = [1.5]
    return req


def test_interface_constants():
    from wmr_model.msg import CalibrationState
    from wmr_model.srv import PredictTrajectory

    Req, Resp = PredictTrajectory.Request, PredictTrajectory.Response
    assert (Req.KINEMATIC, Req.ENHANCED, Req.DYNAMIC) == (0, 1, 2)
    assert (Req.JOINT_RATES, Req.BODY_TWIST) == (0, 1)
    assert (Resp.FLAG_TIPOVER_RISK, Resp.FLAG_TRACTION_LIMIT, Resp.FLAG_WHEEL_LIFTOFF) == (1, 2, 4)
    fields = CalibrationState.get_fields_and_field_types()
    assert list(fields) == [
        "header", "parameter_names", "values", "covariance", "stochastic_names",
        "stochastic_values", "last_innovation", "last_nis", "last_accepted", "interval_count",
        "rejected_count",
    ]


def test_predict_trajectory_service_round_trip(ros):
    from echo_node import respond

    from wmr_model.srv import PredictTrajectory

    prefix = _start_echo(ros, "predict")
    client = ros.node.create_client(PredictTrajectory, f"{prefix}/predict_trajectory")
    req = _request()
    resp = ros.call(client, req)

    C, T = 2, 3
    assert resp.success is True
    assert resp.status_message == "fidelity=1 command_type=0 use_latest_odometry=False 2 x 3"
    assert len(resp.paths) == C
    for c, path in enumerate(resp.paths):
        assert path.header.frame_id == "odom"
        assert (path.header.stamp.sec, path.header.stamp.nanosec) == (12, 345)
        assert len(path.poses) == T + 1
        for t, ps in enumerate(path.poses):
            assert ps.pose.position.x == pytest.approx(1.0 + (c + 1) * t * 0.25)
            assert ps.pose.position.y == -2.0
            assert ps.pose.position.z == pytest.approx(0.5 * t)
            assert ps.pose.orientation.z == pytest.approx(math.sin(0.25))
            assert ps.pose.orientation.w == pytest.approx(math.cos(0.25))
    assert len(resp.pose_covariances) == C * (T + 1) * 36
    assert resp.pose_covariances[-1] == (C * (T + 1) * 36 - 1) * 0.5
    assert list(resp.flags) == [(c + t) % 8 for c in range(C) for t in range(T + 1)]
    assert len(resp.joint_trajectories) == C
    for c, traj in enumerate(resp.joint_trajectories):
        assert traj.joint_names == ["steer_FL", "steer_FR", "wheel_L", "wheel_R"]
        point = traj.points[0]
        assert list(point.positions) == [0.1, -0.1, 0.0, 0.0]
        assert list(point.velocities) == [0.01, -0.01, 100.0 * c, 100.0 * c + 1]
    assert resp.compute_time == pytest.approx(1.5 + 0.75)
    # The same function run locally gives the identical message.
    assert resp == respond(req, PredictTrajectory.Response())


def test_calibration_state_topic(ros):
    from echo_node import calibration_state

    from wmr_model.msg import CalibrationState

    prefix = _start_echo(ros, "calib")
    first, second = ros.receive(CalibrationState, f"{prefix}/calibration_state", count=2)
    expected = calibration_state()
    for msg in (first, second):
        stamp = msg.header.stamp
        assert stamp.sec > 0
        msg.header.stamp = expected.header.stamp
        assert msg == expected
        assert msg.parameter_names == ["wheel.FL.radius", "slip.p3"]
        assert list(msg.covariance) == [1e-4, 2e-6, 2e-6, 3e-2]
        assert (msg.last_nis, msg.last_accepted) == (2.5, True)
        assert (msg.interval_count, msg.rejected_count) == (7, 2)
        msg.header.stamp = stamp
    assert (second.header.stamp.sec, second.header.stamp.nanosec) > (
        first.header.stamp.sec, first.header.stamp.nanosec
    )


def test_harness_stops_node_cleanly_with_sigint(ros):
    _start_echo(ros, "stop")
    proc = ros.processes[0]
    assert proc.stop() == 0
    assert proc.stop_signals == ["SIGINT"]
    out, err = proc.output()
    assert "shutting down" in out + err


def test_harness_reports_a_dying_node(ros, tmp_path):
    script = tmp_path / "dies.py"
    script.write_text("import sys\nprint('about to fail')\nsys.exit(3)\n")
    ros.start(script)
    with pytest.raises(NodeProcessError, match=r"(?s)exit code 3.*about to fail"):
        ros.wait_for(services=["/never"], timeout=20)
