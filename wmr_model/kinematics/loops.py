"""Compiled simulation loops: kinematic prediction (§2.2.6) and the unconstrained baseline (§2.5.1).

Each loop runs a whole trajectory inside numba; the batch versions run N trajectories over both
cores (``prange``). They compose the per-step kernels of :mod:`.kernels`, the enhanced-kinematics
kernels of :mod:`wmr_model.kinematics.enhanced` and the covariance step of
:mod:`wmr_model.kinematics.uncertainty`, and contain no physics of their own.
:func:`predict_trajectory` is the one prediction loop; :func:`simulate_trajectory` is it with the
enhanced, stability and covariance options off.

Wheeled and tracked vehicles run through the same loops: "wheel" sizes ``nw`` in the per-contact
arrays below (``vc_xy``, ``vc_norm``, ``dz_traj``, ``vc_slip_traj``) count all contacts, nc =
wheels followed by track patches (:mod:`wmr_model.vehicles.tracks`); for wheeled vehicles nc = nw.
"""

from __future__ import annotations

import numpy as np

# Module import (not ``from``): wmr_model.kinematics.enhanced imports this package's kernels, so
# when it is imported first it is only partially initialized here; numba resolves E.* at compile
# time.
import wmr_model.kinematics.enhanced as E
from wmr_model._jit import njit, prange
from wmr_model.kinematics.kernels import (
    CONTACT_WS_WIDTH,
    contact_velocity_norms,
    initialize_terrain_contact,
    integrate_euler,
    joint_space_velocity,
    loop_closure_rows,
    normalize_state,
    project_loop_closures,
    rescale_quaternion,
    solve_workspace,
    state_derivative,
)
from wmr_model.kinematics.uncertainty import covariance_workspace, propagate_pose_covariance
from wmr_model.spatial import euler_from_quat, quat_from_euler, quat_mul, quat_to_rot

EULER = 0
RK4 = 1

# Flag bits of a predicted state (the values of wmr_model.prediction.predict's TIPOVER_RISK,
# WHEEL_LIFTOFF).
TIPOVER_RISK = 1
WHEEL_LIFTOFF = 4


