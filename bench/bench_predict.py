"""Throughput of batched prediction for planning (prints numbers, asserts nothing).

1000 candidate trajectories of Zoë (or a skid steer when the shipped vehicles are absent), 5 s at
dt = 0.04 s (125 steps), over random rough terrain (RMS 0.15 m, correlation length 0.8 m, the
thesis' §2.5.4 setting), each candidate a constant body twist (vx in [0.5, 1.5] m/s, wz in
[-0.5, 0.5] rad/s) converted to wheel rates by :func:`wmr_model.predict.twist_commands`.
Four configurations: kinematic / enhanced kinematics, each without and with pose-covariance
propagation. Times are the best of ``repeat`` calls after a warm-up (compilation excluded).

Run: ``.venv/bin/python bench/bench_predict.py [n_candidates] [repeat] [vehicle]``; prints a
table, then one JSON line.

Note: Zoë's axles steer passively (Table E.2), so differential wheel rates alone leave the
least-squares kinematics free to swing both axles instead of yawing the body; turning candidates
drift into large steer angles and, on this terrain, many get flagged. The throughput numbers are
unaffected; use e.g. ``landtamer`` (rigid skid steer) for meaningful turning flags.
"""

from __future__ import annotations

import json
import os
import sys
import time

from wmr_model import experiments as ex
from wmr_model import terrain as tr
from wmr_model._jit import JIT_ENABLED

DT = 0.04
DURATION = 5.0
SLIP = ex.BATCH_SLIP
QPRIME = ex.BATCH_QPRIME


def _vehicle(name: str):
    try:
        from wmr_model.vehicles import load_vehicle

        return load_vehicle(name)
    except Exception:  # the shipped vehicles are optional for this benchmark
        from wmr_model.generators import skid_steer_spec
        from wmr_model.model import compile_vehicle

        return compile_vehicle(skid_steer_spec(name="skid"))


def main(n: int = 1000, repeat: int = 3, vehicle: str = "zoe") -> dict:
    model = _vehicle(vehicle)
    terrain = tr.rough(0.15, 0.8, seed=0, x_range=(-10, 10), y_range=(-10, 10))
    t0 = time.perf_counter()
    q0, commands, err = ex.random_twist_candidates(model, terrain, n, DT, DURATION, seed=0)
    t_convert = time.perf_counter() - t0
    T = commands.shape[1]
    configs = {
        "kinematic": dict(fidelity="kinematic"),
        "kinematic+cov": dict(fidelity="kinematic", Qprime=QPRIME),
        "enhanced": dict(fidelity="enhanced", slip_params=SLIP),
        "enhanced+cov": dict(fidelity="enhanced", slip_params=SLIP, Qprime=QPRIME),
    }
    rows = {}
    for name, kw in configs.items():
        r = ex.predict_throughput(model, terrain, q0, commands, DT, repeat=repeat, **kw)
        rows[name] = {k: r[k] for k in ("wall_s", "candidate_steps_per_s", "realtime_factor",
                                        "tipover_flagged", "liftoff_flagged")}
    result = {
        "vehicle": model.name, "candidates": n, "steps": T, "dt": DT,
        "terrain": "rough(rms=0.15, corr=0.8, seed=0)", "init_rms_m": err,
        "jit": JIT_ENABLED, "cpus": os.cpu_count(), "twist_conversion_s": t_convert,
        "results": rows,
    }
    print(f"{model.name}: {n} candidates x {T} steps (dt {DT} s, {DURATION} s), "
          f"rough terrain RMS 0.15 m / L 0.8 m, {os.cpu_count()} CPUs")
    print(f"{'config':<16}{'wall [s]':>10}{'cand-steps/s':>15}{'x realtime':>12}"
          f"{'tipover':>9}{'liftoff':>9}")
    for name, r in rows.items():
        print(f"{name:<16}{r['wall_s']:>10.3f}{r['candidate_steps_per_s']:>15.0f}"
              f"{r['realtime_factor']:>12.0f}{r['tipover_flagged']:>9d}{r['liftoff_flagged']:>9d}")
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    args = sys.argv[1:]
    main(*(int(a) for a in args[:2]), *args[2:3])
