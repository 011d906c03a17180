"""URDF + YAML sidecar -> :class:`~wmr_model.vehicles.model.VehicleSpec`.

The URDF (a file, or the XML text a ROS node receives as ``robot_description``) is parsed with
yourdfpy (no meshes are loaded). Mapping to the thesis' frame list (§2.2.1):

* ``revolute``, ``continuous`` (unlimited revolute) and ``prismatic`` joints become frames named
  after the joint; the frame's parent is the frame that carries the joint's parent link.
* ``fixed`` joints are merged: the child link is carried rigidly by its parent's frame, its
  inertia is added to that frame's (rotated into the frame, parallel-axis theorem), and it can
  still be named as a sensor in the sidecar.
* ``floating`` and ``planar`` joints are rejected: the body's 6 DOF are implicit, every other
  frame has one.
* The body is the root link, or the sidecar's ``body_link`` if that is joined to the root by
  fixed joints only (e.g. ``base_footprint`` -> ``base_link``).
* ``<mimic joint=J multiplier=m offset=o/>`` on joint K adds the holonomic joint constraint
  ``theta_K - m theta_J - o = 0`` named ``mimic_K``.
* Wheels are the sidecar's ``wheels`` joints (default: every ``continuous`` joint). The contact
  model assumes a wheel spins about its frame's +y axis. A wheel joint whose axis is not +y
  (e.g. axis ``0 0 1`` in a link rolled by -pi/2, common in ROS robots) is re-expressed: its
  frame is rotated about the joint origin so that +y is the joint axis and z is as close as
  possible to the body's up direction; child frames, inertia and sensors follow, so the
  kinematics are unchanged. A wheel axis within 45 deg of the body vertical is an error.
* Wheel radius and width come from a ``<collision>`` ``<cylinder>`` (radius, length; its axis
  must be the spin axis) or ``<sphere>`` (radius, width 0) of the wheel link, unless the
  sidecar gives them (the sidecar wins).

The sidecar schema is documented in :mod:`wmr_model.io.sidecar` and ``config/vehicles/README.md``.
Errors are :class:`~wmr_model.errors.ModelError` naming the file, the joint/link and the fault.
"""

from __future__ import annotations

import io
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from wmr_model.errors import ModelError
from wmr_model.io.sidecar import Sidecar, WheelEntry, load_sidecar
from wmr_model.spatial import euler_to_rot
from wmr_model.vehicles.model import (
    FrameSpec,
    JointConstraintSpec,
    LoopClosureSpec,
    SensorSpec,
    TrackSpec,
    VehicleSpec,
)

__all__ = ["load_urdf", "read_urdf_text", "combine_inertias", "rpy_from_rot"]

_MOVING = ("revolute", "continuous", "prismatic")
_KNOWN_TYPES = (*_MOVING, "fixed", "floating", "planar")
_XACRO_NS = "{http://www.ros.org/wiki/xacro}"
# A wheel axis closer than this (|cos|) to the body vertical cannot roll on the ground.
_MAX_WHEEL_AXIS_UP_COS = math.sqrt(0.5)
# Tolerance on unit-vector comparisons (axis == +y, cylinder axis parallel to the spin axis).
_AXIS_TOL = 1e-6


def rpy_from_rot(R: np.ndarray) -> tuple[float, float, float]:
    """Roll, pitch, yaw with :math:`R = R_z R_y R_x` (A.9); yaw = 0 at pitch = +-90 deg."""
    sp = -float(R[2, 0])
    cp = math.hypot(float(R[0, 0]), float(R[1, 0]))
    if cp < 1e-9:  # gimbal lock: only roll - yaw (or roll + yaw) is defined; put it in roll
        pitch = math.copysign(math.pi / 2.0, sp)
        return (math.atan2(-float(R[1, 2]), float(R[1, 1])), pitch, 0.0)
    return (
        math.atan2(float(R[2, 1]), float(R[2, 2])),
        math.atan2(sp, cp),
        math.atan2(float(R[1, 0]), float(R[0, 0])),
    )


