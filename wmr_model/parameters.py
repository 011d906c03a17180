"""One schema for named model parameters and algorithm/node options (design.md §4).

Model parameters (:class:`ParameterSpec`): each calibratable quantity has a stable dotted name
used by calibration, YAML files, ROS parameters and messages, with its default, unit, bounds,
whether calibration may change it, and what it does. This module holds the rows the prediction
layer needs now (the enhanced-kinematics slip coefficients of (2.48)-(2.49) and the Cholesky
entries of the noise spectral density Q' (3.40)-(3.41)); other layers add theirs with
:func:`register`.

Options (:class:`OptionSpec`): settings of an algorithm or a node that are not model
parameters (interval length, reorder window, frames, QoS, ...), with default, unit, range or
choices, type (from the default), whether they are read only, and what they do. Their owner
registers them under a group with :func:`register_options` - the interval options under
``"interval"`` (:mod:`wmr_model.calibration.intervals`), each node's under its node name
(:mod:`wmr_model.ros.options`); a group may list rows of another group (the calibrator node lists
the interval rows), so each option has one definition. ROS parameter declarations
(:func:`wmr_model.ros.params.declare_options`), command-line defaults and help
(:func:`option_help`), dataclass defaults (:func:`option_default`) and the README's parameter
tables (:func:`markdown_table`) all read them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from wmr_model.errors import ParameterError

__all__ = [
    "ParameterSpec",
    "SLIP_NAMES",
    "THESIS_SLIP_COUNT",
    "register",
    "schema",
    "get_spec",
    "check_value",
    "slip_vector",
    "PATTERN_FIELDS",
    "match_pattern",
    "OptionSpec",
    "register_options",
    "options",
    "option",
    "option_default",
    "option_help",
    "markdown_table",
    "TABLE_BEGIN",
    "TABLE_END",
    "readme_tables",
    "write_readme_tables",
]


@dataclass(frozen=True)
class ParameterSpec:
    """One named parameter.

    Attributes:
        name: stable dotted name, e.g. ``slip.p3``.
        default: value when not given.
        unit: SI unit string (``"1"`` for dimensionless).
        lower, upper: inclusive bounds (``-inf``/``inf`` when unbounded).
        calibratable: True when IPEM may estimate it.
        description: what it does and what breaks when it is wrong.
    """

    name: str
    default: float
    unit: str
    lower: float = -math.inf
    upper: float = math.inf
    calibratable: bool = True
    description: str = ""


_SCHEMA: dict[str, ParameterSpec] = {}


def register(specs: Iterable[ParameterSpec]) -> None:
    """Add schema rows; re-registering an existing name with a different row is an error."""
    for s in specs:
        old = _SCHEMA.get(s.name)
        if old is not None and old != s:
            raise ParameterError(f"{s.name}: already registered with a different definition")
        _SCHEMA[s.name] = s


def schema() -> dict[str, ParameterSpec]:
    """All registered parameters by name (a copy)."""
    return dict(_SCHEMA)


#: Placeholders allowed in pattern rows (``wheel.<wheel>.radius``): one dotted segment each.
PATTERN_FIELDS = ("<wheel>", "<sensor>", "<stream>", "<joint>")


def match_pattern(name: str) -> str | None:
    """The pattern row (e.g. ``wheel.<wheel>.radius``) that ``name`` instantiates, or None.

    A pattern segment ``<...>`` matches any one non-empty dotted segment; other segments must
    be equal. Exact rows are not patterns and never match here.
    """
    parts = name.split(".")
    for pat in _SCHEMA:
        if "<" not in pat:
            continue
        pp = pat.split(".")
        if len(pp) == len(parts) and all(
                a == b or (a in PATTERN_FIELDS and b != "") for a, b in zip(pp, parts)):
            return pat
    return None


def get_spec(name: str) -> ParameterSpec:
    """Schema row of ``name``; ParameterError naming close matches if unknown.

    Names that instantiate a pattern row (``wheel.FL.radius`` for ``wheel.<wheel>.radius``)
    return that row with its ``name`` set to ``name``.
    """
    spec = _SCHEMA.get(name)
    if spec is not None:
        return spec
    pat = match_pattern(name)
    if pat is not None:
        s = _SCHEMA[pat]
        return ParameterSpec(name, s.default, s.unit, s.lower, s.upper, s.calibratable,
                             s.description)
    prefix = name.split(".")[0] + "."
    near = sorted(n for n in _SCHEMA if n.startswith(prefix))[:8]
    raise ParameterError(f"{name}: unknown parameter; known {prefix}* names: {near}")


def check_value(name: str, value: float) -> float:
    """Validate ``value`` against the schema row of ``name`` (finite, within bounds)."""
    s = get_spec(name)
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ParameterError(f"{name}: must be a number [{s.unit}], got {value!r}") from None
    if not math.isfinite(v):
        raise ParameterError(f"{name}: must be finite [{s.unit}], got {value}")
    if not (s.lower <= v <= s.upper):
        raise ParameterError(f"{name}: must be in [{s.lower}, {s.upper}] {s.unit}, got {v}")
    return v


#: Names of the slip coefficients in vector order: p1..p6 of (2.48)-(2.49) and the turn-ratio
#: yaw slip p7, p8 of :func:`wmr_model.kinematics.enhanced.cg_slip_velocity` (issue 9).
SLIP_NAMES = tuple(f"slip.p{i}" for i in range(1, 9))
#: Number of thesis slip coefficients (p1..p6); arrays of this length are still accepted and
#: mean p7 = p8 = 0.
THESIS_SLIP_COUNT = 6

register([
    ParameterSpec("slip.p1", 0.0, "1", description=(
        "longitudinal slip per normalized longitudinal force (2.48); wrong values mis-predict "
        "speed on grades")),
    ParameterSpec("slip.p2", 0.0, "1", description=(
        "rolling resistance (2.48): forward speed scaled by 1 + p2, p2 < 0 slows the vehicle; "
        "also absorbs a wrong wheel radius")),
    ParameterSpec("slip.p3", 0.0, "1", description=(
        "lateral slip per normalized lateral force (2.48); p3 > 0 slips downhill on side slopes "
        "and outward in turns")),
    ParameterSpec("slip.p4", 0.0, "1/m", description=(
        "yaw slip per normalized lateral force (2.49); p4 > 0 understeer, p4 < 0 oversteer")),
    ParameterSpec("slip.p5", 0.0, "1/m", description=(
        "yaw slip per forward speed (2.49): left/right rolling-resistance asymmetry (flat tire); "
        "wrong values make straight driving curve")),
    ParameterSpec("slip.p6", 0.0, "1", description=(
        "yaw slip per yaw rate (2.49): anisotropic skid friction; p6 < 0 turns less than the "
        "isotropic pseudoinverse solution (also absorbs a wrong track width)")),
    ParameterSpec("slip.p7", 0.0, "1", description=(
        "yaw slip per yaw rate times the turn ratio rho = b / (R + b) (R turn radius, b = 1 m; "
        "rho = 1 spinning in place, 0 straight): with p6 it lets skid steering turn with a "
        "radius-dependent efficiency (track friction building up with shear displacement); "
        "without it one p6 cannot fit spins and arcs together")),
    ParameterSpec("slip.p8", 0.0, "1", description=(
        "yaw slip per yaw rate times rho^2 (see slip.p7): the curvature of the yaw efficiency "
        "over turn radius; wrong values mis-predict the yaw rate of medium-radius arcs")),
])


def _register_noise() -> None:
    comps = ("wx", "wy", "wz", "vx", "vy", "vz")
    units = ("rad", "rad", "rad", "m", "m", "m")
    rows = []
    for i in range(6):
        for j in range(i, 6):
            rows.append(ParameterSpec(
                f"noise.U.{comps[i]}_{comps[j]}", 0.0, f"{units[j]}/s^0.5",
                lower=0.0 if i == j else -math.inf, description=(
                    f"entry ({comps[i]}, {comps[j]}) of the upper-triangular Cholesky factor U of "
                    "the body-twist noise spectral density Q' = U^T U (3.40); too small gives "
                    "overconfident pose covariances")))
    register(rows)


_register_noise()

# Vehicle dimensions, cg, sensor offsets, steering-pot maps and stream time offsets (IPEM, thesis
# §3.3.1, §3.4.2). Contact-model constants (Appendix C) get rows when a calibration predictor
# runs the dynamics; the kinematic predictors cannot observe them.
# Rows with a ``<...>`` segment are patterns instantiated per vehicle; their default NaN means
# "the value in the vehicle description" (:mod:`wmr_model.vehicles.parameters`).
register([
    ParameterSpec("wheel.<wheel>.radius", math.nan, "m", lower=1e-3, upper=10.0, description=(
        "rolling radius of one wheel (frame table / URDF value by default); a wrong radius "
        "scales that wheel's ground speed: distance error on straights and a curve when one "
        "side is off")),
    ParameterSpec("vehicle.track_scale", 1.0, "1", lower=0.2, upper=5.0, description=(
        "scale of the lateral (y) offsets of all non-body frames from their parents (track "
        "width multiplier, like diff_drive_controller's wheel_separation_multiplier); wrong "
        "values mis-predict the yaw rate of differential steering")),
    ParameterSpec("sensor.<sensor>.x", math.nan, "m", lower=-20.0, upper=20.0, description=(
        "x offset of a sensor frame from its parent frame (3.57)-(3.58); wrong values add a "
        "heading-dependent error to every measured pose of that sensor")),
    ParameterSpec("sensor.<sensor>.y", math.nan, "m", lower=-20.0, upper=20.0, description=(
        "y offset of a sensor frame from its parent frame (3.57)-(3.58); see sensor.<sensor>.x")),
    ParameterSpec("sensor.<sensor>.z", math.nan, "m", lower=-20.0, upper=20.0, description=(
        "z offset of a sensor frame from its parent frame (3.57)-(3.58); only observable "
        "through roll and pitch changes")),
    ParameterSpec("time_offset.<stream>", 0.0, "s", lower=-5.0, upper=5.0, description=(
        "latency of a stream relative to the wheel/IMU clock: a sample stamped t describes the "
        "vehicle at t - offset (the Warthog lidar-ICP pose lags by ~0.25-0.45 s); wrong "
        "values shift ground truth against the inputs and inflate turning residuals")),
    ParameterSpec("vehicle.cg.x", math.nan, "m", lower=-10.0, upper=10.0, description=(
        "x of the whole-vehicle centre of gravity in body coordinates at the neutral joint "
        "state (description value by default; set by moving the body frame's centre of mass); "
        "enhanced kinematics applies slip at the cg (2.45)-(2.49), so a wrong cg mis-places "
        "the yaw slip and the centripetal load in turns")),
    ParameterSpec("vehicle.cg.y", math.nan, "m", lower=-10.0, upper=10.0, description=(
        "y of the whole-vehicle centre of gravity; see vehicle.cg.x")),
    ParameterSpec("vehicle.cg.z", math.nan, "m", lower=-10.0, upper=10.0, description=(
        "z of the whole-vehicle centre of gravity; see vehicle.cg.x (height: load transfer and "
        "the rollover margin)")),
    ParameterSpec("steer.<joint>.gain", 1.0, "rad/1", lower=-1e3, upper=1e3, description=(
        "steering potentiometer gain: steer angle = gain * reading + offset for the actuated "
        "steering joint <joint> (used when the log has pot readings of that joint); a wrong "
        "gain scales every steer angle (turn radius errors)")),
    ParameterSpec("steer.<joint>.offset", 0.0, "rad", lower=-math.pi, upper=math.pi,
                  description=(
        "steering potentiometer offset (see steer.<joint>.gain); a wrong offset makes "
        "straight driving curve")),
    ParameterSpec("steer.<joint>.lag", 0.0, "s", lower=0.0, upper=10.0, description=(
        "first-order lag of a commanded steering joint (the sidecar's steering.<joint>.source "
        "commanded): the wheel angle relaxes toward the logged command with this time "
        "constant; too small turns the predicted vehicle early, too large late")),
    ParameterSpec("bicycle.alpha", 1.0, "1", lower=0.2, upper=3.0, description=(
        "yaw-rate scale of the calibrated planar bicycle model of a steered vehicle (the "
        "wheelbase L becomes L / alpha); understeer and a wrong wheelbase show as alpha != 1")),
    ParameterSpec("bicycle.steer_offset", 0.0, "rad", lower=-0.5, upper=0.5, description=(
        "steering angle offset of the calibrated planar bicycle model; a wrong offset makes "
        "straight driving curve")),
    ParameterSpec("planar.speed_scale", 1.0, "1", lower=0.5, upper=2.0, description=(
        "forward-speed scale of the calibrated planar models (diff drive+, bicycle+): an "
        "effective wheel radius over the nominal one; wrong values scale every distance")),
    ParameterSpec("diff_drive.alpha", 1.0, "1", lower=0.0, upper=3.0, description=(
        "yaw-rate scale of the enhanced differential drive model (3.66); skid steers turn "
        "less than (v_r - v_l)/B (alpha < 1); wrong values curve every predicted turn")),
])


def slip_vector(values: Mapping[str, float] | np.ndarray | None) -> np.ndarray:
    """Slip coefficients (8,) p1..p8 from a mapping of ``slip.p*`` names or an array.

    Missing names take their defaults; unknown ``slip.*`` names raise ParameterError.
    An array is returned as float; a last axis of 6 (p1..p6, the thesis' set) is padded with
    p7 = p8 = 0, other lengths are left to the caller's shape check.
    """
    if values is None:
        return np.array([get_spec(n).default for n in SLIP_NAMES])
    if isinstance(values, Mapping):
        out = np.array([get_spec(n).default for n in SLIP_NAMES])
        for name, val in values.items():
            if name not in SLIP_NAMES:
                raise ParameterError(f"{name}: not a slip coefficient; expected one of "
                                     f"{list(SLIP_NAMES)}")
            out[SLIP_NAMES.index(name)] = check_value(name, val)
        return out
    a = np.asarray(values, dtype=float)
    if a.ndim >= 1 and a.shape[-1] == THESIS_SLIP_COUNT:
        pad = np.zeros(a.shape[:-1] + (len(SLIP_NAMES) - THESIS_SLIP_COUNT,))
        a = np.concatenate([a, pad], axis=-1)
    return a


# ---- options: algorithm and node settings -----------------------------------------------------

#: Option value types by the Python type of the default (ROS parameter types).
_OPTION_TYPES = ((bool, "bool"), (int, "int"), (float, "double"), (str, "string"),
                 (tuple, "string[]"))


@dataclass(frozen=True)
class OptionSpec:
    """One algorithm or node option.

    Attributes:
        name: the option's name, also its ROS parameter name (``interval.length``).
        default: value when not given; its type is the option's type (bool, int, float, str,
            or a tuple of str for a string list).
        unit: SI unit of numbers (``"-"`` dimensionless), ``""`` for non-numbers.
        description: what it does and what breaks when it is wrong.
        lower, upper: inclusive bounds of numbers (None: unbounded).
        choices: the accepted strings (empty: any).
        read_only: True when it is fixed once the node started.
        default_note: the default in words when it is computed at run time (the table shows
            it instead of ``default``), e.g. ``"600 with use_sim_time, else 5"``.
    """

    name: str
    default: Any
    unit: str = ""
    description: str = ""
    lower: float | None = None
    upper: float | None = None
    choices: tuple[str, ...] = ()
    read_only: bool = False
    default_note: str = ""

    def __post_init__(self) -> None:
        if not any(isinstance(self.default, t) for t, _ in _OPTION_TYPES):
            raise ParameterError(f"{self.name}: default must be bool, int, float, str or a tuple "
                                 f"of str, got {type(self.default).__name__}")
        if self.choices and self.default not in self.choices:
            raise ParameterError(f"{self.name}: default {self.default!r} is not one of "
                                 f"{list(self.choices)}")

    @property
    def type(self) -> str:
        """ROS parameter type name: ``bool``, ``int``, ``double``, ``string``, ``string[]``."""
        return next(n for t, n in _OPTION_TYPES if isinstance(self.default, t))

    @property
    def ros_description(self) -> str:
        """The description with its unit first (``[s] ...``), as ``ros2 param describe``
        shows it."""
        return f"[{self.unit}] {self.description}" if self.unit else self.description

    def check(self, value: Any) -> Any:
        """``value`` if it is one of the ``choices`` and within the bounds, else
        ParameterError naming the option, the rule and the value."""
        if self.choices and value not in self.choices:
            raise ParameterError(f"{self.name}: must be one of {list(self.choices)}, got "
                                 f"{value!r}")
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            unit = f" {self.unit}" if self.unit and self.unit != "-" else ""
            if isinstance(value, float) and not math.isfinite(value):
                raise ParameterError(f"{self.name}: must be finite, got {value}")
            if self.lower is not None and value < self.lower:
                raise ParameterError(f"{self.name}: must be >= {self.lower}{unit}, got {value}")
            if self.upper is not None and value > self.upper:
                raise ParameterError(f"{self.name}: must be <= {self.upper}{unit}, got {value}")
        return value


_OPTIONS: dict[str, dict[str, OptionSpec]] = {}


def register_options(group: str, specs: Iterable[OptionSpec]) -> None:
    """Add option rows to ``group`` (in order); re-registering a name of the group with a
    different row is an error."""
    rows = _OPTIONS.setdefault(group, {})
    for s in specs:
        old = rows.get(s.name)
        if old is not None and old != s:
            raise ParameterError(f"{group}: option {s.name} already registered with a different "
                                 "definition")
        rows[s.name] = s


def options(group: str) -> dict[str, OptionSpec]:
    """The option rows of ``group`` by name, in registration order (a copy); ParameterError
    naming the known groups if there is none."""
    if group not in _OPTIONS:
        raise ParameterError(f"{group}: no options registered; known groups: {sorted(_OPTIONS)}")
    return dict(_OPTIONS[group])


def option(group: str, name: str) -> OptionSpec:
    """Row ``name`` of ``group``; ParameterError naming the group's options if unknown."""
    rows = options(group)
    if name not in rows:
        raise ParameterError(f"{group}: unknown option {name}; known: {list(rows)}")
    return rows[name]


