"""Message <-> array conversions (no physics).

Conventions bridged here, once:

* quaternions: ROS messages are ``(x, y, z, w)``, wmr_model arrays are ``[w, x, y, z]``;
* covariances: REP-145 marks "not provided" with ``-1`` in element 0; an all-zero covariance
  means "unknown" (sensor_msgs/Imu comment) - both become ``None``;
* pose covariance order ``(x, y, z, rx, ry, rz)`` and twist order ``(vx, vy, vz, wx, wy, wz)``
  are produced by the core (:func:`wmr_model.kinematics.uncertainty.to_ros_pose_covariance`,
  :func:`wmr_model.estimation.odometry.twist_covariance_ros`);
* stamps: ``builtin_interfaces/Time`` <-> float seconds.

Bulk builders (:func:`pose_stamped_list`, :func:`trajectory_points`) fill tens of thousands of
messages for the prediction service. The generated constructors build (and throw away) a default
object for every nested field even when one is passed, so these builders allocate the objects
with ``__new__`` and write the generated ``_<field>`` slots directly - only where the class has
exactly the expected slots (checked once at import, :func:`_has_slots`); otherwise they use the
public constructors. Tests compare both paths field by field and through serialization.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from builtin_interfaces.msg import Duration, Time
from geometry_msgs.msg import Point, Pose, PoseStamped, Quaternion, TransformStamped, Vector3
from nav_msgs.msg import Odometry
from std_msgs.msg import Header
from trajectory_msgs.msg import JointTrajectoryPoint

__all__ = [
    "publish_status",
    "stamp_to_seconds",
    "seconds_to_stamp",
    "seconds_to_duration",
    "quaternion_to_wxyz",
    "wxyz_to_quaternion",
    "covariance_or_none",
    "ImuSample",
    "imu_sample",
    "EncoderSample",
    "encoder_sample",
    "pose_to_arrays",
    "arrays_to_pose",
    "odometry_message",
    "transform_message",
    "finite",
    "stamp_list",
    "duration_list",
    "pose_stamped_list",
    "trajectory_points",
    "FAST_BUILD",
]

#: A vector argument: a list or tuple of floats, or an array (the estimators' outputs).
Vector = Sequence[float] | np.ndarray


def stamp_to_seconds(stamp: Time) -> float:
    """``builtin_interfaces/Time`` -> seconds (float)."""
    return float(stamp.sec) + 1e-9 * float(stamp.nanosec)


def seconds_to_stamp(t: float) -> Time:
    """Seconds -> ``builtin_interfaces/Time`` (nanoseconds rounded; t >= 0)."""
    ns = int(round(t * 1e9))
    return Time(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)


def seconds_to_duration(t: float) -> Duration:
    """Seconds -> ``builtin_interfaces/Duration``."""
    ns = int(round(t * 1e9))
    return Duration(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)


def quaternion_to_wxyz(q: Quaternion) -> np.ndarray:
    """``geometry_msgs/Quaternion`` (x, y, z, w) -> array (4,) ``[w, x, y, z]``."""
    return np.array([q.w, q.x, q.y, q.z], dtype=float)


def wxyz_to_quaternion(o: Vector) -> Quaternion:
    """Array ``[w, x, y, z]`` -> ``geometry_msgs/Quaternion``."""
    return Quaternion(w=float(o[0]), x=float(o[1]), y=float(o[2]), z=float(o[3]))


def covariance_or_none(values: Vector, n: int = 3) -> np.ndarray | None:
    """(n*n,) message covariance -> (n, n), or None when not provided (REP-145 -1, all zero,
    non-finite)."""
    c = np.asarray(values, dtype=float).reshape(n, n)
    if c[0, 0] == -1.0 or not np.all(np.isfinite(c)) or not np.any(c):
        return None
    return c


@dataclass(frozen=True)
class ImuSample:
    """One ``sensor_msgs/Imu`` as arrays: stamp [s], angular velocity (3,) or None when not
    provided, orientation ``[w, x, y, z]`` or None, covariances (3, 3) or None."""

    stamp: float
    frame_id: str
    angular_velocity: np.ndarray | None
    orientation: np.ndarray | None
    angular_velocity_covariance: np.ndarray | None
    orientation_covariance: np.ndarray | None


def imu_sample(msg) -> ImuSample:
    """Convert ``sensor_msgs/Imu`` honouring REP-145's "-1 = not provided" per field."""
    oc_raw = np.asarray(msg.orientation_covariance, dtype=float)
    wc_raw = np.asarray(msg.angular_velocity_covariance, dtype=float)
    o = quaternion_to_wxyz(msg.orientation)
    orientation = None
    if oc_raw[0] != -1.0 and np.all(np.isfinite(o)) and float(o @ o) > 0.5:
        orientation = o
    w = msg.angular_velocity
    gyro = None if wc_raw[0] == -1.0 else np.array([w.x, w.y, w.z], dtype=float)
    return ImuSample(stamp_to_seconds(msg.header.stamp), msg.header.frame_id, gyro, orientation,
                     covariance_or_none(wc_raw), covariance_or_none(oc_raw))


