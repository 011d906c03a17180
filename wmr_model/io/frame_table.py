"""Thesis-style frame tables (Seegmiller 2014 §2.2.1, Table 2.2 and Appendix E) as YAML.

A frame table lists one row per frame, each with its parent, joint type, actuation and pose
relative to the parent at zero joint displacement, exactly like Table 2.2. Numbers may be
expressions of named constants (``k6x: 16*sin(49 deg)``), so a table can be typed in as printed.

Format, ``version: 1`` (the only version so far; a missing ``version`` means 1)::

    version: 1
    vehicle: rocky7
    length_unit: cm          # m (default) | cm | mm | in | ft: unit of xyz, com, radius,
                             #   width, box/cylinder sizes, prismatic limits
    mass_unit: kg            # kg (default) | g | lbm: unit of masses (inertias: mass*length^2)
    constants:               # evaluated in order; later ones may use earlier ones
      k2: 12.075
      k6x: 16*sin(49 deg)
    body: {name: body, mass: 7.7, com: [0, 0, 10.5], inertia: {box: [48, 30, 12]}}
    frames:
      # list rows, in the order of the thesis' columns:
      #   [name, parent, type, act, x, y, z, theta_x, theta_y, theta_z, {extras}]
      - [D1, body, RY, N, k2, k3, k1, 0, 0, 0, {mass: 0.35}]
      # or mapping rows:
      - {name: A1, parent: S1, type: RY, actuated: Y, xyz: [0, 0, -k5], rpy: [0, 0, 0],
         radius: 6.5, width: 5, mass: 0.3, inertia: {cylinder: [6.5, 5], axis: y}}
    wheels: {A1: {radius: 6.5, width: 5}}    # alternative to radius/width in the rows
    joint_constraints:       # sum(coef * theta) - offset = 0 (offset in rad, or in
      - {name: rocker_differential, terms: {D1: 1, D2: 1}, offset: 0}   # length_unit if
                                                                        # all terms prismatic)
    sensors: {imu: {parent: body, xyz: [0, 0, 15], rpy: [0, 0, 0]}}
    options: {}              # free-form model options
    parameters: {}           # nominal values of named calibratable parameters

Joint ``type`` is ``RX|RY|RZ|PX|PY|PZ`` (revolute/prismatic about a coordinate axis, as in the
tables) or ``joint: revolute|prismatic`` with ``axis: [x, y, z]``. ``act``/``actuated`` is
``Y``/``N`` or a boolean. Extras and mapping rows accept ``mass, com, inertia, radius, width,
lower, upper``. ``inertia`` (about the com, in frame coordinates) is 3 principal moments, 6
numbers ``[ixx, iyy, izz, ixy, ixz, iyz]``, a 3x3 matrix, ``{box: [lx, ly, lz]}`` or
``{cylinder: [radius, length], axis: x|y|z}`` (uniform solid of the row's mass). Angles (rpy,
revolute limits) are radians unless written with ``deg``.

Expressions: numbers, ``+ - * / **``, parentheses, constants, ``pi``, functions ``sin cos tan
asin acos atan atan2 sqrt abs``, and unit names ``deg rad m cm mm inch ft kg g lbm`` (a unit
written after a number or a closing parenthesis multiplies it: ``49 deg``, ``11 in``). Length
and mass unit names are expressed in the table's own units, so ``11 in`` in a ``length_unit: m``
table is 0.2794. No other Python is evaluated: no attributes, subscripts, keywords or calls of
anything else.
"""

from __future__ import annotations

import ast
import math
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from wmr_model.errors import ModelError
from wmr_model.io.sidecar import (
    check_keys,
    check_version,
    expect_mapping,
    parse_joint_constraints,
    parse_parameters,
    parse_sensors,
    read_yaml,
)
from wmr_model.vehicles.model import FrameSpec, JointConstraintSpec, SensorSpec, VehicleSpec

__all__ = [
    "FRAME_TABLE_VERSION",
    "LENGTH_UNITS",
    "MASS_UNITS",
    "evaluate",
    "load_frame_table",
    "is_frame_table",
]

