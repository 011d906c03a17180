"""Python client of the prediction service: NumPy arrays in, NumPy arrays out.

A planner written in Python builds a ``PredictTrajectory`` request from arrays
(:func:`build_request`) and reads the compact answer back as arrays with the batch axis first
(:func:`parse_response` -> :class:`PredictionResult`); :class:`PredictionClient` does both
around an rclpy service client::

    client = PredictionClient(node, "/prediction_node/predict")
    res = client.predict(twists=np.stack([vx, wz], -1)[:, None], twist_durations=[5.0],
                         step_size=0.04, num_steps=125, pose=(x, y, yaw),
                         fidelity="enhanced", every=125)
    ends = res.positions[:, -1]            # (C, 3) end positions [m]
    cov = res.covariances[:, -1]           # (C, 6, 6) ROS layout (x, y, z, rx, ry, rz)
    ok = res.valid                         # (C,) no FLAG_INVALID

Layouts are those documented in ``srv/PredictTrajectory.srv``.
"""

from __future__ import annotations

import array
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from wmr_model.errors import ShapeError
from wmr_model.ros.runner import call_service
from wmr_model.srv import PredictTrajectory

__all__ = ["OUTPUT_NAMES", "FIDELITIES", "PredictionResult", "build_request", "parse_response",
           "PredictionClient"]

Req = PredictTrajectory.Request
Resp = PredictTrajectory.Response

#: Output names accepted by :func:`build_request` and their request bits.
OUTPUT_NAMES = {
    "poses": Req.OUTPUT_POSES,
    "covariances": Req.OUTPUT_COVARIANCES,
    "joint_states": Req.OUTPUT_JOINT_STATES,
    "flags": Req.OUTPUT_FLAGS,
    "stability_margin": Req.OUTPUT_STABILITY_MARGIN,
    "paths": Req.OUTPUT_PATHS,
    "joint_trajectories": Req.OUTPUT_JOINT_TRAJECTORIES,
}
FIDELITIES = {"kinematic": Req.KINEMATIC, "enhanced": Req.ENHANCED, "dynamic": Req.DYNAMIC}


@dataclass(frozen=True)
class PredictionResult:
    """A ``PredictTrajectory`` response as arrays; N = candidates returned, S = samples.

    Attributes:
        poses: (N, S, 7) ``[x, y, z, qx, qy, qz, qw]`` in the request's frame, or None.
        covariances: (N, S, 6, 6) pose covariances in ROS order (x, y, z, rx, ry, rz), or None.
        joint_positions, joint_rates: (N, S, nj) in ``joint_names`` order, or None.
        stability_margin: (N, S) tip-over margin [m], or None.
        flags: (N, S) uint8 bitmask (``FLAG_*`` of the response), or None.
        invalid_step: (N,) first non-finite / off-terrain step, -1 when valid, or None.
        steps: (S,) step index of each sample; ``times`` = ``steps * step_size`` [s].
    """

    success: bool
    status_message: str
    partial: bool
    steps: np.ndarray
    times: np.ndarray
    poses: np.ndarray | None
    covariances: np.ndarray | None
    joint_names: list[str]
    joint_positions: np.ndarray | None
    joint_rates: np.ndarray | None
    stability_margin: np.ndarray | None
    flags: np.ndarray | None
    invalid_step: np.ndarray | None
    compute_time: float
    paths: list
    joint_trajectories: list

    @property
    def positions(self) -> np.ndarray | None:
        """(N, S, 3) body positions [m]."""
        return None if self.poses is None else self.poses[..., 0:3]

    @property
    def valid(self) -> np.ndarray | None:
        """(N,) True for candidates never flagged FLAG_INVALID."""
        return None if self.invalid_step is None else self.invalid_step < 0


def _outputs_mask(outputs: Iterable[str] | int | None) -> int:
    if outputs is None:
        return 0
    if isinstance(outputs, int):
        return outputs
    mask = 0
    for name in outputs:
        if name not in OUTPUT_NAMES:
            raise ValueError(f"outputs: unknown output {name!r}; known: {sorted(OUTPUT_NAMES)}")
        mask |= OUTPUT_NAMES[name]
    return mask


def _doubles(a: Any) -> array.array:
    out = array.array("d")
    out.frombytes(np.ascontiguousarray(a, dtype=np.float64).tobytes())
    return out


