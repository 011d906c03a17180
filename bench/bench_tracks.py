"""Seed 003 tracked-robot scenario suite (Pecka et al., Table I) on the Absolem model.

Usage: ``python bench/bench_tracks.py [--json OUT] [--no-dynamics]``. Runs the eight scenarios
(110 s simulated, dt = 0.01 s, Euler) once to compile, then timed, and prints Table-I-style
metrics and the real-time factor of the whole suite beside the seed's contact-surface-motion
plugin (38.9 s CPU). Then the dynamic variant (belt patches as contacts of the force balance,
piecewise-linear contact, ideal actuators) with belt-aligned and with ICR friction directions:
metrics and the real-time factor of the timed simulation loop (the dynamic settling before
each scenario is not timed). Timing numbers are reported, never asserted.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time

from wmr_model.experiments import tracks as ext
from wmr_model.io.vehicles import load_vehicle


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", help="write the results to this file")
    ap.add_argument("--no-dynamics", action="store_true", help="skip the dynamic variant")
    args = ap.parse_args(argv)
    model = load_vehicle("absolem")
    ext.run_suite(model)  # compile outside timing
    t0 = time.perf_counter()
    results = ext.run_suite(model)
    total = time.perf_counter() - t0
    sim = sum(r.wall_time for r in results)
    dur = sum(r.duration for r in results)
    print(f"Seed 003 suite - absolem, {dur:.0f} s simulated, dt {ext.DT} s "
          f"({platform.processor() or platform.machine()}, Python {sys.version.split()[0]})")
    for r in results:
        ms = ", ".join(f"{k} {v:.4g}" for k, v in r.metrics.items())
        print(f"{r.name:16s} {r.duration:5.0f} s  {r.wall_time * 1e3:7.1f} ms | {ms}")
    print(f"suite CPU time: {total:.3f} s incl. setup ({sim:.3f} s in the loop); "
          f"{dur / total:.0f}x real time (seed 003 CSM plugin: {ext.SEED_003_CSM_CPU_TIME} s, "
          f"{dur / ext.SEED_003_CSM_CPU_TIME:.1f}x)")
    out = {"total_cpu_s": total, "loop_cpu_s": sim, "duration_s": dur,
           "scenarios": [{"name": r.name, "duration": r.duration, "wall_time": r.wall_time,
                          **r.metrics} for r in results]}
    if not args.no_dynamics:
        out["dynamics"] = dynamic_suite(model)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(out, f, indent=1)
    return 0


def dynamic_suite(model) -> dict:
    """The dynamic variant of the suite for both friction-direction options."""
    ext.run_dynamic_scenario(model, "straight", friction_directions="icr")  # compile
    out = {}
    for fdir in ("belt", "icr"):
        t0 = time.perf_counter()
        results = ext.run_dynamic_suite(model, friction_directions=fdir)
        total = time.perf_counter() - t0
        sim = sum(r.wall_time for r in results)
        dur = sum(r.duration for r in results)
        print(f"\nDynamic variant, friction directions {fdir!r} - piecewise-linear contact "
              f"(mu 0.8), ideal actuators, dt {ext.DT} s")
        for r in results:
            ms = ", ".join(f"{k} {v:.4g}" for k, v in r.metrics.items())
            print(f"{r.name:16s} {r.duration:5.0f} s  {r.wall_time * 1e3:7.1f} ms "
                  f"({r.duration / r.wall_time:5.0f}x) | {ms}")
        print(f"dynamic suite: {sim:.3f} s in the loop, {dur / sim:.0f}x real time "
              f"({total:.2f} s incl. setup and settling; seed 003 CSM plugin "
              f"{ext.SEED_003_CSM_CPU_TIME} s)")
        out[fdir] = {"loop_cpu_s": sim, "total_cpu_s": total, "duration_s": dur,
                     "realtime_factor": dur / sim,
                     "scenarios": [{"name": r.name, "duration": r.duration,
                                    "wall_time": r.wall_time, **r.metrics} for r in results]}
    return out


if __name__ == "__main__":
    sys.exit(main())
