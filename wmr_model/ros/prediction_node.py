"""ROS 2 node: batched motion prediction as a service for planners (thin adapter over
:func:`wmr_model.prediction.rollouts.rollout`, i.e. :func:`wmr_model.prediction.predict.predict` and
the dynamics).

Interfaces (relative names)
---------------------------
=======================  =================================  ====================================
``~/predict``            wmr_model/srv/PredictTrajectory    C candidates x T steps, KINEMATIC,
                                                            ENHANCED or DYNAMIC; compact answers
``odom``                 nav_msgs/Odometry (in)             latest pose for
                                                            ``use_latest_odometry``
``~/path``               nav_msgs/Path (out)                candidate 0 of the last prediction,
                                                            when ``publish_path``
``~/covariance_markers`` visualization_msgs/MarkerArray     2-sigma position ellipsoids along
                         (out)                              candidate 0 and one line per
                                                            candidate, when ``publish_markers``
``/diagnostics``         diagnostic_msgs/DiagnosticArray    requests, successes, partial answers,
                                                            rejections by reason, compute time
=======================  =================================  ====================================

Compact answers: the request's ``every`` keeps samples 0, k, 2k, ..., T and ``outputs`` says
which flat arrays come back (poses, covariances, joint states, flags, stability margin;
``nav_msgs/Path`` and ``JointTrajectory`` messages only when asked), in float64 or float32.
The layouts are documented in ``srv/PredictTrajectory.srv``; :mod:`wmr_model.ros.client` turns
them into NumPy arrays (C, S, ...).

A request is checked before any computation: unknown or missing command joints, sizes that do
not match ``num_candidates``/``num_steps``/``len(twist_durations)``, non-finite numbers, a
horizon over ``max_horizon``, a batch over ``max_candidates``/``max_steps``, and a batch whose
estimated memory (:func:`wmr_model.prediction.rollouts.rollout_bytes`: commands, one chunk's working
arrays, the kept samples and the response) exceeds ``max_request_memory_mb`` return
``success = false`` with a one-line ``status_message`` naming the numbers; the node keeps
serving. Concurrent requests share that budget: one that does not fit next to those running
waits (at most its time budget) for them to finish.

Concurrency: the service runs in a reentrant callback group on a multi-threaded executor
(``worker_threads``), and the compiled kernels release the GIL, so a small request is answered
while a large one computes. Time budget: candidates are computed in
chunks of about 0.1 s; a request stops before a chunk that would end after
``min(request max_compute_time, max_compute_time)`` and returns the finished candidates
(``allow_partial``) or fails with the reason.

Initial state: the given pose and joints (joints not listed: the model's neutral values); with
``use_latest_odometry`` the last ``odom`` pose with neutral joints. A 2D pose (``POSE_2D``, or
``POSE_AUTO`` with z, roll and pitch exactly 0) keeps x, y, yaw and is placed on the terrain by
contact initialization (thesis (2.27)-(2.32)) for every fidelity. ``BODY_TWIST`` segments use
``linear.x`` and ``angular.z``; the last segment is held to the end of the horizon. They become
joint rates through the ``controller`` parameter (default ``vehicle``: the vehicle sidecar's
``controller:`` section, :mod:`wmr_model.prediction.controllers`; closed-loop kinds such as Zoe's
passive-steer feedback read each candidate's state at every step; ``naive`` or a vehicle
without a controller: :func:`wmr_model.prediction.predict.twist_commands`, open loop).

DYNAMIC fidelity runs :func:`wmr_model.dynamics.simulate.simulate_dynamics_batch` with the
vehicle's contact models and *ideal* actuators (the commanded joint rates are imposed exactly, so
wheels slip when traction is short); the initial joint-space velocity is
``[initial_twist.angular; initial_twist.linear]`` plus ``joint_rates``. There is no
propagated covariance. Its flags (:func:`wmr_model.prediction.rollouts.dynamic_flags`):
WHEEL_LIFTOFF, TRACTION_LIMIT, TIPOVER_RISK (margin with the inertial load), JOINT_LIMIT. Every
fidelity sets FLAG_INVALID from the first sample whose state is non-finite or off a height map, with
the exact step in ``invalid_step``: ``success = true`` never carries a NaN pose without it.

Parameters are validated at set time (:func:`wmr_model.ros.params.validate_parameters`); the
model parameters the calibrator pushes (``slip.*``, ``noise.U.*``, ``wheel.<wheel>.radius``)
apply to the next request.

Run: ``ros2 run wmr_model prediction_node --ros-args -p vehicle:=rocky7``.
"""

from __future__ import annotations

import array
import contextlib
import gc
import math
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from nav_msgs.msg import Odometry, Path
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node
from std_msgs.msg import Header
from trajectory_msgs.msg import JointTrajectory
from visualization_msgs.msg import Marker, MarkerArray

