"""ROS 2 node: online IPEM calibration (thin adapter over
:class:`wmr_model.calibration.stream.StreamCalibrator`, thesis §3.2.4).

Interfaces (relative names; remap as needed)
--------------------------------------------
=========================  ====================================  ===================================
``joint_states``           sensor_msgs/JointState (in)           wheel velocities (or positions,
                                                                 differenced); names through the
                                                                 sidecar's ``encoder_map``
``imu/data``               sensor_msgs/Imu (in)                  angular velocity (buffered); with
                                                                 ``pose_source: navsatfix`` also
                                                                 the attitude of the fixes
``ground_truth/odom``      nav_msgs/Odometry (in)                ``pose_source: odometry``: pose of
                                                                 ``pose_sensor``; its pose
                                                                 covariance is Sigma_meas
``ground_truth/pose``      geometry_msgs/PoseWithCovariance-     ``pose_source: pose``: the same,
                           Stamped (in)                          for sources without a twist
``gps/fix``                sensor_msgs/NavSatFix (in)            ``pose_source: navsatfix``: the
                                                                 antenna position, ENU about
                                                                 ``datum.*`` (or the first fix)
``~/state``                wmr_model/CalibrationState (out)      after every filtered interval
                                                                 (and after ``~/reset``)
``/diagnostics``           diagnostic_msgs/DiagnosticArray       accepted/rejected samples,
                                                                 skipped intervals, resets, pushes
``~/save``                 std_srvs/Trigger                      write the calibration file (values
                                                                 and 1-sigma) to ``save_path``
                                                                 atomically
``~/reset``                std_srvs/Trigger                      back to the initial values and
                                                                 covariance, buffers cleared
``<target>/set_parameters`` rcl_interfaces/SetParameters (call)  accepted, confident estimates
                                                                 pushed to ``push.targets``
=========================  ====================================  ===================================

Which parameters are calibrated: ``params`` (systematic, schema names such as ``slip.p6``,
``wheel.<wheel>.radius``, ``sensor.<sensor>.x``, ``time_offset.pose``) and ``noise`` (entries
``noise.U.<a>_<b>`` of the Cholesky factor of Q'). They start from this node's own ``slip.*`` /
``noise.U.*`` parameters (or the vehicle's dimensions) with standard deviations
``initial_std.<name>`` and random walk ``process_std.<name>`` (declared per calibrated name).

Ground truth: exactly one source, ``pose_source`` (odometry | pose | navsatfix). A NavSatFix
is converted with pymap3d to a local ENU frame (x east, y north, z up) about the first fix (or,
with ``datum.first_fix`` false, about ``datum.latitude/longitude/altitude``); its
``position_covariance`` is used by ``position_covariance_type`` (UNKNOWN:
``navsatfix.unknown_position_std``, 0 = reject); its attitude is the nearest ``imu/data``
orientation (within ``navsatfix.attitude_tolerance``; REP-145 orientation in ENU, turned into
the body's by the model's ``imu`` sensor frame when it has one on the body), or, when the IMU
gives no orientation (``navsatfix.heading`` auto) or always (derived), the heading derived live
from the gyro laid onto the fixes' trailing track
(:class:`~wmr_model.calibration.heading.HeadingTrack`, level assumed). Fixes without a fix
status, a usable covariance or an attitude are rejected and counted (the first fixes of a
derived heading too, until the vehicle has moved enough: ``heading_not_yet_derived``). The
antenna lever arm is ``sensor.<pose_sensor>.x/y/z`` (declared when ``pose_sensor`` is set;
default the description's sensor frame, which is added on the body when the URDF has none),
calibratable
by listing it in ``params``.

Input order: encoder, IMU and pose messages pass the time-base guard and stamp-ordered reorder
window of :class:`wmr_model.estimation.streams.OrderedInput` (``reorder_window``, ``reorder_idle``,
``time_base_confirm``, ``time_jump_threshold``): a lone stray stamp is dropped and counted
(``rejected stray_stamp``), a jump confirmed by ``time_base_confirm`` messages (or ``/clock``
under ``use_sim_time``) is followed, and messages arriving out of order within the window reach
the calibration in stamp order.

Identifiability: once ``identifiability.min_intervals`` intervals were accepted, the posterior
is checked (:func:`~wmr_model.calibration.identifiability.check_identifiability`): parameters
not observed, or confounded with others (a combination of correlated parameters, in prior
units, whose std is still above ``identifiability.max_std_ratio`` of the prior's), are
reported in /diagnostics (WARN) and never pushed; nothing is pushed before the check. Pairs
correlated beyond 0.95 are listed for information.

Starting state: ``calibration_file`` (a file ``~/save`` wrote) sets this node's parameters of
the same names, the vehicle's dimensions, the starting estimate and, through
``initial_std.<name>``, the prior 1-sigma.

Pushing: every ``push.period`` seconds, when an accepted update happened since the last push and
at least ``push.min_intervals`` intervals were accepted, the estimates of ``push.params`` (empty:
every calibrated ``slip.*``, ``noise.U.*`` and ``wheel.*.radius``) whose standard deviation is at
most ``push.max_relative_std`` times |value| (or at most ``push.max_std``) are sent to each
target's ``set_parameters`` service. A target that refuses a name (not declared there) is told
once and not sent that name again.

Intervals: ``interval.*`` (policy, :class:`~wmr_model.calibration.intervals.IntervalPolicy`);
``interval.min_distance`` (default 0.5 m) and ``interval.min_turn`` (default 0.2 rad) are the
informative-motion filter - intervals whose ground-truth path is shorter *and* whose net yaw
change is smaller are skipped (spins in place are kept) - and ``interval.max_speed`` (default
0 = off) skips intervals with a ground-truth jump. Memory: the filter keeps its last
``history_size`` (default 1000) update records; ``~/state`` counts all intervals.

All timing of the calibration comes from message stamps; the node clock paces diagnostics and
pushes only. Run: ``ros2 run wmr_model calibrator_node --ros-args -p vehicle:=warthog``.
"""

