"""Parameter declaration shared by the nodes: descriptors with ranges, and vehicle loading.

Every parameter is declared with a description (unit and what breaks when it is wrong) and, for
numbers, a range, so ``ros2 param describe`` documents it and out-of-range sets are refused by
rcl itself. Model parameters keep their dotted schema names (``slip.p3``, ``noise.U.vx_vx``,
``wheel.<wheel>.radius``; design.md §4).

Validation at set time is one mechanism for every node: :func:`declare` records each
parameter's rule (range, ``choices``, or a ``check`` such as the schema's
:func:`wmr_model.parameters.check_value`); :func:`validate_parameters` installs the node's
on-set-parameters callback that refuses a value breaking its rule with the reason
(``integrator: must be one of ['euler', 'rk4'], got 'rk9'``), so a bad ``ros2 param set`` is
refused instead of breaking the node later. A value from the command line or a parameter file
that breaks a rule is logged and replaced by the default at declaration.

Options (every parameter that is not a model parameter) are rows of the one schema
(:mod:`wmr_model.ros.options`, :class:`wmr_model.parameters.OptionSpec`): :func:`declare_options`
declares a node's group with each row's description, unit, range or choices and read-only flag.

The vehicle comes, in this order, from the ``robot_description`` parameter (URDF XML), the
``vehicle`` parameter (shipped name, URDF path or frame table) - both with the ``sidecar``
parameter - or, when both are empty, the ``robot_description`` topic (transient local, as
robot_state_publisher offers it).
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

from rcl_interfaces.msg import (
    FloatingPointRange,
    IntegerRange,
    ParameterDescriptor,
    SetParametersResult,
)
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rclpy.subscription import Subscription

from wmr_model.io.terrain_spec import parse_terrain_spec
from wmr_model.kinematics.uncertainty import TWIST_COMPONENTS, qprime_names
from wmr_model.parameters import SLIP_NAMES, OptionSpec, check_value, get_spec, options
from wmr_model.ros.options import LIVE_REORDER_WINDOW, NODE_OPTIONS, SIM_TIME_REORDER_WINDOW
from wmr_model.terrain.surface import Terrain
from wmr_model.vehicles.model import VehicleModel

__all__ = [
    "declare",
    "declare_option",
    "declare_options",
    "parameter_problem",
    "validate_parameters",
    "declare_model_parameter",
    "declare_model_parameters",
    "declare_wheel_parameters",
    "declare_vehicle_parameters",
    "terrain_from_parameters",
    "load_vehicle_from_parameters",
    "subscribe_robot_description",
    "model_parameter_names",
    "default_reorder_window",
]


@dataclass(frozen=True)
class _Rule:
    """What a declared parameter accepts: range, choices, and an optional ``check(value)``
    raising ValueError with the reason."""

    lower: float | None = None
    upper: float | None = None
    choices: tuple[str, ...] = ()
    check: Callable[[Any], Any] | None = None


# Rules per node (weak keys: a destroyed node takes its rules with it).
_RULES: weakref.WeakKeyDictionary[Node, dict[str, _Rule]] = weakref.WeakKeyDictionary()


def declare(node: Node, name: str, default: Any, description: str, *,
            lower: float | None = None, upper: float | None = None, step: float = 0.0,
            read_only: bool = False, choices: tuple[str, ...] = (),
            check: Callable[[Any], Any] | None = None) -> Any:
    """Declare one parameter with a descriptor (and range for numbers); return its value.

    The rule (``lower``/``upper``, ``choices``, ``check``) is recorded for
    :func:`validate_parameters`. An initial value (command line, parameter file) that breaks
    it is logged as an error naming the parameter and replaced by ``default``.
    """
    desc = ParameterDescriptor(name=name, description=description, read_only=read_only)
    if choices:
        desc.additional_constraints = f"one of {list(choices)}"
    if isinstance(default, bool):
        pass
    elif isinstance(default, int) and (lower is not None or upper is not None):
        desc.integer_range = [IntegerRange(
            from_value=int(lower if lower is not None else -(2 ** 63)),
            to_value=int(upper if upper is not None else 2 ** 63 - 1), step=int(step))]
    elif isinstance(default, float) and (lower is not None or upper is not None):
        lo = -1e308 if lower is None or math.isinf(lower) else float(lower)
        hi = 1e308 if upper is None or math.isinf(upper) else float(upper)
        desc.floating_point_range = [FloatingPointRange(from_value=lo, to_value=hi, step=step)]
    _RULES.setdefault(node, {})[name] = _Rule(lower, upper, tuple(choices), check)
    value = node.declare_parameter(name, default, desc).value
    problem = parameter_problem(node, name, value)
    if problem is not None:
        node.get_logger().error(f"{problem}; using the default {default!r}")
        node.set_parameters([Parameter(name, value=default)])
        value = default
    return value


def declare_option(node: Node, spec: OptionSpec, default: Any = None) -> Any:
    """Declare the option ``spec`` (its unit-first description, range or choices, read-only
    flag) with :func:`declare`; ``default`` replaces the row's when it is computed at run time
    (the reorder window under ``use_sim_time``). Returns the value."""
    value = spec.default if default is None else default
    return declare(node, spec.name, list(value) if isinstance(value, tuple) else value,
                   spec.ros_description, lower=spec.lower, upper=spec.upper,
                   read_only=spec.read_only, choices=spec.choices)


def declare_options(node: Node, group: str,
                    defaults: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Declare every option of ``group`` (:func:`wmr_model.parameters.options`) in its order;
    ``defaults`` maps names to run-time defaults. Returns the values by name."""
    given = dict(defaults or {})
    return {name: declare_option(node, spec, given.get(name))
            for name, spec in options(group).items()}


