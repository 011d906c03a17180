"""Dynamic benchmarks of thesis §2.5.2-2.5.4: Tables 2.5, 2.6, 2.7, loss of traction, rollover.

Usage: ``python bench/bench_dynamics.py [--quick] [--json OUT]``. Prints each table with the
thesis' figures beside ours. Timing numbers are reported, never asserted.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time

import numpy as np

from wmr_model.dynamics import scenarios as sc
from wmr_model.io.terrain_files import load_wmrde_benchmark_terrains
from wmr_model.vehicles import load_vehicle


def _fmt(v, spec=".4f"):
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, spec)


def table_2_5(quick: bool) -> list[dict]:
    steps = (0.01, 0.04, 0.20) if quick else (0.01, 0.02, 0.04, 0.10, 0.20)
    sc.ramp_and_turn(step_sizes=(0.1,), stiff_methods=("BDF", "Radau", "LSODA"), duration=1.0)
    runs = sc.ramp_and_turn(step_sizes=steps)
    ref = np.array(runs[0].final_position)
    print("\nTable 2.5 - LandTamer ramp-and-turn, 20 s, Pacejka contact, P actuators "
          f"(Kp {sc.LANDTAMER_KP:g} N m s/rad); stiff ODE: SciPy, rtol 1e-2, max step 0.04 s")
    print(f"{'method':8s} {'step (s)':>8s} | {'pos diff':>8s} | {'norm time':>9s} "
          f"{'thesis':>7s} | {'iter':>5s} {'max cost/mg':>11s} | final x, y (m)")
    thesis = {"BDF": "ode15s", "Radau": "ode23tb", "LSODA": "ode23s"}
    rows = []
    for r in runs:
        d = float(np.linalg.norm(np.array(r.final_position) - ref))
        key = "dae" if r.method == "dae" else thesis[r.method]
        t_row = (sc.THESIS_TABLE_2_5["dae"].get(r.dt) if r.method == "dae"
                 else next(iter(sc.THESIS_TABLE_2_5[key].values())))
        row = {**r.summary(), "position_difference": None if r is runs[0] else d,
               "thesis_normalized_time": t_row[1] if t_row else None,
               "thesis_position_difference": t_row[0] if t_row else None}
        rows.append(row)
        print(f"{r.method:8s} {r.dt:8.4f} | {_fmt(row['position_difference']):>8s} | "
              f"{r.normalized_time:9.5f} {_fmt(row['thesis_normalized_time']):>7s} | "
              f"{_fmt(r.mean_iterations, '.3f'):>5s} {_fmt(r.max_cost, '.1e'):>11s} | "
              f"{r.final_position[0]:.3f}, {r.final_position[1]:.3f}")
    print("(thesis solvers: ode15s ~ BDF, ode23tb ~ Radau (both implicit), ode23s ~ LSODA row)")
    return rows


def traction_and_rollover() -> dict:
    run = sc.loss_of_traction()
    c = sc.force_slip_curve(run)
    ok = c["n"] >= 3
    s, f = c["s"][ok], c["f"][ok]
    print("\nLoss of traction (Fig. 2.17) - 0.5 -> 5 -> 0.5 m/s, mu 0.6, dt 0.01: median f_x/f_z "
          "per slip-ratio bin")
    print("  " + "  ".join(f"{a:+.2f}:{b:+.3f}" for a, b in zip(s, f)))
    pos, neg = s > 0.02, s < -0.02
    peak = {"accelerating": float(s[pos][np.argmax(f[pos])]),
            "braking": float(s[neg][np.argmin(f[neg])])}
    print(f"  peak at s = {peak['accelerating']:+.3f} (f {f[pos].max():.3f}) and "
          f"{peak['braking']:+.3f} (f {f[neg].min():.3f}); mean iterations "
          f"{run.mean_iterations:.3f}, max cost {run.max_cost:.1e} m g")
    out = {"loss_of_traction": {"s": s.tolist(), "fx_over_fz": f.tolist(), "peak_s": peak,
                                "mean_iterations": run.mean_iterations,
                                "max_cost": run.max_cost}}
    print("\nRollover (Figs. 2.20-2.21) - 5 m/s, 7 rad/s from 1 s, 4 s, dt 0.01")
    for h in (0.83, 1.25):
        r = sc.rollover(h)
        print(f"  cg {h:.2f} m: lifted {r['lifted']}, re-contacted {r['recontacted']}, rolled "
              f"over {r['rolled_over']} (t {_fmt(r['t_rollover'], '.2f')} s), max roll "
              f"{math.degrees(r['max_roll']):.1f} deg, iterations "
              f"{r['run'].mean_iterations:.3f}, max cost {r['run'].max_cost:.1e} m g")
        out[f"rollover_cg_{h:g}"] = {k: v for k, v in r.items() if k != "run"} | {
            "mean_iterations": r["run"].mean_iterations, "max_cost": r["run"].max_cost}
    return out


def tables_2_6_2_7(quick: bool) -> list[dict]:
    model = load_vehicle("zoe")
    terrains = load_wmrde_benchmark_terrains()
    if quick:
        terrains = terrains[:3]
    rows = sc.zoe_dynamics_benchmark(model, terrains, repeats=1 if quick else 3)
    print(f"\nTables 2.6/2.7 - Zoe, 1 m/s straight, 10 s, {len(terrains)} wmrde terrains, ideal "
          "actuators; errors vs dt 0.01 on the same terrain")
    print(f"{'model':16s} {'dt':>5s} | {'time x1e-3':>10s} {'thesis':>7s} | {'pos err':>7s} "
          f"{'thesis':>7s} | {'yaw err':>7s} {'thesis':>7s} | {'iter':>6s} {'thesis':>6s} | "
          f"{'max cost/mg':>11s}")
    for r in rows:
        t = r["thesis"] or (None, None, None)
        print(f"{r['contact_model']:16s} {r['dt']:5.2f} | {r['normalized_time_e3']:10.3f} "
              f"{_fmt(r['thesis_normalized_time_e3'], '.3f'):>7s} | "
              f"{_fmt(r['position_error']):>7s} {_fmt(t[0]):>7s} | {_fmt(r['yaw_error']):>7s} "
              f"{_fmt(t[1]):>7s} | {r['mean_iterations']:6.3f} {_fmt(t[2], '.3f'):>6s} | "
              f"{r['max_cost']:11.1e}")
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--quick", action="store_true", help="fewer step sizes/terrains (smoke run)")
    p.add_argument("--json", default=None, metavar="OUT", help="also write results as JSON")
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    result = {"machine": platform.processor() or platform.machine(),
              "python": sys.version.split()[0],
              "landtamer_table_2_5": table_2_5(args.quick),
              **traction_and_rollover(),
              "zoe_tables_2_6_2_7": tables_2_6_2_7(args.quick)}
    print(f"\nbenchmark wall time {time.perf_counter() - t0:.1f} s")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=1, default=float)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