@dataclass(frozen=True)
class EncoderSample:
    """One ``sensor_msgs/JointState``: stamp [s], names, positions and velocities (possibly
    empty: "not provided")."""

    stamp: float
    names: list[str]
    positions: np.ndarray
    velocities: np.ndarray


def encoder_sample(msg) -> EncoderSample:
    """Convert ``sensor_msgs/JointState`` (lengths are checked by the odometry, not here)."""
    return EncoderSample(stamp_to_seconds(msg.header.stamp), list(msg.name),
                         np.asarray(msg.position, dtype=float),
                         np.asarray(msg.velocity, dtype=float))


def pose_to_arrays(pose: Pose) -> tuple[np.ndarray, np.ndarray]:
    """``geometry_msgs/Pose`` -> ``(position (3,), orientation [w, x, y, z] (4,))``."""
    p = pose.position
    return np.array([p.x, p.y, p.z], dtype=float), quaternion_to_wxyz(pose.orientation)


def arrays_to_pose(position: Vector, orientation_wxyz: Vector) -> Pose:
    """``(position (3,), orientation [w, x, y, z])`` -> ``geometry_msgs/Pose``."""
    return Pose(position=Point(x=float(position[0]), y=float(position[1]),
                               z=float(position[2])),
                orientation=wxyz_to_quaternion(orientation_wxyz))


def odometry_message(stamp: float, frame_id: str, child_frame_id: str,
                     position: Vector, orientation_wxyz: Vector, pose_covariance: Vector,
                     linear: Vector, angular: Vector, twist_covariance: Vector) -> Odometry:
    """``nav_msgs/Odometry`` (REP-105: pose in ``frame_id``, twist in ``child_frame_id``)."""
    msg = Odometry()
    msg.header.stamp = seconds_to_stamp(stamp)
    msg.header.frame_id = frame_id
    msg.child_frame_id = child_frame_id
    msg.pose.pose = arrays_to_pose(position, orientation_wxyz)
    msg.pose.covariance = [float(v) for v in pose_covariance]
    msg.twist.twist.linear = Vector3(x=float(linear[0]), y=float(linear[1]), z=float(linear[2]))
    msg.twist.twist.angular = Vector3(x=float(angular[0]), y=float(angular[1]),
                                      z=float(angular[2]))
    msg.twist.covariance = [float(v) for v in twist_covariance]
    return msg


def transform_message(odom: Odometry) -> TransformStamped:
    """The odom -> base_link transform of an Odometry message."""
    t = TransformStamped()
    t.header = odom.header
    t.child_frame_id = odom.child_frame_id
    p = odom.pose.pose.position
    t.transform.translation = Vector3(x=p.x, y=p.y, z=p.z)
    t.transform.rotation = odom.pose.pose.orientation
    return t


def finite(values: Sequence[float]) -> bool:
    """True when every value is a finite float."""
    return all(math.isfinite(float(v)) for v in values)


# ---- bulk builders ------------------------------------------------------------------------------
def _has_slots(cls: type) -> bool:
    """True when ``cls`` stores each field ``f`` in slot ``_f`` plus ``_check_fields`` (the
    layout rosidl_generator_py emits since Jazzy)."""
    fields = getattr(cls, "_fields_and_field_types", None)
    slots = getattr(cls, "__slots__", None)
    if not isinstance(fields, dict) or slots is None:
        return False
    return set(slots) == {"_" + f for f in fields} | {"_check_fields"}


#: Bulk builders write slots directly (True) or use the public constructors (False).
FAST_BUILD = all(_has_slots(c) for c in (Time, Duration, Header, Point, Quaternion, Pose,
                                         PoseStamped, JointTrajectoryPoint))

_new = object.__new__