FRAME_TABLE_VERSION = 1
#: Size of each length unit [m].
LENGTH_UNITS = {"m": 1.0, "cm": 0.01, "mm": 0.001, "in": 0.0254, "inch": 0.0254, "ft": 0.3048}
#: Size of each mass unit [kg].
MASS_UNITS = {"kg": 1.0, "g": 0.001, "lbm": 0.45359237}

_FUNCTIONS: dict[str, Callable[..., float]] = {
    "sin": math.sin,
    "cos": math.cos,
    "tan": math.tan,
    "asin": math.asin,
    "acos": math.acos,
    "atan": math.atan,
    "atan2": math.atan2,
    "sqrt": math.sqrt,
    "abs": abs,
}
_UNIT_WORDS = ("deg", "rad", "inch", "in", "ft", "cm", "mm", "m", "kg", "g", "lbm")
# A unit word right after a number literal or ")" multiplies it ("49 deg", "49deg", "(a+b) in");
# "in" is a Python keyword -> "inch". Digits inside names (k2m) are not number literals.
_JUXTAPOSED_UNIT = re.compile(
    r"((?<![\w.])(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|\))\s*(" + "|".join(_UNIT_WORDS) + r")\b"
)
_BINOPS: dict[type, Callable[[float, float], float]] = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
    ast.Pow: lambda a, b: a**b,
}

_TOP_KEYS = (
    "version",
    "vehicle",
    "description",
    "length_unit",
    "mass_unit",
    "constants",
    "body",
    "frames",
    "wheels",
    "joint_constraints",
    "sensors",
    "options",
    "parameters",
)
_ROW_KEYS = (
    "name",
    "parent",
    "type",
    "joint",
    "axis",
    "act",
    "actuated",
    "xyz",
    "rpy",
    "mass",
    "com",
    "inertia",
    "radius",
    "width",
    "lower",
    "upper",
)
_EXTRA_KEYS = ("mass", "com", "inertia", "radius", "width", "lower", "upper")
_TYPES = {
    "RX": ("revolute", (1.0, 0.0, 0.0)),
    "RY": ("revolute", (0.0, 1.0, 0.0)),
    "RZ": ("revolute", (0.0, 0.0, 1.0)),
    "PX": ("prismatic", (1.0, 0.0, 0.0)),
    "PY": ("prismatic", (0.0, 1.0, 0.0)),
    "PZ": ("prismatic", (0.0, 0.0, 1.0)),
}


# ---- safe expression evaluator ------------------------------------------------------------------


def unit_names(length_unit: str = "m", mass_unit: str = "kg") -> dict[str, float]:
    """Values of the unit names in a table whose lengths are in ``length_unit`` etc."""
    lu, mu = LENGTH_UNITS[length_unit], MASS_UNITS[mass_unit]
    names = {"deg": math.pi / 180.0, "rad": 1.0, "pi": math.pi}
    names.update({k: v / lu for k, v in LENGTH_UNITS.items() if k != "in"})
    names.update({k: v / mu for k, v in MASS_UNITS.items()})
    return names


def evaluate(
    expr: Any, names: Mapping[str, float] | None = None, where: str = "expression"
) -> float:
    """Evaluate a number or an arithmetic expression string safely (no ``eval``).

    Parameters
    ----------
    expr : int, float or str
        ``"16*sin(49 deg)"``, ``"k2 + 0.5"``...
    names : mapping
        Constants and unit names available to the expression; default: units of an SI table.
    where : str
        Prefix of error messages (file, row, field).

    Raises
    ------
    ModelError
        On syntax errors, unknown names, disallowed constructs (attributes, subscripts, calls
        of anything but the listed functions...), math domain errors and non-finite results.
    """
    if names is None:
        names = unit_names()
    if isinstance(expr, bool):
        raise ModelError(f"{where}: expected a number or an expression, got {expr!r}")
    if isinstance(expr, (int, float)):
        value = float(expr)
    elif isinstance(expr, str):
        text = _JUXTAPOSED_UNIT.sub(
            lambda m: m[1] + "*" + ("inch" if m[2] == "in" else m[2]), expr
        )
        try:
            tree = ast.parse(text.strip(), mode="eval")
        except SyntaxError:
            raise ModelError(f"{where}: cannot parse expression {expr!r}") from None
        try:
            value = _eval_node(tree.body, names, where, expr)
        except (ArithmeticError, ValueError) as exc:
            if isinstance(exc, ModelError):
                raise
            raise ModelError(f"{where}: {expr!r} cannot be evaluated: {exc}") from None
    else:
        raise ModelError(f"{where}: expected a number or an expression, got {expr!r}")
    if not math.isfinite(value):
        raise ModelError(f"{where}: must be finite, got {value} from {expr!r}")
    return value