@njit
def predict_trajectory(parent, jtype, axis, T0, wheel_frame, wheel_radius, A_joint, joint_offset,
                       loop_closure, track_frame, track_drive, track_path, track_act, tkind,
                       tparams, tgrid, q0, known, qdot_cmd, vc_xy, dt, sigma, integrator, I_frame,
                       gravity, slip_p, slip_axes, enhanced, assess, body_noise, Qprime, P0,
                       propagate, q_traj, qdot_traj, vc_norm, dz_traj, slip_traj, vc_slip_traj,
                       margin_traj, P_traj, attitude, warm_contact, every=1, flags=None,
                       tipover_margin=-np.inf, liftoff_threshold=np.inf):
    """Motion prediction over T steps (Figure 2.6 loop), kinematic or enhanced, Euler or RK4.

    The one simulation loop of the package; :func:`simulate_trajectory` is this loop with the
    enhanced-kinematics, stability and covariance options off.

    Parameters (beyond the model/terrain arrays): ``q0`` (nq,); ``known`` (nv,) bool;
    ``qdot_cmd`` (T, nv) known joint-space velocity entries per step (others ignored);
    ``vc_xy`` (T, nw, 2) contact slip velocities per step (zeros for no-slip); ``dt`` [s];
    ``sigma`` Baumgarte gain [1/s] (2.35); ``integrator`` EULER or RK4.

    Enhanced kinematics and stability (:mod:`wmr_model.kinematics.enhanced`): ``I_frame`` (nf, 6, 6)
    per-frame spatial inertias, ``gravity`` (3,) world gravity [m/s^2], ``slip_p`` (6,) p1..p6,
    ``slip_axes`` (4, 3); ``enhanced`` adds body-level slip (2.44)-(2.52) in every velocity
    solve (each RK4 stage too); ``assess`` (implied by ``enhanced``) computes f_cg and the
    stability margin.

    Uncertainty (:mod:`wmr_model.kinematics.uncertainty`): ``body_noise`` (T, 6) added to the body
    twist each step (or (0, 6) for none); with ``propagate`` the pose covariance starts at ``P0``
    (6, 6) and follows (3.22)-(3.24) with spectral density ``Qprime`` (6, 6).

    Outputs: ``q_traj`` (T+1, nq), ``qdot_traj`` (T, nv) joint-space velocity integrated in
    each step (Euler: exactly; RK4: first stage), ``vc_norm`` (T, nw) contact point speeds
    |v_c| at the start of each step, ``dz_traj`` (T+1, nw) contact height errors. When
    ``enhanced or assess``: ``slip_traj`` (T, 6) body slip (2.50), ``vc_slip_traj`` (T, nw, 2)
    contact slip velocities used (2.52), ``margin_traj`` (T+1,) stability margin [m]. When
    ``propagate``: ``P_traj`` (T+1, 6, 6). Unrequested outputs may have a zero-length first axis.

    Measured inputs (estimation context, §2.2.5): ``attitude`` (T+1, 2) roll, pitch [rad]
    imposed on the state at the start and after every step (:func:`impose_roll_pitch`; yaw,
    position and joints kept), or (0, 2) for none. Known body angular velocity is part of
    ``known`` / ``qdot_cmd``.

    ``warm_contact``: warm-start collision detection from the previous step's contact angles
    (:func:`wmr_model.kinematics.kernels.wheel_contact`); False runs the cold fan search every
    call (reference for tests).

    Output stride ``every`` (k >= 1): the outputs hold samples only, states t = 0, k, 2k, ...
    and always the final state T (S = ceil(T / k) + 1 rows in the state outputs ``q_traj``,
    ``dz_traj``, ``margin_traj``, ``P_traj``) and the steps t = 0, k, 2k, ... < T (S - 1 rows
    in the per-step outputs); k = 1 writes everything, as described above. The computation is
    the same for every k (only the writes are skipped). ``flags`` (S,) uint8, when given: for
    each sample the OR over the states since the previous sample (the sample's own state for
    the first) of :data:`TIPOVER_RISK` (stability margin below ``tipover_margin``, when
    ``enhanced or assess``) and :data:`WHEEL_LIFTOFF` (some wheel's contact height error above
    ``liftoff_threshold``; wheels only: a track patch clear of the terrain is normal, e.g. upper
    flippers), so no flagged state is lost between samples.
    """
    nf = parent.shape[0]
    nw = wheel_frame.shape[0] + track_frame.shape[0]  # contacts nc: wheels, track patches
    nv = nf + 5
    nq = nf + 6
    m = 3 * nw + A_joint.shape[0] + loop_closure_rows(loop_closure)
    T_world = np.empty((nf, 4, 4))
    T_contact = np.empty((nw, 4, 4))
    dz = np.empty(nw)
    ang = np.empty(nw)
    A = np.empty((m, nv))
    v = np.empty(m)
    qdot = np.empty(nv)
    Ic = np.empty((nf, 6, 6))
    f_cg = np.zeros(6)
    c = np.zeros(3)
    v_b_slip = np.zeros(6)
    vc_slip = np.zeros((nw, 2))
    P = P0.copy()
    no_noise = np.zeros(0)
    stats = enhanced or assess
    contact_ws = np.zeros((wheel_frame.shape[0] if warm_contact else 0, CONTACT_WS_WIDTH))
    # per-trajectory scratch of the enhanced, stability and covariance kernels (no allocation
    # per step); the enhanced one with the wheels' inertias folded into their parents
    if stats:
        enhanced_ws = E.folded_enhanced_workspace(parent, jtype, axis, T0, I_frame)
    else:
        enhanced_ws = E.enhanced_workspace()
    margin_ws = E.margin_workspace(nw)
    cov_ws = covariance_workspace()
    solve_ws = solve_workspace(m, known, False)  # residual norms unused here
    imposed = attitude.shape[0] > 0
    q = q0.copy()
    if imposed:
        impose_roll_pitch(q, attitude[0, 0], attitude[0, 1])
    qn = np.empty(nq)
    k1 = np.empty(nq)
    k2 = np.empty(nq)
    k3 = np.empty(nq)
    k4 = np.empty(nq)
    qs = np.empty(nq)
    qd_s = np.empty(nv)
    nsteps = qdot_cmd.shape[0]
    has_noise = body_noise.shape[0] > 0
    has_flags = flags is not None
    nwheel = wheel_frame.shape[0]
    fl = 0
    # One velocity call site (calling through a helper with ~45 array arguments cost about
    # 0.5 us per step in reference counting, issue 10; for the same reason the enhanced kernel
    # is called without its scratch-allocating wrapper, 0.3 us): steps t < nsteps run 1 (Euler)
    # or 4 (RK4) stages; t = nsteps is the final state (contact height error and stability
    # only).
    for t in range(nsteps + 1):
        final = t == nsteps
        tc = nsteps - 1 if final else t
        noise = body_noise[t] if has_noise and not final else no_noise
        nstages = 4 if integrator == RK4 and not final else 1
        for stage in range(nstages):
            qv = q
            qd = qdot
            stage_assess = assess
            if stage > 0:  # RK4 stage states
                if stage == 1:
                    qs[:] = q + 0.5 * dt * k1
                elif stage == 2:
                    qs[:] = q + 0.5 * dt * k2
                else:
                    qs[:] = q + dt * k3
                rescale_quaternion(qs)
                qv = qs
                qd = qd_s
                stage_assess = False
            # joint-space velocity: plain kinematics (2.38) or enhanced (2.44)-(2.52); process
            # noise (Monte Carlo samples, or none) added to the body twist after the solve
            if enhanced or stage_assess:
                E._enhanced_joint_space_velocity(
                    parent, jtype, axis, T0, wheel_frame, wheel_radius, A_joint, joint_offset,
                    loop_closure, track_frame, track_drive, track_path, track_act, tkind, tparams,
                    tgrid, qv, known, qdot_cmd[tc], sigma, vc_xy[tc], I_frame, gravity, slip_p,
                    slip_axes, enhanced, T_world, T_contact, dz, ang, A, v, qd, Ic, f_cg, c,
                    v_b_slip, vc_slip, contact_ws, enhanced_ws, solve_ws)
            else:
                joint_space_velocity(parent, jtype, axis, T0, wheel_frame, wheel_radius, A_joint,
                                     joint_offset, loop_closure, track_frame, track_drive,
                                     track_path, track_act, tkind, tparams, tgrid, qv, known,
                                     qdot_cmd[tc], sigma, vc_xy[tc], T_world, T_contact, dz, ang,
                                     A, v, qd, contact_ws, solve_ws)
            for j in range(noise.shape[0]):
                qd[j] += noise[j]
            if stage == 0:
                margin = np.nan
                if stats:
                    margin = E.stability_margin(T_world, T_contact, c, f_cg, margin_ws)
                if final:
                    break
                if has_flags:
                    fl |= _state_flags(margin, dz, nwheel, tipover_margin, liftoff_threshold)
                if t % every == 0:  # sample: state t and step t
                    s = t // every
                    q_traj[s] = q
                    dz_traj[s] = dz
                    qdot_traj[s] = qdot
                    contact_velocity_norms(A, qdot, nw, vc_norm[s])
                    if stats:
                        slip_traj[s] = v_b_slip
                        vc_slip_traj[s] = vc_slip
                        margin_traj[s] = margin
                    if propagate:
                        P_traj[s] = P
                    if has_flags:
                        flags[s] = fl
                        fl = 0
                if propagate:  # error_dynamics + propagate_covariance, structure used
                    propagate_pose_covariance(P, T_world[0, :3, :3], qdot[3:6], Qprime, dt, P,
                                              cov_ws)
                if nstages > 1:
                    state_derivative(q, qdot, k1)
            elif stage == 1:
                state_derivative(qs, qd_s, k2)
            elif stage == 2:
                state_derivative(qs, qd_s, k3)
            else:
                state_derivative(qs, qd_s, k4)
        if final:
            break
        if integrator == EULER:
            integrate_euler(q, qdot, dt, qn)
        else:
            qn[:] = q + (dt / 6.0) * (k1 + 2.0 * k2 + 2.0 * k3 + k4)
            normalize_state(qn)
        q, qn = qn, q  # the new state (no copy)
        if loop_closure.shape[0] > 0:
            project_loop_closures(parent, jtype, axis, T0, loop_closure, ~known, q, T_world)
        if imposed:
            impose_roll_pitch(q, attitude[t + 1, 0], attitude[t + 1, 1])
    # the final state, always the last sample
    s = (nsteps + every - 1) // every
    q_traj[s] = q
    dz_traj[s] = dz
    if stats:
        margin_traj[s] = margin
    if propagate:
        P_traj[s] = P
    if has_flags:
        flags[s] = fl | _state_flags(margin, dz, nwheel, tipover_margin, liftoff_threshold)


