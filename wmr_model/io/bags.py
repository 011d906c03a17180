"""Read the streams a motion model needs from rosbag2 (MCAP, SQLite3) and ROS 1 bags.

Uses the ``rosbags`` library (no ROS install needed). Each stream comes back as arrays with one
row per message, in bag order, stamped by the message header (the sensor's time) with the bag's
receive time kept beside it; nothing is re-ordered, de-duplicated or interpolated here — the
consumers (odometry, calibration) own those policies and report what they dropped.

Supported message types per stream kind:

==============  ===========================================================================
kind            types
==============  ===========================================================================
joint_states    ``sensor_msgs/msg/JointState``
imu             ``sensor_msgs/msg/Imu`` (orientation NaN when ``orientation_covariance[0]``
                is -1, REP-145's "not provided")
pose            ``nav_msgs/msg/Odometry``, ``geometry_msgs/msg/PoseWithCovarianceStamped``,
                ``geometry_msgs/msg/PoseStamped``
twist           ``geometry_msgs/msg/TwistStamped``, ``geometry_msgs/msg/Twist`` (bag time)
==============  ===========================================================================

Quaternions are returned scalar first ``[w, x, y, z]`` like the rest of the package.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from wmr_model.errors import BagError

__all__ = [
    "JointStateSeries",
    "ImuSeries",
    "PoseSeries",
    "TwistSeries",
    "BagStreams",
    "bag_topics",
    "open_bag",
    "read_streams",
    "KIND_TYPES",
]

KIND_TYPES: dict[str, tuple[str, ...]] = {
    "joint_states": ("sensor_msgs/msg/JointState",),
    "imu": ("sensor_msgs/msg/Imu",),
    "pose": ("nav_msgs/msg/Odometry", "geometry_msgs/msg/PoseWithCovarianceStamped",
             "geometry_msgs/msg/PoseStamped"),
    "twist": ("geometry_msgs/msg/TwistStamped", "geometry_msgs/msg/Twist"),
}


@dataclass(frozen=True)
class JointStateSeries:
    """Encoder stream. ``position``/``velocity``/``effort``: (N, nj) in ``names`` order, NaN
    where a message did not carry that joint or field. ``stamp``/``receive_time``: (N,) [s]."""

    topic: str
    stamp: np.ndarray
    receive_time: np.ndarray
    names: tuple[str, ...]
    position: np.ndarray
    velocity: np.ndarray
    effort: np.ndarray


@dataclass(frozen=True)
class ImuSeries:
    """IMU stream (REP-145). ``orientation`` (N, 4) [w, x, y, z] (NaN rows when not provided),
    ``angular_velocity`` (N, 3) [rad/s], ``linear_acceleration`` (N, 3) [m/s^2], the three
    covariances (N, 3, 3) as published (-1 in element 0 means "not provided")."""

    topic: str
    frame_id: str
    stamp: np.ndarray
    receive_time: np.ndarray
    orientation: np.ndarray
    angular_velocity: np.ndarray
    linear_acceleration: np.ndarray
    orientation_covariance: np.ndarray
    angular_velocity_covariance: np.ndarray
    linear_acceleration_covariance: np.ndarray


@dataclass(frozen=True)
class PoseSeries:
    """Pose stream (ground truth, GPS/INS, ICP). ``position`` (N, 3) [m], ``orientation`` (N, 4)
    [w, x, y, z], ``covariance`` (N, 6, 6) in ROS order (x, y, z, rot_x, rot_y, rot_z; NaN when
    the type carries none); ``twist`` (N, 6) [vx, vy, vz, wx, wy, wz] for Odometry, else NaN."""

    topic: str
    frame_id: str
    child_frame_id: str
    stamp: np.ndarray
    receive_time: np.ndarray
    position: np.ndarray
    orientation: np.ndarray
    covariance: np.ndarray
    twist: np.ndarray


@dataclass(frozen=True)
class TwistSeries:
    """Velocity command stream. ``linear``/``angular``: (N, 3)."""

    topic: str
    stamp: np.ndarray
    receive_time: np.ndarray
    linear: np.ndarray
    angular: np.ndarray


@dataclass(frozen=True)
class BagStreams:
    """What :func:`read_streams` found: one entry per requested role."""

    path: str
    topics: dict[str, str]
    streams: dict[str, object] = field(default_factory=dict)

    def __getitem__(self, role: str) -> object:
        return self.streams[role]


def _stamp(header_stamp, receive_ns: int) -> float:
    s = float(header_stamp.sec) + 1e-9 * float(header_stamp.nanosec)
    return s if s > 0.0 else 1e-9 * receive_ns


def _quat(q) -> list[float]:
    return [q.w, q.x, q.y, q.z]


def open_bag(path: str | Path):
    """An opened ``rosbags`` AnyReader of ``path`` (close it); BagError names a bad path."""
    from rosbags.highlevel import AnyReader

    p = Path(path)
    if not p.exists():
        raise BagError(f"{p}: no such bag (file or rosbag2 folder)")
    try:
        reader = AnyReader([p])
        reader.open()
    except Exception as exc:  # rosbags raises several unrelated types for unreadable input
        raise BagError(f"{p}: cannot open bag ({type(exc).__name__}: {exc})") from None
    return reader


def bag_topics(path: str | Path) -> dict[str, tuple[str, int]]:
    """Topics of a bag: ``{topic: (message type, message count)}``."""
    reader = open_bag(path)
    try:
        out: dict[str, tuple[str, int]] = {}
        for c in reader.connections:
            t, n = out.get(c.topic, (c.msgtype, 0))
            out[c.topic] = (t, n + int(c.msgcount))
        return out
    finally:
        reader.close()


def read_streams(path: str | Path, topics: Mapping[str, str], kinds: Mapping[str, str],
                 optional: tuple[str, ...] = (),
                 window: tuple[float, float] | None = None) -> BagStreams:
    """Read several streams from a bag in one pass.

    Args:
        path: bag file (ROS 1 ``.bag``, MCAP/SQLite3 file) or rosbag2 folder.
        topics: role -> topic name, e.g. ``{"encoders": "/joint_states", "imu": "/imu/data"}``.
        kinds: role -> stream kind (``joint_states``, ``imu``, ``pose``, ``twist``).
        optional: roles that may be absent from the bag.
        window: ``(start, stop)`` [s] after the bag's first message (receive time): read only
            the messages received in ``[start, stop)``; None reads all.

    Raises:
        BagError: the bag is unreadable, a required topic is missing (the message lists the bag's
            topics and types) or has a type the kind does not accept.
    """
    reader = open_bag(path)
    try:
        available = {c.topic: c.msgtype for c in reader.connections}
        listing = ", ".join(f"{t} [{m}]" for t, m in sorted(available.items())) or "none"
        chosen = {}
        for role, topic in topics.items():
            kind = kinds[role]
            if topic not in available:
                if role in optional:
                    continue
                raise BagError(f"{path}: topic {topic!r} for {role} is not in the bag; "
                               f"its topics are: {listing}")
            if available[topic] not in KIND_TYPES[kind]:
                raise BagError(f"{path}: topic {topic!r} has type {available[topic]}, but {role} "
                               f"needs one of {list(KIND_TYPES[kind])}")
            chosen[topic] = (role, kind)
        rows: dict[str, list] = {role: [] for role, _ in chosen.values()}
        conns = [c for c in reader.connections if c.topic in chosen]
        span = {}
        if window is not None:
            a, b = (float(v) for v in window)
            if not (math.isfinite(a) and a >= 0 and b > a):
                raise BagError(f"{path}: window: need 0 <= start < stop [s], got {window}")
            t0 = int(reader.start_time)
            span = {"start": t0 + int(round(a * 1e9)),
                    "stop": t0 + int(round(b * 1e9)) if math.isfinite(b) else None}
            span = {k: v for k, v in span.items() if v is not None}
        for conn, t_ns, raw in reader.messages(connections=conns, **span):
            role, _kind = chosen[conn.topic]
            try:
                msg = reader.deserialize(raw, conn.msgtype)
            except Exception as exc:
                raise BagError(f"{path}: message on {conn.topic} at {t_ns} ns cannot be "
                               f"decoded ({exc})") from None
            rows[role].append((t_ns, conn.msgtype, msg))
        streams = {}
        for topic, (role, kind) in chosen.items():
            streams[role] = _BUILDERS[kind](topic, rows[role])
        return BagStreams(path=str(path), topics=dict(topics), streams=streams)
    finally:
        reader.close()


def _joint_states(topic: str, rows: list) -> JointStateSeries:
    names: list[str] = []
    index: dict[str, int] = {}
    for _, _, m in rows:
        for n in m.name:
            if n not in index:
                index[n] = len(names)
                names.append(n)
    N, nj = len(rows), len(names)
    pos = np.full((N, nj), np.nan)
    vel = np.full((N, nj), np.nan)
    eff = np.full((N, nj), np.nan)
    stamp = np.empty(N)
    recv = np.empty(N)
    for r, (t_ns, _, m) in enumerate(rows):
        stamp[r] = _stamp(m.header.stamp, t_ns)
        recv[r] = 1e-9 * t_ns
        cols = [index[n] for n in m.name]
        for arr, vals in ((pos, m.position), (vel, m.velocity), (eff, m.effort)):
            vals = np.asarray(vals, dtype=float)
            if vals.size == len(cols):  # ROS: an empty array means "not provided"
                arr[r, cols] = vals
    return JointStateSeries(topic, stamp, recv, tuple(names), pos, vel, eff)


def _imu(topic: str, rows: list) -> ImuSeries:
    N = len(rows)
    stamp, recv = np.empty(N), np.empty(N)
    ori = np.full((N, 4), np.nan)
    gyro, acc = np.empty((N, 3)), np.empty((N, 3))
    covs = [np.empty((N, 3, 3)) for _ in range(3)]
    frame = ""
    for r, (t_ns, _, m) in enumerate(rows):
        stamp[r] = _stamp(m.header.stamp, t_ns)
        recv[r] = 1e-9 * t_ns
        frame = m.header.frame_id
        oc = np.asarray(m.orientation_covariance, dtype=float).reshape(3, 3)
        q = _quat(m.orientation)
        if oc[0, 0] != -1.0 and math.isfinite(sum(q)) and sum(v * v for v in q) > 0.5:
            ori[r] = q
        gyro[r] = [m.angular_velocity.x, m.angular_velocity.y, m.angular_velocity.z]
        acc[r] = [m.linear_acceleration.x, m.linear_acceleration.y, m.linear_acceleration.z]
        covs[0][r] = oc
        covs[1][r] = np.asarray(m.angular_velocity_covariance, dtype=float).reshape(3, 3)
        covs[2][r] = np.asarray(m.linear_acceleration_covariance, dtype=float).reshape(3, 3)
    return ImuSeries(topic, frame, stamp, recv, ori, gyro, acc, *covs)


def _pose(topic: str, rows: list) -> PoseSeries:
    N = len(rows)
    stamp, recv = np.empty(N), np.empty(N)
    pos, ori = np.empty((N, 3)), np.empty((N, 4))
    cov = np.full((N, 6, 6), np.nan)
    twist = np.full((N, 6), np.nan)
    frame = child = ""
    for r, (t_ns, mtype, m) in enumerate(rows):
        stamp[r] = _stamp(m.header.stamp, t_ns)
        recv[r] = 1e-9 * t_ns
        frame = m.header.frame_id
        if mtype == "nav_msgs/msg/Odometry":
            child = m.child_frame_id
            p = m.pose.pose
            cov[r] = np.asarray(m.pose.covariance, dtype=float).reshape(6, 6)
            tw = m.twist.twist
            twist[r] = [tw.linear.x, tw.linear.y, tw.linear.z,
                        tw.angular.x, tw.angular.y, tw.angular.z]
        elif mtype == "geometry_msgs/msg/PoseWithCovarianceStamped":
            p = m.pose.pose
            cov[r] = np.asarray(m.pose.covariance, dtype=float).reshape(6, 6)
        else:
            p = m.pose
        pos[r] = [p.position.x, p.position.y, p.position.z]
        ori[r] = _quat(p.orientation)
    return PoseSeries(topic, frame, child, stamp, recv, pos, ori, cov, twist)


def _twist(topic: str, rows: list) -> TwistSeries:
    N = len(rows)
    stamp, recv = np.empty(N), np.empty(N)
    lin, ang = np.empty((N, 3)), np.empty((N, 3))
    for r, (t_ns, mtype, m) in enumerate(rows):
        recv[r] = 1e-9 * t_ns
        if mtype == "geometry_msgs/msg/TwistStamped":
            stamp[r] = _stamp(m.header.stamp, t_ns)
            tw = m.twist
        else:
            stamp[r] = recv[r]
            tw = m
        lin[r] = [tw.linear.x, tw.linear.y, tw.linear.z]
        ang[r] = [tw.angular.x, tw.angular.y, tw.angular.z]
    return TwistSeries(topic, stamp, recv, lin, ang)


_BUILDERS = {"joint_states": _joint_states, "imu": _imu, "pose": _pose, "twist": _twist}