from wmr_model.errors import WmrError
from wmr_model.estimation.odometry import DEFAULT_QPRIME_U
from wmr_model.kinematics.uncertainty import qprime_from_parameters
from wmr_model.parameters import SLIP_NAMES
from wmr_model.prediction.controllers import twist_profile, vehicle_controller
from wmr_model.prediction.predict import Prediction, twist_commands
from wmr_model.prediction.rollouts import (
    DYNAMIC_ACTUATOR,
    Rollout,
    place_on_terrain,
    rollout,
    rollout_bytes,
    sample_steps,
)
from wmr_model.ros import conversions as cv
from wmr_model.ros.calibration_file import declare_calibration_file
from wmr_model.ros.conversions import publish_status
from wmr_model.ros.options import PREDICTION_NODE
from wmr_model.ros.params import (
    declare_model_parameters,
    declare_options,
    declare_vehicle_parameters,
    declare_wheel_parameters,
    load_vehicle_from_parameters,
    model_parameter_names,
    subscribe_robot_description,
    terrain_from_parameters,
    validate_parameters,
)
from wmr_model.ros.runner import reliable_service, spin_node, steady_timer
from wmr_model.srv import PredictTrajectory
from wmr_model.terrain.surface import Terrain, flat
from wmr_model.vehicles.model import VehicleModel
from wmr_model.vehicles.parameters import with_parameters

__all__ = ["RequestError", "PredictionInputs", "prediction_inputs", "fill_response",
           "fill_messages", "fill_compact", "request_memory", "PredictionNode", "main"]

NODE_NAME = "prediction_node"
Req = PredictTrajectory.Request
Resp = PredictTrajectory.Response

FIDELITY_NAMES = {Req.KINEMATIC: "kinematic", Req.ENHANCED: "enhanced", Req.DYNAMIC: "dynamic"}
ALL_OUTPUTS = (Req.OUTPUT_POSES | Req.OUTPUT_COVARIANCES | Req.OUTPUT_JOINT_STATES
               | Req.OUTPUT_FLAGS | Req.OUTPUT_STABILITY_MARGIN | Req.OUTPUT_PATHS
               | Req.OUTPUT_JOINT_TRAJECTORIES)
# Memory of one nav_msgs/Path pose / JointTrajectory point as Python objects plus its
# serialized form [bytes] (measured order of magnitude: ~6 objects per pose).
PATH_POSE_BYTES = 800
TRAJECTORY_POINT_BYTES = 500
# Pose layout of the response: x, y, z, qx, qy, qz, qw from the state's [w, x, y, z, px, py, pz].
POSE_COLUMNS = [4, 5, 6, 1, 2, 3, 0]


class RequestError(ValueError):
    """A request the node refuses; the message is the response's status_message and
    ``reason`` the diagnostics key it is counted under."""

    def __init__(self, message: str, reason: str = "invalid_request") -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class PredictionInputs:
    """A checked request as arrays: ``q0`` (nq,), ``commands`` (C, T, na), ``dt`` [s],
    ``fidelity``, ``stamp`` [s] of the initial state, ``frame_id``, ``qdot0`` (nv,), the
    initial joint-space velocity (used by DYNAMIC only), and ``placed``: the initial pose was
    2D and was put on the terrain by contact initialization."""

    q0: np.ndarray
    commands: np.ndarray
    dt: float
    fidelity: str
    stamp: float
    frame_id: str
    qdot0: np.ndarray | None = None
    placed: bool = False
    #: a closed-loop or differential :class:`wmr_model.prediction.controllers.Controller`:
    # ``commands``
    #: are then body twists (C, T, 2) rows (vx, wz) for
    # :func:`wmr_model.prediction.rollouts.rollout`
    controller: Any = None


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
                      default_frame: str = "odom", terrain: Terrain | None = None,
                      guard: Callable[[int, int], None] | None = None,
                      controller: str | None = None) -> PredictionInputs:
    """Check a PredictTrajectory request and convert it to :func:`predict` inputs.

    ``guard(C, T)`` is called once the sizes are checked and before any (C, T) array is made
    (the node's memory budget). A 2D initial pose (``initial_pose_mode``) is placed on
    ``terrain`` (default flat) by :func:`wmr_model.prediction.rollouts.place_on_terrain`.
    Raises :class:`RequestError` with the status message for every invalid request.
    """
    dt, C, T = _request_sizes(req, max_candidates, max_steps, max_horizon)
    if guard is not None:
        guard(C, T)
    q0, qdot0, frame, stamp = _initial_state(model, req, latest, default_frame)
    q0, placed = _placed_on_terrain(model, req, q0, terrain)
    ctrl = None
    if req.command_type == Req.JOINT_RATES:
        commands = _joint_rate_commands(model, req, C, T)
    elif req.command_type == Req.BODY_TWIST:
        commands, ctrl = _twist_commands(model, req, C, T, dt, q0, controller)
    else:
        raise RequestError(f"command_type: must be JOINT_RATES (0) or BODY_TWIST (1), got "
                           f"{req.command_type}")
    return PredictionInputs(q0=q0, commands=np.ascontiguousarray(commands), dt=dt,
                            fidelity=FIDELITY_NAMES[req.fidelity], stamp=stamp, frame_id=frame,
                            qdot0=qdot0, placed=placed,
                            controller=ctrl)


