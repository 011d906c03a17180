"""Where a dynamics step of Zoë goes (issues 10, 22): per-kernel microseconds per step.

Usage: ``python bench/profile_dynamics.py [--contact MODEL] [--library-params] [--terrains N]
[--repeats R] [--json OUT]`` (``MODEL``: ``pacejka`` (default), ``ishigami`` or
``piecewise_linear``; ``--library-params``: the C++ library's contact parameters).

Zoë at 1 m/s straight over the rough wmrde benchmark terrains, dt 0.04, 10 s (the ``wmr bench
--quick --only dynamic`` run). The states of each trajectory are recorded, then every kernel of
:func:`wmr_model.dynamics.simulate.dynamics_step` is run over those states in its own compiled
loop (best of the repeats, per step): forward kinematics, CRBA (which includes forward
kinematics), cold collision, bias force (Alg. 4 or 2.89), holonomic + stacked constraint rows,
independent rows (the thesis' solver only, ``--solver thesis``); "force balance and rest" is the
compiled loop's whole step less those. Within it (joint-acceleration solver): one evaluation of
the error (:func:`~wmr_model.dynamics.joint_acceleration.acceleration_error` at each state's
next velocities; five evaluations per state less one, over four) and, of that, the contact
models' forces and Jacobians alone (every wheel, at the same rows' velocities), with the
evaluations per step taken as Newton iterations + 1 (a lower bound: each halving of the line
search evaluates once more, which the piecewise-linear model's kinks make common); one Jacobian
(:func:`~wmr_model.dynamics.joint_acceleration.acceleration_jacobian`, the same difference
with it after each error), taken once per Newton iteration.
``--solver`` picks the force balance (default: the default one,
:data:`wmr_model.dynamics.model.DEFAULT_SOLVER`).
Also printed: the Newton iterations and the ``simulate_dynamics`` call (with its Python set-up)
per step and as a real-time factor. Numbers are printed, never asserted.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from wmr_model._jit import njit
from wmr_model.contact.models import contact_force
from wmr_model.dynamics.constraints import (
    assemble_constraints,
    independent_rows_into,
    rows_workspace,
)
from wmr_model.dynamics.crba import crba_into, crba_workspace, relative_transforms
from wmr_model.dynamics.data import create_step_data
from wmr_model.dynamics.joint_acceleration import (
    AccelArgs,
    acceleration_error,
    acceleration_jacobian,
)
from wmr_model.dynamics.model import (
    DEFAULT_SOLVER,
    SOLVERS,
    DynamicsOptions,
    compile_dynamics,
)
from wmr_model.dynamics.rnea import bias_force_fused, bias_force_into, rnea_workspace
from wmr_model.dynamics.simulate import (
    _model_forces,
    _row_flags,
    _step_kinematics,
    create_rollout,
    dynamics_step,
    simulate_dynamics,
    simulate_loop,
    warm_wheel_contact,
)
from wmr_model.experiments import dynamic as sc
from wmr_model.io.terrain_files import load_wmrde_benchmark_terrains
from wmr_model.io.vehicles import load_vehicle
from wmr_model.kinematics.constraints import holonomic_constraints
from wmr_model.kinematics.feedback import no_feedback, no_feedback_inputs
from wmr_model.kinematics.wheel_collision import wheel_contact
from wmr_model.vehicles.tree import forward_kinematics

DT = 0.04
DURATION = 10.0


@njit
def _fk_loop(parent, jtype, axis, T0, Q, TW):
    for t in range(Q.shape[0]):
        forward_kinematics(parent, jtype, axis, T0, Q[t], TW[t])


@njit
def _crba_loop(parent, jtype, axis, T0, I_frame, Q, TW, Ic, M):
    ws = crba_workspace(parent.shape[0])
    for t in range(Q.shape[0]):
        crba_into(parent, jtype, axis, T0, I_frame, Q[t], TW[t], Ic, M, ws)


@njit
def _contact_loop(m, ter, TW, TC, DZ, ANG):
    for t in range(TW.shape[0]):
        wheel_contact(m, ter, TW[t], TC[t], DZ[t], ANG[t])


@njit
def _warm_contact_loop(m, ter, TW, TC, DZ, ANG, cws, fan):
    cws[:, 0] = 0.0  # each timed pass starts cold, as a trajectory does
    for t in range(TW.shape[0]):  # ANG (nw,): the previous step's angles, overwritten
        warm_wheel_contact(m, ter, TW[t], TC[t], DZ[t], ANG, cws, fan)


@njit
def _rel_loop(parent, TW, RU, PU):
    for t in range(TW.shape[0]):
        relative_transforms(parent, TW[t], RU[t], PU[t])


@njit
def _bias_loop(dm, Q, QD, TW, RU, PU, Ic, c, ws):
    """The bias force as the step computes it: from the CRBA's kinematics (RU, PU)."""
    for t in range(Q.shape[0]):
        if dm.opt.fused:
            bias_force_fused(np.ascontiguousarray(Ic[0]), dm.gravity, Q[t], QD[t], c)
        else:
            bias_force_into(dm.kin, dm.I_frame, dm.gravity, QD[t], TW[t], (RU[t], PU[t]), c,
                            ws)