from __future__ import annotations

import math
import os
import time
from collections import Counter, deque
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from builtin_interfaces.msg import Time
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import Pose, PoseWithCovarianceStamped
from nav_msgs.msg import Odometry
from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue, SetParametersResult
from rcl_interfaces.srv import SetParameters
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from scipy.stats import chi2
from sensor_msgs.msg import Imu, JointState, NavSatFix, NavSatStatus
from std_srvs.srv import Trigger

from wmr_model.calibration.gnss import (
    body_attitude,
    fix_pose,
    fix_position_covariance,
    geodetic_to_enu,
)
from wmr_model.calibration.identifiability import (
    Identifiability,
    check_identifiability,
)
from wmr_model.calibration.intervals import IntervalPolicy
from wmr_model.calibration.lever_arm import lever_arm, with_lever_arm
from wmr_model.calibration.logs import DEFAULT_POSE_STD
from wmr_model.calibration.online import OnlineCalibrator
from wmr_model.calibration.predictors import ModelPredictor, planar_predictor
from wmr_model.calibration.stream import IntervalOutcome, StreamCalibrator
from wmr_model.calibration.table import initial_std
from wmr_model.errors import ParameterError, WmrError
from wmr_model.estimation.odometry import DEFAULT_QPRIME_U
from wmr_model.estimation.steering import steer_inputs
from wmr_model.estimation.streams import OrderedInput
from wmr_model.io.calibration_file import save_calibration, write_text_atomically
from wmr_model.kinematics.uncertainty import from_ros_pose_covariance
from wmr_model.parameters import get_spec
from wmr_model.ros import conversions as cv
from wmr_model.ros.calibration_file import declare_calibration_file, unused_calibration_names
from wmr_model.ros.conversions import publish_status
from wmr_model.ros.options import CALIBRATOR_NODE
from wmr_model.ros.params import (
    declare,
    declare_model_parameter,
    declare_model_parameters,
    declare_options,
    declare_vehicle_parameters,
    default_reorder_window,
    load_vehicle_from_parameters,
    subscribe_robot_description,
    terrain_from_parameters,
    validate_parameters,
)
from wmr_model.ros.runner import reliable_service, spin_node, steady_timer
from wmr_model.vehicles.model import VehicleModel
from wmr_model.vehicles.parameters import split_parameters, with_parameters

__all__ = ["CalibratorNode", "main", "write_text_atomically"]  # the writer: re-exported

NODE_NAME = "calibrator_node"

#: Families pushed to the other nodes by default (the parameters they declare).
_PUSHABLE = ("slip.", "noise.U.")


def _pushable(name: str) -> bool:
    return name.startswith(_PUSHABLE) or (name.startswith("wheel.") and name.endswith(".radius"))


def _section(values: dict[str, Any], prefix: str) -> dict[str, Any]:
    """The values whose names start with ``prefix``, by the rest of the name."""
    return {n[len(prefix):]: v for n, v in values.items() if n.startswith(prefix)}


def _double(name: str, value: float) -> Parameter:
    return Parameter(name=name, value=ParameterValue(type=ParameterType.PARAMETER_DOUBLE,
                                                     double_value=float(value)))


