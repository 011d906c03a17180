"""Dynamic simulation loop (Seegmiller 2014, §2.4.4, Figure 2.6) and its Python API.

Per step: forward kinematics and collision detection (Alg. 1, 2.8-2.9), joint-space inertia and
bias force (Alg. 3-4, or 2.89), constraints (2.55) and their independent subset (2.66)-(2.68),
force-balance optimization (2.75)-(2.84), then symplectic Euler (2.85)-(2.86). The per-step
constants of the force balance use Cholesky factors of M and C and substitution instead of
explicit inverses (as §2.4.4 recommends), in a workspace allocated once per run
(:func:`step_workspace`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from wmr_model._jit import njit, num_threads, prange
from wmr_model.contact.models import contact_setup
from wmr_model.dynamics.actuators import ACTUATOR_KINDS, IDEAL
from wmr_model.dynamics.api import gravity_of
from wmr_model.dynamics.constraints import (
    assemble_constraints,
    independent_rows_into,
    rows_workspace,
)
from wmr_model.dynamics.crba import crba, crba_into, crba_workspace
from wmr_model.dynamics.force_balance import (
    force_balance,
    input_maps,
    remove_component,
    workspace,
)
from wmr_model.dynamics.integrate import symplectic_euler
from wmr_model.dynamics.rnea import bias_force_fused, bias_force_into, rnea_workspace
from wmr_model.dynamics.track_contact import (
    assemble_track_rows,
    check_friction_directions,
    contact_drive,
    icr_contact_frames,
    icr_map,
    icr_point,
    track_shares,
)
from wmr_model.errors import ParameterError, check_shape
from wmr_model.kinematics.kernels import (
    CONTACT_FAN_HALF_SPAN,
    CONTACT_FAN_POINTS,
    CONTACT_WS_WIDTH,
    cholesky_factor,
    cholesky_solve,
    contact_detection,
    holonomic_constraints,
    loop_closure_rows,
    project_loop_closures,
    wheel_contact,
)
from wmr_model.kinematics.loops import _row
from wmr_model.terrain.surface import Terrain
from wmr_model.vehicles.inertia import model_frame_inertias
from wmr_model.vehicles.model import VehicleModel

__all__ = ["DynamicsTrajectory", "dynamics_step", "step_workspace", "constraint_cache",
           "simulate_loop", "simulate_range", "simulate_batch", "loop_arguments",
           "simulate_dynamics", "simulate_dynamics_batch", "DYNAMICS_CHUNKS_PER_THREAD",
           "track_arguments",
           "joint_spring_dampers", "CONTACT_MARGIN", "LOOP_STIFFNESS", "LOOP_DAMPING",
           "LOOP_MODELS", "DEFAULT_LOOP_MODEL", "COLLISION_SEARCHES", "DEFAULT_COLLISION",
           "FAN_REFRESH_ANGLE", "warm_wheel_contact"]

# Contacts (wheels, track patches) whose contact height error exceeds this [m] are out of
# contact and their constraint rows are dropped for the step (§2.4.3); within it a wheel in the
# air is kept and the force balance finds the velocities at which its (zero) model force is met.
CONTACT_MARGIN = 0.05
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


@njit
def step_workspace(nf, nv, nc, nh, nwarm):
    """Per-run scratch of :func:`dynamics_step` (allocated once by :func:`simulate_loop`).

    ``(c_hol (nh,), J_hol (nh, nv), active, forced, indep (nc,) bool, cols (nv,) bool,
    Lm (nv, nv), Minv_tc (nv,), fbuf, ibuf, fb, crba_ws, rnea_ws, rows_ws, contact_ws,
    fan_frame)``; ``fbuf``/``ibuf`` are flat buffers from which the arrays sized by the step's
    number of independent rows nI are cut as C-contiguous views; ``fb`` is the force balance's
    :func:`~wmr_model.dynamics.force_balance.workspace`; then the scratch of the CRBA, the bias
    force and the independent rows. ``contact_ws`` (nwarm, CONTACT_WS_WIDTH) is the warm-start
    collision workspace of :func:`~wmr_model.kinematics.kernels.wheel_contact` and
    ``fan_frame`` (nwarm, 7, 3) that of :func:`warm_wheel_contact`; ``nwarm`` = 0 keeps the
    cold search every step.
    """
    nfl = 7 * nc * nv + 4 * nc * nc + 4 * nc + nv
    return (np.empty(nh), np.empty((nh, nv)), np.empty(nc, dtype=np.bool_),
            np.empty(nc, dtype=np.bool_), np.empty(nc, dtype=np.bool_),
            np.empty(nv, dtype=np.bool_), np.empty((nv, nv)), np.empty(nv), np.empty(nfl),
            np.empty(4 * nc, dtype=np.int64), workspace(nv, nc), crba_workspace(nf),
            rnea_workspace(nf, nv), rows_workspace(nc, nv),
            np.zeros((nwarm, CONTACT_WS_WIDTH)), np.zeros((nwarm, 7, 3)))


# Warm-started collision in the dynamics (:func:`warm_wheel_contact`): the bracket search of
# kernels.wheel_contact follows the contact angle by at most WARM_CONTACT_MAX_WALK brackets of
# a quarter fan spacing per step and re-runs the fan only after the wheel centre has travelled
# a wheel radius. When the wheel frame turns, the arc's height profile changes shape (tilting
# the wheel plane moves the lowest point along the arc, a pitch shifts it by the same angle), so
# the minimum the bracket follows can stop being the global one. The fan is re-run once the
# wheel frame has turned by more than one fan spacing (10 deg: CONTACT_FAN_HALF_SPAN / 8) since
# its last fan: the change the fan's own sampling resolves, as the travel limit is for position.
FAN_REFRESH_ANGLE = CONTACT_FAN_HALF_SPAN / (CONTACT_FAN_POINTS // 2)
_FAN_REFRESH_TRACE = 1.0 + 2.0 * math.cos(FAN_REFRESH_ANGLE)


@njit
def warm_wheel_contact(parent, T0, wheel_frame, wheel_radius, tkind, tparams, tgrid, T_world,
                       T_contact, dz, contact_angle, contact_ws, fan_frame):
    """Wheel collision detection warm-started from the previous step (kernels.wheel_contact
    with ``contact_ws``), forcing the full fan search of a wheel whose frame (without spin) has
    rotated by more than :data:`FAN_REFRESH_ANGLE` since its last fan. ``fan_frame`` (nw, 7, 3):
    rows 0-2 the wheel's rotation (world) at its last fan, rows 3-5 scratch, row 6 the centre
    the kernel recorded before this call (a changed centre means the kernel ran the fan itself:
    bracket lost, or a wheel radius travelled). The angle follows from ``trace(R_fan^T R) =
    1 + 2 cos(angle)``."""
    nw = wheel_frame.shape[0]
    for k in range(nw):
        i = wheel_frame[k]
        p = parent[i]
        tr = 0.0
        for r in range(3):  # R = R_parent T0[i][:3, :3]
            for c in range(3):
                x = (T_world[p, r, 0] * T0[i, 0, c] + T_world[p, r, 1] * T0[i, 1, c]
                     + T_world[p, r, 2] * T0[i, 2, c])
                tr += fan_frame[k, r, c] * x
                fan_frame[k, 3 + r, c] = x
        if contact_ws[k, 0] > 0.0 and tr < _FAN_REFRESH_TRACE:
            contact_ws[k, 0] = 0.0
        for r in range(3):
            fan_frame[k, 6, r] = contact_ws[k, 1 + r]
    wheel_contact(parent, T0, wheel_frame, wheel_radius, tkind, tparams, tgrid, T_world,
                  T_contact, dz, contact_angle, contact_ws)
    for k in range(nw):
        if (fan_frame[k, 6, 0] != contact_ws[k, 1] or fan_frame[k, 6, 1] != contact_ws[k, 2]
                or fan_frame[k, 6, 2] != contact_ws[k, 3]):
            for r in range(3):
                for c in range(3):
                    fan_frame[k, r, c] = fan_frame[k, 3 + r, c]


@njit
def _cut(buf, at, n, m):
    """C-contiguous (n, m) view of ``buf`` from offset ``at``; returns (view, next offset)."""
    return buf[at:at + n * m].reshape((n, m)), at + n * m


@njit
def constraint_cache(M, c, AI, qdot, dt, Lm, Minv_tc, W, Cm, Lc, Cinv, G, d_const, qd0, lam0):
    """Per-step constants of the force balance (2.79)-(2.83), (2.87)-(2.88), in place.

    With ``M = Lm Lm^T`` (Cholesky; M is symmetric positive definite) and ``W = Lm^{-1}
    A_I^T``: ``C = W^T W = Lc Lc^T``, ``M^{-1} A_I^T = Lm^{-T} W``, ``Cinv = C^{-1}``,
    ``G = M^{-1} A_I^T C^{-1}``, ``d_const = -A_I M^{-1}(tau - c)`` with tau = 0,
    ``qd0 = qdot + dt M^{-1}(tau - c) - G (A_I qdot - dt d_const)`` and ``lam0 = C^{-1}
    (d_const - A_I qdot / dt)``. ``W`` (nv, nI) ends holding ``M^{-1} A_I^T``; ``d_const``
    ends holding ``d_const - A_I qdot / dt``. C falls back to LU if its factor fails to
    round-off.

    Every product sums over its inner index in ascending order from 0, as a plain dot product
    would; the loops are ordered so that the innermost runs over independent outputs rather
    than along one running sum, so the compiler can overlap them (same sums, same results).
    """
    nI, nv = AI.shape
    if not cholesky_factor(M, Lm, 0.0):
        raise ValueError("joint-space inertia M is not positive definite (check link masses)")
    for j in range(nv):
        Minv_tc[j] = -c[j]
    cholesky_solve(Lm, Minv_tc, Minv_tc)
    for i in range(nv):  # W = Lm^{-1} A_I^T, row i: (A_I[:, i] - sum_k<i Lm[i, k] W[k]) / Lm[i, i]
        for a in range(nI):
            W[i, a] = AI[a, i]
        for k in range(i):
            lik = Lm[i, k]
            for a in range(nI):
                W[i, a] -= lik * W[k, a]
        lii = Lm[i, i]
        for a in range(nI):
            W[i, a] /= lii
    for a in range(nI):
        for b in range(a + 1):
            Cm[a, b] = 0.0
    for i in range(nv):  # C = W^T W, lower triangle, then mirrored
        for a in range(nI):
            wia = W[i, a]
            for b in range(a + 1):
                Cm[a, b] += wia * W[i, b]
    for a in range(nI):
        for b in range(a):
            Cm[b, a] = Cm[a, b]
    for i in range(nv - 1, -1, -1):  # W <- Lm^{-T} W = M^{-1} A_I^T
        for k in range(i + 1, nv):
            lki = Lm[k, i]
            for a in range(nI):
                W[i, a] -= lki * W[k, a]
        lii = Lm[i, i]
        for a in range(nI):
            W[i, a] /= lii
    if cholesky_factor(Cm, Lc, 0.0):
        X = Cm  # C is not needed once factored: X = Lc^{-1} (lower triangular), by rows
        for i in range(nI):
            for j in range(i):
                X[i, j] = 0.0
            for k in range(i):
                lik = Lc[i, k]
                for j in range(k + 1):
                    X[i, j] -= lik * X[k, j]
            lii = Lc[i, i]
            for j in range(i):
                X[i, j] /= lii
            X[i, i] = 1.0 / lii
        for a in range(nI):  # C^{-1} = X^T X
            for b in range(a + 1):
                Cinv[a, b] = 0.0
        for k in range(nI):
            for a in range(k + 1):
                xka = X[k, a]
                for b in range(a + 1):
                    Cinv[a, b] += xka * X[k, b]
        for a in range(nI):
            for b in range(a):
                Cinv[b, a] = Cinv[a, b]
    elif nI > 0:
        Cinv[:, :] = np.linalg.inv(Cm)
    d_const[:] = 0.0
    lam0[:] = 0.0
    for j in range(nv):
        mj = Minv_tc[j]
        qj = qdot[j]
        for a in range(nI):
            d_const[a] += AI[a, j] * mj
            lam0[a] += AI[a, j] * qj
    # lam0 holds r = A_I qdot - dt d_const for a moment, then d_const <- d_const - A_I qdot/dt
    for a in range(nI):
        d_const[a] = -d_const[a]
        lam0[a] = lam0[a] - dt * d_const[a]
    G[:, :] = 0.0
    for j in range(nv):  # G = (M^{-1} A_I^T) C^{-1}
        for a in range(nI):
            w = W[j, a]
            for b in range(nI):
                G[j, b] += w * Cinv[a, b]
    qd0[:] = 0.0
    for a in range(nI):
        ra = lam0[a]
        for j in range(nv):
            qd0[j] += G[j, a] * ra
    for j in range(nv):
        qd0[j] = qdot[j] + dt * Minv_tc[j] - qd0[j]
    for a in range(nI):
        d_const[a] = -lam0[a] / dt
    lam0[:] = 0.0
    for b in range(nI):
        db = d_const[b]
        for a in range(nI):
            lam0[a] += Cinv[a, b] * db


@njit
def _contacts(parent, T0, wheel_frame, wheel_radius, tkind, tparams, tgrid, u, T_world,
              T_contact, dz, contact_angle, trk):
    """Collision detection of wheels and track patches; ICR axes of the patches if asked."""
    track_frame, track_path, icr_m, icr_on = trk[0], trk[2], trk[7], trk[8]
    contact_detection(parent, T0, wheel_frame, wheel_radius, track_frame, track_path, tkind,
                      tparams, tgrid, T_world, T_contact, dz, contact_angle)
    if icr_on and track_frame.shape[0] > 0:
        straight, xi, yi = icr_point(icr_m, u)
        if not straight:
            icr_contact_frames(T_world, T_contact, wheel_frame.shape[0], track_frame.shape[0],
                               xi, yi)


@njit
def _rows(parent, jtype, axis, wheel_frame, J_hol, act_joints, T_world, T_contact,
          contact_angle, trk, A):
    """Constraint matrix (2.55): wheels, track patches, actuators, holonomic rows."""
    assemble_constraints(parent, jtype, axis, wheel_frame, J_hol, act_joints, T_world,
                         T_contact, A)
    track_frame = trk[0]
    if track_frame.shape[0] > 0:
        assemble_track_rows(parent, jtype, axis, track_frame, trk[1], trk[2], T_world,
                            T_contact, contact_angle, wheel_frame.shape[0], trk[5], trk[8], A)


@njit
def dynamics_step(parent, jtype, axis, T0, wheel_frame, wheel_radius, A_joint, joint_offset,
                  loop_closure, I_frame, gravity, tkind, tparams, tgrid, ckinds, cparams, ctables,
                  caxes, act_joints, akinds, aparams, jK, jD, q, qdot, u, dt, v_prev, fused,
                  single_step, max_iter, tol, T_world, T_contact, dz, contact_angle, Ic, M, c, A,
                  fmodel, q_next, qdot_next, loop_sigma, ws, trk):
    """One step of the constrained dynamics with force balance; returns (iterations, L).

    ``v_prev`` (nrows,) holds the previous step's constraint-row velocities (warm start,
    §2.4.4) and is overwritten with this step's ``A qdot'[i+1]``. ``loop_sigma`` > 0 makes the
    loop closures ideal: their rows' velocity is prescribed as ``-loop_sigma c`` (Baumgarte,
    (2.36)) and their force is free (a Lagrange multiplier of (2.65), like an ideal actuator's,
    §2.4.4); 0 leaves them to the spring-dampers ``jK``, ``jD``. ``ws``: :func:`step_workspace`.
    ``trk``: the track patches' data, ``(track_frame, track_drive, track_path (ntp, ...),
    track_of (ntp,), nt, contact_radius (nc,), contact_joint (nc,), icr_map (3, na), icr,
    share (nc,), dz_model (nc,))`` (:func:`track_arguments`; the last two are scratch of
    :func:`~wmr_model.dynamics.track_contact.track_shares`); contacts are the nw wheels, then
    the ntp patches (:mod:`wmr_model.dynamics.track_contact`). T_contact, dz, contact_angle:
    (nc, ...).
    """
    nw = wheel_frame.shape[0]
    ncon = nw + trk[0].shape[0]  # contacts: wheels, then track patches
    na = act_joints.shape[0]
    nc, nv = A.shape
    (c_hol, J_hol, active, forced, indep, cols, Lm, Minv_tc, fbuf, ibuf, fbw, crba_ws, rnea_ws,
     rows_ws, contact_ws, fan_frame) = ws
    crba_into(parent, jtype, axis, T0, I_frame, q, T_world, Ic, M, crba_ws)
    if ncon > nw:
        _contacts(parent, T0, wheel_frame, wheel_radius, tkind, tparams, tgrid, u, T_world,
                  T_contact, dz, contact_angle, trk)
    elif contact_ws.shape[0] > 0:  # wheels only, warm-started
        warm_wheel_contact(parent, T0, wheel_frame, wheel_radius, tkind, tparams, tgrid,
                           T_world, T_contact, dz, contact_angle, contact_ws, fan_frame)
    else:  # wheels only: the call of the wheeled dynamics as such (no wrapper in the hot path)
        wheel_contact(parent, T0, wheel_frame, wheel_radius, tkind, tparams, tgrid, T_world,
                      T_contact, dz, contact_angle)
    if fused:
        bias_force_fused(np.ascontiguousarray(Ic[0]), gravity, q, qdot, c)
    else:
        bias_force_into(parent, jtype, axis, I_frame, gravity, qdot, T_world, crba_ws[0],
                        crba_ws[1], c, rnea_ws)
    holonomic_constraints(parent, jtype, axis, A_joint, joint_offset, loop_closure, q, T_world,
                          c_hol, J_hol)
    assemble_constraints(parent, jtype, axis, wheel_frame, J_hol, act_joints, T_world,
                         T_contact, A)
    if ncon > nw:
        assemble_track_rows(parent, jtype, axis, trk[0], trk[1], trk[2], T_world, T_contact,
                            contact_angle, nw, trk[5], trk[8], A)
    share = trk[9]  # ones for wheels
    dz_model = dz
    if ncon > nw:
        dz_model = trk[10]
        track_shares(trk[0], trk[2], trk[3], trk[4], tkind, tparams, tgrid, T_world, nw, dz,
                     share, dz_model)
    active[:] = True
    forced[:] = False
    cols[:] = True
    for k in range(ncon):
        if dz[k] > CONTACT_MARGIN:
            active[3 * k] = False
            active[3 * k + 1] = False
            active[3 * k + 2] = False
    for a in range(na):
        if akinds[a] == IDEAL:
            forced[3 * ncon + a] = True
            cols[6 + act_joints[a]] = False
    r_loop = 3 * ncon + na + A_joint.shape[0]  # first loop-closure row
    if loop_sigma > 0.0:
        for r in range(r_loop, nc):
            forced[r] = True
    nI = independent_rows_into(A, active, cols, forced, indep, rows_ws)
    ctx_i = ibuf[:3 * nI].reshape((3, nI))
    ctx_m = ibuf[3 * nc:4 * nc]
    at = 0
    AI, at = _cut(fbuf, at, nI, nv)
    W, at = _cut(fbuf, at, nv, nI)
    Cm, at = _cut(fbuf, at, nI, nI)
    Lc, at = _cut(fbuf, at, nI, nI)
    Cinv, at = _cut(fbuf, at, nI, nI)
    G, at = _cut(fbuf, at, nv, nI)
    d_const = fbuf[at:at + nI]
    lam0 = fbuf[at + nI:at + 2 * nI]
    qd0 = fbuf[at + 2 * nI:at + 2 * nI + nv]
    at += 2 * nI + nv
    nx = 0
    a = 0
    for r in range(nc):
        if indep[r]:
            ctx_i[0, a] = r
            for j in range(nv):
                AI[a, j] = A[r, j]
            if forced[r]:
                ctx_i[2, a] = 1
                ctx_i[1, a] = r - 3 * ncon
            else:
                ctx_i[1, a] = 0
                ctx_i[2, a] = 0
                nx += 1
            a += 1
    x = fbuf[at:at + nx]
    Je, at = _cut(fbuf, at + nx, nv, nx)
    Je_lam, at = _cut(fbuf, at, nv, nx)
    Gx, at = _cut(fbuf, at, nv, nx)
    AG, at = _cut(fbuf, at, nc, nx)
    # prescribed velocities of the forced rows, indexed by row - 3 ncon: commands, then Baumgarte
    u_fix = fbuf[at:at + nc - 3 * ncon]
    at += nc - 3 * ncon
    for a in range(na):
        u_fix[a] = u[a]
    for rj in range(c_hol.shape[0]):
        u_fix[na + rj] = -loop_sigma * c_hol[rj]
    # orthonormal rows spanning the ideal loop-closure rows off the ideal actuators' columns
    nfix = 0
    for r in range(r_loop, nc):
        if indep[r] and forced[r]:
            nfix += 1
    at_fix = at
    Pfix, at = _cut(fbuf, at, nfix, nv)
    f = 0
    for r in range(r_loop, nc):
        if not (indep[r] and forced[r]):
            continue
        for j in range(nv):
            Pfix[f, j] = A[r, j] if cols[j] else 0.0
        for g in range(f):  # modified Gram-Schmidt
            remove_component(Pfix[g], Pfix[f])
        s = 0.0
        for j in range(nv):
            s += Pfix[f, j] * Pfix[f, j]
        if s > 0.0:  # a row on ideal-actuator columns only is covered by their zeroed e
            s = 1.0 / math.sqrt(s)
            for j in range(nv):
                Pfix[f, j] *= s
            f += 1
    Pfix, _ = _cut(fbuf, at_fix, f, nv)
    constraint_cache(M, c, AI, qdot, dt, Lm, Minv_tc, W, Cm, Lc, Cinv, G, d_const, qd0, lam0)
    input_maps(ctx_i, A, G, Cinv, dt, Je_lam, AG, Gx)
    ix = 0
    for a in range(nI):
        if ctx_i[2, a] == 0:
            x[ix] = v_prev[ctx_i[0, a]]
            ix += 1
    ctx_m[:] = 0
    # joint constraints and loop closures: spring-dampers (2.74) on the residual c_hol
    args = (ctx_i, active, ctx_m, A, G, Cinv, qd0, lam0, u_fix, dz_model, c_hol, trk[5], trk[6],
            share, ckinds, cparams, ctables, caxes, akinds, aparams, act_joints, jK, jD,
            dt, Je_lam, AG, Gx, Pfix)
    e = Minv_tc  # free after the cache: reused as the force-balance error (nv,)
    it, L = force_balance(x, args, max_iter, tol, single_step, e, Je, qdot_next, fmodel, fbw)
    for r in range(nc):
        s = 0.0
        for j in range(nv):
            s += A[r, j] * qdot_next[j]
        v_prev[r] = s
    symplectic_euler(q, qdot_next, dt, q_next)
    if loop_closure.shape[0] > 0:
        project_loop_closures(parent, jtype, axis, T0, loop_closure, cols, q_next, T_world)
    return it, L


@njit
def simulate_loop(parent, jtype, axis, T0, wheel_frame, wheel_radius, A_joint, joint_offset,
                  loop_closure, I_frame, gravity, tkind, tparams, tgrid, ckinds, cparams, ctables,
                  caxes, act_joints, akinds, aparams, jK, jD, q0, qdot0, U, dt, fused, single_step,
                  max_iter, tol, loop_sigma, warm_contact, Q, QD, IT, COST, FC, DZ, trk):
    """Compiled loop over ``U`` (T, na) commands: writes Q (T+1, nq), QD (T+1, nv), IT (T,),
    COST (T,), FC (T, ncon, 3) contact forces, DZ (T, ncon) contact height errors (ncon = nw
    wheels + ntp track patches). ``loop_sigma``, ``trk``: see :func:`dynamics_step`;
    ``warm_contact``: warm-started wheel collision (:func:`warm_wheel_contact`; wheeled
    vehicles only, tracked ones always search cold)."""
    nf = parent.shape[0]
    nw = wheel_frame.shape[0]
    ncon = nw + trk[0].shape[0]
    na = act_joints.shape[0]
    nc = 3 * ncon + na + A_joint.shape[0] + loop_closure_rows(loop_closure)
    nv = qdot0.shape[0]
    T_world = np.empty((nf, 4, 4))
    T_contact = np.empty((ncon, 4, 4))
    dz = np.empty(ncon)
    ang = np.empty(ncon)
    Ic = np.empty((nf, 6, 6))
    M = np.empty((nv, nv))
    c = np.empty(nv)
    A = np.empty((nc, nv))
    fmodel = np.zeros(nc)
    v_prev = np.empty(nc)
    nwarm = nw if warm_contact and ncon == nw else 0
    ws = step_workspace(nf, nv, nc, nc - 3 * ncon - na, nwarm)
    # warm start of the first step: the current constraint velocities
    from_q = np.ascontiguousarray(q0)
    Q[0] = from_q
    QD[0] = qdot0
    first = True
    for t in range(U.shape[0]):
        if first:
            crba(parent, jtype, axis, T0, I_frame, Q[t], T_world, Ic, M)
            _contacts(parent, T0, wheel_frame, wheel_radius, tkind, tparams, tgrid, U[t],
                      T_world, T_contact, dz, ang, trk)
            nh = nc - 3 * ncon - na
            c_hol = np.empty(nh)
            J_hol = np.empty((nh, nv))
            holonomic_constraints(parent, jtype, axis, A_joint, joint_offset, loop_closure,
                                  Q[t], T_world, c_hol, J_hol)
            _rows(parent, jtype, axis, wheel_frame, J_hol, act_joints, T_world, T_contact,
                  ang, trk, A)
            v_prev[:] = A @ QD[0]
            first = False
        it, L = dynamics_step(parent, jtype, axis, T0, wheel_frame, wheel_radius, A_joint,
                              joint_offset, loop_closure, I_frame, gravity, tkind, tparams, tgrid,
                              ckinds, cparams, ctables, caxes, act_joints, akinds, aparams, jK, jD,
                              Q[t], QD[t], U[t], dt, v_prev, fused, single_step, max_iter, tol,
                              T_world, T_contact, dz, ang, Ic, M, c, A, fmodel, Q[t + 1], QD[t + 1],
                              loop_sigma, ws, trk)
        IT[t] = it
        COST[t] = L
        for k in range(ncon):
            DZ[t, k] = dz[k]
            for r in range(3):
                FC[t, k, r] = fmodel[3 * k + r]


@njit
def _own_scratch(trk):
    """``trk`` with its own copies of the two track-share scratch arrays (entries 9, 10), so that
    trajectories run side by side do not write the same ones."""
    return (trk[0], trk[1], trk[2], trk[3], trk[4], trk[5], trk[6], trk[7], trk[8],
            trk[9].copy(), trk[10].copy())


@njit
def simulate_range(lo, hi, parent, jtype, axis, T0, wheel_frame, wheel_radius, A_joint,
                   joint_offset, loop_closure, I_frame, gravity, tkind, tparams, tgrid, ckinds,
                   cparams, ctables, caxes, act_joints, akinds, aparams, jK, jD, q0, qdot0, U, dt,
                   fused, single_step, max_iter, tol, loop_sigma, warm_contact, Q, QD, IT, COST,
                   FC, DZ, trk):
    """:func:`simulate_loop` for trajectories ``lo..hi-1`` of a batch, one after another.

    ``U`` (N, T, na) and the outputs carry a leading trajectory axis (``Q`` (N, T+1, nq), ``QD``
    (N, T+1, nv), ``IT``, ``COST`` (N, T), ``FC`` (N, T, ncon, 3), ``DZ`` (N, T, ncon));
    ``q0`` (N or 1, nq) and ``qdot0`` (N or 1, nv) have one row per trajectory or one shared.
    Each trajectory gets its own workspace, so it is bit for bit its run alone.
    """
    for n in range(lo, hi):
        simulate_loop(parent, jtype, axis, T0, wheel_frame, wheel_radius, A_joint, joint_offset,
                      loop_closure, I_frame, gravity, tkind, tparams, tgrid, ckinds, cparams,
                      ctables, caxes, act_joints, akinds, aparams, jK, jD, _row(q0, n),
                      _row(qdot0, n), U[n], dt, fused, single_step, max_iter, tol, loop_sigma,
                      warm_contact, Q[n], QD[n], IT[n], COST[n], FC[n], DZ[n], _own_scratch(trk))


@njit(parallel=True)
def simulate_batch(parent, jtype, axis, T0, wheel_frame, wheel_radius, A_joint, joint_offset,
                   loop_closure, I_frame, gravity, tkind, tparams, tgrid, ckinds, cparams,
                   ctables, caxes, act_joints, akinds, aparams, jK, jD, q0, qdot0, U, dt, fused,
                   single_step, max_iter, tol, loop_sigma, warm_contact, Q, QD, IT, COST, FC, DZ,
                   trk, chunks):
    """:func:`simulate_range` over ``chunks`` contiguous ranges of the N trajectories in
    parallel (``prange``; arguments as there). An exception inside the parallel region does
    not reach the caller as such (numba 0.68: a SystemError, or nothing): its chunk stops where
    it was raised, leaving the iteration counts ``IT`` of the rest of the chunk as the caller
    filled them (:func:`simulate_dynamics_batch` fills -1 and re-runs those trajectories
    alone, which raises the error)."""
    N = U.shape[0]
    for c in prange(chunks):
        simulate_range(c * N // chunks, (c + 1) * N // chunks, parent, jtype, axis, T0,
                       wheel_frame, wheel_radius, A_joint, joint_offset, loop_closure, I_frame,
                       gravity, tkind, tparams, tgrid, ckinds, cparams, ctables, caxes,
                       act_joints, akinds, aparams, jK, jD, q0, qdot0, U, dt, fused, single_step,
                       max_iter, tol, loop_sigma, warm_contact, Q, QD, IT, COST, FC, DZ, trk)


@dataclass
class DynamicsTrajectory:
    """Result of :func:`simulate_dynamics`.

    From :func:`simulate_dynamics_batch` every array but ``t`` has a leading trajectory axis
    (N, ...).

    Attributes:
        t: (T+1,) times [s]; q: (T+1, nq) states; qdot: (T+1, nv) joint-space velocities.
        iterations: (T,) Newton iterations of the force balance per step.
        cost: (T,) final force-balance cost L (2.77) per step [N^2].
        f_contact: (T, nc, 3) model contact forces on the wheels, then on the track patches
            (each patch's share of its track's force), contact coordinates [N].
        dz: (T, nc) contact height errors at the start of each step [m].
        contact_models: (nc,) contact model name per wheel / track patch.
    """

    t: np.ndarray
    q: np.ndarray
    qdot: np.ndarray
    iterations: np.ndarray
    cost: np.ndarray
    f_contact: np.ndarray
    dz: np.ndarray
    contact_models: tuple[str, ...]


def _actuators(model: VehicleModel, actuator: str | Mapping[str, str],
               actuator_params: Mapping[str, Any] | None) -> tuple[np.ndarray, np.ndarray]:
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


def track_arguments(model: VehicleModel, friction_directions: str = "belt",
                    steering_efficiency: float = 1.0, icr_x: float = 0.0) -> tuple:
    """The ``trk`` tuple of :func:`dynamics_step` for ``model`` (empty track arrays for a
    wheeled vehicle; see :mod:`wmr_model.dynamics.track_contact` for the ICR options)."""
    icr = check_friction_directions(friction_directions)
    radius, joint = contact_drive(model)
    na = len(model.actuated_joints)
    imap = icr_map(model, steering_efficiency, icr_x) if icr else np.zeros((3, max(na, 1)))
    return (np.ascontiguousarray(model.track_frame, dtype=np.int64),
            np.ascontiguousarray(model.track_drive, dtype=np.int64),
            np.ascontiguousarray(model.track_path, dtype=float),
            np.ascontiguousarray(model.track_of, dtype=np.int64),
            max(len(model.track_names), 1), radius, joint, np.ascontiguousarray(imap), icr,
            np.ones(model.nc), np.zeros(model.nc))


def check_dynamics_inputs(model: VehicleModel, q0: np.ndarray, qdot0: np.ndarray,
                          commands: np.ndarray, dt: float
                          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Shapes and step size shared by the DAE and the stiff ODE simulations.

    Returns contiguous ``q0`` (nq,), ``qdot0`` (nv,) and ``commands`` (T, na).
    """
    q0 = np.ascontiguousarray(q0, dtype=float)
    qdot0 = np.ascontiguousarray(qdot0, dtype=float)
    check_shape("q0", q0.shape, (model.nq,))
    check_shape("qdot0", qdot0.shape, (model.nv,))
    U = np.ascontiguousarray(commands, dtype=float)
    check_shape("commands", U.shape, (None, len(model.actuated_joints)))
    if not (math.isfinite(dt) and dt > 0):
        raise ParameterError(f"dt must be > 0 s, got {dt}")
    return q0, qdot0, U