def _split_ns(t: np.ndarray) -> tuple[list[int], list[int]]:
    ns = np.rint(np.asarray(t, dtype=float) * 1e9).astype(np.int64)
    return (ns // 1_000_000_000).tolist(), (ns % 1_000_000_000).tolist()


def stamp_list(times: np.ndarray) -> list[Time]:
    """``builtin_interfaces/Time`` (T,) of times [s] (T,) (as :func:`seconds_to_stamp`)."""
    sec, nsec = _split_ns(times)
    return [Time(sec=s, nanosec=n) for s, n in zip(sec, nsec)]


def duration_list(times: np.ndarray) -> list[Duration]:
    """``builtin_interfaces/Duration`` (T,) of durations [s] (T,)."""
    sec, nsec = _split_ns(times)
    return [Duration(sec=s, nanosec=n) for s, n in zip(sec, nsec)]


def pose_stamped_list(headers: Sequence[Header], q: np.ndarray) -> list[PoseStamped]:
    """``geometry_msgs/PoseStamped`` (T,) from poses ``q`` (T, >=7) ``[w, x, y, z, px, py, pz,
    ...]`` (the free-flyer part of a state) and one header per pose (shared, not copied)."""
    rows = np.asarray(q, dtype=float)[:, :7].tolist()
    if len(rows) != len(headers):
        raise ValueError(f"pose_stamped_list: {len(headers)} headers for {len(rows)} poses")
    out: list[PoseStamped] = []
    append = out.append
    if not FAST_BUILD:
        for h, (w, x, y, z, px, py, pz) in zip(headers, rows):
            append(PoseStamped(header=h, pose=Pose(
                position=Point(x=px, y=py, z=pz), orientation=Quaternion(w=w, x=x, y=y, z=z))))
        return out
    for h, (w, x, y, z, px, py, pz) in zip(headers, rows):
        pt = _new(Point)
        pt._check_fields = False
        pt._x, pt._y, pt._z = px, py, pz
        o = _new(Quaternion)
        o._check_fields = False
        o._x, o._y, o._z, o._w = x, y, z, w
        pose = _new(Pose)
        pose._check_fields = False
        pose._position, pose._orientation = pt, o
        ps = _new(PoseStamped)
        ps._check_fields = False
        ps._header, ps._pose = h, pose
        append(ps)
    return out


def trajectory_points(positions: np.ndarray, velocities: np.ndarray,
                      times_from_start: Sequence[Duration]) -> list[JointTrajectoryPoint]:
    """``trajectory_msgs/JointTrajectoryPoint`` (T,) from positions and velocities (T, nj)
    (``velocities`` may have 0 columns: not given) and one Duration per point (shared)."""
    P = np.ascontiguousarray(positions, dtype=np.float64)
    V = np.ascontiguousarray(velocities, dtype=np.float64)
    if P.ndim != 2 or V.ndim != 2 or V.shape[0] != P.shape[0] or (
            V.shape[1] not in (0, P.shape[1])) or len(times_from_start) != P.shape[0]:
        raise ValueError(f"trajectory_points: positions {P.shape}, velocities {V.shape}, "
                         f"{len(times_from_start)} times: expected (T, nj), (T, nj or 0), T")
    # one bytes object per array, sliced per row: array('d', list) would box every value
    pb, vb = P.tobytes(), V.tobytes()
    sp, sv = 8 * P.shape[1], 8 * V.shape[1]
    out: list[JointTrajectoryPoint] = []
    append = out.append
    for t, d in enumerate(times_from_start):
        a = array("d")
        a.frombytes(pb[t * sp:(t + 1) * sp])
        b = array("d")
        b.frombytes(vb[t * sv:(t + 1) * sv])
        if FAST_BUILD:
            pt = _new(JointTrajectoryPoint)
            pt._check_fields = False
            pt._positions, pt._velocities = a, b
            pt._accelerations, pt._effort = array("d"), array("d")
            pt._time_from_start = d
        else:
            pt = JointTrajectoryPoint(positions=a, velocities=b, time_from_start=d)
        append(pt)
    return out


def publish_status(node, publisher, status, level: int, problems: list[str], values: list) -> None:
    """Finish a DiagnosticStatus (level, "; "-joined problems or "ok", key values) and publish
    it alone in a DiagnosticArray stamped with the node's clock."""
    from diagnostic_msgs.msg import DiagnosticArray

    status.level = level
    status.message = "; ".join(problems) if problems else "ok"
    status.values = values
    arr = DiagnosticArray(status=[status])
    arr.header.stamp = node.get_clock().now().to_msg()
    publisher.publish(arr)
