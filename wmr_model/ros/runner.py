"""Process entry point shared by the wmr_model nodes: init, spin, clean shutdown."""

from __future__ import annotations

import sys
from collections.abc import Callable

import rclpy
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node

__all__ = ["spin_node"]


def spin_node(make_node: Callable[[], Node], args: list[str] | None = None) -> int:
    """Run one node until Ctrl-C or an external shutdown; always destroy it and shut down.

    ``make_node`` is called after ``rclpy.init`` (a node class works); ``args`` default to
    ``sys.argv`` so ``--ros-args`` remappings and parameters apply.
    """
    rclpy.init(args=args if args is not None else sys.argv)
    node = None
    try:
        node = make_node()
        rclpy.spin(node)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        if node is not None:
            node.get_logger().info("shutting down")
            node.destroy_node()
        rclpy.try_shutdown()
    return 0
