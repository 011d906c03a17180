"""ROS 2 node: 3D kinematic odometry (thin adapter over :class:`wmr_model.odometry.Odometry3D`).

Topics (relative names; remap as needed)
-----------------------------------------
==========================  ===============================  ======================================
``joint_states``            sensor_msgs/JointState (in)      wheel positions and/or velocities;
                                                             steering/suspension positions
``imu/data``                sensor_msgs/Imu (in)             angular velocity (and orientation for
                                                             ``impose_imu_attitude``); REP-145
``robot_description``       std_msgs/String (in, transient   URDF when neither the
                            local)                           ``robot_description`` nor the
                                                             ``vehicle`` parameter is set
``odom``                    nav_msgs/Odometry (out)          ``odom_frame`` -> ``base_frame``
                                                             (REP-105), propagated covariances
``/tf``                     odom -> base_link                when tf2_ros is importable and
                                                             ``publish_tf``
``/diagnostics``            diagnostic_msgs/DiagnosticArray  input rates, stale inputs, rejected
                                                             messages, resets
==========================  ===============================  ======================================

All integration uses message stamps (:mod:`wmr_model.odometry`); the node clock (``use_sim_time``
honoured) only paces the diagnostics. Parameter updates (``slip.*``, ``noise.U.*``,
``wheel.<wheel>.radius``, the behaviour switches) are accepted at run time and apply from the
next step; bad values are refused with the core's message.

Run: ``ros2 run wmr_model odometry_node --ros-args -p vehicle:=warthog``.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from nav_msgs.msg import Odometry
from rcl_interfaces.msg import SetParametersResult
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import Imu, JointState

from wmr_model.errors import WmrError
from wmr_model.odometry import DEFAULT_QPRIME_U, Odometry3D
from wmr_model.ros import conversions as cv
from wmr_model.ros.conversions import publish_status
from wmr_model.ros.params import (
    declare,
    declare_model_parameters,
    declare_vehicle_parameters,
    declare_wheel_parameters,
    load_vehicle_from_parameters,
    model_parameter_names,
    subscribe_robot_description,
    terrain_from_parameters,
)
from wmr_model.ros.runner import spin_node

__all__ = ["OdometryNode", "main"]

NODE_NAME = "odometry_node"

# behaviour parameters mirrored onto the Odometry3D attribute of the same name
_BEHAVIOUR = ("use_gyro", "impose_imu_attitude", "stabilization", "max_step",
              "time_jump_threshold", "reset_on_gap", "gyro_timeout", "late_tolerance")


class OdometryNode(Node):
    """The odometry node; see the module docstring for topics and parameters."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(NODE_NAME, **kwargs)
        self.vehicle_params = declare_vehicle_parameters(self)
        self.odom_frame = declare(self, "odom_frame", "odom", "frame of the published pose "
                                  "(REP-105 odom)", read_only=True)
        self.base_frame = declare(self, "base_frame", "base_link", "child frame (the body)",
                                  read_only=True)
        self.publish_tf = declare(self, "publish_tf", True, "broadcast odom -> base_link on /tf "
                                  "(needs tf2_ros; another node may own this transform)")
        self.fidelity = declare(self, "fidelity", "kinematic", "kinematic: no-slip estimation; "
                                "enhanced: body slip from slip.p1..p8 (§2.3)", read_only=True,
                                choices=("kinematic", "enhanced"))
        self.behaviour = {
            "use_gyro": declare(self, "use_gyro", True, "make the IMU angular velocity a known "
                                "element of the solve; off: encoders only (skid steer drifts "
                                "~7x more)"),
            "impose_imu_attitude": declare(self, "impose_imu_attitude", False, "replace roll "
                                           "and pitch by the IMU orientation after each step"),
            "stabilization": declare(self, "stabilization", 0.5, "[-] Baumgarte gain sigma*dt "
                                     "(2.35); 0 lets wheels drift off the terrain", lower=0.0,
                                     upper=1.0),
            "max_step": declare(self, "max_step", 0.5, "[s] longest encoder interval "
                                "integrated; longer gaps are skipped (reported)", lower=1e-3,
                                upper=60.0),
            "time_jump_threshold": declare(self, "time_jump_threshold", 1.0, "[s] an encoder "
                                           "stamp this far behind is a time jump (bag loop): "
                                           "reset", lower=0.0, upper=3600.0),
            "reset_on_gap": declare(self, "reset_on_gap", False, "reset the pose (not only the "
                                    "time base) after a forward gap > max_step"),
            "gyro_timeout": declare(self, "gyro_timeout", 0.5, "[s] how long a gyro rate or "
                                    "IMU attitude is held without new samples", lower=0.0,
                                    upper=10.0),
            "late_tolerance": declare(self, "late_tolerance", 0.1, "[s] IMU samples this much "
                                      "older than an interval still count for it", lower=0.0,
                                      upper=5.0),
        }
        self.stale_timeout = declare(self, "stale_timeout", 1.0, "[s] an input silent this "
                                     "long (node clock) is reported stale", lower=0.0,
                                     upper=3600.0)
        period = declare(self, "diagnostics_period", 1.0, "[s] diagnostics publishing period",
                         lower=0.01, upper=60.0)
        reliability = declare(self, "sensor_qos", "reliable", "reliability of the input "
                              "subscriptions: reliable (bag replay, no loss) or best_effort "
                              "(drivers using SensorDataQoS)", read_only=True,
                              choices=("reliable", "best_effort"))
        depth = declare(self, "queue_size", 100, "input queue depth", lower=1, upper=100000,
                        read_only=True)
        self.model_values = declare_model_parameters(self, DEFAULT_QPRIME_U)

        self.odo: Odometry3D | None = None
        self.pub_odom = self.create_publisher(Odometry, "odom", 50)
        self.pub_diag = self.create_publisher(DiagnosticArray, "/diagnostics", 10)
        self.tf = None
        if self.publish_tf:
            self._make_tf()
        qos = QoSProfile(depth=int(depth), reliability=(
            ReliabilityPolicy.BEST_EFFORT if reliability == "best_effort"
            else ReliabilityPolicy.RELIABLE))
        self.create_subscription(JointState, "joint_states", self._on_joint_state, qos)
        self.create_subscription(Imu, "imu/data", self._on_imu, qos)
        self.received: Counter = Counter()
        self.window: Counter = Counter()
        self.last_receive: dict[str, float] = {}
        self.node_rejected: Counter = Counter()
        self.model_error = ""
        self._window_start = self._now()
        self._rd_sub = None
        self._try_load(None)
        if self.odo is None and not self.model_error:
            self.get_logger().info("waiting for the vehicle on the robot_description topic")
            self._rd_sub = subscribe_robot_description(self, self._on_robot_description)
        self.add_on_set_parameters_callback(self._on_set_parameters)
        self.create_timer(float(period), self._publish_diagnostics)

    # ---- setup --------------------------------------------------------------------------------
    def _make_tf(self) -> None:
        try:
            from tf2_ros import TransformBroadcaster
        except ImportError:
            self.get_logger().warning(
                "publish_tf is true but tf2_ros is not importable (PyPI ROS wheels ship none): "
                "odom -> base_link is NOT broadcast; the pose is still on the odom topic")
            return
        self.tf = TransformBroadcaster(self)

    def _now(self) -> float:
        return self.get_clock().now().nanoseconds * 1e-9

    def _try_load(self, xml: str | None) -> None:
        try:
            model = load_vehicle_from_parameters(self.vehicle_params, xml)
        except (WmrError, OSError) as exc:
            self.model_error = str(exc)
            self.get_logger().error(f"cannot load the vehicle: {exc}")
            return
        if model is None:
            return
        try:
            wheels = declare_wheel_parameters(self, model)
            params = dict(self.model_values)
            params.update({k: v for k, v in wheels.items()
                           if v != float(model.wheel_radius[model.wheel_names.index(
                               k[len("wheel."):-len(".radius")])])})
            self.odo = Odometry3D(model, terrain_from_parameters(self.vehicle_params),
                                  fidelity=self.fidelity, parameters=params, **self.behaviour)
        except (WmrError, ValueError) as exc:
            self.model_error = str(exc)
            self.get_logger().error(f"cannot set up the odometry for {model.name}: {exc}")
            return
        self.model_error = ""
        self.get_logger().info(
            f"odometry for {model.name}: {model.nw} wheels, encoder joints "
            f"{list(self.odo.required_joints)}, use_gyro={self.odo.use_gyro}")

    def _on_robot_description(self, xml: str) -> None:
        if self.odo is not None:
            return
        self._try_load(xml)
        if self.odo is not None and self._rd_sub is not None:
            self.destroy_subscription(self._rd_sub)
            self._rd_sub = None

    def _on_set_parameters(self, params) -> SetParametersResult:
        model_names = set(model_parameter_names())
        updates: dict[str, float] = {}
        behaviour: dict[str, Any] = {}
        for p in params:
            if p.name in model_names or (p.name.startswith("wheel.")
                                         and p.name.endswith(".radius")):
                updates[p.name] = p.value
            elif p.name in _BEHAVIOUR:
                behaviour[p.name] = p.value
            elif p.name == "publish_tf":
                if p.value and self.tf is None:
                    self._make_tf()
                self.publish_tf = bool(p.value)
        if self.odo is not None and updates:
            try:
                self.odo.set_parameters(updates)
            except (WmrError, ValueError) as exc:
                return SetParametersResult(successful=False, reason=str(exc))
        if self.odo is None:
            self.model_values.update({k: float(v) for k, v in updates.items()
                                      if k in model_names})
        for name, value in behaviour.items():
            self.behaviour[name] = value
            if self.odo is not None:
                setattr(self.odo, name, type(getattr(self.odo, name))(value))
        if updates or behaviour:
            self.get_logger().info(f"parameters updated (apply from the next step): "
                                   f"{sorted(updates) + sorted(behaviour)}")
        return SetParametersResult(successful=True)

    # ---- inputs -------------------------------------------------------------------------------
    def _received(self, stream: str) -> None:
        self.received[stream] += 1
        self.window[stream] += 1
        self.last_receive[stream] = self._now()

    def _on_joint_state(self, msg: JointState) -> None:
        self._received("encoders")
        if self.odo is None:
            self.node_rejected["no_vehicle_model"] += 1
            return
        s = cv.encoder_sample(msg)
        res = self.odo.update_encoders(s.stamp, s.names, s.positions, s.velocities)
        if res.reset:
            self.get_logger().warning(f"odometry reset: {res.reset}")
        if not res.accepted:
            self.get_logger().warning(f"rejected: {self.odo.diagnostics.last_rejection}",
                                      throttle_duration_sec=5.0)
        if res.stepped:
            self._publish_odometry(s.stamp)

    def _on_imu(self, msg: Imu) -> None:
        self._received("imu")
        if self.odo is None:
            self.node_rejected["no_vehicle_model"] += 1
            return
        s = cv.imu_sample(msg)
        if s.angular_velocity is None:
            self.node_rejected["imu_angular_velocity_not_provided"] += 1
            return
        res = self.odo.update_imu(s.stamp, s.angular_velocity, s.orientation,
                                  angular_velocity_covariance=s.angular_velocity_covariance,
                                  orientation_covariance=s.orientation_covariance)
        if not res.accepted:
            self.get_logger().warning(f"rejected: {self.odo.diagnostics.last_rejection}",
                                      throttle_duration_sec=5.0)

    # ---- outputs ------------------------------------------------------------------------------
    def _publish_odometry(self, stamp: float) -> None:
        odo = self.odo
        assert odo is not None
        position, orientation = odo.pose
        linear, angular = odo.twist
        msg = cv.odometry_message(stamp, self.odom_frame, self.base_frame, position, orientation,
                                  odo.pose_covariance_ros, linear, angular,
                                  odo.twist_covariance_ros)
        self.pub_odom.publish(msg)
        if self.publish_tf and self.tf is not None:
            self.tf.sendTransform(cv.transform_message(msg))

    def _publish_diagnostics(self) -> None:
        now = self._now()
        span = max(now - self._window_start, 1e-9)
        self._window_start = now
        rates = {k: self.window[k] / span for k in ("encoders", "imu")}
        self.window.clear()
        st = DiagnosticStatus(name=f"{self.get_fully_qualified_name()}: odometry",
                              hardware_id="wmr_model")
        values = [KeyValue(key=f"{k} rate [Hz]", value=f"{v:.2f}") for k, v in rates.items()]
        stale = []
        for stream in ("encoders", "imu"):
            last = self.last_receive.get(stream)
            age = None if last is None else now - last
            values.append(KeyValue(key=f"{stream} age [s]",
                                   value="never" if age is None else f"{age:.3f}"))
            if age is None or age > self.stale_timeout:
                if stream == "encoders" or (self.odo is not None and self.odo.use_gyro):
                    stale.append(stream)
        level, problems = DiagnosticStatus.OK, []
        for reason, n in sorted(self.node_rejected.items()):
            values.append(KeyValue(key=f"rejected {reason}", value=str(n)))
        if self.odo is None:
            level = DiagnosticStatus.ERROR
            problems.append("no vehicle model" + (f": {self.model_error}"
                                                  if self.model_error else " yet"))
        else:
            d = self.odo.diagnostics
            for reason, n in sorted(d.rejected.items()):
                values.append(KeyValue(key=f"rejected {reason}", value=str(n)))
            values += [
                KeyValue(key="accepted encoders", value=str(d.accepted["encoders"])),
                KeyValue(key="accepted imu", value=str(d.accepted["imu"])),
                KeyValue(key="steps", value=str(d.steps)),
                KeyValue(key="gyro stale steps", value=str(d.gyro_stale_steps)),
                KeyValue(key="resets", value=str(d.resets)),
                KeyValue(key="last reset reason", value=d.last_reset_reason),
                KeyValue(key="last rejection", value=d.last_rejection),
                KeyValue(key="missing joints", value=",".join(d.missing_joints)),
                KeyValue(key="unknown joints", value=",".join(d.unknown_joints)),
            ]
            if d.rejected_total:
                level = max(level, DiagnosticStatus.WARN)
                problems.append(f"{d.rejected_total} messages rejected")
        if stale:
            level = max(level, DiagnosticStatus.WARN)
            problems.append("stale inputs: " + ", ".join(stale))
        publish_status(self, self.pub_diag, st, level, problems, values)


def main(args: list[str] | None = None) -> int:
    """Entry point of ``ros2 run wmr_model odometry_node``."""
    return spin_node(OdometryNode, args)