def combine_inertias(
    parts: list[tuple[float, np.ndarray, np.ndarray]],
) -> tuple[float, np.ndarray, np.ndarray]:
    """Composite rigid body of ``(mass, com (3,), inertia about com (3, 3))`` parts.

    All parts are in one frame. Returns total mass, composite com and the inertia about it
    (parallel-axis theorem: :math:`I = \\sum_k I_k + m_k (|d_k|^2 E - d_k d_k^T)`,
    :math:`d_k = c_k - c`).
    """
    m = float(sum(p[0] for p in parts))
    if m <= 0.0:
        return 0.0, np.zeros(3), sum((p[2] for p in parts), np.zeros((3, 3)))
    c = np.asarray(sum(p[0] * np.asarray(p[1]) for p in parts)) / m
    inertia = np.zeros((3, 3))
    for mk, ck, Ik in parts:
        d = np.asarray(ck) - c
        inertia += Ik + mk * (float(d @ d) * np.eye(3) - np.outer(d, d))
    return m, c, 0.5 * (inertia + inertia.T)


def read_urdf_text(urdf: str | bytes | os.PathLike[str]) -> tuple[bytes, str]:
    """URDF bytes and source: a path, or XML text (a string starting with ``<``)."""
    if isinstance(urdf, bytes):
        return urdf, "<string>"
    if isinstance(urdf, str) and urdf.lstrip().startswith("<"):
        return urdf.encode("utf-8"), "<string>"
    path = Path(urdf)
    if not path.is_file():
        raise ModelError(f"{path}: URDF file not found")
    return path.read_bytes(), str(path)


def _check_xml(text: bytes, label: str) -> None:
    """Parse errors and missing required attributes with file/line context (before yourdfpy)."""
    from lxml import etree

    try:
        root = etree.fromstring(text, parser=etree.XMLParser(remove_blank_text=True))
    except etree.XMLSyntaxError as exc:
        raise ModelError(f"{label}: malformed URDF XML: {exc}") from None
    if root.tag != "robot":
        raise ModelError(f"{label}: root element must be <robot>, got <{root.tag}>")
    for el in root.iter():
        if isinstance(el.tag, str) and el.tag.startswith(_XACRO_NS):
            raise ModelError(
                f"{label}: line {el.sourceline}: xacro element found; expand it with xacro first"
            )
    for el in root.findall("link"):
        if not el.get("name"):
            raise ModelError(f"{label}: line {el.sourceline}: <link> without a name")
    for el in root.findall("joint"):
        name = el.get("name")
        if not name:
            raise ModelError(f"{label}: line {el.sourceline}: <joint> without a name")
        jtype = el.get("type")
        if jtype not in _KNOWN_TYPES:
            raise ModelError(
                f"{label}: joint {name!r}: unknown type {jtype!r}; URDF types are "
                f"{list(_KNOWN_TYPES)}"
            )
        if jtype in ("floating", "planar"):
            raise ModelError(
                f"{label}: joint {name!r}: type {jtype!r} is not supported (the body's 6 DOF are "
                "implicit; other joints must be revolute, continuous, prismatic or fixed)"
            )
        for tag in ("parent", "child"):
            sub = el.find(tag)
            if sub is None or not sub.get("link"):
                raise ModelError(f"{label}: joint {name!r}: missing <{tag} link=...>")
    for el in root.iter("origin", "axis"):
        for attr in ("xyz", "rpy"):
            text_ = el.get(attr)
            if text_ is None:
                continue
            parts = text_.split()
            try:
                ok = len(parts) == 3 and all(isinstance(float(v), float) for v in parts)
            except ValueError:
                ok = False
            if not ok:
                raise ModelError(f"{label}: line {el.sourceline}: <{el.tag} {attr}=\"{text_}\">: "
                                 "expected 3 numbers")


def _finite_T(T: Any, where: str) -> np.ndarray:
    if T is None:
        return np.eye(4)
    T = np.asarray(T, dtype=float)
    if not np.all(np.isfinite(T)):
        raise ModelError(f"{where}: origin must be finite (check xyz/rpy for nan/inf)")
    return T


def _T(xyz: Any, rpy: Any) -> np.ndarray:
    T = np.eye(4)
    T[:3, :3] = euler_to_rot(float(rpy[0]), float(rpy[1]), float(rpy[2]))
    T[:3, 3] = xyz
    return T


def _unknown(sc: Sidecar, key: str, joint: str, label: str, known: list[str]) -> ModelError:
    return ModelError(
        f"{sc.source}: {key}: joint {joint!r} is not a joint of {label}; joints are {known}"
    )


@dataclass
class _Tree:
    """The URDF as :func:`load_urdf` walks it.

    ``links``/``joints`` by name; ``host[link]`` is the model frame carrying the link (a movable
    joint's name, or the body link) and ``T_host[link]`` (4, 4) its pose in that frame;
    ``frames`` maps each movable joint to its frame data (parent frame, type, unit axis, ``T0``
    at zero displacement, limits, child link), in depth-first pre-order with siblings in
    document order (the thesis' frame-table order).
    """

    label: str
    links: dict[str, Any]
    joints: dict[str, Any]
    root: str
    body: str
    host: dict[str, str]
    T_host: dict[str, np.ndarray]
    frames: dict[str, dict[str, Any]]
    known_joints: list[str]


