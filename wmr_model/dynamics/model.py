"""The compiled dynamics model and its options (Seegmiller 2014, §2.4).

:class:`DynamicsOptions` holds the keywords of
:func:`~wmr_model.dynamics.simulate.simulate_dynamics`, with their defaults, in one place;
:func:`compile_dynamics` validates them once against a vehicle and builds the
:class:`DynamicsModel` record the compiled kernels read (``dm`` in their arguments): the
kinematic arrays, inertias and gravity, the contact, actuator and spring-damper models (2.71),
(2.73), (2.74), the track patches' data (:class:`TrackData`) and the step's numeric settings
(:class:`StepSettings`). The kernels take it as ``f(dm, t, d, ...)`` with ``t`` the terrain
record (:class:`~wmr_model.terrain.surface.TerrainArrays`) and ``d`` the workspace of
:func:`~wmr_model.dynamics.data.create_step_data`.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, NamedTuple

import numpy as np

from wmr_model._jit import NO_KERNEL
from wmr_model.contact.models import contact_setup
from wmr_model.dynamics.actuators import ACTUATOR_KINDS, IDEAL
from wmr_model.dynamics.joint_acceleration import specialized_elimination
from wmr_model.dynamics.track_contact import check_friction_directions, contact_drive, icr_map
from wmr_model.errors import ParameterError
from wmr_model.vehicles.inertia import gravity_of, model_frame_inertias
from wmr_model.vehicles.model import KernelModel, VehicleModel

__all__ = ["gravity_of", "DynamicsOptions", "DynamicsModel", "StepSettings",
           "TrackData",
           "compile_dynamics", "actuator_setup", "joint_spring_dampers", "track_data",
           "LOOP_STIFFNESS", "LOOP_DAMPING", "LOOP_MODELS", "DEFAULT_LOOP_MODEL",
           "COLLISION_SEARCHES", "DEFAULT_COLLISION", "SOLVERS", "DEFAULT_SOLVER",
           "check_choice"]

# Penalty loop closures (loop_model "penalty") are the joint constraints' spring-dampers (2.74)
# made stiff, per unit m g: 1e4 m g per metre and 1e3 m g s/m. The damper dominates over a step
# (D > K dt for dt < 0.1 s), so a closure carrying the vehicle's weight moves apart at ~1e-3 m/s
# at most; the coordinate projection after each step (kernels.project_loop_closures) removes the
# position residual. Options loop_stiffness [N/m], loop_damping [N s/m] override them.
LOOP_STIFFNESS = 1e4
LOOP_DAMPING = 1e3
#: Loop-closure models of :func:`simulate_dynamics`: ``"ideal"`` (joint constraints with their
#: own Lagrange multipliers, thesis (2.54)-(2.65), Baumgarte (2.36) with sigma = 1/dt) or
#: ``"penalty"`` (the stiff spring-dampers above).
LOOP_MODELS = ("ideal", "penalty")
DEFAULT_LOOP_MODEL = "ideal"
#: Wheel collision searches of :func:`simulate_dynamics`: ``"warm"`` (from the previous step's
#: contact angles, :func:`warm_wheel_contact`) or ``"cold"`` (the full fan every step).
COLLISION_SEARCHES = ("warm", "cold")
DEFAULT_COLLISION = "cold"
#: Force-balance solvers of :func:`simulate_dynamics`: ``"joint_acceleration"`` (Newton on the
#: equation of motion with the next step's joint-space velocities as unknowns,
#: :mod:`wmr_model.dynamics.joint_acceleration`) or ``"thesis"`` (the independent-row
#: formulation (2.75)-(2.88), :mod:`wmr_model.dynamics.force_balance`). Vehicles with ideal loop
#: closures always use ``"thesis"``: a closure's force is a free multiplier, not a model force.
#: So does the non-iterative mode (``single_step``, §2.4.4) unless asked otherwise: the thesis'
#: warm start (the previous step's row velocities) makes its one Newton step the closer one
#: (Zoë, Pacejka, dt 0.04, benchmark terrains 1 and 2, 10 s: 9 and 3 mm from the converged run;
#: one joint-acceleration step from zero acceleration 32 and 20 mm, at ~19 us per step against
#: ~32).
SOLVERS = ("joint_acceleration", "thesis")
DEFAULT_SOLVER = "joint_acceleration"


def check_choice(name: str, value: Any, choices: tuple[str, ...]) -> None:
    """Raise a :class:`ParameterError` naming option ``name`` unless ``value`` is ``None`` (not
    given) or one of ``choices``."""
    if value is not None and value not in choices:
        raise ParameterError(f"{name} must be one of {list(choices)}, got {value!r}")


@dataclass(frozen=True)
class DynamicsOptions:
    """Options of the constrained dynamics (the keywords of :func:`simulate_dynamics`).

    ``None`` means "from ``model.options``, else the default stated here"; the fields are
    documented in :func:`~wmr_model.dynamics.simulate.simulate_dynamics`.

    Attributes:
        contact_model, contact_params: contact model name and parameter overrides
            (:mod:`wmr_model.contact.models`).
        actuator: ``"ideal"``, ``"p"`` or ``"dc_motor"``, or a mapping joint name -> kind.
        actuator_params: ``Kp`` [N m s/rad], ``f_max`` [N m], ``tau_stall`` [N m],
            ``w_noload`` [rad/s].
        joint_stiffness, joint_damping: holonomic spring-dampers (2.74) [N m/rad, N m s/rad].
        fused_bias: fused-body bias force (2.89) instead of Algorithm 4.
        single_step: one Newton step per time step (§2.4.4).
        max_iter: Newton iterations per step at most.
        tol: force-balance tolerance on |e| [N] (default 1e-6 m g).
        loop_model: ``"ideal"`` or ``"penalty"`` (:data:`LOOP_MODELS`).
        friction_directions: ``"belt"`` or ``"icr"`` (tracked vehicles).
        steering_efficiency: chi in (0, 1] of ``"icr"``.
        collision: ``"cold"`` or ``"warm"`` (:data:`COLLISION_SEARCHES`).
        solver: ``"joint_acceleration"`` or ``"thesis"`` (:data:`SOLVERS`).
    """

    contact_model: str | None = None
    contact_params: Mapping[str, Any] | None = None
    actuator: str | Mapping[str, str] = "ideal"
    actuator_params: Mapping[str, Any] | None = None
    joint_stiffness: float | None = None
    joint_damping: float | None = None
    fused_bias: bool = False
    single_step: bool = False
    max_iter: int = 30
    tol: float | None = None
    loop_model: str | None = None
    friction_directions: str | None = None
    steering_efficiency: float | None = None
    collision: str | None = None
    solver: str | None = None

    def __post_init__(self) -> None:
        for name, choices in (("solver", SOLVERS), ("collision", COLLISION_SEARCHES),
                              ("loop_model", LOOP_MODELS)):
            check_choice(name, getattr(self, name), choices)

    @classmethod
    def of(cls, options: DynamicsOptions | None = None,
           keywords: Mapping[str, Any] | None = None) -> DynamicsOptions:
        """``options`` (default: all defaults) with the fields named in ``keywords`` replaced;
        an unknown keyword raises a :class:`TypeError` naming it, as an unexpected keyword
        argument of a function does."""
        if not keywords:
            return cls() if options is None else options
        try:  # the same request as a recent call (values compared with their types)
            key: Any = (cls, options, tuple(sorted((k, type(v), v) for k, v in keywords.items())))
            hit = _OPTIONS_KEPT.get(key)
        except TypeError:  # an unhashable value (a mapping): built every time
            key = hit = None
        if hit is not None:
            return hit
        base = cls() if options is None else options
        known = {f.name for f in fields(cls)}
        bad = sorted(set(keywords) - known)
        if bad:
            raise TypeError(f"unexpected dynamics option(s) {bad}; expected some of "
                            f"{sorted(known)}")
        made = cls(**{**{f.name: getattr(base, f.name) for f in fields(cls)}, **keywords})
        if key is not None:
            if len(_OPTIONS_KEPT) >= _COMPILED_KEPT:
                _OPTIONS_KEPT.clear()
            _OPTIONS_KEPT[key] = made
        return made


# DynamicsOptions.of of recent calls (frozen instances, shared): building one is ~8 us, a
# measurable part of a short simulate_dynamics call.
_OPTIONS_KEPT: dict[Any, DynamicsOptions] = {}


class TrackData(NamedTuple):
    """The track patches as the dynamics kernels read them (empty for a wheeled vehicle).

    Contacts are the nw wheels, then the ntp patches (:mod:`wmr_model.dynamics.track_contact`);
    nc = nw + ntp below.
    """

    frame: np.ndarray  #: (ntp,) int: frame of each patch (``model.track_frame``)
    drive: np.ndarray  #: (ntp,) int: driving joint of each patch
    path: np.ndarray  #: (ntp, ...) belt path of each patch
    of: np.ndarray  #: (ntp,) int: track of each patch
    nt: int  #: number of tracks (at least 1)
    contact_radius: np.ndarray  #: (nc,) rolling radius of each contact [m]
    contact_joint: np.ndarray  #: (nc,) int: joint whose rate rolls each contact
    icr_map: np.ndarray  #: (3, na) ICR map of the commanded belt speeds
    icr: bool  #: friction directions about the ICR (``"icr"``) instead of along the belt


class StepSettings(NamedTuple):
    """Numeric settings of one dynamics step, resolved from :class:`DynamicsOptions`."""

    dt: float  #: step size [s]
    fused: bool  #: fused-body bias force (2.89)
    single_step: bool  #: one Newton step per time step
    max_iter: int  #: Newton iterations at most
    tol: float  #: force-balance tolerance on |e| [N]
    loop_sigma: float  #: Baumgarte gain of ideal loop closures [1/s] (0: penalty)
    warm_contact: bool  #: warm-started wheel collision (wheeled vehicles only)
    acceleration: bool  #: joint-acceleration force balance (else the thesis' formulation)
    #: address of the Newton step's specialized elimination for this vehicle's free columns
    #: (:func:`wmr_model.dynamics.joint_acceleration.specialized_elimination`; 0: generic)
    elimination: int


class DynamicsModel(NamedTuple):
    """The compiled dynamics model (``dm`` of the kernels): constant over a run.

    ``kin`` is the vehicle's :class:`~wmr_model.vehicles.model.KernelModel` with the dynamics'
    own joint offsets (a constraint's preload shifts its spring's rest point,
    :func:`joint_spring_dampers`).
    """

    kin: KernelModel
    I_frame: np.ndarray  #: (nf, 6, 6) per-frame spatial inertias (B.13)
    gravity: np.ndarray  #: (3,) world gravity [m/s^2]
    ckinds: np.ndarray  #: (nc,) int contact model kind per contact
    cparams: np.ndarray  #: (nc, ...) contact model parameters
    ctables: np.ndarray  #: (nc, ...) contact model tables
    caxes: np.ndarray  #: (nc, ...) contact model axes
    act_joints: np.ndarray  #: (na,) int actuated joints
    akinds: np.ndarray  #: (na,) int actuator kinds (:mod:`wmr_model.dynamics.actuators`)
    aparams: np.ndarray  #: (na, 4) actuator parameters
    jK: np.ndarray  #: (nhc,) spring stiffness of the holonomic rows
    jD: np.ndarray  #: (nhc,) damping of the holonomic rows
    trk: TrackData
    opt: StepSettings


def actuator_setup(model: VehicleModel, actuator: str | Mapping[str, str],
                   actuator_params: Mapping[str, Any] | None) -> tuple[np.ndarray, np.ndarray]:
    """Actuator kinds (na,) and parameter rows (na, 4) ``[Kp, f_max, tau_stall, w_noload]``
    (2.73) of ``model.actuated_joints``; ``Kp`` defaults to 50 m [N m s/rad per kg]."""
    act = model.actuated_joints
    kinds = np.zeros(len(act), dtype=np.int64)
    params = np.zeros((len(act), 4))
    pdef = {"Kp": 50.0 * model.total_mass, "f_max": np.inf, "tau_stall": np.inf,
            "w_noload": np.inf}
    pdef.update(actuator_params or {})
    for i, k in enumerate(act):
        name = model.joint_names[k]
        kind = actuator.get(name, "ideal") if isinstance(actuator, Mapping) else actuator
        if kind not in ACTUATOR_KINDS:
            raise ParameterError(f"actuator for joint {name!r} must be one of "
                                 f"{sorted(ACTUATOR_KINDS)}, got {kind!r}")
        kinds[i] = ACTUATOR_KINDS[kind]
        params[i] = [pdef["Kp"], pdef["f_max"], pdef["tau_stall"], pdef["w_noload"]]
    return kinds, params


def joint_spring_dampers(model: VehicleModel, mg: float, joint_stiffness: float | None,
                         joint_damping: float | None
                         ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Spring-dampers (2.74) of the holonomic rows: stiffness, damping (nhc,), offset (ncj,).

    A joint constraint's own ``stiffness``/``damping`` (sidecar ``joint_constraints``, e.g. a
    suspension spring) wins; the others take ``joint_stiffness``/``joint_damping``, else
    ``model.options``, else 10 m g and m g (per unit of the constraint: rad or m). A
    ``preload`` P (force at c = 0) shifts the spring's rest point: ``f = -K c + P = -K (c -
    P/K)``, i.e. the dynamics use the offset ``b + P/K`` (the kinematics keep b). Loop-closure
    rows follow with :data:`LOOP_STIFFNESS` and :data:`LOOP_DAMPING` times m g (options
    ``loop_stiffness``, ``loop_damping``).
    """
    Kj = joint_stiffness if joint_stiffness is not None else model.options.get(
        "joint_stiffness", 10.0 * mg)
    Dj = joint_damping if joint_damping is not None else model.options.get(
        "joint_damping", 1.0 * mg)
    jK = np.where(np.isnan(model.joint_stiffness), float(Kj), model.joint_stiffness)
    jD = np.where(np.isnan(model.joint_damping), float(Dj), model.joint_damping)
    pre = model.joint_preload
    shift = np.divide(pre, jK, out=np.zeros(model.ncj), where=pre != 0.0)
    nl = model.nlr
    Kl = float(model.options.get("loop_stiffness", LOOP_STIFFNESS * mg))
    Dl = float(model.options.get("loop_damping", LOOP_DAMPING * mg))
    return (np.ascontiguousarray(np.concatenate([jK, np.full(nl, Kl)]), dtype=float),
            np.ascontiguousarray(np.concatenate([jD, np.full(nl, Dl)]), dtype=float),
            np.ascontiguousarray(model.joint_offset + shift, dtype=float))


