"""Read the streams a motion model needs from rosbag2 (MCAP, SQLite3) and ROS 1 bags.

Uses the ``rosbags`` library (no ROS install needed). Each stream comes back as arrays with one
row per message, stamped by the message header (the sensor's time) with the bag's receive time
kept beside it. Reading streams: every message is turned into a row of floats as it is read
(no message object is kept), so memory grows by the arrays only (tens of bytes per message).

Order (:func:`read_streams` ``reorder_window``): header stamps are put in order per stream by
the shared policy of :class:`wmr_model.estimation.streams.WindowedOrder` - disorder shorter than the
window (jittered stamps, a reversed stretch) is undone, a repeated stamp keeps its first
message, a lone stray stamp is dropped, and a lasting backward jump of the stamps (a clock reset
while recording) is stitched: the stamps after it are shifted so that their stream's stamp minus
receive time continues (each stream estimates the jump from its own messages). What was
dropped or shifted is listed in :attr:`BagStreams.notes`. ``reorder_window=None`` keeps bag
order and every message.

Supported message types per stream kind:

==============  ===========================================================================
kind            types
==============  ===========================================================================
joint_states    ``sensor_msgs/msg/JointState``
imu             ``sensor_msgs/msg/Imu`` (orientation NaN when ``orientation_covariance[0]``
                is -1, REP-145's "not provided")
pose            ``nav_msgs/msg/Odometry``, ``geometry_msgs/msg/PoseWithCovarianceStamped``,
                ``geometry_msgs/msg/PoseStamped``, ``sensor_msgs/msg/NavSatFix`` (a position
                in a local ENU frame ``gps_enu`` about the first fix, pymap3d's WGS-84, as the
                calibrator node converts it; orientation NaN = not measured; the position
                covariance by its type, NaN when UNKNOWN; fixes with status NO_FIX dropped
                as non-finite; ``child_frame_id`` = the fix's frame, the antenna)
twist           ``geometry_msgs/msg/TwistStamped``, ``geometry_msgs/msg/Twist`` (bag time)
==============  ===========================================================================

Quaternions are returned scalar first ``[w, x, y, z]`` like the rest of the package.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from wmr_model.errors import BagError

if TYPE_CHECKING:
    from wmr_model.calibration.logs import CalibrationLog
    from wmr_model.vehicles.model import VehicleModel

__all__ = [
    "JointStateSeries",
    "ImuSeries",
    "PoseSeries",
    "TwistSeries",
    "Series",
    "BagStreams",
    "bag_topics",
    "open_bag",
    "read_streams",
    "KIND_TYPES",
    "DEFAULT_REORDER_WINDOW",
    "BAG_JUMP_THRESHOLD",
    "log_from_bag",
    "POSE_TOPIC_CANDIDATES",
    "find_pose_topic",
    "sidecar_steer_topic",
]

#: [s] reorder window of recorded header stamps (:func:`read_streams`).
DEFAULT_REORDER_WINDOW = 2.0
#: [s] a header stamp this far from its stream's newest one is a time-base candidate (a clock
#: reset or a stray stamp); far above any stream period or gap in the pose/encoder streams.
BAG_JUMP_THRESHOLD = 30.0

KIND_TYPES: dict[str, tuple[str, ...]] = {
    "joint_states": ("sensor_msgs/msg/JointState",),
    "imu": ("sensor_msgs/msg/Imu",),
    "pose": ("nav_msgs/msg/Odometry", "geometry_msgs/msg/PoseWithCovarianceStamped",
             "geometry_msgs/msg/PoseStamped", "sensor_msgs/msg/NavSatFix"),
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


#: one stream of :func:`read_streams`, of the kind its role was read as
Series = JointStateSeries | ImuSeries | PoseSeries | TwistSeries
_S = TypeVar("_S", JointStateSeries, ImuSeries, PoseSeries, TwistSeries)


@dataclass(frozen=True)
class BagStreams:
    """What :func:`read_streams` found: one entry per requested role."""

    path: str
    topics: dict[str, str]
    streams: dict[str, Series] = field(default_factory=dict)
    #: what reading did about the input (messages dropped, stamps shifted), one line each
    notes: list[str] = field(default_factory=list)

    def __getitem__(self, role: str) -> Series:
        return self.streams[role]

    def get(self, role: str, kind: type[_S]) -> _S | None:
        """The ``role`` stream as a ``kind`` series; None when that (optional) role is absent.

        Raises:
            BagError: the role was read as another kind (its ``kinds`` entry).
        """
        s = self.streams.get(role)
        if s is None or isinstance(s, kind):
            return s
        raise BagError(f"{self.path}: role {role!r} was read as {type(s).__name__}, "
                       f"not {kind.__name__}")


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
                 window: tuple[float, float] | None = None,
                 reorder_window: float | None = DEFAULT_REORDER_WINDOW) -> BagStreams:
    """Read several streams from a bag in one pass, in stamp order (module docstring).

    Args:
        path: bag file (ROS 1 ``.bag``, MCAP/SQLite3 file) or rosbag2 folder.
        topics: role -> topic name, e.g. ``{"encoders": "/joint_states", "imu": "/imu/data"}``.
        kinds: role -> stream kind (``joint_states``, ``imu``, ``pose``, ``twist``).
        optional: roles that may be absent from the bag.
        window: ``(start, stop)`` [s] after the bag's first message (receive time): read only
            the messages received in ``[start, stop)``; None reads all.
        reorder_window: [s] of stamp disorder undone per stream; None: bag order, every
            message kept.

    Raises:
        BagError: the bag is unreadable or corrupt, a required topic is missing (the message
            lists the bag's topics and types) or has a type the kind does not accept.
    """
    from wmr_model.estimation.streams import WindowedOrder

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
        acc = {role: _ACCUMULATORS[kind](topic) for topic, (role, kind) in chosen.items()}
        order = None
        if reorder_window is not None:
            order = WindowedOrder(list(acc), window=reorder_window,
                                  jump_threshold=BAG_JUMP_THRESHOLD)
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
        stitch = _Stitch()
        it = iter(reader.messages(connections=conns, **span))
        count = 0
        while True:
            try:
                conn, t_ns, raw = next(it)
            except StopIteration:
                break
            except Exception as exc:  # rosbags/mcap raise many types on corrupt chunks
                raise BagError(f"{path}: corrupt after {count} messages "
                               f"({type(exc).__name__}: {' '.join(str(exc).split())[:200]})") \
                    from None
            count += 1
            role, _kind = chosen[conn.topic]
            try:
                msg = reader.deserialize(raw, conn.msgtype)
                stamp, row = acc[role].row(t_ns, conn.msgtype, msg)
            except Exception as exc:
                raise BagError(f"{path}: message on {conn.topic} at {t_ns} ns cannot be "
                               f"decoded ({type(exc).__name__}: {exc})") from None
            if order is None:
                acc[role].add(stamp, row)
                continue
            for rel in order.push(role, stamp, row):
                stitch.add(acc[rel.stream], rel)
        notes: list[str] = []
        if order is not None:
            for rel in order.flush():
                stitch.add(acc[rel.stream], rel)
            st = order.stats
            if st["stray_stamp"] or order.pending:
                notes.append(f"{st['stray_stamp'] + order.pending} message(s) with a stray "
                             f"header stamp dropped ({order.last_stray or 'at the end'})")
            if st["non_finite_stamp"]:
                notes.append(f"{st['non_finite_stamp']} message(s) with a non-finite stamp "
                             "dropped")
            assert reorder_window is not None  # order exists only with a window
            notes += stitch.notes(reorder_window)
        streams = {role: a.build() for role, a in acc.items()}
        return BagStreams(path=str(path), topics=dict(topics), streams=streams, notes=notes)
    finally:
        reader.close()


class _Stitch:
    """Consumer of :class:`WindowedOrder` releases: drops non-finite, late and repeated stamps,
    shifts a stream's stamps after its confirmed backward jump (module docstring); counts each.
    """

    def __init__(self) -> None:
        self.shift: dict[str, float] = {}
        self.offset: dict[str, float] = {}  # last (shifted stamp - receive time) per topic
        self.jumps: dict[str, list[float]] = {}
        self.last: dict[str, float] = {}
        self.late: dict[str, int] = {}
        self.repeated: dict[str, int] = {}

    def add(self, acc, rel) -> None:
        t, recv, topic = rel.stamp, rel.item[0], acc.topic
        if not math.isfinite(t):
            return
        if rel.new_time_base and topic in self.offset:
            shift = self.offset[topic] - (t - recv)
            if shift > 0:  # backward jump: continue the time line where the receive time is
                self.jumps.setdefault(topic, []).append(shift)
                self.shift[topic] = self.shift.get(topic, 0.0) + shift
        t = t + self.shift.get(topic, 0.0)
        prev = self.last.get(topic)
        if prev is not None and t <= prev:
            book = self.repeated if t == prev else self.late
            book[topic] = book.get(topic, 0) + 1
            return
        self.last[topic] = t
        self.offset[topic] = t - recv
        acc.add(t, rel.item)

    def notes(self, window: float) -> list[str]:
        out = [f"{topic}: header stamps jumped back by {j:.3f} s (clock reset?); later stamps "
               "shifted to continue the time line" for topic, js in self.jumps.items()
               for j in js]
        out += [f"{topic}: {n} message(s) repeating the previous stamp dropped"
                for topic, n in self.repeated.items()]
        out += [f"{topic}: {n} message(s) stamped more than the reorder window {window:g} s "
                "out of order dropped" for topic, n in self.late.items()]
        return out


class _Repeated:
    """Rows that are mostly repeats (covariances): each distinct row once, an index per row."""

    def __init__(self, width: int) -> None:
        self.width = width
        self.index = array("l")
        self.rows: list[np.ndarray] = []
        self.seen: dict[bytes, int] = {}

    def add(self, values) -> None:
        a = np.asarray(values, dtype=float).reshape(self.width)
        key = a.tobytes()
        k = self.seen.get(key)
        if k is None:
            k = self.seen[key] = len(self.rows)
            self.rows.append(a)
        self.index.append(k)

    def build(self) -> np.ndarray:
        """(N, width); a read-only broadcast view when every row is the same."""
        n = len(self.index)
        if len(self.rows) == 1:
            return np.broadcast_to(self.rows[0], (n, self.width))
        if not self.rows:
            return np.zeros((0, self.width))
        return np.stack(self.rows)[np.asarray(self.index, dtype=int)]


class _Accumulator:
    """Rows of one stream as flat float arrays (``array('d')``, 8 bytes per value)."""

    width = 0

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.stamp = array("d")
        self.recv = array("d")
        self.data = array("d")
        self.frame_id = ""
        self.child_frame_id = ""

    def add(self, stamp: float, row: tuple) -> None:
        self.stamp.append(stamp)
        self.recv.append(row[0])
        self.data.extend(row[1])

    def _columns(self) -> np.ndarray:
        return np.frombuffer(self.data, dtype=float).reshape(len(self.stamp), self.width) \
            if len(self.stamp) else np.zeros((0, self.width))

    def _times(self) -> tuple[np.ndarray, np.ndarray]:
        return np.array(self.stamp, dtype=float), np.array(self.recv, dtype=float)

    def row(self, t_ns: int, mtype: str, m: Any) -> tuple[float, tuple]:
        """``(header stamp [s], (receive time [s], values))`` of one message (per kind)."""
        raise NotImplementedError

    def build(self) -> Any:
        """The stream's series (per kind)."""
        raise NotImplementedError


class _JointStates(_Accumulator):
    """Joint names in order of first appearance; a row carries the names known when it was
    read (later names are NaN in it)."""

    def __init__(self, topic: str) -> None:
        super().__init__(topic)
        self.names: list[str] = []
        self.index: dict[str, int] = {}
        self.widths = array("l")

    def row(self, t_ns: int, mtype: str, m) -> tuple[float, tuple]:
        for n in m.name:
            if n not in self.index:
                self.index[n] = len(self.names)
                self.names.append(n)
        nj = len(self.names)
        cols = [self.index[n] for n in m.name]
        vals = []
        for arr in (m.position, m.velocity, m.effort):
            out = [math.nan] * nj
            a = np.asarray(arr, dtype=float).reshape(-1)
            if a.size == len(cols):  # ROS: an empty array means "not provided"
                for c, v in zip(cols, a.tolist()):
                    out[c] = v
            vals.append(out)
        return _stamp(m.header.stamp, t_ns), (1e-9 * t_ns, vals)

    def add(self, stamp: float, row: tuple) -> None:
        self.stamp.append(stamp)
        self.recv.append(row[0])
        self.widths.append(len(row[1][0]))
        for v in row[1]:
            self.data.extend(v)

    def build(self) -> JointStateSeries:
        N, nj = len(self.stamp), len(self.names)
        out = [np.full((N, nj), np.nan) for _ in range(3)]
        flat = np.frombuffer(self.data, dtype=float) if N else np.zeros(0)
        w = np.asarray(self.widths, dtype=int)
        start = np.concatenate([[0], np.cumsum(3 * w)[:-1]]) if N else w
        for width in np.unique(w):
            rows = np.nonzero(w == width)[0]
            block = flat[start[rows][:, None] + np.arange(3 * width)[None, :]]
            for k in range(3):
                out[k][rows, :width] = block[:, k * width:(k + 1) * width]
        stamp, recv = self._times()
        return JointStateSeries(self.topic, stamp, recv, tuple(self.names), *out)


class _Imu(_Accumulator):
    width = 4 + 3 + 3

    def __init__(self, topic: str) -> None:
        super().__init__(topic)
        self.covs = [_Repeated(9) for _ in range(3)]

    def add(self, stamp: float, row: tuple) -> None:
        super().add(stamp, (row[0], row[1][:10]))
        for k in range(3):
            self.covs[k].add(row[1][10 + 9 * k:19 + 9 * k])

    def row(self, t_ns: int, mtype: str, m) -> tuple[float, tuple]:
        self.frame_id = m.header.frame_id
        oc = np.asarray(m.orientation_covariance, dtype=float).reshape(9)
        q = _quat(m.orientation)
        if not (oc[0] != -1.0 and math.isfinite(sum(q)) and sum(v * v for v in q) > 0.5):
            q = [math.nan] * 4
        vals = [*q, m.angular_velocity.x, m.angular_velocity.y, m.angular_velocity.z,
                m.linear_acceleration.x, m.linear_acceleration.y, m.linear_acceleration.z,
                *oc.tolist(),
                *np.asarray(m.angular_velocity_covariance, dtype=float).reshape(9).tolist(),
                *np.asarray(m.linear_acceleration_covariance, dtype=float).reshape(9).tolist()]
        return _stamp(m.header.stamp, t_ns), (1e-9 * t_ns, vals)

    def build(self) -> ImuSeries:
        c = self._columns()
        stamp, recv = self._times()
        covs = [r.build().reshape(-1, 3, 3) for r in self.covs]
        return ImuSeries(self.topic, self.frame_id, stamp, recv, c[:, 0:4].copy(),
                         c[:, 4:7].copy(), c[:, 7:10].copy(), *covs)


class _Pose(_Accumulator):
    width = 3 + 4 + 6

    def __init__(self, topic: str) -> None:
        super().__init__(topic)
        self.cov = _Repeated(36)

    def add(self, stamp: float, row: tuple) -> None:
        vals = row[1]
        super().add(stamp, (row[0], vals[:7] + vals[43:49]))
        self.cov.add(vals[7:43])

    datum: tuple[float, float, float] | None = None

    def _fix(self, t_ns: int, m) -> tuple[float, tuple]:
        """A NavSatFix as a position-only pose row (module docstring)."""
        from wmr_model.calibration.gnss import fix_position_covariance, geodetic_to_enu

        self.frame_id = "gps_enu"
        self.child_frame_id = m.header.frame_id.lstrip("/")
        nan = math.nan
        pos = [nan, nan, nan]
        lla = (float(m.latitude), float(m.longitude), float(m.altitude))
        if int(m.status.status) >= 0 and all(math.isfinite(v) for v in lla) \
                and abs(lla[0]) <= 90.0:
            if self.datum is None:
                self.datum = lla
            pos = geodetic_to_enu(*lla, self.datum).tolist()
        cov = [nan] * 36
        pc = fix_position_covariance(np.asarray(m.position_covariance, dtype=float).tolist(),
                                     int(m.position_covariance_type))
        if pc is not None:
            for i in range(3):
                for j in range(3):
                    cov[6 * i + j] = float(pc[i, j])
        return _stamp(m.header.stamp, t_ns), (1e-9 * t_ns, [*pos, nan, nan, nan, nan, *cov,
                                                            *([nan] * 6)])

    def row(self, t_ns: int, mtype: str, m) -> tuple[float, tuple]:
        if mtype == "sensor_msgs/msg/NavSatFix":
            return self._fix(t_ns, m)
        self.frame_id = m.header.frame_id
        cov = [math.nan] * 36
        twist = [math.nan] * 6
        if mtype == "nav_msgs/msg/Odometry":
            self.child_frame_id = m.child_frame_id
            p = m.pose.pose
            cov = np.asarray(m.pose.covariance, dtype=float).reshape(36).tolist()
            tw = m.twist.twist
            twist = [tw.linear.x, tw.linear.y, tw.linear.z,
                     tw.angular.x, tw.angular.y, tw.angular.z]
        elif mtype == "geometry_msgs/msg/PoseWithCovarianceStamped":
            p = m.pose.pose
            cov = np.asarray(m.pose.covariance, dtype=float).reshape(36).tolist()
        else:
            p = m.pose
        vals = [p.position.x, p.position.y, p.position.z, *_quat(p.orientation), *cov, *twist]
        return _stamp(m.header.stamp, t_ns), (1e-9 * t_ns, vals)

    def build(self) -> PoseSeries:
        c = self._columns()
        stamp, recv = self._times()
        return PoseSeries(self.topic, self.frame_id, self.child_frame_id, stamp, recv,
                          c[:, 0:3].copy(), c[:, 3:7].copy(),
                          self.cov.build().reshape(-1, 6, 6), c[:, 7:13].copy())


class _Twist(_Accumulator):
    width = 6

    def row(self, t_ns: int, mtype: str, m) -> tuple[float, tuple]:
        if mtype == "geometry_msgs/msg/TwistStamped":
            stamp = _stamp(m.header.stamp, t_ns)
            tw = m.twist
        else:
            stamp = 1e-9 * t_ns
            tw = m
        vals = [tw.linear.x, tw.linear.y, tw.linear.z, tw.angular.x, tw.angular.y, tw.angular.z]
        return stamp, (1e-9 * t_ns, vals)

    def build(self) -> TwistSeries:
        c = self._columns()
        stamp, recv = self._times()
        return TwistSeries(self.topic, stamp, recv, c[:, 0:3].copy(), c[:, 3:6].copy())


_ACCUMULATORS = {"joint_states": _JointStates, "imu": _Imu, "pose": _Pose, "twist": _Twist}


#: Pose reference topics tried in order when none is named: ``wmr synth``'s, GPS/INS and
#: lidar-ICP drivers', motion capture, a localizer, plain ground truth, then a GNSS fix.
POSE_TOPIC_CANDIDATES = ("/gps/odom", "/ins/pose", "/odometry/gps", "/icp/odom",
                         "/ground_truth/odom", "/mocap/odom", "/pf/odom", "/gps/fix")


def find_pose_topic(path: str | Path, topics: Mapping[str, tuple[str, int]] | None = None
                    ) -> str:
    """The first of :data:`POSE_TOPIC_CANDIDATES` with messages in the bag (``topics``: its
    :func:`bag_topics`, read when None); BagError naming the candidates and the bag's topics
    when there is none."""
    tp = bag_topics(path) if topics is None else topics
    for t in POSE_TOPIC_CANDIDATES:
        if tp.get(t, ("", 0))[1] > 0:
            return t
    listing = ", ".join(f"{t} [{m}, {n} msgs]" for t, (m, n) in sorted(tp.items())) or "none"
    raise BagError(f"{path}: no pose reference topic (tried {', '.join(POSE_TOPIC_CANDIDATES)}; "
                   f"set --pose-topic); its topics are: {listing}")


def sidecar_steer_topic(model: Any) -> str | None:
    """The steering-angle topic a vehicle's sidecar names (``steering.<joint>.topic``; ``model``
    a compiled model or its spec), None when it names none; BagError when its joints name
    different ones."""
    entries = model.options.get("steering") or {}
    topics = {e["topic"] for e in entries.values() if e.get("topic")}
    if len(topics) > 1:
        raise BagError(f"vehicle {model.name}: its steering joints name several topics "
                       f"{sorted(topics)}; one steering topic is read (--steer-topic)")
    return next(iter(topics), None)


def log_from_bag(path: str | Path, model: VehicleModel, *, encoder_topic: str = "/joint_states",
                 pose_topic: str | None = None, imu_topic: str | None = "/imu/data",
                 steer_topic: str | None = None, pose_sensor: str | None = None,
                 window: tuple[float, float] | None = None) -> CalibrationLog:
    """Read a bag (:func:`read_streams`) into a :class:`~wmr_model.calibration.logs.CalibrationLog`.

    Times are shifted so the first encoder sample is at 0 s. ``window`` ``(start, stop)`` [s
    after the bag start] reads only part of the bag. ``pose_topic`` None: the first of
    :data:`POSE_TOPIC_CANDIDATES` in the bag; ``steer_topic`` None: the vehicle sidecar's
    (:func:`sidecar_steer_topic`), else the encoder topic carries the steering angles.
    """
    from wmr_model.calibration.logs import log_from_streams

    if pose_topic is None:
        listed = bag_topics(path)
        enc_type = listed.get(encoder_topic, ("", 0))[0]
        if enc_type and enc_type not in KIND_TYPES["joint_states"]:  # the encoders come first
            raise BagError(f"{path}: topic {encoder_topic!r} has type {enc_type}, but enc "
                           f"needs one of {list(KIND_TYPES['joint_states'])}")
        pose_topic = find_pose_topic(path, listed)
    topics = {"enc": encoder_topic, "pose": pose_topic}
    kinds = {"enc": "joint_states", "pose": "pose"}
    if imu_topic:
        topics["imu"] = imu_topic
        kinds["imu"] = "imu"
    steer_topic = steer_topic or sidecar_steer_topic(model)
    if steer_topic and steer_topic != encoder_topic:
        topics["steer"] = steer_topic
        kinds["steer"] = "joint_states"
    s = read_streams(path, topics, kinds, optional=("imu",), window=window)
    log = log_from_streams(model, s.streams, imu="imu" if "imu" in s.streams else None,
                           steer="steer" if "steer" in s.streams else None,
                           pose_sensor=pose_sensor, source=str(path))
    if s.notes:
        from dataclasses import replace

        log = replace(log, notes=tuple(s.notes) + log.notes)
    if len(log.pose_time) < 2:
        raise BagError(f"{path}: {pose_topic} has {len(log.pose_time)} poses; calibration needs "
                       "at least 2")
    if not math.isfinite(float(np.sum(log.pose))):
        raise BagError(f"{path}: {pose_topic} has non-finite poses")
    return log