def _request_sizes(req: Any, max_candidates: int, max_steps: int,
                   max_horizon: float) -> tuple[float, int, int]:
    """``(dt, C, T)`` of a request whose fidelity, step size, sizes, horizon and initial pose
    mode are valid (RequestError otherwise)."""
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
    if T > max_steps:
        raise RequestError(f"num_steps: {T} exceeds max_steps {max_steps}")
    if T * dt > max_horizon + 1e-9:
        raise RequestError(f"horizon num_steps * step_size = {T * dt:g} s exceeds max_horizon "
                           f"{max_horizon:g} s")
    if req.initial_pose_mode not in (Req.POSE_AUTO, Req.POSE_3D, Req.POSE_2D):
        raise RequestError(f"initial_pose_mode: must be POSE_AUTO (0), POSE_3D (1) or POSE_2D "
                           f"(2), got {req.initial_pose_mode}")
    return dt, C, T


def _initial_state(model: VehicleModel, req: Any, latest: Odometry | None,
                   default_frame: str) -> tuple[np.ndarray, np.ndarray, str, float]:
    """``(q0 (nq,), qdot0 (nv,), frame_id, stamp)`` of the request's initial state: the latest
    odometry or the request's pose, joints and twist (checked, unit quaternion)."""
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
        _request_joints(model, req, q0, qdot0)
    _finite("initial_pose.position", position)
    _finite("initial_pose.orientation", orientation)
    norm = float(np.linalg.norm(orientation))
    if abs(norm - 1.0) > 1e-3:
        raise RequestError(f"initial_pose.orientation: must be a unit quaternion, norm {norm:.6g}")
    q0[0:4] = orientation / norm
    q0[4:7] = position
    return q0, qdot0, frame, stamp


def _request_joints(model: VehicleModel, req: Any, q0: np.ndarray, qdot0: np.ndarray) -> None:
    """Write the request's joint positions into ``q0`` and its initial twist and joint rates
    into ``qdot0`` (checked: sizes, finite, known joints)."""
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


def _placed_on_terrain(model: VehicleModel, req: Any, q0: np.ndarray,
                       terrain: Terrain | None) -> tuple[np.ndarray, bool]:
    """``(q0, placed)``: a 2D initial pose (POSE_2D, or POSE_AUTO with z = 0 and no roll or
    pitch) keeps its yaw and is put on the terrain by contact initialization."""
    position, orientation = q0[4:7], q0[0:4]
    mode = Req.POSE_AUTO if req.use_latest_odometry else req.initial_pose_mode
    placed = mode == Req.POSE_2D or (mode == Req.POSE_AUTO and position[2] == 0.0
                                     and orientation[1] == 0.0 and orientation[2] == 0.0)
    if not placed:
        return q0, False
    w, x, y, z = q0[0:4]
    yaw = math.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))
    q0[0:4] = (math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2))
    held = () if req.use_latest_odometry else tuple(
        model.joint_index(n) for n in req.joint_names)
    try:
        q0 = place_on_terrain(model, terrain if terrain is not None else flat(), q0, held)
    except (WmrError, ValueError, ArithmeticError) as exc:
        raise RequestError(f"initial_pose: contact initialization of the 2D pose failed: "
                           f"{exc}") from None
    return q0, True


def _joint_rate_commands(model: VehicleModel, req: Any, C: int, T: int) -> np.ndarray:
    """JOINT_RATES commands (C, T, na) in actuated-joint order from the request's
    ``command_joint_names`` columns."""
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
    commands = np.zeros((C, T, len(model.actuated_joints)))
    for j, cs in enumerate(cols):
        for c in cs:
            commands[:, :, c] = u[:, :, j]
    return commands


def _twist_commands(model: VehicleModel, req: Any, C: int, T: int, dt: float, q0: np.ndarray,
                    controller: str | None) -> tuple[np.ndarray, Any]:
    """BODY_TWIST segments as ``(commands, controller)``: body twists (C, T, 2) for a
    closed-loop or differential controller, else open-loop joint rates (C, T, na) and None."""
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
    ctrl = None if controller is None else vehicle_controller(model, controller)
    if ctrl is not None and ctrl.kind != "naive":
        rates = np.stack(twist_profile(seg, dt), axis=-1)  # (C, T', 2) twists
    else:
        rates, ctrl = twist_commands(model, seg, dt, q=q0), None
    if rates.shape[1] >= T:
        return rates[:, :T], ctrl
    pad = np.repeat(rates[:, -1:], T - rates.shape[1], axis=1)
    return np.concatenate([rates, pad], axis=1), ctrl


def _request_budget(req: Any, node_time: float) -> tuple[bool, int, float]:
    """``(float32, every, budget_s)`` of a request: its precision, sample stride and time
    budget [s] (its max_compute_time capped by the node's ``node_time``; 0: the node's)."""
    if req.precision not in (Req.FLOAT64, Req.FLOAT32):
        raise RequestError(f"precision: must be FLOAT64 (0) or FLOAT32 (1), got "
                           f"{req.precision}")
    every = max(int(req.every), 1)
    asked = float(req.max_compute_time)
    if not (math.isfinite(asked) and asked >= 0):
        raise RequestError(f"max_compute_time: must be a finite number >= 0 s (0: the "
                           f"node's {node_time:g} s), got {asked}")
    budget_s = min(asked, node_time) if asked > 0 else node_time
    return req.precision == Req.FLOAT32, every, budget_s