def track_data(model: VehicleModel, friction_directions: str = "belt",
               steering_efficiency: float = 1.0, icr_x: float = 0.0) -> TrackData:
    """The :class:`TrackData` of ``model`` (empty track arrays for a wheeled vehicle; see
    :mod:`wmr_model.dynamics.track_contact` for the ICR options)."""
    icr = check_friction_directions(friction_directions)
    radius, joint = contact_drive(model)
    na = len(model.actuated_joints)
    imap = icr_map(model, steering_efficiency, icr_x) if icr else np.zeros((3, max(na, 1)))
    return TrackData(np.ascontiguousarray(model.track_frame, dtype=np.int64),
                     np.ascontiguousarray(model.track_drive, dtype=np.int64),
                     np.ascontiguousarray(model.track_path, dtype=float),
                     np.ascontiguousarray(model.track_of, dtype=np.int64),
                     max(len(model.track_names), 1), radius, joint, np.ascontiguousarray(imap),
                     icr)


# Per model, its recently compiled dynamics: compiling them (contact, actuator and track
# setup, inertias) costs more than a short run's steps. Weak keys: they go with the model.
_COMPILED: weakref.WeakKeyDictionary[VehicleModel, dict[Any, tuple[DynamicsModel,
                                                                   tuple[str, ...]]]]
