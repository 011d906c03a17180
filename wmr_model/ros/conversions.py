"""Message <-> array conversions (no physics).

Conventions bridged here, once:

* quaternions: ROS messages are ``(x, y, z, w)``, wmr_model arrays are ``[w, x, y, z]``;
* covariances: REP-145 marks "not provided" with ``-1`` in element 0; an all-zero covariance
  means "unknown" (sensor_msgs/Imu comment) - both become ``None``;
* pose covariance order ``(x, y, z, rx, ry, rz)`` and twist order ``(vx, vy, vz, wx, wy, wz)``
  are produced by the core (:func:`wmr_model.uncertainty.to_ros_pose_covariance`,
  :func:`wmr_model.odometry.twist_covariance_ros`);
* stamps: ``builtin_interfaces/Time`` <-> float seconds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from builtin_interfaces.msg import Duration, Time
from geometry_msgs.msg import Point, Pose, Quaternion, TransformStamped, Vector3
from nav_msgs.msg import Odometry

__all__ = [
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
]


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


def wxyz_to_quaternion(o: Sequence[float]) -> Quaternion:
    """Array ``[w, x, y, z]`` -> ``geometry_msgs/Quaternion``."""
    return Quaternion(w=float(o[0]), x=float(o[1]), y=float(o[2]), z=float(o[3]))


def covariance_or_none(values: Sequence[float], n: int = 3) -> np.ndarray | None:
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


def arrays_to_pose(position: Sequence[float], orientation_wxyz: Sequence[float]) -> Pose:
    """``(position (3,), orientation [w, x, y, z])`` -> ``geometry_msgs/Pose``."""
    return Pose(position=Point(x=float(position[0]), y=float(position[1]),
                               z=float(position[2])),
                orientation=wxyz_to_quaternion(orientation_wxyz))


def odometry_message(stamp: float, frame_id: str, child_frame_id: str,
                     position: Sequence[float], orientation_wxyz: Sequence[float],
                     pose_covariance: Sequence[float], linear: Sequence[float],
                     angular: Sequence[float], twist_covariance: Sequence[float]) -> Odometry:
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