@njit
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
# runs on one thread (starting the pool costs more than it saves).
PARALLEL_MIN_CHUNK = 4


@njit
def _row(a, n):
    """Candidate ``n``'s slice of a batched input whose leading axis is N, or 1 (shared)."""
    return a[n] if a.shape[0] > 1 else a[0]


@njit
def predict_range(lo, hi, parent, jtype, axis, T0, wheel_frame, wheel_radius, A_joint,
                  joint_offset, loop_closure, track_frame, track_drive, track_path, track_act,
                  tkind, tparams, tgrid, q0, known, qdot_cmd, vc_xy, dt, sigma, integrator,
                  I_frame, gravity, slip_p, slip_axes, enhanced, assess, body_noise, Qprime, P0,
                  propagate, q_traj, qdot_traj, vc_norm, dz_traj, slip_traj, vc_slip_traj,
                  margin_traj, P_traj, attitude, warm_contact, every, flags, tipover_margin,
                  liftoff_threshold):
    """:func:`predict_trajectory` for candidates ``lo..hi-1`` of a batch, one after another
    (arguments as :func:`predict_batch`)."""
    for n in range(lo, hi):
        predict_trajectory(parent, jtype, axis, T0, wheel_frame, wheel_radius, A_joint,
                           joint_offset, loop_closure, track_frame, track_drive, track_path,
                           track_act, tkind, tparams, tgrid, q0[n], known, qdot_cmd[n],
                           _row(vc_xy, n), dt, sigma, integrator, I_frame, gravity,
                           _row(slip_p, n), slip_axes, enhanced, assess, _row(body_noise, n),
                           Qprime, _row(P0, n), propagate, q_traj[n], qdot_traj[n], vc_norm[n],
                           dz_traj[n], slip_traj[n], vc_slip_traj[n], margin_traj[n], P_traj[n],
                           _row(attitude, n), warm_contact, every, flags[n], tipover_margin,
                           liftoff_threshold)