@njit
def _rows_loop(dm, Q, TW, TC, c_hol, J_hol, AA):
    m = dm.kin
    for t in range(Q.shape[0]):
        holonomic_constraints(m.parent, m.jtype, m.axis, m.A_joint, m.joint_offset,
                              m.loop_closure, Q[t], TW[t], c_hol, J_hol)
        assemble_constraints(m.parent, m.jtype, m.axis, m.wheel_frame, J_hol, dm.act_joints,
                             TW[t], TC[t], AA[t])


@njit
def _indep_loop(AA, active, cols, forced, indep):
    n = 0
    ws = rows_workspace(AA.shape[1], AA.shape[2])
    for t in range(AA.shape[0]):
        n += independent_rows_into(AA[t], active, cols, forced, indep, ws)
    return n


@njit
def _setup_loop(dm, ter, d, Q, QD, U, q_next, qd_next):
    """dynamics_step over the recorded states with no Newton iteration (``dm.opt.max_iter``
    0): everything but the iterations (the force balance evaluates its warm start once)."""
    for t in range(Q.shape[0]):
        dynamics_step(dm, ter, d, Q[t], QD[t], U[t], q_next, qd_next)


# The evaluation and contact-model loops are compiled refcount-free, as Newton's method is
# (wmr_model._jit): in a reference-counted loop every array taken from the inlined records
# (the step's ModelForces has 20) costs an atomic increment and decrement per evaluation,
# ~0.4 us that the product does not pay.
@njit(refcount=False)
def _eval_loop(dm, ter, d, Q, QD, X, U, reps, jacobian):
    """Each recorded state's step kinematics and row flags, then ``reps`` evaluations of the
    joint-acceleration error (with its Jacobian if ``jacobian``) at the recorded next
    velocities ``X``, as Newton's method runs them."""
    nw = dm.kin.wheel_frame.shape[0]
    nF = d.free.shape[0]
    R = d.fb[10][:nF * nF].reshape((nF, nF))  # as Newton's method places J_FF
    for t in range(Q.shape[0]):
        _step_kinematics(dm, ter, d, Q[t], QD[t], U[t])
        _row_flags(dm, d, nw)
        a = AccelArgs(d.M, d.c, QD[t], _model_forces(dm, d, U[t], d.dz, d.A, d.eye),
                      d.contact_jac)
        for _ in range(reps):
            acceleration_error(X[t], a, d.Minv_tc, d.fmodel, d.fb)
            if jacobian:
                acceleration_jacobian(X[t], a, d.free, R, d.fb)