def _eval_node(node: ast.AST, names: Mapping[str, float], where: str, expr: str) -> float:
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
            raise ModelError(f"{where}: {expr!r}: only numbers are allowed, got {node.value!r}")
        return float(node.value)
    if isinstance(node, ast.Name):
        if node.id not in names:
            raise ModelError(f"{where}: {expr!r}: unknown name {node.id!r}")
        return float(names[node.id])
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        a = _eval_node(node.left, names, where, expr)
        b = _eval_node(node.right, names, where, expr)
        return float(_BINOPS[type(node.op)](a, b))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.UAdd, ast.USub)):
        v = _eval_node(node.operand, names, where, expr)
        return -v if isinstance(node.op, ast.USub) else v
    if isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name) or node.func.id not in _FUNCTIONS:
            fname = node.func.id if isinstance(node.func, ast.Name) else ast.unparse(node.func)
            raise ModelError(
                f"{where}: {expr!r}: function {fname!r} is not allowed; "
                f"allowed: {sorted(_FUNCTIONS)}"
            )
        if node.keywords:
            raise ModelError(f"{where}: {expr!r}: keyword arguments are not allowed")
        args = [_eval_node(a, names, where, expr) for a in node.args]
        return float(_FUNCTIONS[node.func.id](*args))
    raise ModelError(
        f"{where}: {expr!r}: {type(node).__name__} is not allowed in an expression "
        "(only numbers, names, + - * / **, parentheses and math functions)"
    )


# ---- loader -------------------------------------------------------------------------------------


def is_frame_table(data: Any) -> bool:
    """True when parsed YAML ``data`` looks like a frame table (has a ``frames`` list)."""
    return isinstance(data, Mapping) and isinstance(data.get("frames"), list)


def _inertia_value(
    value: Any, mass_kg: float, names: Mapping[str, float], L: float, M: float, where: str
) -> np.ndarray:
    """Inertia about the com [kg m^2] (3, 3) from the row's inertia field."""
    if isinstance(value, Mapping):
        shape = dict(value)
        if "box" in shape:
            check_keys(shape, ("box",), where)
            dims = shape["box"]
            if not isinstance(dims, list) or len(dims) != 3:
                raise ModelError(f"{where}.box must be [lx, ly, lz], got {dims!r}")
            lx, ly, lz = (evaluate(d, names, f"{where}.box[{i}]") * L for i, d in enumerate(dims))
            return mass_kg / 12.0 * np.diag([ly**2 + lz**2, lx**2 + lz**2, lx**2 + ly**2])
        if "cylinder" in shape:
            check_keys(shape, ("cylinder", "axis"), where)
            dims = shape["cylinder"]
            if not isinstance(dims, list) or len(dims) != 2:
                raise ModelError(f"{where}.cylinder must be [radius, length], got {dims!r}")
            r, h = (evaluate(d, names, f"{where}.cylinder[{i}]") * L for i, d in enumerate(dims))
            ax = shape.get("axis", "z")
            if ax not in ("x", "y", "z"):
                raise ModelError(f"{where}.axis must be x, y or z, got {ax!r}")
            side = mass_kg * (3.0 * r**2 + h**2) / 12.0
            moments = [side, side, side]
            moments["xyz".index(ax)] = mass_kg * r**2 / 2.0
            return np.diag(moments)
        raise ModelError(f"{where}: expected 'box' or 'cylinder', got keys {list(shape)}")
    if not isinstance(value, list):
        raise ModelError(f"{where} must be a list of numbers, a 3x3 matrix, box or cylinder")
    scale = M * L * L
    if len(value) == 3 and all(isinstance(r, list) for r in value):
        return np.array(
            [[evaluate(v, names, f"{where}[{i}][{j}]") * scale for j, v in enumerate(row)]
             for i, row in enumerate(value)]
        )
    vals = [evaluate(v, names, f"{where}[{i}]") * scale for i, v in enumerate(value)]
    if len(vals) == 3:
        return np.diag(vals)
    if len(vals) == 6:
        ixx, iyy, izz, ixy, ixz, iyz = vals
        return np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])
    raise ModelError(f"{where} must have 3 or 6 numbers or be 3x3, got {len(vals)}")