def parameter_problem(node: Node, name: str, value: Any) -> str | None:
    """Why ``value`` breaks the rule :func:`declare` recorded for ``name`` (one line naming
    the parameter), or None when it is acceptable or ``name`` has no rule."""
    rule = _RULES.get(node, {}).get(name)
    if rule is None:
        return None
    if rule.choices and value not in rule.choices:
        return f"{name}: must be one of {list(rule.choices)}, got {value!r}"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if isinstance(value, float) and not math.isfinite(value):
            return f"{name}: must be finite, got {value}"
        if rule.lower is not None and value < rule.lower:
            return f"{name}: must be >= {rule.lower}, got {value}"
        if rule.upper is not None and value > rule.upper:
            return f"{name}: must be <= {rule.upper}, got {value}"
    if rule.check is not None:
        try:
            rule.check(value)
        except (ValueError, TypeError) as exc:
            return str(exc)
    return None


def validate_parameters(node: Node) -> None:
    """Refuse, at set time, every value breaking the rule its parameter was declared with.

    Installs one on-set-parameters callback (once per node). rclpy runs the callbacks added
    last first, so call this *after* ``add_on_set_parameters_callback`` of the node's own
    (state-changing) callback, or apply changes in ``add_post_set_parameters_callback``: an
    invalid set then never reaches them.
    """
    rules = _RULES.setdefault(node, {})
    if getattr(node, "_wmr_validation_installed", False):
        return

    def on_set(params: list[Parameter]) -> SetParametersResult:
        for p in params:
            if p.name not in rules:
                continue
            problem = parameter_problem(node, p.name, p.value)
            if problem is not None:
                node.get_logger().warning(f"parameter refused: {problem}")
                return SetParametersResult(successful=False, reason=problem)
        return SetParametersResult(successful=True)

    node.add_on_set_parameters_callback(on_set)
    node._wmr_validation_installed = True  # type: ignore[attr-defined]


