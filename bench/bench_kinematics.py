"""Kinematic benchmarks of thesis §2.5: Table 2.4 (Rocky 7) and Table 2.6 "kinematic" (Zoë).

Usage: ``python bench/bench_kinematics.py [--quick] [--json OUT]``. Prints both tables with the
thesis' figures beside ours. Timing numbers are reported, never asserted.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time

from wmr_model import experiments as ex
from wmr_model.io.terrain_files import load_wmrde_benchmark_terrains
from wmr_model.vehicles import load_vehicle


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


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--quick", action="store_true", help="fewer seeds/terrains (CI smoke run)")
    p.add_argument("--json", default=None, metavar="OUT", help="also write results as JSON")
    args = p.parse_args(argv)
    t0 = time.perf_counter()
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