def load_urdf(
    urdf: str | bytes | os.PathLike[str],
    sidecar: str | os.PathLike[str] | Mapping[str, Any] | None = None,
) -> VehicleSpec:
    """Load a URDF (file path or XML text) and its sidecar (path, YAML text, dict or None).

    Returns
    -------
    VehicleSpec
        ``source`` is the URDF path (``"<string>"`` for XML text); pass it to
        :func:`~wmr_model.vehicles.model.compile_vehicle`.
    """
    text, source = read_urdf_text(urdf)
    label = Path(source).name if source != "<string>" else source
    _check_xml(text, label)
    robot = _parse_robot(text, label)
    sc = load_sidecar(sidecar)
    links, joints, root = _link_graph(robot, label)
    tree = _walk_tree(robot, links, joints, root, sc, label)
    _reroot_at_body(tree, sc.source)
    wheel_entries = _wheel_entries(sc, tree)
    for jn, f in tree.frames.items():  # tree order: a wheel's ancestors are final before it
        if jn in wheel_entries:
            _spin_about_y(jn, f, tree.frames, tree.host, tree.T_host, label)
    wheel_geom = _wheel_sizes(sc, tree, wheel_entries)
    inertial = _host_inertias(tree)
    actuated = _actuated_joints(sc, tree, wheel_entries)
    constraints = _joint_constraints(sc, tree)
    loops = _loop_closures(sc, label, tree.frames, links, tree.host, tree.T_host, tree.body)
    sensors = _sensors(sc, tree)
    diff_frames, diff_constraints = _differentials(sc, tree, wheel_entries, actuated)
    constraints += diff_constraints
    for enc, targets in sc.encoder_map.items():
        for jn in targets:
            if jn not in tree.frames and jn not in sc.differentials:
                raise _unknown(sc, f"encoder_map.{enc}", jn, label, tree.known_joints)
    tracks = _tracks(sc, label, tree.frames, joints, links, tree.host, tree.T_host,
                     tree.known_joints)
    bm, bc, bI = inertial.get(tree.body, (0.0, np.zeros(3), np.zeros((3, 3))))
    name = sc.vehicle or robot.name or (Path(source).stem if source != "<string>" else "vehicle")
    return VehicleSpec(
        name=name,
        frames=_frame_specs(tree, inertial, wheel_geom, actuated) + diff_frames,
        body_name=tree.body,
        body_mass=bm,
        body_com=tuple(bc),
        body_inertia=bI,
        joint_constraints=constraints,
        sensors=sensors,
        options=_spec_options(sc),
        source=source,
        tracks=tracks,
        loop_closures=loops,
    )


def _parse_robot(text: bytes, label: str) -> Any:
    """The yourdfpy robot of checked URDF ``text`` (no meshes loaded)."""
    import yourdfpy

    try:
        return yourdfpy.URDF.load(
            io.BytesIO(text),
            build_scene_graph=False,
            build_collision_scene_graph=False,
            load_meshes=False,
            load_collision_meshes=False,
        ).robot
    except Exception as exc:  # yourdfpy raises assorted types on malformed content
        raise ModelError(f"{label}: malformed URDF: {type(exc).__name__}: {exc}") from None


def _link_graph(robot: Any, label: str) -> tuple[dict[str, Any], dict[str, Any], str]:
    """Links and joints by name and the root link; ModelError unless the links form one tree
    (names unique, every joint's links defined, one parent joint per link, one root)."""
    links: dict[str, Any] = {}
    for lk in robot.links:
        if lk.name in links:
            raise ModelError(f"{label}: link {lk.name!r} is defined twice")
        links[lk.name] = lk
    joints: dict[str, Any] = {}
    child_of: dict[str, str] = {}
    for j in robot.joints:
        if j.name in joints:
            raise ModelError(f"{label}: joint {j.name!r} is defined twice")
        joints[j.name] = j
        for role, ln in (("parent", j.parent), ("child", j.child)):
            if ln not in links:
                raise ModelError(
                    f"{label}: joint {j.name!r}: {role} link {ln!r} is not defined; "
                    f"links are {sorted(links)}"
                )
        if j.child in child_of:
            raise ModelError(
                f"{label}: link {j.child!r} is the child of two joints, "
                f"{child_of[j.child]!r} and {j.name!r} (a URDF must be a tree)"
            )
        child_of[j.child] = j.name
    roots = [n for n in links if n not in child_of]
    if not links:
        raise ModelError(f"{label}: no <link> elements")
    if not roots:
        raise ModelError(f"{label}: joints form a cycle: every link has a parent joint")
    if len(roots) > 1:
        raise ModelError(f"{label}: more than one root link {roots}; a URDF must be one tree")
    return links, joints, roots[0]