@njit
def _force_inputs(dm, ter, d, Q, QD, X, U, Y, RW, DZN):
    """The contact models' inputs at each recorded state's next velocities, as
    :func:`~wmr_model.dynamics.force_balance.contact_terms` forms them: row velocities ``Y``
    (T, nw, 3), ``R w`` ``RW`` (T, nw) and the next step's contact height error ``DZN``."""
    nw = dm.kin.wheel_frame.shape[0]
    for t in range(Q.shape[0]):
        _step_kinematics(dm, ter, d, Q[t], QD[t], U[t])
        v = d.A @ X[t]
        for k in range(nw):
            for r in range(3):
                Y[t, k, r] = v[3 * k + r]
            RW[t, k] = dm.trk.contact_radius[k] * X[t, 6 + dm.trk.contact_joint[k]]
            DZN[t, k] = d.dz[k] + dm.opt.dt * Y[t, k, 2]


@njit(refcount=False)
def _force_loop(dm, Y, RW, DZN, fc, J):
    for t in range(Y.shape[0]):
        for k in range(Y.shape[1]):
            contact_force(dm.ckinds[k], dm.cparams[k], dm.ctables[k], dm.caxes[k], Y[t, k],
                          RW[t, k], DZN[t, k], fc, J)


def _warm_started(d, v_prev: np.ndarray):
    """``d`` with the row velocities of the first step's warm start."""
    d.v_prev[:] = v_prev
    return d