def loop_arguments(model: VehicleModel, terrain: Terrain, dt: float, *,
                   contact_model: str | None = None,
                   contact_params: Mapping[str, Any] | None = None,
                   actuator: str | Mapping[str, str] = "ideal",
                   actuator_params: Mapping[str, Any] | None = None,
                   joint_stiffness: float | None = None, joint_damping: float | None = None,
                   fused_bias: bool = False, single_step: bool = False, max_iter: int = 30,
                   tol: float | None = None, loop_model: str | None = None,
                   friction_directions: str | None = None,
                   steering_efficiency: float | None = None,
                   collision: str | None = None) -> tuple[tuple, tuple[str, ...]]:
    """The state-independent arguments of :func:`simulate_loop` / :func:`dynamics_step` for
    :func:`simulate_dynamics` (keywords as there), and the contact model names.

    Returns ``(args, names)``: ``args[:23]`` precede ``q0, qdot0, U`` in :func:`simulate_loop`,
    ``args[23:30]`` are ``dt, fused, single_step, max_iter, tol, loop_sigma, warm_contact`` and
    ``args[30]`` is ``trk``.
    """
    collision = DEFAULT_COLLISION if collision is None else collision
    if collision not in COLLISION_SEARCHES:
        raise ParameterError(f"collision must be one of {list(COLLISION_SEARCHES)}, "
                             f"got {collision!r}")
    g = gravity_of(model)
    mg = model.total_mass * float(np.linalg.norm(g))
    cs = contact_setup(model, contact_model, contact_params, float(np.linalg.norm(g)))
    akinds, aparams = _actuators(model, actuator, actuator_params)
    jK, jD, offset = joint_spring_dampers(model, mg, joint_stiffness, joint_damping)
    loop_model = model.options.get("loop_model", DEFAULT_LOOP_MODEL) if loop_model is None \
        else loop_model
    if loop_model not in LOOP_MODELS:
        raise ParameterError(f"loop_model must be one of {list(LOOP_MODELS)}, got {loop_model!r}")
    loop_sigma = 0.0
    if loop_model == "ideal" and model.nlr > 0:
        loop_sigma = 1.0 / float(dt)
        jK[model.ncj:] = 0.0  # no spring-damper force: the multiplier carries the load
        jD[model.ncj:] = 0.0
    tol = 1e-6 * mg if tol is None else float(tol)
    fdir = model.options.get("friction_directions", "belt") if friction_directions is None \
        else friction_directions
    chi = model.options.get("steering_efficiency", 1.0) if steering_efficiency is None \
        else steering_efficiency
    trk = track_arguments(model, fdir, float(chi), float(model.options.get("icr_x", 0.0)))
    tk, tp, tg = terrain.kernel_args()
    args = (model.parent, model.joint_type, model.axis, model.T0, model.wheel_frame,
            model.wheel_radius, model.A_joint, offset, model.loop_closure,
            model_frame_inertias(model), g, tk, tp, tg, cs.kinds, cs.params, cs.tables,
            cs.axes, model.actuated_joints.astype(np.int64), akinds, aparams, jK, jD,
            float(dt), bool(fused_bias), bool(single_step), int(max_iter), tol, loop_sigma,
            collision == "warm", trk)
    return args, cs.names