def default_reorder_window(node: Node) -> float:
    """Default ``reorder_window``: with ``use_sim_time`` (a bag player or simulator that can
    outrun the node) 600 s, so a node working through a backlog holds one input until the
    other catches up (the executor serves one message per queue per turn: the input with more
    messages falls behind by up to half the backlog); live sensors 5 s, so an input whose
    stamps run that far behind the others is rejected as late and counted instead of
    delaying every output."""
    sim = node.has_parameter("use_sim_time") and bool(node.get_parameter("use_sim_time").value)
    return SIM_TIME_REORDER_WINDOW if sim else LIVE_REORDER_WINDOW


def model_parameter_names() -> list[str]:
    """Dotted model parameters every node declares: slip.p1..p8 and the 21 noise.U entries."""
    return list(SLIP_NAMES) + qprime_names(TWIST_COMPONENTS)


def declare_model_parameter(node: Node, name: str, default: float, *,
                            read_only: bool = False, note: str = "") -> float:
    """Declare the model parameter ``name`` (a schema row or a pattern instance such as
    ``wheel.FL.radius``) with the row's unit, description, bounds and value check; ``note``
    is appended to the description. A name the node already declared keeps its value (the
    parameters of a vehicle loaded again). Returns the value."""
    if node.has_parameter(name):
        return float(node.get_parameter(name).value)
    s = get_spec(name)
    return float(declare(node, name, float(default), f"[{s.unit}] {s.description}{note}",
                         lower=s.lower, upper=s.upper, read_only=read_only,
                         check=partial(check_value, name)))


def declare_model_parameters(node: Node, defaults: dict[str, float]) -> dict[str, float]:
    """Declare ``slip.*`` and ``noise.U.*`` from the schema (unit, bounds, description)."""
    return {name: declare_model_parameter(node, name, defaults.get(name, get_spec(name).default))
            for name in model_parameter_names()}


def declare_wheel_parameters(node: Node, model: VehicleModel) -> dict[str, float]:
    """Declare ``wheel.<wheel>.radius`` for the loaded vehicle (default: its radius)."""
    return {f"wheel.{w}.radius": declare_model_parameter(node, f"wheel.{w}.radius", float(r))
            for w, r in zip(model.wheel_names, model.wheel_radius)}


def declare_vehicle_parameters(node: Node) -> dict[str, str]:
    """Declare ``vehicle``, ``sidecar``, ``robot_description`` and ``terrain`` (read only; rows
    of the ``nodes`` option group)."""
    rows = options(NODE_OPTIONS)
    return {name: declare_option(node, rows[name])
            for name in ("vehicle", "sidecar", "robot_description", "terrain")}


def terrain_from_parameters(values: dict[str, str]) -> Terrain:
    """Terrain named by the ``terrain`` parameter (TerrainError names a bad spec)."""
    return parse_terrain_spec(values.get("terrain") or "flat")


def _sidecar_for(vehicle: str, sidecar: str) -> str | None:
    if sidecar:
        return sidecar
    if vehicle:
        from wmr_model.io.vehicles import SHIPPED_VEHICLES, vehicle_files

        if vehicle in SHIPPED_VEHICLES:
            return str(vehicle_files(vehicle)[1])
    return None


def load_vehicle_from_parameters(values: dict[str, str],
                                 urdf_xml: str | None = None) -> VehicleModel | None:
    """The vehicle model from the parameters (or from ``urdf_xml`` of the topic); None when
    neither gives one. Errors (ModelError) name the file and the fault."""
    from wmr_model.io.vehicles import load_vehicle

    xml = values.get("robot_description") or urdf_xml
    if xml:
        return load_vehicle(xml, _sidecar_for(values.get("vehicle", ""),
                                              values.get("sidecar", "")))
    if values.get("vehicle"):
        return load_vehicle(values["vehicle"], values.get("sidecar") or None)
    return None


def subscribe_robot_description(node: Node, callback: Callable[[str], None]) -> Subscription:
    """Subscribe to ``robot_description`` (std_msgs/String, transient local, reliable)."""
    from std_msgs.msg import String

    def on_message(msg: String) -> None:
        callback(msg.data)

    qos = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL,
                     reliability=ReliabilityPolicy.RELIABLE)
    return node.create_subscription(String, "robot_description", on_message, qos)
