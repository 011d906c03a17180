"""Throughput of batched prediction for planning (prints numbers, asserts nothing).

Candidate trajectories of Zoë (or a skid steer when the shipped vehicles are absent), 5 s at
dt = 0.04 s (125 steps), over random rough terrain (RMS 0.15 m, correlation length 0.8 m, the
thesis' §2.5.4 setting), each candidate a constant body twist (vx in [0.5, 1.5] m/s, wz in
[-0.5, 0.5] rad/s) converted to wheel rates by :func:`wmr_model.prediction.predict.twist_commands`.

Three tables, times are medians of ``--repeat`` calls after a warm-up (compilation excluded),
wall clock and process CPU time (all threads):

1. ``n`` candidates in four configurations: kinematic / enhanced kinematics, each without and
   with pose-covariance propagation, plus enhanced + covariance keeping only the end state
   (``predict(every=T)``, the planner's usual need) and every 5th state;
2. the issue-10 sweep: enhanced + covariance for N = 1, 10, 100, 1000, 10000 (``--sizes``):
   candidate-steps/s (target: 1000 x 5 s in <= 0.10 s, i.e. >= 1,250,000 candidate-steps/s);
3. the same configuration on one thread (per-core cost per candidate-step, µs) and on all.

Run: ``.venv/bin/python bench/bench_predict.py [n_candidates] [repeat] [vehicle]
[--sizes 1,10,...] [--json]``; prints the tables (``--json``: one JSON line instead).

Note: Zoë's axles steer passively (Table E.2), so differential wheel rates alone leave the
least-squares kinematics free to swing both axles instead of yawing the body; turning candidates
drift into large steer angles and, on this terrain, many get flagged. The throughput numbers are
unaffected; use e.g. ``landtamer`` (rigid skid steer) for meaningful turning flags.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

from wmr_model._jit import JIT_ENABLED, num_threads, set_num_threads
from wmr_model.experiments import kinematic as ex
from wmr_model.prediction.predict import predict
from wmr_model.terrain import surface as tr

DT = 0.04
DURATION = 5.0
SLIP = ex.BATCH_SLIP
QPRIME = ex.BATCH_QPRIME
SIZES = (1, 10, 100, 1000, 10000)
TARGET_WALL_S = 0.10  # 1000 candidates x 5 s (issue 10)


def _vehicle(name: str):
    try:
        from wmr_model.io.vehicles import load_vehicle

        return load_vehicle(name)
    except Exception:  # the shipped vehicles are optional for this benchmark
        from wmr_model.vehicles.generators import skid_steer_spec
        from wmr_model.vehicles.model import compile_vehicle

        return compile_vehicle(skid_steer_spec(name="skid"))


def _time(model, terrain, q0, commands, repeat: int, **kw) -> dict:
    """Median wall and CPU time of ``predict`` over ``repeat`` calls after a warm-up."""
    predict(model, terrain, q0, commands[:8], DT, **kw)
    walls, cpus = [], []
    pr = None
    for _ in range(max(repeat, 1)):
        c0, t0 = time.process_time(), time.perf_counter()
        pr = predict(model, terrain, q0, commands, DT, **kw)
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    n, T = commands.shape[:2]
    wall = statistics.median(walls)
    return {"candidates": int(n), "steps": int(T), "wall_s": wall, "best_wall_s": min(walls),
            "cpu_s": statistics.median(cpus), "candidate_steps_per_s": n * T / wall,
            "realtime_factor": n * T * DT / wall,
            "tipover_flagged": int((pr.flags & 1).any(axis=1).sum()),
            "liftoff_flagged": int((pr.flags & 4).any(axis=1).sum())}


def main(n: int = 1000, repeat: int = 5, vehicle: str = "zoe",
         sizes: tuple[int, ...] = SIZES, quiet: bool = False) -> dict:
    model = _vehicle(vehicle)
    terrain = tr.rough(0.15, 0.8, seed=0, x_range=(-10, 10), y_range=(-10, 10))
    t0 = time.perf_counter()
    q0, commands, err = ex.random_twist_candidates(model, terrain, max(n, *sizes), DT, DURATION,
                                                   seed=0)
    t_convert = time.perf_counter() - t0
    T = commands.shape[1]
    enh_cov = dict(fidelity="enhanced", slip_params=SLIP, Qprime=QPRIME)
    configs = {
        "kinematic": dict(fidelity="kinematic"),
        "kinematic+cov": dict(fidelity="kinematic", Qprime=QPRIME),
        "enhanced": dict(fidelity="enhanced", slip_params=SLIP),
        "enhanced+cov": enh_cov,
        "enhanced+cov every=5": dict(enh_cov, every=5),
        "enhanced+cov end only": dict(enh_cov, every=T),
    }
    rows = {name: _time(model, terrain, q0, commands[:n], repeat, **kw)
            for name, kw in configs.items()}
    sweep = [_time(model, terrain, q0, commands[:k], repeat if k <= 1000 else 2, **enh_cov)
             for k in sizes]
    threads = num_threads()
    set_num_threads(1)
    try:
        one = _time(model, terrain, q0, commands[:n], repeat, **enh_cov)
    finally:
        set_num_threads(threads)
    per_core_us = one["wall_s"] / (n * T) * 1e6
    result = {
        "vehicle": model.name, "candidates": n, "steps": T, "dt": DT,
        "terrain": "rough(rms=0.15, corr=0.8, seed=0)", "init_rms_m": err,
        "jit": JIT_ENABLED, "cpus": os.cpu_count(), "threads": threads,
        "twist_conversion_s": t_convert, "results": rows, "sweep_enhanced_cov": sweep,
        "one_thread_enhanced_cov": one, "one_thread_us_per_candidate_step": per_core_us,
        "scaling_all_threads": one["wall_s"] / rows["enhanced+cov"]["wall_s"],
        "target_wall_s": TARGET_WALL_S,
    }
    if quiet:
        print(json.dumps(result))
        return result
    print(f"{model.name}: {n} candidates x {T} steps (dt {DT} s, {DURATION} s), rough terrain "
          f"RMS 0.15 m / L 0.8 m, {os.cpu_count()} CPUs, {threads} threads; medians of "
          f"{repeat}")
    head = (f"{'config':<24}{'wall [s]':>10}{'cpu [s]':>9}{'cand-steps/s':>14}"
            f"{'x realtime':>12}{'tipover':>9}{'liftoff':>9}")
    print(head)
    for name, r in rows.items():
        print(f"{name:<24}{r['wall_s']:>10.3f}{r['cpu_s']:>9.3f}"
              f"{r['candidate_steps_per_s']:>14,.0f}{r['realtime_factor']:>12,.0f}"
              f"{r['tipover_flagged']:>9d}{r['liftoff_flagged']:>9d}")
    print(f"\nenhanced + covariance, N sweep (target: N=1000 wall <= {TARGET_WALL_S} s, "
          f">= {1000 * T / TARGET_WALL_S:,.0f} cand-steps/s)")
    print(f"{'N':>7}{'wall [s]':>11}{'cpu [s]':>9}{'cand-steps/s':>14}")
    for r in sweep:
        print(f"{r['candidates']:>7d}{r['wall_s']:>11.4f}{r['cpu_s']:>9.3f}"
              f"{r['candidate_steps_per_s']:>14,.0f}")
    print(f"\none thread: {one['wall_s']:.3f} s = {per_core_us:.2f} us per candidate-step; "
          f"{threads} threads: {result['scaling_all_threads']:.2f}x faster")
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("n", nargs="?", type=int, default=1000)
    ap.add_argument("repeat", nargs="?", type=int, default=5)
    ap.add_argument("vehicle", nargs="?", default="zoe")
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)),
                    help="comma-separated batch sizes of the sweep")
    ap.add_argument("--json", action="store_true", help="print only the JSON line")
    a = ap.parse_args()
    main(a.n, a.repeat, a.vehicle, tuple(int(s) for s in a.sizes.split(",") if s), a.json)
