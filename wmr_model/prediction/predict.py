"""Batched motion prediction for planners: many candidate command sequences in one call.

:func:`predict` runs N candidate trajectories through the package's one compiled prediction
loop (:func:`wmr_model.kinematics.loops.predict_trajectory`, the same loop :func:`kin.simulate
<wmr_model.kinematics.simulate>` uses) with, optionally, enhanced kinematics (§2.3), the
rollover stability margin and linearized pose covariance (§3.2.1). Every array of the result has
the batch axis first, also for a single candidate (N = 1).

Commands are rates of the actuated joints (``model.actuated_joints`` order). Planners that think
in body twists use :func:`twist_commands` (or :func:`predict_twist`) to convert segments of
``(vx, wz, duration)`` into joint rates first.

Flags (``Prediction.flags``, (N, T+1) bitmask per state):

================  ====  ============================================================
TIPOVER_RISK      1     stability margin below ``tipover_margin`` (default 0 m)
TRACTION_LIMIT    2     reserved for traction-limited models (dynamics); never set by
                        kinematic or enhanced-kinematic prediction, which have no
                        traction limit (§2.3, Limitations)
WHEEL_LIFTOFF     4     some wheel's contact height error Δz (2.8) above
                        ``liftoff_threshold`` (default 0.02 m): the kinematics could not keep
                        it on the terrain
JOINT_LIMIT       8     dynamics only (:func:`joint_limit_flags`): a passive joint (e.g. a
                        suspension arm) within :data:`JOINT_LIMIT_FRACTION` of its range from
                        a limit - suspension travel at its bump or droop stop
================  ====  ============================================================

For dynamic predictions (:func:`wmr_model.dynamics.simulate_dynamics`) the planner-facing
quantities are the wheel loads (normal contact forces), the suspension travel (passive joint
displacements, ``q[..., 7:]``) and the tip-over margin of :func:`dynamic_stability_margin`,
which includes the inertial load of the body's acceleration.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from wmr_model._jit import num_threads, run_ranges
from wmr_model.budgets import MAX_CANDIDATES, MAX_PREDICTION_BYTES, check_budget
from wmr_model.errors import ParameterError, ShapeError
from wmr_model.kinematics import api as kin_api
from wmr_model.kinematics import loops as L
from wmr_model.kinematics.enhanced import slip_axes_array
from wmr_model.kinematics.feedback import (
    Feedback,
    FeedbackInputs,
    FeedbackLaw,
    check_feedback,
    no_feedback,
    no_feedback_inputs,
)
from wmr_model.kinematics.lanes.loop import LANES, lane_body_constants, predict_lanes_range
from wmr_model.kinematics.specialized import model_solve
from wmr_model.kinematics.uncertainty import check_covariance, to_ros_pose_covariance
from wmr_model.parameters import SLIP_NAMES, slip_vector
from wmr_model.spatial import STANDARD_GRAVITY
from wmr_model.terrain.surface import Terrain, flat
from wmr_model.vehicles.inertia import model_frame_inertias
from wmr_model.vehicles.model import VehicleModel

__all__ = [
    "TIPOVER_RISK",
    "TRACTION_LIMIT",
    "WHEEL_LIFTOFF",
    "JOINT_LIMIT",
    "JOINT_LIMIT_FRACTION",
    "FIDELITIES",
    "PRECISIONS",
    "float32_refusal",
    "dynamic_stability_margin",
    "joint_limit_flags",
    "DEFAULT_LIFTOFF_THRESHOLD",
    "Prediction",
    "predict",
    "prediction_bytes",
    "twist_commands",
    "predict_twist",
]

TIPOVER_RISK = L.TIPOVER_RISK  # 1, set by the compiled loop
TRACTION_LIMIT = 2
WHEEL_LIFTOFF = L.WHEEL_LIFTOFF  # 4, set by the compiled loop
JOINT_LIMIT = 8
#: JOINT_LIMIT: a passive joint closer than this fraction of its range to a limit (5 %: e.g.
#: 1.2 cm of a 24 cm suspension stroke, well past normal travel, before the stop is reached).
JOINT_LIMIT_FRACTION = 0.05

FIDELITIES = ("kinematic", "enhanced")
PRECISIONS = ("float64", "float32")

# Parallel chunks per thread for large batches: more than one evens out candidates of unequal
# cost (a candidate that falls back to full collision searches more often); results do not
# depend on it (each candidate is computed alone).
PARALLEL_CHUNKS_PER_THREAD = 4

# A wheel whose contact height error exceeds 2 cm has separated from the terrain by more than the
# Baumgarte term removes in a step at typical speeds; smaller errors are ordinary stabilization
# residue on rough ground (test_kinematics: RMS < 2 mm).
DEFAULT_LIFTOFF_THRESHOLD = 0.02


@dataclass(frozen=True)
class Prediction(kin_api.Trajectory):
    """Result of :func:`predict`; batch axis first everywhere.

    Extends :class:`~wmr_model.kinematics.Trajectory` (``dt``, ``q`` (N, T+1, nq), ``qdot``
    (N, T, nv), ``contact_speed`` (N, T, nw), ``dz`` (N, T+1, nw) and its ``time``,
    ``position``, ``euler``, ``joints``) with:

    Attributes:
        slip: (N, T, 6) body slip twist ``[w; v]`` added by enhanced kinematics (2.50), body
            coordinates (zeros for ``fidelity="kinematic"``).
        wheel_slip: (N, T, nw, 2) contact x, y slip velocities commanded to the solve (2.52).
        stability_margin: (N, T+1) signed rollover margin [m]
        (:mod:`wmr_model.kinematics.enhanced`);
            NaN when the model has no mass.
        flags: (N, T+1) uint8 bitmask (TIPOVER_RISK, TRACTION_LIMIT, WHEEL_LIFTOFF).
        covariance: (N, T+1, 6, 6) pose covariance ``[dtheta; dp]`` (world axes,
            :mod:`wmr_model.kinematics.uncertainty`), or None when no ``Qprime`` was given.
        steps: (S,) step index of each stored state: ``0..T`` unless ``predict(every=k)``
            kept samples only (then ``0, k, 2k, ..., T``; the state arrays have S rows in
            place of T+1, the per-step arrays S-1 rows in place of T, steps ``steps[:-1]``,
            and ``flags`` ORs the states since the previous sample).
    """

    slip: np.ndarray
    wheel_slip: np.ndarray
    stability_margin: np.ndarray
    flags: np.ndarray
    covariance: np.ndarray | None
    steps: np.ndarray | None = None

    @property
    def time(self) -> np.ndarray:
        """(S,) time stamps of the stored states from 0 [s]."""
        if self.steps is None:
            return super().time
        return self.steps * self.dt

    @property
    def body_twist(self) -> np.ndarray:
        """(N, T, 6) body twist ``[w; v]`` in body coordinates used in each step."""
        return self.qdot[..., 0:6]

    @property
    def ros_covariance(self) -> np.ndarray | None:
        """(N, T+1, 36) covariance in ROS ``PoseWithCovariance`` layout, or None."""
        return None if self.covariance is None else to_ros_pose_covariance(self.covariance)


def _batched(a: np.ndarray, name: str, tail: tuple[int, ...], hint: str) -> np.ndarray:
    """Add a leading batch axis when missing and check the trailing shape."""
    a = np.asarray(a, dtype=float)
    if a.ndim == len(tail):
        a = a[None]
    ok = a.ndim == len(tail) + 1 and all(t is None or t == s for s, t in zip(a.shape[1:], tail))
    if not ok:
        raise ShapeError(f"{name}: expected shape {hint}, got {a.shape}")
    return a


def predict(model: VehicleModel, terrain: Terrain, q0: np.ndarray, commands: np.ndarray,
            dt: float, *, fidelity: str = "kinematic",
            slip_params: np.ndarray | Mapping[str, float] | None = None,
            slip_axes: np.ndarray | None = None, Qprime: np.ndarray | None = None,
            P0: np.ndarray | None = None, integrator: str = "euler",
            stabilization: float = kin_api.DEFAULT_STABILIZATION,
            process_noise: np.ndarray | None = None, gravity: float = STANDARD_GRAVITY,
            liftoff_threshold: float = DEFAULT_LIFTOFF_THRESHOLD,
            tipover_margin: float = 0.0, attitude: np.ndarray | None = None,
            known_angular_velocity: np.ndarray | None = None,
            warm_start: bool = True, every: int = 1,
            feedback: Feedback | None = None, precision: str = "float64") -> Prediction:
    """Predict N candidate trajectories (kinematic §2.2 or enhanced kinematic §2.3).

    Args:
        q0: (nq,) or (N, nq) initial states, normally from :func:`kin.initialize_contact`.
        commands: (T, na) or (N, T, na) actuated joint rates per step [rad/s or m/s], in
            ``model.actuated_joints`` order; held over each step of ``dt`` [s].
        fidelity: ``"kinematic"`` (least-squares no-slip) or ``"enhanced"`` (body slip).
        slip_params: p1..p6 as (6,), (N, 6) (p7 = p8 = 0), p1..p8 as (8,), (N, 8), or a
            mapping of ``slip.p1``.. names (:mod:`wmr_model.parameters`); default zeros. Only
            used by ``"enhanced"``.
        slip_axes: (4, 3) slip directions lon, lat, ang, normal in body coordinates
            (:func:`wmr_model.kinematics.enhanced.slip_axes_array`); default body x, y, z, z.
        Qprime: (6, 6) spectral density of body-twist noise (3.13); when given, pose
            covariance is propagated (3.22)-(3.24) inside the loop.
        P0: (6, 6) or (N, 6, 6) initial pose covariance (default zero); needs ``Qprime``.
        integrator: ``"euler"`` or ``"rk4"``.
        stabilization: Baumgarte gain as sigma*dt in [0, 1] (2.35).
        process_noise: (T, 6) or (N, T, 6) samples added to the body twist each step (Monte
            Carlo: draw with covariance ``Qprime / dt``).
        gravity: magnitude [m/s^2] of world gravity (0, 0, -g).
        liftoff_threshold: Δz [m] above which WHEEL_LIFTOFF is flagged.
        tipover_margin: margin [m] below which TIPOVER_RISK is flagged.
        attitude: (T+1, 2) or (N, T+1, 2) measured roll, pitch [rad] (estimation context,
            §2.2.5): imposed on the state at the start (row 0) and after every step (row
            t+1), yaw, position and joints kept (:func:`kin.impose_roll_pitch
            <wmr_model.kinematics.api.impose_roll_pitch>`), inside the compiled loop.
        known_angular_velocity: (T, 3) or (N, T, 3) measured body angular velocity [rad/s]
            (gyro, body coordinates) treated as known in the velocity solve (2.37) of every
            step, like the actuated joint rates (:func:`kin.estimation_known
            <wmr_model.kinematics.api.estimation_known>` with ``gyro=True``).
        warm_start: warm-start each step's collision detection from the previous step's
            contact angles (same result to the search's tolerance, about 2.5x faster); False
            runs the full fan search every step (the reference it is tested against).
        every: keep every k-th state only (plus the final one): outputs at steps 0, k, 2k,
            ..., T (``Prediction.steps``), each sample bit for bit the full run's; flags OR
            the states in between, so no risk is dropped. For planners that need the end
            state and covariance only, ``every >= T`` keeps steps 0 and T. Default 1: all.
        feedback: a vehicle controller's closed-loop law with its per-step inputs
            (:class:`~wmr_model.kinematics.feedback.Feedback`, built by
            :func:`wmr_model.prediction.controllers.predict_twist_steps`): at the start of every
            step its rates at the current state replace the actuated entries of ``commands``.
        precision: ``"float64"`` (default: the reference loop) or ``"float32"``: the planner's
            fast path, blocks of candidates in float32 SIMD lanes
            (:mod:`wmr_model.kinematics.lanes`), several times faster per candidate; the same
            equations and decisions, with the float32 rounding bounded in the README ("Planner
            precision"). For wheeled vehicles without loop closures or joint constraints,
            Euler, warm-started contact, and none of ``feedback``, ``process_noise``,
            ``attitude``.

    Returns:
        :class:`Prediction` with batch axis N = max(N of q0, commands, slip_params, ...).
    """
    if fidelity not in FIDELITIES:
        raise ParameterError(f"fidelity: must be one of {list(FIDELITIES)}, got {fidelity!r}")
    if precision not in PRECISIONS:
        raise ParameterError(f"precision: must be one of {list(PRECISIONS)}, got {precision!r}")
    if precision == "float32":
        _check_float32(model, integrator=integrator, warm_start=warm_start, feedback=feedback,
                       process_noise=process_noise, attitude=attitude)
    a = _prediction_inputs(model, q0, commands, dt, slip_params=slip_params,
                           slip_axes=slip_axes, Qprime=Qprime, P0=P0, integrator=integrator,
                           stabilization=stabilization, process_noise=process_noise,
                           gravity=gravity, attitude=attitude,
                           known_angular_velocity=known_angular_velocity, every=every,
                           feedback=feedback)
    return _predict_loop(model, terrain, a, dt, fidelity=fidelity, integrator=integrator,
                         gravity=gravity, liftoff_threshold=liftoff_threshold,
                         tipover_margin=tipover_margin, warm_start=warm_start,
                         lanes=precision == "float32")


def _check_float32(model: VehicleModel, *, integrator: str, warm_start: bool,
                   feedback: Feedback | None, process_noise: np.ndarray | None,
                   attitude: np.ndarray | None) -> None:
    """Refuse, naming the argument, what ``precision="float32"`` does not cover."""
    def refuse(what: str) -> None:
        raise ParameterError(f"precision: 'float32' covers the planner's loop only; {what} "
                             f"needs precision='float64'")

    if integrator != "euler":
        refuse(f"integrator={integrator!r}")
    if not warm_start:
        refuse("warm_start=False")
    if feedback is not None:
        refuse("feedback")
    if process_noise is not None:
        refuse("process_noise")
    if attitude is not None:
        refuse("attitude")
    why = float32_refusal(model)
    if why is not None:
        refuse(why)


def float32_refusal(model: VehicleModel) -> str | None:
    """Why ``predict(precision="float32")`` cannot run ``model`` (tracks, loop closures or
    joint constraints), or None when it can."""
    if model.track_frame.shape[0] > 0:
        return f"a tracked vehicle ({model.name})"
    k = model.kinematic_arrays()
    if k.loop_closure.shape[0] > 0 or k.A_joint.shape[0] > 0:
        return f"a vehicle with loop closures or joint constraints ({model.name})"
    return None


class _PredictionInputs(NamedTuple):
    """The checked and batched inputs of :func:`predict` (arrays with leading N or 1)."""

    b: kin_api.BatchInputs
    p: np.ndarray
    Q: np.ndarray
    P: np.ndarray
    noise: np.ndarray
    attitude: np.ndarray
    omega: np.ndarray
    axes: np.ndarray
    propagate: bool
    k: int
    S: int
    law: FeedbackLaw
    fb: FeedbackInputs


def _prediction_inputs(model: VehicleModel, q0: np.ndarray, commands: np.ndarray, dt: float, *,
                       slip_params: np.ndarray | Mapping[str, float] | None,
                       slip_axes: np.ndarray | None, Qprime: np.ndarray | None,
                       P0: np.ndarray | None, integrator: str, stabilization: float,
                       process_noise: np.ndarray | None, gravity: float,
                       attitude: np.ndarray | None,
                       known_angular_velocity: np.ndarray | None,
                       every: int, feedback: Feedback | None = None) -> _PredictionInputs:
    """Check :func:`predict`'s inputs (errors name the argument) and batch them."""
    p = slip_vector(slip_params)
    p = _batched(p, "slip_params", (len(SLIP_NAMES),),
                 "(6,) or (N, 6) (p1..p6), or (8,) or (N, 8) (p1..p8)")
    if not np.all(np.isfinite(p)):
        raise ParameterError("slip_params: must be finite")
    propagate = Qprime is not None
    if P0 is not None and not propagate:
        raise ParameterError("P0: given without Qprime; covariance propagation needs Qprime")
    Q = check_covariance(Qprime, "Qprime") if Qprime is not None else np.zeros((6, 6))
    if P0 is None:
        P = np.zeros((1, 6, 6))
    else:
        P = _batched(P0, "P0", (6, 6), "(6, 6) or (N, 6, 6)").copy()
        for n in range(P.shape[0]):
            P[n] = check_covariance(P[n], f"P0[{n}]")
    T_hint = np.shape(commands)[-2] if np.ndim(commands) >= 2 else 0
    if process_noise is None:
        noise = np.zeros((1, 0, 6))
    else:
        noise = _batched(process_noise, "process_noise", (T_hint, 6),
                         f"({T_hint}, 6) or (N, {T_hint}, 6)")
        if not np.all(np.isfinite(noise)):
            raise ParameterError("process_noise: must be finite")
    attitude_a = _measured(attitude, "attitude", T_hint + 1, 2, "roll, pitch")
    omega = _measured(known_angular_velocity, "known_angular_velocity", T_hint, 3, "w")
    axes = slip_axes_array() if slip_axes is None else _axes(slip_axes)
    law, fb = _feedback(model, feedback, T_hint)
    if not (math.isfinite(gravity) and gravity >= 0):
        raise ParameterError(f"gravity: must be a finite magnitude >= 0 m/s^2, got {gravity}")
    b = kin_api.prepare_batch(model, q0, commands, dt, integrator, stabilization,
                              rates_name="commands",
                              other_batch_sizes={"slip_params": p.shape[0], "P0": P.shape[0],
                                                 "process_noise": noise.shape[0],
                                                 "attitude": attitude_a.shape[0],
                                                 "known_angular_velocity": omega.shape[0],
                                                 "feedback": fb.target.shape[0]})
    N, T = b.N, b.T
    if isinstance(every, bool) or not isinstance(every, (int, np.integer)) or every < 1:
        raise ParameterError(f"every: must be an integer >= 1 (output stride in steps), "
                             f"got {every!r}")
    k = int(min(every, T))
    S = (T + k - 1) // k + 1  # stored states 0, k, 2k, ..., T
    check_budget("predict: candidates", N, MAX_CANDIDATES, "split the batch "
                 "(wmr_model.prediction.rollouts.rollout runs it in chunks)")
    check_budget(f"predict: bytes for {N} candidates x {S} stored states", prediction_bytes(
        model, N, T, S, covariance=propagate), MAX_PREDICTION_BYTES,
        "keep fewer states (every=k; every=T keeps the end state) or split the batch")

    def shared(a: np.ndarray) -> np.ndarray:
        # leading axis N, or 1 when all candidates share the value (the loop broadcasts it);
        # writable C copies: numba's read-only specialization is slower (see prepare_batch)
        return np.array(a if a.shape[0] == N else a[:1], dtype=float, order="C")

    p, P, noise, attitude_a = shared(p), shared(P), shared(noise), shared(attitude_a)
    fb = FeedbackInputs(*(shared(f) for f in fb))
    return _PredictionInputs(b, p, Q, P, noise, attitude_a, omega, axes, propagate, k, S, law,
                             fb)


def _feedback(model: VehicleModel, feedback: Feedback | None,
              T: int) -> tuple[FeedbackLaw, FeedbackInputs]:
    """The checked closed-loop law and inputs of :func:`predict` (none: an empty law)."""
    if feedback is None:
        return no_feedback(), no_feedback_inputs()
    law, fb = check_feedback(feedback, len(model.actuated_joints), T)
    return law, fb


# Per model, its (nf, 6, 6) frame inertias as the compiled loop reads them (o.I_frame, never
# written there): computed once, not at every call. Weak keys: they go with the model.
_FRAME_INERTIAS: weakref.WeakKeyDictionary[VehicleModel, np.ndarray]
_FRAME_INERTIAS = weakref.WeakKeyDictionary()


def _frame_inertias(model: VehicleModel) -> np.ndarray:
    I_frame = _FRAME_INERTIAS.get(model)
    if I_frame is None:
        I_frame = _FRAME_INERTIAS.setdefault(model, model_frame_inertias(model))
    return I_frame


def _predict_loop(model: VehicleModel, terrain: Terrain, a: _PredictionInputs, dt: float, *,
                  fidelity: str, integrator: str, gravity: float, liftoff_threshold: float,
                  tipover_margin: float, warm_start: bool, lanes: bool = False) -> Prediction:
    """Allocate the outputs of :func:`predict` and run the compiled loop over the batch."""
    b, p, Q, P, noise, attitude_a, omega = a.b, a.p, a.Q, a.P, a.noise, a.attitude, a.omega
    axes, propagate, k, S = a.axes, a.propagate, a.k, a.S
    N, T, sigma, q0a = b.N, b.T, b.sigma, b.q0
    u = b.rates
    qdot_cmd = np.zeros((N, T, model.nv))
    qdot_cmd[:, :, 6 + model.actuated_joints] = u
    known = kin_api.simulation_known(model)
    if omega.shape[1] > 0:
        known[0:3] = True
        qdot_cmd[:, :, 0:3] = omega
    nc = model.nc  # contacts: wheels, then track patches
    vc = np.zeros((1, T, nc, 2))  # no added contact slip: one shared zero array
    q_traj = np.empty((N, S, model.nq))
    qdot_traj = np.empty((N, S - 1, model.nv))
    vcn = np.empty((N, S - 1, nc))
    dz = np.empty((N, S, nc))
    stats = fidelity == "enhanced" or model.total_mass > 0.0
    slip = np.empty((N, S - 1, 6)) if stats else np.zeros((N, S - 1, 6))
    vc_slip = np.empty((N, S - 1, nc, 2)) if stats else np.zeros((N, S - 1, nc, 2))
    margin = np.empty((N, S)) if stats else np.full((N, S), np.nan)
    P_traj = np.empty((N, S if propagate else 0, 6, 6))
    flags = np.empty((N, S), dtype=np.uint8)
    assess = model.total_mass > 0.0
    # no mass, no force: the margin is undefined (NaN below) and never flags
    tip = float(tipover_margin) if assess else -math.inf
    m, t = model.kinematic_arrays(), terrain.kernel_args()
    o = L.prediction_options(
        known, dt, sigma, kin_api.INTEGRATORS[integrator], I_frame=_frame_inertias(model),
        gravity=np.array([0.0, 0.0, -float(gravity)]), slip_axes=axes, Qprime=Q,
        enhanced=fidelity == "enhanced", assess=assess, propagate=propagate,
        warm_contact=bool(warm_start), every=k, tipover_margin=tip,
        liftoff_threshold=float(liftoff_threshold), feedback=a.law,
        solver=model_solve(m, known))
    X = L.PredictInputs(q0a, qdot_cmd, vc, p, noise, P, attitude_a, a.fb)
    Y = L.PredictOutputs(q_traj, qdot_traj, vcn, dz, slip, vc_slip, margin, P_traj, flags)
    if lanes:  # float32 lanes: blocks of LANES candidates, the blocks spread over the threads
        blocks = -(-N // LANES)
        run_ranges(predict_lanes_range, blocks, min(blocks, PARALLEL_CHUNKS_PER_THREAD
                                                    * num_threads()), m, t, o, X, Y,
                   lane_body_constants(model, _frame_inertias(model)))
    else:
        # both cores for large batches: contiguous chunks of candidates, a few per thread
        chunks = min(N // L.PARALLEL_MIN_CHUNK, PARALLEL_CHUNKS_PER_THREAD * num_threads())
        run_ranges(L.predict_range, N, chunks, m, t, o, X, Y)
    if not assess:
        margin[:] = np.nan
    steps = None if k == 1 else np.minimum(np.arange(S) * k, T)
    return Prediction(dt=float(dt), q=q_traj, qdot=qdot_traj, contact_speed=vcn, dz=dz,
                      slip=slip, wheel_slip=vc_slip, stability_margin=margin, flags=flags,
                      covariance=P_traj if propagate else None, steps=steps)




def prediction_bytes(model: VehicleModel, N: int, T: int, S: int, *, covariance: bool) -> int:
    """Bytes :func:`predict` allocates for N candidates of T steps keeping S states: per
    candidate the joint-space commands (T, nv) and the rate copy (T, na); per stored state the
    state (nq), contact dz (nc), margin, covariance (36, when propagated) and the flag byte;
    per stored step (S - 1) the rates (nv), contact speed (nc), body slip (6) and wheel slip
    (2 nc)."""
    nq, nv, nc, na = model.nq, model.nv, model.nc, len(model.actuated_joints)
    per_state = nq + nc + 1 + (36 if covariance else 0)
    per_step = nv + nc + 6 + 2 * nc
    T, S = int(T), int(S)
    return int(N) * (8 * (T * (nv + na) + S * per_state + (S - 1) * per_step) + S)


def _measured(a: np.ndarray | None, name: str, rows: int, width: int,
              what: str) -> np.ndarray:
    """Batched (n, rows, width) measured-input array, or (1, 0, width) when not given."""
    if a is None:
        return np.zeros((1, 0, width))
    out = _batched(a, name, (rows, width), f"({rows}, {width}) or (N, {rows}, {width}) "
                   f"rows ({what})")
    if not np.all(np.isfinite(out)):
        bad = np.argwhere(~np.isfinite(out))[0].tolist()
        raise ParameterError(f"{name}: must be finite; first bad element at index {bad}")
    return out


def _axes(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a, dtype=float)
    if a.shape != (4, 3):
        raise ShapeError(f"slip_axes: expected shape (4, 3) [lon; lat; ang; normal], got {a.shape}")
    return slip_axes_array(*a)


def segment_steps(segments: np.ndarray, dt: float) -> tuple[np.ndarray, np.ndarray, int]:
    """Checked twist segments (N, S, 3) rows ``(vx, wz, duration)``, the steps of each
    segment (N, S) (``round(duration / dt)``) and the horizon T (the longest candidate, >= 1).
    ``segments`` may be (S, 3) for one candidate."""
    seg = np.asarray(segments, dtype=float)
    if seg.ndim == 2:
        seg = seg[None]
    if seg.ndim != 3 or seg.shape[2] != 3:
        raise ShapeError(f"segments: expected shape (S, 3) or (N, S, 3) rows (vx, wz, "
                         f"duration), got {np.shape(segments)}")
    if not np.all(np.isfinite(seg)):
        raise ParameterError("segments: must be finite")
    if np.any(seg[:, :, 2] < 0):
        raise ParameterError("segments: durations must be >= 0 s")
    if not (math.isfinite(dt) and dt > 0):
        raise ParameterError(f"dt: must be a finite step size > 0 s, got {dt}")
    steps = np.rint(seg[:, :, 2] / dt).astype(int)
    return seg, steps, max(1, int(steps.sum(axis=1).max()))


def twist_commands(model: VehicleModel, segments: np.ndarray, dt: float, *,
                   q: np.ndarray | None = None) -> np.ndarray:
    """Actuated joint rates (N, T, na) for piecewise-constant body twist segments.

    Args:
        segments: (S, 3) or (N, S, 3) rows ``(vx [m/s], wz [rad/s], duration [s])``.
        dt: step size [s]; each segment lasts ``round(duration / dt)`` steps.
        q: (nq,) state whose joint values seed the conversion (default neutral).

    The conversion is the control context of (2.37) on **flat ground** with a level body, i.e.
    what an onboard controller that does not see the terrain would command; the prediction then
    shows what those commands do on the real terrain. It is
    :func:`kin.solve_control <wmr_model.kinematics.solve_control>` with the planar twist (wz, vx,
    vy = 0) known and passive non-wheel joints held (``hold_passive=True``); steer angles it
    solves are reached within the first step of each segment (rate = change / dt) and held after.
    Candidates with fewer total steps than the longest are padded with zero rates (stopped).
    Without steer joints or tracks the rates are linear in (vx, wz) and come from three solves
    per joint state (equal to a solve per twist to round-off); otherwise results are cached per
    distinct (vx, wz) and steer state.
    """
    seg, steps, T = segment_steps(segments, dt)
    qn = model.neutral_state()
    if q is not None:
        qn[7:] = kin_api._state(model, q)[7:]
    act = list(model.actuated_joints)
    out = np.zeros((seg.shape[0], T, len(act)))
    terrain = flat()
    if model.ntp:
        # Track patches are weighted by their height error (activation rule,
        # wmr_model.vehicles.tracks): belts buried at the neutral height would all count, end arcs
        # included. Rest them on the flat ground first; wheel contacts do not depend on the height.
        qn, _ = kin_api.initialize_contact(model, terrain, qn)
    cache: dict[tuple[float, float, bytes], kin_api.ControlSolution] = {}
    basis: dict[bytes, tuple[np.ndarray, np.ndarray, np.ndarray] | None] = {}

    def linear_basis(qc: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        # Without steer joints the control solve is one linear least-squares solve (2.37) at
        # the fixed state qc, so its rates are linear in (vx, wz): the solutions for the zero
        # twist and the unit vx, wz twists give every other one (to round-off) without a solve
        # per distinct twist. None when the vehicle steers (Gauss-Newton on the steer angles)
        # or has tracks (their patch activation depends on the solution: not linear).
        if model.ntp:
            return None
        key = qc[7:].tobytes()
        if key not in basis:
            sols = [kin_api.solve_control(model, terrain, qc,
                                          np.array([0.0, 0.0, w, v, 0.0, 0.0]),
                                          hold_passive=True)
                    for v, w in ((0.0, 0.0), (1.0, 0.0), (0.0, 1.0))]
            basis[key] = None if any(len(s.steer_joints) for s in sols) else (
                sols[0].qdot[6 + model.actuated_joints], sols[1].qdot[6 + model.actuated_joints],
                sols[2].qdot[6 + model.actuated_joints])
        return basis[key]

    for n in range(seg.shape[0]):
        qc = qn.copy()
        t = 0
        for s in range(seg.shape[1]):
            k = int(steps[n, s])
            if k == 0:
                continue
            vx, wz = float(seg[n, s, 0]), float(seg[n, s, 1])
            lin = linear_basis(qc)
            if lin is not None:
                r0, rv, rw = lin
                out[n, t:t + k] = r0 + vx * (rv - r0) + wz * (rw - r0)
                t += k
                continue
            key = (vx, wz, qc[7:].tobytes())
            if key not in cache:
                cache[key] = kin_api.solve_control(model, terrain, qc,
                                                   np.array([0.0, 0.0, wz, vx, 0.0, 0.0]),
                                                   hold_passive=True)
            sol = cache[key]
            out[n, t:t + k] = sol.qdot[6 + model.actuated_joints]
            for j in sol.steer_joints:  # reach the solved steer angle within the first step
                out[n, t, act.index(j)] = (sol.q[7 + j] - qc[7 + j]) / dt
            qc = sol.q.copy()
            t += k
    return out


def predict_twist(model: VehicleModel, terrain: Terrain, q0: np.ndarray, segments: np.ndarray,
                  dt: float, **kwargs) -> Prediction:
    """:func:`predict` for body twist segments (:func:`twist_commands` then :func:`predict`).

    The twist-to-rate conversion uses the joint values of ``q0`` (first candidate when
    batched).
    """
    q0a = np.asarray(q0, dtype=float)
    qseed = q0a if q0a.ndim == 1 else q0a[0]
    return predict(model, terrain, q0, twist_commands(model, segments, dt, q=qseed), dt,
                   **kwargs)


def dynamic_stability_margin(model: VehicleModel, terrain: Terrain, q: np.ndarray,
                             qdot: np.ndarray, dt: float) -> np.ndarray:
    """Tip-over stability margin (T+1,) [m] along a dynamic trajectory.

    ``q`` (T+1, nq), ``qdot`` (T+1, nv) at step ``dt`` [s]. At each state the cg force is the
    vehicle's weight minus its inertial load ``m a`` (``a`` the body origin's world
    acceleration by central differences of ``R_b v_b``), passed to
    :func:`wmr_model.kinematics.enhanced.stability_margin` with the contact frames of that state
    (quasi-static: rotational inertia is left out). Negative: the resultant leaves the support
    polygon.
    """
    from wmr_model.kinematics.enhanced import stability_margin
    from wmr_model.kinematics.track_collision import contact_detection
    from wmr_model.spatial import quat_to_rot
    from wmr_model.vehicles.inertia import composite_inertias, inertia_mass_com
    from wmr_model.vehicles.tree import forward_kinematics

    q = np.ascontiguousarray(q, dtype=float)
    qdot = np.ascontiguousarray(qdot, dtype=float)
    n = q.shape[0]
    R = np.stack([quat_to_rot(np.ascontiguousarray(o)) for o in q[:, 0:4]])
    v_world = np.einsum("tij,tj->ti", R, qdot[:, 3:6])
    acc = np.gradient(v_world, dt, axis=0) if n > 1 else np.zeros_like(v_world)
    g_world = np.array([0.0, 0.0, -float(np.linalg.norm(_gravity(model)))])
    I_frame = model_frame_inertias(model)
    T_world = np.empty((model.nf, 4, 4))
    T_contact = np.empty((model.nc, 4, 4))
    dz = np.empty(model.nc)
    ang = np.empty(model.nc)
    Ic = np.empty((model.nf, 6, 6))
    km, ta = model.kinematic_arrays(), terrain.kernel_args()
    tracks = (model.track_frame, model.track_drive, model.track_path)
    out = np.empty(n)
    f_cg = np.zeros(6)
    for i in range(n):
        forward_kinematics(model.parent, model.joint_type, model.axis, model.T0, q[i], T_world)
        contact_detection(km, ta, tracks, T_world, T_contact, dz, ang)
        m, c = inertia_mass_com(composite_inertias(model.parent, I_frame, T_world, Ic))
        f_cg[3:] = R[i].T @ (m * (g_world - acc[i]))
        out[i] = stability_margin(T_world, T_contact, c, f_cg)
    return out


def joint_limit_flags(model: VehicleModel, q: np.ndarray) -> np.ndarray:
    """(..., ) bool: some passive non-wheel joint of ``q`` (..., nq) within
    :data:`JOINT_LIMIT_FRACTION` of its range from a finite limit (suspension at a stop)."""
    q = np.asarray(q, dtype=float)
    wheels = set(model.wheel_joints.tolist())
    out = np.zeros(q.shape[:-1], dtype=bool)
    for k in model.passive_joints:
        lo, hi = float(model.lower[k + 1]), float(model.upper[k + 1])
        if k in wheels or not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
            continue
        band = JOINT_LIMIT_FRACTION * (hi - lo)
        th = q[..., 7 + k]
        out |= (th <= lo + band) | (th >= hi - band)
    return out


def _gravity(model: VehicleModel) -> np.ndarray:
    from wmr_model.dynamics.api import gravity_of

    return gravity_of(model)