def _memory_guard(model: VehicleModel, fidelity: str, every: int, outputs: int, float32: bool,
                  covariance: bool, budget_mb: float,
                  need: dict[str, int]) -> Callable[[int, int], None]:
    """The ``guard(C, T)`` of :func:`prediction_inputs`: fills ``need`` with the estimated
    memory of a (C, T) request (:func:`request_memory`) and refuses it (``memory_budget``)
    above ``budget_mb``."""

    def guard(C: int, T: int) -> None:
        need.update(request_memory(model, fidelity, C, T, every, outputs, float32, covariance))
        if need["total"] > budget_mb * 1e6:
            parts = ", ".join(f"{k} {v / 1e6:.0f}" for k, v in need.items() if k != "total")
            raise RequestError(
                f"memory: {C} candidates x {T} steps ({len(sample_steps(T, every))} "
                f"samples each, {fidelity}) need about {need['total'] / 1e6:.0f} MB "
                f"({parts} MB) > max_request_memory_mb {budget_mb:g}; ask for fewer "
                f"candidates or steps, a larger every or fewer outputs", "memory_budget")

    return guard


def _doubles(a: np.ndarray) -> array.array:
    out = array.array("d")
    out.frombytes(np.ascontiguousarray(a, dtype=np.float64).tobytes())
    return out


def fill_response(model: VehicleModel, inputs: PredictionInputs, pred: Prediction,
                  resp: Any) -> Any:
    """Write paths, covariances, joint trajectories and flags of a full :func:`predict`
    result ``pred`` (every state) into ``resp`` (the message-per-candidate form; the node
    fills these only for OUTPUT_PATHS / OUTPUT_JOINT_TRAJECTORIES, see :func:`fill_messages`).
    """
    T1 = pred.q.shape[1]
    rows = np.minimum(np.arange(T1), max(pred.qdot.shape[1] - 1, 0))
    qdot = pred.qdot if pred.qdot.shape[1] == T1 else pred.qdot[:, rows]
    fill_messages(model, inputs, pred.q, qdot, np.arange(T1), resp, paths=True,
                  trajectories=True)
    cov = pred.ros_covariance
    resp.pose_covariances = _doubles(cov) if cov is not None else array.array("d")
    resp.flags = array.array("B", pred.flags.astype(np.uint8).tobytes())
    return resp


def fill_messages(model: VehicleModel, inputs: PredictionInputs, q: np.ndarray,
                  qdot: np.ndarray, steps: np.ndarray, resp: Any, *, paths: bool,
                  trajectories: bool) -> Any:
    """``resp.paths`` and/or ``resp.joint_trajectories`` from states ``q`` (C, S, nq) and
    rates ``qdot`` (C, S, nv) at the sample ``steps`` (S,).

    Built in bulk (:mod:`wmr_model.ros.conversions` builders): the S pose headers and
    durations are made once and shared by all C candidates, states go to Python floats in one
    ``tolist`` per candidate, and messages skip their constructors' default sub-objects.
    Shared sub-messages are never mutated afterwards (the response is serialized as is).
    The cyclic garbage collector is paused while the ~5 C S objects are made: they hold
    no cycles, and its generation scans over the growing heap otherwise cost twice the build.
    """
    with _gc_paused():
        C = q.shape[0]
        header = Header(frame_id=inputs.frame_id, stamp=cv.seconds_to_stamp(inputs.stamp))
        times = np.asarray(steps, dtype=float) * inputs.dt
        if paths:
            headers = [Header(frame_id=inputs.frame_id, stamp=s)
                       for s in cv.stamp_list(inputs.stamp + times)]
            resp.paths = [Path(header=header, poses=cv.pose_stamped_list(headers, q[c]))
                          for c in range(C)]
        if trajectories:
            durations = cv.duration_list(times)
            names = list(model.joint_names)
            resp.joint_trajectories = [
                JointTrajectory(header=header, joint_names=names,
                                points=cv.trajectory_points(q[c, :, 7:], qdot[c, :, 6:],
                                                            durations))
                for c in range(C)]
    return resp


@contextlib.contextmanager
def _gc_paused():
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def request_outputs(req: Any) -> int:
    """The request's output bitmask (0: OUTPUT_DEFAULT); RequestError for unknown bits."""
    outputs = int(req.outputs) or Req.OUTPUT_DEFAULT
    if outputs & ~ALL_OUTPUTS:
        raise RequestError(f"outputs: unknown bits {outputs & ~ALL_OUTPUTS:#x} (known: "
                           f"{ALL_OUTPUTS:#x})")
    return outputs