def _walk_tree(robot: Any, links: dict[str, Any], joints: dict[str, Any], root: str,
               sc: Sidecar, label: str) -> _Tree:
    """Host frame of every link and its pose in that frame, and the movable joints' frames,
    walking from the root depth first (fixed joints merge their child into the parent's host)."""
    known_joints = sorted(n for n, j in joints.items() if j.type in _MOVING)
    body = sc.body_link or root
    if body not in links:
        raise ModelError(f"{sc.source}: body_link {body!r} is not a link of {label}; "
                         f"links are {sorted(links)}")
    children: dict[str, list[Any]] = {n: [] for n in links}
    for j in robot.joints:
        children[j.parent].append(j)
    tree = _Tree(label, links, joints, root, body, {root: body}, {root: np.eye(4)}, {},
                 known_joints)
    # depth-first pre-order, siblings in document order: the thesis' frame-table order
    stack = list(reversed(children[root]))
    while stack:
        j = stack.pop()
        ln = j.parent
        T_pj = tree.T_host[ln] @ _finite_T(j.origin, f"{label}: joint {j.name!r}")
        if j.type == "fixed":
            tree.host[j.child] = tree.host[ln]
            tree.T_host[j.child] = T_pj
        else:
            tree.frames[j.name] = _joint_frame(j, tree.host[ln], T_pj, label)
            tree.host[j.child] = j.name
            tree.T_host[j.child] = np.eye(4)
        stack.extend(reversed(children[j.child]))
    unreached = [n for n in links if n not in tree.host]
    if unreached:
        raise ModelError(f"{label}: links {unreached} form a cycle (not reachable from {root!r})")
    return tree


def _joint_frame(j: Any, parent: str, T_pj: np.ndarray, label: str) -> dict[str, Any]:
    """Frame data of movable joint ``j`` carried by frame ``parent`` at pose ``T_pj`` there."""
    where = f"{label}: joint {j.name!r}"
    axis = np.asarray(j.axis if j.axis is not None else (1.0, 0.0, 0.0), dtype=float)
    if not np.all(np.isfinite(axis)):
        raise ModelError(f"{where}: axis must be finite, got {axis.tolist()}")
    big = float(np.abs(axis).max())  # scaled first: the norm of (1e200, 1e200, 0) is finite
    na = big * float(np.linalg.norm(axis / big)) if big > 0.0 else 0.0
    if na < 1e-9:
        raise ModelError(f"{where}: axis must be nonzero, got {axis.tolist()}")
    lower, upper = -math.inf, math.inf
    if j.type != "continuous" and j.limit is not None:
        if j.limit.lower is not None:
            lower = float(j.limit.lower)
        if j.limit.upper is not None:
            upper = float(j.limit.upper)
    return {
        "parent": parent,
        "type": "prismatic" if j.type == "prismatic" else "revolute",
        "axis": axis / na,
        "T0": T_pj,
        "lower": lower,
        "upper": upper,
        "link": j.child,
    }


def _reroot_at_body(tree: _Tree, sidecar: str) -> None:
    """Express everything the body link carries in the body link's own frame when the sidecar's
    ``body_link`` is not the root (it must hang from the root by fixed joints only)."""
    body, root = tree.body, tree.root
    if body == root:
        return
    if tree.host[body] != body or body in tree.frames:
        raise ModelError(
            f"{sidecar}: body_link {body!r} must be joined to the root link {root!r} by "
            "fixed joints only"
        )
    Tb_inv = np.linalg.inv(tree.T_host[body])
    for ln in tree.links:
        if tree.host[ln] == body:
            tree.T_host[ln] = Tb_inv @ tree.T_host[ln]
    for f in tree.frames.values():
        if f["parent"] == body:
            f["T0"] = Tb_inv @ f["T0"]


