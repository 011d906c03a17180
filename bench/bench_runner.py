"""Fleet calibration on the runner: in-process vs 1 and 2 local Ray workers (prints numbers,
asserts nothing).

Four synthetic Warthog bags (``wmr synth``: two robots x grass/dirt, seeds 1-4, ``--duration``
s each, ground truth at 10 Hz as the pose reference) are calibrated as one fleet, grouped by
robot (:func:`wmr_model.pipelines.fleet.calibrate_fleet`: 4 per-bag fits, then 2 group fits and 4
cross-validation folds), with the default parameter set of the Warthog and three Q' entries,
no cache. Timed: the whole fleet run in-process, on Ray with 1 worker and with 2 workers (each
Ray instance started before the clock; its start-up time printed separately; workers import and
load the numba cache inside the timed run, as they do for a user). The speed-up is Ray 1 worker
/ Ray 2 workers; the load average before and after each run is printed, because other
processes share the cores. The estimates of all three runs are compared for exact equality.

Run: ``.venv/bin/python bench/bench_runner.py [--duration S] [--quick] [--json]``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import tempfile
import time
from pathlib import Path

from wmr_model.cli import main as wmr
from wmr_model.pipelines.fleet import FitOptions, FleetBag, calibrate_fleet
from wmr_model.pipelines.runner import Runner, ray_available

BAGS = (("a1", "alpha", "grass", 1), ("b1", "bravo", "grass", 2), ("a2", "alpha", "dirt", 3),
        ("b2", "bravo", "dirt", 4))


def _estimates(rep: dict) -> list:
    return [(d.get("estimate"), d.get("std"), d.get("pos"))
            for k in ("bags", "groups", "cross_validation") for d in rep[k]]


def _timed(runner: Runner, bags: list[FleetBag], opts: FitOptions) -> tuple[float, dict, str]:
    before = os.getloadavg()[0]
    t0 = time.perf_counter()
    rep = calibrate_fleet(bags, opts, runner, group_by="robot")
    dt = time.perf_counter() - t0
    load = f"load {before:.1f} -> {os.getloadavg()[0]:.1f}"
    return dt, rep, load


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", type=float, default=120.0, help="seconds per bag (120)")
    ap.add_argument("--quick", action="store_true", help="40 s bags")
    ap.add_argument("--json", action="store_true", help="also print one JSON line")
    args = ap.parse_args()
    duration = 40.0 if args.quick else args.duration
    out: dict = {"bags": len(BAGS), "bag_duration_s": duration, "cpus": os.cpu_count()}
    with tempfile.TemporaryDirectory() as tmp:
        bags = []
        for name, robot, terrain, seed in BAGS:
            path = str(Path(tmp) / name)
            with contextlib.redirect_stdout(io.StringIO()):
                wmr(["synth", "--out", path, "--duration", f"{duration:g}", "--seed",
                     str(seed), "--terrain", terrain, "--truth-rate", "10"])
            bags.append(FleetBag(path, robot, terrain, "warthog"))
        opts = FitOptions(pose_topic="/ground_truth/odom")
        t, ref, load = _timed(Runner(quiet=True), bags, opts)
        out["in_process_s"], out["in_process_load"] = t, load
        tasks = ref["runner"]["tasks"]
        print(f"fleet of {len(bags)} x {duration:g} s bags, {tasks} tasks (4 bag fits, 2 group "
              f"fits, 4 cross-validation folds), {os.cpu_count()} cores")
        print(f"in-process          {t:8.1f} s   ({load})")
        if not ray_available():
            print("ray not installed (pip install '.[cluster]'): Ray rows skipped")
        else:
            same = True
            for workers in (1, 2):
                t0 = time.perf_counter()
                with Runner(workers=workers, use_ray=True, quiet=True) as runner:
                    runner.start()
                    start = time.perf_counter() - t0
                    t, rep, load = _timed(runner, bags, opts)
                same &= _estimates(rep) == _estimates(ref)
                out[f"ray_{workers}_s"], out[f"ray_{workers}_start_s"] = t, start
                out[f"ray_{workers}_load"] = load
                print(f"ray, {workers} worker{'s' if workers > 1 else ' '}      {t:8.1f} s   "
                      f"({load}; ray.init {start:.1f} s not included)")
            out["speedup_2_over_1"] = out["ray_1_s"] / out["ray_2_s"]
            out["identical"] = bool(same)
            print(f"speed-up of 2 Ray workers over 1: {out['speedup_2_over_1']:.2f}x; "
                  f"estimates identical in all three runs: {same}")
    if args.json:
        print(json.dumps(out))


if __name__ == "__main__":
    main()