def option_default(group: str, name: str) -> Any:
    """The default of option ``name`` of ``group`` (for dataclass and argparse defaults)."""
    return option(group, name).default


def option_help(group: str, name: str, unit: str | None = None) -> str:
    """Command-line help of an option: its description, unit (``unit`` when the command uses
    one of the row's units only) and default; ``%`` escaped for argparse."""
    s = option(group, name)
    u = s.unit if unit is None else unit
    unit = f" [{u}]" if u and u != "-" else ""
    return f"{s.description}{unit} (default {_default_text(s)})".replace("%", "%%")


def _default_text(s: OptionSpec) -> str:
    if s.default_note:
        return s.default_note
    if isinstance(s.default, tuple):
        return "[" + ", ".join(repr(v) for v in s.default) + "]"
    if isinstance(s.default, bool):
        return "true" if s.default else "false"
    if isinstance(s.default, str):
        return repr(s.default)
    return f"{s.default:g}" if isinstance(s.default, float) else str(s.default)


def _range_text(s: OptionSpec) -> str:
    if s.choices:
        return " \\| ".join(f"`{c}`" for c in s.choices)
    if s.lower is None and s.upper is None:
        return ""
    lo = "-inf" if s.lower is None else f"{s.lower:g}"
    hi = "inf" if s.upper is None else f"{s.upper:g}"
    return f"[{lo}, {hi}]"