def _wheel_entries(sc: Sidecar, tree: _Tree) -> Mapping[str, WheelEntry]:
    """The sidecar's ``wheels`` (checked to be revolute/continuous joints), else every
    continuous joint that is not a track sprocket."""
    joints = tree.joints
    if sc.wheels is None:
        sprockets = {t.sprocket for t in sc.tracks}
        return {n: WheelEntry() for n, j in joints.items()
                if j.type == "continuous" and n not in sprockets}
    for jn in sc.wheels:
        if jn not in joints:
            raise _unknown(sc, f"wheels.{jn}", jn, tree.label, tree.known_joints)
        if joints[jn].type not in ("revolute", "continuous"):
            raise ModelError(
                f"{sc.source}: wheels.{jn}: joint {jn!r} is {joints[jn].type}; a wheel needs "
                "a revolute or continuous joint"
            )
    return sc.wheels


def _wheel_sizes(sc: Sidecar, tree: _Tree,
                 wheel_entries: Mapping[str, WheelEntry]) -> dict[str, tuple[float, float]]:
    """``(radius, width)`` [m] of each wheel joint: the sidecar's, else the wheel link's
    collision cylinder/sphere (a sidecar radius is checked against that geometry)."""
    label = tree.label
    wheel_geom: dict[str, tuple[float, float]] = {}
    for jn, entry in wheel_entries.items():
        f = tree.frames[jn]
        link, T_link = tree.links[f["link"]], tree.T_host[f["link"]]
        radius: float | None = None
        width: float | None = None
        if entry.radius is None or entry.width is None:
            radius, width = _wheel_geometry(link, T_link, f["axis"],
                                            f"{label}: wheel joint {jn!r}")
        if entry.radius is not None:
            _check_radius_against_collision(entry.radius, link, T_link, f["axis"],
                                            f"{label}: wheel joint {jn!r}", sc.source)
            radius = entry.radius
        if entry.width is not None:
            width = entry.width
        if radius is None:
            raise ModelError(
                f"{label}: wheel joint {jn!r} has no radius: link {f['link']!r} has no "
                f"<collision> cylinder or sphere and the sidecar ({sc.source}) gives no "
                f"wheels.{jn}.radius"
            )
        wheel_geom[jn] = (radius, width if width is not None else 0.0)
    return wheel_geom


def _host_inertias(tree: _Tree) -> dict[str, tuple[float, np.ndarray, np.ndarray]]:
    """Mass, com (3,) and inertia about the com (3, 3) of each host frame: every link's
    ``<inertial>`` moved into its host frame and merged (:func:`combine_inertias`)."""
    parts: dict[str, list[tuple[float, np.ndarray, np.ndarray]]] = {}
    for ln, lk in tree.links.items():
        if lk.inertial is None:
            continue
        where = f"{tree.label}: link {ln!r} <inertial>"
        m = float(lk.inertial.mass) if lk.inertial.mass is not None else 0.0
        if not (math.isfinite(m) and m >= 0.0):
            raise ModelError(f"{where}: mass must be >= 0 kg, got {m}")
        I_link = np.asarray(
            lk.inertial.inertia if lk.inertial.inertia is not None else np.zeros((3, 3)), float
        )
        if not np.all(np.isfinite(I_link)):
            raise ModelError(f"{where}: inertia must be finite")
        T = tree.T_host[ln] @ _finite_T(lk.inertial.origin, where)
        R = T[:3, :3]
        parts.setdefault(tree.host[ln], []).append((m, T[:3, 3].copy(), R @ I_link @ R.T))
    out = {}
    for h, p in parts.items():
        with np.errstate(over="ignore", invalid="ignore"):  # checked just below
            m, c, I_host = combine_inertias(p)
        if not (math.isfinite(m) and np.isfinite(c).all() and np.isfinite(I_host).all()):
            raise ModelError(f"{tree.label}: the <inertial> of the links on frame {h!r} overflow "
                             f"when combined (mass, inertia or origin out of any physical range)")
        out[h] = (m, c, I_host)
    return out


def _actuated_joints(sc: Sidecar, tree: _Tree,
                     wheel_entries: Mapping[str, WheelEntry]) -> set[str]:
    """The sidecar's ``actuated`` joints, else the wheels and the track sprockets."""
    if sc.actuated is None:
        return set(wheel_entries) | {t.sprocket for t in sc.tracks if t.sprocket in tree.frames}
    for jn in sc.actuated:
        if jn not in tree.frames:
            raise _unknown(sc, "actuated", jn, tree.label, tree.known_joints)
    return set(sc.actuated)


