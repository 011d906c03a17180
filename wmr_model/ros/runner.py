"""Process entry point shared by the wmr_model nodes: init, spin, clean shutdown."""

from __future__ import annotations

import signal
import sys
import threading
import time
import warnings
import weakref
from collections.abc import Callable
from typing import Any

import rclpy
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node

__all__ = ["spin_node", "steady_timer", "reliable_service", "retry_lost_responses",
           "lost_responses", "call_service"]

#: Responses of each node's reliable services given up after RESPONSE_RETRY_TIME.
_LOST_RESPONSES: weakref.WeakKeyDictionary[Node, int] = weakref.WeakKeyDictionary()


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


# How long a server keeps re-sending a response whose client it has not discovered yet [s].
RESPONSE_RETRY_TIME = 10.0
# A client re-sends a request it has no answer to after this long, then twice as long, ... [s].
REQUEST_RESEND_AFTER = 5.0
_LOST = "failed to send response"
_send_lock = threading.Lock()


def reliable_service(node: Node, srv_type: Any, name: str, callback: Callable[[Any, Any], Any],
                     **kwargs: Any):
    """``node.create_service`` whose responses survive a client the server has not matched yet.

    Fast DDS (the default RMW) sends a response only once the server's response writer has
    discovered the client's response reader and otherwise gives up after the writer's
    max_blocking_time (100 ms): rclpy then only warns "failed to send response (timeout)" and the
    client waits forever. On a loaded machine discovery of a new client often takes longer than
    that (seen in CI: a planner-style client created just before its first request never got
    the answer). Here a lost send is retried for up to :data:`RESPONSE_RETRY_TIME` seconds;
    after that it is logged as an error and counted (:func:`lost_responses`).
    """
    return retry_lost_responses(node, node.create_service(srv_type, name, callback, **kwargs))


def retry_lost_responses(node: Node, srv: Any) -> Any:
    """Make ``srv`` (a service of ``node``) re-send responses rclpy reports as not delivered
    (see :func:`reliable_service`); returns ``srv``."""
    send = srv.send_response
    _LOST_RESPONSES.setdefault(node, 0)

    def send_until_matched(response: Any, header: Any) -> None:
        deadline = time.monotonic() + RESPONSE_RETRY_TIME
        while True:
            # warnings.catch_warnings swaps process-wide state: one send at a time
            with _send_lock, warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                send(response, header)
            lost = False
            for w in caught:
                if issubclass(w.category, RuntimeWarning) and _LOST in str(w.message):
                    lost = True
                else:  # somebody else's warning: pass it on
                    warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
            if not lost:
                return
            if time.monotonic() > deadline or not node.context.ok():
                _LOST_RESPONSES[node] += 1
                node.get_logger().error(
                    f"{srv.srv_name}: response not delivered, the client was not discovered "
                    f"within {RESPONSE_RETRY_TIME:.0f} s")
                return
            time.sleep(0.05)

    srv.send_response = send_until_matched
    return srv


def lost_responses(node: Node) -> int:
    """Responses of ``node``'s reliable services (:func:`retry_lost_responses`) that were not
    delivered within :data:`RESPONSE_RETRY_TIME`."""
    return _LOST_RESPONSES.get(node, 0)


def call_service(client: Any, request: Any, *, timeout: float,
                 spin: Callable[[float], None] | None = None,
                 resend_after: float = REQUEST_RESEND_AFTER) -> Any:
    """Call ``client`` and return the response; TimeoutError after ``timeout`` seconds.

    ``spin(dt)`` processes the caller's callbacks for up to ``dt`` seconds (e.g. an executor's
    ``spin_once``); None when another thread spins the client's node. Servers not built with
    :func:`reliable_service` (rclpy's parameter services, other packages) can still drop a
    response to a client they have not discovered yet (see there), so a request with no answer
    is sent again after ``resend_after`` s, then after twice as long, and so on; the first
    answer wins. Use it for requests that may be repeated (queries, predictions, saves).
    """
    if not client.wait_for_service(timeout_sec=timeout):
        raise TimeoutError(f"service {client.srv_name} not available after {timeout} s")
    start = time.monotonic()
    futures = [client.call_async(request)]
    next_send, wait = start + resend_after, resend_after
    try:
        while True:
            for f in futures:
                if f.done():
                    return f.result()
            now = time.monotonic()
            if now - start > timeout:
                raise TimeoutError(f"no response from {client.srv_name} within {timeout} s "
                                   f"({len(futures)} requests sent)")
            if now >= next_send:
                futures.append(client.call_async(request))
                wait *= 2.0
                next_send = now + wait
            if spin is not None:
                spin(0.05)
            else:
                time.sleep(0.02)
    finally:
        for f in futures:
            if not f.done():
                client.remove_pending_request(f)
