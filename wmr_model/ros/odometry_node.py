"""ROS 2 node: 3D kinematic odometry (thin adapter over
:class:`wmr_model.estimation.odometry.Odometry3D`).

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
``/tf``                     tf2_msgs/TFMessage (out)         odom -> base_link per odometry
                                                             message when ``publish_tf``: through
                                                             tf2_ros' TransformBroadcaster when it
                                                             imports, else a publisher with its QoS
                                                             (reliable, volatile, depth 100)
``/diagnostics``            diagnostic_msgs/DiagnosticArray  input rates, stale inputs, rejected
                                                             messages, resets
==========================  ===============================  ======================================

All integration uses message stamps (:mod:`wmr_model.estimation.odometry`); the node clock
(``use_sim_time`` honoured) only paces the diagnostics and, under sim time, confirms time-base
jumps.

Input order and time base (:class:`wmr_model.estimation.streams.OrderedInput`): encoder and IMU
messages pass a time-base guard (a stamp more than ``time_jump_threshold`` from the time base is
held and only followed when ``time_base_confirm`` consecutive messages agree with it, or, under
``use_sim_time``, ``/clock`` does; a lone stray stamp is dropped and counted as
``stray_stamp``) and a stamp-ordered reorder window (a merge of the two streams: a message
leaves once both inputs delivered a stamp at or past it; an input silent for ``reorder_idle``
seconds of receive time is not waited for; nothing waits more than ``reorder_window`` seconds of
stamp time) before the odometry sees them. Added latency: about one sensor period while both
inputs flow, ``reorder_idle`` while one stops; ``reorder_window`` 0 processes messages as they
arrive. Plausibility gates (``max_wheel_speed``, ``max_wheel_acceleration`` at the rim, so the
wheel-rate limits follow each wheel's radius; ``max_angular_rate``) reject absurd samples,
counted as ``implausible``. Parameter updates (``slip.*``, ``noise.U.*``,
``wheel.<wheel>.radius``, the behaviour switches) are accepted at run time and apply from the
next step; bad values are refused at set time (the declared ranges and rules,
:func:`wmr_model.ros.params.validate_parameters`, then the core's checks) with the reason.

Run: ``ros2 run wmr_model odometry_node --ros-args -p vehicle:=warthog``.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from typing import Any

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from nav_msgs.msg import Odometry
from rcl_interfaces.msg import SetParametersResult
from rclpy.node import Node
from rclpy.publisher import Publisher
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import Imu, JointState

from wmr_model.errors import WmrError
from wmr_model.estimation.odometry import DEFAULT_QPRIME_U, Odometry3D
from wmr_model.estimation.steering import SteerAngles, steer_inputs, with_steer_angles
from wmr_model.estimation.streams import (
    OrderedInput,
    PlausibilityLimits,
)
from wmr_model.ros import conversions as cv
from wmr_model.ros.calibration_file import declare_calibration_file
from wmr_model.ros.conversions import publish_status
from wmr_model.ros.options import ODOMETRY_NODE
from wmr_model.ros.params import (
    declare_model_parameters,
    declare_options,
    declare_vehicle_parameters,
    declare_wheel_parameters,
    default_reorder_window,
    load_vehicle_from_parameters,
    model_parameter_names,
    subscribe_robot_description,
    terrain_from_parameters,
    validate_parameters,
)
from wmr_model.ros.runner import spin_node, steady_timer

__all__ = ["OdometryNode", "main"]

NODE_NAME = "odometry_node"

# behaviour parameters mirrored onto the Odometry3D attribute of the same name
_BEHAVIOUR = ("use_gyro", "impose_imu_attitude", "stabilization", "max_step",
              "time_jump_threshold", "reset_on_gap", "gyro_timeout", "late_tolerance")
# plausibility gates (Odometry3D.limits)
_LIMITS = ("max_wheel_speed", "max_wheel_acceleration", "max_angular_rate")
#: tf2_ros' TransformBroadcaster QoS (reliable, volatile, keep last 100)
TF_QOS = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE,
                    durability=DurabilityPolicy.VOLATILE)


class OdometryNode(Node):
    """The odometry node; see the module docstring for topics and parameters."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(NODE_NAME, **kwargs)
        # first: the file's values become those of the model parameters declared from here on
        self.calibration = declare_calibration_file(self)
        self.vehicle_params = declare_vehicle_parameters(self)
        opts = declare_options(self, ODOMETRY_NODE,
                               {"reorder_window": default_reorder_window(self)})
        self.odom_frame, self.base_frame = opts["odom_frame"], opts["base_frame"]
        self.steer_topic = opts["steer_topic"]
        self.steer: SteerAngles | None = None  # the steering angles, with the vehicle
        self.publish_tf, self.fidelity = opts["publish_tf"], opts["fidelity"]
        self.behaviour = {k: opts[k] for k in (
            "use_gyro", "impose_imu_attitude", "stabilization", "max_step",
            "time_jump_threshold", "reset_on_gap", "gyro_timeout", "late_tolerance")}
        self.limits = {k: opts[k] for k in (
            "max_wheel_speed", "max_wheel_acceleration", "max_angular_rate")}
        self.reorder_window, self.reorder_idle = opts["reorder_window"], opts["reorder_idle"]
        self.time_base_confirm = opts["time_base_confirm"]
        self.stale_timeout = opts["stale_timeout"]
        period, reliability, depth = (opts["diagnostics_period"], opts["sensor_qos"],
                                      opts["queue_size"])
        self.model_values = declare_model_parameters(self, DEFAULT_QPRIME_U)

        self.odo: Odometry3D | None = None
        self.input = self._make_input()
        self._last_reject_log = -math.inf
        self._sim_time = bool(self.get_parameter("use_sim_time").value)
        self.pub_odom = self.create_publisher(Odometry, "odom", 50)
        self.pub_diag = self.create_publisher(DiagnosticArray, "/diagnostics", 10)
        self.tf = None  # tf2_ros.TransformBroadcaster when tf2_ros is importable
        self.pub_tf: Publisher | None = None  # /tf without tf2_ros
        if self.publish_tf:
            self._make_tf()
        qos = QoSProfile(depth=int(depth), reliability=(
            ReliabilityPolicy.BEST_EFFORT if reliability == "best_effort"
            else ReliabilityPolicy.RELIABLE))
        self._qos = qos
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
        validate_parameters(self)  # after: an invalid set never reaches _on_set_parameters
        steady_timer(self, float(period), self._publish_diagnostics)
        steady_timer(self, 0.05, self._poll_input)

    # ---- setup --------------------------------------------------------------------------------
    def _make_tf(self) -> None:
        try:
            from tf2_ros import TransformBroadcaster
        except ImportError:
            from tf2_msgs.msg import TFMessage

            self.get_logger().info("tf2_ros is not importable: odom -> base_link goes out as "
                                   "tf2_msgs/TFMessage on /tf with tf2_ros' QoS")
            self.pub_tf = self.create_publisher(TFMessage, "/tf", TF_QOS)
            return
        self.tf = TransformBroadcaster(self, qos=TF_QOS)

    def _make_input(self, streams: tuple[str, ...] = ("imu", "encoders")) -> OrderedInput:
        return OrderedInput(streams, window=float(self.reorder_window),
                            jump_threshold=float(self.behaviour["time_jump_threshold"]),
                            confirm_count=int(self.time_base_confirm),
                            idle=float(self.reorder_idle))

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
                                  fidelity=self.fidelity, parameters=params, **self.behaviour,
                                  **self.limits)
        except (WmrError, ValueError) as exc:
            self.model_error = str(exc)
            self.get_logger().error(f"cannot set up the odometry for {model.name}: {exc}")
            return
        self.model_error = ""
        self._steering(model)
        layouts = " or ".join(f"{k} {list(v)}" for k, v in self.odo.encoder_layouts.items())
        self.get_logger().info(
            f"odometry for {model.name}: {model.nw} wheels, encoder joints {layouts}, "
            f"use_gyro={self.odo.use_gyro}")

    def _steering(self, model) -> None:
        """The steering angles of a steered vehicle: from ``steer_topic`` (else the sidecar's
        topic) when given, else on joint_states; commanded ones are followed with their lag
        on either topic (:class:`~wmr_model.estimation.steering.SteerAngles`)."""
        from wmr_model.io.bags import sidecar_steer_topic

        inputs = steer_inputs(model)
        if not inputs:
            return
        topic = self.steer_topic or sidecar_steer_topic(model) or ""
        self.steer = SteerAngles(inputs)
        self._steer_on_encoders = not topic or topic.lstrip("/") == "joint_states"
        if not self._steer_on_encoders:
            # a third input of the stamp-order merge, first at equal stamps: an encoder message
            # is stepped with the angles stamped up to it, whatever the arrival order
            self.input = self._make_input(("steer", "imu", "encoders"))
            self.create_subscription(JointState, topic, self._on_steer, self._qos)
        kinds = ", ".join(f"{j} {si.source}" for j, si in inputs.items())
        self.get_logger().info(f"steering angles ({kinds}) from "
                               f"{topic if not self._steer_on_encoders else 'joint_states'}")

    def _on_steer(self, msg: JointState) -> None:
        self._received("steer")
        if self.steer is not None:
            s = cv.encoder_sample(msg)
            self._push("steer", s.stamp, s)

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
        limits: dict[str, float] = {}
        for p in params:
            if p.name in model_names or (p.name.startswith("wheel.")
                                         and p.name.endswith(".radius")):
                updates[p.name] = p.value
            elif p.name in _BEHAVIOUR:
                behaviour[p.name] = p.value
            elif p.name in _LIMITS:
                limits[p.name] = float(p.value)
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
            if name == "time_jump_threshold":
                self.input.jump_threshold = float(value)
        if limits:
            self.limits.update(limits)
            if self.odo is not None:
                self.odo.limits = PlausibilityLimits(**self.limits)
        for p in params:
            if p.name == "reorder_window":
                self.reorder_window = float(p.value)
                self._process(self.input.set_window(self.reorder_window))
            elif p.name == "time_base_confirm":
                self.input.confirm_count = int(p.value)
            elif p.name == "use_sim_time":
                self._sim_time = bool(p.value)
            elif p.name == "reorder_idle":
                self.input.idle = float(p.value)
        if updates or behaviour or limits:
            self.get_logger().info(f"parameters updated (apply from the next step): "
                                   f"{sorted(updates) + sorted(behaviour) + sorted(limits)}")
        return SetParametersResult(successful=True)

    # ---- inputs -------------------------------------------------------------------------------
    def _received(self, stream: str) -> None:
        self.received[stream] += 1
        self.window[stream] += 1
        self.last_receive[stream] = self._now()

    def _push(self, stream: str, stamp: float, sample: Any) -> None:
        clock = self._now() if self._sim_time else None
        self._process(self.input.push(stream, stamp, sample, now=time.monotonic(), clock=clock))

    def _poll_input(self) -> None:
        self._process(self.input.poll(time.monotonic()))

    def _on_joint_state(self, msg: JointState) -> None:
        self._received("encoders")
        if self.odo is None:
            self.node_rejected["no_vehicle_model"] += 1
            return
        s = cv.encoder_sample(msg)
        self._push("encoders", s.stamp, s)

    def _on_imu(self, msg: Imu) -> None:
        self._received("imu")
        if self.odo is None:
            self.node_rejected["no_vehicle_model"] += 1
            return
        s = cv.imu_sample(msg)
        if s.angular_velocity is None:
            self.node_rejected["imu_angular_velocity_not_provided"] += 1
            return
        self._push("imu", s.stamp, s)

    def _process(self, released) -> None:
        """Feed released messages (stamp order) to the odometry; publish after each step."""
        odo = self.odo
        if odo is None:
            return
        for r in released:
            s = r.item
            if r.new_time_base:
                self.get_logger().warning(f"time base moved to stamp {r.stamp:.9f} "
                                          f"(confirmed by {self.input.confirm_count} messages "
                                          f"or /clock)")
            if r.stream == "steer":
                if self.steer is not None:
                    self.steer.add(s.stamp, s.names, s.positions)
                continue
            if r.stream == "imu":
                res = odo.update_imu(s.stamp, s.angular_velocity, s.orientation,
                                     angular_velocity_covariance=s.angular_velocity_covariance,
                                     orientation_covariance=s.orientation_covariance)
            else:
                names, pos, vel = s.names, s.positions, s.velocities
                if self.steer is not None:
                    if self._steer_on_encoders:
                        self.steer.add(s.stamp, names, pos)
                    names, pos, vel = with_steer_angles(names, pos, vel,
                                                        self.steer.at(s.stamp))
                res = odo.update_encoders(s.stamp, names, pos, vel)
                if res.reset:
                    self.get_logger().warning(f"odometry reset: {res.reset}")
                if res.stepped:
                    self._publish_odometry(s.stamp)
            if not res.accepted:
                # throttled here: rclpy's own throttle still inspects the caller's frame on
                # every call, which costs more than the odometry step during a burst
                now = time.monotonic()
                if now - self._last_reject_log >= 5.0:
                    self._last_reject_log = now
                    self.get_logger().warning(f"rejected: {odo.diagnostics.last_rejection} "
                                              f"(one line per 5 s; counts in /diagnostics)")

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
        if self.publish_tf:
            if self.tf is not None:
                self.tf.sendTransform(cv.transform_message(msg))
            elif self.pub_tf is not None:
                self.pub_tf.publish(self._tf_message(cv.transform_message(msg)))

    @staticmethod
    def _tf_message(transform):
        from tf2_msgs.msg import TFMessage

        return TFMessage(transforms=[transform])

    def _publish_diagnostics(self) -> None:
        now = self._now()
        span = max(now - self._window_start, 1e-9)
        self._window_start = now
        rates = {k: self.window[k] / span for k in ("encoders", "imu")}
        self.window.clear()
        st = DiagnosticStatus(name=f"{self.get_fully_qualified_name()}: odometry",
                              hardware_id="wmr_model")
        values = [KeyValue(key=f"{k} rate [Hz]", value=f"{v:.2f}") for k, v in rates.items()]
        if self.steer is not None and not self._steer_on_encoders:
            last = self.last_receive.get("steer")
            values.append(KeyValue(key="steer age [s]", value="never" if last is None
                                   else f"{now - last:.3f}"))
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
        rejected = Counter(self.node_rejected)
        rejected["stray_stamp"] += self.input.stats["stray_stamp"]
        for reason, n in sorted(rejected.items()):
            if n:
                values.append(KeyValue(key=f"rejected {reason}", value=str(n)))
        values += [
            KeyValue(key="time base changes", value=str(self.input.stats["time_base_changes"])),
            KeyValue(key="last stray stamp", value=self.input.last_stray),
            KeyValue(key="reorder window [s]", value=f"{self.input.window:g}"),
            KeyValue(key="reorder held", value=str(self.input.pending)),
            KeyValue(key="reorder max hold [s]", value=f"{self.input.max_hold:.4f}"),
            KeyValue(key="reorder late", value=str(self.input.stats["late"])),
            KeyValue(key="reorder released idle", value=str(self.input.stats["released_idle"])),
            KeyValue(key="reorder stalls", value=str(self.input.stats["stalls"])),
        ]
        if self.input.stats["stray_stamp"]:
            level = max(level, DiagnosticStatus.WARN)
            problems.append(f"{self.input.stats['stray_stamp']} stray stamps dropped")
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
