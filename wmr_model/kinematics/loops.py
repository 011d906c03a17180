"""Compiled simulation loops: kinematic prediction (§2.2.6) and the unconstrained baseline (§2.5.1).

Each loop runs a whole trajectory inside numba; :func:`predict_range` runs a range of a batch's
trajectories without the GIL, spread over the cores by :func:`wmr_model._jit.run_ranges`. They
compose the per-step kernels of the stage modules (:mod:`.solve`,
:mod:`.integrate`, :mod:`.initialize`, ...), the enhanced-kinematics kernels of
:mod:`wmr_model.kinematics.enhanced` and the covariance step of
:mod:`wmr_model.kinematics.uncertainty`, and contain no physics of their own.
:func:`predict_trajectory` is the one prediction loop; a kinematic simulation is it with the
enhanced, stability and covariance options off (:func:`simulation_options`). Trajectories
without RK4 stages and per-step extras run its bit-identical specialization
:func:`euler_trajectory` (faster, nothing else).

The loops read ``f(m, t, d, o, x, y)``: the model ``m`` (:class:`~wmr_model.vehicles.model
.KernelModel`), the terrain ``t`` (:class:`~wmr_model.terrain.surface.TerrainArrays`), the
workspace ``d`` (:class:`~wmr_model.kinematics.data.KernelData`, one per trajectory), the options
``o`` (:class:`PredictOptions`, checked once by :func:`prediction_options`), the inputs ``x``
(:class:`PredictInputs`) and the outputs ``y`` (:class:`PredictOutputs`).

Wheeled and tracked vehicles run through the same loops: "wheel" sizes ``nw`` in the per-contact
arrays below (``vc_xy``, ``vc_norm``, ``dz_traj``, ``vc_slip_traj``) count all contacts, nc =
wheels followed by track patches (:mod:`wmr_model.vehicles.tracks`); for wheeled vehicles nc = nw.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

# Module import (not ``from``): wmr_model.kinematics.enhanced imports this package's kernels, so
# when it is imported first it is only partially initialized here; numba resolves E.* at compile
# time.
import wmr_model.kinematics.enhanced as E
from wmr_model._jit import njit
from wmr_model.kinematics.constraints import contact_velocity_norms, project_loop_closures
from wmr_model.kinematics.data import kernel_data, kernel_data_with
from wmr_model.kinematics.feedback import FeedbackInputs, FeedbackLaw, feedback_command, no_feedback
from wmr_model.kinematics.initialize import initialize_terrain_contact
from wmr_model.kinematics.integrate import (
    integrate_euler,
    normalize_state,
    rescale_quaternion,
    state_derivative,
)
from wmr_model.kinematics.solve import joint_space_velocity
from wmr_model.kinematics.specialized import GENERIC
from wmr_model.kinematics.uncertainty import propagate_pose_covariance
from wmr_model.spatial import euler_from_quat, quat_from_euler, quat_mul, quat_to_rot
from wmr_model.vehicles.inertia import fold_spinning_leaves

EULER = 0
RK4 = 1

# Flag bits of a predicted state (the values of wmr_model.prediction.predict's TIPOVER_RISK,
# WHEEL_LIFTOFF).
TIPOVER_RISK = 1
WHEEL_LIFTOFF = 4


class PredictOptions(NamedTuple):
    """Options of :func:`predict_trajectory`, shared by every candidate of a batch.

    ``known`` (nv,) bool: the given entries of the joint-space velocity; ``dt`` [s];
    ``sigma`` Baumgarte gain [1/s] (2.35); ``integrator`` :data:`EULER` or :data:`RK4`;
    ``enhanced``: body-level slip (2.44)-(2.52) in every velocity solve (each RK4 stage too);
    ``assess`` (implied by ``enhanced``): the cg force and stability margin; ``propagate``:
    pose covariance (3.22)-(3.24) with spectral density ``Qprime`` (6, 6); ``warm_contact``:
    warm-start collision detection from the previous step's contact angles
    (:func:`wmr_model.kinematics.wheel_collision.wheel_contact`; False runs the cold fan search
    every call, the reference for tests); ``every`` output stride k >= 1; ``tipover_margin`` [m] and
    ``liftoff_threshold`` [m] of the state flags; ``I_frame`` (nf, 6, 6) per-frame spatial
    inertias, ``gravity`` (3,) world gravity [m/s^2], ``slip_axes`` (4, 3) (enhanced
    kinematics, :mod:`wmr_model.kinematics.enhanced`); ``feedback`` the closed-loop law of a
    vehicle controller (:class:`~wmr_model.kinematics.feedback.FeedbackLaw`; kind 0: none, the
    actuated rates are those of ``qdot_cmd``); ``solver`` the address of the vehicle's
    specialized least-squares solve for ``known``
    (:func:`wmr_model.kinematics.specialized.specialized_solve`, bit-identical to the generic
    kernel, which runs where it is :data:`~wmr_model.kinematics.specialized.GENERIC`, 0).
    """

    known: np.ndarray
    dt: float
    sigma: float
    integrator: int
    enhanced: bool
    assess: bool
    propagate: bool
    warm_contact: bool
    every: int
    tipover_margin: float
    liftoff_threshold: float
    I_frame: np.ndarray
    gravity: np.ndarray
    slip_axes: np.ndarray
    Qprime: np.ndarray
    feedback: FeedbackLaw
    solver: int


class PredictInputs(NamedTuple):
    """Inputs of one trajectory (of a batch: leading axis N, or 1 where marked shared-able).

    ``q0`` (nq,); ``qdot_cmd`` (T, nv) known joint-space velocity entries per step (others
    ignored); ``vc_xy`` (T, nc, 2) contact slip velocities per step (zeros for no-slip);
    ``slip_p`` (6,) p1..p6; ``body_noise`` (T, 6) added to the body twist each step, or (0, 6)
    for none; ``P0`` (6, 6) initial pose covariance; ``attitude`` (T+1, 2) measured roll,
    pitch [rad] imposed at the start and after every step, or (0, 2) for none; ``feedback``
    the twist-only parts of the closed-loop law per step
    (:class:`~wmr_model.kinematics.feedback.FeedbackInputs`, (0, 0) arrays without one). In a
    batch ``vc_xy``, ``slip_p``, ``body_noise``, ``P0``, ``attitude`` and the ``feedback``
    arrays may have a leading 1 (shared by all candidates).
    """

    q0: np.ndarray
    qdot_cmd: np.ndarray
    vc_xy: np.ndarray
    slip_p: np.ndarray
    body_noise: np.ndarray
    P0: np.ndarray
    attitude: np.ndarray
    feedback: FeedbackInputs


class PredictOutputs(NamedTuple):
    """Outputs of one trajectory (of a batch: leading axis N), S = ceil(T / every) + 1 samples.

    ``q_traj`` (S, nq); ``qdot_traj`` (S-1, nv) joint-space velocity integrated in each step
    (Euler: exactly; RK4: first stage); ``vc_norm`` (S-1, nc) contact point speeds |v_c| at
    the start of each step; ``dz_traj`` (S, nc) contact height errors. When ``enhanced or
    assess``: ``slip_traj`` (S-1, 6) body slip (2.50), ``vc_slip_traj`` (S-1, nc, 2) contact
    slip velocities used (2.52), ``margin_traj`` (S,) stability margin [m]. When ``propagate``:
    ``P_traj`` (S, 6, 6). ``flags`` (S,) uint8 state flags, or (0,) for none. Unrequested
    outputs may have a zero-length first axis.
    """

    q_traj: np.ndarray
    qdot_traj: np.ndarray
    vc_norm: np.ndarray
    dz_traj: np.ndarray
    slip_traj: np.ndarray
    vc_slip_traj: np.ndarray
    margin_traj: np.ndarray
    P_traj: np.ndarray
    flags: np.ndarray


def prediction_options(known: np.ndarray, dt: float, sigma: float, integrator: int, *,
                       I_frame: np.ndarray, gravity: np.ndarray | None = None,
                       slip_axes: np.ndarray | None = None, Qprime: np.ndarray | None = None,
                       enhanced: bool = False, assess: bool = False, propagate: bool = False,
                       warm_contact: bool = True, every: int = 1,
                       tipover_margin: float = -math.inf,
                       liftoff_threshold: float = math.inf,
                       feedback: FeedbackLaw | None = None,
                       solver: int = GENERIC) -> PredictOptions:
    """:class:`PredictOptions` with each field of the one type the compiled loops take (a
    Python int where a float is expected would compile a second specialization). Callers
    validate values (:func:`wmr_model.kinematics.api.prepare_batch`); absent arrays are zeros."""
    if integrator not in (EULER, RK4):
        raise ValueError(f"integrator: must be EULER ({EULER}) or RK4 ({RK4}), got {integrator}")
    if every < 1:
        raise ValueError(f"every: must be >= 1, got {every}")
    return PredictOptions(
        np.ascontiguousarray(known, dtype=np.bool_), float(dt), float(sigma), int(integrator),
        bool(enhanced), bool(assess), bool(propagate), bool(warm_contact), int(every),
        float(tipover_margin), float(liftoff_threshold),
        np.ascontiguousarray(I_frame, dtype=float),
        np.zeros(3) if gravity is None else np.ascontiguousarray(gravity, dtype=float),
        np.zeros((4, 3)) if slip_axes is None else np.ascontiguousarray(slip_axes, dtype=float),
        np.zeros((6, 6)) if Qprime is None else np.ascontiguousarray(Qprime, dtype=float),
        no_feedback() if feedback is None else feedback, int(solver))


def simulation_options(known: np.ndarray, dt: float, sigma: float, integrator: int, nf: int,
                       warm_contact: bool = True, solver: int = GENERIC) -> PredictOptions:
    """:class:`PredictOptions` of a kinematic simulation: enhanced kinematics, stability and
    covariance off."""
    return prediction_options(known, dt, sigma, integrator, I_frame=np.zeros((nf, 6, 6)),
                              warm_contact=warm_contact, solver=solver)


@njit
def predict_trajectory(m, t, d, o, x, y):
    """Motion prediction over T steps (Figure 2.6 loop), kinematic or enhanced, Euler or RK4.

    The one simulation loop of the package; a kinematic simulation is this loop with the
    enhanced-kinematics, stability and covariance options off (:func:`simulation_options`).
    Model ``m``, terrain ``t``, a fresh workspace ``d`` (:func:`~wmr_model.kinematics.data
    .kernel_data` for ``o.known``), options ``o`` (:class:`PredictOptions`), inputs ``x``
    (:class:`PredictInputs`) and outputs ``y`` (:class:`PredictOutputs`).

    (Euler without the per-step extras, :func:`takes_euler_loop`, runs its specialization
    :func:`euler_trajectory` instead, bit for bit the same.)

    Each step: the joint-space velocity, plain kinematics (2.38) or enhanced (2.44)-(2.52),
    with the process noise ``x.body_noise`` (Monte Carlo samples, or none) added to the body
    twist after the solve (:func:`_step_velocity`); the stability margin and flags; the
    sample writes; the covariance step (3.22)-(3.24) from ``x.P0``; then Euler (2.39) or RK4
    (:func:`_advance`), loop closures projected and measured roll and pitch imposed
    (estimation context, §2.2.5, :func:`impose_roll_pitch`; yaw, position and joints kept).
    Known body angular velocity is part of ``o.known`` / ``x.qdot_cmd``. With a closed-loop
    law (``o.feedback``, :mod:`wmr_model.kinematics.feedback`) the actuated entries of each
    step's commands are its rates at the state at the start of the step (held over the RK4
    stages, like the commands).

    Output stride ``o.every`` (k >= 1): the outputs hold samples only, states t = 0, k, 2k, ...
    and always the final state T (S = ceil(T / k) + 1 rows in the state outputs) and the steps
    t = 0, k, 2k, ... < T (S - 1 rows in the per-step outputs); k = 1 writes everything. The
    computation is the same for every k (only the writes are skipped). ``y.flags`` (S,) uint8,
    when not empty: for each sample the OR over the states since the previous sample (the
    sample's own state for the first) of :data:`TIPOVER_RISK` (stability margin below
    ``o.tipover_margin``, when ``enhanced or assess``) and :data:`WHEEL_LIFTOFF` (some wheel's
    contact height error above ``o.liftoff_threshold``; wheels only: a track patch clear of
    the terrain is normal, e.g. upper flippers), so no flagged state is lost between samples.
    """
    nq = x.q0.shape[0]
    nsteps = x.qdot_cmd.shape[0]
    stats = o.enhanced or o.assess
    s = E.BodySlip(o.I_frame, o.gravity, x.slip_p, o.slip_axes, o.enhanced)
    P = x.P0.copy()
    q = x.q0.copy()
    imposed = x.attitude.shape[0] > 0
    if imposed:
        impose_roll_pitch(q, x.attitude[0, 0], x.attitude[0, 1])
    qdot = d.qdot
    qn = np.empty(nq)
    ks = (np.empty(nq), np.empty(nq), np.empty(nq), np.empty(nq))  # RK4 stage derivatives
    qs = np.empty(nq)
    qd_s = np.empty(nq - 1)
    fl = 0
    margin = np.nan
    control = o.feedback.kind != 0
    cmd = np.zeros(x.qdot_cmd.shape[1])  # a closed-loop step's commands
    u = np.empty(o.feedback.actuated_v.shape[0])
    # steps t < nsteps run 1 (Euler) or 4 (RK4) stages; t = nsteps is the final state (contact
    # height error and stability only)
    for step in range(nsteps + 1):
        final = step == nsteps
        nstages = 4 if o.integrator == RK4 and not final else 1
        # the step's commands (the final state keeps the last step's); a closed-loop law reads
        # the state at the start of the step
        qc = x.qdot_cmd[nsteps - 1 if final else step]
        if control:
            if not final:
                feedback_command(o.feedback, x.feedback.target[step], x.feedback.a[step],
                                 x.feedback.b[step], q, qc, u, cmd)
            qc = cmd
        for stage in range(nstages):
            qv = q
            qd = qdot
            if stage > 0:  # RK4 stage states
                _stage_state(q, ks[stage - 1], 0.5 * o.dt if stage < 3 else o.dt, qs)
                qv = qs
                qd = qd_s
            _step_velocity(m, t, d, o, s, x, step, stage, qv, qd, qc)
            if stage == 0:
                margin = np.nan
                if stats:
                    margin = E.stability_margin(d.T_world, d.T_contact, d.cg, d.f_cg,
                                                d.margin_ws)
                if final:
                    break
                fl = _state_outputs(m, o, d, y, step, q, qdot, margin, P, fl)
            if nstages > 1:
                state_derivative(qv, qd, ks[stage])
        if final:
            break
        _advance(o, q, qdot, ks, qn)
        q, qn = qn, q  # the new state (no copy)
        if m.loop_closure.shape[0] > 0:
            project_loop_closures(m.parent, m.jtype, m.axis, m.T0, m.loop_closure, ~o.known, q,
                                  d.T_world)
        if imposed:
            impose_roll_pitch(q, x.attitude[step + 1, 0], x.attitude[step + 1, 1])
    _record_final(m, o, d, y, nsteps, q, margin, P, fl)


@njit(refcount=False)
def takes_euler_loop(m, o, x):
    """True when :func:`euler_trajectory` runs a trajectory instead of
    :func:`predict_trajectory`: the Euler integrator, and none of a closed-loop law, process
    noise, imposed attitude or loop closures."""
    return (o.integrator == EULER and o.feedback.kind == 0 and x.body_noise.shape[0] == 0
            and x.attitude.shape[0] == 0 and m.loop_closure.shape[0] == 0)


@njit
def euler_trajectory(m, t, d, o, x, y):
    """:func:`predict_trajectory` specialized to the Euler integrator without a closed-loop
    law, process noise, imposed attitude or loop closures (:func:`takes_euler_loop`): the
    kinematic simulation and the planner's candidates. Each step: the joint-space velocity,
    plain (2.38) or enhanced (2.44)-(2.52); the stability margin and flags; the sample
    writes; the covariance step (3.22)-(3.24); the Euler step (2.39).

    The same kernels in the same order with the same arguments, so every output is bit for
    bit that of :func:`predict_trajectory` (``test/core/test_prediction_speedups.py``). It
    exists for speed alone: as its own compiled function, without the stage loop and the
    branches of the other options, the step's kernels are laid out for this path, 7-8 % less
    per step of a kinematic simulation and ~5 % per candidate-step of the planner's batch
    (README, "Kinematic step"); the general loop stays the reference.
    """
    nsteps = x.qdot_cmd.shape[0]
    stats = o.enhanced or o.assess
    s = E.BodySlip(o.I_frame, o.gravity, x.slip_p, o.slip_axes, o.enhanced)
    P = x.P0.copy()
    q = x.q0.copy()
    qn = np.empty(q.shape[0])
    qdot = d.qdot
    fl = 0
    margin = np.nan
    for step in range(nsteps + 1):
        final = step == nsteps
        tc = nsteps - 1 if final else step  # the final state keeps the last step's commands
        if stats:
            E.enhanced_joint_space_velocity(m, t, d, q, o.known, x.qdot_cmd[tc], o.sigma,
                                            x.vc_xy[tc], qdot, s, o.solver)
            margin = E.stability_margin(d.T_world, d.T_contact, d.cg, d.f_cg, d.margin_ws)
        else:
            joint_space_velocity(m, t, d, q, o.known, x.qdot_cmd[tc], o.sigma, x.vc_xy[tc],
                                 qdot, o.solver)
        if final:
            break
        fl = _state_outputs(m, o, d, y, step, q, qdot, margin, P, fl)
        integrate_euler(q, qdot, o.dt, qn)
        q, qn = qn, q  # the new state (no copy)
    _record_final(m, o, d, y, nsteps, q, margin, P, fl)


@njit(refcount=False)
def _state_outputs(m, o, d, y, step, q, qdot, margin, P, fl):
    """What the loops do with state ``step`` (not the final one) once its velocity ``qdot`` and
    ``margin`` are known: its flags OR-ed into ``fl``; at a sample (``step`` a multiple of
    ``o.every``) the writes (:func:`_record_sample`) and the flags since the last sample;
    then the covariance step (3.22)-(3.24) on ``P`` (error_dynamics + propagate_covariance,
    structure used). Returns the flags carried to the next sample."""
    has_flags = y.flags.shape[0] > 0
    if has_flags:
        fl |= _state_flags(margin, d.dz, m.wheel_frame.shape[0], o.tipover_margin,
                           o.liftoff_threshold)
    if step % o.every == 0:  # sample: state t and step t
        _record_sample(o, d, y, step // o.every, q, qdot, margin, P)
        if has_flags:
            y.flags[step // o.every] = fl
            fl = 0
    if o.propagate:
        propagate_pose_covariance(P, d.T_world[0, :3, :3], qdot[3:6], o.Qprime, o.dt, P,
                                  d.cov_ws)
    return fl


@njit(refcount=False)
def _stage_state(q, k, h, qs):
    """RK4 stage state ``qs = q + h k`` with its quaternion rescaled to unit length, keeping
    its sign (:func:`wmr_model.kinematics.integrate.rescale_quaternion`)."""
    for i in range(q.shape[0]):  # q + h k without a temporary (the same operations)
        qs[i] = q[i] + h * k[i]
    rescale_quaternion(qs)


@njit(refcount=False)
def _step_velocity(m, t, d, o, s, x, step, stage, q, qdot, qc):
    """Joint-space velocity ``qdot`` (nv,) at ``q`` for step ``step`` with the commanded
    entries ``qc`` (nv,) (the final state reuses the last step's): plain kinematics (2.38), or
    enhanced (2.44)-(2.52) when ``o.enhanced`` or, at the step's first stage, ``o.assess``;
    then the step's process noise added to the body twist (none in the final state)."""
    nsteps = x.qdot_cmd.shape[0]
    final = step == nsteps
    tc = nsteps - 1 if final else step
    if o.enhanced or (o.assess and stage == 0):
        E.enhanced_joint_space_velocity(m, t, d, q, o.known, qc, o.sigma, x.vc_xy[tc], qdot, s,
                                        o.solver)
    else:
        joint_space_velocity(m, t, d, q, o.known, qc, o.sigma, x.vc_xy[tc], qdot, o.solver)
    if x.body_noise.shape[0] > 0 and not final:
        noise = x.body_noise[step]
        for j in range(noise.shape[0]):
            qdot[j] += noise[j]


@njit(refcount=False)
def _record_sample(o, d, y, i, q, qdot, margin, P):
    """Write sample ``i`` of the outputs ``y``: state ``q``, the step's ``qdot`` and the
    workspace's contact errors and speeds, slip and ``margin`` (when ``enhanced or assess``),
    pose covariance ``P`` (when ``propagate``)."""
    _put(y.q_traj, i, q)
    _put(y.dz_traj, i, d.dz)
    _put(y.qdot_traj, i, qdot)
    contact_velocity_norms(d.A, qdot, d.dz.shape[0], y.vc_norm[i])
    if o.enhanced or o.assess:
        _put(y.slip_traj, i, d.v_b_slip)
        _put_matrix(y.vc_slip_traj, i, d.vc_slip)
        y.margin_traj[i] = margin
    if o.propagate:
        _put_matrix(y.P_traj, i, P)


@njit(refcount=False)
def _put(out, i, a):
    """``out[i] = a`` for a vector ``a``, element by element (no temporary: refcount-free)."""
    for j in range(a.shape[0]):
        out[i, j] = a[j]


@njit(refcount=False)
def _put_matrix(out, i, a):
    """``out[i] = a`` for a matrix ``a``, element by element."""
    for j in range(a.shape[0]):
        for k in range(a.shape[1]):
            out[i, j, k] = a[j, k]


@njit(refcount=False)
def _advance(o, q, qdot, ks, qn):
    """The next state ``qn`` from ``q``: Euler (2.39) with ``qdot``, or RK4 from the stage
    derivatives ``ks`` (quaternion renormalized)."""
    if o.integrator == EULER:
        integrate_euler(q, qdot, o.dt, qn)
    else:
        k1, k2, k3, k4 = ks
        h = o.dt / 6.0
        for i in range(q.shape[0]):  # q + h (k1 + 2 k2 + 2 k3 + k4), same order, no temporary
            qn[i] = q[i] + h * (k1[i] + 2.0 * k2[i] + 2.0 * k3[i] + k4[i])
        normalize_state(qn)


@njit
def _record_final(m, o, d, y, nsteps, q, margin, P, fl):
    """The final state T, always the last sample; its flags OR those since the last sample."""
    i = (nsteps + o.every - 1) // o.every
    y.q_traj[i] = q
    y.dz_traj[i] = d.dz
    if o.enhanced or o.assess:
        y.margin_traj[i] = margin
    if o.propagate:
        y.P_traj[i] = P
    if y.flags.shape[0] > 0:
        y.flags[i] = fl | _state_flags(margin, d.dz, m.wheel_frame.shape[0], o.tipover_margin,
                                       o.liftoff_threshold)


@njit(refcount=False)
def _state_flags(margin, dz, nwheel, tipover_margin, liftoff_threshold):
    """Flag bits of one state (:mod:`wmr_model.prediction.predict`): 1 when the stability
    margin is below ``tipover_margin`` (never for NaN), 4 when one of the first ``nwheel`` contact
    height errors ``dz`` exceeds ``liftoff_threshold``."""
    out = 0
    if margin < tipover_margin:
        out |= TIPOVER_RISK
    for k in range(nwheel):
        if dz[k] > liftoff_threshold:
            out |= WHEEL_LIFTOFF
            break
    return out


# Candidates per parallel chunk, at least: below 2 * PARALLEL_MIN_CHUNK candidates the batch
# runs on one thread (starting threads costs more than it saves).
PARALLEL_MIN_CHUNK = 4


@njit
def _row(a, n):
    """Candidate ``n``'s slice of a batched input whose leading axis is N, or 1 (shared)."""
    return a[n] if a.shape[0] > 1 else a[0]


@njit
def _candidate(X, Y, n):
    """Candidate ``n``'s inputs and outputs of the batched records ``X``, ``Y``."""
    fb = FeedbackInputs(_row(X.feedback.target, n), _row(X.feedback.a, n),
                        _row(X.feedback.b, n))
    x = PredictInputs(X.q0[n], X.qdot_cmd[n], _row(X.vc_xy, n), _row(X.slip_p, n),
                      _row(X.body_noise, n), _row(X.P0, n), _row(X.attitude, n), fb)
    y = PredictOutputs(Y.q_traj[n], Y.qdot_traj[n], Y.vc_norm[n], Y.dz_traj[n], Y.slip_traj[n],
                       Y.vc_slip_traj[n], Y.margin_traj[n], Y.P_traj[n], Y.flags[n])
    return x, y


@njit(nogil=True)
def predict_range(lo, hi, m, t, o, X, Y):
    """:func:`predict_trajectory` for candidates ``lo..hi-1`` of a batch, one after another,
    each with its own fresh workspace; without the GIL, so that :func:`wmr_model._jit
    .run_ranges` runs several ranges at once.

    ``X`` (:class:`PredictInputs`), ``Y`` (:class:`PredictOutputs`) batched: leading N in
    ``q0``, ``qdot_cmd`` and every output (``flags`` (N, S) included); leading N, or 1 for a
    value shared by all candidates, in ``vc_xy``, ``slip_p``, ``body_noise`` (N or 1, T or 0,
    6), ``P0`` (N or 1, 6, 6), ``attitude`` (N or 1, T+1 or 0, 2). The options ``o`` are
    shared. Each candidate is independent (own workspace; the reduced tree of the folded body
    inertia, computed once per range, is only read), so the result does not depend on the
    thread count or the ranges. Where :func:`takes_euler_loop` says so a candidate runs
    :func:`euler_trajectory`, else :func:`predict_trajectory`.
    """
    fold = o.enhanced or o.assess
    if fold:  # the reduced tree of the body composite inertia: once, shared (read only)
        tree = fold_spinning_leaves(m.parent, m.jtype, m.axis, m.T0, o.I_frame)
    else:
        tree = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.empty((0, 6, 6)))
    for n in range(lo, hi):
        ews = E.folded_workspace_of(*tree) if fold else E.enhanced_workspace()
        d = kernel_data_with(m, o.known, ews, o.warm_contact, False)
        x, y = _candidate(X, Y, n)
        if takes_euler_loop(m, o, x):
            euler_trajectory(m, t, d, o, x, y)
        else:
            predict_trajectory(m, t, d, o, x, y)