def _differentials(sc: Sidecar, tree: _Tree, wheel_entries: Mapping[str, WheelEntry],
                   actuated: set[str]) -> tuple[list[FrameSpec], list[JointConstraintSpec]]:
    """The sidecar's differential encoders (``encoder_map`` entries ``{differential, ratio}``):
    per encoder a massless actuated revolute joint of that name on the body (axis y), the
    wheels it drives made passive, and the holonomic constraint (2.25) ``sum(theta_w) -
    n ratio theta_enc = 0`` named ``differential_<encoder>``: the encoder turns with the mean of
    the wheels (an open differential), they share its rate only when driving straight.
    ``actuated`` is updated in place."""
    frames: list[FrameSpec] = []
    constraints: list[JointConstraintSpec] = []
    for enc, (wheels, ratio) in sc.differentials.items():
        where = f"encoder_map.{enc}.differential"
        if enc in tree.frames:
            raise ModelError(f"{sc.source}: encoder_map.{enc}: a differential encoder is a new "
                             f"joint, but the URDF already has a joint {enc!r}; name the "
                             "encoder differently")
        for w in wheels:
            if w not in tree.frames:
                raise _unknown(sc, where, w, tree.label, tree.known_joints)
            if w not in wheel_entries:
                raise ModelError(f"{sc.source}: {where}: {w!r} is not a wheel joint")
            actuated.discard(w)
        actuated.add(enc)
        frames.append(FrameSpec(name=enc, parent=tree.body, joint_type="revolute",
                                axis=(0.0, 1.0, 0.0), actuated=True))
        terms = {w: 1.0 for w in wheels}
        terms[enc] = -float(len(wheels)) * ratio
        constraints.append(JointConstraintSpec(f"differential_{enc}", terms, 0.0))
    return frames, constraints


def _joint_constraints(sc: Sidecar, tree: _Tree) -> list[JointConstraintSpec]:
    """``<mimic>`` constraints (named ``mimic_<joint>``), then the sidecar's
    ``joint_constraints`` with their springs."""
    label, frames, known_joints = tree.label, tree.frames, tree.known_joints
    constraints: list[JointConstraintSpec] = []
    for jn, j in tree.joints.items():
        if j.mimic is None or jn not in frames:
            continue
        if j.mimic.joint == jn:
            raise ModelError(f"{label}: joint {jn!r}: <mimic joint={jn!r}> refers to itself; a "
                             "joint can only mimic another joint")
        if j.mimic.joint not in frames:
            raise ModelError(
                f"{label}: joint {jn!r}: <mimic joint={j.mimic.joint!r}> is not a movable joint; "
                f"joints are {known_joints}"
            )
        mult = float(j.mimic.multiplier if j.mimic.multiplier is not None else 1.0)
        off = float(j.mimic.offset if j.mimic.offset is not None else 0.0)
        constraints.append(JointConstraintSpec(f"mimic_{jn}", {jn: 1.0, j.mimic.joint: -mult}, off))
    for cname, terms, offset in sc.joint_constraints:
        for jn in terms:
            if jn not in frames:
                raise _unknown(sc, f"joint_constraints ({cname})", jn, label, known_joints)
        k, d, pre = sc.joint_constraint_springs.get(cname, (None, None, 0.0))
        constraints.append(JointConstraintSpec(cname, dict(terms), offset, k, d, pre))
    return constraints


def _sensors(sc: Sidecar, tree: _Tree) -> list[SensorSpec]:
    """Sidecar ``sensors`` -> SensorSpec in the model frame carrying their link (or parent)."""
    sensors: list[SensorSpec] = []
    for s in sc.sensors:
        ref = s.link if s.link is not None else s.parent
        assert ref is not None
        T_s = _T(s.xyz, s.rpy)
        if ref in tree.links:
            T = tree.T_host[ref] @ T_s
            parent = tree.host[ref]
        elif s.link is None and (ref in tree.frames or ref == tree.body):
            T, parent = T_s, ref
        else:
            raise ModelError(
                f"{sc.source}: sensors.{s.name}: {ref!r} is not a link of {tree.label}; "
                f"links are {sorted(tree.links)}"
            )
        sensors.append(SensorSpec(s.name, parent, tuple(T[:3, 3]), rpy_from_rot(T[:3, :3])))
    return sensors


