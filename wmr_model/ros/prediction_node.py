"""ROS 2 node: batched motion prediction as a service (thin adapter over :func:`wmr_model.predict`).

Interfaces (relative names)
---------------------------
=======================  =================================  ====================================
``~/predict``            wmr_model/srv/PredictTrajectory    C candidates x T steps, KINEMATIC,
                                                            ENHANCED or DYNAMIC (at most
                                                            ``max_dynamic_candidates``)
``odom``                 nav_msgs/Odometry (in)             latest pose for
                                                            ``use_latest_odometry``
``~/path``               nav_msgs/Path (out)                candidate 0 of the last prediction,
                                                            when ``publish_path``
``~/covariance_markers`` visualization_msgs/MarkerArray     2-sigma position ellipsoids along
                         (out)                              candidate 0 and one line per
                                                            candidate, when ``publish_markers``
=======================  =================================  ====================================

A request is checked before any computation: unknown or missing command joints, sizes that do
not match ``num_candidates``/``num_steps``/``len(twist_durations)``, non-finite numbers, a
horizon over ``max_horizon`` or a batch over ``max_candidates``/``max_steps`` (for DYNAMIC:
``max_dynamic_candidates``) return ``success = false`` with a one-line ``status_message``; the
node keeps serving.

The initial state is the given pose and joints (joints not listed: the model's neutral values),
not re-fitted to the terrain (the Baumgarte term settles small contact errors in the first
steps); with ``use_latest_odometry`` it is the last ``odom`` pose with neutral joints.
``BODY_TWIST`` segments use ``linear.x`` and ``angular.z`` (the planar twist a controller
commands); they are converted to joint rates by :func:`wmr_model.predict.twist_commands` and the
last segment is held to the end of the horizon.

DYNAMIC fidelity runs :func:`wmr_model.dynamics.simulate.simulate_dynamics_batch` (the dynamics
of every candidate in one compiled call on all cores; about 30 µs per candidate-step for Zoë,
hence the smaller ``max_dynamic_candidates`` cap) with the vehicle's contact models
(sidecar ``options``) and *ideal* actuators: the force balance imposes each actuated joint rate
exactly as commanded (``actuator="ideal"``; a P controller would only track it with a lag and a
force limit), so wheels slip when traction is short instead of the commands being altered. The
initial joint-space velocity is ``[initial_twist.angular; initial_twist.linear]`` (body frame)
plus ``joint_rates`` (unlisted joints: 0); with ``use_latest_odometry`` it is the odom message's
twist (child frame) with zero joint rates. ``stabilization`` and ``integrator`` do not apply
(symplectic Euler of the constrained dynamics). Joint velocities of point t are the simulated
``qdot`` of state t. Flags of point t come from step t (the last point repeats the last step):
WHEEL_LIFTOFF when some wheel has Δz > 0 or a normal force below
:data:`LIFTOFF_FORCE_FRACTION` of its static load, TRACTION_LIMIT when some loaded wheel's
tangential force reaches :data:`TRACTION_FRACTION` of its friction limit (piecewise-linear:
``mu_x``/``mu_y`` pyramid or ``mu_x`` cone; ROAMS without cohesion: ``tan(phi)``; Pacejka and
Ishigami wheels have no closed-form limit and never set it), TIPOVER_RISK when the tip-over
margin with the inertial load (:func:`wmr_model.predict.dynamic_stability_margin`) is below 0,
JOINT_LIMIT when a passive joint (suspension travel) is at a stop.
There is no propagated covariance: ``pose_covariances`` are zeros (empty with
``propagate_covariance`` false) and the status message says so.

Run: ``ros2 run wmr_model prediction_node --ros-args -p vehicle:=rocky7``.
"""

from __future__ import annotations

import array
import contextlib
import gc
import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from nav_msgs.msg import Odometry, Path
from rcl_interfaces.msg import SetParametersResult
from rclpy.node import Node
from std_msgs.msg import Header
from trajectory_msgs.msg import JointTrajectory
from visualization_msgs.msg import Marker, MarkerArray