def _best(fn, repeats: int) -> float:
    fn()  # compile / warm
    best = np.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _profile_terrain(model, ter, U: np.ndarray, repeats: int, collision: str, solver: str,
                     contact: str, params: dict | None = None) -> tuple[dict, float]:
    """Per-kernel microseconds per step on one terrain, and the mean Newton iterations."""
    T = U.shape[0]
    q0, qd0 = sc._moving_start(model, ter, 1.0)
    dm, _ = compile_dynamics(model, DT, DynamicsOptions(contact_model=contact,
                                                        contact_params=params,
                                                        collision=collision, solver=solver))
    km, ta = dm.kin, ter.kernel_args()
    parent, jtype, axis, T0, wheel_frame = km.parent, km.jtype, km.axis, km.T0, km.wheel_frame
    A_joint, I_frame, act = km.A_joint, dm.I_frame, dm.act_joints
    nf, nw, nv = parent.shape[0], wheel_frame.shape[0], model.nv
    nc = 3 * nw + act.shape[0] + A_joint.shape[0]
    tr = simulate_dynamics(model, ter, q0, qd0, U, DT, contact_model=contact,
                           contact_params=params, collision=collision, solver=solver)
    Q = np.ascontiguousarray(tr.q[:-1])
    QD = np.ascontiguousarray(tr.qdot[:-1])
    TW = np.empty((T, nf, 4, 4))
    Ic = np.empty((nf, 6, 6))
    M = np.empty((nv, nv))
    TC = np.empty((T, nw, 4, 4))
    DZ = np.empty((T, nw))
    ANG = np.empty((T, nw))
    RU = np.empty((T, nf, 3, 3))
    PU = np.empty((T, nf, 3))
    c = np.empty(nv)
    nh = A_joint.shape[0]
    c_hol, J_hol = np.empty(nh), np.empty((nh, nv))
    AA = np.empty((T, nc, nv))
    active = np.ones(nc, dtype=np.bool_)
    forced = np.zeros(nc, dtype=np.bool_)
    cols = np.ones(nv, dtype=np.bool_)
    indep = np.empty(nc, dtype=np.bool_)
    for k in range(act.shape[0]):  # ideal actuators, as in dynamics_step
        forced[3 * nw + k] = True
        cols[6 + act[k]] = False
    out = create_rollout(model, 1, T)
    one = type(out)(*(a[0] for a in out))
    X = np.ascontiguousarray(tr.qdot[1:])  # each step's next velocities
    de = create_step_data(dm, nv)
    Y, RW, DZN = np.empty((T, nw, 3)), np.empty((T, nw)), np.empty((T, nw))
    _force_inputs(dm, ta, de, Q, QD, X, U, Y, RW, DZN)
    # no iteration, and no rescue of the unconverged step by the thesis' solver
    dm0 = dm._replace(opt=dm.opt._replace(single_step=True, max_iter=0))
    d0 = create_step_data(dm0, nv)
    runs = {
        "fk": lambda: _fk_loop(parent, jtype, axis, T0, Q, TW),
        "crba": lambda: _crba_loop(parent, jtype, axis, T0, I_frame, Q, TW, Ic, M),
        "contact": lambda: _contact_loop(km, ta, TW, TC, DZ, ANG),
        "contact_warm": lambda: _warm_contact_loop(km, ta, TW, TC, DZ, np.zeros(nw),
                                                   np.zeros((nw, 7)), np.zeros((nw, 7, 3))),
        "rel": lambda: _rel_loop(parent, TW, RU, PU),
        "bias": lambda: _bias_loop(dm, Q, QD, TW, RU, PU, Ic, c, rnea_workspace(nf, nv)),
        "rows": lambda: _rows_loop(dm, Q, TW, TC, c_hol, J_hol, AA),
        "indep": lambda: _indep_loop(AA, active, cols, forced, indep),
        "eval1": lambda: _eval_loop(dm, ta, de, Q, QD, X, U, 1, False),
        "eval5": lambda: _eval_loop(dm, ta, de, Q, QD, X, U, 5, False),
        "jac1": lambda: _eval_loop(dm, ta, de, Q, QD, X, U, 1, True),
        "jac5": lambda: _eval_loop(dm, ta, de, Q, QD, X, U, 5, True),
        "forces": lambda: _force_loop(dm, Y, RW, DZN, np.empty(3), np.empty((3, 5))),
        "setup": lambda: _setup_loop(dm0, ta, _warm_started(d0, AA[0] @ QD[0]), Q, QD, U,
                                     np.empty(model.nq), np.empty(nv)),
        "step": lambda: simulate_loop(dm, ta, q0, qd0, U, one, no_feedback(),
                                      no_feedback_inputs(batched=False)),
        "call": lambda: simulate_dynamics(model, ter, q0, qd0, U, DT,
                                          contact_model=contact, contact_params=params,
                                          collision=collision, solver=solver),
    }
    # in order: each loop's inputs come from the ones before
    return {k: _best(f, repeats) / T * 1e6 for k, f in runs.items()}, float(tr.iterations.mean())