def request_memory(model: VehicleModel, fidelity: str, C: int, T: int, every: int,
                   outputs: int, float32: bool, covariance: bool) -> dict[str, int]:
    """Estimated peak bytes of one request by part
    (:func:`wmr_model.prediction.rollouts.rollout_bytes` with the response the outputs ask for)."""
    nj = model.nq - 7
    values = 0
    if outputs & Req.OUTPUT_POSES:
        values += 7
    if outputs & Req.OUTPUT_COVARIANCES and covariance and fidelity != "dynamic":
        values += 36
    if outputs & Req.OUTPUT_STABILITY_MARGIN:
        values += 1
    per_value = 4 if float32 else 8
    # joint states are always float64 and flags one byte: fold them into float-sized values
    extra = 0
    S = len(sample_steps(T, every))
    if outputs & Req.OUTPUT_JOINT_STATES:
        extra += 2 * S * 2 * nj * 8
    if outputs & Req.OUTPUT_FLAGS:
        extra += 2 * S + 8
    if outputs & Req.OUTPUT_PATHS:
        extra += S * PATH_POSE_BYTES
    if outputs & Req.OUTPUT_JOINT_TRAJECTORIES:
        extra += S * (TRAJECTORY_POINT_BYTES + 16 * nj)
    return rollout_bytes(model, fidelity, C, T, every, covariance=covariance,
                         response_values_per_sample=values, response_bytes_per_value=per_value,
                         per_candidate_extra=extra)


def _typed(a: np.ndarray, float32: bool) -> array.array:
    out = array.array("f" if float32 else "d")
    out.frombytes(np.ascontiguousarray(a, dtype=np.float32 if float32 else np.float64)
                  .tobytes())
    return out


def fill_compact(model: VehicleModel, r: Rollout, outputs: int, float32: bool,
                 resp: Any) -> Any:
    """The flat arrays of ``resp`` (layouts in the .srv) from a rollout ``r``."""
    resp.num_candidates_done = int(r.done)
    resp.partial = bool(r.partial)
    resp.steps = array.array("I", np.asarray(r.steps, dtype=np.uint32).tobytes())
    if outputs & Req.OUTPUT_POSES:
        poses = _typed(r.q[:, :, POSE_COLUMNS], float32)
        if float32:
            resp.poses_f32 = poses
        else:
            resp.poses = poses
    if outputs & Req.OUTPUT_COVARIANCES and r.ros_covariance is not None:
        cov = _typed(r.ros_covariance, float32)
        if float32:
            resp.pose_covariances_f32 = cov
        else:
            resp.pose_covariances = cov
    if outputs & Req.OUTPUT_STABILITY_MARGIN:
        m = _typed(r.stability_margin, float32)
        if float32:
            resp.stability_margin_f32 = m
        else:
            resp.stability_margin = m
    if outputs & Req.OUTPUT_JOINT_STATES:
        resp.joint_names = list(model.joint_names)
        resp.joint_positions_out = _typed(r.q[:, :, 7:], False)
        resp.joint_rates_out = _typed(r.qdot[:, :, 6:], False)
    if outputs & Req.OUTPUT_FLAGS:
        resp.flags = array.array("B", np.asarray(r.flags, dtype=np.uint8).tobytes())
        resp.invalid_step = array.array("i", np.asarray(r.invalid_step, np.int32).tobytes())
    return resp


