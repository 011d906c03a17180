"""Seed 003 tracked-robot scenario suite (Pecka et al., Table I) on the Absolem model.

Usage: ``python bench/bench_tracks.py [--json OUT]``. Runs the eight scenarios (110 s simulated,
dt = 0.01 s, Euler) once to compile, then timed, and prints Table-I-style metrics and the
real-time factor of the whole suite beside the seed's contact-surface-motion plugin (38.9 s
CPU). Timing numbers are reported, never asserted.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time

from wmr_model import experiments_tracks as ext
from wmr_model.vehicles import load_vehicle


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", help="write the results to this file")
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
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"total_cpu_s": total, "loop_cpu_s": sim, "duration_s": dur,
                       "scenarios": [{"name": r.name, "duration": r.duration,
                                      "wall_time": r.wall_time, **r.metrics} for r in results]},
                      f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
