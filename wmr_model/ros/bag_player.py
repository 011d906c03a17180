"""Play a recorded bag into a live ROS 2 graph, in recording order, with ``/clock``.

What ``ros2 bag play --clock`` does, for environments without ``rosbag2_py`` (the PyPI ROS 2
wheels): messages are read with ``rosbags`` (rosbag2 MCAP/SQLite3, ROS 1) and published in the
order of their recording (log) time, paced by the wall clock at ``rate`` times real time. The
rosbag2 CDR bytes are published as they are (``Publisher.publish(bytes)``), so nothing is lost
or changed by a deserialize/serialize round trip; ROS 1 messages are converted to CDR.

``/clock`` (``rosgraph_msgs/Clock``) carries the bag's time at ``clock_hz`` (of wall time, as
``ros2 bag play --clock``), once before the first message and once after the last, so nodes with
``use_sim_time`` see the recording's time base. (A clock message per bag message would double
what every node with ``use_sim_time`` has to take in: at 4x a 50 Hz / 100 Hz encoder + IMU log
made the odometry node fall seconds behind on a loaded machine.)

Entry point: ``wmr play BAG`` (``wmr_model.cli.play``); tests use :func:`play` directly in a
subprocess.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wmr_model.errors import BagError

__all__ = ["PlaybackReport", "message_class", "play"]


@dataclass
class PlaybackReport:
    """What one playback published: counts per topic, bag and wall durations, skipped topics."""

    published: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)  # topic -> reason
    bag_duration: float = 0.0
    wall_duration: float = 0.0
    clock_messages: int = 0
    unacknowledged: list[str] = field(default_factory=list)  # topics a subscriber lacks
    #: publishes refused while a subscriber was behind and retried (each message still sent)
    publish_retries: int = 0

    @property
    def total(self) -> int:
        return sum(self.published.values())


def message_class(type_name: str) -> Any:
    """The Python class of a ROS 2 message type ``pkg/msg/Name`` (ImportError if absent)."""
    pkg, kind, name = type_name.split("/")
    return getattr(importlib.import_module(f"{pkg}.{kind}"), name)


def _to_nanoseconds(t: float) -> tuple[int, int]:
    ns = int(round(t * 1e9))
    return ns // 1_000_000_000, ns % 1_000_000_000


def play(node: Any, bag: str | Path, *, rate: float = 1.0, clock: bool = True,
         clock_hz: float = 100.0, topics: Sequence[str] | None = None,
         remap: Mapping[str, str] | None = None, start_offset: float = 0.0,
         duration: float | None = None, qos_depth: int = 0,
         wait_for: Mapping[str, int] | None = None, wait_timeout: float = 30.0,
         delay: float = 0.0, ack_timeout: float = 600.0,
         log: Callable[[str], None] | None = None) -> PlaybackReport:
    """Publish the messages of ``bag`` through ``node``'s publishers; return what was sent.

    ``topics``: only these (default all); ``remap``: bag topic -> published topic;
    ``start_offset``/``duration`` [s of bag time] select a window; ``wait_for``: published
    topic -> number of subscribers to wait for (at most ``wait_timeout`` wall seconds, then a
    BagError naming the topics) before the first message; ``delay`` [s] wall time after that;
    after the last message, at most ``ack_timeout`` wall seconds for every subscriber to
    acknowledge everything (topics that did not: ``report.unacknowledged``).
    Publishers are reliable and volatile and keep every message until each subscriber has it
    (``qos_depth`` 0, the default: KEEP_ALL, so a node slower than ``rate`` gets every message
    late rather than some never), or keep the last ``qos_depth``; ``/clock`` is reliable too
    (it also reaches best-effort subscribers such as rclpy's time source).
    """
    from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

    if not (rate > 0.0 and rate < float("inf")):
        raise BagError(f"rate must be a positive finite number, got {rate}")
    if not clock_hz > 0.0:
        raise BagError(f"clock_hz must be positive, got {clock_hz}")
    say = log or (lambda _msg: None)
    remap = dict(remap or {})
    from wmr_model.io.bags import open_bag

    reader = open_bag(bag)
    report = PlaybackReport()
    try:
        wanted = set(topics) if topics else None
        if wanted:
            missing = sorted(wanted - {c.topic for c in reader.connections})
            if missing:
                raise BagError(f"{bag}: topics {missing} are not in the bag (it has "
                               f"{sorted({c.topic for c in reader.connections})})")
        if qos_depth < 0:
            raise BagError(f"qos_depth must be >= 0 (0: keep all), got {qos_depth}")
        qos = QoSProfile(depth=max(qos_depth, 1), reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.VOLATILE,
                         history=HistoryPolicy.KEEP_ALL if qos_depth == 0
                         else HistoryPolicy.KEEP_LAST)
        publishers, connections = _make_publishers(node, reader, wanted, remap, qos, report,
                                                   say)
        send_clock = _clock_sender(node, report) if clock else None
        _wait_for_subscribers(node, dict(wait_for or {}), wait_timeout)
        if delay > 0:
            time.sleep(delay)
        t_first = reader.start_time * 1e-9 + start_offset
        t_last = reader.end_time * 1e-9 if duration is None else t_first + duration
        wall0 = time.monotonic()
        _publish_paced(node, reader, connections, publishers, remap, report, send_clock,
                       t_first, t_last, wall0, rate, 1.0 / clock_hz, ack_timeout, say)
        # Destroying a publisher drops what its subscribers have not taken yet: wait until
        # every subscriber has acknowledged every message (a slow node gets all of it, late).
        _wait_acknowledged(publishers, remap, ack_timeout, report)
        if report.unacknowledged:
            say(f"not every subscriber acknowledged {report.unacknowledged} within "
                f"{ack_timeout:g} s")
        report.bag_duration = max(0.0, min(t_last, reader.end_time * 1e-9) - t_first)
        report.wall_duration = time.monotonic() - wall0
        return report
    finally:
        reader.close()


def _make_publishers(node: Any, reader: Any, wanted: set[str] | None, remap: dict[str, str],
                     qos: Any, report: PlaybackReport,
                     say: Callable[[str], None]) -> tuple[dict[str, Any], list[Any]]:
    """One publisher per played topic (remapped) and the bag connections to read; topics
    whose type does not import are skipped (``report.skipped``)."""
    publishers: dict[str, Any] = {}
    connections = []
    for c in reader.connections:
        if wanted is not None and c.topic not in wanted:
            continue
        if c.topic in report.skipped:
            continue
        if c.topic not in publishers:
            try:
                cls = message_class(c.msgtype)
            except (ImportError, AttributeError, ValueError) as exc:
                report.skipped[c.topic] = f"type {c.msgtype} not importable ({exc})"
                say(f"skipping {c.topic}: {report.skipped[c.topic]}")
                continue
            publishers[c.topic] = node.create_publisher(cls, remap.get(c.topic, c.topic), qos)
            report.published[remap.get(c.topic, c.topic)] = 0
        connections.append(c)
    return publishers, connections


def _clock_sender(node: Any, report: PlaybackReport) -> Callable[[float], None]:
    """``send(t)``: publish bag time ``t`` [s] on ``/clock`` (reliable), counted in
    ``report.clock_messages``."""
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from rosgraph_msgs.msg import Clock

    pub = node.create_publisher(Clock, "/clock", QoSProfile(
        depth=10, reliability=ReliabilityPolicy.RELIABLE))
    msg = Clock()

    def send(t: float) -> None:
        msg.clock.sec, msg.clock.nanosec = _to_nanoseconds(t)
        pub.publish(msg)
        report.clock_messages += 1

    return send


def _wait_for_subscribers(node: Any, wait_for: dict[str, int], wait_timeout: float) -> None:
    """Discovery: wait until each topic of ``wait_for`` has its number of subscribers
    (BagError naming wanted and present counts after ``wait_timeout`` wall seconds)."""
    start = time.monotonic()
    pending = dict(wait_for)
    while pending:
        pending = {t: n for t, n in pending.items() if node.count_subscribers(t) < n}
        if not pending:
            break
        if time.monotonic() - start > wait_timeout:
            have = {t: node.count_subscribers(t) for t in wait_for}
            raise BagError(f"after {wait_timeout:g} s still waiting for subscribers: "
                           f"wanted {wait_for}, have {have}")
        time.sleep(0.05)


def _publish_paced(node: Any, reader: Any, connections: list[Any], publishers: dict[str, Any],
                   remap: dict[str, str], report: PlaybackReport,
                   send_clock: Callable[[float], None] | None, t_first: float, t_last: float,
                   wall0: float, rate: float, clock_period: float, stall_timeout: float,
                   say: Callable[[str], None]) -> None:
    """Publish the messages stamped in [t_first, t_last] in log order at ``rate`` times real
    time from wall time ``wall0``, with ``/clock`` every ``clock_period`` wall seconds while
    waiting and once after the last message. A message the middleware refuses because a
    subscriber is behind is retried (:func:`_publish_when_taken`)."""
    import rclpy

    is_ros1 = not getattr(reader, "is2", True)
    typestore = getattr(reader, "typestore", None)
    last_clock = -float("inf")  # wall time of the last /clock
    t_sent = None
    for conn, stamp_ns, raw in reader.messages(connections=connections):
        t = stamp_ns * 1e-9
        if t < t_first:
            continue
        if t > t_last:
            break
        # Pace: sleep until this message's wall time, sending /clock meanwhile.
        due = wall0 + (t - t_first) / rate
        while True:
            now_wall = time.monotonic()
            if send_clock is not None and now_wall - last_clock >= clock_period:
                send_clock(min(t, t_first + (now_wall - wall0) * rate))
                last_clock = now_wall
            if now_wall >= due:
                break
            time.sleep(min(due - now_wall, clock_period))
        data = bytes(raw)
        if is_ros1 and typestore is not None:
            data = bytes(typestore.ros1_to_cdr(data, conn.msgtype))
        topic = remap.get(conn.topic, conn.topic)  # as published
        _publish_when_taken(node, publishers[conn.topic], data, topic, report, stall_timeout,
                            say)
        t_sent = t
        report.published[topic] += 1
        if not rclpy.ok(context=node.context):
            break
    if send_clock is not None and t_sent is not None:
        send_clock(t_sent)


def _publish_when_taken(node: Any, pub: Any, data: bytes, topic: str, report: PlaybackReport,
                        stall_timeout: float, say: Callable[[str], None]) -> None:
    """Publish ``data``, retrying while the middleware refuses it. A reliable keep-all writer
    whose history is full of messages a slow subscriber has not acknowledged blocks for a
    while, then fails ("cannot publish data"); that subscriber gets every message late rather
    than the playback ending. Retries are counted in ``report.publish_retries`` and said once;
    a subscriber that takes nothing for ``stall_timeout`` wall seconds is a BagError naming the
    topic."""
    import rclpy

    deadline = None
    while True:
        try:
            pub.publish(data)
            return
        except Exception as exc:  # rclpy's RCLError is not public API
            if not rclpy.ok(context=node.context) or "publish" not in str(exc).lower():
                raise
            now = time.monotonic()
            if deadline is None:
                deadline = now + stall_timeout
            elif now > deadline:
                raise BagError(f"{topic}: subscribers took no message for {stall_timeout:g} s "
                               f"({exc})") from exc
            if report.publish_retries == 0:
                say(f"{topic}: a subscriber is behind, waiting for it (publish: {exc})")
            report.publish_retries += 1
            time.sleep(0.005)


def _wait_acknowledged(publishers: dict[str, Any], remap: dict[str, str], ack_timeout: float,
                       report: PlaybackReport) -> None:
    """Wait at most ``ack_timeout`` wall seconds in all for every subscriber to acknowledge
    every message; topics that did not go to ``report.unacknowledged``."""
    from rclpy.duration import Duration

    ack_deadline = time.monotonic() + ack_timeout
    for topic, pub in publishers.items():
        left = max(0.0, ack_deadline - time.monotonic())
        if not pub.wait_for_all_acked(Duration(seconds=left)):
            report.unacknowledged.append(remap.get(topic, topic))