class PredictionNode(Node):
    """The prediction node; see the module docstring."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(NODE_NAME, **kwargs)
        # first: the file's values become those of the model parameters declared from here on
        self.calibration = declare_calibration_file(self)
        self.vehicle_params = declare_vehicle_parameters(self)
        opts = declare_options(self, PREDICTION_NODE)
        # the limits and outputs a parameter change replaces (_on_set_parameters)
        self.max_candidates: int = opts["max_candidates"]
        self.max_steps: int = opts["max_steps"]
        self.max_horizon: float = opts["max_horizon"]
        self.max_request_memory_mb: float = opts["max_request_memory_mb"]
        self.max_compute_time: float = opts["max_compute_time"]
        self.default_frame: str = opts["default_frame"]
        self.stabilization: float = opts["stabilization"]
        self.integrator: str = opts["integrator"]
        self.controller: str = opts["controller"]
        self.publish_path: bool = opts["publish_path"]
        self.publish_markers: bool = opts["publish_markers"]
        self.marker_stride: int = opts["marker_stride"]
        self.warmup: bool = opts["warmup"]
        self.executor_threads = opts["worker_threads"]
        self.propagate = opts["propagate_covariance"]
        period = opts["diagnostics_period"]
        self.model_values = declare_model_parameters(self, DEFAULT_QPRIME_U)
        self.wheel_values: dict[str, float] = {}
        self.base_model: VehicleModel | None = None
        self.model: VehicleModel | None = None
        self.model_error = ""
        try:
            self.terrain = terrain_from_parameters(self.vehicle_params)
        except WmrError as exc:
            self.get_logger().error(f"terrain: {exc}; using flat ground")
            self.terrain = flat()
        self.latest: Odometry | None = None
        self._lock = threading.Lock()  # counters, reservations, parameter snapshot
        self._room = threading.Condition(self._lock)
        self._reserved = 0
        self._in_flight = 0
        self.stats: Counter = Counter()
        self.rejected: Counter = Counter()
        self.compute_times: list[float] = []
        self.last_rejection = ""
        self.create_subscription(Odometry, "odom", self._on_odom, 10)
        self.pub_path = self.create_publisher(Path, "~/path", 1)
        self.pub_markers = self.create_publisher(MarkerArray, "~/covariance_markers", 1)
        self.pub_diag = self.create_publisher(DiagnosticArray, "/diagnostics", 10)
        self._rd_sub = None
        self._try_load(None)
        if self.model is None and not self.model_error:
            self.get_logger().info("waiting for the vehicle on the robot_description topic")
            self._rd_sub = subscribe_robot_description(self, self._on_robot_description)
        validate_parameters(self)
        self.add_post_set_parameters_callback(self._on_parameters_set)
        self._warm_up()
        reliable_service(self, PredictTrajectory, "~/predict", self._on_predict,
                         callback_group=ReentrantCallbackGroup())
        steady_timer(self, float(period), self._publish_diagnostics)

    # ---- setup --------------------------------------------------------------------------------
    def _try_load(self, xml: str | None) -> None:
        try:
            model = load_vehicle_from_parameters(self.vehicle_params, xml)
        except (WmrError, OSError) as exc:
            self.model_error = str(exc)
            self.get_logger().error(f"cannot load the vehicle: {exc}")
            return
        if model is None:
            return
        self.base_model = model
        self.wheel_values = declare_wheel_parameters(self, model)
        try:
            self._apply_wheels()
        except (WmrError, ValueError) as exc:
            self.model_error = str(exc)
            self.get_logger().error(f"wheel parameters: {exc}; using the vehicle's radii")
            self.model = model
        act = [model.joint_names[k] for k in model.actuated_joints]
        self.get_logger().info(f"prediction for {model.name}: actuated joints {act}")

    def _apply_wheels(self) -> None:
        """The served model: the loaded one with the ``wheel.<wheel>.radius`` values."""
        base = self.base_model
        assert base is not None
        changed = {k: v for k, v in self.wheel_values.items()
                   if v != float(base.wheel_radius[base.wheel_names.index(
                       k[len("wheel."):-len(".radius")])])}
        self.model = with_parameters(base, changed)

    def _on_robot_description(self, xml: str) -> None:
        if self.model is None:
            self._try_load(xml)
            if self.model is not None and self._rd_sub is not None:
                self.destroy_subscription(self._rd_sub)
                self._rd_sub = None
                self._warm_up()

    def _warm_up(self) -> None:
        """Serve one tiny body-twist request per fidelity, so that the kernels every request
        needs are compiled (or loaded from numba's cache) before the first real one; the
        counters in diagnostics do not include them."""
        if not self.warmup or self.model is None:
            return
        from wmr_model.ros.client import build_request

        t0 = time.perf_counter()
        with self._lock:
            saved = (Counter(self.stats), Counter(self.rejected), list(self.compute_times),
                     self.last_rejection)
            publish = self.publish_path, self.publish_markers
            self.publish_path = self.publish_markers = False  # nothing on the topics
        failed = []
        for fidelity in FIDELITY_NAMES.values():
            req = build_request(step_size=0.05, num_steps=2, fidelity=fidelity,
                                twists=np.array([[[0.1, 0.0]], [[0.1, 0.1]]]),
                                twist_durations=[0.1], pose=(0.0, 0.0, 0.0))
            resp = self._on_predict(req, PredictTrajectory.Response())
            if not resp.success:
                failed.append(f"{fidelity}: {resp.status_message}")
        with self._lock:
            self.stats, self.rejected, self.compute_times, self.last_rejection = saved
            self.publish_path, self.publish_markers = publish
        dt = time.perf_counter() - t0
        if failed:
            self.get_logger().warning(f"warm-up requests failed ({dt:.1f} s): {failed}")
        else:
            self.get_logger().info(f"kernels ready in {dt:.1f} s")

    def _on_parameters_set(self, params) -> None:
        """Apply accepted values (validated before by validate_parameters)."""
        names = set(model_parameter_names())
        wheels = False
        with self._lock:
            for p in params:
                if p.name in names:
                    self.model_values[p.name] = float(p.value)
                elif p.name in self.wheel_values:
                    self.wheel_values[p.name] = float(p.value)
                    wheels = True
                elif p.name == "propagate_covariance":
                    self.propagate = bool(p.value)
                elif p.name in ("max_candidates", "max_steps", "max_horizon",
                                "max_request_memory_mb", "max_compute_time", "default_frame",
                                "stabilization", "integrator", "controller", "publish_path",
                                "publish_markers", "marker_stride"):
                    setattr(self, p.name, p.value)
            if wheels and self.base_model is not None:
                self._apply_wheels()
        self.get_logger().info(f"parameters updated (apply from the next request): "
                               f"{sorted(p.name for p in params)}")

    def _on_odom(self, msg: Odometry) -> None:
        self.latest = msg

    # ---- requests -----------------------------------------------------------------------------
    def _fail(self, resp: PredictTrajectory.Response, message: str, reason: str,
              t0: float) -> PredictTrajectory.Response:
        resp.success = False
        resp.status_message = message
        resp.compute_time = time.perf_counter() - t0
        with self._lock:
            self.rejected[reason] += 1
            self.last_rejection = message
        self.get_logger().warning(f"request refused ({reason}): {message}")
        return resp

    def _on_predict(self, req: PredictTrajectory.Request,
                    resp: PredictTrajectory.Response) -> PredictTrajectory.Response:
        t0 = time.perf_counter()
        with self._lock:
            self.stats["requests"] += 1
            model, values = self.model, dict(self.model_values)
            budget_mb, node_time = float(self.max_request_memory_mb), float(self.max_compute_time)
            propagate, integrator = bool(self.propagate), str(self.integrator)
            controller = str(self.controller)
            stabilization = float(self.stabilization)
        if model is None:
            return self._fail(resp, "no vehicle model" + (f": {self.model_error}"
                                                         if self.model_error else " yet"),
                              "no_vehicle_model", t0)
        reserved: int | None = None
        try:
            outputs = request_outputs(req)
            float32, every, budget_s = _request_budget(req, node_time)
            fidelity = FIDELITY_NAMES.get(req.fidelity, "")
            covariance = propagate and bool(outputs & Req.OUTPUT_COVARIANCES) and (
                fidelity != "dynamic")
            need: dict[str, int] = {}
            guard = _memory_guard(model, fidelity, every, outputs, float32, covariance,
                                  budget_mb, need)
            inputs = prediction_inputs(model, req, self.latest,
                                       max_candidates=int(self.max_candidates),
                                       max_steps=int(self.max_steps),
                                       max_horizon=float(self.max_horizon),
                                       default_frame=self.default_frame, terrain=self.terrain,
                                       guard=guard, controller=controller)
            deadline = t0 + budget_s
            reserved = self._reserve(need.get("total", 0), budget_mb * 1e6, deadline)
            r = self._rollout(model, inputs, values, every, deadline, covariance, integrator,
                              stabilization)
            C = inputs.commands.shape[0]
            if r.partial and not req.allow_partial:
                raise RequestError(
                    f"max_compute_time {budget_s:g} s: {r.done} of {C} candidates computed in "
                    f"{r.seconds:.3f} s; set allow_partial to receive them, or ask for fewer "
                    f"candidates or steps", "time_budget")
            fill_compact(model, r, outputs, float32, resp)
            if outputs & (Req.OUTPUT_PATHS | Req.OUTPUT_JOINT_TRAJECTORIES):
                fill_messages(model, inputs, r.q, r.qdot, r.steps, resp,
                              paths=bool(outputs & Req.OUTPUT_PATHS),
                              trajectories=bool(outputs & Req.OUTPUT_JOINT_TRAJECTORIES))
        except RequestError as exc:
            return self._fail(resp, str(exc), exc.reason, t0)
        except WmrError as exc:
            return self._fail(resp, str(exc), "invalid_request", t0)
        except Exception as exc:  # never crash the service on a request
            self.get_logger().error(f"prediction failed: {type(exc).__name__}: {exc}")
            return self._fail(resp, f"internal error: {type(exc).__name__}: {exc}",
                              "internal_error", t0)
        finally:
            if reserved is not None:
                self._release(reserved)
        return self._succeed(resp, inputs, r, t0, covariance, propagate)

    def _rollout(self, model: VehicleModel, inputs: PredictionInputs, values: dict[str, float],
                 every: int, deadline: float, covariance: bool, integrator: str,
                 stabilization: float) -> Rollout:
        """Run the checked request."""
        Q = (qprime_from_parameters({k: v for k, v in values.items()
                                     if k.startswith("noise.U.")}) if covariance else None)
        return rollout(model, self.terrain, inputs.q0, inputs.commands, inputs.dt,
                       fidelity=inputs.fidelity, every=every, qdot0=inputs.qdot0,
                       deadline=deadline, slip_params={n: values[n] for n in SLIP_NAMES},
                       Qprime=Q, integrator=integrator, stabilization=stabilization,
                       controller=inputs.controller)

    def _reserve(self, nbytes: int, budget: float, deadline: float) -> int:
        """Reserve ``nbytes`` of the memory budget, waiting until the deadline for requests
        running to release theirs."""
        with self._room:
            while self._reserved and self._reserved + nbytes > budget:
                left = deadline - time.perf_counter()
                if left <= 0:
                    raise RequestError(
                        f"memory: about {nbytes / 1e6:.0f} MB needed while requests running "
                        f"hold {self._reserved / 1e6:.0f} MB of max_request_memory_mb "
                        f"{budget / 1e6:g}; none finished within the time budget", "busy")
                self._room.wait(left)
            self._reserved += nbytes
            self._in_flight += 1
        return nbytes

    def _release(self, nbytes: int) -> None:
        with self._room:
            self._reserved -= nbytes
            self._in_flight -= 1
            self._room.notify_all()

    def _succeed(self, resp, inputs: PredictionInputs, r: Rollout, t0: float,
                 covariance: bool, propagate: bool):
        resp.success = True
        C, T = inputs.commands.shape[:2]
        notes = []
        if inputs.placed:
            notes.append("2D pose placed on the terrain")
        if inputs.fidelity == "dynamic":
            notes.append(f"{DYNAMIC_ACTUATOR} actuators; no propagated covariance")
        n_bad = int(np.count_nonzero(r.invalid_step >= 0))
        if n_bad:
            notes.append(f"{n_bad} candidates invalid (FLAG_INVALID)")
        if r.partial:
            notes.append(f"partial: {r.done} of {C} candidates within the time budget")
        resp.status_message = (f"ok: {C} candidates x {T} steps, {inputs.fidelity}, "
                               f"{len(r.steps)} samples" + (f" ({'; '.join(notes)})"
                                                           if notes else ""))
        resp.compute_time = time.perf_counter() - t0
        with self._lock:
            self.stats["succeeded"] += 1
            self.stats["partial"] += int(r.partial)
            self.stats["candidates"] += int(r.done)
            self.stats["invalid candidates"] += n_bad
            self.compute_times.append(resp.compute_time)
        if (self.publish_path or self.publish_markers) and r.done:
            header = Header(frame_id=inputs.frame_id, stamp=cv.seconds_to_stamp(inputs.stamp))
            if self.publish_path:
                headers = [Header(frame_id=inputs.frame_id, stamp=s)
                           for s in cv.stamp_list(inputs.stamp + r.steps * inputs.dt)]
                self.pub_path.publish(Path(header=header,
                                           poses=cv.pose_stamped_list(headers, r.q[0])))
            if self.publish_markers:
                self.pub_markers.publish(self._markers(header, r))
        return resp

    def _markers(self, header: Header, r: Rollout) -> MarkerArray:
        out = MarkerArray()
        out.markers.append(Marker(header=header, action=Marker.DELETEALL))
        for c in range(min(r.done, 100)):
            line = Marker(header=header, ns="candidates", id=c, type=Marker.LINE_STRIP,
                          action=Marker.ADD)
            line.scale.x = 0.02
            line.color.g, line.color.a = 1.0, 0.6
            line.pose.orientation.w = 1.0
            line.points = [cv.arrays_to_pose(p, (1, 0, 0, 0)).position
                           for p in r.q[c, :, 4:7] if np.all(np.isfinite(p))]
            out.markers.append(line)
        if r.ros_covariance is None:
            return out
        P = r.ros_covariance[0].reshape(-1, 6, 6)  # (x, y, z, rx, ry, rz) ROS layout
        for i, s in enumerate(range(0, P.shape[0], int(self.marker_stride))):
            if not np.all(np.isfinite(P[s])) or not np.all(np.isfinite(r.q[0, s, 4:7])):
                continue
            lam, V = np.linalg.eigh(P[s, 0:2, 0:2])
            m = Marker(header=header, ns="covariance", id=i, type=Marker.SPHERE,
                       action=Marker.ADD)
            m.pose.position = cv.arrays_to_pose(r.q[0, s, 4:7], (1, 0, 0, 0)).position
            yaw = math.atan2(V[1, 1], V[0, 1])
            m.pose.orientation.z, m.pose.orientation.w = math.sin(yaw / 2), math.cos(yaw / 2)
            # 2-sigma ellipse: diameter 4 sigma; tiny floor so RViz shows something at t = 0
            m.scale.x = max(4.0 * math.sqrt(max(lam[1], 0.0)), 1e-3)
            m.scale.y = max(4.0 * math.sqrt(max(lam[0], 0.0)), 1e-3)
            m.scale.z = max(4.0 * math.sqrt(max(P[s, 2, 2], 0.0)), 1e-3)
            m.color.b, m.color.a = 1.0, 0.3
            out.markers.append(m)
        return out

    # ---- diagnostics --------------------------------------------------------------------------
    def _publish_diagnostics(self) -> None:
        with self._lock:
            stats, rejected = dict(self.stats), dict(self.rejected)
            times, self.compute_times = self.compute_times, []
            in_flight, reserved = self._in_flight, self._reserved
            last = self.last_rejection
        st = DiagnosticStatus(name=f"{self.get_fully_qualified_name()}: prediction",
                              hardware_id="wmr_model")
        values = [KeyValue(key=k, value=str(stats.get(k, 0)))
                  for k in ("requests", "succeeded", "partial", "candidates",
                            "invalid candidates")]
        values.append(KeyValue(key="rejected", value=str(sum(rejected.values()))))
        values += [KeyValue(key=f"rejected {k}", value=str(v)) for k, v in sorted(
            rejected.items())]
        values += [KeyValue(key="in flight", value=str(in_flight)),
                   KeyValue(key="reserved memory [MB]", value=f"{reserved / 1e6:.1f}"),
                   KeyValue(key="last rejection", value=last)]
        if times:
            values += [KeyValue(key="compute time mean [s]", value=f"{np.mean(times):.4f}"),
                       KeyValue(key="compute time max [s]", value=f"{np.max(times):.4f}"),
                       KeyValue(key="requests in period", value=str(len(times)))]
        level, problems = DiagnosticStatus.OK, []
        if self.model is None:
            level = DiagnosticStatus.ERROR
            problems.append("no vehicle model" + (f": {self.model_error}"
                                                  if self.model_error else " yet"))
        if rejected.get("internal_error"):
            level = max(level, DiagnosticStatus.WARN)
            problems.append(f"{rejected['internal_error']} requests failed internally")
        publish_status(self, self.pub_diag, st, level, problems, values)


def main(args: list[str] | None = None) -> int:
    """Entry point of ``ros2 run wmr_model prediction_node``."""
    return spin_node(PredictionNode, args)
