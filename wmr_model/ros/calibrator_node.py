"""ROS 2 node: online IPEM calibration (thin adapter over
:class:`wmr_model.calibration.stream.StreamCalibrator`, thesis §3.2.4).

Interfaces (relative names; remap as needed)
--------------------------------------------
=========================  ====================================  ===================================
``joint_states``           sensor_msgs/JointState (in)           wheel velocities (or positions,
                                                                 differenced); names through the
                                                                 sidecar's ``encoder_map``
``imu/data``               sensor_msgs/Imu (in)                  angular velocity (buffered)
``ground_truth/odom``      nav_msgs/Odometry (in)                GPS/INS pose of ``pose_sensor``;
                                                                 its pose covariance is Sigma_meas
``ground_truth/pose``      geometry_msgs/PoseWithCovariance-     the same, for sources without a
                           Stamped (in)                          twist
``~/state``                wmr_model/CalibrationState (out)      after every filtered interval
                                                                 (and after ``~/reset``)
``/diagnostics``           diagnostic_msgs/DiagnosticArray       accepted/rejected samples,
                                                                 skipped intervals, resets, pushes
``~/save``                 std_srvs/Trigger                      write the calibrated overlay YAML
                                                                 to ``save_path`` atomically
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

Pushing: every ``push.period`` seconds, when an accepted update happened since the last push and
at least ``push.min_intervals`` intervals were accepted, the estimates of ``push.params`` (empty:
every calibrated ``slip.*``, ``noise.U.*`` and ``wheel.*.radius``) whose standard deviation is at
most ``push.max_relative_std`` times |value| (or at most ``push.max_std``) are sent to each
target's ``set_parameters`` service. A target that refuses a name (not declared there) is told
once and not sent that name again.

Intervals: ``interval.*`` (policy, :class:`~wmr_model.calibration.intervals.IntervalPolicy`);
``interval.min_distance`` (default 0.5 m) is the moving filter - intervals whose ground-truth
path is shorter are skipped - and ``interval.max_speed`` (default 0 = off) skips intervals with
a ground-truth jump. Memory: the filter keeps its last ``history_size`` (default 1000) update
records; ``~/state`` counts all intervals.

All timing of the calibration comes from message stamps; the node clock paces diagnostics and
pushes only. Run: ``ros2 run wmr_model calibrator_node --ros-args -p vehicle:=warthog``.
"""

from __future__ import annotations

import contextlib
import math
import os
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import PoseWithCovarianceStamped
from nav_msgs.msg import Odometry
from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue, SetParametersResult
from rcl_interfaces.srv import SetParameters
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from scipy.stats import chi2
from sensor_msgs.msg import Imu, JointState
from std_srvs.srv import Trigger

from wmr_model.calibration.intervals import MOVING_MIN_DISTANCE, IntervalPolicy
from wmr_model.calibration.online import DEFAULT_OUTLIER_PROBABILITY, OnlineCalibrator
from wmr_model.calibration.overlay import overlay_yaml
from wmr_model.calibration.predictors import ModelPredictor
from wmr_model.calibration.stream import IntervalOutcome, StreamCalibrator
from wmr_model.calibration.table import initial_std
from wmr_model.errors import ParameterError, WmrError
from wmr_model.model import VehicleModel
from wmr_model.odometry import DEFAULT_QPRIME_U
from wmr_model.parameters import get_spec
from wmr_model.ros import conversions as cv
from wmr_model.ros.conversions import publish_status
from wmr_model.ros.params import (
    declare,
    declare_model_parameters,
    declare_vehicle_parameters,
    load_vehicle_from_parameters,
    subscribe_robot_description,
    terrain_from_parameters,
)
from wmr_model.ros.runner import spin_node
from wmr_model.uncertainty import from_ros_pose_covariance

__all__ = ["CalibratorNode", "main", "write_text_atomically"]

NODE_NAME = "calibrator_node"

#: Families pushed to the other nodes by default (the parameters they declare).
_PUSHABLE = ("slip.", "noise.U.")


def _pushable(name: str) -> bool:
    return name.startswith(_PUSHABLE) or (name.startswith("wheel.") and name.endswith(".radius"))