def simulate_dynamics(model: VehicleModel, terrain: Terrain, q0: np.ndarray,
                      qdot0: np.ndarray, commands: np.ndarray, dt: float, *,
                      contact_model: str | None = None,
                      contact_params: Mapping[str, Any] | None = None,
                      actuator: str | Mapping[str, str] = "ideal",
                      actuator_params: Mapping[str, Any] | None = None,
                      joint_stiffness: float | None = None, joint_damping: float | None = None,
                      fused_bias: bool = False, single_step: bool = False, max_iter: int = 30,
                      tol: float | None = None, loop_model: str | None = None,
                      friction_directions: str | None = None,
                      steering_efficiency: float | None = None, collision: str | None = None
                      ) -> DynamicsTrajectory:
    """Simulate the constrained dynamics with force-balance optimization (§2.4).

    Args:
        q0: (nq,) initial state; qdot0: (nv,) initial joint-space velocity.
        commands: (T, na) commanded actuated-joint rates per step (model.actuated_joints
            order) [rad/s or m/s].
        dt: step size [s].
        contact_model, contact_params: override ``model.options`` (see
            :mod:`wmr_model.contact.models`).
        actuator: ``"ideal"``, ``"p"`` or ``"dc_motor"`` for all actuated joints, or a mapping
            joint name -> kind (missing: ideal); actuator_params: ``Kp``, ``f_max``,
            ``tau_stall``, ``w_noload``.
        joint_stiffness, joint_damping: spring-damper of the holonomic joint constraints (2.74)
            [N m/rad, N m s/rad]; default ``options`` or 10 m g and m g; a constraint's own
            sidecar ``stiffness``/``damping`` wins (:func:`joint_spring_dampers`).
        loop_model: ``"ideal"`` or ``"penalty"`` (default ``options["loop_model"]``, else
            :data:`DEFAULT_LOOP_MODEL`). Ideal loop closures are rows of A with their own
            Lagrange multipliers (2.65), velocity ``-c/dt`` (Baumgarte (2.36), sigma = 1/dt);
            penalty ones are stiff spring-dampers (:data:`LOOP_STIFFNESS`). Either way the
            position residual is projected away after each step.
        friction_directions: tracked vehicles: ``"belt"`` (default; contact axes along the
            belt) or ``"icr"`` (along the circles about the ICR of the commanded belt speeds,
            seed 003 §IV-D); default ``options["friction_directions"]``, else ``"belt"``.
        steering_efficiency: Martínez et al.'s chi in (0, 1] for ``"icr"`` (default
            ``options["steering_efficiency"]``, else 1); ``options["icr_x"]`` [m] places the
            ICR line along the body x axis (default 0). See
            :mod:`wmr_model.dynamics.track_contact`.
        fused_bias: use the fused-body bias force (2.89) instead of Algorithm 4.
        collision: wheel collision search, ``"cold"`` (default :data:`DEFAULT_COLLISION`:
            the full fan search every step) or ``"warm"`` (warm-started from the previous
            step, the fan re-run after a wheel radius of travel or :data:`FAN_REFRESH_ANGLE`
            of wheel rotation; ~2 us instead of ~6 us per step for Zoe, but at dt 0.2 the
            ramp-and-turn ends 0.13 m from dt 0.01 instead of 0.07 m, so not the default).
            Tracked vehicles always search cold.
        single_step: one Newton step per time step (§2.4.4).
        tol: force-balance tolerance on |e| [N]; default 1e-6 m g.
    """
    q0, qdot0, U = check_dynamics_inputs(model, q0, qdot0, commands, dt)
    args, names = loop_arguments(model, terrain, dt, contact_model=contact_model,
                                 contact_params=contact_params, actuator=actuator,
                                 actuator_params=actuator_params,
                                 joint_stiffness=joint_stiffness, joint_damping=joint_damping,
                                 fused_bias=fused_bias, single_step=single_step,
                                 max_iter=max_iter, tol=tol, loop_model=loop_model,
                                 friction_directions=friction_directions,
                                 steering_efficiency=steering_efficiency, collision=collision)
    run = _run_batch(model, args, names, q0[None], qdot0[None], U[None], dt)
    return DynamicsTrajectory(run.t, run.q[0], run.qdot[0], run.iterations[0], run.cost[0],
                              run.f_contact[0], run.dz[0], names)


