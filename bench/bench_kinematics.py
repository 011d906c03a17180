"""Kinematic benchmarks of thesis §2.5: Table 2.4 (Rocky 7) and Table 2.6 "kinematic" (Zoë).

Usage: ``python bench/bench_kinematics.py [--quick] [--kernels] [--json OUT]``. Prints both
tables with the thesis' figures beside ours; ``--kernels`` instead profiles one kinematic step:
each per-step kernel timed alone in a compiled loop over the states of the Zoë benchmark runs
(dt 0.04), then the whole step, a bare loop of it (the step with the vehicle's specialized
solve and the Euler update, nothing recorded) and the whole run (the Table 2.6 figure per step);
the last two differ by the prediction loop's own cost (output writes, options, call). Timing
numbers are reported, never asserted.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time

import numpy as np

from wmr_model._jit import njit
from wmr_model.experiments import kinematic as ex
from wmr_model.io.terrain_files import load_wmrde_benchmark_terrains
from wmr_model.io.vehicles import load_vehicle
from wmr_model.kinematics import api as kin
from wmr_model.kinematics.constraints import constraint_system
from wmr_model.kinematics.integrate import integrate_euler
from wmr_model.kinematics.solve import (
    joint_space_velocity,
    resolve_partitioned,
    solve_partitioned,
    solve_workspace,
)
from wmr_model.kinematics.specialized import model_solve
from wmr_model.kinematics.wheel_collision import contact_workspace, wheel_contact
from wmr_model.vehicles.tree import forward_kinematics


def _fmt(v, spec=".4f"):
    return "-" if v is None else format(v, spec)


def rocky7_table(quick: bool) -> list[dict]:
    model = load_vehicle("rocky7")
    seeds = range(3) if quick else range(10)
    ex.run_straight(model, ex.rocky7_terrain(0), 0.5, 0.2, 0.04)  # compile outside timing
    ex.run_straight(model, ex.rocky7_terrain(0), 0.5, 0.2, 0.04, method="unconstrained")
    rows = ex.summarize_rocky7(ex.rocky7_rough_terrain(model, seeds=seeds))
    print(f"\nTable 2.4 - Rocky 7, 0.5 m/s straight, 10 s, rough terrain RMS 0.05 m / corr "
          f"0.2 m, {len(list(seeds))} seeds (thesis: 10 seeds, MATLAB timings)")
    print(f"{'method':14s} {'dt':>5s} | {'mean|vc|':>8s} {'thesis':>7s} | {'pos err':>7s} "
          f"{'thesis':>7s} | {'yaw err':>7s} {'thesis':>7s} | {'lat dev':>7s} | "
          f"{'norm time':>9s} {'thesis':>7s}")
    for r in rows:
        t = r["thesis"] or (None,) * 5
        print(f"{r['method']:14s} {r['dt']:5.2f} | {r['mean_contact_speed']:8.4f} "
              f"{_fmt(t[0]):>7s} | {_fmt(r['position_error']):>7s} {_fmt(t[1]):>7s} | "
              f"{_fmt(r['yaw_error']):>7s} {_fmt(t[2]):>7s} | {r['lateral_deviation']:7.4f} | "
              f"{r['normalized_time']:9.5f} {_fmt(t[4]):>7s}")
    return rows


def zoe_table(quick: bool) -> list[dict]:
    model = load_vehicle("zoe")
    terrains = load_wmrde_benchmark_terrains()
    if quick:
        terrains = terrains[:3]
    rows = ex.zoe_kinematic_benchmark(model, terrains, repeats=2 if quick else 5)
    print(f"\nTable 2.6 kinematic - Zoe, 1 m/s straight, 10 s, {len(terrains)} wmrde benchmark "
          "terrains (RMS 0.15 m / corr 0.8 m), single thread, Euler")
    print(f"{'dt':>5s} | {'norm time x1e-3':>15s} {'thesis C++':>10s} | {'x real time':>11s} "
          f"{'thesis':>7s} | {'mean|vc|':>8s}")
    for r in rows:
        print(f"{r['dt']:5.2f} | {r['normalized_time_e3']:15.4f} "
              f"{_fmt(r['thesis_normalized_time_e3']):>10s} | {r['real_time_factor']:11.0f} "
              f"{_fmt(r['thesis_real_time_factor'], '.0f'):>7s} | {r['mean_contact_speed']:8.4f}")
    return rows


@njit(cache=False)
def _time_fk(m, Q, T_world):
    for s in range(Q.shape[0]):
        forward_kinematics(m[0], m[1], m[2], m[3], Q[s], T_world)


@njit(cache=False)
def _time_contact(m, t, TW, T_contact, dz, ang, ws):
    ws[:, :] = 0.0  # a trajectory: cold first call, then warm-started
    for s in range(TW.shape[0]):
        wheel_contact(m, t, TW[s], T_contact, dz, ang, ws)


@njit(cache=False)
def _time_constraints(m, Q, TW, TC, DZ, ANG, sigma, vc, d, build):
    for s in range(Q.shape[0]):
        # the workspace of state s (its frames and contacts), d's A and v written; with build
        # False only the copies run (timed alone and subtracted)
        d.T_world[:] = TW[s]
        d.T_contact[:] = TC[s]
        d.dz[:] = DZ[s]
        d.contact_angle[:] = ANG[s]
        if build:
            constraint_system(m, d, Q[s], sigma, vc)


@njit(cache=False)
def _time_solve(AA, VV, known, qk, qdot, ws):
    for s in range(AA.shape[0]):
        solve_partitioned(AA[s], VV[s], known, qk, qdot, ws)


@njit(cache=False)
def _time_solve_resolve(AA, VV, known, qk, qdot, ws):
    # the enhanced step's pair: a solve, then the same A and known set with a new right-hand
    # side (here the first solve's residual direction, any vector does)
    for s in range(AA.shape[0]):
        solve_partitioned(AA[s], VV[s], known, qk, qdot, ws)
        resolve_partitioned(AA[s], VV[s] * 0.5, known, qk, qdot, ws)


@njit(cache=False)
def _time_euler(Q, QD, dt, qn):
    for s in range(Q.shape[0]):
        integrate_euler(Q[s], QD[s], dt, qn)


@njit(cache=False)
def _time_step(m, t, Q, known, qk, sigma, vc, d):
    d.contact_ws[:, :] = 0.0
    for s in range(Q.shape[0]):
        joint_space_velocity(m, t, d, Q[s], known, qk, sigma, vc, d.qdot)


@njit(cache=False)
def _time_bare_loop(m, t, q0, nsteps, known, qk, sigma, vc, dt, d, solver, qn):
    # the simulation's computation without its loop: each step's velocity (specialized solve)
    # and Euler update, the final state's velocity, nothing recorded
    d.contact_ws[:, :] = 0.0
    q = q0.copy()
    for s in range(nsteps + 1):
        joint_space_velocity(m, t, d, q, known, qk, sigma, vc, d.qdot, solver)
        if s < nsteps:
            integrate_euler(q, d.qdot, dt, qn)
            q, qn = qn, q
    return q


def _best(f, *args, repeats=40):
    f(*args)  # compile / warm up
    best = np.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        f(*args)
        best = min(best, time.perf_counter() - t0)
    return best


def kernel_profile(quick: bool, dt: float = 0.04) -> dict:
    """µs per step of each per-step kernel alone, the whole step, and the whole run."""
    model = load_vehicle("zoe")
    terrains = load_wmrde_benchmark_terrains()[:3 if quick else 10]
    m = model.kinematic_arrays()
    known = kin.simulation_known(model)
    qk = np.zeros(model.nv)
    qk[6 + model.actuated_joints] = ex.straight_wheel_rates(model, 1.0)
    sigma = kin.DEFAULT_STABILIZATION / dt
    vc = np.zeros((model.nc, 2))
    d = kin.create_data(model)
    qn = np.empty(model.nq)
    solver = model_solve(m, known, wait=True)
    tot: dict[str, float] = {}
    nstates = 0
    same_end = True
    for k, terrain in enumerate(terrains):
        t = terrain.kernel_args()
        _, traj = ex.run_straight(model, terrain, 1.0, 10.0, dt, "dae", k)
        Q = np.ascontiguousarray(traj.q[:-1])
        S = Q.shape[0]
        # the workspaces of each state, from the warm-started step sequence
        TW = np.empty((S, *d.T_world.shape))
        TC = np.empty((S, *d.T_contact.shape))
        DZ = np.empty((S, model.nc))
        ANG = np.empty((S, model.nc))
        AA = np.empty((S, *d.A.shape))
        VV = np.empty((S, d.v.shape[0]))
        QD = np.empty((S, model.nv))
        for s in range(S):
            kin.joint_space_velocity(model, d, terrain, Q[s], known, qk, sigma)
            TW[s], TC[s], DZ[s], ANG[s] = d.T_world, d.T_contact, d.dz, d.contact_angle
            AA[s], VV[s], QD[s] = d.A, d.v, d.qdot
        ws = contact_workspace(model.nc)
        sws = solve_workspace(d.A.shape[0], known)
        u = np.tile(ex.straight_wheel_rates(model, 1.0), (S, 1))
        bare_ws = d.kernel._replace(contact_ws=ws, solve_ws=solve_workspace(d.A.shape[0], known,
                                                                            False))
        times = {
            "forward_kinematics": _best(_time_fk, m, Q, d.T_world),
            "wheel_contact (warm)": _best(_time_contact, m, t, TW, d.T_contact, d.dz,
                                          d.contact_angle, ws),
            "constraint_system": (
                _best(_time_constraints, m, Q, TW, TC, DZ, ANG, sigma, vc, d.kernel, True)
                - _best(_time_constraints, m, Q, TW, TC, DZ, ANG, sigma, vc, d.kernel, False)),
            "solve_partitioned": _best(_time_solve, AA, VV, known, qk, d.qdot, sws),
            "solve + resolve_partitioned": _best(_time_solve_resolve, AA, VV, known, qk, d.qdot,
                                                 sws),
            "integrate_euler": _best(_time_euler, Q, QD, dt, qn),
            "joint_space_velocity (whole solve)": _best(
                _time_step, m, t, Q, known, qk, sigma, vc,
                d.kernel._replace(contact_ws=ws, solve_ws=sws)),
            "bare loop (step + Euler, nothing recorded)": _best(
                _time_bare_loop, m, t, Q[0], S, known, qk, sigma, vc, dt, bare_ws, solver, qn,
                repeats=15),
            "kin.simulate (whole run, per step)": _best(
                kin.simulate, model, terrain, Q[0], u, dt, repeats=15),
        }
        end = _time_bare_loop(m, t, Q[0], S, known, qk, sigma, vc, dt, bare_ws, solver, qn)
        same_end &= bool(np.array_equal(end, kin.simulate(model, terrain, Q[0], u, dt).q[-1]))
        for name, v in times.items():
            tot[name] = tot.get(name, 0.0) + v
        nstates += S
    rows = {name: v / nstates * 1e6 for name, v in tot.items()}
    print(f"\nKinematic step profile - Zoe, dt {dt}, {len(terrains)} benchmark terrains, "
          f"{nstates} states; best of repeats, us per step")
    for name, v in rows.items():
        print(f"  {name:42s} {v:7.3f}")
    step = rows["kin.simulate (whole run, per step)"]
    bare = rows["bare loop (step + Euler, nothing recorded)"]
    print(f"  {'=> the loop itself (whole - bare)':42s} {step - bare:7.3f}"
          f"   (bare loop ends where kin.simulate does: {'yes' if same_end else 'NO'})")
    print(f"  {'=> real-time factor':42s} {dt / (step * 1e-6):7.0f} x")
    return {"dt": dt, "terrains": len(terrains), "states": nstates, "us_per_step": rows}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--quick", action="store_true", help="fewer seeds/terrains (CI smoke run)")
    p.add_argument("--json", default=None, metavar="OUT", help="also write results as JSON")
    p.add_argument("--kernels", action="store_true",
                   help="profile the per-step kernels instead (us per step, Zoe dt 0.04)")
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    if args.kernels:
        result = {"machine": platform.processor() or platform.machine(),
                  "python": sys.version.split()[0], "kernel_profile": kernel_profile(args.quick)}
        print(f"\nbenchmark wall time {time.perf_counter() - t0:.1f} s")
        if args.json:
            with open(args.json, "w", encoding="utf-8") as f:
                json.dump(result, f, indent=1)
        return 0
    result = {"machine": platform.processor() or platform.machine(),
              "python": sys.version.split()[0],
              "rocky7_table_2_4": rocky7_table(args.quick),
              "zoe_table_2_6_kinematic": zoe_table(args.quick)}
    print(f"\nbenchmark wall time {time.perf_counter() - t0:.1f} s")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
