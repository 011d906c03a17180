"""Vehicle controllers on Zoë (issue 26): passive steer angles and flags, Table 2.7 errors.

Prints numbers, asserts nothing (the pass/fail properties are in test/core/test_controllers.py).

1. ``candidates``: 1000 turning Zoë candidates (1 m/s, yaw rate uniform in [-0.3, 0.3] rad/s,
   5 s at dt 0.04 s, kinematic prediction) on rough terrain RMS 0.15 m / correlation 0.8 m
   (``rough(0.15, 0.8, seed=0)`` over +-10 m, as ``bench/bench_predict.py``), driven by the
   open-loop naive controller (:func:`wmr_model.prediction.predict.twist_commands`) and by Zoë's
   passive-steer feedback (:func:`wmr_model.prediction.controllers.passive_steer_rates`): candidates
   whose steer angles s1, s2 stay within the joint limits (+-0.6 rad) at every state, the largest
   |steer angle|, and the shares of candidates flagged TIPOVER_RISK and WHEEL_LIFTOFF.
2. ``table27``: Table 2.7 (Zoë 1 m/s straight for 10 s over the ten wmrde benchmark terrains
   with wmrde's own (nodal, continuous) terrain normals, errors vs dt 0.01 on the same terrain,
   ideal actuators) in three configurations: the naive
   controller and our default contact parameters; Zoë's controller and our defaults; Zoë's
   controller and the thesis library's contact parameters
   (:func:`wmr_model.experiments.dynamic.zoe_library_contact_params`; linear and Pacejka only),
   the thesis' values beside ours.

Run: ``.venv/bin/python bench/bench_controllers.py [candidates|table27|all] [--n 1000]
[--terrains 10] [--json]``.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from wmr_model import kinematics as kin
from wmr_model.io.vehicles import load_vehicle
from wmr_model.prediction.controllers import predict_controlled
from wmr_model.prediction.predict import TIPOVER_RISK, WHEEL_LIFTOFF
from wmr_model.terrain import surface as tr

DT = 0.04
DURATION = 5.0
SPEED = 1.0
YAW_RATE = 0.3


def candidates(n: int = 1000, seed: int = 0, fidelity: str = "kinematic") -> list[dict]:
    """Part 1: steer angles within limits and flag shares per controller (``fidelity``
    ``"enhanced"``: with the benchmark slip :data:`wmr_model.experiments.kinematic.BATCH_SLIP`)."""
    from wmr_model.experiments.kinematic import BATCH_SLIP

    kw = {"fidelity": "enhanced", "slip_params": BATCH_SLIP} if fidelity == "enhanced" else {}
    m = load_vehicle("zoe")
    terrain = tr.rough(0.15, 0.8, seed=0, x_range=(-10, 10), y_range=(-10, 10))
    q0, _ = kin.initialize_contact(m, terrain)
    rng = np.random.default_rng(seed)
    seg = np.stack([np.full(n, SPEED), rng.uniform(-YAW_RATE, YAW_RATE, n),
                    np.full(n, DURATION)], axis=1)[:, None, :]
    steer = [m.joint_index(j) for j in ("s1", "s2")]
    lo = np.array([m.lower[k + 1] for k in steer])
    hi = np.array([m.upper[k + 1] for k in steer])
    rows = []
    for ctrl in ("naive", "passive_steer"):
        predict_controlled(m, terrain, q0, seg[:2, :, :], DT, controller=ctrl, **kw)  # compile
        t0 = time.perf_counter()
        pr = predict_controlled(m, terrain, q0, seg, DT, controller=ctrl, **kw)
        wall = time.perf_counter() - t0
        s = pr.q[:, :, 7 + np.array(steer)]
        inside = np.all((s >= lo) & (s <= hi), axis=(1, 2))
        rows.append({
            "controller": ctrl, "fidelity": fidelity, "candidates": n,
            "steps": int(pr.qdot.shape[1]),
            "within_limits": int(inside.sum()),
            "max_abs_steer": float(np.abs(s).max()),
            "tipover_share": float((pr.flags & TIPOVER_RISK).any(axis=1).mean()),
            "liftoff_share": float((pr.flags & WHEEL_LIFTOFF).any(axis=1).mean()),
            "wall_s": wall,
        })
    return rows


def table27(n_terrains: int = 10) -> list[dict]:
    """Part 2: Table 2.7 rows per controller (naive, Zoë's)."""
    from wmr_model.experiments import dynamic as sc
    from wmr_model.io.terrain_files import load_wmrde_benchmark_terrains

    m = load_vehicle("zoe")
    # wmrde's grid normals (node slopes interpolated) as in the library that produced Table 2.7:
    # the bilinear patch normals jump at every 0.1 m grid line, and where a step samples a jump
    # differs between step sizes (linear model, dt 0.02: 0.0010 rad mean yaw error, 0.0004 here)
    terrains = load_wmrde_benchmark_terrains(normals="nodal")[:n_terrains]
    out = []
    lib = {"contact_params": sc.zoe_library_contact_params(m)}
    for ctrl, models, opts, label in (
            ("naive", ("piecewise_linear", "pacejka", "ishigami"), None, "naive"),
            ("passive_steer", ("piecewise_linear", "pacejka", "ishigami"), None, "zoe"),
            ("passive_steer", ("piecewise_linear", "pacejka"), lib, "zoe+library")):
        for r in sc.zoe_dynamics_benchmark(m, terrains, contact_models=models, repeats=1,
                                           controller=ctrl, options=opts):
            r.pop("end_positions")
            r.pop("options")
            r["configuration"] = label
            out.append(r)
    return out


def _f(v, fmt: str = ".4f") -> str:
    return "-" if v is None else format(v, fmt)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("part", nargs="?", default="all", choices=("candidates", "table27", "all"))
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--terrains", type=int, default=10)
    ap.add_argument("--fidelity", choices=("kinematic", "enhanced"), default="kinematic")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    res: dict = {}
    if a.part in ("candidates", "all"):
        res["candidates"] = candidates(a.n, fidelity=a.fidelity)
    if a.part in ("table27", "all"):
        res["table27"] = table27(a.terrains)
    if a.json:
        print(json.dumps(res))
        return
    for r in res.get("candidates", []):
        print(f"{r['controller']:14s} {r['fidelity']:9s} {r['within_limits']:5d}/"
              f"{r['candidates']} candidates with "
              f"s1, s2 within +-0.6 rad (max |steer| {r['max_abs_steer']:.3f} rad); "
              f"TIPOVER_RISK {100 * r['tipover_share']:.1f} %, WHEEL_LIFTOFF "
              f"{100 * r['liftoff_share']:.1f} %; {r['wall_s']:.2f} s")
    if res.get("table27"):
        print(f"{'configuration':14s} {'model':16s} {'dt':>5s} | {'pos err':>7s} {'thesis':>7s} | "
              f"{'yaw err':>7s} {'thesis':>7s} | {'iter':>6s} {'thesis':>6s} | rolled")
        for r in res["table27"]:
            t = r["thesis"] or (None, None, None)
            print(f"{r['configuration']:14s} {r['contact_model']:16s} {r['dt']:5.2f} | "
                  f"{_f(r['position_error']):>7s} {_f(t[0]):>7s} | {_f(r['yaw_error']):>7s} "
                  f"{_f(t[1]):>7s} | {r['mean_iterations']:6.3f} {_f(t[2], '.3f'):>6s} | "
                  f"{r['rolled_over']}")


if __name__ == "__main__":
    main()