class CalibratorNode(Node):
    """The calibrator node; see the module docstring for topics, services and parameters."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(NODE_NAME, **kwargs)
        self.calibration = declare_calibration_file(self, prior_std=True)
        self.vehicle_params = declare_vehicle_parameters(self)
        opts = declare_options(self, CALIBRATOR_NODE,
                               {"reorder_window": default_reorder_window(self)})
        self.params = [n for n in opts["params"] if n]
        self.noise = [n for n in opts["noise"] if n]
        self.fidelity: str = opts["fidelity"]
        self.dt: float = opts["dt"]
        self.pose_sensor: str = opts["pose_sensor"]
        self.pose_source: str = opts["pose_source"]
        self.steer_topic: str = opts["steer_topic"]
        self.base_frame: str = opts["base_frame"]
        self.components: Sequence[str] = opts["components"]
        self.reference_check: bool = opts["reference_check"]
        self.reference_settle = float(opts["reference_settle"])
        self.outlier_probability: float = opts["outlier_probability"]
        self.qprime_bound: float = opts["qprime_bound"]
        self.qprime_bound_intervals: int = opts["qprime_bound_intervals"]
        self.history_size: int = opts["history_size"]
        self.iterations: int = opts["iterations"]
        self.reorder_window: float = opts["reorder_window"]
        self.reorder_idle: float = opts["reorder_idle"]
        self.time_base_confirm: int = opts["time_base_confirm"]
        self.save_path: str = opts["save_path"]
        self.datum_first_fix = opts["datum.first_fix"]
        self.datum = [opts[f"datum.{k}"] for k in ("latitude", "longitude", "altitude")]
        self.unknown_fix_std = opts["navsatfix.unknown_position_std"]
        self.heading_tolerance = opts["navsatfix.attitude_tolerance"]
        self.fix_heading: str = opts["navsatfix.heading"]
        self.identifiability = _section(opts, "identifiability.")
        self.interval = _section(opts, "interval.")
        self.stream_params = {k: opts[k] for k in ("margin", "max_wait", "max_encoder_gap",
                                                   "time_jump_threshold", "max_history")}
        self.push = _section(opts, "push.")
        period, reliability, depth = (opts["diagnostics_period"], opts["sensor_qos"],
                                      opts["queue_size"])
        self.model_values = declare_model_parameters(self, DEFAULT_QPRIME_U)

        self.input = OrderedInput(
            ("imu", "encoders", "pose"), window=float(self.reorder_window),
            jump_threshold=float(self.stream_params["time_jump_threshold"]),
            confirm_count=int(self.time_base_confirm), idle=float(self.reorder_idle))
        self.model: VehicleModel | None = None
        self.stream: StreamCalibrator | None = None
        self.model_error = ""
        self.node_rejected: Counter = Counter()
        self.push_stats: Counter = Counter()
        self.push_refused: dict[str, set[str]] = {}
        self.last_push: dict[str, float] = {}
        self._push_due = False
        self._push_clients: dict[str, Any] = {}

        from wmr_model.msg import CalibrationState

        self.pub_state = self.create_publisher(CalibrationState, "~/state", 100)
        self.pub_diag = self.create_publisher(DiagnosticArray, "/diagnostics", 10)
        qos = QoSProfile(depth=int(depth), reliability=(
            ReliabilityPolicy.BEST_EFFORT if reliability == "best_effort"
            else ReliabilityPolicy.RELIABLE))
        self._qos = qos
        self._steer_sub: Any = None
        self._steer_on_encoders = True
        self.create_subscription(JointState, "joint_states", self._on_joint_state, qos)
        self.create_subscription(Imu, "imu/data", self._on_imu, qos)
        # one pose source only (mixing two would feed the filter two time-skewed truths)
        self._attitudes: deque = deque(maxlen=1000)  # (stamp, [w,x,y,z], (3,3) cov) of the IMU
        self._R_body_imu = np.eye(3)  # the IMU's mounting rotation (set with the vehicle)
        self._datum: list[float] | None = (None if self.datum_first_fix
                                           else [float(v) for v in self.datum])
        if self.pose_source == "odometry":
            self.create_subscription(Odometry, "ground_truth/odom", self._on_odometry, qos)
        elif self.pose_source == "pose":
            self.create_subscription(PoseWithCovarianceStamped, "ground_truth/pose",
                                     self._on_pose, qos)
        else:
            self.create_subscription(NavSatFix, "gps/fix", self._on_fix, qos)
        self._rd_sub = None
        self._try_load(None)
        if self.model is None and not self.model_error:
            self.get_logger().info("waiting for the vehicle on the robot_description topic")
            self._rd_sub = subscribe_robot_description(self, self._on_robot_description)
        self.add_on_set_parameters_callback(self._on_set_parameters)
        validate_parameters(self)  # after: an invalid set never reaches _on_set_parameters
        reliable_service(self, Trigger, "~/save", self._on_save)
        reliable_service(self, Trigger, "~/reset", self._on_reset)
        steady_timer(self, float(period), self._publish_diagnostics)
        steady_timer(self, float(self.push["period"]), self._push_tick)
        steady_timer(self, 0.05, self._poll_input)
        unused = unused_calibration_names(self, self.calibration)
        if unused:
            self.get_logger().info(f"calibration_file: not parameters of this node: {unused}")

    # ---- setup --------------------------------------------------------------------------------
    def _try_load(self, xml: str | None) -> None:
        try:
            model = load_vehicle_from_parameters(self.vehicle_params, xml)
            if model is None:
                return
            model = self._prepare_model(model)
            self.model = model
            self.stream = self._make_stream(model)
        except (WmrError, ValueError, OSError) as exc:
            self.model_error = str(exc)
            self.stream = None
            self.get_logger().error(f"cannot set up the calibration: {exc}")
            return
        self.model_error = ""
        cal = self.stream.calibrator
        self.get_logger().info(
            f"calibrating {model.name}: {cal.names}, intervals {self.stream.policy}, "
            f"joints {list(self.stream.joint_names)}")

    def _prepare_model(self, model: VehicleModel) -> VehicleModel:
        """The loaded vehicle with the calibration file's dimensions and the pose sensor's
        lever arm (``sensor.<pose_sensor>.x/y/z``; the sensor frame is added on the body
        when the description has none)."""
        cal = self.calibration
        ps = self.pose_sensor
        if cal is not None:
            if cal.vehicle and cal.vehicle != model.name:
                raise ParameterError(f"calibration_file {cal.path}: calibrated for "
                                     f"{cal.vehicle!r}, not for {model.name!r}")
            dims, _ = split_parameters(cal.values)
            use = {k: v for k, v in dims.items() if not (
                k.startswith("sensor.") and (k.split(".")[1] == ps
                                             or k.split(".")[1] not in model.sensor_frame))}
            model = with_parameters(model, use)
        # the IMU's mounting rotation (its attitude is the fixes' attitude): the model's "imu"
        # sensor frame when it hangs on the body, else aligned
        imu = model.sensor_frame.get("imu")
        self._R_body_imu = (np.array(imu[1][:3, :3]) if imu is not None and imu[0] == 0
                            else np.eye(3))
        if ps:
            cur = lever_arm(model, ps)
            xyz = []
            for c, v0 in zip("xyz", [0.0] * 3 if cur is None else cur):
                xyz.append(declare_model_parameter(
                    self, f"sensor.{ps}.{c}", float(v0), read_only=True, note=(
                        f"; here the pose sensor {ps!r} (lever arm, e.g. the GPS antenna) on "
                        "the body; default: the vehicle description's (0 when it has no such "
                        "sensor)")))
            model = with_lever_arm(model, ps, xyz)
        return model

    def _declare_per_name(self, prefix: str, names: list[str], default, what: str) -> dict:
        out = {}
        for n in names:
            key = f"{prefix}.{n}"
            if self.has_parameter(key):
                out[n] = float(self.get_parameter(key).value)
            else:
                out[n] = float(declare(self, key, float(default(n)), what.format(
                    unit=get_spec(n).unit), lower=0.0, upper=1e6, read_only=True))
        return out

    def _make_stream(self, model: VehicleModel) -> StreamCalibrator:
        names = self.params + self.noise
        for n in names:
            get_spec(n)  # ParameterError naming an unknown parameter
        bad = [n for n in self.noise if not n.startswith("noise.U.")]
        if bad:
            raise ParameterError(f"noise: {bad} are not noise.U.* entries")
        std0 = self._declare_per_name(
            "initial_std", names, lambda n: initial_std([n])[n],
            "[{unit}] prior standard deviation of this calibrated parameter")
        process = self._declare_per_name(
            "process_std", names, lambda n: 0.0,
            "[{unit}] random walk per interval (3.49): lets the estimate follow slow changes")
        self._std0, self._process_std = std0, process
        values = self.model_values
        base = {n: v for n, v in values.items() if n.startswith("slip.") and n not in names}
        predictor = ModelPredictor(model, terrain_from_parameters(self.vehicle_params),
                                   fidelity=self.fidelity, dt=float(self.dt),
                                   base=base)
        x0 = {n: values[n] for n in names if n in values}
        fixed = {n: v for n, v in values.items() if n.startswith("noise.U.") and n not in names}
        m = len(self.components)
        p = float(self.outlier_probability)
        threshold = math.inf if p >= 1.0 else float(chi2.ppf(p, m))
        bound = ({n: float(self.qprime_bound) for n in self.noise}
                 if self.qprime_bound > 0 else None)

        def make() -> OnlineCalibrator:
            return OnlineCalibrator(predictor, names, x0=x0, std0=std0, process_std=process,
                                    fixed_noise=fixed, components=tuple(self.components),
                                    outlier_threshold=threshold, qprime_bound=bound,
                                    qprime_bound_intervals=int(self.qprime_bound_intervals),
                                    stochastic=bool(self.noise),
                                    iterations=int(self.iterations),
                                    max_history=int(self.history_size))

        iv = self.interval
        policy = IntervalPolicy.from_options({f"interval.{k}": v for k, v in iv.items()})
        steering = steer_inputs(model)
        self._steering_topic(model, steering)
        joints = [model.joint_names[int(k)] for k in model.actuated_joints
                  if model.joint_names[int(k)] not in steering]
        reference = None
        if self.reference_check:
            try:
                from wmr_model.calibration.reference import ReferencePolicy

                dd = planar_predictor(model)
                sides = set(getattr(dd, "left", ())) | set(getattr(dd, "right", ()))
                if not sides <= set(joints):
                    raise ValueError(f"wheels {sorted(sides)} are not all actuated joints "
                                     f"{joints}")
                reference = (dd, ReferencePolicy(settle=self.reference_settle))
            except (WmrError, ValueError, IndexError) as exc:
                self.get_logger().warning(f"reference_check: not available for {model.name} "
                                          f"({exc}); intervals are not checked")
        return StreamCalibrator(make, joints, policy,
                                encoder_map=dict(model.options.get("encoder_map", {}) or {}),
                                pose_sensor=self.pose_sensor or None,
                                source=f"{self.get_fully_qualified_name()} ({model.name})",
                                reference=reference, steering=steering,
                                heading=((planar_predictor(model), self._R_body_imu)
                                         if self.pose_source == "navsatfix"
                                         and self.fix_heading != "imu" else None),
                                **{k: float(v) for k, v in self.stream_params.items()})

    def _steering_topic(self, model: VehicleModel, steering: dict) -> None:
        """Subscribe the steering-angle topic of a steered vehicle (``steer_topic``, else the
        sidecar's) unless the angles come on joint_states (once per node)."""
        from wmr_model.io.bags import sidecar_steer_topic

        self._steer_on_encoders = True
        if not steering:
            return
        topic = self.steer_topic or sidecar_steer_topic(model) or ""
        self._steer_on_encoders = not topic or topic.lstrip("/") == "joint_states"
        if not self._steer_on_encoders and not self._steer_sub:
            self._steer_sub = self.create_subscription(JointState, topic, self._on_steer,
                                                       self._qos)
        kinds = ", ".join(f"{j} {si.source}" for j, si in steering.items())
        self.get_logger().info(f"steering angles ({kinds}) from "
                               f"{'joint_states' if self._steer_on_encoders else topic}")

    def _on_steer(self, msg: JointState) -> None:
        """Steering angles: buffered at once (they only feed the intervals' logs)."""
        if self.stream is not None:
            self.stream.add_steer(cv.stamp_to_seconds(msg.header.stamp), list(msg.name),
                                  np.asarray(msg.position, dtype=float))

    def _on_robot_description(self, xml: str) -> None:
        if self.stream is not None:
            return
        self._try_load(xml)
        if self.stream is not None and self._rd_sub is not None:
            self.destroy_subscription(self._rd_sub)
            self._rd_sub = None

    def _on_set_parameters(self, params) -> SetParametersResult:
        for p in params:
            if p.name.startswith("push."):
                self.push[p.name[len("push."):]] = p.value
            elif p.name.startswith("identifiability."):
                self.identifiability[p.name[len("identifiability."):]] = p.value
            elif p.name == "reorder_window":
                self._process(self.input.set_window(float(p.value)))
            elif p.name == "reorder_idle":
                self.input.idle = float(p.value)
            elif p.name == "time_base_confirm":
                self.input.confirm_count = int(p.value)
            elif p.name == "base_frame":
                self.base_frame = p.value
            elif p.name == "save_path":
                self.save_path = p.value
        return SetParametersResult(successful=True)

    # ---- inputs -------------------------------------------------------------------------------
    def _guard(self, stream: str, fn, *args) -> list[IntervalOutcome]:
        """``fn(calibration, *args)`` of a released message; a failure is counted and logged."""
        if self.stream is None:
            self.node_rejected["no_calibration_set_up"] += 1
            return []
        try:
            return fn(self.stream, *args) or []
        except Exception as exc:  # a bad message never stops the node
            self.node_rejected[f"{stream}_conversion_error"] += 1
            self.get_logger().error(f"{stream}: {type(exc).__name__}: {exc}",
                                    throttle_duration_sec=5.0)
            return []

    def _push(self, stream: str, what: str, stamp, fn, *args) -> None:
        """Into the time-base guard and reorder window; ``fn(calibration, *args)`` runs when
        released (with the calibration set up then)."""
        if self.stream is None:
            self.node_rejected["no_calibration_set_up"] += 1
            return
        clock = (self.get_clock().now().nanoseconds * 1e-9
                 if self.get_parameter("use_sim_time").value else None)
        self._process(self.input.push(stream, cv.stamp_to_seconds(stamp), (what, fn, args),
                                      now=time.monotonic(), clock=clock))

    def _poll_input(self) -> None:
        self._process(self.input.poll(time.monotonic()))

    def _process(self, released) -> None:
        """Run released messages (stamp order) through the calibration."""
        for r in released:
            if r.new_time_base:
                self.get_logger().warning(f"time base moved to stamp {r.stamp:.9f} (confirmed "
                                          f"by {self.input.confirm_count} messages or /clock)")
            what, fn, args = r.item
            self._handle(self._guard(what, fn, *args))

    def _on_joint_state(self, msg: JointState) -> None:
        def add(stream: StreamCalibrator) -> list[IntervalOutcome]:
            s = cv.encoder_sample(msg)
            if stream.steer_names and self._steer_on_encoders and len(s.positions):
                stream.add_steer(s.stamp, s.names, s.positions)
            return stream.add_encoders(s.stamp, s.names, s.positions, s.velocities)

        self._push("encoders", "encoders", msg.header.stamp, add)

    def _on_imu(self, msg: Imu) -> None:
        def add(stream: StreamCalibrator, stamp: float,
                angular_velocity: np.ndarray) -> list[IntervalOutcome]:
            stream.add_imu(stamp, angular_velocity)
            return []

        try:
            s = cv.imu_sample(msg)
        except Exception as exc:  # a bad message never stops the node
            self.node_rejected["imu_conversion_error"] += 1
            self.get_logger().error(f"imu: {type(exc).__name__}: {exc}",
                                    throttle_duration_sec=5.0)
            return
        if self.pose_source == "navsatfix" and s.orientation is not None:
            # attitudes wait here for their fixes (nearest stamp), not in the reorder window
            self._attitudes.append((s.stamp, s.orientation, s.orientation_covariance))
        if s.angular_velocity is None:
            if self.pose_source != "navsatfix" or s.orientation is None:
                self.node_rejected["imu_angular_velocity_not_provided"] += 1
            return
        self._push("imu", "imu", msg.header.stamp, add, s.stamp, s.angular_velocity)

    def _pose_input(self, stream: StreamCalibrator, stamp: Time, pose: Pose,
                    covariance: Sequence[float]) -> list[IntervalOutcome]:
        position, orientation = cv.pose_to_arrays(pose)
        c = cv.covariance_or_none(covariance, 6)
        cov = None if c is None else from_ros_pose_covariance(c.reshape(36))
        return stream.add_pose(cv.stamp_to_seconds(stamp),
                                    np.concatenate([orientation, position]), cov)

    def _on_odometry(self, msg: Odometry) -> None:
        self._push("pose", "ground_truth", msg.header.stamp, self._pose_input, msg.header.stamp,
                   msg.pose.pose, msg.pose.covariance)

    def _fix_input(self, stream: StreamCalibrator, msg: NavSatFix) -> list[IntervalOutcome]:
        stamp = cv.stamp_to_seconds(msg.header.stamp)
        if msg.status.status < NavSatStatus.STATUS_FIX:
            self.node_rejected["gps/fix no_fix"] += 1
            return []
        cov_p = fix_position_covariance(msg.position_covariance,
                                        msg.position_covariance_type,
                                        float(self.unknown_fix_std))
        if cov_p is None:
            self.node_rejected[f"gps/fix covariance_type_{msg.position_covariance_type}"
                               "_unusable"] += 1
            self.get_logger().warning(
                f"gps/fix: position_covariance (type {msg.position_covariance_type}) is not a "
                "usable covariance; set navsatfix.unknown_position_std to accept UNKNOWN",
                throttle_duration_sec=5.0)
            return []
        if self._datum is None:
            self._datum = [msg.latitude, msg.longitude, msg.altitude]
            self.get_logger().info(f"navsatfix datum (first fix): {self._datum}")
        enu = geodetic_to_enu(msg.latitude, msg.longitude, msg.altitude, self._datum)
        if self.fix_heading == "derived" or (self.fix_heading == "auto" and not self._attitudes):
            return self._derived_fix(stream, stamp, enu, cov_p)
        if not self._attitudes:
            self.node_rejected["gps/fix no_attitude"] += 1
            return []
        t_att, q, cov_q = min(self._attitudes, key=lambda a: abs(a[0] - stamp))
        if abs(t_att - stamp) > float(self.heading_tolerance):
            self.node_rejected["gps/fix no_attitude"] += 1
            self.get_logger().warning(
                f"gps/fix at {stamp:.3f} s: nearest imu/data orientation is "
                f"{t_att - stamp:+.3f} s away (navsatfix.attitude_tolerance "
                f"{self.heading_tolerance} s)", throttle_duration_sec=5.0)
            return []
        if cov_q is None:
            a = DEFAULT_POSE_STD[0]
            cov_q = np.eye(3) * a * a
        pose, cov = fix_pose(enu, cov_p, body_attitude(q, self._R_body_imu), cov_q)
        return stream.add_pose(stamp, pose, cov)

    def _derived_fix(self, stream: StreamCalibrator, stamp: float, enu: np.ndarray,
                     cov_p: np.ndarray) -> list[IntervalOutcome]:
        """A fix without an INS attitude: its heading derived from the gyro and the fixes'
        track (:meth:`StreamCalibrator.fix_heading`), level assumed; counted and dropped
        until a trailing window has moved enough."""
        from wmr_model.calibration.heading import LEVEL_STD

        sigma = float(np.sqrt(max(0.5 * (cov_p[0, 0] + cov_p[1, 1]), 0.0)))
        h = stream.fix_heading(stamp, enu, sigma)
        if h is None:
            self.node_rejected["gps/fix heading_not_yet_derived"] += 1
            return []
        yaw, std = h
        q = np.array([math.cos(0.5 * yaw), 0.0, 0.0, math.sin(0.5 * yaw)])
        cov_q = np.diag([LEVEL_STD ** 2, LEVEL_STD ** 2, std * std])
        pose, cov = fix_pose(enu, cov_p, q, cov_q)
        return stream.add_pose(stamp, pose, cov)

    def _on_fix(self, msg: NavSatFix) -> None:
        self._push("pose", "gps/fix", msg.header.stamp, self._fix_input, msg)

    def _on_pose(self, msg: PoseWithCovarianceStamped) -> None:
        self._push("pose", "ground_truth", msg.header.stamp, self._pose_input, msg.header.stamp,
                   msg.pose.pose, msg.pose.covariance)

    def _handle(self, outcomes: list[IntervalOutcome]) -> None:
        for o in outcomes:
            if o.record is None:
                self.get_logger().warning(f"interval {o.t0:.3f}-{o.t1:.3f} s skipped: "
                                          f"{o.skipped}", throttle_duration_sec=5.0)
                continue
            if o.record.accepted:
                self._push_due = True
            else:
                self.get_logger().warning(
                    f"interval {o.t0:.3f}-{o.t1:.3f} s rejected as an outlier: D_M = "
                    f"{o.record.mahalanobis:.1f}", throttle_duration_sec=5.0)
            self._publish_state(o)

    # ---- outputs ------------------------------------------------------------------------------
    def _publish_state(self, outcome: IntervalOutcome | None) -> None:
        from wmr_model.msg import CalibrationState

        assert self.stream is not None
        cal = self.stream.calibrator
        msg = CalibrationState()
        msg.header.frame_id = self.base_frame
        if outcome is not None:
            msg.header.stamp = cv.seconds_to_stamp(max(outcome.t1, 0.0))
        else:
            msg.header.stamp = self.get_clock().now().to_msg()
        sys_pos = [cal.names.index(n) for n in cal.sys_names]
        noi_pos = [cal.names.index(n) for n in cal.noise_names]
        msg.parameter_names = list(cal.sys_names)
        msg.values = cal.x[sys_pos].tolist()
        msg.covariance = cal.P[np.ix_(sys_pos, sys_pos)].ravel().tolist()
        msg.stochastic_names = list(cal.noise_names)
        msg.stochastic_values = cal.x[noi_pos].tolist()
        rec = cal.history[-1] if cal.history else None
        msg.last_innovation = [] if rec is None else np.asarray(rec.r, dtype=float).tolist()
        msg.last_nis = 0.0 if rec is None else float(rec.mahalanobis)
        msg.last_accepted = False if rec is None else bool(rec.accepted)
        msg.interval_count = int(cal.n_updates)
        msg.rejected_count = int(cal.n_rejected)
        self.pub_state.publish(msg)

    def _target_service(self, target: str) -> str:
        if target.startswith("/"):
            return f"{target.rstrip('/')}/set_parameters"
        ns = self.get_namespace().rstrip("/")
        return f"{ns}/{target}/set_parameters"

    def _push_tick(self) -> None:
        if not (self._push_due and self.push["enabled"] and self.stream is not None):
            return
        cal = self.stream.calibrator
        if cal.n_accepted < int(self.push["min_intervals"]):
            return
        ident = self._identifiability(self.stream)
        if not ident.checked:  # nothing is pushed unverified
            return
        wanted = [n for n in self.push["params"] if n] or [n for n in cal.names if _pushable(n)]
        est, std = cal.estimate, cal.std
        send = {}
        for n in wanted:
            if n not in est:
                continue
            if n in ident.confounded:
                self.push_stats["not_identifiable"] += 1
                self.get_logger().warning(f"{n} not pushed: {ident.confounded[n]}",
                                          throttle_duration_sec=30.0)
                continue
            v, s = est[n], std[n]
            if s <= float(self.push["max_relative_std"]) * abs(v) or s <= float(
                    self.push["max_std"]):
                send[n] = v
            else:
                self.push_stats["not_confident"] += 1
        self._push_due = False
        if not send:
            return
        for target in self.push["targets"]:
            if not target:
                continue
            srv = self._target_service(target)
            client = self._push_clients.get(srv)
            if client is None:
                client = self._push_clients[srv] = self.create_client(SetParameters, srv)
            if not client.service_is_ready():
                self.push_stats[f"{srv} unavailable"] += 1
                self._push_due = True  # retry next period
                continue
            names = [n for n in send if n not in self.push_refused.get(srv, set())]
            if not names:
                continue
            req = SetParameters.Request(parameters=[_double(n, send[n]) for n in names])
            fut = client.call_async(req)
            fut.add_done_callback(lambda f, srv=srv, names=names: self._pushed(srv, names, f))

    def _identifiability(self, stream: StreamCalibrator) -> Identifiability:
        """The identifiability check of the current estimate of ``stream`` (``checked`` False
        before ``identifiability.min_intervals`` accepted intervals)."""
        cal = stream.calibrator
        k = int(self.identifiability["min_intervals"])
        # the prior a parameter would have without data: initial std plus the random walk
        prior = {n: math.sqrt(self._std0.get(n, 1.0) ** 2
                              + cal.n_updates * self._process_std.get(n, 0.0) ** 2)
                 for n in cal.names}
        return check_identifiability(
            cal.names, cal.P, prior, cal.n_accepted,
            max_std_ratio=float(self.identifiability["max_std_ratio"]), min_intervals=k)

    def _pushed(self, srv: str, names: list[str], fut) -> None:
        try:
            results = fut.result().results
        except Exception as exc:
            self.push_stats[f"{srv} failed"] += 1
            self.get_logger().warning(f"push to {srv} failed: {exc}")
            return
        ok = []
        for n, r in zip(names, results):
            if r.successful:
                ok.append(n)
            else:
                self.push_refused.setdefault(srv, set()).add(n)
                self.get_logger().warning(f"{srv} refused {n}: {r.reason}; not sent again")
        self.push_stats[f"{srv} pushes"] += 1
        self.last_push[srv] = self.get_clock().now().nanoseconds * 1e-9
        if ok:
            self.get_logger().info(f"pushed {ok} to {srv}")

    def _default_save_path(self) -> Path:
        home = Path(os.environ.get("ROS_HOME", "~/.ros")).expanduser()
        name = self.model.name if self.model is not None else "vehicle"
        return home / "wmr_model" / f"{name}.calibration.yaml"

    def _on_save(self, req, resp):
        if self.stream is None or self.model is None:
            resp.success = False
            resp.message = "nothing to save: no calibration set up" + (
                f" ({self.model_error})" if self.model_error else "")
            return resp
        cal = self.stream.calibrator
        path = Path(self.save_path).expanduser() if self.save_path else self._default_save_path()
        try:
            if not self.save_path:  # $ROS_HOME/wmr_model may not exist yet
                path.parent.mkdir(parents=True, exist_ok=True)
            save_calibration(path, self.model.name, cal.estimate, cal.std, note=(
                f"online IPEM ({self.get_fully_qualified_name()}), {cal.n_updates} intervals,"
                f" {cal.n_accepted} accepted"))
        except (OSError, WmrError, ValueError) as exc:
            resp.success = False
            resp.message = f"{path}: {type(exc).__name__}: {exc}"
            self.get_logger().error(f"save failed: {resp.message}")
            return resp
        resp.success = True
        resp.message = str(path)
        self.get_logger().info(f"calibration saved to {path}")
        return resp

    def _on_reset(self, req, resp):
        if self.stream is None:
            resp.success = False
            resp.message = "nothing to reset: no calibration set up"
            return resp
        self.stream.reset("~/reset called")
        self._push_due = False
        self._publish_state(None)
        resp.success = True
        resp.message = "estimate back to its initial values and covariance; buffers cleared"
        self.get_logger().info(f"calibration reset: {resp.message}")
        return resp

    def _publish_diagnostics(self) -> None:
        st = DiagnosticStatus(name=f"{self.get_fully_qualified_name()}: calibration",
                              hardware_id="wmr_model")
        values: list[KeyValue] = []
        level, problems = DiagnosticStatus.OK, []
        for reason, n in sorted(self.node_rejected.items()):
            values.append(KeyValue(key=f"rejected {reason}", value=str(n)))
        stray = int(self.input.stats["stray_stamp"])
        values += [
            KeyValue(key="rejected stray_stamp", value=str(stray)),
            KeyValue(key="last stray stamp", value=self.input.last_stray),
            KeyValue(key="time base changes", value=str(self.input.stats["time_base_changes"])),
            KeyValue(key="reorder window [s]", value=f"{self.input.window:g}"),
            KeyValue(key="reorder held", value=str(self.input.pending)),
            KeyValue(key="reorder max hold [s]", value=f"{self.input.max_hold:.4f}"),
        ]
        if stray:
            level = max(level, DiagnosticStatus.WARN)
            problems.append(f"{stray} stray stamps rejected")
        if self.stream is None:
            level = DiagnosticStatus.ERROR
            problems.append("no calibration" + (f": {self.model_error}" if self.model_error
                                                else " yet (no vehicle)"))
        else:
            d = self.stream.diagnostics
            cal = self.stream.calibrator
            for k in ("encoders", "imu", "pose"):
                values.append(KeyValue(key=f"accepted {k}", value=str(d.accepted[k])))
            for reason, n in sorted(d.rejected.items()):
                values.append(KeyValue(key=f"rejected {reason}", value=str(n)))
            for reason, n in sorted(d.skipped.items()):
                values.append(KeyValue(key=f"skipped intervals {reason}", value=str(n)))
            values += [
                KeyValue(key="intervals", value=str(d.intervals)),
                KeyValue(key="outliers", value=str(d.outliers)),
                KeyValue(key="default pose covariances", value=str(d.default_covariances)),
                KeyValue(key="resets", value=str(d.resets)),
                KeyValue(key="last reset reason", value=d.last_reset_reason),
                KeyValue(key="last rejection", value=d.last_rejection),
            ]
            values += [KeyValue(key=f"estimate {n}", value=f"{v:.6g} +- {cal.std[n]:.3g}")
                       for n, v in cal.estimate.items()]
            ident = self._identifiability(self.stream)
            values += [KeyValue(key=f"correlated {a} {b}", value=f"{rho:+.3f}")
                       for a, b, rho in ident.pairs]
            if not ident.checked:
                values.append(KeyValue(key="identifiability", value=(
                    f"pending ({cal.n_accepted} of {self.identifiability['min_intervals']} "
                    "accepted intervals)")))
            else:
                values.append(KeyValue(key="identifiability", value=(
                    "ok" if ident.ok else "confounded: " + ",".join(ident.confounded))))
                values += [KeyValue(key=f"not identifiable {n}", value=why)
                           for n, why in ident.confounded.items()]
                if not ident.ok:
                    level = max(level, DiagnosticStatus.WARN)
                    problems.append(f"not identifiable (not pushed): "
                                    f"{', '.join(ident.confounded)}")
            if d.rejected_total or self.node_rejected:
                level = max(level, DiagnosticStatus.WARN)
                problems.append(f"{d.rejected_total + sum(self.node_rejected.values())} "
                                "messages rejected")
            if d.skipped:
                level = max(level, DiagnosticStatus.WARN)
                problems.append(f"{sum(d.skipped.values())} intervals skipped")
        for k, n in sorted(self.push_stats.items()):
            values.append(KeyValue(key=f"push {k}", value=str(n)))
        for srv, names in sorted(self.push_refused.items()):
            values.append(KeyValue(key=f"push {srv} refused", value=",".join(sorted(names))))
        publish_status(self, self.pub_diag, st, level, problems, values)


def main(args: list[str] | None = None) -> int:
    """Entry point of ``ros2 run wmr_model calibrator_node``."""
    return spin_node(CalibratorNode, args)
