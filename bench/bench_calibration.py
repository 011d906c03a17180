"""IPEM timings (prints numbers, asserts nothing).

1. Online update of the identification EKF on a synthetic Warthog log: one 2 s interval
   (dt 0.02 s, 100 steps), 6 slip parameters + 3 Q' entries (N = 7 candidates per batched
   prediction) - mean time per update after warm-up.
2. Offline fit (3.44)+(3.46) of the whole real Warthog log (``/work/shared/data/
   warthog_grass_A``) with p2..p6 + time offset + Q', when the data are present.

Run: ``.venv/bin/python bench/bench_calibration.py``; prints a table, then one JSON line.
"""

from __future__ import annotations

import json
import os
import time

from wmr_model import experiments as ex
from wmr_model.calibration import (
    IntervalPolicy,
    ModelPredictor,
    calibrate_offline,
    log_from_bag,
    select_intervals,
)
from wmr_model.vehicles import load_vehicle

SLIP = [f"slip.p{i}" for i in range(1, 7)]
NOISE = ["noise.U.wz_wz", "noise.U.vx_vx", "noise.U.vy_vy"]
BAG = "/work/shared/data/warthog_grass_A/bag"


def main() -> None:
    out = {}
    m = load_vehicle("warthog")
    out["online_update_ms"] = ex.online_calibration_update_time(120.0, 2.0)["online_update_ms"]
    print(f"online update (2 s, 6 slip + 3 Q', N=7, 100 steps): "
          f"{out['online_update_ms']:.1f} ms")
    if os.path.exists(BAG):
        log = log_from_bag(BAG, m)
        ivr = select_intervals(log.pose_time, IntervalPolicy("time", 2.0))
        names = ["slip.p2", "slip.p3", "slip.p4", "slip.p5", "slip.p6", "time_offset.pose"]
        t0 = time.perf_counter()
        calibrate_offline(ModelPredictor(m, dt=0.05), log, ivr, names + NOISE,
                          x0={n: 0.05 for n in NOISE})
        out["offline_fit_s"] = time.perf_counter() - t0
        out["offline_intervals"] = int(len(ivr))
        print(f"offline fit of the Warthog log ({len(ivr)} intervals of 2 s): "
              f"{out['offline_fit_s']:.1f} s")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
