"""``wmr play BAG``: publish a bag into the ROS 2 graph in recording order, with /clock.

The venv's stand-in for ``ros2 bag play --clock`` (rosbag2_py has no PyPI wheel): reads
rosbag2 (MCAP, SQLite3) or ROS 1 bags with rosbags and publishes each message's recorded bytes
on its topic (or a remapped one) at --rate times real time, with rosgraph_msgs/Clock on /clock
for nodes started with use_sim_time:=true. Needs rclpy (make setup).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from wmr_model.errors import WmrError

__all__ = ["register", "run"]


def _remap(text: str) -> tuple[str, str]:
    src, sep, dst = text.partition(":=")
    if not sep or not src or not dst:
        raise argparse.ArgumentTypeError(f"--remap expects FROM:=TO, got {text!r}")
    return src, dst


def _wait(text: str) -> tuple[str, int]:
    topic, _, count = text.partition(":")
    try:
        n = int(count) if count else 1
    except ValueError:
        raise argparse.ArgumentTypeError(f"--wait-for expects TOPIC[:N], got {text!r}") from None
    return topic, n


def register(subparsers: Any) -> None:
    """Add the ``play`` subcommand."""
    p = subparsers.add_parser(
        "play", help="publish a bag into ROS 2 in recording order with /clock",
        description=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("bag", metavar="BAG", help="rosbag2 folder/file or ROS 1 bag")
    p.add_argument("--rate", type=float, default=1.0, help="times real time (default 1)")
    p.add_argument("--no-clock", action="store_true", help="do not publish /clock")
    p.add_argument("--clock-hz", type=float, default=100.0, metavar="HZ",
                   help="/clock rate between messages [Hz of wall time] (default 100)")
    p.add_argument("--topics", nargs="+", default=None, metavar="TOPIC",
                   help="play only these topics (default all)")
    p.add_argument("--remap", action="append", type=_remap, default=[], metavar="FROM:=TO",
                   help="publish bag topic FROM on TO (repeatable)")
    p.add_argument("--start-offset", type=float, default=0.0, metavar="S",
                   help="skip this much of the bag's beginning [s]")
    p.add_argument("--duration", type=float, default=None, metavar="S",
                   help="play at most this much bag time [s]")
    p.add_argument("--wait-for", action="append", type=_wait, default=[],
                   metavar="TOPIC[:N]", help="before playing, wait until TOPIC has N (default "
                   "1) subscribers (repeatable; --wait-timeout bounds it)")
    p.add_argument("--wait-timeout", type=float, default=30.0, metavar="S")
    p.add_argument("--delay", type=float, default=0.0, metavar="S",
                   help="wall seconds to wait before the first message")
    p.add_argument("--qos-depth", type=int, default=0, metavar="N",
                   help="publisher history: keep the last N messages per topic; 0 (default) "
                   "keeps every message until each subscriber has it (nothing lost when a "
                   "node is slower than --rate)")
    p.add_argument("--ack-timeout", type=float, default=600.0, metavar="S",
                   help="after the last message, wait at most this long for every subscriber "
                   "to have everything; during playback, a subscriber so far behind that the "
                   "middleware refuses new messages is waited for (each retried) at most this "
                   "long per message (default 600)")
    p.add_argument("--quiet", action="store_true", help="no summary line")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        import rclpy
    except ImportError as exc:
        raise WmrError(f"wmr play needs rclpy (the ROS 2 wheels, `make setup`): {exc}") from None
    from rclpy.context import Context

    from wmr_model.ros.bag_player import play

    context = Context()
    rclpy.init(context=context, args=[])
    node = rclpy.create_node("wmr_bag_player", context=context)
    try:
        report = play(node, args.bag, rate=args.rate, clock=not args.no_clock,
                      clock_hz=args.clock_hz, topics=args.topics, remap=dict(args.remap),
                      start_offset=args.start_offset, duration=args.duration,
                      qos_depth=args.qos_depth, wait_for=dict(args.wait_for),
                      wait_timeout=args.wait_timeout, delay=args.delay,
                      ack_timeout=args.ack_timeout,
                      log=lambda m: print(f"wmr play: {m}", file=sys.stderr))
    except KeyboardInterrupt:
        return 130
    finally:
        node.destroy_node()
        context.try_shutdown()
    if not args.quiet:
        counts = ", ".join(f"{t} {n}" for t, n in sorted(report.published.items()))
        print(f"played {report.total} messages over {report.bag_duration:.1f} s of bag time in "
              f"{report.wall_duration:.1f} s ({counts}); {report.clock_messages} /clock"
              + (f"; {report.publish_retries} publishes retried while a subscriber was behind"
                 if report.publish_retries else ""))
    if report.unacknowledged:
        print(f"wmr play: subscribers of {report.unacknowledged} did not acknowledge every "
              "message", file=sys.stderr)
        return 1
    return 0