class _Table:
    """State of one frame-table load: names, units and the source for messages."""

    def __init__(self, source: str, names: dict[str, float], L: float, M: float) -> None:
        self.source = source
        self.names = names
        self.L = L
        self.M = M

    def num(self, value: Any, where: str) -> float:
        return evaluate(value, self.names, f"{self.source}: {where}")

    def vec(self, value: Any, where: str, scale: float = 1.0) -> tuple[float, float, float]:
        if not isinstance(value, list) or len(value) != 3:
            raise ModelError(f"{self.source}: {where} must be a list of 3 values, got {value!r}")
        x, y, z = (self.num(v, f"{where}[{i}]") * scale for i, v in enumerate(value))
        return (x, y, z)

    def inertial(
        self, row: Mapping[str, Any], where: str
    ) -> tuple[float, tuple[float, float, float], np.ndarray | None]:
        mass = self.num(row.get("mass", 0.0), f"{where}.mass") * self.M
        if mass < 0:
            raise ModelError(f"{self.source}: {where}.mass must be >= 0, got {mass} kg")
        com = self.vec(row.get("com", [0, 0, 0]), f"{where}.com", self.L)
        inertia = None
        if row.get("inertia") is not None:
            inertia = _inertia_value(
                row["inertia"], mass, self.names, self.L, self.M, f"{self.source}: {where}.inertia"
            )
        return mass, com, inertia


def _row_mapping(row: Any, i: int, source: str) -> dict[str, Any]:
    """Normalize a list row ``[name, parent, type, act, x, y, z, rx, ry, rz, {extras}]``."""
    if isinstance(row, Mapping):
        m = expect_mapping(row, f"{source}: frames[{i}]")
        label = f"frames[{i}] ({m.get('name', '?')})"
        check_keys(m, _ROW_KEYS, f"{source}: {label}")
        return m
    if not isinstance(row, list) or len(row) not in (10, 11):
        raise ModelError(
            f"{source}: frames[{i}] must be a mapping or a list "
            f"[name, parent, type, act, x, y, z, theta_x, theta_y, theta_z, {{extras}}], "
            f"got {row!r}"
        )
    m = {
        "name": row[0],
        "parent": row[1],
        "type": row[2],
        "act": row[3],
        "xyz": list(row[4:7]),
        "rpy": list(row[7:10]),
    }
    if len(row) == 11:
        extras = expect_mapping(row[10], f"{source}: frames[{i}] ({row[0]}) extras")
        check_keys(extras, _EXTRA_KEYS, f"{source}: frames[{i}] ({row[0]}) extras")
        m.update(extras)
    return m


