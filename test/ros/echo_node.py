"""Toolchain check node: serves PredictTrajectory and publishes CalibrationState.

The response is derived deterministically from the request (see :func:`respond`), and the
published calibration state is :func:`calibration_state` stamped with the current time, so a
test can predict every field it receives. No physics here.

Usage: python echo_node.py [--namespace NS]
"""

from __future__ import annotations

import argparse
import sys

from builtin_interfaces.msg import Duration
from geometry_msgs.msg import PoseStamped
from nav_msgs.msg import Path
from rclpy.node import Node
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from wmr_model.msg import CalibrationState
from wmr_model.ros.runner import spin_node
from wmr_model.srv import PredictTrajectory

NODE_NAME = "wmr_echo"
SERVICE = "~/predict_trajectory"
TOPIC = "~/calibration_state"


def calibration_state() -> CalibrationState:
    """The message the node publishes (header.stamp is set when publishing)."""
    msg = CalibrationState()
    msg.header.frame_id = "base_link"
    msg.parameter_names = ["wheel.FL.radius", "slip.p3"]
    msg.values = [0.125, -0.5]
    msg.covariance = [1e-4, 2e-6, 2e-6, 3e-2]
    msg.stochastic_names = ["noise.q_wheel"]
    msg.stochastic_values = [0.01]
    msg.last_innovation = [0.1, -0.2, 0.05]
    msg.last_nis = 2.5
    msg.last_accepted = True
    msg.interval_count = 7
    msg.rejected_count = 2
    return msg


def respond(req: PredictTrajectory.Request, resp: PredictTrajectory.Response):
    """Fill ``resp`` from ``req``: every request field shows up in the response.

    - status_message: ``"fidelity=F command_type=K use_latest_odometry=B C x T"``
    - paths: C paths of T + 1 poses; pose t of candidate c is initial_pose moved by
      ``x += (c + 1) * t * step_size``, header = request header; orientation copied.
      Path c's header.frame_id = request frame; the poses' z = initial_twist.linear.x * t.
    - joint_trajectories: C trajectories; joint_names = joint_names + command_joint_names,
      point 0 = joint_positions + zeros, velocities = joint_rates + the first step's commands.
    - pose_covariances: ``[k * 0.5 for k in range(C * (T + 1) * 36)]``.
    - flags: ``(c + t) % 8`` for each candidate c and step t.
    - compute_time: sum(twist_durations) + sum(twist_commands[i].angular.z).
    """
    C, T = req.num_candidates, req.num_steps
    J = len(req.command_joint_names)
    resp.success = True
    resp.status_message = (
        f"fidelity={req.fidelity} command_type={req.command_type} "
        f"use_latest_odometry={req.use_latest_odometry} {C} x {T}"
    )
    for c in range(C):
        path = Path()
        path.header = req.header
        for t in range(T + 1):
            ps = PoseStamped()
            ps.header = req.header
            ps.pose.position.x = req.initial_pose.position.x + (c + 1) * t * req.step_size
            ps.pose.position.y = req.initial_pose.position.y
            ps.pose.position.z = req.initial_twist.linear.x * t
            ps.pose.orientation = req.initial_pose.orientation
            path.poses.append(ps)
        resp.paths.append(path)

        traj = JointTrajectory()
        traj.header = req.header
        traj.joint_names = list(req.joint_names) + list(req.command_joint_names)
        point = JointTrajectoryPoint()
        point.positions = list(req.joint_positions) + [0.0] * J
        first = list(req.joint_commands[c * T * J: c * T * J + J])
        point.velocities = list(req.joint_rates) + first
        point.time_from_start = Duration(sec=0, nanosec=0)
        traj.points.append(point)
        resp.joint_trajectories.append(traj)
    resp.pose_covariances = [k * 0.5 for k in range(C * (T + 1) * 36)]
    resp.flags = [(c + t) % 8 for c in range(C) for t in range(T + 1)]
    resp.compute_time = float(sum(req.twist_durations)) + sum(
        tw.angular.z for tw in req.twist_commands
    )
    return resp




class EchoNode(Node):
    def __init__(self, namespace: str = "") -> None:
        super().__init__(NODE_NAME, namespace=namespace)
        self.srv = self.create_service(PredictTrajectory, SERVICE, respond)
        self.pub = self.create_publisher(CalibrationState, TOPIC, 10)
        self.timer = self.create_timer(0.1, self._publish)
        self.get_logger().info(f"serving {self.srv.srv_name}, publishing {TOPIC}")

    def _publish(self) -> None:
        msg = calibration_state()
        msg.header.stamp = self.get_clock().now().to_msg()
        self.pub.publish(msg)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--namespace", default="")
    args = parser.parse_args(argv)
    return spin_node(lambda: EchoNode(args.namespace), [])


if __name__ == "__main__":
    sys.exit(main())