@njit(parallel=True)
def predict_batch(parent, jtype, axis, T0, wheel_frame, wheel_radius, A_joint, joint_offset,
                  loop_closure, track_frame, track_drive, track_path, track_act, tkind, tparams,
                  tgrid, q0, known, qdot_cmd, vc_xy, dt, sigma, integrator, I_frame, gravity,
                  slip_p, slip_axes, enhanced, assess, body_noise, Qprime, P0, propagate, q_traj,
                  qdot_traj, vc_norm, dz_traj, slip_traj, vc_slip_traj, margin_traj, P_traj,
                  attitude, warm_contact, every, flags, tipover_margin, liftoff_threshold,
                  chunks):
    """:func:`predict_trajectory` for N trajectories in parallel (``prange`` over ``chunks``
    contiguous ranges of candidates, each run by :func:`predict_range`).

    Batched (leading N) arrays: ``q0``, ``qdot_cmd`` and every output (``flags`` (N, S)
    included). Leading N, or 1 for a value shared by all candidates: ``vc_xy``, ``slip_p``,
    ``body_noise`` (N or 1, T or 0, 6), ``P0`` (N or 1, 6, 6), ``attitude`` (N or 1, T+1 or 0,
    2). Shared: the model and terrain arrays, ``known``, ``I_frame``, ``gravity``,
    ``slip_axes``, ``Qprime``, the output stride ``every`` and the flag thresholds. Each
    candidate is independent (own workspace), so the result does not depend on the thread
    count or chunking. Candidates run in chunks rather than one per ``prange`` iteration so
    that the trajectory loop is called from ordinary compiled code: called per candidate from
    the parallel region's body it ran about four times slower (measured, Zoë enhanced +
    covariance, N = 1: 8.2 ms against 2.0 ms).
    """
    N = q0.shape[0]
    for c in prange(chunks):
        predict_range(c * N // chunks, (c + 1) * N // chunks, parent, jtype, axis, T0,
                      wheel_frame, wheel_radius, A_joint, joint_offset, loop_closure,
                      track_frame, track_drive, track_path, track_act, tkind, tparams, tgrid, q0,
                      known, qdot_cmd, vc_xy, dt, sigma, integrator, I_frame, gravity, slip_p,
                      slip_axes, enhanced, assess, body_noise, Qprime, P0, propagate, q_traj,
                      qdot_traj, vc_norm, dz_traj, slip_traj, vc_slip_traj, margin_traj, P_traj,
                      attitude, warm_contact, every, flags, tipover_margin, liftoff_threshold)