@njit
def simulate_unconstrained(m, t, q0, body_velocity, joint_rates, free, dt, max_iter, tol, out):
    """The conventional baseline of §2.5.1: unconstrained motion, then terrain fitting.

    Each step integrates the *nominal* body velocity ``body_velocity`` (T, 6) ``[w; v]`` in body
    coordinates (what the controller assumes on flat ground) and the joint rates
    ``joint_rates`` (T, nj), then re-fits the ``free`` coordinates (z, roll, pitch, passive
    joints) to the terrain with :func:`initialize_terrain_contact` (at most ``max_iter``
    iterations, tolerance ``tol``). ``out`` = ``(q_traj (T+1, nq), vc_norm (T, nc), dz_traj
    (T+1, nc))``: ``vc_norm`` reports the contact point speeds implied by the resulting motion
    (finite-difference joint-space velocity through the wheel Jacobians at the start of the
    step).
    """
    q_traj, vc_norm, dz_traj = out
    nf = m.parent.shape[0]
    nc = m.wheel_frame.shape[0] + m.track_frame.shape[0]  # contacts: wheels, track patches
    nv = nf + 5
    nq = nf + 6
    none_known = np.zeros(nv, dtype=np.bool_)
    d = kernel_data(m, none_known, np.zeros((0, 6, 6)), False, False, True)
    qdot = d.qdot
    qdot_fd = np.empty(nv)
    zeros_xy = np.zeros((nc, 2))
    q = q0.copy()
    qn = np.empty(nq)
    qfit = np.empty(nq)
    q_traj[0] = q
    for step in range(body_velocity.shape[0]):
        # wheel Jacobians at the start of the step (for the implied contact speeds)
        joint_space_velocity(m, t, d, q, none_known, qdot, 0.0, zeros_xy, qdot)
        dz_traj[step] = d.dz
        qdot[0:6] = body_velocity[step]
        qdot[6:] = joint_rates[step]
        integrate_euler(q, qdot, dt, qn)
        initialize_terrain_contact(m, t, d, qn, free, max_iter, tol, qfit)
        # finite-difference joint-space velocity q -> qfit (body rates in body coordinates)
        _qdot_between(q, qfit, dt, qdot_fd)
        contact_velocity_norms(d.A, qdot_fd, nc, vc_norm[step])
        q[:] = qfit
        q_traj[step + 1] = q
    dz_traj[body_velocity.shape[0]] = d.dz