def write_text_atomically(path: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` to ``path`` through a temporary file in the same directory and an atomic
    rename, so readers see the old file or the new one, never a half-written one."""
    path = Path(path).expanduser()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):  # make the rename itself durable
        dfd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    return path


def _double(name: str, value: float) -> Parameter:
    return Parameter(name=name, value=ParameterValue(type=ParameterType.PARAMETER_DOUBLE,
                                                     double_value=float(value)))


class CalibratorNode(Node):
    """The calibrator node; see the module docstring for topics, services and parameters."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(NODE_NAME, **kwargs)
        self.vehicle_params = declare_vehicle_parameters(self)
        self.params = [n for n in declare(
            self, "params", ["slip.p2", "slip.p3", "slip.p4", "slip.p5", "slip.p6"],
            "systematic parameters to calibrate (schema names); [''] for none",
            read_only=True) if n]
        self.noise = [n for n in declare(
            self, "noise", ["noise.U.wz_wz", "noise.U.vx_vx", "noise.U.vy_vy"],
            "Q' Cholesky entries to calibrate; [''] for none (Q' then stays at this node's "
            "noise.U.* values)", read_only=True) if n]
        self.fidelity = declare(self, "fidelity", "enhanced", "interval prediction model: "
                                "enhanced (slip.p*, §2.3) or kinematic (no slip parameters)",
                                read_only=True, choices=("kinematic", "enhanced"))
        self.dt = declare(self, "dt", 0.05, "[s] prediction step of each interval (whole steps "
                          "of about this size)", lower=1e-4, upper=1.0, read_only=True)
        self.pose_sensor = declare(self, "pose_sensor", "", "sensor frame of the vehicle the "
                                   "ground-truth poses are of; '' = the body (base) frame",
                                   read_only=True)
        self.base_frame = declare(self, "base_frame", "base_link", "frame_id of the published "
                                  "CalibrationState (the frame the parameters refer to)")
        self.components = declare(self, "components", ["x", "y", "yaw"], "residual components "
                                  "(rot_x, rot_y, yaw, x, y, z); yaw, x, y for planar ground "
                                  "truth", read_only=True)
        self.interval = {
            "kind": declare(self, "interval.kind", "time", "intervals by duration (time) or "
                            "ground-truth path length (distance)", read_only=True,
                            choices=("time", "distance")),
            "length": declare(self, "interval.length", 2.0, "[s] or [m] interval length (1-4 s "
                              "in §3.4.1; longer: slower updates, better conditioned)",
                              lower=1e-3, upper=1e4, read_only=True),
            "overlap": declare(self, "interval.overlap", "none", "none: consecutive intervals; "
                               "sliding: one ending at every pose (correlated residuals)",
                               read_only=True, choices=("none", "sliding")),
            "tolerance": declare(self, "interval.tolerance", -1.0, "[s] accepted |duration - "
                                 "length| of time intervals; < 0: 0.15 length", lower=-1.0,
                                 upper=1e4, read_only=True),
            "max_duration": declare(self, "interval.max_duration", 60.0, "[s] longest "
                                    "distance interval", lower=1e-3, upper=1e5, read_only=True),
            "min_distance": declare(self, "interval.min_distance", MOVING_MIN_DISTANCE,
                                    "[m] moving filter: skip intervals with a shorter "
                                    "ground-truth path (standing still says nothing about "
                                    "slip and pulls Q' to zero); 0 keeps all", lower=0.0,
                                    upper=1e4, read_only=True),
            "max_speed": declare(self, "interval.max_speed", 0.0, "[m/s] skip intervals with "
                                 "a ground-truth step faster than this (re-localization "
                                 "jumps); 0 keeps all", lower=0.0, upper=1e4, read_only=True),
        }
        self.outlier_probability = declare(
            self, "outlier_probability", DEFAULT_OUTLIER_PROBABILITY, "[-] intervals whose "
            "Mahalanobis distance (3.68) exceeds the chi-square quantile of this probability "
            "are rejected; 1.0 disables the gate", lower=0.5, upper=1.0, read_only=True)
        self.qprime_bound = declare(self, "qprime_bound", 0.1, "[unit/s^0.5] bound of the "
                                    "calibrated |noise.U.*| during the first "
                                    "qprime_bound_intervals accepted updates (end of §3.2.4); "
                                    "0 disables", lower=0.0, upper=100.0, read_only=True)
        self.qprime_bound_intervals = declare(self, "qprime_bound_intervals", 20, "accepted "
                                              "updates the Q' bound applies for", lower=0,
                                              upper=1_000_000, read_only=True)
        self.history_size = declare(self, "history_size", 1000, "update records kept in "
                                    "memory (oldest dropped; counts in ~/state are not "
                                    "affected); bounds the node's memory on long runs",
                                    lower=1, upper=10_000_000, read_only=True)
        self.iterations = declare(self, "iterations", 1, "Gauss-Newton iterations per update "
                                  "(1: EKF; 2-3 help a time offset)", lower=1, upper=20,
                                  read_only=True)
        self.stream_params = {
            "margin": declare(self, "margin", 0.25, "[s] encoder history kept around each "
                              "interval (>= |time offset| + one encoder period)", lower=0.0,
                              upper=60.0, read_only=True),
            "max_wait": declare(self, "max_wait", 5.0, "[s] (stamp time) an interval waits "
                                "for encoders covering it before it is skipped", lower=0.0,
                                upper=600.0, read_only=True),
            "max_encoder_gap": declare(self, "max_encoder_gap", 0.5, "[s] intervals with a "
                                       "longer encoder gap are skipped", lower=0.0,
                                       upper=600.0, read_only=True),
            "time_jump_threshold": declare(self, "time_jump_threshold", 1.0, "[s] a stamp this "
                                           "far behind its stream is a time jump (bag loop): "
                                           "buffers cleared, estimate kept", lower=0.0,
                                           upper=3600.0, read_only=True),
            "max_history": declare(self, "max_history", 120.0, "[s] encoder history kept at "
                                   "most (memory)", lower=1.0, upper=86400.0, read_only=True),
        }
        self.push = {
            "enabled": declare(self, "push.enabled", True, "push accepted estimates to the "
                               "targets' parameter services"),
            "targets": declare(self, "push.targets", ["odometry_node", "prediction_node"],
                               "nodes to update (relative to this node's namespace, or "
                               "absolute); their <node>/set_parameters is called"),
            "period": declare(self, "push.period", 5.0, "[s] (node clock) at most one push "
                              "per period", lower=0.01, upper=3600.0, read_only=True),
            "min_intervals": declare(self, "push.min_intervals", 10, "accepted intervals "
                                     "before the first push", lower=0, upper=1_000_000),
            "max_relative_std": declare(self, "push.max_relative_std", 0.2, "[-] push a "
                                        "value only when its std <= this x |value|", lower=0.0,
                                        upper=1e6),
            "max_std": declare(self, "push.max_std", 0.0, "[unit] ... or when its std <= "
                               "this (absolute; 0: relative test only)", lower=0.0, upper=1e6),
            "params": declare(self, "push.params", [""], "names to push; [''] = every "
                              "calibrated slip.*, noise.U.* and wheel.*.radius"),
        }
        self.save_path = declare(self, "save_path", "", "overlay YAML written by ~/save; '' = "
                                 "$ROS_HOME/wmr_model/<vehicle>.calibration.yaml (ROS_HOME "
                                 "default ~/.ros)")
        period = declare(self, "diagnostics_period", 1.0, "[s] diagnostics publishing period",
                         lower=0.01, upper=60.0, read_only=True)
        reliability = declare(self, "sensor_qos", "reliable", "reliability of the input "
                              "subscriptions: reliable (bag replay) or best_effort",
                              read_only=True, choices=("reliable", "best_effort"))
        depth = declare(self, "queue_size", 1000, "input queue depth", lower=1, upper=100000,
                        read_only=True)
        self.model_values = declare_model_parameters(self, DEFAULT_QPRIME_U)

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
        self.create_subscription(JointState, "joint_states", self._on_joint_state, qos)
        self.create_subscription(Imu, "imu/data", self._on_imu, qos)
        self.create_subscription(Odometry, "ground_truth/odom", self._on_odometry, qos)
        self.create_subscription(PoseWithCovarianceStamped, "ground_truth/pose", self._on_pose,
                                 qos)
        self._rd_sub = None
        self._try_load(None)
        if self.model is None and not self.model_error:
            self.get_logger().info("waiting for the vehicle on the robot_description topic")
            self._rd_sub = subscribe_robot_description(self, self._on_robot_description)
        self.add_on_set_parameters_callback(self._on_set_parameters)
        self.create_service(Trigger, "~/save", self._on_save)
        self.create_service(Trigger, "~/reset", self._on_reset)
        self.create_timer(float(period), self._publish_diagnostics)
        self.create_timer(float(self.push["period"]), self._push_tick)

    # ---- setup --------------------------------------------------------------------------------
    def _try_load(self, xml: str | None) -> None:
        try:
            model = load_vehicle_from_parameters(self.vehicle_params, xml)
            if model is None:
                return
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
        policy = IntervalPolicy(kind=iv["kind"], length=float(iv["length"]),
                                overlap=iv["overlap"],
                                tolerance=None if iv["tolerance"] < 0 else float(iv["tolerance"]),
                                max_duration=float(iv["max_duration"]),
                                min_distance=float(iv["min_distance"]),
                                max_speed=(math.inf if iv["max_speed"] <= 0
                                           else float(iv["max_speed"])))
        joints = [model.joint_names[int(k)] for k in model.actuated_joints]
        return StreamCalibrator(make, joints, policy,
                                encoder_map=dict(model.options.get("encoder_map", {}) or {}),
                                pose_sensor=self.pose_sensor or None,
                                source=f"{self.get_fully_qualified_name()} ({model.name})",
                                **{k: float(v) for k, v in self.stream_params.items()})

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
            elif p.name == "base_frame":
                self.base_frame = p.value
            elif p.name == "save_path":
                self.save_path = p.value
        return SetParametersResult(successful=True)

    # ---- inputs -------------------------------------------------------------------------------
    def _guard(self, stream: str, fn, *args) -> list[IntervalOutcome]:
        if self.stream is None:
            self.node_rejected["no_calibration_set_up"] += 1
            return []
        try:
            return fn(*args) or []
        except Exception as exc:  # a bad message never stops the node
            self.node_rejected[f"{stream}_conversion_error"] += 1
            self.get_logger().error(f"{stream}: {type(exc).__name__}: {exc}",
                                    throttle_duration_sec=5.0)
            return []

    def _on_joint_state(self, msg: JointState) -> None:
        def add():
            s = cv.encoder_sample(msg)
            return self.stream.add_encoders(s.stamp, s.names, s.positions, s.velocities)

        self._handle(self._guard("encoders", add))

    def _on_imu(self, msg: Imu) -> None:
        def add():
            s = cv.imu_sample(msg)
            if s.angular_velocity is None:
                self.node_rejected["imu_angular_velocity_not_provided"] += 1
                return []
            self.stream.add_imu(s.stamp, s.angular_velocity)
            return []

        self._guard("imu", add)

    def _pose_input(self, stamp, pose, covariance) -> list[IntervalOutcome]:
        position, orientation = cv.pose_to_arrays(pose)
        c = cv.covariance_or_none(covariance, 6)
        cov = None if c is None else from_ros_pose_covariance(c.reshape(36))
        return self.stream.add_pose(cv.stamp_to_seconds(stamp),
                                    np.concatenate([orientation, position]), cov)

    def _on_odometry(self, msg: Odometry) -> None:
        self._handle(self._guard("ground_truth", self._pose_input, msg.header.stamp,
                                 msg.pose.pose, msg.pose.covariance))

    def _on_pose(self, msg: PoseWithCovarianceStamped) -> None:
        self._handle(self._guard("ground_truth", self._pose_input, msg.header.stamp,
                                 msg.pose.pose, msg.pose.covariance))

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
        wanted = [n for n in self.push["params"] if n] or [n for n in cal.names if _pushable(n)]
        est, std = cal.estimate, cal.std
        send = {}
        for n in wanted:
            if n not in est:
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
            text = overlay_yaml(self.model.name, cal.estimate, cal.std, note=(
                f"online IPEM ({self.get_fully_qualified_name()}), {cal.n_updates} intervals,"
                f" {cal.n_accepted} accepted"))
            write_text_atomically(path, text)
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