def build_request(*, step_size: float, num_steps: int | None = None,
                  commands: np.ndarray | None = None,
                  command_joint_names: Sequence[str] = (),
                  twists: np.ndarray | None = None,
                  twist_durations: Sequence[float] | None = None,
                  pose: Sequence[float] | None = None, use_latest_odometry: bool = False,
                  joint_positions: Mapping[str, float] | None = None,
                  joint_rates: Mapping[str, float] | None = None,
                  initial_twist: Sequence[float] | None = None,
                  fidelity: str = "enhanced", every: int = 1,
                  outputs: Iterable[str] | int | None = None, float32: bool = False,
                  frame_id: str = "", stamp: float = 0.0, max_compute_time: float = 0.0,
                  allow_partial: bool = False) -> Any:
    """A ``PredictTrajectory`` request from arrays.

    Args:
        step_size: [s]; ``num_steps`` T (default: the commands' T).
        commands: (C, T, J) joint rates [rad/s or m/s] of ``command_joint_names`` (J), or
        twists: (C, G, 2) body twist segments ``(vx [m/s], wz [rad/s])`` held for
            ``twist_durations`` (G,) [s] (the last one to the end of the horizon).
        pose: ``(x, y, yaw)`` 2D (placed on the terrain by the node) or ``(x, y, z, qx, qy,
            qz, qw)`` 3D (taken as is); ignored with ``use_latest_odometry``.
        joint_positions, joint_rates: initial values by joint name (others: neutral, 0).
        initial_twist: ``(vx, vy, vz, wx, wy, wz)`` body twist (DYNAMIC's initial velocity).
        fidelity: ``"kinematic"``, ``"enhanced"`` or ``"dynamic"``.
        every: sampling stride (``every >= T``: start and end only).
        outputs: names of :data:`OUTPUT_NAMES` (default: the node's OUTPUT_DEFAULT).
        float32: poses, covariances and margins in float32.
    """
    req = Req()
    req.header.frame_id = frame_id
    if stamp:
        ns = int(round(stamp * 1e9))
        req.header.stamp.sec, req.header.stamp.nanosec = ns // 1_000_000_000, ns % 1_000_000_000
    if fidelity not in FIDELITIES:
        raise ValueError(f"fidelity: must be one of {list(FIDELITIES)}, got {fidelity!r}")
    req.fidelity = FIDELITIES[fidelity]
    req.step_size = float(step_size)
    if (commands is None) == (twists is None):
        raise ValueError("give exactly one of commands (C, T, J) and twists (C, G, 2)")
    if commands is not None:
        C, T = _set_joint_commands(req, commands, command_joint_names, num_steps)
    else:
        C, T = _set_twist_commands(req, twists, twist_durations, num_steps)
    req.num_candidates, req.num_steps = int(C), int(T)
    req.use_latest_odometry = bool(use_latest_odometry)
    _set_initial_pose(req, pose, use_latest_odometry)
    positions = dict(joint_positions or {})
    names = list(positions)
    req.joint_names = names
    req.joint_positions = [float(positions[n]) for n in names]
    if joint_rates:
        unknown = set(joint_rates) - set(names)
        if unknown:
            raise ValueError(f"joint_rates: joints {sorted(unknown)} need a joint_positions "
                             f"entry too")
        req.joint_rates = [float(joint_rates.get(n, 0.0)) for n in names]
    if initial_twist is not None:
        v = [float(x) for x in initial_twist]
        t = req.initial_twist
        t.linear.x, t.linear.y, t.linear.z, t.angular.x, t.angular.y, t.angular.z = v
    req.every = int(every)
    req.outputs = _outputs_mask(outputs)
    req.precision = Req.FLOAT32 if float32 else Req.FLOAT64
    req.max_compute_time = float(max_compute_time)
    req.allow_partial = bool(allow_partial)
    return req


def _set_joint_commands(req: Any, commands: Any, command_joint_names: Sequence[str],
                        num_steps: int | None) -> tuple[int, int]:
    """JOINT_RATES ``commands`` (C, T, J) into ``req``; returns ``(C, T)``."""
    u = np.asarray(commands, dtype=float)
    if u.ndim != 3 or u.shape[2] != len(command_joint_names):
        raise ShapeError(f"commands: expected (C, T, {len(command_joint_names)}) for "
                         f"command_joint_names {list(command_joint_names)}, got {u.shape}")
    req.command_type = Req.JOINT_RATES
    req.command_joint_names = list(command_joint_names)
    req.joint_commands = _doubles(u)
    return u.shape[0], u.shape[1] if num_steps is None else int(num_steps)


def _set_twist_commands(req: Any, twists: Any, twist_durations: Sequence[float] | None,
                        num_steps: int | None) -> tuple[int, int]:
    """BODY_TWIST segments ``twists`` (C, G, 2) held for ``twist_durations`` (G,) into
    ``req``; returns ``(C, T)``."""
    from geometry_msgs.msg import Twist

    tw = np.asarray(twists, dtype=float)
    if tw.ndim != 3 or tw.shape[2] != 2:
        raise ShapeError(f"twists: expected (C, G, 2) rows (vx, wz), got {tw.shape}")
    durations = np.asarray(twist_durations if twist_durations is not None else [],
                           dtype=float)
    if durations.shape != (tw.shape[1],):
        raise ShapeError(f"twist_durations: expected ({tw.shape[1]},), got "
                         f"{durations.shape}")
    if num_steps is None:
        raise ValueError("num_steps: needed with twists")
    req.command_type = Req.BODY_TWIST
    msgs = []
    for vx, wz in tw.reshape(-1, 2).tolist():
        m = Twist()
        m.linear.x, m.angular.z = vx, wz
        msgs.append(m)
    req.twist_commands = msgs
    req.twist_durations = durations.tolist()
    return tw.shape[0], int(num_steps)


