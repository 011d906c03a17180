"""Vehicle description and the compiled, immutable vehicle model (thesis §2.2.1).

A vehicle is a kinematic tree: a 6-DOF body frame (index 0) plus frames with one joint each,
revolute or prismatic about an arbitrary unit axis (the thesis' R_X/R_Y/R_Z/P_X/... columns of
Table 2.2 are the special case of coordinate axes). Some frames are wheels (radius, width); the
contact frames appended to wheels are computed per step by collision detection, not stored here.

Two layers, as in Pinocchio/MuJoCo:

* :class:`VehicleSpec` (with :class:`FrameSpec`, :class:`JointConstraintSpec`,
  :class:`SensorSpec`) is the editable description the loaders (URDF + sidecar, frame table)
  produce.
* :func:`compile_vehicle` validates a spec and returns a frozen :class:`VehicleModel` of arrays and
  index sets. Per-step quantities never live in the model.

Sizes used in docstrings throughout the package:

=====  ====================================================================
nf     frames including the body (thesis n_f)
nj     joints = nf - 1 (one per non-body frame)
nq     state size = 7 + nj: body quaternion [w, x, y, z], position (3), joints
nv     joint-space velocity size = 6 + nj: body [w; v] in body coordinates, joint rates (2.14)
nw     wheels
ntp    track contact patches (all tracks; 0 for wheeled vehicles)
nc     contacts = nw + ntp: wheels first, then track patches (rows 3k..3k+2 of A)
ncj    holonomic joint constraints (2.25), (E.1)
nlc    loop closures (closed kinematic chains between two frames of the tree)
nlr    loop-closure constraint rows (3 per point, 2 per point-on-axis, 1 per distance)
nhc    holonomic constraint rows = ncj + nlr (linear joint rows first, then loop rows)
=====  ====================================================================
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from wmr_model.errors import ModelError
from wmr_model.spatial import euler_to_rot
from wmr_model.vehicles.tracks import (
    TRACK_CONTACT_OFF,
    TRACK_CONTACT_ON,
    TRACK_MIN_WEIGHT,
    TRACK_PATCH_POINTS,
    TrackGeometry,
    sample_track,
)

__all__ = [
    "FREE",
    "REVOLUTE",
    "PRISMATIC",
    "LOOP_POINT",
    "LOOP_POINT_ON_AXIS",
    "LOOP_DISTANCE",
    "LOOP_TYPES",
    "LOOP_WIDTH",
    "FrameSpec",
    "JointConstraintSpec",
    "LoopClosureSpec",
    "SensorSpec",
    "TrackSpec",
    "VehicleSpec",
    "VehicleModel",
    "compile_vehicle",
]

FREE = 0
REVOLUTE = 1
PRISMATIC = 2
_JOINT_TYPES = {"revolute": REVOLUTE, "continuous": REVOLUTE, "prismatic": PRISMATIC}

#: Loop-closure kinds and their number of constraint rows (:class:`LoopClosureSpec`).
LOOP_POINT = 0
LOOP_POINT_ON_AXIS = 1
LOOP_DISTANCE = 2
LOOP_TYPES = {"point": LOOP_POINT, "point_on_axis": LOOP_POINT_ON_AXIS,
              "distance": LOOP_DISTANCE}
_LOOP_ROWS = {LOOP_POINT: 3, LOOP_POINT_ON_AXIS: 2, LOOP_DISTANCE: 1}
#: Columns of ``VehicleModel.loop_closure``: ``[kind, frame_a, frame_b, point_a (3),
#: point_b (3), e1 (3), e2 (3), length]`` (points and directions in their frame's coordinates).
LOOP_WIDTH = 16


@dataclass
class FrameSpec:
    """One frame of the kinematic tree with the joint that connects it to its parent.

    Attributes:
        name: frame (and joint) name, unique.
        parent: parent frame name (the body frame's name for frames attached to the body).
        joint_type: ``"revolute"`` or ``"prismatic"``.
        axis: joint axis (3,) in this frame's coordinates; normalized on compile.
        xyz: origin of this frame in parent coordinates at zero joint displacement [m] (3,).
        rpy: orientation relative to the parent at zero displacement, roll/pitch/yaw [rad] (A.9).
        actuated: True when the joint is driven (its rate is commanded in simulation).
        lower, upper: joint limits [rad or m]; +-inf when unlimited.
        mass: [kg]; com: centre of mass in this frame [m]; inertia: (3, 3) about the com [kg m^2].
        wheel_radius: [m] when the frame is a wheel (spins about its y axis by convention).
        wheel_width: [m] wheel width (0 when unknown).
    """

    name: str
    parent: str
    joint_type: str = "revolute"
    axis: tuple[float, float, float] = (0.0, 1.0, 0.0)
    xyz: tuple[float, float, float] = (0.0, 0.0, 0.0)
    rpy: tuple[float, float, float] = (0.0, 0.0, 0.0)
    actuated: bool = False
    lower: float = -math.inf
    upper: float = math.inf
    mass: float = 0.0
    com: tuple[float, float, float] = (0.0, 0.0, 0.0)
    inertia: Any = None
    wheel_radius: float | None = None
    wheel_width: float = 0.0


@dataclass
class JointConstraintSpec:
    """Holonomic linear joint constraint :math:`c = \\sum_k a_k \\theta_k - b = 0`.

    Covers Rocky 7's rocker differential (2.25) (``{"D1": 1, "D2": 1}``, b = 0) and the
    "joint = natural displacement" constraints of (E.1) (``{"linkFL": 1}``, b = natural value).
    In the dynamics each is a spring-damper (2.74) ``f = -K c - D dc/dt + preload``:
    ``stiffness`` K and ``damping`` D (None: the simulation default) and ``preload``, the
    generalized force at c = 0 [N m or N] (a suspension spring's static load, so that the
    natural displacement b is also the static pose).
    """

    name: str
    coefficients: dict[str, float]
    offset: float = 0.0
    stiffness: float | None = None
    damping: float | None = None
    preload: float = 0.0


@dataclass
class LoopClosureSpec:
    """A loop closure: a holonomic constraint between two frames of the tree (closed chain).

    Both frames belong to the same tree, so the constraint depends on the joint displacements
    only; it is enforced with the Baumgarte-stabilized holonomic rows of (2.26), (2.36).

    Attributes:
        name: unique name.
        kind: ``"point"`` (``point_a`` of ``frame_a`` coincides with ``point_b`` of ``frame_b``,
            3 rows), ``"point_on_axis"`` (``point_a`` lies on the line through ``point_b`` along
            ``axis_b`` of ``frame_b``, 2 rows) or ``"distance"`` (the two points are ``length``
            apart, 1 row: a massless link with ball joints at both ends, e.g. a tie rod).
        frame_a, frame_b: frame names (the body or joint frames).
        point_a, point_b: points in their frame's coordinates [m].
        axis_b: direction in ``frame_b`` coordinates (``point_on_axis`` only).
        length: [m] (``distance`` only); None: the distance at zero joint displacement.
    """

    name: str
    kind: str
    frame_a: str
    point_a: tuple[float, float, float]
    frame_b: str
    point_b: tuple[float, float, float] = (0.0, 0.0, 0.0)
    axis_b: tuple[float, float, float] | None = None
    length: float | None = None


@dataclass
class SensorSpec:
    """A sensor frame rigidly attached to ``parent`` (e.g. IMU, GPS antenna)."""

    name: str
    parent: str
    xyz: tuple[float, float, float] = (0.0, 0.0, 0.0)
    rpy: tuple[float, float, float] = (0.0, 0.0, 0.0)


@dataclass
class TrackSpec:
    """A belt track (thesis §4.2; contact surface motion of seed 003), see :mod:`.tracks`.

    Attributes:
        name: track name, unique.
        frame: frame carrying the belt (the body or a joint frame, e.g. a flipper); geometry
            is in its coordinates, the belt lies in its x-z plane.
        sprocket: drive joint (revolute): the belt speed is ``sprocket_radius`` times its rate;
            ``frame`` must not turn with it (it may drive several tracks, e.g. a flipper's).
        sprocket_xyz, idler_xyz: pulley centres in ``frame`` [m], equal y.
        sprocket_radius, idler_radius: [m] > 0.
        road_wheels: list of ``((x, y, z), radius)`` extra circles the belt wraps.
        width: belt width [m] >= 0.
        samples: contact patches along the ground-facing belt path, >= 2.
        drive_radius: belt speed per unit sprocket rate [m/rad]; None: ``sprocket_radius``.
    """

    name: str
    frame: str
    sprocket: str
    sprocket_xyz: tuple[float, float, float]
    sprocket_radius: float
    idler_xyz: tuple[float, float, float]
    idler_radius: float
    road_wheels: list[tuple[tuple[float, float, float], float]] = field(default_factory=list)
    width: float = 0.0
    samples: int = 16
    drive_radius: float | None = None


@dataclass
class VehicleSpec:
    """Editable vehicle description: what loaders produce and :func:`compile_vehicle` consumes.

    ``source`` is used in error messages (a file path, or ``"<string>"``).
    """

    name: str
    frames: list[FrameSpec]
    body_name: str = "body"
    body_mass: float = 0.0
    body_com: tuple[float, float, float] = (0.0, 0.0, 0.0)
    body_inertia: Any = None
    joint_constraints: list[JointConstraintSpec] = field(default_factory=list)
    sensors: list[SensorSpec] = field(default_factory=list)
    options: dict[str, Any] = field(default_factory=dict)
    source: str = "<spec>"
    tracks: list[TrackSpec] = field(default_factory=list)
    loop_closures: list[LoopClosureSpec] = field(default_factory=list)


def _ro(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    a.setflags(write=False)
    return a



class KernelModel(NamedTuple):
    """The compiled model as the numba kernels read it: one record of the kinematic arrays.

    Kernels take ``m`` (this record) in place of the arrays spread over their arguments; the
    fields are the :class:`VehicleModel` attributes of the same names (``jtype`` is
    ``joint_type``). A NamedTuple of arrays is a numba record type: reading ``m.parent`` in a
    kernel costs nothing, and the tuple still unpacks in the old argument order.
    """

    parent: np.ndarray
    jtype: np.ndarray
    axis: np.ndarray
    T0: np.ndarray
    wheel_frame: np.ndarray
    wheel_radius: np.ndarray
    A_joint: np.ndarray
    joint_offset: np.ndarray
    loop_closure: np.ndarray
    track_frame: np.ndarray
    track_drive: np.ndarray
    track_path: np.ndarray
    track_act: np.ndarray


@dataclass(frozen=True, eq=False)
class VehicleModel:
    """Compiled vehicle: immutable arrays and index sets (thesis frame table, §2.2.1).

    Frames are ordered so that ``parent[i] < i`` (Table 2.2, col 1); frame 0 is the body.
    Joint ``k`` (0-based, k = 0..nj-1) belongs to frame ``k + 1``; its displacement is
    ``q[7 + k]`` and its rate ``qdot[6 + k]`` (the thesis' "index i+5" with 1-based frames).

    Attributes (shapes in model sizes):
        frame_names: (nf,) names, ``frame_names[0]`` is the body.
        parent: (nf,) int64, ``parent[0] = -1``.
        joint_type: (nf,) int64, FREE for the body, REVOLUTE or PRISMATIC.
        axis: (nf, 3) unit joint axes in each frame's own coordinates.
        T0: (nf, 4, 4) transform of each frame to its parent at zero displacement (Alg. 1 line 4).
        actuated: (nf,) bool.
        lower, upper: (nf,) joint limits.
        mass: (nf,), com: (nf, 3), inertia: (nf, 3, 3) about the com.
        wheel_frame: (nw,) frame index of each wheel; wheel_radius, wheel_width: (nw,).
        chain: (nw, nf) bool, True where a frame lies on the wheel's chain to the body (2.19).
        A_joint: (ncj, nv) holonomic joint constraint Jacobian (2.26); constant.
        joint_offset: (ncj,) right-hand constants b of the constraints.
        joint_stiffness, joint_damping: (ncj,) spring-damper of each joint constraint in the
            dynamics (2.74) [N m/rad or N/m, N m s/rad or N s/m]; NaN: the simulation default.
        joint_preload: (ncj,) generalized spring force at c = 0 [N m or N].
        loop_closure: (nlc, LOOP_WIDTH) loop closures (:class:`LoopClosureSpec`), rows
            ``[kind, frame_a, frame_b, point_a, point_b, e1, e2, length]``; for
            ``point_on_axis`` e1, e2 are unit vectors normal to the axis in ``frame_b``.
        loop_closure_names: (nlc,) names.
        sensor_frame: dict name -> (frame index, (4, 4) transform in that frame).
        track_names: (nt,) track names; track_of: (ntp,) int64 track index of each patch.
        track_frame: (ntp,) int64 frame carrying each contact patch.
        track_drive: (ntp,) int64 frame index of the drive (sprocket) joint of each patch.
        track_path: (ntp, M, 6) sub-point positions and belt velocity per unit drive rate in
            the track frame (:mod:`wmr_model.vehicles.tracks`); (0, M, 6) for wheeled vehicles.
        track_act: (3,) activation rule ``[d_on, d_off, w_min]`` (:mod:`wmr_model.vehicles.tracks`).
    """

    name: str
    source: str
    frame_names: tuple[str, ...]
    parent: np.ndarray
    joint_type: np.ndarray
    axis: np.ndarray
    T0: np.ndarray
    actuated: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    mass: np.ndarray
    com: np.ndarray
    inertia: np.ndarray
    wheel_frame: np.ndarray
    wheel_radius: np.ndarray
    wheel_width: np.ndarray
    chain: np.ndarray
    A_joint: np.ndarray
    joint_offset: np.ndarray
    joint_constraint_names: tuple[str, ...]
    sensor_frame: dict[str, tuple[int, np.ndarray]]
    options: dict[str, Any]
    track_names: tuple[str, ...] = ()
    track_of: np.ndarray = field(default_factory=lambda: _ro(np.zeros(0, dtype=np.int64)))
    track_frame: np.ndarray = field(default_factory=lambda: _ro(np.zeros(0, dtype=np.int64)))
    track_drive: np.ndarray = field(default_factory=lambda: _ro(np.zeros(0, dtype=np.int64)))
    track_path: np.ndarray = field(
        default_factory=lambda: _ro(np.zeros((0, TRACK_PATCH_POINTS, 6))))
    track_act: np.ndarray = field(default_factory=lambda: _ro(_default_activation()))
    joint_stiffness: np.ndarray = field(default_factory=lambda: _ro(np.zeros(0)))
    joint_damping: np.ndarray = field(default_factory=lambda: _ro(np.zeros(0)))
    joint_preload: np.ndarray = field(default_factory=lambda: _ro(np.zeros(0)))
    loop_closure: np.ndarray = field(default_factory=lambda: _ro(np.zeros((0, LOOP_WIDTH))))
    loop_closure_names: tuple[str, ...] = ()

    # ---- sizes -------------------------------------------------------------------------------
    @property
    def nf(self) -> int:
        """Number of frames including the body."""
        return len(self.frame_names)

    @property
    def nj(self) -> int:
        """Number of joints (nf - 1)."""
        return self.nf - 1

    @property
    def nq(self) -> int:
        """State size 7 + nj (quaternion, position, joints)."""
        return 7 + self.nj

    @property
    def nv(self) -> int:
        """Joint-space velocity size 6 + nj (2.14)."""
        return 6 + self.nj

    @property
    def nw(self) -> int:
        """Number of wheels."""
        return len(self.wheel_frame)

    @property
    def ntp(self) -> int:
        """Number of track contact patches (0 for wheeled vehicles)."""
        return self.track_frame.shape[0]

    @property
    def nc(self) -> int:
        """Number of contacts nw + ntp (wheels first, then track patches)."""
        return self.nw + self.ntp

    @property
    def ncj(self) -> int:
        """Number of holonomic joint constraints."""
        return self.A_joint.shape[0]

    @property
    def nlc(self) -> int:
        """Number of loop closures."""
        return self.loop_closure.shape[0]

    @property
    def nlr(self) -> int:
        """Number of loop-closure constraint rows (3 point, 2 point-on-axis, 1 distance)."""
        return int(sum(_LOOP_ROWS[int(k)] for k in self.loop_closure[:, 0]))

    @property
    def nhc(self) -> int:
        """Holonomic constraint rows ncj + nlr (joint constraints, then loop closures)."""
        return self.ncj + self.nlr

    # ---- names and index sets ----------------------------------------------------------------
    @property
    def body_name(self) -> str:
        """Name of the body frame (frame 0)."""
        return self.frame_names[0]

    @property
    def joint_names(self) -> tuple[str, ...]:
        """Joint names in joint order (same as frame names 1..nf-1)."""
        return self.frame_names[1:]

    @property
    def wheel_names(self) -> tuple[str, ...]:
        """Wheel frame names in wheel order."""
        return tuple(self.frame_names[i] for i in self.wheel_frame)

    @property
    def actuated_joints(self) -> np.ndarray:
        """Joint indices (0..nj-1) of actuated joints (read-only; computed once per model)."""
        act = self.__dict__.get("_actuated_joints")
        if act is None:  # the model is immutable: derived values are kept in its __dict__
            act = _ro(np.flatnonzero(self.actuated[1:]))
            self.__dict__["_actuated_joints"] = act
        return act

    @property
    def passive_joints(self) -> np.ndarray:
        """Joint indices (0..nj-1) of passive joints."""
        return np.flatnonzero(~self.actuated[1:])

    @property
    def wheel_joints(self) -> np.ndarray:
        """Joint index of each wheel's spin joint, (nw,)."""
        return self.wheel_frame - 1

    @property
    def total_mass(self) -> float:
        """Sum of all frame masses [kg]."""
        return float(self.mass.sum())

    def frame_index(self, name: str) -> int:
        """Index of frame ``name``; ModelError naming the vehicle and the known frames if absent."""
        try:
            return self.frame_names.index(name)
        except ValueError:
            raise ModelError(
                f"{self.source}: no frame named {name!r}; frames are {list(self.frame_names)}"
            ) from None

    def joint_index(self, name: str) -> int:
        """Index of joint ``name`` in the joint vector theta (q[7 + k], qdot[6 + k])."""
        i = self.frame_index(name)
        if i == 0:
            raise ModelError(f"{self.source}: {name!r} is the body frame, not a joint")
        return i - 1

    # ---- states ------------------------------------------------------------------------------
    def neutral_state(self) -> np.ndarray:
        """State (nq,) at the world origin, level, joints at zero (clipped into their limits)."""
        q = np.zeros(self.nq)
        q[0] = 1.0
        q[7:] = np.clip(0.0, self.lower[1:], self.upper[1:])
        return q

    def kinematic_arrays(self) -> KernelModel:
        """The record the compiled kinematics kernels take (:class:`KernelModel`).

        As a tuple: ``(parent, joint_type, axis, T0, wheel_frame, wheel_radius, A_joint,
        joint_offset, loop_closure, track_frame, track_drive, track_path, track_act)``.
        """
        rec = self.__dict__.get("_kernel_model")
        if rec is not None:  # built once per model (its arrays are read-only)
            return rec
        rec = KernelModel(
            self.parent,
            self.joint_type,
            self.axis,
            self.T0,
            self.wheel_frame,
            self.wheel_radius,
            self.A_joint,
            self.joint_offset,
            self.loop_closure,
            self.track_frame,
            self.track_drive,
            self.track_path,
            self.track_act,
        )
        self.__dict__["_kernel_model"] = rec
        return rec


def _default_activation() -> np.ndarray:
    return np.array([TRACK_CONTACT_ON, TRACK_CONTACT_OFF, TRACK_MIN_WEIGHT])


def _vec3(value: Any, what: str, where: str) -> np.ndarray:
    try:
        v = np.asarray(value, dtype=float).reshape(-1)
    except (TypeError, ValueError):
        raise ModelError(f"{where}: {what} must be 3 numbers, got {value!r}") from None
    if v.shape != (3,):
        raise ModelError(f"{where}: {what} must be 3 numbers, got {v.size}")
    if not np.all(np.isfinite(v)):
        raise ModelError(f"{where}: {what} must be finite, got {v.tolist()}")
    return v


def _inertia(value: Any, where: str) -> np.ndarray:
    if value is None:
        return np.zeros((3, 3))
    I = np.asarray(value, dtype=float)
    if I.shape == (3,):
        I = np.diag(I)
    if I.shape != (3, 3) or not np.all(np.isfinite(I)):
        raise ModelError(f"{where}: inertia must be a finite 3x3 matrix or 3 principal moments")
    if not np.allclose(I, I.T, atol=1e-12 * max(1.0, float(np.abs(I).max()))):
        raise ModelError(f"{where}: inertia must be symmetric")
    if np.linalg.eigvalsh(I).min() < -1e-12:
        raise ModelError(f"{where}: inertia must be positive semidefinite")
    return I


def _transform(xyz: np.ndarray, rpy: np.ndarray) -> np.ndarray:
    T = np.eye(4)
    T[:3, :3] = euler_to_rot(float(rpy[0]), float(rpy[1]), float(rpy[2]))
    T[:3, 3] = xyz
    return T


def compile_vehicle(spec: VehicleSpec) -> VehicleModel:
    """Validate a :class:`VehicleSpec` and compile it into a frozen :class:`VehicleModel`.

    Frames are reordered (stably) so that every parent precedes its children. Every problem is
    reported as :class:`~wmr_model.errors.ModelError` naming the source, the frame and the fault:
    duplicate or unknown names, cycles, zero/NaN axes, bad limits, wheels without a positive
    radius, constraints on unknown joints.
    """
    src = spec.source
    order = _parent_first_order(spec)
    frame_names = (spec.body_name, *(f.name for f in order))
    index = {n: i for i, n in enumerate(frame_names)}
    a, wheels = _compile_frames(spec, order, index)
    w = _compile_wheels(wheels, a["parent"])
    c, cnames = _compile_joint_constraints(spec, index, len(frame_names) + 5)
    sensors = _compile_sensors(spec, index)
    track = _compile_tracks(spec, index, a["parent"], a["joint_type"])
    loops, loop_names = _compile_loop_closures(spec, index, a["parent"], a["T0"])
    return VehicleModel(
        name=spec.name,
        source=src,
        frame_names=frame_names,
        parent=_ro(a["parent"]),
        joint_type=_ro(a["joint_type"]),
        axis=_ro(a["axis"]),
        T0=_ro(a["T0"]),
        actuated=_ro(a["actuated"]),
        lower=_ro(a["lower"]),
        upper=_ro(a["upper"]),
        mass=_ro(a["mass"]),
        com=_ro(a["com"]),
        inertia=_ro(a["inertia"]),
        wheel_frame=_ro(w["wheel_frame"]),
        wheel_radius=_ro(w["wheel_radius"]),
        wheel_width=_ro(w["wheel_width"]),
        chain=_ro(w["chain"]),
        A_joint=_ro(c["A_joint"]),
        joint_offset=_ro(c["joint_offset"]),
        joint_constraint_names=cnames,
        sensor_frame=sensors,
        options=dict(spec.options),
        joint_stiffness=_ro(c["joint_stiffness"]),
        joint_damping=_ro(c["joint_damping"]),
        joint_preload=_ro(c["joint_preload"]),
        loop_closure=_ro(loops),
        loop_closure_names=loop_names,
        **track,
    )


def _parent_first_order(spec: VehicleSpec) -> list[FrameSpec]:
    """The frames of ``spec`` reordered so that each parent precedes its children, stable with
    respect to the spec order; ModelError on empty, duplicate or unknown names and cycles."""
    src = spec.source
    body = spec.body_name
    seen: set[str] = {body}
    for f in spec.frames:
        if not isinstance(f.name, str) or not f.name:
            raise ModelError(f"{src}: a frame has an empty name")
        if f.name in seen:
            raise ModelError(f"{src}: frame {f.name!r} is defined twice")
        seen.add(f.name)
    by_name = {f.name: f for f in spec.frames}
    for f in spec.frames:
        if f.parent != body and f.parent not in by_name:
            raise ModelError(f"{src}: frame {f.name!r}: parent {f.parent!r} is not defined")
        if f.parent == f.name:
            raise ModelError(f"{src}: frame {f.name!r} is its own parent")
    order: list[FrameSpec] = []
    placed = {body}
    remaining = [f.name for f in spec.frames]
    while remaining:
        progressed = False
        rest = []
        for n in remaining:
            if by_name[n].parent in placed:
                order.append(by_name[n])
                placed.add(n)
                progressed = True
            else:
                rest.append(n)
        if not progressed:
            raise ModelError(f"{src}: frames {rest} form a cycle (no path to the body {body!r})")
        remaining = rest
    return order


def _compile_frames(spec: VehicleSpec, order: list[FrameSpec], index: dict[str, int],
                    ) -> tuple[dict[str, np.ndarray], list[tuple[int, float, float]]]:
    """The per-frame arrays of :class:`VehicleModel` (``parent`` ... ``inertia``, (nf, ...),
    row 0 the body) and the wheels ``(frame index, radius [m], width [m])``."""
    src, body = spec.source, spec.body_name
    nf = len(order) + 1
    a = {
        "parent": np.full(nf, -1, dtype=np.int64),
        "joint_type": np.zeros(nf, dtype=np.int64),
        "axis": np.zeros((nf, 3)),
        "T0": np.tile(np.eye(4), (nf, 1, 1)),
        "actuated": np.zeros(nf, dtype=bool),
        "lower": np.full(nf, -np.inf),
        "upper": np.full(nf, np.inf),
        "mass": np.zeros(nf),
        "com": np.zeros((nf, 3)),
        "inertia": np.zeros((nf, 3, 3)),
    }
    where_body = f"{src}: body {body!r}"
    if not (math.isfinite(spec.body_mass) and spec.body_mass >= 0):
        raise ModelError(f"{where_body}: mass must be >= 0 kg, got {spec.body_mass}")
    a["mass"][0] = spec.body_mass
    a["com"][0] = _vec3(spec.body_com, "com", where_body)
    a["inertia"][0] = _inertia(spec.body_inertia, where_body)
    wheels: list[tuple[int, float, float]] = []
    for i, f in enumerate(order, start=1):
        where = f"{src}: frame {f.name!r}"
        _compile_frame_row(f, i, index, a, where)
        if f.wheel_radius is not None:
            wheels.append(_wheel_row(f, f.wheel_radius, i, a, where))
    return a, wheels


def _compile_frame_row(f: FrameSpec, i: int, index: dict[str, int], a: dict[str, np.ndarray],
                       where: str) -> None:
    """Validate frame ``f`` into row ``i`` of the per-frame arrays ``a``."""
    if f.joint_type not in _JOINT_TYPES:
        raise ModelError(
            f"{where}: joint type must be revolute or prismatic (fixed joints are merged "
            f"by the loader), got {f.joint_type!r}"
        )
    a["parent"][i] = index[f.parent]
    a["joint_type"][i] = _JOINT_TYPES[f.joint_type]
    ax = _vec3(f.axis, "axis", where)
    na = float(np.linalg.norm(ax))
    if na < 1e-9:
        raise ModelError(f"{where}: axis must be nonzero, got {ax.tolist()}")
    a["axis"][i] = ax / na
    a["T0"][i] = _transform(_vec3(f.xyz, "xyz", where), _vec3(f.rpy, "rpy", where))
    a["actuated"][i] = bool(f.actuated)
    lo, hi = float(f.lower), float(f.upper)
    if math.isnan(lo) or math.isnan(hi) or lo > hi:
        raise ModelError(f"{where}: joint limits must satisfy lower <= upper, got [{lo}, {hi}]")
    a["lower"][i], a["upper"][i] = lo, hi
    if not (math.isfinite(f.mass) and f.mass >= 0):
        raise ModelError(f"{where}: mass must be >= 0 kg, got {f.mass}")
    a["mass"][i] = f.mass
    a["com"][i] = _vec3(f.com, "com", where)
    a["inertia"][i] = _inertia(f.inertia, where)


def _wheel_row(f: FrameSpec, radius: float, i: int, a: dict[str, np.ndarray],
               where: str) -> tuple[int, float, float]:
    """``(i, radius, width)`` of wheel frame ``f`` of ``radius`` (row ``i`` of ``a`` already
    compiled): a revolute joint spinning about the frame's y axis (thesis §2.2.1)."""
    r = float(radius)
    if not (math.isfinite(r) and r > 0):
        raise ModelError(f"{where}: wheel radius must be > 0 m, got {radius}")
    if a["joint_type"][i] != REVOLUTE:
        raise ModelError(f"{where}: a wheel must spin on a revolute joint")
    if abs(abs(a["axis"][i, 1]) - 1.0) > 1e-9:
        raise ModelError(
            f"{where}: a wheel must spin about its own y axis (thesis §2.2.1); got axis "
            f"{a['axis'][i].tolist()} - rotate the frame (rpy) so the spin axis is y"
        )
    w = float(f.wheel_width)
    if not (math.isfinite(w) and w >= 0):
        raise ModelError(f"{where}: wheel width must be >= 0 m, got {f.wheel_width}")
    return i, r, w


def _compile_wheels(wheels: list[tuple[int, float, float]],
                    parent: np.ndarray) -> dict[str, np.ndarray]:
    """``wheel_frame``, ``wheel_radius``, ``wheel_width`` (nw,) and ``chain`` (nw, nf): the
    frames on each wheel's path to the body (2.19)."""
    nw, nf = len(wheels), parent.shape[0]
    wheel_frame = np.array([w[0] for w in wheels], dtype=np.int64)
    chain = np.zeros((nw, nf), dtype=bool)
    for k, wf in enumerate(wheel_frame):
        i = int(wf)
        while i > 0:
            chain[k, i] = True
            i = int(parent[i])
    return {
        "wheel_frame": wheel_frame,
        "wheel_radius": np.array([w[1] for w in wheels], dtype=float),
        "wheel_width": np.array([w[2] for w in wheels], dtype=float),
        "chain": chain,
    }


def _compile_joint_constraints(spec: VehicleSpec, index: dict[str, int], nv: int,
                               ) -> tuple[dict[str, np.ndarray], tuple[str, ...]]:
    """``A_joint`` (ncj, nv), ``joint_offset``, ``joint_stiffness``, ``joint_damping`` and
    ``joint_preload`` (ncj,) of ``spec.joint_constraints`` (2.26, 2.74), and their names."""
    src = spec.source
    ncj = len(spec.joint_constraints)
    A_joint = np.zeros((ncj, nv))
    joint_offset = np.zeros(ncj)
    joint_stiffness = np.full(ncj, np.nan)
    joint_damping = np.full(ncj, np.nan)
    joint_preload = np.zeros(ncj)
    cnames = []
    for r, c in enumerate(spec.joint_constraints):
        where = f"{src}: joint constraint {c.name!r}"
        if not c.coefficients:
            raise ModelError(f"{where}: has no terms")
        for jn, coef in c.coefficients.items():
            if jn not in index or index[jn] == 0:
                raise ModelError(f"{where}: joint {jn!r} is not a joint of this vehicle")
            if not math.isfinite(float(coef)):
                raise ModelError(f"{where}: coefficient of {jn!r} must be finite, got {coef}")
            A_joint[r, index[jn] + 5] = float(coef)
        if not math.isfinite(float(c.offset)):
            raise ModelError(f"{where}: offset must be finite, got {c.offset}")
        joint_offset[r] = float(c.offset)
        for what, val, arr in (("stiffness", c.stiffness, joint_stiffness),
                               ("damping", c.damping, joint_damping)):
            if val is None:
                continue
            if not (math.isfinite(float(val)) and float(val) >= 0):
                raise ModelError(f"{where}: {what} must be >= 0, got {val}")
            arr[r] = float(val)
        if not math.isfinite(float(c.preload)):
            raise ModelError(f"{where}: preload must be finite, got {c.preload}")
        if c.preload != 0 and not joint_stiffness[r] > 0:
            raise ModelError(f"{where}: a preload needs the constraint's own stiffness > 0")
        joint_preload[r] = float(c.preload)
        cnames.append(c.name)
    return {"A_joint": A_joint, "joint_offset": joint_offset, "joint_stiffness": joint_stiffness,
            "joint_damping": joint_damping, "joint_preload": joint_preload}, tuple(cnames)


def _compile_sensors(spec: VehicleSpec, index: dict[str, int],
                     ) -> dict[str, tuple[int, np.ndarray]]:
    """``sensor_frame``: name -> (frame index, (4, 4) read-only pose in that frame)."""
    sensors: dict[str, tuple[int, np.ndarray]] = {}
    for s in spec.sensors:
        where = f"{spec.source}: sensor {s.name!r}"
        if s.parent not in index:
            raise ModelError(f"{where}: parent frame {s.parent!r} is not defined")
        if s.name in sensors:
            raise ModelError(f"{where}: defined twice")
        T = _transform(_vec3(s.xyz, "xyz", where), _vec3(s.rpy, "rpy", where))
        sensors[s.name] = (index[s.parent], _ro(T))
    return sensors


def _register_name(src: str, what: str, name: object, names: list[str]) -> None:
    """Append the name of a sidecar element (``what``: "track", "loop closure") to ``names``;
    ModelError when it is empty or already there."""
    if not isinstance(name, str) or not name:
        raise ModelError(f"{src}: a {what} has an empty name")
    if name in names:
        raise ModelError(f"{src}: {what} {name!r}: defined twice")
    names.append(name)


def _compile_loop_closures(spec: VehicleSpec, index: dict[str, int], parent: np.ndarray,
                           T0: np.ndarray) -> tuple[np.ndarray, tuple[str, ...]]:
    """Validate ``spec.loop_closures`` into rows of ``VehicleModel.loop_closure``."""
    src = spec.source
    nf = parent.shape[0]
    T_zero = np.tile(np.eye(4), (nf, 1, 1))  # frames at zero joint displacement (Alg. 1)
    for i in range(1, nf):
        T_zero[i] = T_zero[int(parent[i])] @ T0[i]
    rows = np.zeros((len(spec.loop_closures), LOOP_WIDTH))
    names: list[str] = []
    for r, lc in enumerate(spec.loop_closures):
        where = f"{src}: loop closure {lc.name!r}"
        _register_name(src, "loop closure", lc.name, names)
        if lc.kind not in LOOP_TYPES:
            raise ModelError(f"{where}: type must be one of {list(LOOP_TYPES)}, got {lc.kind!r}")
        for key, fr in (("frame_a", lc.frame_a), ("frame_b", lc.frame_b)):
            if fr not in index:
                raise ModelError(f"{where}: {key} {fr!r} is not a frame of this vehicle; "
                                 f"frames are {list(index)}")
        fa, fb = index[lc.frame_a], index[lc.frame_b]
        if fa == fb:
            raise ModelError(f"{where}: frame_a and frame_b are the same frame {lc.frame_a!r}")
        kind = LOOP_TYPES[lc.kind]
        pa = _vec3(lc.point_a, "point_a", where)
        pb = _vec3(lc.point_b, "point_b", where)
        rows[r, 0:3] = (kind, fa, fb)
        rows[r, 3:6] = pa
        rows[r, 6:9] = pb
        if kind == LOOP_POINT_ON_AXIS:
            if lc.axis_b is None:
                raise ModelError(f"{where}: type point_on_axis needs axis_b")
            ax = _vec3(lc.axis_b, "axis_b", where)
            na = float(np.linalg.norm(ax))
            if na < 1e-9:
                raise ModelError(f"{where}: axis_b must be nonzero, got {ax.tolist()}")
            ax = ax / na
            helper = np.eye(3)[int(np.argmin(np.abs(ax)))]
            e1 = np.cross(ax, helper)
            e1 /= np.linalg.norm(e1)
            rows[r, 9:12] = e1
            rows[r, 12:15] = np.cross(ax, e1)
        elif lc.axis_b is not None:
            raise ModelError(f"{where}: axis_b is only used by type point_on_axis")
        if kind == LOOP_DISTANCE:
            if lc.length is None:
                d = (T_zero[fa, :3, :3] @ pa + T_zero[fa, :3, 3]
                     - T_zero[fb, :3, :3] @ pb - T_zero[fb, :3, 3])
                length = float(np.linalg.norm(d))
            else:
                length = float(lc.length)
            if not (math.isfinite(length) and length > 0):
                raise ModelError(f"{where}: length must be > 0 m, got {length}")
            rows[r, 15] = length
        elif lc.length is not None:
            raise ModelError(f"{where}: length is only used by type distance")
    return rows, tuple(names)


def _compile_tracks(spec: VehicleSpec, index: dict[str, int], parent: np.ndarray,
                    joint_type: np.ndarray) -> dict[str, Any]:
    """Validate ``spec.tracks`` and sample their contact patches (:mod:`.tracks`)."""
    src = spec.source
    if not spec.tracks:
        return {}
    names: list[str] = []
    of, frames, drives, paths = [], [], [], []
    for t, tr in enumerate(spec.tracks):
        where = f"{src}: track {tr.name!r}"
        _register_name(src, "track", tr.name, names)
        if tr.frame not in index:
            raise ModelError(f"{where}: frame {tr.frame!r} is not a frame of this vehicle; "
                             f"frames are {list(index)}")
        if tr.sprocket not in index or index[tr.sprocket] == 0:
            raise ModelError(f"{where}: sprocket {tr.sprocket!r} is not a joint of this vehicle")
        fi, di = index[tr.frame], index[tr.sprocket]
        if joint_type[di] != REVOLUTE:
            raise ModelError(f"{where}: sprocket joint {tr.sprocket!r} must be revolute")
        i = fi
        while i > 0:  # the belt's points must not turn with the sprocket
            if i == di:
                raise ModelError(
                    f"{where}: frame {tr.frame!r} turns with the sprocket joint "
                    f"{tr.sprocket!r}; attach the belt to the sprocket's parent (or a flipper)")
            i = int(parent[i])
        sp = _vec3(tr.sprocket_xyz, "sprocket_xyz", where)
        ip = _vec3(tr.idler_xyz, "idler_xyz", where)
        rws = []
        for k, (xyz, r) in enumerate(tr.road_wheels):
            rws.append((tuple(_vec3(xyz, f"road_wheels[{k}].xyz", where)), float(r)))
        rd = tr.sprocket_radius if tr.drive_radius is None else tr.drive_radius
        for what, r in (("sprocket_radius", tr.sprocket_radius),
                        ("idler_radius", tr.idler_radius), ("drive_radius", rd),
                        *((f"road_wheels[{k}].radius", rw[1]) for k, rw in enumerate(rws))):
            if not (math.isfinite(float(r)) and float(r) > 0):
                raise ModelError(f"{where}: {what} must be > 0 m, got {r}")
        for what, c in (("idler_xyz", ip), *((f"road_wheels[{k}].xyz", np.asarray(rw[0]))
                                               for k, rw in enumerate(rws))):
            if abs(float(c[1]) - float(sp[1])) > 1e-9:
                raise ModelError(f"{where}: {what} y must equal sprocket_xyz y = {sp[1]} (the "
                                 f"belt lies in one x-z plane of the track frame), got {c[1]}")
        if math.hypot(sp[0] - ip[0], sp[2] - ip[2]) <= abs(tr.sprocket_radius - tr.idler_radius):
            raise ModelError(f"{where}: sprocket and idler circles overlap; no belt path")
        if not (math.isfinite(float(tr.width)) and float(tr.width) >= 0):
            raise ModelError(f"{where}: width must be >= 0 m, got {tr.width}")
        if isinstance(tr.samples, bool) or int(tr.samples) != tr.samples or tr.samples < 2:
            raise ModelError(f"{where}: samples must be an integer >= 2, got {tr.samples!r}")
        g = TrackGeometry(tuple(sp), float(tr.sprocket_radius), tuple(ip),
                          float(tr.idler_radius), tuple(rws), float(tr.width), int(tr.samples),
                          float(rd))
        try:
            p = sample_track(g)
        except ValueError as exc:
            raise ModelError(f"{where}: {exc}") from None
        paths.append(p)
        of += [t] * p.shape[0]
        frames += [fi] * p.shape[0]
        drives += [di] * p.shape[0]
    act = _default_activation()
    opt = spec.options.get("track_activation")
    if opt is not None:
        try:
            act = np.asarray([float(opt[k]) for k in ("on", "off", "min_weight")])
        except (KeyError, TypeError, ValueError):
            raise ModelError(f"{src}: options.track_activation must be a mapping with numbers "
                             f"on, off, min_weight, got {opt!r}") from None
        if not (0 <= act[0] < act[1] and 0 < act[2] <= 1):
            raise ModelError(f"{src}: options.track_activation needs 0 <= on < off [m] and "
                             f"0 < min_weight <= 1, got {act.tolist()}")
    return {
        "track_names": tuple(names),
        "track_of": _ro(np.array(of, dtype=np.int64)),
        "track_frame": _ro(np.array(frames, dtype=np.int64)),
        "track_drive": _ro(np.array(drives, dtype=np.int64)),
        "track_path": _ro(np.concatenate(paths)),
        "track_act": _ro(act),
    }