#: Parallel chunks per thread of :func:`simulate_dynamics_batch`: more than one evens out
#: trajectories of unequal cost (Newton iterations vary); results do not depend on it.
DYNAMICS_CHUNKS_PER_THREAD = 2


def _run_batch(model: VehicleModel, args: tuple, names: tuple[str, ...], q0: np.ndarray,
               qdot0: np.ndarray, U: np.ndarray, dt: float) -> DynamicsTrajectory:
    """Run the compiled loops for ``U`` (N, T, na) from ``q0`` (N or 1, nq), ``qdot0`` (N or 1,
    nv): on one thread for a single trajectory, else in parallel chunks."""
    N, T = U.shape[0], U.shape[1]
    Q = np.empty((N, T + 1, model.nq))
    QD = np.empty((N, T + 1, model.nv))
    IT = np.full((N, T), -1, dtype=np.int64)
    COST = np.empty((N, T))
    FC = np.empty((N, T, model.nc, 3))
    DZ = np.empty((N, T, model.nc))
    a = args
    out = (Q, QD, IT, COST, FC, DZ)
    chunks = min(N, DYNAMICS_CHUNKS_PER_THREAD * num_threads())
    if chunks < 2:
        simulate_range(0, N, *a[:23], q0, qdot0, U, *a[23:30], *out, a[30])
    else:
        # An exception inside the parallel region stops its chunk and reaches us, depending
        # on numba, as a SystemError or not at all: the trajectories left unfinished
        # (IT still -1) are re-run alone, which raises the error itself.
        lost: SystemError | None = None
        try:
            simulate_batch(*a[:23], q0, qdot0, U, *a[23:30], *out, a[30], chunks)
        except SystemError as exc:
            lost = exc
        unfinished = np.flatnonzero(IT[:, -1] < 0) if T > 0 else np.zeros(0, dtype=int)
        for n in unfinished:
            simulate_range(int(n), int(n) + 1, *a[:23], q0, qdot0, U, *a[23:30], *out, a[30])
        if lost is not None and unfinished.size == 0:
            raise lost
    return DynamicsTrajectory(np.arange(T + 1) * dt, Q, QD, IT, COST, FC, DZ, names)