from wmr_model.contact.models import PIECEWISE_LINEAR, ROAMS, contact_setup
from wmr_model.dynamics.api import gravity_of
from wmr_model.dynamics.simulate import simulate_dynamics_batch
from wmr_model.errors import WmrError
from wmr_model.model import VehicleModel
from wmr_model.odometry import DEFAULT_QPRIME_U
from wmr_model.parameters import SLIP_NAMES, check_value
from wmr_model.predict import (
    JOINT_LIMIT,
    TIPOVER_RISK,
    TRACTION_LIMIT,
    WHEEL_LIFTOFF,
    Prediction,
    dynamic_stability_margin,
    joint_limit_flags,
    predict,
    twist_commands,
)
from wmr_model.ros import conversions as cv
from wmr_model.ros.calibration_file import declare_calibration_file
from wmr_model.ros.params import (
    declare,
    declare_model_parameters,
    declare_vehicle_parameters,
    load_vehicle_from_parameters,
    model_parameter_names,
    subscribe_robot_description,
    terrain_from_parameters,
)
from wmr_model.ros.runner import spin_node
from wmr_model.srv import PredictTrajectory
from wmr_model.terrain import flat
from wmr_model.uncertainty import qprime_from_parameters

__all__ = ["RequestError", "PredictionInputs", "prediction_inputs", "DynamicPrediction",
           "friction_limits", "dynamic_flags", "predict_dynamic", "PredictionNode", "main"]

NODE_NAME = "prediction_node"
Req = PredictTrajectory.Request

FIDELITY_NAMES = {Req.KINEMATIC: "kinematic", Req.ENHANCED: "enhanced", Req.DYNAMIC: "dynamic"}
# Actuator model of DYNAMIC predictions: commanded joint rates are imposed exactly.
DYNAMIC_ACTUATOR = "ideal"
# TRACTION_LIMIT: tangential contact force >= this fraction of the friction limit.
TRACTION_FRACTION = 0.99
# WHEEL_LIFTOFF: normal force <= this fraction of the static wheel load m g / nw (or Δz > 0).
LIFTOFF_FORCE_FRACTION = 1e-3


class RequestError(ValueError):
    """A request the node refuses; the message is the response's status_message."""


@dataclass(frozen=True)
class PredictionInputs:
    """A checked request as arrays: ``q0`` (nq,), ``commands`` (C, T, na), ``dt`` [s],
    ``fidelity``, ``stamp`` [s] of the initial state, ``frame_id`` and ``qdot0`` (nv,), the
    initial joint-space velocity (used by DYNAMIC only)."""

    q0: np.ndarray
    commands: np.ndarray
    dt: float
    fidelity: str
    stamp: float
    frame_id: str
    qdot0: np.ndarray | None = None


def _finite(name: str, values: Any) -> None:
    a = np.asarray(values, dtype=float)
    if a.size and not np.all(np.isfinite(a)):
        i = int(np.flatnonzero(~np.isfinite(a.ravel()))[0])
        raise RequestError(f"{name}: must be finite; element {i} is {a.ravel()[i]}")


def _command_columns(model: VehicleModel, names: list[str]) -> list[list[int]]:
    """Actuated-joint columns (indices into model.actuated_joints) of each command name."""
    act = [int(k) for k in model.actuated_joints]
    emap = dict(model.options.get("encoder_map", {}))
    cols: list[list[int]] = []
    seen: dict[int, str] = {}
    for n in names:
        if n in emap:
            joints = [model.joint_index(j) for j in emap[n]]
        elif n in model.joint_names:
            joints = [model.joint_index(n)]
        else:
            alt = f" (or {sorted(emap)})" if emap else ""
            raise RequestError(
                f"command_joint_names: unknown joint {n!r}; {model.name} commands "
                f"{[model.joint_names[k] for k in act]}{alt}")
        c = []
        for k in joints:
            if k not in act:
                raise RequestError(f"command_joint_names: {n!r} is not an actuated joint of "
                                   f"{model.name}")
            if k in seen:
                raise RequestError(f"command_joint_names: {model.joint_names[k]!r} commanded "
                                   f"twice ({seen[k]!r} and {n!r})")
            seen[k] = n
            c.append(act.index(k))
        cols.append(c)
    missing = [model.joint_names[k] for k in act if k not in seen]
    if missing:
        raise RequestError(f"command_joint_names: actuated joints {missing} are not commanded")
    return cols


