"""The planner's prediction loop on float32 lanes: W candidates per pass (issue 22, option (a)).

:func:`predict_lanes_range` runs blocks of :data:`LANES` candidates of a batch through the
Euler loop of :func:`wmr_model.kinematics.loops.euler_trajectory` (Figure 2.6; enhanced
kinematics (2.44)-(2.52), the stability margin, the state flags and the pose covariance
(3.22)-(3.24)) with every per-candidate quantity in float32 structure-of-arrays form, the
candidate axis last (:mod:`wmr_model.kinematics.lanes`). Each step calls the lane kernels in the
order of the scalar loop: forward kinematics (:func:`~wmr_model.kinematics.lanes.tree
.fk_lanes`), collision detection (:mod:`~wmr_model.kinematics.lanes.contact`), the constraint
rows and the least-squares solve (:mod:`~wmr_model.kinematics.lanes.rows`), the body force and
slip and the re-solve (:mod:`~wmr_model.kinematics.lanes.body`), the margin
(:mod:`~wmr_model.kinematics.lanes.margin`), the samples, the covariance step and Euler
(:func:`~wmr_model.kinematics.lanes.tree.euler_lanes`).

Scope (checked by :func:`wmr_model.prediction.predict.predict` before it comes here): Euler,
wheels only, no loop closures, no closed-loop law, process noise, imposed attitude or added
contact slip; warm-started collision detection. Outputs are the float64 arrays of the scalar
loop holding float32 values; the bound on their difference from the float64 loop is tested
(``test/core/test_lanes_predict.py``) and stated in the README.
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np

from wmr_model._jit import njit
from wmr_model.kinematics.lanes import F32
from wmr_model.kinematics.lanes.body import (
    body_lanes_workspace,
    body_slip_lanes,
    pose_covariance_lanes,
    pose_covariance_workspace,
)
from wmr_model.kinematics.lanes.contact import contact_lanes, contact_lanes_workspace
from wmr_model.kinematics.lanes.margin import margin_lanes_workspace, stability_margin_lanes
from wmr_model.kinematics.lanes.rows import (
    resolve_lanes,
    rows_lanes,
    solve_lanes,
    solve_lanes_workspace,
)
from wmr_model.kinematics.lanes.tree import euler_lanes, fk_lanes
from wmr_model.kinematics.loops import _state_flags
from wmr_model.vehicles.inertia import fold_spinning_leaves

__all__ = ["LANES", "lane_body_constants", "predict_lanes_range"]

#: Candidates per block (the lane width W of every array): 64 float32 lanes, four AVX-512
#: vectors per row. Narrower blocks pay the kernels' per-call costs over fewer candidates
#: (collision detection 410-460 ns per lane-step at 16 lanes, 225-245 at 64, 205 at 128).
LANES = 64



# Per model, the constants of body_lanes_workspace (the folded tree and its float32 inertias):
# computed once, weak keys (they go with the model).
_BODY: weakref.WeakKeyDictionary[Any, tuple] = weakref.WeakKeyDictionary()


def lane_body_constants(model: Any, I_frame: np.ndarray) -> tuple:
    """The read-only part of :func:`~wmr_model.kinematics.lanes.body.body_lanes_workspace` for
    ``model`` with frame inertias ``I_frame`` (nf, 6, 6): its spinning leaves folded
    (:func:`wmr_model.vehicles.inertia.fold_spinning_leaves`), once per model."""
    out = _BODY.get(model)
    if out is None:
        k = model.kinematic_arrays()
        keep, parent_k, I_k = fold_spinning_leaves(k.parent, k.jtype, k.axis, k.T0, I_frame)
        out = _BODY.setdefault(model, body_lanes_workspace(keep, parent_k, I_k, 1)[:5])
    return out


@njit(nogil=True)
def predict_lanes_range(lo, hi, m, t, o, X, Y, body):
    """Blocks ``lo..hi-1`` of :data:`LANES` candidates of the batch (``X``, ``Y`` as for
    :func:`wmr_model.kinematics.loops.predict_range`; candidate n is lane ``n % LANES`` of
    block ``n // LANES``); the last block's missing lanes repeat its last candidate and are not
    written. ``body``: the constants of :func:`~wmr_model.kinematics.lanes.body
    .body_lanes_workspace` (its first five entries, read only). Lane arrays are allocated once
    per range, each block's workspaces fresh (a block computes what its candidates would
    alone: every lane is independent); without the GIL. Every lane kernel gets distinct
    buffers (they are compiled noalias)."""
    N = X.q0.shape[0]
    W = LANES
    nq = X.q0.shape[1]
    nv = nq - 1
    nf = m.parent.shape[0]
    nw = m.wheel_frame.shape[0]
    q = np.empty((nq, W), F32)
    qn = np.empty((nq, W), F32)
    qdot = np.empty((nv, W), F32)
    qk = np.zeros((nv, W), F32)
    R = np.empty((nf, 3, 3, W), F32)
    p = np.empty((nf, 3, W), F32)
    Rc = np.empty((nw, 3, 3, W), F32)
    pc = np.empty((nw, 3, W), F32)
    dz = np.empty((nw, W), F32)
    angle = np.zeros((nw, W), F32)
    A = np.zeros((3 * nw, nv, W), F32)
    v = np.zeros((3 * nw, W), F32)
    vc_xy = np.zeros((nw, 2, W), F32)
    slip_p = np.empty((X.slip_p.shape[1], W), F32)
    cg = np.empty((3, W), F32)
    f_cg = np.empty((6, W), F32)
    v_b_slip = np.zeros((6, W), F32)
    vc_slip = np.zeros((nw, 2, W), F32)
    margin = np.empty(W, F32)
    P = np.empty((6, 6, W), F32)
    fl = np.empty(W, np.uint8)
    speed = np.empty((nw, W), F32)
    for b in range(lo, hi):
        n0 = b * W
        n = min(W, N - n0)
        cws = contact_lanes_workspace(nw, W)
        sws = solve_lanes_workspace(nv, 3 * nw, o.known, W)
        nk = body[0].shape[0]
        bws = (body[0], body[1], body[2], body[3], body[4], np.zeros((nk, 6, W), F32),
               np.zeros((nk, 3, W), F32))
        cov_ws = pose_covariance_workspace(W)
        mws = margin_lanes_workspace(nw, W)
        angle[:] = 0.0  # a fresh collision workspace: every lane's first search is the fan
        _load_block(X, n0, n, q, slip_p, P)
        _block(m, t, o, X, Y, n0, n, q, qn, qdot, qk, R, p, Rc, pc, dz, angle, A, v, vc_xy,
               slip_p, cg, f_cg, v_b_slip, vc_slip, margin, P, fl, speed, cws, sws, bws, mws,
               cov_ws)


@njit
def _load_block(X, n0, n, q, slip_p, P):
    """The block's initial states, slip parameters and covariances as float32 lanes (lanes
    beyond ``n`` repeat the last candidate)."""
    W = q.shape[1]
    for l in range(W):
        c = n0 + min(l, n - 1)
        for i in range(q.shape[0]):
            q[i, l] = X.q0[c, i]
        sp = X.slip_p[c if X.slip_p.shape[0] > 1 else 0]
        for i in range(slip_p.shape[0]):
            slip_p[i, l] = sp[i]
        P0 = X.P0[c if X.P0.shape[0] > 1 else 0]
        for i in range(6):
            for j in range(6):
                P[i, j, l] = P0[i, j]


@njit
def _block(m, t, o, X, Y, n0, n, q, qn, qdot, qk, R, p, Rc, pc, dz, angle, A, v, vc_xy, slip_p,
           cg, f_cg, v_b_slip, vc_slip, margin, P, fl, speed, cws, sws, bws, mws, cov_ws):
    """One block through the steps of :func:`wmr_model.kinematics.loops.euler_trajectory`."""
    nsteps = X.qdot_cmd.shape[1]
    W = q.shape[1]
    stats = o.enhanced or o.assess
    has_flags = Y.flags.shape[1] > 0
    nw = dz.shape[0]
    fl[:] = 0
    margin[:] = np.nan
    for step in range(nsteps + 1):
        final = step == nsteps
        tc = nsteps - 1 if final else step  # the final state keeps the last step's commands
        for j in range(qk.shape[0]):
            if o.known[j]:
                for l in range(W):
                    qk[j, l] = X.qdot_cmd[n0 + min(l, n - 1), tc, j]
        fk_lanes(m, q, R, p)
        contact_lanes(m, t, R, p, Rc, pc, dz, angle, cws)
        rows_lanes(m, R, p, Rc, pc, dz, q, o.sigma, vc_xy, A, v)
        solve_lanes(A, v, o.known, qk, qdot, sws)
        if stats:
            body_slip_lanes(R, p, qdot, A, v, vc_xy, slip_p, o.slip_axes, o.gravity,
                            o.enhanced, cg, f_cg, v_b_slip, vc_slip, bws)
            if o.enhanced:
                resolve_lanes(A, v, o.known, qk, qdot, sws)
            stability_margin_lanes(R, p, Rc, pc, cg, f_cg, margin, mws)
        if final:
            break
        if has_flags:
            _or_flags(margin, dz, o.tipover_margin, o.liftoff_threshold, fl)
        if step % o.every == 0:
            i = step // o.every
            _contact_speeds(A, qdot, speed)
            _record(o, Y, n0, n, i, q, dz, margin, P, fl)
            for l in range(n):
                c = n0 + l
                for j in range(qdot.shape[0]):
                    Y.qdot_traj[c, i, j] = qdot[j, l]
                for k in range(nw):
                    Y.vc_norm[c, i, k] = speed[k, l]
                if stats:
                    for j in range(6):
                        Y.slip_traj[c, i, j] = v_b_slip[j, l]
                    for k in range(nw):
                        Y.vc_slip_traj[c, i, k, 0] = vc_slip[k, 0, l]
                        Y.vc_slip_traj[c, i, k, 1] = vc_slip[k, 1, l]
            fl[:] = 0
        if o.propagate:
            pose_covariance_lanes(P, R, qdot, o.Qprime, o.dt, cov_ws)
        euler_lanes(q, qdot, o.dt, qn)
        q, qn = qn, q
    if has_flags:
        _or_flags(margin, dz, o.tipover_margin, o.liftoff_threshold, fl)
    _record(o, Y, n0, n, (nsteps + o.every - 1) // o.every, q, dz, margin, P, fl)


@njit
def _or_flags(margin, dz, tipover_margin, liftoff_threshold, fl):
    """OR each lane's state flags into ``fl``: the scalar loop's
    :func:`wmr_model.kinematics.loops._state_flags` on the lane's margin and height errors."""
    for l in range(fl.shape[0]):
        fl[l] |= _state_flags(margin[l], dz[:, l], dz.shape[0], tipover_margin,
                              liftoff_threshold)