def simulate_dynamics_batch(model: VehicleModel, terrain: Terrain, q0: np.ndarray,
                            qdot0: np.ndarray, commands: np.ndarray, dt: float,
                            **options: Any) -> DynamicsTrajectory:
    """:func:`simulate_dynamics` for N command sequences at once, on all cores.

    Args:
        q0: (nq,) initial state shared by all trajectories, or (N, nq) one per trajectory.
        qdot0: (nv,) or (N, nv) initial joint-space velocities, likewise.
        commands: (N, T, na) commanded actuated-joint rates per trajectory and step.
        dt: step size [s]; options: the keywords of :func:`simulate_dynamics`.

    Returns a :class:`DynamicsTrajectory` whose arrays (but ``t``) have a leading N axis; each
    trajectory is bit for bit what :func:`simulate_dynamics` returns for it alone, whatever the
    number of threads (:func:`wmr_model._jit.set_num_threads`).
    """
    U = np.ascontiguousarray(commands, dtype=float)
    check_shape("commands", U.shape, (None, None, len(model.actuated_joints)))
    N = U.shape[0]
    if N == 0:
        raise ParameterError("commands: need at least one trajectory (N >= 1)")
    q0 = _batch_rows("q0", q0, N, model.nq)
    qdot0 = _batch_rows("qdot0", qdot0, N, model.nv)
    check_dynamics_inputs(model, q0[0], qdot0[0], U[0], dt)
    args, names = loop_arguments(model, terrain, dt, **options)
    return _run_batch(model, args, names, q0, qdot0, U, float(dt))


def _batch_rows(name: str, a: np.ndarray, n: int, width: int) -> np.ndarray:
    """``a`` (width,) or (n, width) as a C-contiguous (1 or n, width) array."""
    out = np.ascontiguousarray(a, dtype=float)
    if out.ndim == 1:
        check_shape(name, out.shape, (width,))
        return out[None]
    check_shape(name, out.shape, (n, width))
    return out
