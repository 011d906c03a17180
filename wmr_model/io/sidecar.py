"""YAML sidecar of a URDF vehicle, and the YAML helpers shared with the frame-table loader.

A URDF describes links, joints, limits and inertias but not what a wheeled-robot model also
needs: which joints are wheels (and their radius when the URDF has no cylinder), which are
actuated, holonomic joint constraints (Seegmiller 2014 eq. 2.25, E.1), sensor frames, the
mapping of a robot's encoder joints to model joints, model options and the nominal values of
named calibratable parameters. The sidecar holds exactly those.

Sidecar schema, ``version: 1`` (the only version so far; a missing ``version`` means 1)::

    version: 1
    vehicle: warthog                # model name; default: the URDF <robot name>
    description: free text          # ignored by the loader
    std: {slip.p2: 0.01}            # 1-sigma of calibrated parameters (calibration files); ignored
    body_link: base_link            # default: the URDF root link; must be joined to the root
                                    #   by fixed joints only
    wheels:                         # wheel joints; mapping joint -> {radius, width} [m] ...
      front_left_wheel: {radius: 0.3, width: 0.25}
      rear_left_wheel: {}           #   ... {} or null: radius/width from the URDF collision
    # wheels: [{joint: front_left_wheel, radius: 0.3}, ...]   (list form, same meaning)
                                    # default when absent: every `continuous` joint is a wheel
    actuated: [front_left_wheel, ...]   # the complete list of actuated joints;
                                    #   default: the wheel joints
    joint_constraints:              # sum(coef * theta) - offset = 0, offset in m or rad
      - {name: diff_coupling, terms: {left_diff_unit_joint: 1, right_diff_unit_joint: 1},
         offset: 0}
      - {name: spring_FL, terms: {lower_arm_FL: 1}, offset: 0,
         stiffness: 5.0e4, damping: 4.0e3,   # optional spring-damper of this constraint in the
         preload: -2.0e3}           #   dynamics (2.74) [N m/rad, N m s/rad], default: options;
                                    #   preload = force at c = 0 [N m or N] (needs stiffness)
    loop_closures:                  # closed kinematic chains between two frames of the tree
      - {name: upper_ball_FL, type: point,  # point | point_on_axis | distance
         frame_a: upper_arm_FL, point_a: [0, 0.3, 0],  # frame = joint name, body link or link
         frame_b: upright_FL, point_b: [0, 0, 0.35]}   # points in the frame's coordinates [m]
      - {name: tie_rod_FL, type: distance, frame_a: rack, point_a: [0, 0.5, 0],
         frame_b: knuckle_FL, point_b: [-0.2, -0.1, 0], length: 0.4}  # default length: the
                                    #   distance at zero joint displacement
      # point_on_axis adds axis_b: [x, y, z] (direction in frame_b)
    sensors:                        # sensor frames, by URDF link or by parent + pose
      imu: {link: imu_link}
      gps: {parent: base_link, xyz: [0.1, 0, 0.5], rpy: [0, 0, 0]}
    encoder_map:                    # robot encoder joint -> model wheel joints it drives
      left_wheel_joint: [front_left_wheel, rear_left_wheel]   # each turns at its rate
      motor: {differential: [rear_left_wheel, rear_right_wheel], ratio: 0.084}   # through an
                                    #   open differential: mean wheel rate = ratio x its rate;
                                    #   adds a massless actuated joint "motor" on the body
                                    #   coupled to the (now passive) wheels by the holonomic
                                    #   constraint sum(theta_w) - n ratio theta_motor = 0 (2.25)
    steering:                       # how each steering joint's angle is known (default:
      front_steer_joint:            #   measured, its JointState position on the encoder topic)
        {source: commanded, lag: 0.1, topic: /steer_cmd}   # commanded: a first-order lag
                                    #   [s] (steer.<joint>.lag); topic: a second JointState topic
    controller: {type: passive_steer, steer_joints: [s1, s2]}   # how body twist commands
                                    #   become actuated joint rates
                                    (wmr_model.prediction.controllers); #   default: the open-loop
                                    flat-ground "naive" controller
    options: {baumgarte_gain: 10}   # free-form model options (mapping)
    parameters: {slip.p1: 0.0}      # nominal values of named (dotted) calibratable parameters
    tracks:                         # belt tracks (wmr_model.vehicles.tracks); geometry in `link`
    coords [m]
      left:
        link: base_link             # link carrying the belt; default: sprocket's parent link
        sprocket: left_sprocket     # drive joint: belt speed = sprocket_radius * its rate
        sprocket_radius: 0.09
        sprocket_xyz: [0.25, 0.2, 0.0]
        idler_radius: 0.09
        idler_xyz: [-0.25, 0.2, 0.0]   # same y as the sprocket: the belt's x-z plane
        road_wheels: [{xyz: [0.0, 0.2, -0.01], radius: 0.05}]   # optional
        width: 0.1                  # belt width, >= 0; default 0
        samples: 16                 # contact patches along the ground-facing belt; default 16
        drive_radius: 0.09          # belt speed per unit sprocket rate [m/rad]; default
                                    #   sprocket_radius (set it for a flipper driven by the
                                    #   main track's shaft)

Where the URDF gives a wheel radius (cylinder or sphere collision of the wheel link) and the
sidecar gives one too, the sidecar wins. ``encoder_map`` is stored in
``options["encoder_map"]``, ``parameters`` in ``options["parameters"]`` and ``controller`` in
``options["controller"]`` (checked by :func:`wmr_model.prediction.controllers.vehicle_controller`).
A sensor ``parent`` may name a link or a model frame (joint name, or the body link).

Sprocket joints of ``tracks`` are not wheels by default and are actuated by default.

Every error names the sidecar file and the offending key, e.g.
``warthog.yaml: wheels.front_left_wheel.radius must be > 0 m, got -0.1``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from wmr_model.errors import ModelError
from wmr_model.vehicles.model import LoopClosureSpec

__all__ = [
    "SIDECAR_VERSION",
    "SIDECAR_KEYS",
    "Sidecar",
    "WheelEntry",
    "SensorEntry",
    "TrackEntry",
    "TRACK_KEYS",
    "LOOP_CLOSURE_KEYS",
    "load_sidecar",
    "read_yaml",
]

SIDECAR_VERSION = 1
SIDECAR_KEYS = (
    "version",
    "vehicle",
    "description",
    "body_link",
    "wheels",
    "actuated",
    "joint_constraints",
    "sensors",
    "encoder_map",
    "options",
    "parameters",
    "std",
    "tracks",
    "loop_closures",
    "controller",
    "steering",
)
LOOP_CLOSURE_KEYS = ("name", "type", "frame_a", "point_a", "frame_b", "point_b", "axis_b",
                     "length")
TRACK_KEYS = ("link", "sprocket", "sprocket_radius", "sprocket_xyz", "idler_radius",
              "idler_xyz", "road_wheels", "width", "samples", "drive_radius")


@dataclass
class WheelEntry:
    """Sidecar data of one wheel joint; ``None`` means "take it from the URDF"."""

    radius: float | None = None
    width: float | None = None


@dataclass
class SensorEntry:
    """Sidecar sensor: either ``link`` (a URDF link) or ``parent`` with a pose."""

    name: str
    link: str | None = None
    parent: str | None = None
    xyz: tuple[float, float, float] = (0.0, 0.0, 0.0)
    rpy: tuple[float, float, float] = (0.0, 0.0, 0.0)


@dataclass
class TrackEntry:
    """Sidecar track: geometry in the coordinates of ``link`` (None: the sprocket's parent)."""

    name: str
    sprocket: str
    sprocket_radius: float
    sprocket_xyz: tuple[float, float, float]
    idler_radius: float
    idler_xyz: tuple[float, float, float]
    link: str | None = None
    road_wheels: list[tuple[tuple[float, float, float], float]] = field(default_factory=list)
    width: float = 0.0
    samples: int = 16
    drive_radius: float | None = None


@dataclass
class Sidecar:
    """Parsed and type-checked sidecar (joint names are checked against the URDF later)."""

    source: str = "<no sidecar>"
    vehicle: str | None = None
    body_link: str | None = None
    wheels: dict[str, WheelEntry] | None = None
    actuated: list[str] | None = None
    joint_constraints: list[tuple[str, dict[str, float], float]] = field(default_factory=list)
    joint_constraint_springs: dict[str, tuple[float | None, float | None, float]] = field(
        default_factory=dict)
    loop_closures: list[LoopClosureSpec] = field(default_factory=list)
    sensors: list[SensorEntry] = field(default_factory=list)
    encoder_map: dict[str, list[str]] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)
    parameters: dict[str, float] = field(default_factory=dict)
    tracks: list[TrackEntry] = field(default_factory=list)
    controller: dict[str, Any] = field(default_factory=dict)
    steering: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: encoder -> (wheel joints it drives through a differential, ratio): ``encoder_map``
    #: entries of the form ``{differential: [...], ratio: r}``
    differentials: dict[str, tuple[list[str], float]] = field(default_factory=dict)


