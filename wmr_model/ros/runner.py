"""Process entry point shared by the wmr_model nodes: init, spin, clean shutdown."""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable

import rclpy
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node

__all__ = ["spin_node", "steady_timer"]


def spin_node(make_node: Callable[[], Node], args: list[str] | None = None) -> int:
    """Run one node until Ctrl-C or an external shutdown; always destroy it and shut down.

    ``make_node`` is called after ``rclpy.init`` (a node class works); ``args`` default to
    ``sys.argv`` so ``--ros-args`` remappings and parameters apply. A node with an
    ``executor_threads`` attribute > 1 is spun by a MultiThreadedExecutor of that many
    threads. Returns 0 on a clean stop.

    A SIGINT reaches both rclpy's handler (context shutdown: ``spin`` raises
    ``ExternalShutdownException``) and the Python-level handler, which is made a no-op so that
    no ``KeyboardInterrupt`` lands in the middle of the cleanup; the outer ``except`` remains
    for embedders that install their own handler.
    """
    try:
        return _run(make_node, args)
    except KeyboardInterrupt:
        return 0


def _run(make_node: Callable[[], Node], args: list[str] | None) -> int:
    # rclpy's SIGINT handler shuts the context down and then chains to the handler installed
    # before rclpy.init; a no-op there keeps Python from also raising KeyboardInterrupt at some
    # later bytecode (possibly mid-cleanup). spin then ends with ExternalShutdownException.
    signal.signal(signal.SIGINT, _ignore_signal)
    rclpy.init(args=args if args is not None else sys.argv)
    node = None
    try:
        node = make_node()
        threads = int(getattr(node, "executor_threads", 1))
        if threads > 1:  # nodes serving concurrent callbacks (reentrant callback groups)
            from rclpy.executors import MultiThreadedExecutor

            executor = MultiThreadedExecutor(num_threads=threads)
            executor.add_node(node)
            executor.spin()
        else:
            rclpy.spin(node)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except Exception:
        # A callback that was publishing when SIGINT invalidated the context fails with
        # "publisher's context is invalid"; that is part of a normal shutdown. Errors while
        # the context is still up are real and propagate.
        if rclpy.ok():
            raise
    finally:
        try:
            if node is not None:
                node.get_logger().info("shutting down")
                node.destroy_node()
        finally:
            _shutdown()
    return 0


def steady_timer(node: Node, period: float, callback: Callable[[], None]):
    """A timer of ``node`` on the steady (wall) clock, also under ``use_sim_time``.

    The nodes' timers pace housekeeping (diagnostics, releasing held messages, rate-limiting
    parameter pushes), not the data, which is stamp-driven. On the ROS clock they would stop
    with ``/clock``: at the end of a bag, or while a node behind a fast replay still works
    through its queues, held messages would never be released and the last estimates never
    pushed.
    """
    from rclpy.clock import Clock, ClockType

    return node.create_timer(period, callback, clock=Clock(clock_type=ClockType.STEADY_TIME))


def _ignore_signal(signum: int, frame: object) -> None:
    """Python-level SIGINT handler that does nothing (rclpy's handler does the work)."""


def _shutdown() -> None:
    """``rclpy.try_shutdown`` tolerating rclpy's own SIGINT handler shutting down concurrently.

    try_shutdown checks ``ok()`` then shuts down; the signal handler may shut the context down
    in between, and rcl then reports "rcl_shutdown already called". Only that outcome (the
    context is down afterwards) is absorbed; anything else is raised.
    """
    try:
        rclpy.try_shutdown()
    except Exception:
        if rclpy.ok():
            raise