def _frame_specs(tree: _Tree, inertial: Mapping[str, tuple[float, np.ndarray, np.ndarray]],
                 wheel_geom: Mapping[str, tuple[float, float]],
                 actuated: set[str]) -> list[FrameSpec]:
    """One FrameSpec per movable joint, in tree order."""
    specs = []
    for jn, f in tree.frames.items():
        m, c, inertia = inertial.get(jn, (0.0, np.zeros(3), np.zeros((3, 3))))
        radius, width = wheel_geom.get(jn, (None, 0.0))
        specs.append(
            FrameSpec(
                name=jn,
                parent=f["parent"],
                joint_type=f["type"],
                axis=tuple(f["axis"]),
                xyz=tuple(f["T0"][:3, 3]),
                rpy=rpy_from_rot(f["T0"][:3, :3]),
                actuated=jn in actuated,
                lower=f["lower"],
                upper=f["upper"],
                mass=m,
                com=tuple(c),
                inertia=inertia,
                wheel_radius=radius,
                wheel_width=width,
            )
        )
    return specs


def _spec_options(sc: Sidecar) -> dict[str, Any]:
    """VehicleSpec options: the sidecar's, plus its parameters, encoder map and controller."""
    options = dict(sc.options)
    if sc.parameters:
        options["parameters"] = dict(sc.parameters)
    if sc.encoder_map:
        options["encoder_map"] = {k: list(v) for k, v in sc.encoder_map.items()}
    if sc.controller:
        options["controller"] = dict(sc.controller, source=sc.source)
    if sc.steering:
        options["steering"] = {k: dict(v) for k, v in sc.steering.items()}
    if sc.differentials:
        options["differentials"] = {k: {"wheels": list(w), "ratio": r}
                                    for k, (w, r) in sc.differentials.items()}
    return options


def _loop_closures(sc: Sidecar, label: str, frames: dict[str, dict[str, Any]],
                   links: dict[str, Any], host: dict[str, str], T_host: dict[str, np.ndarray],
                   body: str) -> list[LoopClosureSpec]:
    """Sidecar ``loop_closures`` -> LoopClosureSpec with points and axes in model frames.

    A frame name may be a model frame (a movable joint's name or the body link) or any link
    (merged into its host frame by fixed joints; its points move with it).
    """
    out = []
    for lc in sc.loop_closures:
        w = f"{sc.source}: loop_closures ({lc.name})"
        ends = []
        for key, ref in (("frame_a", lc.frame_a), ("frame_b", lc.frame_b)):
            if ref in frames or ref == body:
                ends.append((ref, np.eye(4)))
            elif ref in links:
                ends.append((host[ref], T_host[ref]))
            else:
                raise ModelError(f"{w}.{key}: {ref!r} is neither a movable joint nor a link of "
                                 f"{label}; joints are {sorted(frames)}, links {sorted(links)}")
        (fa, Ta), (fb, Tb) = ends

        def tf(T: np.ndarray, p: tuple[float, float, float]) -> tuple[float, float, float]:
            x, y, z = T[:3, :3] @ np.asarray(p) + T[:3, 3]
            return (float(x), float(y), float(z))

        axis = None
        if lc.axis_b is not None:
            ax = Tb[:3, :3] @ np.asarray(lc.axis_b)
            axis = (float(ax[0]), float(ax[1]), float(ax[2]))
        out.append(LoopClosureSpec(lc.name, lc.kind, fa, tf(Ta, lc.point_a), fb,
                                   tf(Tb, lc.point_b), axis, lc.length))
    return out


def _tracks(sc: Sidecar, label: str, frames: dict[str, dict[str, Any]], joints: dict[str, Any],
            links: dict[str, Any], host: dict[str, str], T_host: dict[str, np.ndarray],
            known_joints: list[str]) -> list[TrackSpec]:
    """Sidecar ``tracks`` -> TrackSpec: geometry moved from the link into its model frame."""
    out = []
    for t in sc.tracks:
        w = f"{sc.source}: tracks.{t.name}"
        if t.sprocket not in frames:
            raise ModelError(f"{w}.sprocket: joint {t.sprocket!r} is not a movable joint of "
                             f"{label}; joints are {known_joints}")
        if joints[t.sprocket].type not in ("revolute", "continuous"):
            raise ModelError(f"{w}.sprocket: joint {t.sprocket!r} is "
                             f"{joints[t.sprocket].type}; a sprocket needs a revolute or "
                             "continuous joint")
        link = t.link if t.link is not None else joints[t.sprocket].parent
        if link not in links:
            raise ModelError(f"{w}.link: {link!r} is not a link of {label}; links are "
                             f"{sorted(links)}")
        T = T_host[link]
        if np.abs(T[:3, 1] - (0.0, 1.0, 0.0)).max() > _AXIS_TOL:
            raise ModelError(f"{w}.link: the y axis of {link!r} must be that of its model "
                             f"frame {host[link]!r} (the belt plane is the frame's x-z plane)")

        def tf(p: tuple[float, float, float], T: np.ndarray = T) -> tuple[float, float, float]:
            x, y, z = T[:3, :3] @ np.asarray(p) + T[:3, 3]
            return (float(x), float(y), float(z))

        out.append(TrackSpec(
            name=t.name, frame=host[link], sprocket=t.sprocket,
            sprocket_xyz=tf(t.sprocket_xyz), sprocket_radius=t.sprocket_radius,
            idler_xyz=tf(t.idler_xyz), idler_radius=t.idler_radius,
            road_wheels=[(tf(c), r) for c, r in t.road_wheels], width=t.width,
            samples=t.samples, drive_radius=t.drive_radius))
    return out