# ---- shared YAML helpers ------------------------------------------------------------------------


def read_yaml(src: str | os.PathLike[str] | Mapping[str, Any], what: str) -> tuple[Any, str]:
    """Read YAML from a path, a YAML text or an already-parsed mapping.

    Returns ``(data, source)`` where ``source`` is the file path, ``"<string>"`` or ``"<dict>"``.
    A string containing a newline or a ``:`` that is not an existing file is taken as YAML text.
    """
    if isinstance(src, Mapping):
        return dict(src), "<dict>"
    if isinstance(src, str) and not os.path.exists(src) and ("\n" in src or ": " in src):
        text, source = src, "<string>"
    else:
        from wmr_model.io.files import read_text

        path = Path(src)
        source = str(path)
        if not path.is_file():
            raise ModelError(f"{source}: {what} file not found")
        text = read_text(path, what, ModelError)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ModelError(f"{source}: malformed YAML{at}: {problem}") from None
    return data, source


def expect_mapping(value: Any, where: str) -> dict[str, Any]:
    """``value`` as a dict with string keys, else ModelError naming ``where``."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ModelError(f"{where} must be a mapping, got {type(value).__name__}")
    for k in value:
        if not isinstance(k, str):
            raise ModelError(f"{where}: keys must be strings, got {k!r}")
    return dict(value)


def check_keys(data: Mapping[str, Any], allowed: tuple[str, ...], where: str) -> None:
    """ModelError listing the allowed keys when ``data`` has any other key."""
    unknown = [k for k in data if k not in allowed]
    if unknown:
        raise ModelError(
            f"{where}: unknown key(s) {unknown}; allowed keys are {list(allowed)}"
        )


def finite_number(value: Any, where: str) -> float:
    """``value`` as a finite float (bools rejected), else ModelError naming ``where``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ModelError(f"{where} must be a number, got {value!r}")
    v = float(value)
    if not math.isfinite(v):
        raise ModelError(f"{where} must be finite, got {v}")
    return v


