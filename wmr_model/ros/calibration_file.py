"""``calibration_file`` node parameter: start a node from a saved calibration.

Every node calls :func:`declare_calibration_file` first thing, before it declares its model
parameters: the file's values (:mod:`wmr_model.io.calibration_file`) then become the values of
the node's parameters of the same names (``slip.*``, ``noise.U.*``, ``wheel.<wheel>.radius``,
``sensor.<sensor>.x/y/z``, ...) whenever the node declares them - also those declared later,
once the vehicle is known. The file wins over a parameters file and ``-p`` for the names it
holds (it is the explicit choice of a calibrated state); names the node never declares are
listed by :func:`unused_calibration_names`.
"""

from __future__ import annotations

from rclpy.node import Node
from rclpy.parameter import Parameter

from wmr_model.errors import ParameterError
from wmr_model.io.calibration_file import CalibrationFile, load_calibration
from wmr_model.parameters import option
from wmr_model.ros.options import NODE_OPTIONS
from wmr_model.ros.params import declare_option

__all__ = ["declare_calibration_file", "unused_calibration_names"]


def declare_calibration_file(node: Node, *, prior_std: bool = False) -> CalibrationFile | None:
    """Declare ``calibration_file`` and load it (None when empty or unreadable; the fault is
    logged in one line naming the file). With ``prior_std`` the file's 1-sigma also become
    ``initial_std.<name>`` (the calibrator's prior)."""
    path = declare_option(node, option(NODE_OPTIONS, "calibration_file"))
    if not path:
        return None
    try:
        cal = load_calibration(path)
    except ParameterError as exc:
        node.get_logger().error(f"calibration_file: {exc}; starting without it")
        return None
    values = dict(cal.values)
    if prior_std:
        values.update({f"initial_std.{n}": s for n, s in cal.std.items() if s > 0})
    # Parameter overrides are what declare_parameter takes a value from: setting them here
    # makes every later declaration of these names (including the per-vehicle ones) start
    # from the file.
    overrides = node._parameter_overrides  # rclpy has no public setter
    for name, v in values.items():
        overrides[name] = Parameter(name, value=float(v))
    node.get_logger().info(f"calibration_file: {len(cal.values)} values from {cal.path}")
    return cal


def unused_calibration_names(node: Node, cal: CalibrationFile | None) -> list[str]:
    """Names of the file that this node has not declared (so it does not use them)."""
    if cal is None:
        return []
    return sorted(n for n in cal.values if not node.has_parameter(n))