def prediction_inputs(model: VehicleModel, req: Any, latest: Odometry | None, *,
                      max_candidates: int, max_steps: int, max_horizon: float,
                      default_frame: str = "odom",
                      max_dynamic_candidates: int = 32) -> PredictionInputs:
    """Check a PredictTrajectory request and convert it to :func:`predict` inputs.

    Raises :class:`RequestError` with the status message for every invalid request.
    """
    if req.fidelity not in FIDELITY_NAMES:
        raise RequestError(f"fidelity: must be KINEMATIC (0), ENHANCED (1) or DYNAMIC (2), got "
                           f"{req.fidelity}")
    dt = float(req.step_size)
    if not (math.isfinite(dt) and dt > 0):
        raise RequestError(f"step_size: must be a finite number > 0 s, got {dt}")
    C, T = int(req.num_candidates), int(req.num_steps)
    if C < 1 or T < 1:
        raise RequestError(f"num_candidates and num_steps must be >= 1, got {C} and {T}")
    if C > max_candidates:
        raise RequestError(f"num_candidates: {C} exceeds max_candidates {max_candidates}")
    if req.fidelity == Req.DYNAMIC and C > max_dynamic_candidates:
        raise RequestError(f"num_candidates: {C} exceeds max_dynamic_candidates "
                           f"{max_dynamic_candidates} for fidelity DYNAMIC (one dynamic "
                           f"simulation per candidate); split the batch or use ENHANCED")
    if T > max_steps:
        raise RequestError(f"num_steps: {T} exceeds max_steps {max_steps}")
    if T * dt > max_horizon + 1e-9:
        raise RequestError(f"horizon num_steps * step_size = {T * dt:g} s exceeds max_horizon "
                           f"{max_horizon:g} s")
    frame = req.header.frame_id or default_frame
    stamp = cv.stamp_to_seconds(req.header.stamp)
    q0 = model.neutral_state()
    qdot0 = np.zeros(model.nv)
    if req.use_latest_odometry:
        if latest is None:
            raise RequestError("use_latest_odometry: no odometry received yet on the odom topic")
        position, orientation = cv.pose_to_arrays(latest.pose.pose)
        frame = req.header.frame_id or latest.header.frame_id or default_frame
        stamp = cv.stamp_to_seconds(latest.header.stamp)
        tw = latest.twist.twist
        qdot0[0:6] = (tw.angular.x, tw.angular.y, tw.angular.z, tw.linear.x, tw.linear.y,
                      tw.linear.z)
        if not np.all(np.isfinite(qdot0)):
            qdot0[:] = 0.0
    else:
        position, orientation = cv.pose_to_arrays(req.initial_pose)
        names = list(req.joint_names)
        jp = np.asarray(req.joint_positions, dtype=float)
        jr = np.asarray(req.joint_rates, dtype=float)
        if jp.size != len(names):
            raise RequestError(f"joint_positions: {jp.size} values for {len(names)} joint_names")
        if jr.size not in (0, len(names)):
            raise RequestError(f"joint_rates: {jr.size} values for {len(names)} joint_names "
                               f"(give one per joint or none)")
        _finite("joint_positions", jp)
        _finite("joint_rates", jr)
        for n, v in zip(names, jp):
            if n not in model.joint_names:
                raise RequestError(f"joint_names: unknown joint {n!r}; {model.name} has "
                                   f"{list(model.joint_names)}")
            q0[7 + model.joint_index(n)] = v
        tw = req.initial_twist
        qdot0[0:6] = (tw.angular.x, tw.angular.y, tw.angular.z, tw.linear.x, tw.linear.y,
                      tw.linear.z)
        _finite("initial_twist", qdot0[0:6])
        for n, v in zip(names, jr):
            qdot0[6 + model.joint_index(n)] = v
    _finite("initial_pose.position", position)
    _finite("initial_pose.orientation", orientation)
    norm = float(np.linalg.norm(orientation))
    if abs(norm - 1.0) > 1e-3:
        raise RequestError(f"initial_pose.orientation: must be a unit quaternion, norm {norm:.6g}")
    q0[0:4] = orientation / norm
    q0[4:7] = position
    na = len(model.actuated_joints)
    if req.command_type == Req.JOINT_RATES:
        names = list(req.command_joint_names)
        cols = _command_columns(model, names)
        J = len(names)
        u = np.asarray(req.joint_commands, dtype=float)
        if u.size != C * T * J:
            raise RequestError(f"joint_commands: expected num_candidates * num_steps * "
                               f"len(command_joint_names) = {C} * {T} * {J} = {C * T * J} "
                               f"values, got {u.size}")
        _finite("joint_commands", u)
        u = u.reshape(C, T, J)
        commands = np.zeros((C, T, na))
        for j, cs in enumerate(cols):
            for c in cs:
                commands[:, :, c] = u[:, :, j]
    elif req.command_type == Req.BODY_TWIST:
        durations = np.asarray(req.twist_durations, dtype=float)
        S = durations.size
        if S < 1:
            raise RequestError("twist_durations: at least one segment is needed")
        if len(req.twist_commands) != C * S:
            raise RequestError(f"twist_commands: expected num_candidates * len(twist_durations)"
                               f" = {C} * {S} = {C * S}, got {len(req.twist_commands)}")
        _finite("twist_durations", durations)
        if np.any(durations < 0):
            raise RequestError("twist_durations: must be >= 0 s")
        seg = np.empty((C, S, 3))
        for i, tw in enumerate(req.twist_commands):
            vals = [tw.linear.x, tw.linear.y, tw.linear.z, tw.angular.x, tw.angular.y,
                    tw.angular.z]
            _finite(f"twist_commands[{i}]", vals)
            if max(abs(vals[1]), abs(vals[2]), abs(vals[3]), abs(vals[4])) > 1e-9:
                raise RequestError(f"twist_commands[{i}]: only linear.x and angular.z can be "
                                   f"commanded (planar twist), got {vals}")
            seg[i // S, i % S] = (vals[0], vals[5], durations[i % S])
        seg[:, -1, 2] = max(T * dt - float(durations[:-1].sum()), durations[-1])
        rates = twist_commands(model, seg, dt, q=q0)
        if rates.shape[1] >= T:
            commands = rates[:, :T]
        else:
            pad = np.repeat(rates[:, -1:], T - rates.shape[1], axis=1)
            commands = np.concatenate([rates, pad], axis=1)
    else:
        raise RequestError(f"command_type: must be JOINT_RATES (0) or BODY_TWIST (1), got "
                           f"{req.command_type}")
    return PredictionInputs(q0=q0, commands=np.ascontiguousarray(commands), dt=dt,
                            fidelity=FIDELITY_NAMES[req.fidelity], stamp=stamp, frame_id=frame,
                            qdot0=qdot0)


def _doubles(a: np.ndarray) -> array.array:
    out = array.array("d")
    out.frombytes(np.ascontiguousarray(a, dtype=np.float64).tobytes())
    return out


def fill_response(model: VehicleModel, inputs: PredictionInputs, pred: Prediction,
                  resp: Any) -> Any:
    """Write paths, covariances, joint trajectories and flags of ``pred`` into ``resp``.

    Built in bulk (:mod:`wmr_model.ros.conversions` builders): the T+1 pose headers and
    durations are made once and shared by all C candidates, states go to Python floats in one
    ``tolist`` per candidate, and messages skip their constructors' default sub-objects.
    Shared sub-messages are never mutated afterwards (the response is serialized as is).
    The cyclic garbage collector is paused while the ~5 (C (T+1)) objects are made: they hold
    no cycles, and its generation scans over the growing heap otherwise cost twice the build.
    """
    with _gc_paused():
        return _fill_response(model, inputs, pred, resp)


@contextlib.contextmanager
def _gc_paused():
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _fill_response(model: VehicleModel, inputs: PredictionInputs, pred: Prediction,
                   resp: Any) -> Any:
    C, T1 = pred.q.shape[0], pred.q.shape[1]
    dt = inputs.dt
    header = Header(frame_id=inputs.frame_id, stamp=cv.seconds_to_stamp(inputs.stamp))
    steps = np.arange(T1) * dt
    headers = [Header(frame_id=inputs.frame_id, stamp=s)
               for s in cv.stamp_list(inputs.stamp + steps)]
    durations = cv.duration_list(steps)
    names = list(model.joint_names)
    if pred.qdot.shape[1] == T1:  # dynamics: a velocity per state
        vel_rows = np.arange(T1)
    else:  # velocity of point t: the rate of step t (the last point repeats the last step's)
        vel_rows = np.minimum(np.arange(T1), T1 - 2) if T1 > 1 else np.zeros(1, dtype=int)
    resp.paths = [Path(header=header, poses=cv.pose_stamped_list(headers, pred.q[c]))
                  for c in range(C)]
    resp.joint_trajectories = [
        JointTrajectory(header=header, joint_names=names,
                        points=cv.trajectory_points(pred.q[c, :, 7:],
                                                    pred.qdot[c, vel_rows, 6:], durations))
        for c in range(C)]
    cov = pred.ros_covariance
    resp.pose_covariances = _doubles(cov) if cov is not None else array.array("d")
    resp.flags = array.array("B", pred.flags.astype(np.uint8).tobytes())
    return resp


@dataclass(frozen=True)
class DynamicPrediction:
    """DYNAMIC fidelity results in the shape :func:`fill_response` reads: ``q`` (C, T+1, nq),
    ``qdot`` (C, T+1, nv), ``flags`` (C, T+1) uint8, ``ros_covariance`` (C, T+1, 36) zeros or
    None; ``covariance`` is None (nothing is propagated)."""

    q: np.ndarray
    qdot: np.ndarray
    flags: np.ndarray
    ros_covariance: np.ndarray | None
    covariance: None = None


def friction_limits(model: VehicleModel) -> tuple[np.ndarray, np.ndarray]:
    """Per-wheel friction coefficients (nw, 2) ``[mu_x, mu_y]`` (NaN: no closed-form limit) and
    whether each wheel's limit is a cone (nw,) bool, from the default contact setup."""
    cs = contact_setup(model, gravity=float(np.linalg.norm(gravity_of(model))))
    mu = np.full((model.nw, 2), np.nan)
    cone = np.zeros(model.nw, dtype=bool)
    for k, kind in enumerate(cs.kinds):
        p = cs.params[k]
        if kind == PIECEWISE_LINEAR:
            mu[k] = p[5], p[6]
            cone[k] = p[7] != 0.0
        elif kind == ROAMS and p[4] == 0.0:  # no cohesion: Coulomb with mu = tan(phi)
            mu[k] = math.tan(p[5])
            cone[k] = True
    return mu, cone


def dynamic_flags(model: VehicleModel, f_contact: np.ndarray, dz: np.ndarray,
                  q: np.ndarray | None = None, margin: np.ndarray | None = None,
                  tipover_margin: float = 0.0) -> np.ndarray:
    """(T+1,) flags of one dynamic simulation from its (T, nw, 3) contact forces and (T, nw)
    contact height errors; point t takes step t's values, the last point the last step's.

    With the states ``q`` (T+1, nq): JOINT_LIMIT where a passive joint (suspension) is at a
    stop (:func:`wmr_model.predict.joint_limit_flags`); with the tip-over ``margin`` (T+1,)
    [m] (:func:`wmr_model.predict.dynamic_stability_margin`): TIPOVER_RISK where it is below
    ``tipover_margin``.
    """
    T = f_contact.shape[0]
    g = float(np.linalg.norm(gravity_of(model)))
    load = model.total_mass * g / max(model.nw, 1)
    fz = f_contact[:, :, 2]
    lifted = (dz > 0.0) | (fz <= LIFTOFF_FORCE_FRACTION * load)
    mu, cone = friction_limits(model)
    fx, fy = np.abs(f_contact[:, :, 0]), np.abs(f_contact[:, :, 1])
    with np.errstate(invalid="ignore"):
        pyramid = (fx >= TRACTION_FRACTION * mu[:, 0] * fz) | (fy >= TRACTION_FRACTION
                                                               * mu[:, 1] * fz)
        circle = np.hypot(fx, fy) >= TRACTION_FRACTION * mu[:, 0] * fz
    limited = np.where(cone, circle, pyramid) & ~lifted & ~np.isnan(mu[:, 0])
    step = (np.where(lifted.any(axis=1), WHEEL_LIFTOFF, 0)
            | np.where(limited.any(axis=1), TRACTION_LIMIT, 0)).astype(np.uint8)
    flags = np.concatenate([step, step[-1:]]) if T else np.zeros(1, dtype=np.uint8)
    if q is not None:
        flags |= np.where(joint_limit_flags(model, q), JOINT_LIMIT, 0).astype(np.uint8)
    if margin is not None and T:  # like the other flags: point t from step t's start state
        m = np.concatenate([margin[:T], margin[T - 1:T]])
        flags |= np.where(m < tipover_margin, TIPOVER_RISK, 0).astype(np.uint8)
    return flags


def predict_dynamic(model: VehicleModel, terrain: Any, inputs: PredictionInputs, *,
                    covariance: bool = True) -> DynamicPrediction:
    """Run :func:`~wmr_model.dynamics.simulate.simulate_dynamics` for every candidate of
    ``inputs`` (ideal actuators), all at once on all cores
    (:func:`~wmr_model.dynamics.simulate.simulate_dynamics_batch`)."""
    qdot0 = inputs.qdot0 if inputs.qdot0 is not None else np.zeros(model.nv)
    C, T = inputs.commands.shape[:2]
    flags = np.empty((C, T + 1), dtype=np.uint8)
    runs = simulate_dynamics_batch(model, terrain, inputs.q0, qdot0, inputs.commands,
                                   inputs.dt, actuator=DYNAMIC_ACTUATOR)
    for c in range(C):
        margin = dynamic_stability_margin(model, terrain, runs.q[c], runs.qdot[c], inputs.dt)
        flags[c] = dynamic_flags(model, runs.f_contact[c], runs.dz[c], runs.q[c], margin)
    cov = np.zeros((C, T + 1, 36)) if covariance else None
    return DynamicPrediction(q=runs.q, qdot=runs.qdot, flags=flags, ros_covariance=cov)


class PredictionNode(Node):
    """The prediction node; see the module docstring."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(NODE_NAME, **kwargs)
        # first: the file's values become those of the model parameters declared from here on
        self.calibration = declare_calibration_file(self)
        self.vehicle_params = declare_vehicle_parameters(self)
        self.max_candidates = declare(self, "max_candidates", 5000, "largest num_candidates "
                                      "served (memory and latency bound)", lower=1,
                                      upper=1_000_000)
        self.max_dynamic_candidates = declare(self, "max_dynamic_candidates", 32, "largest "
                                              "num_candidates served with fidelity DYNAMIC (one "
                                              "simulation each)", lower=1, upper=1_000_000)
        self.max_steps = declare(self, "max_steps", 10000, "largest num_steps served", lower=1,
                                 upper=10_000_000)
        self.max_horizon = declare(self, "max_horizon", 60.0, "[s] longest horizon "
                                   "num_steps * step_size served", lower=0.0, upper=1e6)
        self.default_frame = declare(self, "default_frame", "odom", "frame of the paths when "
                                     "the request's header.frame_id is empty")
        self.stabilization = declare(self, "stabilization", 0.5, "[-] Baumgarte gain sigma*dt "
                                     "(2.35)", lower=0.0, upper=1.0)
        self.integrator = declare(self, "integrator", "euler", "euler or rk4",
                                  choices=("euler", "rk4"))
        self.propagate = declare(self, "propagate_covariance", True, "return per-pose "
                                 "covariances propagated with Q' from noise.U.*")
        self.publish_path = declare(self, "publish_path", False, "publish candidate 0 of the "
                                    "last prediction on ~/path")
        self.publish_markers = declare(self, "publish_markers", False, "publish covariance "
                                       "ellipsoids and candidate lines on ~/covariance_markers")
        self.marker_stride = declare(self, "marker_stride", 5, "ellipsoid every this many "
                                     "poses", lower=1, upper=100000)
        self.model_values = declare_model_parameters(self, DEFAULT_QPRIME_U)
        self.model: VehicleModel | None = None
        self.model_error = ""
        try:
            self.terrain = terrain_from_parameters(self.vehicle_params)
        except WmrError as exc:
            self.get_logger().error(f"terrain: {exc}; using flat ground")
            self.terrain = flat()
        self.latest: Odometry | None = None
        self.create_subscription(Odometry, "odom", self._on_odom, 10)
        self.pub_path = self.create_publisher(Path, "~/path", 1)
        self.pub_markers = self.create_publisher(MarkerArray, "~/covariance_markers", 1)
        self._rd_sub = None
        self._try_load(None)
        if self.model is None and not self.model_error:
            self.get_logger().info("waiting for the vehicle on the robot_description topic")
            self._rd_sub = subscribe_robot_description(self, self._on_robot_description)
        self.add_on_set_parameters_callback(self._on_set_parameters)
        self.create_service(PredictTrajectory, "~/predict", self._on_predict)

    def _try_load(self, xml: str | None) -> None:
        try:
            self.model = load_vehicle_from_parameters(self.vehicle_params, xml)
        except (WmrError, OSError) as exc:
            self.model_error = str(exc)
            self.get_logger().error(f"cannot load the vehicle: {exc}")
            return
        if self.model is not None:
            act = [self.model.joint_names[k] for k in self.model.actuated_joints]
            self.get_logger().info(f"prediction for {self.model.name}: actuated joints {act}")

    def _on_robot_description(self, xml: str) -> None:
        if self.model is None:
            self._try_load(xml)
            if self.model is not None and self._rd_sub is not None:
                self.destroy_subscription(self._rd_sub)
                self._rd_sub = None

    def _on_set_parameters(self, params) -> SetParametersResult:
        names = set(model_parameter_names())
        new = {}
        for p in params:
            if p.name in names:
                try:
                    new[p.name] = check_value(p.name, p.value)
                except (WmrError, ValueError) as exc:
                    return SetParametersResult(successful=False, reason=str(exc))
            elif p.name in ("max_candidates", "max_dynamic_candidates", "max_steps",
                            "max_horizon", "default_frame", "stabilization", "integrator",
                            "publish_path", "publish_markers", "marker_stride"):
                setattr(self, p.name, p.value)
            elif p.name == "propagate_covariance":
                self.propagate = bool(p.value)
        self.model_values.update(new)
        return SetParametersResult(successful=True)

    def _on_odom(self, msg: Odometry) -> None:
        self.latest = msg

    def _fail(self, resp, message: str, t0: float):
        resp.success = False
        resp.status_message = message
        resp.compute_time = time.perf_counter() - t0
        self.get_logger().warning(f"request refused: {message}")
        return resp

    def _on_predict(self, req, resp):
        t0 = time.perf_counter()
        if self.model is None:
            return self._fail(resp, "no vehicle model" + (f": {self.model_error}"
                                                         if self.model_error else " yet"), t0)
        try:
            inputs = prediction_inputs(self.model, req, self.latest,
                                       max_candidates=int(self.max_candidates),
                                       max_steps=int(self.max_steps),
                                       max_horizon=float(self.max_horizon),
                                       default_frame=self.default_frame,
                                       max_dynamic_candidates=int(self.max_dynamic_candidates))
            note = ""
            if inputs.fidelity == "dynamic":
                pred = predict_dynamic(self.model, self.terrain, inputs,
                                       covariance=bool(self.propagate))
                note = f"{DYNAMIC_ACTUATOR} actuators" + (
                    "; pose_covariances are zeros: no propagated covariance"
                    if self.propagate else "")
            else:
                values = self.model_values
                Q = (qprime_from_parameters({k: v for k, v in values.items()
                                             if k.startswith("noise.U.")})
                     if self.propagate else None)
                pred = predict(self.model, self.terrain, inputs.q0, inputs.commands, inputs.dt,
                               fidelity=inputs.fidelity,
                               slip_params={n: values[n] for n in SLIP_NAMES}, Qprime=Q,
                               integrator=self.integrator,
                               stabilization=float(self.stabilization))
            fill_response(self.model, inputs, pred, resp)
        except (RequestError, WmrError) as exc:
            return self._fail(resp, str(exc), t0)
        except Exception as exc:  # never crash the service on a request
            self.get_logger().error(f"prediction failed: {type(exc).__name__}: {exc}")
            return self._fail(resp, f"internal error: {type(exc).__name__}: {exc}", t0)
        return self._succeed(resp, inputs, pred, t0, note)

    def _succeed(self, resp, inputs: PredictionInputs, pred, t0: float, note: str = ""):
        resp.success = True
        C, T = inputs.commands.shape[:2]
        resp.status_message = f"ok: {C} candidates x {T} steps, {inputs.fidelity}" + (
            f" ({note})" if note else "")
        resp.compute_time = time.perf_counter() - t0
        if self.publish_path and resp.paths:
            self.pub_path.publish(resp.paths[0])
        if self.publish_markers:
            self.pub_markers.publish(self._markers(inputs, pred, resp))
        return resp

    def _markers(self, inputs: PredictionInputs, pred: Prediction | DynamicPrediction,
                 resp) -> MarkerArray:
        out = MarkerArray()
        header = resp.paths[0].header
        clear = Marker(header=header, action=Marker.DELETEALL)
        out.markers.append(clear)
        for c, path in enumerate(resp.paths[:100]):
            line = Marker(header=header, ns="candidates", id=c, type=Marker.LINE_STRIP,
                          action=Marker.ADD)
            line.scale.x = 0.02
            line.color.g, line.color.a = 1.0, 0.6
            line.pose.orientation.w = 1.0
            line.points = [ps.pose.position for ps in path.poses]
            out.markers.append(line)
        if pred.covariance is None:
            return out
        P = pred.covariance[0]
        for i, t in enumerate(range(0, P.shape[0], int(self.marker_stride))):
            lam, V = np.linalg.eigh(P[t, 3:5, 3:5])
            m = Marker(header=header, ns="covariance", id=i, type=Marker.SPHERE,
                       action=Marker.ADD)
            m.pose.position = resp.paths[0].poses[t].pose.position
            yaw = math.atan2(V[1, 1], V[0, 1])
            m.pose.orientation.z, m.pose.orientation.w = math.sin(yaw / 2), math.cos(yaw / 2)
            # 2-sigma ellipse: diameter 4 sigma; tiny floor so RViz shows something at t = 0
            m.scale.x = max(4.0 * math.sqrt(max(lam[1], 0.0)), 1e-3)
            m.scale.y = max(4.0 * math.sqrt(max(lam[0], 0.0)), 1e-3)
            m.scale.z = max(4.0 * math.sqrt(max(P[t, 5, 5], 0.0)), 1e-3)
            m.color.b, m.color.a = 1.0, 0.3
            out.markers.append(m)
        return out


def main(args: list[str] | None = None) -> int:
    """Entry point of ``ros2 run wmr_model prediction_node``."""
    return spin_node(PredictionNode, args)