def vec3(value: Any, where: str) -> tuple[float, float, float]:
    """Three finite numbers."""
    if not isinstance(value, (list, tuple)) or len(value) != 3:
        raise ModelError(f"{where} must be a list of 3 numbers, got {value!r}")
    x, y, z = (finite_number(v, f"{where}[{i}]") for i, v in enumerate(value))
    return (x, y, z)


def name_list(value: Any, where: str) -> list[str]:
    """A list of non-empty strings without duplicates."""
    if not isinstance(value, (list, tuple)):
        raise ModelError(f"{where} must be a list of names, got {value!r}")
    out: list[str] = []
    for i, v in enumerate(value):
        if not isinstance(v, str) or not v:
            raise ModelError(f"{where}[{i}] must be a name, got {v!r}")
        if v in out:
            raise ModelError(f"{where}: {v!r} is listed twice")
        out.append(v)
    return out


def parse_joint_constraints(
    value: Any, where: str, *, allow_spring: bool = False
) -> list[tuple[str, dict[str, float], float]]:
    """``[{name, terms: {joint: coef}, offset}]`` -> list of (name, terms, offset).

    With ``allow_spring`` the items may also carry ``stiffness`` and ``damping`` (read by
    :func:`parse_joint_constraint_springs`).
    """
    if value is None:
        return []
    if not isinstance(value, list):
        raise ModelError(f"{where} must be a list of {{name, terms, offset}}, got {value!r}")
    out = []
    names: set[str] = set()
    for i, item in enumerate(value):
        w = f"{where}[{i}]"
        c = expect_mapping(item, w)
        keys = ("name", "terms", "offset") + (("stiffness", "damping", "preload")
                                              if allow_spring else ())
        check_keys(c, keys, w)
        name = c.get("name", f"constraint{i}")
        if not isinstance(name, str) or not name:
            raise ModelError(f"{w}.name must be a non-empty string, got {name!r}")
        if name in names:
            raise ModelError(f"{w}: constraint name {name!r} is used twice")
        names.add(name)
        terms = expect_mapping(c.get("terms"), f"{w} ({name}).terms")
        if not terms:
            raise ModelError(f"{w} ({name}).terms must name at least one joint")
        coefs = {j: finite_number(a, f"{w} ({name}).terms.{j}") for j, a in terms.items()}
        offset = finite_number(c.get("offset", 0.0), f"{w} ({name}).offset")
        out.append((name, coefs, offset))
    return out