@njit
def impose_roll_pitch(q, roll, pitch):
    """Replace the attitude of ``q`` (nq,) in place by measured roll and pitch, keeping yaw.

    Estimation context (§2.2.5, Appendix A: attitude and yaw kept distinct): yaw from (A.10),
    the quaternion rebuilt from (roll, pitch, yaw) (A.9). Position and joints are unchanged.
    """
    yaw = euler_from_quat(q[0:4])[2]
    q[0:4] = quat_from_euler(roll, pitch, yaw)


@njit
def _qdot_between(q0, q1, dt, out):
    """Constant joint-space velocity taking q0 to q1 in dt (inverse of :func:`integrate_euler`)."""
    conj = q0[0:4].copy()
    conj[1:] = -conj[1:]
    d = quat_mul(conj, q1[0:4])
    if d[0] < 0.0:
        d = -d
    s = np.sqrt(d[1] * d[1] + d[2] * d[2] + d[3] * d[3])
    if s < 1e-12:
        out[0:3] = 2.0 * d[1:4] / dt
    else:
        ang = 2.0 * np.arctan2(s, d[0])
        out[0:3] = d[1:4] / s * ang / dt
    out[3:6] = quat_to_rot(q0[0:4]).T @ ((q1[4:7] - q0[4:7]) / dt)
    out[6:] = (q1[7:] - q0[7:]) / dt