@njit
def _contact_speeds(A, qdot, speed):
    """|v_c| = |A_k qdot| per wheel and lane
    (:func:`wmr_model.kinematics.constraints.contact_velocity_norms`)."""
    W = qdot.shape[1]
    for k in range(speed.shape[0]):
        for l in range(W):
            e0 = F32(0.0)
            e1 = F32(0.0)
            e2 = F32(0.0)
            for j in range(qdot.shape[0]):
                e0 += A[3 * k, j, l] * qdot[j, l]
                e1 += A[3 * k + 1, j, l] * qdot[j, l]
                e2 += A[3 * k + 2, j, l] * qdot[j, l]
            speed[k, l] = np.sqrt(e0 * e0 + e1 * e1 + e2 * e2)


@njit
def _record(o, Y, n0, n, i, q, dz, margin, P, fl):
    """Sample ``i`` of the state outputs (state, height errors, margin, covariance, flags) of
    the block's first ``n`` lanes; resets the flags carried to the next sample."""
    stats = o.enhanced or o.assess
    for l in range(n):
        c = n0 + l
        for j in range(q.shape[0]):
            Y.q_traj[c, i, j] = q[j, l]
        for k in range(dz.shape[0]):
            Y.dz_traj[c, i, k] = dz[k, l]
        if stats:
            Y.margin_traj[c, i] = margin[l]
        if o.propagate:
            for a in range(6):
                for b in range(6):
                    Y.P_traj[c, i, a, b] = P[a, b, l]
        if Y.flags.shape[1] > 0:
            Y.flags[c, i] = fl[l]