def _set_initial_pose(req: Any, pose: Sequence[float] | None, use_latest_odometry: bool) -> None:
    """``pose`` (x, y, yaw) as POSE_2D or (x, y, z, qx, qy, qz, qw) as POSE_3D into ``req``;
    without a pose and odometry, the origin as POSE_2D."""
    if pose is not None:
        p = [float(v) for v in pose]
        o = req.initial_pose.orientation
        if len(p) == 3:
            req.initial_pose_mode = Req.POSE_2D
            req.initial_pose.position.x, req.initial_pose.position.y = p[0], p[1]
            o.z, o.w = math.sin(p[2] / 2), math.cos(p[2] / 2)
        elif len(p) == 7:
            req.initial_pose_mode = Req.POSE_3D
            pos = req.initial_pose.position
            pos.x, pos.y, pos.z = p[0:3]
            o.x, o.y, o.z, o.w = p[3:7]
        else:
            raise ShapeError(f"pose: expected (x, y, yaw) or (x, y, z, qx, qy, qz, qw), got "
                             f"{len(p)} values")
    elif not use_latest_odometry:
        req.initial_pose.orientation.w = 1.0
        req.initial_pose_mode = Req.POSE_2D


def _array(values: Any, dtype: Any, shape: tuple[int, ...]) -> np.ndarray | None:
    a = np.frombuffer(values, dtype=dtype) if isinstance(values, array.array) else np.asarray(
        values, dtype=dtype)
    if a.size == 0:
        return None
    return a.reshape(shape)


def parse_response(resp: Any, step_size: float = 0.0) -> PredictionResult:
    """Arrays (N, S, ...) of a ``PredictTrajectory`` response (``step_size`` of its request
    gives ``times``). A failed response has ``success`` False and every array None."""
    steps = np.asarray(resp.steps, dtype=np.int64)
    N, S = int(resp.num_candidates_done), steps.size
    nj = len(resp.joint_names)
    poses = _array(resp.poses, np.float64, (N, S, 7))
    if poses is None:
        poses = _array(resp.poses_f32, np.float32, (N, S, 7))
    cov = _array(resp.pose_covariances, np.float64, (N, S, 6, 6))
    if cov is None:
        cov = _array(resp.pose_covariances_f32, np.float32, (N, S, 6, 6))
    margin = _array(resp.stability_margin, np.float64, (N, S))
    if margin is None:
        margin = _array(resp.stability_margin_f32, np.float32, (N, S))
    return PredictionResult(
        success=bool(resp.success), status_message=str(resp.status_message),
        partial=bool(resp.partial), steps=steps, times=steps * float(step_size), poses=poses,
        covariances=cov, joint_names=list(resp.joint_names),
        joint_positions=_array(resp.joint_positions_out, np.float64, (N, S, nj)),
        joint_rates=_array(resp.joint_rates_out, np.float64, (N, S, nj)),
        stability_margin=margin, flags=_array(resp.flags, np.uint8, (N, S)),
        invalid_step=_array(resp.invalid_step, np.int32, (N,)),
        compute_time=float(resp.compute_time), paths=list(resp.paths),
        joint_trajectories=list(resp.joint_trajectories))


class PredictionClient:
    """An rclpy client of ``~/predict`` taking and returning arrays.

    ``node`` is the caller's rclpy node. :meth:`predict` spins it until the answer arrives,
    so use it from a node no other executor is spinning; otherwise use :meth:`call_async`
    and :func:`parse_response` in your own callbacks.
    """

    def __init__(self, node: Any, service: str = "prediction_node/predict") -> None:
        self.node = node
        self.client = node.create_client(PredictTrajectory, service)

    def wait_for_service(self, timeout: float = 10.0) -> bool:
        """True once the service is available (False after ``timeout`` seconds)."""
        return bool(self.client.wait_for_service(timeout_sec=timeout))

    def call_async(self, request: Any) -> Any:
        """``rclpy`` future of the raw response."""
        return self.client.call_async(request)

    def predict(self, *, timeout: float = 60.0, executor: Any = None,
                **request: Any) -> PredictionResult:
        """Build the request (keywords of :func:`build_request`), call, parse; TimeoutError
        after ``timeout`` seconds. A request left unanswered is sent again (see
        :func:`wmr_model.ros.runner.call_service`)."""
        import rclpy

        req = build_request(**request)
        if executor is not None:
            def spin(dt: float) -> None:
                executor.spin_once(timeout_sec=dt)
        else:
            def spin(dt: float) -> None:
                rclpy.spin_once(self.node, timeout_sec=dt)
        return parse_response(call_service(self.client, req, timeout=timeout, spin=spin),
                              req.step_size)