def _spin_about_y(
    jn: str,
    f: dict[str, Any],
    frames: dict[str, dict[str, Any]],
    host: dict[str, str],
    T_host: dict[str, np.ndarray],
    label: str,
) -> None:
    """Rotate wheel frame ``jn`` so that its joint axis is +y (see the module docstring)."""
    a = f["axis"]
    if np.allclose(a, (0.0, 1.0, 0.0), atol=1e-12):
        return
    R = f["T0"][:3, :3].copy()  # frame orientation in the body at zero displacement
    p = f["parent"]
    while p in frames:
        R = frames[p]["T0"][:3, :3] @ R
        p = frames[p]["parent"]
    up = R.T @ np.array([0.0, 0.0, 1.0])
    cos_up = float(up @ a)
    if abs(cos_up) > _MAX_WHEEL_AXIS_UP_COS:
        raise ModelError(
            f"{label}: wheel joint {jn!r}: spin axis {np.round(R @ a, 6).tolist()} (body "
            "coordinates) is within 45 deg of the body's vertical; a wheel must spin about a "
            "roughly horizontal axis"
        )
    z = up - cos_up * a
    z /= np.linalg.norm(z)
    Q = np.eye(4)
    Q[:3, :3] = np.column_stack([np.cross(a, z), a, z])  # new axes in old frame coordinates
    f["T0"] = f["T0"] @ Q
    f["axis"] = np.array([0.0, 1.0, 0.0])
    Qi = Q.T.copy()
    Qi[3, :3] = 0.0
    Qi[:3, 3] = 0.0
    for ln, h in host.items():
        if h == jn:
            T_host[ln] = Qi @ T_host[ln]
    for g in frames.values():
        if g["parent"] == jn:
            g["T0"] = Qi @ g["T0"]


#: A sidecar radius more than this factor off the collision cylinder's is a unit mistake.
RADIUS_MISMATCH_FACTOR = 10.0


def _check_radius_against_collision(radius: float, link: Any, T_link: np.ndarray, axis: Any,
                                    where: str, sidecar: str) -> None:
    """ModelError when the sidecar's wheel radius and the link's collision radius differ by more
    than :data:`RADIUS_MISMATCH_FACTOR` (mm for m, a diameter for a radius times 5...)."""
    try:
        geo, _ = _wheel_geometry(link, T_link, axis, where)
    except ModelError:
        return  # no usable collision geometry: nothing to compare against
    if geo is None or not geo > 0:
        return
    ratio = radius / geo
    if not (1.0 / RADIUS_MISMATCH_FACTOR <= ratio <= RADIUS_MISMATCH_FACTOR):
        raise ModelError(f"{where}: sidecar ({sidecar}) radius {radius:g} m is {ratio:.3g} x the "
                         f"collision radius {geo:g} m of its link; wrong unit (mm for m)?")


def _wheel_geometry(
    link: Any, T_frame_link: np.ndarray, axis: np.ndarray, where: str
) -> tuple[float | None, float | None]:
    """Radius and width from the first collision cylinder/sphere of the wheel link."""
    for col in link.collisions or []:
        geom = col.geometry
        if geom is None:
            continue
        if geom.cylinder is not None:
            T = T_frame_link @ _finite_T(col.origin, f"{where}: <collision>")
            cyl_axis = T[:3, 2]
            if abs(abs(float(cyl_axis @ axis)) - 1.0) > _AXIS_TOL:
                raise ModelError(
                    f"{where}: collision cylinder axis {np.round(cyl_axis, 6).tolist()} is not "
                    f"the spin axis {np.round(axis, 6).tolist()} (frame coordinates); fix the "
                    "cylinder origin rpy or give radius and width in the sidecar"
                )
            return float(geom.cylinder.radius), float(geom.cylinder.length)
        if geom.sphere is not None:
            return float(geom.sphere.radius), 0.0
    return None, None