def _actuated(value: Any, where: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.upper() in ("Y", "N"):
        return value.upper() == "Y"
    raise ModelError(f"{where} must be Y, N, true or false, got {value!r}")


def load_frame_table(src: str | os.PathLike[str] | Mapping[str, Any]) -> VehicleSpec:
    """Load a thesis-style frame table (path, YAML text or parsed dict) as a VehicleSpec.

    All quantities are converted to SI (m, kg, rad). Errors name the file, the row (index and
    frame name) and the field, e.g. ``rocky7.yaml: frames[3] (A1): xyz[2]: 'k9 + 1': unknown
    name 'k9'``.
    """
    data, source = read_yaml(src, "frame table")
    label = Path(source).name if source not in ("<string>", "<dict>") else source
    data = expect_mapping(data, f"{label}: the document")
    check_keys(data, _TOP_KEYS, label)
    check_version(data, label, FRAME_TABLE_VERSION)
    t = _table_names(data, label)
    body_name, body_mass, body_com, body_inertia = _table_body(data, t)
    rows = data.get("frames")
    if not isinstance(rows, list) or not rows:
        raise ModelError(f"{label}: frames must be a non-empty list of rows")
    wheel_table = expect_mapping(data.get("wheels"), f"{label}: wheels")
    frames = [_table_frame(raw, i, t, wheel_table) for i, raw in enumerate(rows)]
    known = {f.name for f in frames}
    for wname in wheel_table:
        if wname not in known:
            raise ModelError(f"{label}: wheels.{wname}: no frame of that name; "
                             f"frames are {sorted(known)}")
    constraints = _table_constraints(data, frames, t)
    sensors = [
        SensorSpec(s.name, s.parent or body_name,
                   (s.xyz[0] * t.L, s.xyz[1] * t.L, s.xyz[2] * t.L), s.rpy)
        for s in parse_sensors(data.get("sensors"), f"{label}: sensors", allow_link=False)
    ]
    options = expect_mapping(data.get("options"), f"{label}: options")
    params = parse_parameters(data.get("parameters"), f"{label}: parameters")
    if params:
        options["parameters"] = params
    default_name = Path(source).stem if label not in ("<string>", "<dict>") else "vehicle"
    vname = data.get("vehicle", default_name)
    if not isinstance(vname, str) or not vname:
        raise ModelError(f"{label}: vehicle must be a non-empty name, got {vname!r}")
    return VehicleSpec(
        name=vname,
        frames=frames,
        body_name=body_name,
        body_mass=body_mass,
        body_com=body_com,
        body_inertia=body_inertia,
        joint_constraints=constraints,
        sensors=sensors,
        options=options,
        source=source,
    )


def _table_names(data: Mapping[str, Any], label: str) -> _Table:
    """The table's units and the names its expressions may use (unit names, then its
    ``constants`` in document order)."""
    lu = data.get("length_unit", "m")
    mu = data.get("mass_unit", "kg")
    if lu not in LENGTH_UNITS:
        raise ModelError(f"{label}: length_unit must be one of {list(LENGTH_UNITS)}, got {lu!r}")
    if mu not in MASS_UNITS:
        raise ModelError(f"{label}: mass_unit must be one of {list(MASS_UNITS)}, got {mu!r}")
    names = unit_names(lu, mu)
    reserved = set(names) | set(_FUNCTIONS) | {"in"}
    for cname, cexpr in expect_mapping(data.get("constants"), f"{label}: constants").items():
        if not cname.isidentifier() or cname in reserved:
            raise ModelError(
                f"{label}: constants.{cname}: not a usable name (identifiers only; reserved: "
                f"{sorted(reserved)})"
            )
        names[cname] = evaluate(cexpr, names, f"{label}: constants.{cname}")
    return _Table(label, names, LENGTH_UNITS[lu], MASS_UNITS[mu])


def _table_body(
    data: Mapping[str, Any], t: _Table
) -> tuple[str, float, tuple[float, float, float], np.ndarray | None]:
    """Name, mass [kg], com [m] and inertia [kg m^2] (or None) of the table's ``body``."""
    label = t.source
    body = expect_mapping(data.get("body"), f"{label}: body")
    check_keys(body, ("name", "mass", "com", "inertia"), f"{label}: body")
    body_name = body.get("name", "body")
    if not isinstance(body_name, str) or not body_name:
        raise ModelError(f"{label}: body.name must be a non-empty string, got {body_name!r}")
    return (body_name, *t.inertial(body, "body"))


def _table_frame(raw: Any, i: int, t: _Table, wheel_table: Mapping[str, Any]) -> FrameSpec:
    """Row ``i`` of ``frames`` (list or mapping form) as a FrameSpec in SI units."""
    label = t.source
    row = _row_mapping(raw, i, label)
    name = row.get("name")
    if not isinstance(name, str) or not name:
        raise ModelError(f"{label}: frames[{i}].name must be a non-empty string, got {name!r}")
    w = f"frames[{i}] ({name})"
    parent = row.get("parent")
    if not isinstance(parent, str) or not parent:
        raise ModelError(f"{label}: {w}.parent must be a frame name, got {parent!r}")
    joint_type, axis = _row_joint(row, t, w)
    act = row.get("act", row.get("actuated", False))
    if "act" in row and "actuated" in row:
        raise ModelError(f"{label}: {w}: give act or actuated, not both")
    lim_scale = t.L if joint_type == "prismatic" else 1.0
    lower = t.num(row["lower"], f"{w}.lower") * lim_scale if "lower" in row else -math.inf
    upper = t.num(row["upper"], f"{w}.upper") * lim_scale if "upper" in row else math.inf
    mass, com, inertia = t.inertial(row, w)
    wheel_radius, wheel_width = _row_wheel(row, name, wheel_table, t, w)
    return FrameSpec(
        name=name,
        parent=parent,
        joint_type=joint_type,
        axis=axis,
        xyz=t.vec(row.get("xyz", [0, 0, 0]), f"{w}.xyz", t.L),
        rpy=t.vec(row.get("rpy", [0, 0, 0]), f"{w}.rpy"),
        actuated=_actuated(act, f"{label}: {w}.act"),
        lower=lower,
        upper=upper,
        mass=mass,
        com=com,
        inertia=inertia,
        wheel_radius=wheel_radius,
        wheel_width=wheel_width,
    )


def _row_joint(row: Mapping[str, Any], t: _Table,
               w: str) -> tuple[str, tuple[float, float, float]]:
    """Joint type and axis of a row: its ``type`` (RX..PZ), or ``joint`` + ``axis``."""
    label = t.source
    if "type" in row:
        if "joint" in row or "axis" in row:
            raise ModelError(f"{label}: {w}: give either type or joint + axis, not both")
        jt = row["type"]
        key = jt.replace(" ", "").replace("_", "").upper() if isinstance(jt, str) else jt
        if key not in _TYPES:
            raise ModelError(f"{label}: {w}.type must be one of {list(_TYPES)}, got {jt!r}")
        return _TYPES[key]
    joint_type = row.get("joint", "revolute")
    if joint_type not in ("revolute", "prismatic"):
        raise ModelError(
            f"{label}: {w}.joint must be revolute or prismatic, got {joint_type!r}"
        )
    if "axis" not in row:
        raise ModelError(f"{label}: {w}: give type (RX..PZ) or axis")
    axis = t.vec(row["axis"], f"{w}.axis")
    if max(abs(a) for a in axis) < 1e-12:
        raise ModelError(f"{label}: {w}.axis must be nonzero, got {list(axis)}")
    return joint_type, axis


def _row_wheel(row: Mapping[str, Any], name: str, wheel_table: Mapping[str, Any], t: _Table,
               w: str) -> tuple[float | None, float]:
    """Wheel radius [m] (None: not a wheel) and width [m] of a row, from the row or the
    table's ``wheels`` entry of its frame (not both for the radius)."""
    label = t.source
    radius, width = row.get("radius"), row.get("width")
    if name in wheel_table:
        wrow = expect_mapping(wheel_table[name], f"{label}: wheels.{name}")
        check_keys(wrow, ("radius", "width"), f"{label}: wheels.{name}")
        if radius is not None and "radius" in wrow:
            raise ModelError(f"{label}: {w}: radius given in the row and in wheels")
        radius = wrow.get("radius", radius)
        width = wrow.get("width", width)
    wheel_radius = None
    if radius is not None:
        wheel_radius = t.num(radius, f"{w}.radius") * t.L
        if wheel_radius <= 0:
            raise ModelError(f"{label}: {w}.radius must be > 0 m, got {wheel_radius}")
    wheel_width = t.num(width, f"{w}.width") * t.L if width is not None else 0.0
    return wheel_radius, wheel_width


def _table_constraints(data: Mapping[str, Any], frames: list[FrameSpec],
                       t: _Table) -> list[JointConstraintSpec]:
    """The table's ``joint_constraints``; an offset of all-prismatic terms is a length."""
    label = t.source
    ftype = {f.name: f.joint_type for f in frames}
    constraints = []
    for cname, terms, offset in parse_joint_constraints(
        data.get("joint_constraints"), f"{label}: joint_constraints"
    ):
        for j in terms:
            if j not in ftype:
                raise ModelError(
                    f"{label}: joint_constraints ({cname}): joint {j!r} is not a frame of "
                    f"this table; frames are {sorted(ftype)}"
                )
        if offset and all(ftype[j] == "prismatic" for j in terms):
            offset *= t.L
        elif offset and any(ftype[j] == "prismatic" for j in terms):
            raise ModelError(
                f"{label}: joint_constraints ({cname}): a nonzero offset needs all-revolute or "
                "all-prismatic terms"
            )
        constraints.append(JointConstraintSpec(cname, terms, offset))
    return constraints
