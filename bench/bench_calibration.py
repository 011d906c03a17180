"""IPEM timings (prints numbers, asserts nothing).

1. Online update of the identification EKF on a synthetic Warthog log over rough terrain: one
   2 s interval (dt 0.02 s, 100 steps), 6 slip parameters + 3 Q' entries (N = 7 candidates per
   batched prediction) - mean time per update after warm-up
   (:func:`wmr_model.experiments.kinematic.online_calibration_update_time`).
2. The real Warthog log (``data/warthog_grass_A``, shipped), 2 s ICP-to-ICP
   intervals, calibrated on the moving ones (moving filter 0.5 m), dt 0.05 s:
   online update time of 3D kin.+ (p2..p6 + time offset + 3 Q' entries, N = 7), the offline fit
   (3.44)+(3.46) of the whole log, and the Table 3.3 rows over all intervals and over the ones
   without lidar-ICP re-localization jumps (``max_speed`` 2 m/s).

Run: ``.venv/bin/python bench/bench_calibration.py [--quick] [--json]``; prints a table, then
(with ``--json``) one JSON line.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from wmr_model.calibration import (
    IntervalPolicy,
    ModelPredictor,
    OnlineCalibrator,
    calibrate_offline,
    evaluate,
    select_intervals,
)
from wmr_model.calibration.intervals import MOVING_MIN_DISTANCE
from wmr_model.calibration.table import (
    DEFAULT_3D_PARAMS,
    DEFAULT_NOISE,
    DEFAULT_NOISE0,
    compare_models,
    initial_std,
)
from wmr_model.experiments import kinematic as ex
from wmr_model.io.bags import log_from_bag
from wmr_model.io.vehicles import load_vehicle

BAG = Path(__file__).resolve().parents[1] / "data" / "warthog_grass_A" / "bag"


def _real_log(out: dict, quick: bool) -> None:
    m = load_vehicle("warthog")
    t0 = time.perf_counter()
    log = log_from_bag(BAG, m)
    out["real_read_s"] = time.perf_counter() - t0
    pos = log.pose[:, 4:7]
    iv = select_intervals(log.pose_time, IntervalPolicy("time", 2.0))
    ivc = select_intervals(log.pose_time, IntervalPolicy("time", 2.0,
                                                         min_distance=MOVING_MIN_DISTANCE), pos)
    ivj = select_intervals(log.pose_time, IntervalPolicy("time", 2.0, max_speed=2.0), pos)
    names = [*DEFAULT_3D_PARAMS, *DEFAULT_NOISE]
    pred = ModelPredictor(m, dt=0.05)
    n0 = dict(DEFAULT_NOISE0)
    cal = OnlineCalibrator(pred, names, std0=initial_std(names), x0=n0,
                           qprime_bound={n: 2 * v for n, v in n0.items()})
    cal.update(log, *ivc[0])  # compile outside the timing
    t0 = time.perf_counter()
    for a, b in ivc[1:]:
        cal.update(log, int(a), int(b))
    out["real_online_update_ms"] = 1e3 * (time.perf_counter() - t0) / (len(ivc) - 1)
    print(f"real log: online update (2 s, p2..p6 + time offset + 3 Q', N=7, 40 steps): "
          f"{out['real_online_update_ms']:.1f} ms over {len(ivc) - 1} moving intervals")
    if not quick:
        t0 = time.perf_counter()
        res = calibrate_offline(pred, log, ivc, names, x0=n0)
        out["offline_fit_s"] = time.perf_counter() - t0
        out["offline_intervals"] = int(len(ivc))
        ev = evaluate(pred, log, iv, res.values)
        out["offline_table_all"] = [ev.mean_pos, ev.mean_yaw]
        print(f"real log: offline fit (3.44)+(3.46) of the whole log ({len(ivc)} moving 2 s "
              f"intervals of {len(iv)}): {out['offline_fit_s']:.1f} s; Q' std "
              + ", ".join(f"{n}={res.std[n]:.3g}" for n in DEFAULT_NOISE))
    t0 = time.perf_counter()
    for label, ev_iv in (("all", iv), ("jump-free", ivj)):
        rows, info = compare_models(m, log, ev_iv, calibration_intervals=ivc, iterations=3)
        out[f"table_{label}"] = {r.model: [r.pos, r.yaw] for r in rows}
        print(f"Table 3.3, 2 s, {len(ev_iv)} intervals ({label}; calibrated on {len(ivc)} "
              "moving, iterated EKF x3):")
        for r in rows:
            print(f"  {r.model:24s} {r.pos:7.4f} m {r.yaw:7.4f} rad")
        print("  time offset: diff drive+ "
              f"{info['diff drive+']['estimate']['time_offset.pose']:.3f} s, 3D kin.+ "
              f"{info['3D kin.+']['estimate']['time_offset.pose']:.3f} s")
    out["table_s"] = time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="skip the offline fit")
    ap.add_argument("--json", action="store_true", help="also print one JSON line")
    args = ap.parse_args()
    out: dict = {}
    out["online_update_ms"] = ex.online_calibration_update_time(
        40.0 if args.quick else 120.0, 2.0)["online_update_ms"]
    print(f"synthetic: online update (2 s, 6 slip + 3 Q', N=7, 100 steps): "
          f"{out['online_update_ms']:.1f} ms")
    if BAG.exists():
        _real_log(out, args.quick)
    else:
        print(f"{BAG}: not present; real-log timings skipped")
    if args.json:
        print(json.dumps(out))


if __name__ == "__main__":
    main()
