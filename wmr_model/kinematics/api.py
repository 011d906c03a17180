"""Python API of the stabilized-DAE kinematics: ``f(model, data, ...)`` over the compiled kernels.

The three solution contexts of §2.2.5 share one solver (2.37)-(2.38); they differ only in which
elements of the joint-space velocity are known:

* **simulation** - actuated joint rates are commanded (:func:`simulation_known`, :func:`simulate`);
* **estimation** - encoder rates and optionally the gyro's angular velocity are measured
  (:func:`estimation_known`, :func:`joint_space_velocity`);
* **control** - the desired body velocity is given and joint rates and steer angles are solved
  for (:func:`solve_control`).
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from wmr_model._jit import njit, num_threads, run_ranges
from wmr_model.errors import ParameterError, ShapeError
from wmr_model.kinematics import constraints, solve
from wmr_model.kinematics import loops as L
from wmr_model.kinematics.constraints import project_loop_closures
from wmr_model.kinematics.data import KernelData, kernel_data
from wmr_model.kinematics.feedback import FeedbackInputs
from wmr_model.kinematics.initialize import initialize_terrain_contact
from wmr_model.kinematics.solve import solve_workspace
from wmr_model.kinematics.specialized import GENERIC, model_solve
from wmr_model.kinematics.track_collision import contact_detection
from wmr_model.kinematics.wheel_collision import CONTACT_WS_WIDTH
from wmr_model.spatial import quats_to_euler
from wmr_model.terrain.surface import Terrain, flat
from wmr_model.vehicles import tree
from wmr_model.vehicles.inertia import gravity_of, model_frame_inertias
from wmr_model.vehicles.model import REVOLUTE, VehicleModel

__all__ = [
    "Data",
    "Trajectory",
    "ControlSolution",
    "BatchInputs",
    "prepare_batch",
    "create_data",
    "forward_kinematics",
    "wheel_contact",
    "constraint_system",
    "joint_space_velocity",
    "simulation_known",
    "estimation_known",
    "initialization_free",
    "initialize_contact",
    "simulate",
    "simulate_unconstrained",
    "solve_control",
    "nominal_body_velocity",
    "impose_roll_pitch",
    "INTEGRATORS",
]

INTEGRATORS = {"euler": L.EULER, "rk4": L.RK4}

# Default Baumgarte gain as a fraction of its upper bound 1/dt (2.35): half the contact height
# error is removed per step, which damps drift without the step-to-step chatter of sigma = 1/dt.
DEFAULT_STABILIZATION = 0.5


@dataclass
class Data:
    """Workspace of every algorithm of the Python API for one vehicle state (or one trajectory
    of states): the kinematics (§2.2), enhanced kinematics (§2.3), covariance (§3.3) and the
    rigid-body dynamics (Algorithms 3 and 4, :mod:`wmr_model.dynamics.api`).

    Contacts are the wheels followed by the track patches (nc = nw + ntp; nc = nw for wheeled
    vehicles).

    Attributes:
        kernel: the compiled kernels' record (:class:`~wmr_model.kinematics.data.KernelData`);
            its fields are readable here by name: ``T_world`` (nf, 4, 4) frame-to-world
            transforms (Algorithm 1); ``Ic`` (nf, 6, 6) composite inertias (Algorithm 3 lines
            1-4); ``T_contact`` (nc, 4, 4) contact frames (Figure 2.3); ``dz`` (nc,) contact
            height errors Δz [m] (2.8); ``contact_angle`` (nc,) contact angles δ [rad] (2.9),
            for a track patch its fractional sub-point coordinate
            (:func:`wmr_model.kinematics.track_collision.track_contact`); ``A`` (3 nc + nhc, nv)
            stacked constraint matrix (2.34), nhc = ncj + nlr holonomic rows; ``v``
            (3 nc + nhc,) right-hand side (2.34)-(2.36); ``qdot`` (nv,) joint-space velocity;
            ``contact_ws`` (nw, CONTACT_WS_WIDTH) the collision warm-start state carried from
            one :func:`joint_space_velocity` call to the next (previous contact angles are in
            ``contact_angle``; :func:`wmr_model.kinematics.wheel_collision.wheel_contact`);
            ``cg`` (3,) centre of gravity in body coordinates (enhanced kinematics).
        I_frame: (nf, 6, 6) per-frame spatial inertias (B.13); constant per model.
        gravity: (3,) world gravitational acceleration [m/s^2] (``options["gravity"]``).
        M: (nv, nv) joint-space inertia (Algorithm 3).
        c: (nv,) joint-space bias force (Algorithm 4 or 2.89).
        tau: (nv,) joint-space force of the last :func:`wmr_model.dynamics.api.rnea` call.
        residual: |A qdot - v| of the last velocity solve.
    """

    kernel: KernelData
    I_frame: np.ndarray
    gravity: np.ndarray
    M: np.ndarray
    c: np.ndarray
    tau: np.ndarray
    residual: float = math.nan

    def __getattr__(self, name: str) -> np.ndarray:
        # the kernel record's fields (T_world, Ic, T_contact, dz, contact_angle, A, v, qdot, ...)
        if name != "kernel" and name in KernelData._fields:
            return getattr(self.kernel, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")


def create_data(model: VehicleModel, known: np.ndarray | None = None, *,
                inertias: np.ndarray | None = None, fold: bool = False,
                warm_contact: bool = True, residual: bool = True) -> Data:
    """Allocate the one workspace (:class:`Data`) of ``model``'s algorithms.

    Its kernel record is a :class:`~wmr_model.kinematics.data.KernelData`
    (:func:`~wmr_model.kinematics.data.kernel_data`, as the compiled loops make one per
    trajectory). ``known`` (nv,) bool: the known set its velocity-solve scratch is made for
    (default none known; :func:`joint_space_velocity` remakes it for the known set of each
    call); ``inertias`` (nf, 6, 6) per-frame spatial inertias (default the model's, B.13) and
    ``fold``: the enhanced-kinematics scratch
    (:func:`wmr_model.kinematics.enhanced.folded_enhanced_workspace` when ``fold``);
    ``warm_contact``: a collision warm-start workspace; ``residual``: solves return their
    residual norm.
    """
    kn = np.zeros(model.nv, dtype=bool) if known is None else _array(known, (model.nv,),
                                                                       "known", dtype=bool)
    I_frame = model_frame_inertias(model) if inertias is None else _array(
        inertias, (model.nf, 6, 6), "inertias")
    kernel = kernel_data(model.kinematic_arrays(), kn, I_frame, bool(fold), bool(warm_contact),
                         bool(residual))
    return Data(kernel, I_frame, gravity_of(model), np.zeros((model.nv, model.nv)),
                np.zeros(model.nv), np.zeros(model.nv))


#: Collision workspace with no rows: a cold fan search every call.
_COLD_CONTACT = np.zeros((0, CONTACT_WS_WIDTH))


# |q[0:4]| of a state may differ from 1 by this much (round-off of the caller's normalization).
_UNIT_QUATERNION_TOL = 1e-6


def _state(model: VehicleModel, q: np.ndarray, name: str = "q") -> np.ndarray:
    q = np.ascontiguousarray(q, dtype=float)
    if q.shape != (model.nq,):
        raise ShapeError(f"{name}: expected shape ({model.nq},) for {model.name}, got {q.shape}")
    if not np.isfinite(q).all():
        raise ParameterError(f"{name}: must be finite, got {q.tolist()}")
    n = math.sqrt(float(q[:4] @ q[:4]))
    if abs(n - 1.0) > _UNIT_QUATERNION_TOL:
        raise ParameterError(f"{name}: quaternion q[0:4] must have unit norm, got {n:.9g}")
    return q


def _sigma(stabilization: float, dt: float) -> float:
    if not (0.0 <= stabilization <= 1.0):
        raise ParameterError(
            f"stabilization: must be in [0, 1] (sigma*dt, 2.35), got {stabilization}")
    return stabilization / dt


def forward_kinematics(model: VehicleModel, data: Data, q: np.ndarray) -> np.ndarray:
    """Algorithm 1: write and return ``data.T_world`` (nf, 4, 4) for state ``q`` (nq,)."""
    q = _state(model, q)
    tree.forward_kinematics(model.parent, model.joint_type, model.axis, model.T0, q, data.T_world)
    return data.T_world


def wheel_contact(model: VehicleModel, data: Data, terrain: Terrain) -> np.ndarray:
    """Collision detection (2.8)-(2.9) from ``data.T_world``; writes contact frames, returns Δz.

    Covers every contact: wheels, then track patches (:func:`contact_detection`).
    """
    contact_detection(model.kinematic_arrays(), terrain.kernel_args(),
                      (model.track_frame, model.track_drive, model.track_path), data.T_world,
                      data.T_contact, data.dz, data.contact_angle)
    return data.dz


def constraint_system(model: VehicleModel, data: Data, q: np.ndarray, sigma: float,
                      vc_xy: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Stacked wheel and joint constraints ``A qdot = v`` (2.33)-(2.36) from the workspace.

    Requires :func:`forward_kinematics` and :func:`wheel_contact` for the same ``q``.
    ``vc_xy`` (nc, 2): contact slip velocities (default zero, no slip).
    """
    q = _state(model, q)
    vc = np.zeros((model.nc, 2)) if vc_xy is None else _array(vc_xy, (model.nc, 2), "vc_xy")
    constraints.constraint_system(model.kinematic_arrays(), data.kernel, q, float(sigma), vc)
    return data.A, data.v


def joint_space_velocity(model: VehicleModel, data: Data, terrain: Terrain,
                         q: np.ndarray, known: np.ndarray, qdot_known: np.ndarray,
                         sigma: float = 0.0, vc_xy: np.ndarray | None = None, *,
                         warm_start: bool = True) -> np.ndarray:
    """Forward velocity kinematics: solve (2.37)-(2.38) for the unknown elements of qdot.

    Successive calls on one ``data`` are treated as steps of one trajectory: collision detection
    is warm-started from the previous call's contact angles (``data.contact_ws``), like the
    compiled loops. ``warm_start=False`` searches from scratch (unrelated states, finite
    differences).

    Args:
        q: (nq,) state.
        known: (nv,) bool, elements of the joint-space velocity that are given.
        qdot_known: (nv,) their values (others ignored).
        sigma: Baumgarte gain [1/s] (2.35); 0 for a pure velocity solve.
        vc_xy: (nc, 2) contact slip velocities (2.52); default zero.

    Returns:
        ``data.qdot`` (nv,); ``data.residual`` holds the least-squares residual norm.
    """
    q = _state(model, q)
    known = _array(known, (model.nv,), "known", dtype=bool)
    qk = _array(qdot_known, (model.nv,), "qdot_known")
    vc = np.zeros((model.nc, 2)) if vc_xy is None else _array(vc_xy, (model.nc, 2), "vc_xy")
    d = data.kernel
    d = d._replace(contact_ws=d.contact_ws if warm_start else _COLD_CONTACT,
                   solve_ws=solve_workspace(d.A.shape[0], known))
    data.residual = solve.joint_space_velocity(model.kinematic_arrays(), terrain.kernel_args(),
                                               d, q, known, qk, float(sigma), vc, d.qdot)
    return data.qdot


def _array(a: ArrayLike, shape: tuple[int, ...], name: str, dtype: type = float) -> np.ndarray:
    out: np.ndarray = np.ascontiguousarray(a, dtype=dtype)
    if out.shape != shape:
        raise ShapeError(f"{name}: expected shape {shape}, got {out.shape}")
    if dtype is float and not np.all(np.isfinite(out)):
        bad = np.argwhere(~np.isfinite(out))[0].tolist()
        raise ParameterError(f"{name}: must be finite; first bad element at index {bad}")
    return out


def simulation_known(model: VehicleModel, actuated: np.ndarray | None = None) -> np.ndarray:
    """Known mask (nv,) of the simulation context: the actuated joints' rates (§2.2.5).

    ``actuated``: ``model.actuated_joints`` when the caller has it already.
    """
    known = np.zeros(model.nv, dtype=bool)
    known[6 + (model.actuated_joints if actuated is None else actuated)] = True
    return known


def estimation_known(model: VehicleModel, measured_joints: Iterable[str | int],
                     gyro: bool = True) -> np.ndarray:
    """Known mask (nv,) of the estimation context: encoder joints and optionally the gyro."""
    known = np.zeros(model.nv, dtype=bool)
    for j in measured_joints:
        k = model.joint_index(j) if isinstance(j, str) else int(j)
        known[6 + k] = True
    if gyro:
        known[0:3] = True
    return known


def impose_roll_pitch(q: np.ndarray, roll: float, pitch: float) -> np.ndarray:
    """Estimation context: replace the attitude in ``q`` by measured roll and pitch, keep yaw.

    IMUs observe roll and pitch from gravity; imposing them after each odometry step (§2.2.5,
    Appendix A: attitude and yaw are kept distinct) removes attitude drift. Returns a new state
    (nq,); position, yaw (A.10) and joints are unchanged.
    """
    out = np.array(q, dtype=float)
    if not (math.isfinite(roll) and math.isfinite(pitch)):
        raise ParameterError(f"roll/pitch: must be finite, got {roll}, {pitch}")
    L.impose_roll_pitch(out, float(roll), float(pitch))
    return out


def initialization_free(model: VehicleModel) -> np.ndarray:
    """Default free set of (2.27) in Euler coordinates: roll, pitch, z, passive non-wheel joints."""
    free = np.zeros(model.nv, dtype=bool)
    free[[0, 1, 5]] = True
    wheel_joints = set(model.wheel_joints.tolist())
    for k in model.passive_joints:
        if int(k) not in wheel_joints:
            free[6 + k] = True
    return free


def initialize_contact(model: VehicleModel, terrain: Terrain, q: np.ndarray | None = None, *,
                       free: np.ndarray | None = None, max_iter: int = 50,
                       tol: float = 1e-10) -> tuple[np.ndarray, float]:
    """Place the vehicle on the terrain: (2.27)-(2.32), Newton's method with line search.

    Args:
        q: (nq,) initial guess (x, y, yaw and actuated joints stay fixed by default);
            default: the neutral state.
        free: (nv,) bool mask over Euler coordinates [roll, pitch, yaw, x, y, z, theta];
            default :func:`initialization_free`.

    Returns:
        ``(q, rms)``: the fitted state (nq,) and sqrt of the final objective L (2.28) [m].
        With loop closures the free joints are then projected onto the closures
        (:func:`project_loop_closures`), so they hold exactly; ``rms`` is the fit's.
    """
    q0 = model.neutral_state() if q is None else _state(model, q)
    free = initialization_free(model) if free is None else _array(free, (model.nv,), "free", bool)
    data = create_data(model)
    q_out = np.empty(model.nq)
    err = initialize_terrain_contact(model.kinematic_arrays(), terrain.kernel_args(),
                                     data.kernel, q0, free, int(max_iter), float(tol), q_out)
    if model.nlc:  # closures exact (the fit trades them against contact on uneven ground)
        project_loop_closures(model.parent, model.joint_type, model.axis, model.T0,
                              model.loop_closure, free, q_out, data.T_world)
    return q_out, float(err)


@dataclass(frozen=True)
class Trajectory:
    """Result of a kinematic prediction; leading batch axis N when batched.

    Attributes:
        dt: step size [s].
        q: (N, T+1, nq) or (T+1, nq) states (quaternion w, x, y, z; position; joints).
        qdot: (..., T, nv) joint-space velocities used for each step.
        contact_speed: (..., T, nc) |v_c| per contact at the start of each step [m/s] (wheels,
            then track patches whose value is activation-weighted).
        dz: (..., T+1, nc) contact height errors [m] (wheels, then track patches).
    """

    dt: float
    q: np.ndarray
    qdot: np.ndarray
    contact_speed: np.ndarray
    dz: np.ndarray

    @property
    def time(self) -> np.ndarray:
        """(T+1,) time stamps from 0 [s]."""
        return np.arange(self.q.shape[-2]) * self.dt

    @property
    def position(self) -> np.ndarray:
        """(..., T+1, 3) body position in the world frame [m]."""
        return self.q[..., 4:7]

    @property
    def euler(self) -> np.ndarray:
        """(..., T+1, 3) roll, pitch, yaw [rad] (A.10)-(A.13)."""
        return quats_to_euler(self.q[..., 0:4])

    @property
    def joints(self) -> np.ndarray:
        """(..., T+1, nj) joint displacements."""
        return self.q[..., 7:]


class BatchInputs(NamedTuple):
    """Validated inputs shared by :func:`simulate` and :func:`wmr_model.prediction.predict.predict`
    (a named tuple: built on every call, where a frozen dataclass costs several times more).

    Attributes:
        N: batch size (largest of the inputs' batch sizes).
        T: number of steps.
        sigma: Baumgarte gain [1/s] (2.35).
        q0: (N, nq) initial states, a writable C-contiguous copy (numba compiles a separate,
            measured 2.3x slower, specialization for read-only views such as broadcasts).
        rates: (1 or N, T, na) actuated joint rates, not yet broadcast.
    """

    N: int
    T: int
    sigma: float
    q0: np.ndarray
    rates: np.ndarray


@njit
def _first_invalid_state(q, tol, start):
    """Index of the first row ``n >= start`` of ``q`` (N, nq) with a non-finite element or a
    quaternion norm off 1 by more than ``tol``; -1 when there is none (the batch form of
    :func:`_state`, one pass with no temporaries)."""
    for n in range(start, q.shape[0]):
        for j in range(q.shape[1]):
            if not math.isfinite(q[n, j]):
                return n
        s = q[n, 0] * q[n, 0] + q[n, 1] * q[n, 1] + q[n, 2] * q[n, 2] + q[n, 3] * q[n, 3]
        if not abs(math.sqrt(s) - 1.0) <= tol:
            return n
    return -1


@njit
def _all_finite(a):
    """True when every element of ``a`` is finite."""
    for v in a.flat:
        if not math.isfinite(v):
            return False
    return True


def prepare_batch(model: VehicleModel, q0: np.ndarray, joint_rates: np.ndarray, dt: float,
                  integrator: str, stabilization: float, *, rates_name: str = "joint_rates",
                  other_batch_sizes: dict[str, int] | None = None,
                  n_actuated: int | None = None) -> BatchInputs:
    """Check and batch the inputs of a prediction loop; errors name the argument.

    ``other_batch_sizes`` lets callers with more batched inputs (slip parameters, covariances)
    take part in the N check; ``n_actuated``: ``len(model.actuated_joints)`` when the caller
    has it already.
    """
    if not (isinstance(dt, (int, float)) and math.isfinite(dt) and dt > 0):
        raise ParameterError(f"dt: must be a finite step size > 0 s, got {dt}")
    if integrator not in INTEGRATORS:
        raise ParameterError(
            f"integrator: must be one of {sorted(INTEGRATORS)}, got {integrator!r}")
    sigma = _sigma(stabilization, dt)
    na = len(model.actuated_joints) if n_actuated is None else n_actuated
    u = np.asarray(joint_rates, dtype=float)
    q0a = np.asarray(q0, dtype=float)
    if u.ndim == 2:
        u = u[None]
    if u.ndim != 3 or u.shape[2] != na or u.shape[1] < 1:
        raise ShapeError(f"{rates_name}: expected shape (T, {na}) or (N, T, {na}) with T >= 1 "
                         f"for {model.name}'s actuated joints, got {np.shape(joint_rates)}")
    if q0a.ndim == 1:
        q0a = q0a[None]
    if q0a.ndim != 2 or q0a.shape[1] != model.nq:
        raise ShapeError(f"q0: expected shape ({model.nq},) or (N, {model.nq}), got {np.shape(q0)}")
    N = max(u.shape[0], q0a.shape[0])
    if other_batch_sizes or u.shape[0] != q0a.shape[0]:
        sizes = {rates_name: u.shape[0], "q0": q0a.shape[0], **(other_batch_sizes or {})}
        N = max(sizes.values())
        for name, n in sizes.items():
            if n not in (1, N):
                raise ShapeError(f"{name}: batch size {n} does not match N = {N}")
    # the checks of _state for every row in one compiled pass; _state names a failing row
    # (and decides a norm at the tolerance to round-off: then the scan goes on)
    bad = _first_invalid_state(q0a, _UNIT_QUATERNION_TOL, 0)
    while bad >= 0:
        _state(model, q0a[bad], f"q0[{bad}]")
        bad = _first_invalid_state(q0a, _UNIT_QUATERNION_TOL, bad + 1)
    if not _all_finite(u):
        raise ParameterError(f"{rates_name}: must be finite")
    if q0a.shape[0] == N:
        q0a = np.array(q0a, dtype=float, order="C")
    else:
        q0a = np.array(np.broadcast_to(q0a, (N, model.nq)), dtype=float, order="C")
    return BatchInputs(N=N, T=u.shape[1], sigma=sigma, q0=q0a, rates=u)


@njit
def _simulation_io(q0, rates, act, nv, nc, vc_xy):
    """The :class:`~wmr_model.kinematics.loops.PredictInputs` and fresh
    :class:`~wmr_model.kinematics.loops.PredictOutputs` of a kinematic simulation of N runs.

    ``q0`` (N, nq); ``rates`` (1 or N, T, na) the actuated joints' rates, written to the
    columns ``6 + act`` of the commanded velocities (N, T, nv) (the other entries zero);
    ``vc_xy`` (1 or N, T, nc, 2) contact slip velocities, or no rows for none (one shared
    zero array). The inputs a kinematic simulation leaves empty (slip parameters, process noise,
    initial covariance, measured attitude, feedback) and the outputs it does not write have no
    rows. Built in one compiled call: its arrays are small and many, and the two records cross
    into the loop as they are.
    """
    N = q0.shape[0]
    T = rates.shape[1]
    shared = rates.shape[0] == 1
    qdot_cmd = np.zeros((N, T, nv))
    for n in range(N):
        r = 0 if shared else n
        for s in range(T):
            for k in range(act.shape[0]):
                qdot_cmd[n, s, 6 + act[k]] = rates[r, s, k]
    vc = vc_xy if vc_xy.shape[0] > 0 else np.zeros((1, T, nc, 2))
    none = np.zeros((1, 0, 0))
    X = L.PredictInputs(q0, qdot_cmd, vc, np.zeros((1, 6)), np.zeros((1, 0, 6)),
                        np.zeros((1, 6, 6)), np.zeros((1, 0, 2)),
                        FeedbackInputs(none, none.copy(), none.copy()))
    Y = L.PredictOutputs(np.empty((N, T + 1, q0.shape[1])), np.empty((N, T, nv)),
                         np.empty((N, T, nc)), np.empty((N, T + 1, nc)), np.zeros((N, 0, 6)),
                         np.zeros((N, 0, nc, 2)), np.zeros((N, 0)), np.zeros((N, 0, 6, 6)),
                         np.zeros((N, 0), np.uint8))
    return X, Y


@njit
def _simulate_serial(m, t, o, q0, rates, act, nv, nc, vc_xy):
    """A kinematic simulation of the runs of :func:`_simulation_io` one after another, in one
    compiled call (no records cross back into Python): returns ``(q, qdot, vc_norm, dz)``."""
    X, Y = _simulation_io(q0, rates, act, nv, nc, vc_xy)
    L.predict_range(0, q0.shape[0], m, t, o, X, Y)
    return Y.q_traj, Y.qdot_traj, Y.vc_norm, Y.dz_traj


# vc_xy of a simulation without contact slip (no rows: see _simulation_io)
_NO_SLIP = np.zeros((0, 1, 1, 2))

# Per model, the options of its recent simulations (known mask, step, gains, solver address):
# building them costs more than a short simulation's steps. Weak keys: they go with the model.
_SIMULATION_OPTIONS: weakref.WeakKeyDictionary[VehicleModel, dict[tuple[float, float, str, bool],
                                                             L.PredictOptions]]
_SIMULATION_OPTIONS = weakref.WeakKeyDictionary()
_OPTIONS_KEPT = 16


def _simulation_options(model: VehicleModel, dt: float, sigma: float, integrator: str,
                        warm: bool) -> L.PredictOptions:
    """The :func:`~wmr_model.kinematics.loops.simulation_options` of ``model`` for these
    values, built once and kept with the model. While the vehicle's specialized solve is not
    ready (compiled in the background) its address is asked again at each call."""
    kept = _SIMULATION_OPTIONS.get(model)
    if kept is None:
        kept = _SIMULATION_OPTIONS.setdefault(model, {})
    key = (float(dt), float(sigma), integrator, warm)
    o = kept.get(key)
    if o is None:
        mask = simulation_known(model, model.actuated_joints)
        o = L.simulation_options(mask, dt, sigma, INTEGRATORS[integrator], model.nf, warm,
                                 model_solve(model.kinematic_arrays(), mask))
    elif o.solver == GENERIC:
        o = o._replace(solver=model_solve(model.kinematic_arrays(), o.known))
    else:
        return o
    if len(kept) >= _OPTIONS_KEPT:
        kept.clear()
    kept[key] = o
    return o


def simulate(model: VehicleModel, terrain: Terrain, q0: np.ndarray, joint_rates: np.ndarray,
             dt: float, *, integrator: str = "euler",
             stabilization: float = DEFAULT_STABILIZATION,
             vc_xy: np.ndarray | None = None, warm_start: bool = True) -> Trajectory:
    """Kinematic motion prediction in the simulation context (§2.2.5-2.2.6).

    Args:
        q0: (nq,) or (N, nq) initial state(s), normally from :func:`initialize_contact`.
        joint_rates: (T, na) or (N, T, na) commanded rates of the actuated joints, in the order
            of ``model.actuated_joints`` [rad/s or m/s], held constant over each step.
        dt: step size [s].
        integrator: ``"euler"`` (2.39) or ``"rk4"``.
        stabilization: Baumgarte gain as sigma*dt in [0, 1] (2.35); 0 disables it.
        vc_xy: (T, nc, 2) or (N, T, nc, 2) contact slip velocities (enhanced kinematics).
        warm_start: warm-start collision detection from the previous step (default); False
            runs the full fan search every step (:func:`wmr_model.prediction.predict.predict`).

    Returns:
        :class:`Trajectory`, batched when ``q0`` or ``joint_rates`` is.
    """
    batched = np.ndim(joint_rates) == 3 or np.ndim(q0) == 2
    act = model.actuated_joints
    b = prepare_batch(model, q0, joint_rates, dt, integrator, stabilization, n_actuated=len(act))
    N, T = b.N, b.T
    nc = model.nc
    if vc_xy is None:
        vc = _NO_SLIP  # no rows: zeros shared by the batch
    else:
        vc = np.asarray(vc_xy, dtype=float)
        if vc.ndim == 3:
            vc = vc[None]
        if vc.shape[1:] != (T, nc, 2) or vc.shape[0] not in (1, N):
            raise ShapeError(f"vc_xy: expected ({T}, {nc}, 2) or (N, {T}, {nc}, 2), "
                             f"got {np.shape(vc_xy)}")
        vc = np.array(np.broadcast_to(vc, (N, T, nc, 2)), order="C")  # writable, C
    m, t = model.kinematic_arrays(), terrain.kernel_args()
    o = _simulation_options(model, dt, b.sigma, integrator, bool(warm_start))
    rates = np.ascontiguousarray(b.rates)
    if N == 1 or num_threads() == 1:
        q_traj, qdot_traj, vcn, dz = _simulate_serial(m, t, o, b.q0, rates, act, model.nv, nc,
                                                      vc)
    else:
        X, Y = _simulation_io(b.q0, rates, act, model.nv, nc, vc)
        run_ranges(L.predict_range, N, N, m, t, o, X, Y)
        q_traj, qdot_traj, vcn, dz = Y.q_traj, Y.qdot_traj, Y.vc_norm, Y.dz_traj
    if not batched:
        return Trajectory(float(dt), q_traj[0], qdot_traj[0], vcn[0], dz[0])
    return Trajectory(float(dt), q_traj, qdot_traj, vcn, dz)


def nominal_body_velocity(model: VehicleModel, joint_rates: np.ndarray,
                          joints: np.ndarray | None = None) -> np.ndarray:
    """Body velocity [w; v] (6,) the commanded rates give on flat ground (level body).

    What a controller that "assumed flat ground" (§2.5.1) expects: the simulation-context
    solve on a flat plane, keeping only the planar components (vx, vy, wz).
    """
    q = model.neutral_state()
    if joints is not None:
        q[7:] = joints
    data = create_data(model)
    qk = np.zeros(model.nv)
    qk[6 + model.actuated_joints] = joint_rates
    qdot = joint_space_velocity(model, data, flat(), q, simulation_known(model), qk, 0.0)
    out = np.zeros(6)
    out[2] = qdot[2]
    out[3] = qdot[3]
    out[4] = qdot[4]
    return out


def simulate_unconstrained(model: VehicleModel, terrain: Terrain, q0: np.ndarray,
                           joint_rates: np.ndarray, dt: float, *, max_iter: int = 50,
                           tol: float = 1e-10) -> Trajectory:
    """The conventional baseline of §2.5.1 (unconstrained motion + terrain fitting each step).

    The nominal body velocity comes from :func:`nominal_body_velocity` for each step's commands
    (the flat-ground assumption); terrain fitting uses our Newton method (2.27)-(2.32) rather than
    the derivative-free search of the original, as the thesis suggests.

    Args: as :func:`simulate` (unbatched). Returns a :class:`Trajectory` whose ``qdot`` holds the
    nominal joint-space velocity used.
    """
    q0 = _state(model, q0, "q0")
    u = np.asarray(joint_rates, dtype=float)
    na = len(model.actuated_joints)
    if u.ndim != 2 or u.shape[1] != na:
        raise ShapeError(f"joint_rates: expected shape (T, {na}), got {u.shape}")
    T = u.shape[0]
    body = np.empty((T, 6))
    cache: dict[bytes, np.ndarray] = {}
    for t in range(T):
        key = u[t].tobytes()
        if key not in cache:
            cache[key] = nominal_body_velocity(model, u[t])
        body[t] = cache[key]
    rates = np.zeros((T, model.nj))
    rates[:, model.actuated_joints] = u
    free = initialization_free(model)
    q_traj = np.empty((T + 1, model.nq))
    vcn = np.empty((T, model.nc))
    dz = np.empty((T + 1, model.nc))
    L.simulate_unconstrained(model.kinematic_arrays(), terrain.kernel_args(), q0, body, rates,
                             free, float(dt), int(max_iter), float(tol), (q_traj, vcn, dz))
    qdot = np.concatenate([body, rates], axis=1)
    return Trajectory(float(dt), q_traj, qdot, vcn, dz)


@dataclass(frozen=True)
class ControlSolution:
    """Result of :func:`solve_control`.

    Attributes:
        q: (nq,) state with the solved steer angles.
        qdot: (nv,) joint-space velocity (wheel rates in ``qdot[6 + wheel_joints]``).
        residual: least-squares residual |A qdot - v| [m/s] (0 when the motion is feasible);
            the steer-angle iteration stops when it falls below ``tol``.
        steer_joints: joint indices whose angles were solved for.
    """

    q: np.ndarray
    qdot: np.ndarray
    residual: float
    steer_joints: tuple[int, ...]


def _drive_joints(model: VehicleModel) -> set[int]:
    """Joints that propel the vehicle: wheel spin joints, track drive (sprocket) joints and the
    joints of differential encoders (which turn with the mean of their wheels)."""
    diffs = {model.joint_index(e) for e in (model.options.get("differentials") or {})}
    return (set(model.wheel_joints.tolist()) | {int(f) - 1 for f in np.unique(model.track_drive)}
            | diffs)


def _track_posture_joints(model: VehicleModel) -> list[int]:
    """Actuated non-drive joints whose frame carries a track (flippers): a posture the control
    context holds (zero rate), as a tracked vehicle's driver commands only the sprockets."""
    drive = _drive_joints(model)
    carriers = {int(f) for f in model.track_frame}
    return [int(k) for k in model.actuated_joints if int(k) not in drive and k + 1 in carriers]


def _default_steer_joints(model: VehicleModel) -> list[int]:
    held = _drive_joints(model) | set(_track_posture_joints(model))
    return [int(k) for k in model.actuated_joints
            if int(k) not in held and model.joint_type[k + 1] == REVOLUTE]


def solve_control(model: VehicleModel, terrain: Terrain, q: np.ndarray,
                  body_velocity: np.ndarray, body_known: Sequence[bool] = (
                      False, False, True, True, True, False), *,
                  steer_joints: Sequence[str | int] | None = None, hold_passive: bool = False,
                  max_iter: int = 30, tol: float = 1e-10) -> ControlSolution:
    """Control context of (2.37): desired body velocity -> joint rates and steer angles.

    The known elements are the specified body velocity components (``body_known`` over
    ``[wx, wy, wz, vx, vy, vz]``, default the planar wz, vx, vy) and the steer joint rates (held
    at zero); the unknowns are the other body components, wheel rates and passive joints. Because
    A depends nonlinearly on the steer angles, they are found by Gauss-Newton on the squared
    least-squares residual of (2.38) with finite-difference derivatives (§2.2.5, last paragraph).

    Args:
        q: (nq,) current state (steer angles are the initial guess).
        body_velocity: (6,) [w; v] in body coordinates.
        steer_joints: joints whose angles are solved for; default: actuated revolute joints that
            are not wheels (e.g. RecBot's steerL/steerR), track drives or track-carrying
            posture joints (Absolem's flippers: held at zero rate when steer_joints is None).
        hold_passive: also hold passive non-wheel joints (suspension, Zoë's passive steering)
            at zero rate. Leaving them free makes the problem rank deficient for passively
            steered vehicles (the minimum-norm solution then turns the axles, not the body);
            holding them is what a controller commanding a twist on flat ground assumes.
    """
    q = _state(model, q).copy()
    bv = _array(body_velocity, (6,), "body_velocity")
    bk = _array(body_known, (6,), "body_known", dtype=bool)
    known = np.zeros(model.nv, dtype=bool)
    if steer_joints is None:
        steer = _default_steer_joints(model)
        for k in _track_posture_joints(model):
            known[6 + k] = True
    else:
        steer = [model.joint_index(j) if isinstance(j, str) else int(j) for j in steer_joints]
    known[:6] = bk
    qk = np.zeros(model.nv)
    qk[:6] = bv
    for k in steer:
        known[6 + k] = True
    if hold_passive:
        drive = _drive_joints(model)
        for k in model.passive_joints:
            if int(k) not in drive:
                known[6 + k] = True
    data = create_data(model)

    def residual_vector(qq: np.ndarray) -> np.ndarray:
        qd = joint_space_velocity(model, data, terrain, qq, known, qk, 0.0, warm_start=False)
        return data.A @ qd - data.v

    r = residual_vector(q)
    eps = 1e-6
    for _ in range(max_iter if steer else 0):
        if float(np.linalg.norm(r)) < tol:
            break
        J = np.empty((r.size, len(steer)))
        for c, k in enumerate(steer):
            qp = q.copy()
            qp[7 + k] += eps
            qm = q.copy()
            qm[7 + k] -= eps
            J[:, c] = (residual_vector(qp) - residual_vector(qm)) / (2 * eps)
        step = np.linalg.lstsq(J, -r, rcond=None)[0]
        alpha = 1.0
        f0 = float(r @ r)
        while alpha > 1e-6:
            qt = q.copy()
            qt[7 + np.array(steer)] += alpha * step
            rt = residual_vector(qt)
            if float(rt @ rt) < f0:
                q, r = qt, rt
                break
            alpha *= 0.5
        else:
            break
    qdot = joint_space_velocity(model, data, terrain, q, known, qk, 0.0, warm_start=False).copy()
    return ControlSolution(q=q, qdot=qdot, residual=float(np.linalg.norm(r)),
                           steer_joints=tuple(steer))
