"""Per-kernel cost of batched enhanced-kinematic prediction with covariance (issue 10).

Prints numbers, asserts nothing. The issue-10 batch scenario (Zoë, rough terrain RMS 0.15 m /
correlation 0.8 m, seed 0, constant-twist candidates, 5 s at dt = 0.04 s, enhanced kinematics
with covariance) is run once to record every candidate's states; then each kernel of the
prediction loop is timed alone inside a compiled loop over those recorded states, on one
thread, in CPU µs per candidate-step (the mean over all states of ``reps`` passes):

* ``forward_kinematics`` (Algorithm 1), ``wheel_contact`` warm-started along each trajectory
  and cold (full fan search), ``constraint_system`` (2.33)-(2.36), ``solve_partitioned``
  (2.37)-(2.38), and their sum ``joint_space_velocity``;
* ``composite_inertias`` (Algorithm 3 backward pass) and, where the package has it, the body
  composite with the wheels folded into their parents (``body_composite_inertia``);
  ``resolve_partitioned`` and the body force and slip (2.44)-(2.52); then the whole enhanced
  velocity (:func:`wmr_model.kinematics.enhanced.enhanced_joint_space_velocity` with the scratch the
  loop uses: the kinematic solve, composite inertia, body force, slip and the re-solve);
* ``stability_margin`` and the covariance step (``error_dynamics`` + ``propagate_covariance``,
  and the structured ``propagate_pose_covariance`` where the package has it);
* terrain lookups (``terrain_height_normal`` on a grid), per call;
* the whole loop (``predict_trajectory``) per candidate on one thread, with every output written
  (``every=1``) and with the end state only (``every=T``); the difference from the kernels'
  sum is the loop's own overhead (integration, flags, output writes).

Run: ``.venv/bin/python bench/profile_predict.py [n_candidates] [reps] [--json]``. Works on
older versions of the package too (rows of kernels they lack are left out), for before/after
comparisons: ``PYTHONPATH=<old tree> .venv/bin/python bench/profile_predict.py``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import time

import numpy as np

from wmr_model._jit import njit
from wmr_model.experiments import kinematic as ex
from wmr_model.io.vehicles import load_vehicle
from wmr_model.kinematics import api as kin
from wmr_model.kinematics import enhanced as E
from wmr_model.kinematics.constraints import constraint_system, loop_closure_rows
from wmr_model.kinematics.solve import (
    joint_space_velocity,
    resolve_partitioned,
    solve_partitioned,
    solve_workspace,
)
from wmr_model.kinematics.uncertainty import (
    covariance_workspace,
    error_dynamics,
    propagate_covariance,
)
from wmr_model.kinematics.wheel_collision import CONTACT_WS_WIDTH, wheel_contact
from wmr_model.prediction.predict import predict
from wmr_model.spatial import STANDARD_GRAVITY
from wmr_model.terrain import surface as tr
from wmr_model.vehicles.inertia import (
    composite_inertias,
    composite_workspace,
    mass_com_into,
    model_frame_inertias,
)
from wmr_model.vehicles.tree import forward_kinematics

DT = 0.04
DURATION = 5.0


@njit(cache=False)
def _fk(reps, a, Q, T_world):
    s = 0.0
    for _ in range(reps):
        for n in range(Q.shape[0]):
            for t in range(Q.shape[1] - 1):
                forward_kinematics(a[0], a[1], a[2], a[3], Q[n, t], T_world)
                s += T_world[-1, 0, 3]
    return s


@njit(cache=False)
def _contact(reps, a, tg, Q, T_world, T_contact, dz, ang, warm):
    s = 0.0
    nw = a[4].shape[0]
    for _ in range(reps):
        for n in range(Q.shape[0]):
            ws = np.zeros((nw if warm else 0, CONTACT_WS_WIDTH))
            for t in range(Q.shape[1] - 1):
                forward_kinematics(a[0], a[1], a[2], a[3], Q[n, t], T_world)
                wheel_contact(a, tg, T_world, T_contact, dz, ang, ws)
                s += dz[0]
    return s


@njit(cache=False)
def _constraints(reps, a, Q, T_worlds, T_contacts, dzs, angs, sigma, vc, d, build):
    s = 0.0
    for _ in range(reps):
        for n in range(Q.shape[0]):
            for t in range(Q.shape[1] - 1):
                # the recorded state (n, t) copied into d (with build False only the copies
                # run: timed alone and subtracted); d's A and v written
                d.T_world[:] = T_worlds[n, t]
                d.T_contact[:] = T_contacts[n, t]
                d.dz[:] = dzs[n, t]
                d.contact_angle[:] = angs[n, t]
                if build:
                    constraint_system(a, d, Q[n, t], sigma, vc)
                s += d.A[0, 0]
    return s


@njit(cache=False)
def _solve(reps, As, vs, known, qcmd, qdot, ws):
    s = 0.0
    for _ in range(reps):
        for n in range(As.shape[0]):
            for t in range(As.shape[1]):
                s += solve_partitioned(As[n, t], vs[n, t], known, qcmd[n, t], qdot, ws)
    return s


@njit(cache=False)
def _resolve(reps, As, vs, known, qcmd, qdot, ws):
    s = 0.0
    for _ in range(reps):
        for n in range(As.shape[0]):
            for t in range(As.shape[1]):
                s += resolve_partitioned(As[n, t], vs[n, t], known, qcmd[n, t], qdot, ws)
    return s


@njit(cache=False)
def _slip(reps, Ibs, qdots, As, T_worlds, p, axes, gravity, vc_slip):
    """Body force (2.44)-(2.47) and slip (2.48)-(2.52) as in the enhanced kernel."""
    s = 0.0
    g_b = np.zeros(6)
    f_b = np.empty(6)
    v_cg = np.empty(6)
    c = np.empty(3)
    f_cg = np.empty(6)
    v_b_slip = np.empty(6)
    for _ in range(reps):
        for n in range(Ibs.shape[0]):
            for t in range(Ibs.shape[1]):
                Ib = Ibs[n, t]
                m = mass_com_into(Ib, c)
                Rb = T_worlds[n, t, 0, :3, :3]
                for r in range(3):
                    g_b[3 + r] = (Rb[0, r] * gravity[0] + Rb[1, r] * gravity[1]
                                  + Rb[2, r] * gravity[2])
                v_b = qdots[n, t, 0:6]
                E.body_force_into(Ib, g_b, v_b, f_b)
                E.cg_force_into(c, f_b, f_cg)
                E._shift_motion(v_b, c, 1.0, v_cg)
                s_cg = E.cg_slip_velocity(v_cg, f_cg, p, axes, 1e-3 * m * 9.8)
                E._shift_motion(s_cg, c, -1.0, v_b_slip)
                E.wheel_slip_velocity(As[n, t], v_b_slip, vc_slip.shape[0], vc_slip)
                s += vc_slip[0, 0]
    return s


@njit(cache=False)
def _jsv(reps, a, tg, Q, known, qcmd, sigma, vc, d):
    s = 0.0
    for _ in range(reps):
        for n in range(Q.shape[0]):
            d.contact_ws[:, :] = 0.0  # a new trajectory: no warm start yet
            for t in range(Q.shape[1] - 1):
                s += joint_space_velocity(a, tg, d, Q[n, t], known, qcmd[n, t], sigma, vc,
                                          d.qdot)
    return s


@njit(cache=False)
def _composite(reps, parent, I_frame, T_worlds, Ic):
    s = 0.0
    ws = composite_workspace()
    for _ in range(reps):
        for n in range(T_worlds.shape[0]):
            for t in range(T_worlds.shape[1]):
                s += composite_inertias(parent, I_frame, T_worlds[n, t], Ic, ws)[5, 5]
    return s


@njit(cache=False)
def _body_composite(reps, f, keep, parent_k, I_k, T_worlds, T_k, Ic_k):
    s = 0.0
    ws = composite_workspace()
    for _ in range(reps):
        for n in range(T_worlds.shape[0]):
            for t in range(T_worlds.shape[1]):
                s += f(keep, parent_k, I_k, T_worlds[n, t], T_k, Ic_k, ws)[5, 5]
    return s


@njit(cache=False)
def _enhanced(reps, a, tg, Q, known, qcmd, sigma, vc, slip, d):
    s = 0.0
    for _ in range(reps):
        for n in range(Q.shape[0]):
            d.contact_ws[:, :] = 0.0  # a new trajectory: no warm start yet
            for t in range(Q.shape[1] - 1):
                s += E.enhanced_joint_space_velocity(a, tg, d, Q[n, t], known, qcmd[n, t], sigma,
                                                     vc, d.qdot, slip)
    return s


@njit(cache=False)
def _margin(reps, T_worlds, T_contacts, cs, fs):
    s = 0.0
    ws = E.margin_workspace(T_contacts.shape[2])
    for _ in range(reps):
        for n in range(T_worlds.shape[0]):
            for t in range(T_worlds.shape[1]):
                s += E.stability_margin(T_worlds[n, t], T_contacts[n, t], cs[n, t], fs[n, t], ws)
    return s


@njit(cache=False)
def _covariance(reps, T_worlds, qdots, Qprime, dt):
    s = 0.0
    F = np.zeros((6, 6))
    G = np.zeros((6, 6))
    P = np.zeros((6, 6))
    ws = covariance_workspace()
    for _ in range(reps):
        for n in range(T_worlds.shape[0]):
            P[:, :] = 0.0
            for t in range(T_worlds.shape[1]):
                error_dynamics(T_worlds[n, t, 0, :3, :3], qdots[n, t, 3:6], F, G)
                propagate_covariance(P, F, G, Qprime, dt, P, ws)
            s += P[3, 3]
    return s


@njit(cache=False)
def _pose_covariance(reps, f, T_worlds, qdots, Qprime, dt):
    s = 0.0
    P = np.zeros((6, 6))
    ws = covariance_workspace()
    for _ in range(reps):
        for n in range(T_worlds.shape[0]):
            P[:, :] = 0.0
            for t in range(T_worlds.shape[1]):
                f(P, T_worlds[n, t, 0, :3, :3], qdots[n, t, 3:6], Qprime, dt, P, ws)
            s += P[3, 3]
    return s


@njit(cache=False)
def _terrain(reps, tg, xy):
    s = 0.0
    for _ in range(reps):
        for k in range(xy.shape[0]):
            s += tr.terrain_height_normal(tg[0], tg[1], tg[2], xy[k, 0], xy[k, 1])[0]
    return s


def _per_step(f, states: int, *args) -> float:
    """µs per state of ``f(reps, *args)``: best of three timed calls after a warm-up, in
    process CPU time (one thread; less disturbed than wall time on a shared machine)."""
    f(1, *args)
    best = np.inf
    for _ in range(3):
        t0 = time.process_time()
        f(_REPS, *args)
        best = min(best, time.process_time() - t0)
    return best / (_REPS * states) * 1e6


_REPS = 4


def main(n: int = 16, reps: int = 4, quiet: bool = False) -> dict:
    global _REPS
    _REPS = reps
    from wmr_model._jit import set_num_threads

    set_num_threads(1)
    m = load_vehicle("zoe")
    terrain = tr.rough(0.15, 0.8, seed=0, x_range=(-10, 10), y_range=(-10, 10))
    q0, commands, _ = ex.random_twist_candidates(m, terrain, n, DT, DURATION, seed=0)
    T = commands.shape[1]
    kw = dict(fidelity="enhanced", slip_params=ex.BATCH_SLIP, Qprime=ex.BATCH_QPRIME)
    pr = predict(m, terrain, q0, commands, DT, **kw)
    Q = np.ascontiguousarray(pr.q)  # (n, T+1, nq)
    a = m.kinematic_arrays()
    tg = terrain.kernel_args()
    known = kin.simulation_known(m)
    qcmd = np.zeros((n, T, m.nv))
    qcmd[:, :, 6 + m.actuated_joints] = commands
    sigma = kin.DEFAULT_STABILIZATION / DT
    vc = np.zeros((m.nc, 2))
    mrows = 3 * m.nc + a[6].shape[0] + loop_closure_rows(a[8])
    I_frame = model_frame_inertias(m)
    gravity = np.array([0.0, 0.0, -STANDARD_GRAVITY])
    p = np.ascontiguousarray(ex.BATCH_SLIP, dtype=float)
    axes = E.slip_axes_array()
    states = n * T

    # recorded per-state workspace (warm contact along each run) for the later kernels
    T_worlds = np.empty((n, T, m.nf, 4, 4))
    T_contacts = np.empty((n, T, m.nc, 4, 4))
    dzs = np.empty((n, T, m.nc))
    angs = np.empty((n, T, m.nc))
    As = np.empty((n, T, mrows, m.nv))
    vs = np.empty((n, T, mrows))
    qdots = np.empty((n, T, m.nv))
    cs = np.empty((n, T, 3))
    fs = np.empty((n, T, 6))
    Ibs = np.empty((n, T, 6, 6))
    xy = []
    slip = E.BodySlip(I_frame, gravity, p, axes, True)
    for i in range(n):
        d = kin.create_data(m, known)
        Ic, f_cg, c = d.Ic, d.f_cg, d.cg
        for t in range(T):
            E.enhanced_joint_space_velocity(a, tg, d.kernel, Q[i, t], known, qcmd[i, t], sigma,
                                            vc, d.qdot, slip)
            T_worlds[i, t] = d.T_world
            T_contacts[i, t] = d.T_contact
            dzs[i, t] = d.dz
            angs[i, t] = d.contact_angle
            As[i, t] = d.A
            vs[i, t] = d.v
            qdots[i, t] = d.qdot
            cs[i, t] = c
            fs[i, t] = f_cg
            Ibs[i, t] = Ic[0]
            xy.append(d.T_contact[:, :2, 3].copy())
    xy = np.ascontiguousarray(np.concatenate(xy))
    d = kin.create_data(m)
    ws = (d.T_world, d.T_contact, d.dz, d.contact_angle)
    us = {}
    us["forward_kinematics"] = _per_step(_fk, states, a, Q, d.T_world)
    us["fk + wheel_contact warm"] = _per_step(_contact, states, a, tg, Q, *ws, True)
    us["fk + wheel_contact cold"] = _per_step(_contact, states, a, tg, Q, *ws, False)
    us["wheel_contact warm"] = us["fk + wheel_contact warm"] - us["forward_kinematics"]
    us["wheel_contact cold"] = us["fk + wheel_contact cold"] - us["forward_kinematics"]
    rows_args = (a, Q, T_worlds, T_contacts, dzs, angs, sigma, vc, d.kernel)
    us["constraint_system"] = (_per_step(_constraints, states, *rows_args, True)
                               - _per_step(_constraints, states, *rows_args, False))
    us["solve_partitioned"] = _per_step(_solve, states, As, vs, known, qcmd, d.qdot,
                                        solve_workspace(mrows, known))
    sws = solve_workspace(mrows, known)
    solve_partitioned(As[0, 0], vs[0, 0], known, qcmd[0, 0], d.qdot, sws)
    us["resolve_partitioned"] = _per_step(_resolve, states, As, vs, known, qcmd, d.qdot, sws)
    kd = kin.create_data(m, known).kernel
    us["joint_space_velocity (total)"] = _per_step(_jsv, states, a, tg, Q, known, qcmd, sigma,
                                                   vc, kd)
    Ic = np.empty((m.nf, 6, 6))
    us["composite_inertias"] = _per_step(_composite, states, m.parent, I_frame, T_worlds, Ic)
    # the enhanced kernel with the scratch the prediction loop uses (wheel inertias folded into
    # their parents where this version of the package does that)
    folded_ws = getattr(E, "folded_enhanced_workspace", None)
    if folded_ws is not None:
        ews = folded_ws(m.parent, m.joint_type, m.axis, m.T0, I_frame)
        inertia = importlib.import_module("wmr_model.vehicles.inertia")
        body_composite = inertia.body_composite_inertia
        us["body_composite_inertia (wheels folded)"] = _per_step(
            _body_composite, states, body_composite, ews[5], ews[6], ews[7], T_worlds, ews[8],
            ews[9])
    else:
        ews = E.enhanced_workspace()
    us["enhanced_joint_space_velocity (total)"] = _per_step(
        _enhanced, states, a, tg, Q, known, qcmd, sigma, vc, slip, kd._replace(enhanced_ws=ews))
    us["enhanced extra (body force, slip, re-solve)"] = (
        us["enhanced_joint_space_velocity (total)"] - us["joint_space_velocity (total)"]
        - us.get("body_composite_inertia (wheels folded)", us["composite_inertias"]))
    us["body force + slip (2.44)-(2.52)"] = _per_step(_slip, states, Ibs, qdots, As, T_worlds,
                                                      p, axes, gravity, np.empty((m.nc, 2)))
    us["stability_margin"] = _per_step(_margin, states, T_worlds, T_contacts, cs, fs)
    us["covariance (error_dynamics + propagate)"] = _per_step(_covariance, states, T_worlds,
                                                              qdots, ex.BATCH_QPRIME, DT)
    pose_cov = getattr(importlib.import_module("wmr_model.kinematics.uncertainty"),
                       "propagate_pose_covariance", None)
    if pose_cov is not None:
        us["propagate_pose_covariance (structured)"] = _per_step(
            _pose_covariance, states, pose_cov, T_worlds, qdots, ex.BATCH_QPRIME, DT)
    us["terrain_height_normal (per call)"] = _per_step(_terrain, xy.shape[0], tg, xy)

    def loop(every):
        predict(m, terrain, q0, commands, DT, every=every, **kw)  # warm-up
        best = np.inf
        for _ in range(3 * _REPS):
            t0 = time.process_time()
            predict(m, terrain, q0, commands, DT, every=every, **kw)
            best = min(best, time.process_time() - t0)
        return best / states * 1e6

    us["predict_trajectory, every=1 (one thread)"] = loop(1)
    us["predict_trajectory, every=T (one thread)"] = loop(T)
    kernels = (us["enhanced_joint_space_velocity (total)"] + us["stability_margin"]
               + us.get("propagate_pose_covariance (structured)",
                        us["covariance (error_dynamics + propagate)"]))
    us["loop overhead every=1 (integration, flags, writes)"] = (
        us["predict_trajectory, every=1 (one thread)"] - kernels)
    us["loop overhead every=T"] = us["predict_trajectory, every=T (one thread)"] - kernels
    result = {"vehicle": m.name, "candidates": n, "steps": T, "dt": DT, "us_per_step": us}
    if quiet:
        print(json.dumps(result))
        return result
    print(f"Zoë, {n} candidates x {T} steps, enhanced + covariance, one thread; "
          f"CPU µs per candidate-step (best of 3, {reps} passes)")
    for k, val in us.items():
        print(f"  {k:<52}{val:8.3f}")
    return result


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("n", nargs="?", type=int, default=16)
    ap.add_argument("reps", nargs="?", type=int, default=4)
    ap.add_argument("--json", action="store_true", help="print only the JSON line")
    a_ = ap.parse_args()
    main(a_.n, a_.reps, a_.json)
