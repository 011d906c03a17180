"""The planner batch in both precisions, interleaved (prints numbers, asserts nothing).

Issue 22's batch: Zoë, rough terrain (RMS 0.15 m, correlation 0.8 m, seed 0), 1000
constant-twist candidates (:func:`wmr_model.experiments.kinematic.random_twist_candidates`),
5 s at dt 0.04, enhanced kinematics with the benchmark slip and pose covariance, end states only
(``every=T``). ``predict(precision="float64")`` and ``precision="float32"`` (the lane path,
:mod:`wmr_model.kinematics.lanes`) alternate in one process, ``rounds`` times each, on all
threads and then on one; prints medians (min-max), µs per candidate-step per thread and the
median of each round's own float64/float32 ratio, with the load average before and after.

Run: ``.venv/bin/python bench/bench_predict_precision.py [candidates] [rounds]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from wmr_model._jit import num_threads, set_num_threads
from wmr_model.experiments import kinematic as ex
from wmr_model.io.vehicles import load_vehicle
from wmr_model.prediction.predict import predict
from wmr_model.terrain import surface as tr

DT = 0.04


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("candidates", nargs="?", type=int, default=1000)
    ap.add_argument("rounds", nargs="?", type=int, default=7)
    a = ap.parse_args()
    model = load_vehicle("zoe")
    terrain = tr.rough(0.15, 0.8, seed=0, x_range=(-10, 10), y_range=(-10, 10))
    q0, commands, _ = ex.random_twist_candidates(model, terrain, a.candidates, DT, 5.0)
    kw = dict(fidelity="enhanced", slip_params=ex.BATCH_SLIP, Qprime=ex.BATCH_QPRIME,
              every=commands.shape[1])
    T = commands.shape[1]
    for prec in ("float64", "float32"):  # compilation and first-call costs out of the timing
        predict(model, terrain, q0, commands[:70], DT, precision=prec, **kw)
    print(f"{a.candidates} candidates x {T} steps, end states; load before {os.getloadavg()}")
    for threads in sorted({num_threads(), 1}, reverse=True):
        set_num_threads(threads)
        wall: dict[str, list[float]] = {"float64": [], "float32": []}
        for _ in range(a.rounds):
            for prec in wall:
                t = time.perf_counter()
                predict(model, terrain, q0, commands, DT, precision=prec, **kw)
                wall[prec].append(time.perf_counter() - t)
        for prec, ts in wall.items():
            med = statistics.median(ts)
            print(f"  {threads} thread(s) {prec}: {med:.4f} s ({min(ts):.4f}-{max(ts):.4f}); "
                  f"{med * threads / (a.candidates * T) * 1e6:.3f} us per candidate-step per "
                  f"thread")
        r = [x / y for x, y in zip(wall["float64"], wall["float32"], strict=True)]
        print(f"  {threads} thread(s) float64/float32 per round: median {statistics.median(r):.2f}"
              f" ({min(r):.2f}-{max(r):.2f})")
    print(f"load after {os.getloadavg()}")


if __name__ == "__main__":
    main()