@njit
def simulate_trajectory(parent, jtype, axis, T0, wheel_frame, wheel_radius, A_joint, joint_offset,
                        loop_closure, track_frame, track_drive, track_path, track_act, tkind,
                        tparams, tgrid, q0, known, qdot_cmd, vc_xy, dt, sigma, integrator, q_traj,
                        qdot_traj, vc_norm, dz_traj, warm_contact=True):
    """Kinematic motion prediction over T steps (Figure 2.6 loop), Euler (2.39) or RK4.

    :func:`predict_trajectory` with enhanced kinematics, stability and covariance off.
    Parameters (beyond the model/terrain arrays): ``q0`` (nq,); ``known`` (nv,) bool;
    ``qdot_cmd`` (T, nv) known joint-space velocity entries per step (others ignored);
    ``vc_xy`` (T, nw, 2) contact slip velocities per step (zeros for no-slip); ``dt`` [s];
    ``sigma`` Baumgarte gain [1/s] (2.35); ``integrator`` EULER or RK4.
    Outputs: ``q_traj`` (T+1, nq), ``qdot_traj`` (T, nv), ``vc_norm`` (T, nw) contact point
    speeds |v_c| at the start of each step, ``dz_traj`` (T+1, nw) contact height errors.
    """
    nf = parent.shape[0]
    nw = wheel_frame.shape[0] + track_frame.shape[0]  # contacts nc: wheels, track patches
    predict_trajectory(parent, jtype, axis, T0, wheel_frame, wheel_radius, A_joint, joint_offset,
                       loop_closure, track_frame, track_drive, track_path, track_act, tkind,
                       tparams, tgrid, q0, known, qdot_cmd, vc_xy, dt, sigma, integrator,
                       np.zeros((nf, 6, 6)), np.zeros(3), np.zeros(6), np.zeros((4, 3)), False,
                       False, np.zeros((0, 6)), np.zeros((6, 6)), np.zeros((6, 6)), False, q_traj,
                       qdot_traj, vc_norm, dz_traj, np.zeros((0, 6)), np.zeros((0, nw, 2)),
                       np.zeros(0), np.zeros((0, 6, 6)), np.zeros((0, 2)), warm_contact)