_COMPILED = weakref.WeakKeyDictionary()
_COMPILED_KEPT = 16


def _by_value(value: Any) -> Any:
    """A hashable image of an option's value that two values share only when they are equal
    and of the same types: mappings (keys sorted) and sequences element by element, arrays by
    dtype, shape and bytes, other values with their type's name (so ``True``, ``1`` and
    ``1.0`` differ). Raises TypeError for a value it cannot represent (compiled uncached)."""
    if value is None or type(value) in (bool, int, float, str):
        return (type(value).__name__, value)
    if isinstance(value, Mapping):
        return ("map", tuple(sorted((repr(k), _by_value(v)) for k, v in value.items())))
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_by_value(v) for v in value))
    if isinstance(value, np.ndarray):
        return ("ndarray", value.dtype.str, value.shape, value.tobytes())
    hash(value)
    return (type(value).__name__, value)


def kept_dynamics(model: VehicleModel, dt: float, options: DynamicsOptions | None = None
                  ) -> tuple[DynamicsModel, tuple[str, ...]]:
    """:func:`compile_dynamics`, kept with the model for the same ``dt``, ``options`` and
    ``model.options`` (compared by value, the options' mappings too, e.g. a dict of contact
    parameters: :func:`_by_value`; a value it cannot represent is compiled at every call). A
    result whose specialized elimination is still being compiled in the background is not
    kept, so the next call picks it up."""
    o = DynamicsOptions() if options is None else options
    text = repr(model.options)
    try:
        key: Any = (float(dt), o, text)
        hash(key)  # plain options: the options themselves
    except TypeError:  # a mapping among them: their values
        try:
            key = (float(dt), tuple(_by_value(getattr(o, f.name)) for f in fields(o)), text)
        except TypeError:
            return compile_dynamics(model, dt, o)
    if "..." in text:  # a summarized array: its repr does not identify it
        return compile_dynamics(model, dt, o)
    kept = _COMPILED.get(model)
    if kept is None:
        kept = _COMPILED.setdefault(model, {})
    hit = kept.get(key)
    if hit is not None:
        return hit
    compiled = compile_dynamics(model, dt, o)
    st = compiled[0].opt
    if not (st.acceleration and st.elimination == NO_KERNEL):
        if len(kept) >= _COMPILED_KEPT:
            kept.clear()
        kept[key] = compiled
    return compiled