def markdown_table(group: str) -> str:
    """The Markdown table of the options of ``group``: name, type, default, unit, range or
    choices, read only, description (the README's node parameter tables are this output)."""
    lines = ["| parameter | type | default | unit | range | read only | description |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for s in options(group).values():
        default = s.default_note or f"`{_default_text(s)}`"
        cells = [f"`{s.name}`", s.type, default, s.unit, _range_text(s),
                 "yes" if s.read_only else "", s.description]
        lines.append("| " + " | ".join(c.replace("|", "\\|") if i != 4 else c
                                       for i, c in enumerate(cells)) + " |")
    return "\n".join(lines) + "\n"


#: Markers around a generated table in a Markdown file: ``<!-- options: GROUP -->`` before it,
#: ``<!-- /options -->`` after it.
TABLE_BEGIN = "<!-- options: {group} -->"
TABLE_END = "<!-- /options -->"


def readme_tables(text: str) -> dict[str, str]:
    """The generated tables in a Markdown ``text`` by group: what stands between each
    ``<!-- options: GROUP -->`` marker and the next ``<!-- /options -->``."""
    out = {}
    head = TABLE_BEGIN.split("{group}")
    for chunk in text.split(head[0])[1:]:
        group, rest = chunk.split(head[1], 1)
        out[group] = rest.split(TABLE_END, 1)[0].strip("\n") + "\n"
    return out


def write_readme_tables(path: str) -> list[str]:
    """Regenerate every marked table of the Markdown file ``path`` with
    :func:`markdown_table` (the groups must be registered: import their owners first);
    returns the groups written."""
    from pathlib import Path

    text = Path(path).read_text(encoding="utf-8")
    groups = list(readme_tables(text))
    for g in groups:
        begin = TABLE_BEGIN.format(group=g)
        pre, rest = text.split(begin, 1)
        post = rest.split(TABLE_END, 1)[1]
        text = f"{pre}{begin}\n{markdown_table(g)}{TABLE_END}{post}"
    Path(path).write_text(text, encoding="utf-8")
    return groups
