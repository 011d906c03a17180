"""Dynamic simulation loop (Seegmiller 2014, §2.4.4, Figure 2.6) and its Python API.

Per step: forward kinematics and collision detection (Alg. 1, 2.8-2.9), joint-space inertia and
bias force (Alg. 3-4, or 2.89), constraints (2.55) and their independent subset (2.66)-(2.68),
force-balance optimization (2.75)-(2.84), then symplectic Euler (2.85)-(2.86). The per-step
constants of the force balance use Cholesky factors of M and C and substitution instead of
explicit inverses (as §2.4.4 recommends), in a workspace allocated once per run
(:func:`~wmr_model.dynamics.data.create_step_data`). The kernels read ``f(dm, t, d, ...)``: the
compiled model (:func:`~wmr_model.dynamics.model.compile_dynamics`), the terrain record and the
workspace.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from wmr_model._jit import njit, num_threads, run_ranges
from wmr_model.dynamics.actuators import IDEAL
from wmr_model.dynamics.constraints import assemble_constraints, independent_rows_into
from wmr_model.dynamics.crba import crba_into
from wmr_model.dynamics.data import StepData, create_step_data
from wmr_model.dynamics.force_balance import (
    BalanceArgs,
    ModelForces,
    StepCache,
    force_balance,
    input_maps,
    remove_component,
)
from wmr_model.dynamics.integrate import symplectic_euler
from wmr_model.dynamics.joint_acceleration import AccelArgs, joint_acceleration_balance
from wmr_model.dynamics.model import (
    COLLISION_SEARCHES,
    DEFAULT_COLLISION,
    DEFAULT_LOOP_MODEL,
    LOOP_DAMPING,
    LOOP_MODELS,
    LOOP_STIFFNESS,
    DynamicsModel,
    DynamicsOptions,
    compile_dynamics,
    joint_spring_dampers,
    kept_dynamics,
)
from wmr_model.dynamics.rnea import bias_force_fused, bias_force_into
from wmr_model.dynamics.track_contact import (
    assemble_track_rows,
    icr_contact_frames,
    icr_point,
    track_shares,
)
from wmr_model.errors import ParameterError, check_shape
from wmr_model.kinematics.constraints import holonomic_constraints, project_loop_closures
from wmr_model.kinematics.feedback import (
    Feedback,
    FeedbackInputs,
    check_feedback,
    feedback_rates,
    no_feedback,
    no_feedback_inputs,
)
from wmr_model.kinematics.solve import cholesky_factor, cholesky_solve
from wmr_model.kinematics.track_collision import contact_detection
from wmr_model.kinematics.wheel_collision import (
    CONTACT_FAN_HALF_SPAN,
    CONTACT_FAN_POINTS,
    wheel_contact,
    wheel_contact_into,
)
from wmr_model.terrain.surface import Terrain, TerrainArrays
from wmr_model.vehicles.model import VehicleModel

__all__ = ["DynamicsTrajectory", "Rollout", "dynamics_step", "constraint_cache",
           "constraint_inverse", "simulate_loop", "simulate_range",
           "simulate_dynamics", "simulate_dynamics_batch", "create_rollout",
           "DYNAMICS_CHUNKS_PER_THREAD", "CONTACT_MARGIN", "FAN_REFRESH_ANGLE",
           "warm_wheel_contact", "check_dynamics_inputs",
           # re-exported from .model and .data, where they are defined
           "DynamicsOptions", "DynamicsModel", "StepData", "compile_dynamics",
           "joint_spring_dampers", "LOOP_STIFFNESS", "LOOP_DAMPING", "LOOP_MODELS",
           "DEFAULT_LOOP_MODEL", "COLLISION_SEARCHES", "DEFAULT_COLLISION"]

# Contacts (wheels, track patches) whose contact height error exceeds this [m] are out of
# contact and their constraint rows are dropped for the step (§2.4.3); within it a wheel in the
# air is kept and the force balance finds the velocities at which its (zero) model force is met.
CONTACT_MARGIN = 0.05


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
def warm_wheel_contact(m, t, T_world, T_contact, dz, contact_angle, contact_ws, fan_frame):
    """Wheel collision detection warm-started from the previous step (kernels.wheel_contact
    with ``contact_ws``), forcing the full fan search of a wheel whose frame (without spin) has
    rotated by more than :data:`FAN_REFRESH_ANGLE` since its last fan. ``fan_frame`` (nw, 7, 3):
    rows 0-2 the wheel's rotation (world) at its last fan, rows 3-5 scratch, row 6 the centre
    the kernel recorded before this call (a changed centre means the kernel ran the fan itself:
    bracket lost, or a wheel radius travelled). The angle follows from ``trace(R_fan^T R) =
    1 + 2 cos(angle)``. ``m``: the :class:`~wmr_model.vehicles.model.KernelModel`, ``t``: the
    :class:`~wmr_model.terrain.surface.TerrainArrays`; the other arrays are (nw, ...)."""
    parent, T0, wheel_frame = m.parent, m.T0, m.wheel_frame
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
    wheel_contact(m, t, T_world, T_contact, dz, contact_angle, contact_ws)
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
def constraint_inverse(Lm, AI, W, Cm, Lc, Cinv):
    """``C^{-1}`` of (2.79) from the Cholesky factor ``Lm`` of M, and ``M^{-1} A_I^T``.

    With ``W = Lm^{-1} A_I^T``: ``C = A_I M^{-1} A_I^T = W^T W = Lc Lc^T`` (``Cm`` (nI, nI)
    holds C, then scratch), ``Cinv = C^{-1}`` (LU if the factor of C fails to round-off) and
    ``W`` (nv, nI) ends holding ``Lm^{-T} W = M^{-1} A_I^T``.
    """
    nI, nv = AI.shape
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


@njit
def constraint_cache(M, c, AI, qdot, dt, k):
    """Per-step constants of the force balance (2.79)-(2.83), (2.87)-(2.88), in place.

    ``k`` is a :class:`~wmr_model.dynamics.force_balance.StepCache` for ``AI`` (nI, nv). With
    ``M = Lm Lm^T`` (Cholesky; M is symmetric positive definite) and ``W = Lm^{-1}
    A_I^T``: ``C = W^T W = Lc Lc^T``, ``M^{-1} A_I^T = Lm^{-T} W``, ``Cinv = C^{-1}``,
    ``G = M^{-1} A_I^T C^{-1}``, ``d_const = -A_I M^{-1}(tau - c)`` with tau = 0,
    ``qd0 = qdot + dt M^{-1}(tau - c) - G (A_I qdot - dt d_const)`` and ``lam0 = C^{-1}
    (d_const - A_I qdot / dt)``. ``W`` (nv, nI) ends holding ``M^{-1} A_I^T``; ``d_const``
    ends holding ``d_const - A_I qdot / dt`` (:func:`constraint_inverse`).

    Every product sums over its inner index in ascending order from 0, as a plain dot product
    would; the loops are ordered so that the innermost runs over independent outputs rather
    than along one running sum, so the compiler can overlap them (same sums, same results).
    """
    nI, nv = AI.shape
    Minv_tc, W, Cinv, G, d_const, qd0, lam0 = k.Minv_tc, k.W, k.Cinv, k.G, k.d_const, k.qd0, k.lam0
    if not cholesky_factor(M, k.Lm, 0.0):
        raise ValueError("joint-space inertia M is not positive definite (check link masses)")
    for j in range(nv):
        Minv_tc[j] = -c[j]
    cholesky_solve(k.Lm, Minv_tc, Minv_tc)
    constraint_inverse(k.Lm, AI, W, k.Cm, k.Lc, Cinv)
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


@njit(refcount=False)
def _contacts(dm, t, d, u):
    """Collision detection of wheels and track patches; ICR axes of the patches if asked."""
    m, trk = dm.kin, dm.trk
    contact_detection(m, t, (trk.frame, trk.drive, trk.path), d.T_world, d.T_contact, d.dz,
                      d.contact_angle)
    if trk.icr and trk.frame.shape[0] > 0:
        straight, xi, yi = icr_point(trk.icr_map, u)
        if not straight:
            icr_contact_frames(d.T_world, d.T_contact, m.wheel_frame.shape[0],
                               trk.frame.shape[0], xi, yi)


@njit(refcount=False)
def _rows(dm, d):
    """Constraint matrix (2.55) ``d.A``: wheels, track patches, actuators, holonomic rows."""
    m, trk = dm.kin, dm.trk
    assemble_constraints(m.parent, m.jtype, m.axis, m.wheel_frame, d.J_hol, dm.act_joints,
                         d.T_world, d.T_contact, d.A)
    if trk.frame.shape[0] > 0:
        assemble_track_rows(m, trk, d.T_world, d.T_contact, d.contact_angle,
                            m.wheel_frame.shape[0], d.A)


@njit(refcount=False)
def _step_kinematics(dm, t, d, q, qdot, u):
    """The state-dependent quantities of a step: forward kinematics and M (Alg. 1, 3),
    collision (2.8)-(2.9), the bias force c (Alg. 4 or 2.89), the holonomic residuals and the
    constraint matrix (2.55), and the track patches' load shares. The contact models see the
    contact height errors ``d.dz``, or ``d.dz_model`` with track patches."""
    m, trk = dm.kin, dm.trk
    nw = m.wheel_frame.shape[0]
    ncon = nw + trk.frame.shape[0]  # contacts: wheels, then track patches
    crba_into(m.parent, m.jtype, m.axis, m.T0, dm.I_frame, q, d.T_world, d.Ic, d.M, d.crba_ws)
    if ncon > nw:
        _contacts(dm, t, d, u)
    elif d.contact_ws.shape[0] > 0:  # wheels only, warm-started
        warm_wheel_contact(m, t, d.T_world, d.T_contact, d.dz, d.contact_angle, d.contact_ws,
                           d.fan_frame)
    else:  # wheels only, the cold search: the run's zero-row workspace (nothing allocated)
        wheel_contact_into(m, t, d.T_world, d.T_contact, d.dz, d.contact_angle, d.contact_ws)
    if dm.opt.fused:
        bias_force_fused(d.Ic[0], dm.gravity, q, qdot, d.c)
    else:
        bias_force_into(m, dm.I_frame, dm.gravity, qdot, d.T_world,
                        (d.crba_ws[0], d.crba_ws[1]), d.c, d.rnea_ws)
    holonomic_constraints(m.parent, m.jtype, m.axis, m.A_joint, m.joint_offset, m.loop_closure,
                          q, d.T_world, d.c_hol, d.J_hol)
    _rows(dm, d)
    if ncon > nw:
        track_shares(trk, t, d.T_world, nw, d.dz, d.share, d.dz_model)


@njit(refcount=False)
def _row_flags(dm, d, ncon):
    """Row flags of the step: ``d.active`` (contacts within :data:`CONTACT_MARGIN`),
    ``d.forced`` (ideal actuators, ideal loop closures) and ``d.cols`` (joint-space columns
    not set by ideal actuators). Returns the first loop-closure row."""
    na = dm.act_joints.shape[0]
    nc = d.A.shape[0]
    d.active[:] = True
    d.forced[:] = False
    d.cols[:] = True
    for k in range(ncon):
        if d.dz[k] > CONTACT_MARGIN:
            d.active[3 * k] = False
            d.active[3 * k + 1] = False
            d.active[3 * k + 2] = False
    for a in range(na):
        if dm.akinds[a] == IDEAL:
            d.forced[3 * ncon + a] = True
            d.cols[6 + dm.act_joints[a]] = False
    r_loop = 3 * ncon + na + dm.kin.A_joint.shape[0]  # first loop-closure row
    if dm.opt.loop_sigma > 0.0:
        for r in range(r_loop, nc):
            d.forced[r] = True
    return r_loop


@njit
def _independent_system(d, nI, ncon):
    """Cut the step's arrays sized by nI independent rows from ``d.fbuf``/``d.ibuf`` and gather
    ``A_I`` (2.66) and the row context ``ctx_i`` (:func:`force_balance_error`).

    Returns ``(ctx_i, ctx_m, x, Je, Je_lam, Gx, AG, cache)`` (``cache`` a :class:`StepCache`;
    ``x`` (nx,) the inputs, i.e. independent rows not prescribed) and the next free offset.
    """
    nc, nv = d.A.shape
    fbuf = d.fbuf
    ctx_i = d.ibuf[:3 * nI].reshape((3, nI))
    ctx_m = d.ibuf[3 * nc:4 * nc]
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
        if d.indep[r]:
            ctx_i[0, a] = r
            for j in range(nv):
                AI[a, j] = d.A[r, j]
            if d.forced[r]:
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
    cache = StepCache(AI, d.Lm, d.Minv_tc, W, Cm, Lc, Cinv, G, d_const, qd0, lam0)
    return (ctx_i, ctx_m, x, Je, Je_lam, Gx, AG, cache), at


@njit
def _prescribed_rows(dm, d, u, ncon, r_loop, at):
    """Prescribed velocities of the forced rows ``u_fix`` (indexed by row - 3 ncon: the
    commands, then Baumgarte ``-loop_sigma c`` (2.36) of the loop closures) and ``Pfix``
    (nfix, nv), orthonormal rows spanning the ideal loop-closure rows off the ideal actuators'
    columns (modified Gram-Schmidt); both cut from ``d.fbuf`` at offset ``at``."""
    nc, nv = d.A.shape
    na = dm.act_joints.shape[0]
    fbuf = d.fbuf
    u_fix = fbuf[at:at + nc - 3 * ncon]
    at += nc - 3 * ncon
    for a in range(na):
        u_fix[a] = u[a]
    for rj in range(d.c_hol.shape[0]):
        u_fix[na + rj] = -dm.opt.loop_sigma * d.c_hol[rj]
    nfix = 0
    for r in range(r_loop, nc):
        if d.indep[r] and d.forced[r]:
            nfix += 1
    at_fix = at
    Pfix, at = _cut(fbuf, at, nfix, nv)
    f = 0
    for r in range(r_loop, nc):
        if not (d.indep[r] and d.forced[r]):
            continue
        for j in range(nv):
            Pfix[f, j] = d.A[r, j] if d.cols[j] else 0.0
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
    return u_fix, Pfix


@njit(refcount=False)
def dynamics_step(dm, t, d, q, qdot, u, q_next, qdot_next):
    """One step of the constrained dynamics with force balance; returns (iterations, L).

    The force balance is the joint-acceleration solver's when ``dm.opt.acceleration``, with the
    thesis' solver (2.75)-(2.88) redoing a step it leaves above the tolerance (unless
    ``single_step``); else the thesis' alone.

    ``dm``: :class:`~wmr_model.dynamics.model.DynamicsModel`; ``t``: the terrain's
    :class:`~wmr_model.terrain.surface.TerrainArrays`; ``d``: the
    :class:`~wmr_model.dynamics.data.StepData` of the run. ``q`` (nq,), ``qdot`` (nv,) the
    state, ``u`` (na,) the commands; writes ``q_next``, ``qdot_next``.

    ``d.v_prev`` (nrows,) holds the previous step's constraint-row velocities (warm start,
    §2.4.4) and is overwritten with this step's ``A qdot'[i+1]``. ``dm.opt.loop_sigma`` > 0
    makes the loop closures ideal: their rows' velocity is prescribed as ``-loop_sigma c``
    (Baumgarte, (2.36)) and their force is free (a Lagrange multiplier of (2.65), like an ideal
    actuator's, §2.4.4); 0 leaves them to the spring-dampers ``jK``, ``jD``. Contacts are the nw
    wheels, then the ntp track patches (:mod:`wmr_model.dynamics.track_contact`).
    """
    m, trk, opt = dm.kin, dm.trk, dm.opt
    ncon = m.wheel_frame.shape[0] + trk.frame.shape[0]
    nc, nv = d.A.shape
    _step_kinematics(dm, t, d, q, qdot, u)
    # the contact height errors the contact models see: the track patches' sinkage
    dz_model = d.dz_model if ncon > m.wheel_frame.shape[0] else d.dz
    r_loop = _row_flags(dm, d, ncon)
    it = 0
    L = math.inf
    if opt.acceleration:
        it, L = _acceleration_balance(dm, d, qdot, u, dz_model, qdot_next)
    if not opt.acceleration or (not math.sqrt(L) <= opt.tol and not opt.single_step):
        # the thesis' solver, or its rescue of a joint-acceleration balance that stalled (a
        # kink of a piecewise model, a tumbling state): see SOLVERS
        it2, L = _thesis_balance(dm, d, qdot, u, dz_model, ncon, r_loop, qdot_next)
        it += it2
    for r in range(nc):
        s = 0.0
        for j in range(nv):
            s += d.A[r, j] * qdot_next[j]
        d.v_prev[r] = s
    symplectic_euler(q, qdot_next, opt.dt, q_next)
    if m.loop_closure.shape[0] > 0:
        project_loop_closures(m.parent, m.jtype, m.axis, m.T0, m.loop_closure, d.cols, q_next,
                              d.T_world)
    return it, L


# The step loop's own copy of dynamics_step, compiled into it (:func:`_step_loop`): called out
# of line, the step receives the model and workspace records as some hundreds of scalar
# arguments. A reference-counted caller must not inline it (each array taken from the records
# would be counted), so only the refcount-free loop does.
_dynamics_step_inlined = njit(refcount=False, inline="always")(
    getattr(dynamics_step, "py_func", dynamics_step))


@njit(inline="always")
def _model_forces(dm, d, u, dz_model, AG, Gx):
    """The step's :class:`~wmr_model.dynamics.force_balance.ModelForces`: prescribed
    velocities ``u`` (commands first), contact height errors ``dz_model``, and the solver's
    maps ``AG``, ``Gx`` from its unknowns to the rows' and joints' velocities. Inlined, so
    that the record takes the reference counting of its caller (refcount-free or not)."""
    trk = dm.trk
    return ModelForces(d.active, d.A, u, dz_model, d.c_hol, trk.contact_radius,
                       trk.contact_joint, d.share, dm.ckinds, dm.cparams, dm.ctables, dm.caxes,
                       dm.akinds, dm.aparams, dm.act_joints, dm.jK, dm.jD, dm.opt.dt, AG, Gx)


@njit
def _check_inertia(M):
    """Raise if a diagonal element of M is zero or negative: a massless subtree (the thesis'
    solver finds it factoring M; the joint-acceleration solver never factors M). A state that
    has blown up (NaN) passes, as through the factor, and is flagged downstream."""
    for j in range(M.shape[0]):
        if M[j, j] <= 0.0:
            raise ValueError("joint-space inertia M is not positive definite (check link "
                             "masses)")


@njit(refcount=False)
def _acceleration_balance(dm, d, qdot, u, dz_model, qdot_next):
    """The joint-acceleration force balance of a step
    (:mod:`wmr_model.dynamics.joint_acceleration`) from zero acceleration with the ideal
    actuators' rates set to their commands; writes ``qdot_next``, returns (iterations, L)."""
    opt = dm.opt
    a = AccelArgs(d.M, d.c, qdot, _model_forces(dm, d, u, dz_model, d.A, d.eye), d.contact_jac)
    nv = qdot.shape[0]
    for j in range(nv):  # start at zero acceleration (see SOLVERS)
        qdot_next[j] = qdot[j]
    for k in range(dm.act_joints.shape[0]):
        if dm.akinds[k] == IDEAL:
            qdot_next[6 + dm.act_joints[k]] = u[k]
    _check_inertia(d.M)
    return joint_acceleration_balance(qdot_next, a, d.free, opt.max_iter, opt.tol,
                                      opt.single_step, d.Minv_tc, d.fmodel, d.fb,
                                      opt.elimination)


@njit
def _thesis_balance(dm, d, qdot, u, dz_model, ncon, r_loop, qdot_next):
    """The force balance of the thesis (2.75)-(2.88) of a step
    (:mod:`wmr_model.dynamics.force_balance`), warm-started from ``d.v_prev``; writes
    ``qdot_next``, returns (iterations, L)."""
    opt = dm.opt
    nI = independent_rows_into(d.A, d.active, d.cols, d.forced, d.indep, d.rows_ws)
    (ctx_i, ctx_m, x, Je, Je_lam, Gx, AG, k), at = _independent_system(d, nI, ncon)
    u_fix, Pfix = _prescribed_rows(dm, d, u, ncon, r_loop, at)
    constraint_cache(d.M, d.c, k.AI, qdot, opt.dt, k)
    input_maps(ctx_i, d.A, k.G, k.Cinv, opt.dt, Je_lam, AG, Gx)
    ix = 0
    for a in range(nI):
        if ctx_i[2, a] == 0:
            x[ix] = d.v_prev[ctx_i[0, a]]
            ix += 1
    ctx_m[:] = 0
    # joint constraints and loop closures: spring-dampers (2.74) on the residual c_hol
    args = BalanceArgs(ctx_i, ctx_m, k.G, k.Cinv, k.qd0, k.lam0, Je_lam, Pfix,
                       _model_forces(dm, d, u_fix, dz_model, AG, Gx))
    e = d.Minv_tc  # free after the cache: reused as the force-balance error (nv,)
    return force_balance(x, args, opt.max_iter, opt.tol, opt.single_step, e, Je, qdot_next,
                         d.fmodel, d.fb)


class Rollout(NamedTuple):
    """Output arrays of :func:`simulate_loop` for T steps (a leading N axis in the batch)."""

    q: np.ndarray  #: (T+1, nq) states
    qdot: np.ndarray  #: (T+1, nv) joint-space velocities
    iterations: np.ndarray  #: (T,) int Newton iterations per step
    cost: np.ndarray  #: (T,) force-balance cost L per step [N^2]
    f_contact: np.ndarray  #: (T, ncon, 3) model contact forces [N]
    dz: np.ndarray  #: (T, ncon) contact height errors [m]


@njit
def simulate_loop(dm, t, q0, qdot0, U, out, law, fb):
    """Compiled loop over ``U`` (T, na) commands from ``q0`` (nq,), ``qdot0`` (nv,): writes the
    :class:`Rollout` ``out`` (ncon = nw wheels + ntp track patches). ``dm``, ``t``: see
    :func:`dynamics_step`; the workspace is this run's own (:func:`create_step_data`). With a
    closed-loop ``law`` (:class:`~wmr_model.kinematics.feedback.FeedbackLaw`, kind > 0) each
    step's actuated rates are instead the law's at the state at the start of the step, from the
    step's row of ``fb`` (:class:`~wmr_model.kinematics.feedback.FeedbackInputs`)."""
    m = dm.kin
    d = create_step_data(dm, qdot0.shape[0])
    Q, QD = out.q, out.qdot
    # warm start of the first step: the current constraint velocities
    from_q = np.ascontiguousarray(q0)
    Q[0] = from_q
    QD[0] = qdot0
    u = np.empty(U.shape[1])
    if U.shape[0] == 0:
        return
    ui = U[0]
    if law.kind != 0:
        feedback_rates(law, fb.target[0], fb.a[0], fb.b[0], Q[0], u)
        ui = u
    crba_into(m.parent, m.jtype, m.axis, m.T0, dm.I_frame, Q[0], d.T_world, d.Ic, d.M,
              d.crba_ws)
    _contacts(dm, t, d, ui)
    holonomic_constraints(m.parent, m.jtype, m.axis, m.A_joint, m.joint_offset,
                          m.loop_closure, Q[0], d.T_world, d.c_hol, d.J_hol)
    _rows(dm, d)
    d.v_prev[:] = d.A @ QD[0]
    _step_loop(dm, t, d, U, out, law, fb, u)


@njit(refcount=False)
def _step_loop(dm, t, d, U, out, law, fb, u):
    """The steps of :func:`simulate_loop` after the first step's warm start, in a
    refcount-free loop around the inlined step (:data:`_dynamics_step_inlined`; the same
    operations as :func:`dynamics_step`); ``u`` (na,) is the feedback's scratch."""
    Q, QD = out.q, out.qdot
    ncon = d.dz.shape[0]
    control = law.kind != 0
    for i in range(U.shape[0]):
        ui = U[i]
        if control:
            feedback_rates(law, fb.target[i], fb.a[i], fb.b[i], Q[i], u)
            ui = u
        it, L = _dynamics_step_inlined(dm, t, d, Q[i], QD[i], ui, Q[i + 1], QD[i + 1])
        out.iterations[i] = it
        out.cost[i] = L
        for k in range(ncon):
            out.dz[i, k] = d.dz[k]
            for r in range(3):
                out.f_contact[i, k, r] = d.fmodel[3 * k + r]


@njit
def _batch_row(a, n):
    """Trajectory ``n``'s row of a batched input whose leading axis is N, or 1 (shared)."""
    return a[n] if a.shape[0] > 1 else a[0]


@njit(nogil=True)
def simulate_range(lo, hi, dm, t, q0, qdot0, U, out, law, fb):
    """:func:`simulate_loop` for trajectories ``lo..hi-1`` of a batch, one after another,
    without the GIL (:func:`wmr_model._jit.run_ranges` runs several ranges at once).

    ``U`` (N, T, na) and the :class:`Rollout` ``out`` carry a leading trajectory axis;
    ``q0`` (N or 1, nq), ``qdot0`` (N or 1, nv) and the arrays of the feedback inputs ``fb``
    have one row per trajectory or one shared; ``law`` is shared. Each trajectory gets its own
    workspace, so it is bit for bit its run alone.
    """
    for n in range(lo, hi):
        fbn = FeedbackInputs(_batch_row(fb.target, n), _batch_row(fb.a, n), _batch_row(fb.b, n))
        simulate_loop(dm, t, _batch_row(q0, n), _batch_row(qdot0, n), U[n],
                      Rollout(out.q[n], out.qdot[n], out.iterations[n], out.cost[n],
                              out.f_contact[n], out.dz[n]), law, fbn)


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


def simulate_dynamics(model: VehicleModel, terrain: Terrain, q0: np.ndarray,
                      qdot0: np.ndarray, commands: np.ndarray, dt: float,
                      options: DynamicsOptions | None = None,
                      **keywords: Any) -> DynamicsTrajectory:
    """Simulate the constrained dynamics with force-balance optimization (§2.4).

    Args:
        q0: (nq,) initial state; qdot0: (nv,) initial joint-space velocity.
        commands: (T, na) commanded actuated-joint rates per step (model.actuated_joints
            order) [rad/s or m/s].
        dt: step size [s].
        options: a :class:`~wmr_model.dynamics.model.DynamicsOptions` (default: its
            defaults); keywords replace its fields:
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
        max_iter: Newton iterations per step at most (default 30).
        tol: force-balance tolerance on |e| [N]; default 1e-6 m g.
        solver: ``"joint_acceleration"`` (default: Newton on the equation of motion with the
            next step's joint-space velocities as unknowns,
            :mod:`wmr_model.dynamics.joint_acceleration`) or ``"thesis"`` (the independent-row
            formulation (2.75)-(2.88)). Ideal loop closures and ``single_step`` default to
            ``"thesis"`` (:data:`~wmr_model.dynamics.model.SOLVERS`); a joint-acceleration
            balance left above ``tol`` restarts once (the nonmonotone rule from its first
            iteration), a step still above it is redone by the thesis' solver, and
            ``iterations`` counts them all.
    """
    q0, qdot0, U = check_dynamics_inputs(model, q0, qdot0, commands, dt)
    dm, names = kept_dynamics(model, dt, DynamicsOptions.of(options, keywords))
    run = _run_batch(model, dm, terrain.kernel_args(), names, q0[None], qdot0[None], U[None],
                     dt)
    return DynamicsTrajectory(run.t, run.q[0], run.qdot[0], run.iterations[0], run.cost[0],
                              run.f_contact[0], run.dz[0], names)


#: Parallel chunks per thread of :func:`simulate_dynamics_batch`: more than one evens out
#: trajectories of unequal cost (Newton iterations vary); results do not depend on it.
DYNAMICS_CHUNKS_PER_THREAD = 2


def create_rollout(model: VehicleModel, N: int, T: int) -> Rollout:
    """Output arrays of N trajectories of T steps (:class:`Rollout` with a leading N axis);
    the iteration counts start at -1 (unfinished)."""
    return Rollout(np.empty((N, T + 1, model.nq)), np.empty((N, T + 1, model.nv)),
                   np.full((N, T), -1, dtype=np.int64), np.empty((N, T)),
                   np.empty((N, T, model.nc, 3)), np.empty((N, T, model.nc)))


def _run_batch(model: VehicleModel, dm: DynamicsModel, t: TerrainArrays,
               names: tuple[str, ...], q0: np.ndarray, qdot0: np.ndarray, U: np.ndarray,
               dt: float, feedback: Feedback | None = None) -> DynamicsTrajectory:
    """Run the compiled loops for ``U`` (N, T, na) from ``q0`` (N or 1, nq), ``qdot0`` (N or 1,
    nv), with a closed-loop ``feedback`` if given: on one thread for a single trajectory, else
    in parallel chunks."""
    N, T = U.shape[0], U.shape[1]
    out = create_rollout(model, N, T)
    law, fb = (no_feedback(), no_feedback_inputs()) if feedback is None else feedback
    run_ranges(simulate_range, N, min(N, DYNAMICS_CHUNKS_PER_THREAD * num_threads()), dm, t,
               q0, qdot0, U, out, law, fb)
    return DynamicsTrajectory(np.arange(T + 1) * dt, out.q, out.qdot, out.iterations, out.cost,
                              out.f_contact, out.dz, names)


def simulate_dynamics_batch(model: VehicleModel, terrain: Terrain, q0: np.ndarray,
                            qdot0: np.ndarray, commands: np.ndarray, dt: float,
                            options: DynamicsOptions | None = None,
                            feedback: Feedback | None = None,
                            **keywords: Any) -> DynamicsTrajectory:
    """:func:`simulate_dynamics` for N command sequences at once, on all cores.

    Args:
        q0: (nq,) initial state shared by all trajectories, or (N, nq) one per trajectory.
        qdot0: (nv,) or (N, nv) initial joint-space velocities, likewise.
        commands: (N, T, na) commanded actuated-joint rates per trajectory and step.
        dt: step size [s]; options, keywords: as :func:`simulate_dynamics`.
        feedback: a vehicle controller's closed-loop law with its per-step inputs (N or 1, T,
            ...) (:class:`~wmr_model.kinematics.feedback.Feedback`, built by
            :func:`wmr_model.prediction.controllers.simulate_dynamics_controlled`): its rates at
            the state at the start of each step replace ``commands``.

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
    if feedback is not None:
        check_feedback(feedback, len(model.actuated_joints), U.shape[1], N)
    dm, names = kept_dynamics(model, dt, DynamicsOptions.of(options, keywords))
    return _run_batch(model, dm, terrain.kernel_args(), names, q0, qdot0, U, float(dt),
                      feedback)


def _batch_rows(name: str, a: np.ndarray, n: int, width: int) -> np.ndarray:
    """``a`` (width,) or (n, width) as a C-contiguous (1 or n, width) array."""
    out = np.ascontiguousarray(a, dtype=float)
    if out.ndim == 1:
        check_shape(name, out.shape, (width,))
        return out[None]
    check_shape(name, out.shape, (n, width))
    return out