def compile_dynamics(model: VehicleModel, dt: float, options: DynamicsOptions | None = None
                     ) -> tuple[DynamicsModel, tuple[str, ...]]:
    """The :class:`DynamicsModel` of ``model`` for steps of ``dt`` [s] with ``options``, and the
    contact model name of each contact (nc,).

    Options left ``None`` come from ``model.options``, else the defaults of
    :class:`DynamicsOptions`; ideal loop closures (``loop_model="ideal"``) get the Baumgarte
    gain ``1/dt`` and no spring-damper, and the thesis' solver unless another is asked for (an
    error: the joint-acceleration solver has no free multipliers); ``single_step`` also defaults
    to the thesis' solver (:data:`SOLVERS`).
    """
    o = DynamicsOptions() if options is None else options
    collision = DEFAULT_COLLISION if o.collision is None else o.collision
    g = gravity_of(model)
    gn = float(np.linalg.norm(g))
    mg = model.total_mass * gn
    cs = contact_setup(model, o.contact_model, o.contact_params, gn)
    akinds, aparams = actuator_setup(model, o.actuator, o.actuator_params)
    jK, jD, offset = joint_spring_dampers(model, mg, o.joint_stiffness, o.joint_damping)
    loop_model = model.options.get("loop_model", DEFAULT_LOOP_MODEL) if o.loop_model is None \
        else o.loop_model
    check_choice("loop_model", loop_model, LOOP_MODELS)
    loop_sigma = 0.0
    if loop_model == "ideal" and model.nlr > 0:
        loop_sigma = 1.0 / float(dt)
        jK[model.ncj:] = 0.0  # no spring-damper force: the multiplier carries the load
        jD[model.ncj:] = 0.0
    solver = model.options.get("solver") if o.solver is None else o.solver
    check_choice("solver", solver, SOLVERS)
    if solver == "joint_acceleration" and loop_sigma > 0.0:
        raise ParameterError(f"solver 'joint_acceleration' cannot carry the ideal loop closures of "
                             f"{model.name!r}: use solver 'thesis' or loop_model 'penalty'")
    if solver is None:
        solver = "thesis" if loop_sigma > 0.0 or o.single_step else DEFAULT_SOLVER
    tol = 1e-6 * mg if o.tol is None else float(o.tol)
    fdir = model.options.get("friction_directions", "belt") if o.friction_directions is None \
        else o.friction_directions
    chi = model.options.get("steering_efficiency", 1.0) if o.steering_efficiency is None \
        else o.steering_efficiency
    trk = track_data(model, fdir, float(chi), float(model.options.get("icr_x", 0.0)))
    accel = solver == "joint_acceleration"
    n_free = model.nv - int(np.count_nonzero(akinds == IDEAL))  # columns no ideal actuator sets
    opt = StepSettings(float(dt), bool(o.fused_bias), bool(o.single_step), int(o.max_iter), tol,
                       loop_sigma, collision == "warm", accel,
                       specialized_elimination(n_free) if accel else NO_KERNEL)
    kin = model.kinematic_arrays()._replace(joint_offset=offset)
    dm = DynamicsModel(kin, model_frame_inertias(model), g, cs.kinds, cs.params, cs.tables,
                       cs.axes, model.actuated_joints.astype(np.int64), akinds, aparams, jK, jD,
                       trk, opt)
    return dm, cs.names