def parse_joint_constraint_springs(
    value: Any, where: str
) -> dict[str, tuple[float | None, float | None, float]]:
    """``(stiffness, damping, preload)`` of each joint constraint that gives any, by name.

    Stiffness and damping are >= 0 (None when absent), preload any finite number (0 when
    absent). Call after :func:`parse_joint_constraints` (which checked the list's structure).
    """
    out: dict[str, tuple[float | None, float | None, float]] = {}
    for i, item in enumerate(value or []):
        name = item.get("name", f"constraint{i}")
        vals: list[float | None] = []
        for key in ("stiffness", "damping"):
            v = item.get(key)
            if v is not None:
                v = finite_number(v, f"{where}[{i}] ({name}).{key}")
                if v < 0:
                    raise ModelError(f"{where}[{i}] ({name}).{key} must be >= 0, got {v}")
            vals.append(v)
        pre = finite_number(item.get("preload", 0.0), f"{where}[{i}] ({name}).preload")
        if vals[0] is not None or vals[1] is not None or pre != 0.0:
            out[name] = (vals[0], vals[1], pre)
    return out


def _parse_loop_closures(value: Any, where: str) -> list[LoopClosureSpec]:
    """``[{name, type, frame_a, point_a, frame_b, point_b, axis_b, length}]``."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise ModelError(f"{where} must be a list of {{name, type, frame_a, point_a, frame_b, "
                         f"...}}, got {value!r}")
    out: list[LoopClosureSpec] = []
    for i, item in enumerate(value):
        w = f"{where}[{i}]"
        m = expect_mapping(item, w)
        check_keys(m, LOOP_CLOSURE_KEYS, w)
        name = m.get("name")
        if not isinstance(name, str) or not name:
            raise ModelError(f"{w}.name must be a non-empty string, got {name!r}")
        if any(e.name == name for e in out):
            raise ModelError(f"{w}: loop closure name {name!r} is used twice")
        w = f"{w} ({name})"
        kind = m.get("type")
        if kind not in ("point", "point_on_axis", "distance"):
            raise ModelError(f"{w}.type must be one of ['point', 'point_on_axis', 'distance'], "
                             f"got {kind!r}")
        for key in ("frame_a", "frame_b"):
            v = m.get(key)
            if not isinstance(v, str) or not v:
                raise ModelError(f"{w}.{key} must be a frame or link name, got {v!r}")
        if m.get("point_a") is None:
            raise ModelError(f"{w}.point_a is required")
        axis = m.get("axis_b")
        if kind == "point_on_axis" and axis is None:
            raise ModelError(f"{w}.axis_b is required for type point_on_axis")
        if kind != "point_on_axis" and axis is not None:
            raise ModelError(f"{w}.axis_b is only used by type point_on_axis")
        length = m.get("length")
        if length is not None:
            if kind != "distance":
                raise ModelError(f"{w}.length is only used by type distance")
            length = finite_number(length, f"{w}.length")
            if length <= 0:
                raise ModelError(f"{w}.length must be > 0 m, got {length}")
        out.append(LoopClosureSpec(
            name=name, kind=kind, frame_a=m["frame_a"], point_a=vec3(m["point_a"], f"{w}.point_a"),
            frame_b=m["frame_b"], point_b=vec3(m.get("point_b", [0, 0, 0]), f"{w}.point_b"),
            axis_b=None if axis is None else vec3(axis, f"{w}.axis_b"), length=length))
    return out


def parse_parameters(value: Any, where: str) -> dict[str, float]:
    """``{dotted.name: number}``; names are dotted identifiers like ``wheel.FL.radius``."""
    params = expect_mapping(value, where)
    out = {}
    for k, v in params.items():
        parts = k.split(".")
        if not all(p and (p.replace("_", "a").isalnum()) for p in parts):
            raise ModelError(f"{where}: {k!r} is not a dotted parameter name like 'slip.p1'")
        out[k] = finite_number(v, f"{where}.{k}")
    return out


def parse_sensors(value: Any, where: str, *, allow_link: bool) -> list[SensorEntry]:
    """``{name: {link}}`` or ``{name: {parent, xyz, rpy}}``."""
    sensors = expect_mapping(value, where)
    out = []
    allowed = ("link", "parent", "xyz", "rpy") if allow_link else ("parent", "xyz", "rpy")
    for name, spec in sensors.items():
        w = f"{where}.{name}"
        s = expect_mapping(spec, w)
        check_keys(s, allowed, w)
        link, parent = s.get("link"), s.get("parent")
        if (link is None) == (parent is None):
            need = "exactly one of 'link' or 'parent'" if allow_link else "'parent'"
            raise ModelError(f"{w}: give {need}")
        for key, v in (("link", link), ("parent", parent)):
            if v is not None and (not isinstance(v, str) or not v):
                raise ModelError(f"{w}.{key} must be a name, got {v!r}")
        out.append(
            SensorEntry(
                name=name,
                link=link,
                parent=parent,
                xyz=vec3(s.get("xyz", [0, 0, 0]), f"{w}.xyz"),
                rpy=vec3(s.get("rpy", [0, 0, 0]), f"{w}.rpy"),
            )
        )
    return out


def check_version(data: Mapping[str, Any], source: str, supported: int) -> None:
    """Accept a missing version (= 1) or exactly ``supported``."""
    v = data.get("version", 1)
    if isinstance(v, bool) or v != supported:
        raise ModelError(f"{source}: version must be {supported}, got {v!r}")


# ---- sidecar ------------------------------------------------------------------------------------


def _parse_wheels(value: Any, where: str) -> dict[str, WheelEntry]:
    if isinstance(value, list):
        items: dict[str, Any] = {}
        for i, item in enumerate(value):
            w = f"{where}[{i}]"
            m = expect_mapping(item, w)
            check_keys(m, ("joint", "radius", "width"), w)
            j = m.pop("joint", None)
            if not isinstance(j, str) or not j:
                raise ModelError(f"{w}.joint must be a joint name, got {j!r}")
            if j in items:
                raise ModelError(f"{where}: joint {j!r} is listed twice")
            items[j] = m
    else:
        items = expect_mapping(value, where)
    out = {}
    for j, spec in items.items():
        w = f"{where}.{j}"
        m = expect_mapping(spec, w)
        check_keys(m, ("radius", "width"), w)
        entry = WheelEntry()
        if m.get("radius") is not None:
            r = finite_number(m["radius"], f"{w}.radius")
            if r <= 0:
                raise ModelError(f"{w}.radius must be > 0 m, got {r}")
            entry.radius = r
        if m.get("width") is not None:
            wd = finite_number(m["width"], f"{w}.width")
            if wd < 0:
                raise ModelError(f"{w}.width must be >= 0 m, got {wd}")
            entry.width = wd
        out[j] = entry
    return out


def _positive(value: Any, where: str) -> float:
    v = finite_number(value, where)
    if v <= 0:
        raise ModelError(f"{where} must be > 0 m, got {v}")
    return v


def _parse_tracks(value: Any, where: str) -> list[TrackEntry]:
    """``{name: {sprocket, sprocket_radius, sprocket_xyz, idler_radius, idler_xyz, ...}}``."""
    out = []
    for name, spec in expect_mapping(value, where).items():
        w = f"{where}.{name}"
        m = expect_mapping(spec, w)
        check_keys(m, TRACK_KEYS, w)
        for key in ("sprocket", "sprocket_radius", "sprocket_xyz", "idler_radius", "idler_xyz"):
            if m.get(key) is None:
                raise ModelError(f"{w}.{key} is required")
        for key in ("sprocket", "link"):
            v = m.get(key)
            if v is not None and (not isinstance(v, str) or not v):
                raise ModelError(f"{w}.{key} must be a name, got {v!r}")
        rws = m.get("road_wheels") or []
        if not isinstance(rws, list):
            raise ModelError(f"{w}.road_wheels must be a list of {{xyz, radius}}, got {rws!r}")
        road = []
        for i, rw in enumerate(rws):
            rm = expect_mapping(rw, f"{w}.road_wheels[{i}]")
            check_keys(rm, ("xyz", "radius"), f"{w}.road_wheels[{i}]")
            road.append((vec3(rm.get("xyz"), f"{w}.road_wheels[{i}].xyz"),
                         _positive(rm.get("radius"), f"{w}.road_wheels[{i}].radius")))
        width = finite_number(m.get("width", 0.0), f"{w}.width")
        if width < 0:
            raise ModelError(f"{w}.width must be >= 0 m, got {width}")
        samples = m.get("samples", 16)
        if isinstance(samples, bool) or not isinstance(samples, int) or samples < 2:
            raise ModelError(f"{w}.samples must be an integer >= 2, got {samples!r}")
        from wmr_model.budgets import MAX_TRACK_SAMPLES

        if samples > MAX_TRACK_SAMPLES:
            raise ModelError(f"{w}.samples: {samples:,} exceeds the budget of "
                             f"{MAX_TRACK_SAMPLES:,} contact samples per track")
        out.append(TrackEntry(
            name=name,
            sprocket=m["sprocket"],
            sprocket_radius=_positive(m["sprocket_radius"], f"{w}.sprocket_radius"),
            sprocket_xyz=vec3(m["sprocket_xyz"], f"{w}.sprocket_xyz"),
            idler_radius=_positive(m["idler_radius"], f"{w}.idler_radius"),
            idler_xyz=vec3(m["idler_xyz"], f"{w}.idler_xyz"),
            link=m.get("link"),
            road_wheels=road,
            width=width,
            samples=samples,
            drive_radius=(None if m.get("drive_radius") is None
                          else _positive(m["drive_radius"], f"{w}.drive_radius")),
        ))
    return out


def load_sidecar(src: str | os.PathLike[str] | Mapping[str, Any] | None) -> Sidecar:
    """Read and type-check a sidecar (path, YAML text or dict); ``None`` gives an empty one.

    Joint and link names are checked against the URDF by :func:`wmr_model.io.urdf.load_urdf`.
    """
    if src is None:
        return Sidecar()
    data, source = read_yaml(src, "sidecar")
    name = Path(source).name if source not in ("<string>", "<dict>") else source
    data = expect_mapping(data, f"{name}: the document")
    check_keys(data, SIDECAR_KEYS, name)
    check_version(data, name, SIDECAR_VERSION)
    sc = Sidecar(source=name)
    for key in ("vehicle", "body_link"):
        v = data.get(key)
        if v is not None and (not isinstance(v, str) or not v):
            raise ModelError(f"{name}: {key} must be a non-empty string, got {v!r}")
        setattr(sc, key, v)
    if data.get("wheels") is not None:
        sc.wheels = _parse_wheels(data["wheels"], f"{name}: wheels")
    if data.get("actuated") is not None:
        sc.actuated = name_list(data["actuated"], f"{name}: actuated")
    sc.joint_constraints = parse_joint_constraints(
        data.get("joint_constraints"), f"{name}: joint_constraints", allow_spring=True
    )
    sc.joint_constraint_springs = parse_joint_constraint_springs(
        data.get("joint_constraints"), f"{name}: joint_constraints")
    sc.loop_closures = _parse_loop_closures(data.get("loop_closures"), f"{name}: loop_closures")
    sc.sensors = parse_sensors(data.get("sensors"), f"{name}: sensors", allow_link=True)
    emap = expect_mapping(data.get("encoder_map"), f"{name}: encoder_map")
    for k, v in emap.items():
        if isinstance(v, Mapping):
            sc.differentials[str(k)] = _parse_differential(v, f"{name}: encoder_map.{k}")
            sc.encoder_map[str(k)] = [str(k)]
        else:
            sc.encoder_map[str(k)] = name_list(v, f"{name}: encoder_map.{k}")
    sc.options = expect_mapping(data.get("options"), f"{name}: options")
    sc.parameters = parse_parameters(data.get("parameters"), f"{name}: parameters")
    sc.tracks = _parse_tracks(data.get("tracks"), f"{name}: tracks")
    sc.controller = dict(expect_mapping(data.get("controller"), f"{name}: controller"))
    sc.steering = _parse_steering(data.get("steering"), f"{name}: steering")
    return sc


#: Keys of a differential ``encoder_map`` entry.
DIFFERENTIAL_KEYS = ("differential", "ratio")


def _parse_differential(m: Mapping[str, Any], where: str) -> tuple[list[str], float]:
    """``{differential: [wheel joints], ratio: r}`` -> (wheels, r): the encoder turns with the
    mean of the wheels' rates divided by ``r`` (mean wheel rate = r x encoder rate)."""
    check_keys(m, DIFFERENTIAL_KEYS, where)
    wheels = name_list(m.get("differential"), f"{where}.differential")
    if len(wheels) < 2 or len(set(wheels)) != len(wheels):
        raise ModelError(f"{where}.differential: needs two or more distinct wheel joints, got "
                         f"{wheels}")
    ratio = finite_number(m.get("ratio", 1.0), f"{where}.ratio")
    if ratio == 0.0:
        raise ModelError(f"{where}.ratio: must not be 0 (mean wheel rate = ratio x encoder "
                         "rate)")
    return wheels, ratio


#: Keys of one ``steering`` entry.
STEERING_KEYS = ("source", "lag", "topic")


def _parse_steering(value: Any, where: str) -> dict[str, dict[str, Any]]:
    """``steering``: joint -> {source: measured|commanded, lag [s], topic} (types checked;
    the joints and values are checked against the model by
    :func:`wmr_model.estimation.steering.steer_inputs`)."""
    out: dict[str, dict[str, Any]] = {}
    for joint, entry in expect_mapping(value, where).items():
        w = f"{where}.{joint}"
        m = expect_mapping(entry, w)
        check_keys(m, STEERING_KEYS, w)
        e: dict[str, Any] = {"source": str(m.get("source", "measured"))}
        if m.get("lag") is not None:
            e["lag"] = finite_number(m["lag"], f"{w}.lag")
        if m.get("topic") is not None:
            if not isinstance(m["topic"], str) or not m["topic"]:
                raise ModelError(f"{w}.topic: must be a non-empty string, got {m['topic']!r}")
            e["topic"] = m["topic"]
        out[str(joint)] = e
    return out