@njit(parallel=True)
def simulate_batch(parent, jtype, axis, T0, wheel_frame, wheel_radius, A_joint, joint_offset,
                   loop_closure, track_frame, track_drive, track_path, track_act, tkind, tparams,
                   tgrid, q0, known, qdot_cmd, vc_xy, dt, sigma, integrator, q_traj, qdot_traj,
                   vc_norm, dz_traj, warm_contact=True):
    """:func:`simulate_trajectory` for N trajectories in parallel.

    Batched shapes: ``q0`` (N, nq), ``qdot_cmd`` (N, T, nv), ``vc_xy`` (N, T, nw, 2); outputs
    (N, T+1, nq), (N, T, nv), (N, T, nw), (N, T+1, nw).
    """
    for n in prange(q0.shape[0]):
        simulate_trajectory(parent, jtype, axis, T0, wheel_frame, wheel_radius, A_joint,
                            joint_offset, loop_closure, track_frame, track_drive, track_path,
                            track_act, tkind, tparams, tgrid, q0[n], known, qdot_cmd[n], vc_xy[n],
                            dt, sigma, integrator, q_traj[n], qdot_traj[n], vc_norm[n], dz_traj[n],
                            warm_contact)


@njit
def simulate_unconstrained(parent, jtype, axis, T0, wheel_frame, wheel_radius, A_joint,
                           joint_offset, loop_closure, track_frame, track_drive, track_path,
                           track_act, tkind, tparams, tgrid, q0, body_velocity, joint_rates, free,
                           dt, max_iter, tol, q_traj, vc_norm, dz_traj):
    """The conventional baseline of §2.5.1: unconstrained motion, then terrain fitting.

    Each step integrates the *nominal* body velocity ``body_velocity`` (T, 6) ``[w; v]`` in body
    coordinates (what the controller assumes on flat ground) and the joint rates
    ``joint_rates`` (T, nj), then re-fits the ``free`` coordinates (z, roll, pitch, passive
    joints) to the terrain with :func:`initialize_terrain_contact`. ``vc_norm`` (T, nw) reports
    the contact point speeds implied by the resulting motion (finite-difference joint-space
    velocity through the wheel Jacobians at the start of the step).
    """
    nf = parent.shape[0]
    nw = wheel_frame.shape[0] + track_frame.shape[0]  # contacts nc: wheels, track patches
    nv = nf + 5
    nq = nf + 6
    m = 3 * nw + A_joint.shape[0] + loop_closure_rows(loop_closure)
    T_world = np.empty((nf, 4, 4))
    T_contact = np.empty((nw, 4, 4))
    dz = np.empty(nw)
    ang = np.empty(nw)
    A = np.empty((m, nv))
    v = np.empty(m)
    qdot = np.empty(nv)
    qdot_fd = np.empty(nv)
    none_known = np.zeros(nv, dtype=np.bool_)
    zeros_xy = np.zeros((nw, 2))
    solve_ws = solve_workspace(m, none_known)
    q = q0.copy()
    qn = np.empty(nq)
    qfit = np.empty(nq)
    q_traj[0] = q
    for t in range(body_velocity.shape[0]):
        # wheel Jacobians at the start of the step (for the implied contact speeds)
        joint_space_velocity(parent, jtype, axis, T0, wheel_frame, wheel_radius, A_joint,
                             joint_offset, loop_closure, track_frame, track_drive, track_path,
                             track_act, tkind, tparams, tgrid, q, none_known, qdot, 0.0, zeros_xy,
                             T_world, T_contact, dz, ang, A, v, qdot, None, solve_ws)
        dz_traj[t] = dz
        qdot[0:6] = body_velocity[t]
        qdot[6:] = joint_rates[t]
        integrate_euler(q, qdot, dt, qn)
        initialize_terrain_contact(parent, jtype, axis, T0, wheel_frame, wheel_radius, A_joint,
                                   joint_offset, loop_closure, track_frame, track_drive, track_path,
                                   track_act, tkind, tparams, tgrid, qn, free, max_iter, tol,
                                   T_world, T_contact, dz, ang, qfit)
        # finite-difference joint-space velocity q -> qfit (body rates in body coordinates)
        _qdot_between(q, qfit, dt, qdot_fd)
        contact_velocity_norms(A, qdot_fd, nw, vc_norm[t])
        q[:] = qfit
        q_traj[t + 1] = q
    dz_traj[body_velocity.shape[0]] = dz


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