def profile(n_terrains: int = 3, repeats: int = 5, collision: str = "cold",
            solver: str = DEFAULT_SOLVER, contact: str = "pacejka",
            library: bool = False) -> dict:
    model = load_vehicle("zoe")
    params = sc.zoe_library_contact_params(model) if library else None
    terrains = load_wmrde_benchmark_terrains()[:n_terrains]
    u = sc.straight_wheel_rates(model, 1.0)
    T = round(DURATION / DT)
    U = np.tile(u, (T, 1))
    keys = ("fk", "crba", "contact", "contact_warm", "rel", "bias", "rows", "indep", "eval1",
            "eval5", "jac1", "jac5", "forces", "setup", "step", "call")
    acc = {k: 0.0 for k in keys}
    iters = []
    for ter in terrains:
        us, it = _profile_terrain(model, ter, U, repeats, collision, solver, contact, params)
        iters.append(it)
        for k in keys:
            acc[k] += us[k] / len(terrains)
    coll = acc["contact_warm"] if collision == "warm" else acc["contact"]
    parts = acc["crba"] + coll + acc["bias"] + acc["rows"]
    if solver == "thesis":
        parts += acc["indep"]
    out = {"us_per_step": acc, "force_balance_and_rest": acc["step"] - parts,
           "newton_iterations": acc["step"] - acc["setup"],
           "mean_iterations": float(np.mean(iters)),
           "error_evaluation": (acc["eval5"] - acc["eval1"]) / 4.0,
           "jacobian_evaluation": ((acc["jac5"] - acc["jac1"]) - (acc["eval5"] - acc["eval1"]))
           / 4.0,
           "real_time_factor_call": DT / (acc["call"] * 1e-6),
           "real_time_factor_loop": DT / (acc["step"] * 1e-6), "terrains": len(terrains),
           "solver": solver, "contact_model": contact, "library_params": library}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--terrains", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--collision", choices=("cold", "warm"), default="cold",
                    help="wheel collision search of the whole-step runs (the collision kernel "
                         "line always times the cold fan)")
    ap.add_argument("--solver", choices=SOLVERS, default=DEFAULT_SOLVER)
    ap.add_argument("--contact", choices=("pacejka", "ishigami", "piecewise_linear"),
                    default="pacejka", help="contact model of every wheel (default pacejka)")
    ap.add_argument("--library-params", action="store_true",
                    help="the C++ library's contact parameters (zoe_library_contact_params; "
                         "piecewise_linear and pacejka), the workload of its figures")
    ap.add_argument("--json")
    ns = ap.parse_args()
    r = profile(ns.terrains, ns.repeats, ns.collision, ns.solver, ns.contact,
                ns.library_params)
    us = r["us_per_step"]
    lib = " (C++ library parameters)" if ns.library_params else ""
    print(f"Zoe, {ns.contact}{lib}, dt {DT}, {DURATION:g} s, {r['terrains']} terrains, "
          f"{ns.collision} collision, {ns.solver} solver, mean Newton iterations "
          f"{r['mean_iterations']:.3f}; "
          "microseconds per step (best of repeats)")
    names = {"fk": "forward kinematics (inside CRBA)", "crba": "CRBA (Alg. 3, with FK)",
             "contact": "collision (cold fan)",
             "contact_warm": "collision (warm, warm_wheel_contact)",
             "bias": "bias force (Alg. 4, FK reused)",
             "rows": "holonomic + constraint rows", "indep": "independent rows (QR)"}
    if ns.solver != "thesis":
        names["indep"] = "independent rows (QR, thesis only)"
    for k, label in names.items():
        print(f"  {label:36s} {us[k]:7.2f}")
    print(f"  {'force balance and rest':36s} {r['force_balance_and_rest']:7.2f}")
    print(f"    {'of which Newton iterations':34s} {r['newton_iterations']:7.2f}  (step less "
          "the step with max_iter 0)")
    if ns.solver != "thesis":
        ev, jv = r["error_evaluation"], r["jacobian_evaluation"]
        n_ev = r["mean_iterations"] + 1.0
        n_j = r["mean_iterations"]
        print(f"    {'one error evaluation':34s} {ev:7.2f}  (x {n_ev:.2f} per step = "
              f"{ev * n_ev:.2f}; at least: line-search halvings add evaluations)")
        print(f"      {'of which the tyre forces':32s} {us['forces']:7.2f}  (x {n_ev:.2f} = "
              f"{us['forces'] * n_ev:.2f})")
        print(f"    {'one Jacobian (Newton steps only)':34s} {jv:7.2f}  (x {n_j:.2f} per step = "
              f"{jv * n_j:.2f})")
    print(f"  {'whole compiled step':36s} {us['step']:7.2f}  ({r['real_time_factor_loop']:,.0f}x"
          " real time)")
    print(f"  {'simulate_dynamics call':36s} {us['call']:7.2f}  ({r['real_time_factor_call']:,.0f}x"
          " real time)")
    if ns.json:
        with open(ns.json, "w", encoding="utf-8") as fh:
            json.dump(r, fh, indent=1)


if __name__ == "__main__":
    main()
