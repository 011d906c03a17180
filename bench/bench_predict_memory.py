"""Peak RSS of one ``predict`` of 10,000 candidates by the states it keeps (issue 24).

The issue-10 sweep's largest call (Zoe, enhanced kinematics + pose covariance, 5 s at
dt = 0.04 s = 125 steps, random twists over rough terrain; ``bench/bench_predict.py``) keeps every
state of every candidate: about 0.9 GB of output. A planner needs the end state (``every=T``)
or a few samples (``every=k``). Each configuration runs in its own process; its peak resident
set size comes from ``os.wait4``'s rusage of that child (``ru_maxrss``), printed beside the
bytes :func:`wmr_model.prediction.predict.prediction_bytes` counts for the call (checked against
``MAX_PREDICTION_BYTES`` before anything is allocated) and the bytes of the returned arrays.

    python bench/bench_predict_memory.py                   # every = 1, 5, T
    python bench/bench_predict_memory.py --candidates 2000 --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

DT = 0.04
DURATION = 5.0


def child(n: int, every: str) -> None:
    """Predict ``n`` candidates keeping every ``every``-th state; print a JSON line."""
    from wmr_model.experiments import kinematic as ex
    from wmr_model.io.vehicles import load_vehicle
    from wmr_model.prediction.predict import predict, prediction_bytes
    from wmr_model.terrain import surface as tr

    model = load_vehicle("zoe")
    terrain = tr.rough(0.15, 0.8, seed=0, x_range=(-10, 10), y_range=(-10, 10))
    q0, commands, _ = ex.random_twist_candidates(model, terrain, n, DT, DURATION, seed=0)
    T = commands.shape[1]
    k = T if every == "T" else int(every)
    pr = predict(model, terrain, q0, commands, DT, fidelity="enhanced",
                 slip_params=ex.BATCH_SLIP, Qprime=ex.BATCH_QPRIME, every=k)
    kept = sum(a.nbytes for a in (pr.q, pr.qdot, pr.contact_speed, pr.dz, pr.slip,
                                  pr.wheel_slip, pr.stability_margin, pr.flags, pr.covariance))
    print(json.dumps({"every": k, "steps": T, "stored_states": int(pr.q.shape[1]),
                      "kept_mb": kept / 1e6,
                      "estimate_mb": prediction_bytes(model, n, T, pr.q.shape[1],
                                                      covariance=True) / 1e6}))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--candidates", type=int, default=10_000)
    ap.add_argument("--every", default="1,5,T", help="strides to compare (default 1,5,T)")
    ap.add_argument("--json", default=None, help="also write the results here")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child is not None:
        child(args.candidates, args.child)
        return 0
    rows = []
    for every in args.every.split(","):
        t0 = time.perf_counter()
        proc = subprocess.Popen([sys.executable, __file__, "--candidates", str(args.candidates),
                                 "--child", every], stdout=subprocess.PIPE)
        out = proc.stdout.read().decode() if proc.stdout else ""
        _, status, usage = os.wait4(proc.pid, 0)
        if os.waitstatus_to_exitcode(status):
            print(f"every={every}: child failed", file=sys.stderr)
            return 1
        row = {**json.loads(out.strip().splitlines()[-1]), "peak_rss_mb": usage.ru_maxrss / 1024,
               "wall_s": time.perf_counter() - t0}
        rows.append(row)
        print(f"{args.candidates} candidates, every={row['every']:>3} ({row['stored_states']:>3} "
              f"states): kept {row['kept_mb']:7.1f} MB, predict allocates "
              f"{row['estimate_mb']:7.1f} MB, peak RSS {row['peak_rss_mb']:7.1f} MB", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
