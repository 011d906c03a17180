"""HMMWV-class vehicle (issue 11): closed-chain vs embedded model on seed 002's scenarios.

Usage: ``python bench/bench_hmmwv.py [--quick] [--json OUT]``. Prints, for the lane change of
scenario 2 (60 s), each form's real-time factor (simulated time / wall time, compiled, best of
``--repeat``), Newton iterations, closure residual, and the largest differences between the two
forms' predictions; then the steady-cornering roll against the quasi-static estimate and the
off-road runs of scenario 3. Seed 002 measured its tree-plus-constraints form 4.1x and its
fully augmented form 120x slower than its constraint-embedded form. Timing is reported, never
asserted.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys

import numpy as np

from wmr_model.experiments import hmmwv as H
from wmr_model.io.vehicles import load_vehicle


def lane_change(repeat: int, dt: float) -> dict:
    runs = {}
    for name in ("hmmwv", "hmmwv_embedded"):
        best = None
        for _ in range(repeat):
            r = H.lane_change(name, dt=dt)
            if best is None or r.wall_time < best.wall_time:
                best = r
        runs[name] = best
    a, b = runs["hmmwv"], runs["hmmwv_embedded"]
    print(f"\nScenario 2 - lane change (60 s, dt {dt} s, 0 -> 20 m/s, changes at 30 s and 50 s)")
    print(f"{'model':16s} {'wall (s)':>9s} {'RTF':>8s} {'iter':>6s} {'closure (m)':>11s} "
          f"{'max |a_y|':>9s} {'max roll (deg)':>14s} {'min tip margin (m)':>18s}")
    rows = {}
    for name, r in runs.items():
        rows[name] = {"wall_time": r.wall_time, "real_time_factor": r.real_time_factor,
                      "mean_iterations": r.mean_iterations, "loop_residual": r.loop_residual,
                      "max_lateral_acceleration": float(np.abs(r.lateral_acceleration).max()),
                      "max_roll_deg": float(np.degrees(np.abs(r.roll).max())),
                      "min_tip_margin": float(r.tip_margin.min()),
                      "final_y": float(r.q[-1, 5])}
        x = rows[name]
        print(f"{name:16s} {r.wall_time:9.3f} {r.real_time_factor:8.1f} "
              f"{r.mean_iterations:6.3f} {r.loop_residual:11.1e} "
              f"{x['max_lateral_acceleration']:9.3f} {x['max_roll_deg']:14.3f} "
              f"{x['min_tip_margin']:18.3f}")
    diff = {
        "slowdown_closed_vs_embedded": b.real_time_factor / a.real_time_factor,
        "max_position_m": float(np.abs(a.q[:, 4:7] - b.q[:, 4:7]).max()),
        "max_roll_deg": float(np.degrees(np.abs(a.roll - b.roll).max())),
        "max_yaw_deg": float(np.degrees(np.abs(a.yaw - b.yaw).max())),
        "max_yaw_rate": float(np.abs(a.yaw_rate - b.yaw_rate).max()),
        "max_wheel_load_rel": float(np.abs(a.wheel_load - b.wheel_load).max()
                                    / a.wheel_load.mean()),
        "max_travel_m": float(np.abs(a.travel - b.travel).max()),
    }
    print("closed vs embedded: " + ", ".join(f"{k} {v:.4g}" for k, v in diff.items())
          + " (seed 002: tree+constraints 4.1x slower than embedded)")
    return {"runs": rows, "difference": diff}


def roll(quick: bool) -> list[dict]:
    m = load_vehicle("hmmwv")
    print("\nSteady cornering (steer 0.05 rad): roll vs quasi-static roll-stiffness estimate")
    print(f"{'model':16s} {'v (m/s)':>7s} {'a_y':>7s} {'roll (deg)':>10s} {'estimate':>9s} "
          f"{'ratio':>6s}")
    out = []
    for v in ((8.0, 12.0) if quick else (6.0, 8.0, 10.0, 12.0, 14.0)):
        for name in ("hmmwv", "hmmwv_embedded"):
            r = H.steady_turn(name, v, 0.05)
            ay, phi = r.extra["lateral_acceleration"], r.extra["roll"]
            est = H.quasi_static_roll(m, ay)
            out.append({"model": name, "speed": v, "lateral_acceleration": ay,
                        "roll_deg": math.degrees(phi), "estimate_deg": math.degrees(est)})
            print(f"{name:16s} {v:7.1f} {ay:7.3f} {math.degrees(phi):10.4f} "
                  f"{math.degrees(est):9.4f} {phi / est:6.3f}")
    return out


def off_road(quick: bool) -> list[dict]:
    speeds = (3.0, 8.0) if quick else (3.0, 6.0, 10.0, 14.0)
    out = []
    print("\nScenario 3 - joystick driving over rough terrain (rms 5 cm, correlation 1 m), 20 s")
    print(f"{'model':16s} {'v set':>6s} {'RTF':>7s} {'travel p-p (m)':>14s} "
          f"{'load std (N)':>12s} {'min margin (m)':>14s} {'closure (m)':>11s}")
    for name in ("hmmwv", "hmmwv_embedded"):
        for r in H.off_road(name, speeds, duration=10.0 if quick else 20.0):
            row = {"model": name, "set_speed": r.extra["set_speed"],
                   "real_time_factor": r.real_time_factor,
                   "travel_peak_to_peak": float(np.ptp(r.travel, axis=0).max()),
                   "wheel_load_std": float(r.wheel_load[100:].std(axis=0).max()),
                   "min_tip_margin": float(r.tip_margin[50:].min()),
                   "loop_residual": r.loop_residual}
            out.append(row)
            print(f"{name:16s} {row['set_speed']:6.1f} {row['real_time_factor']:7.1f} "
                  f"{row['travel_peak_to_peak']:14.3f} {row['wheel_load_std']:12.0f} "
                  f"{row['min_tip_margin']:14.3f} {row['loop_residual']:11.1e}")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer speeds, shorter off-road runs")
    ap.add_argument("--repeat", type=int, default=3, help="lane-change repeats (best time)")
    ap.add_argument("--dt", type=float, default=0.01, help="step size [s]")
    ap.add_argument("--json", metavar="OUT", help="write the numbers as JSON")
    args = ap.parse_args(argv)
    H.lane_change("hmmwv", duration=1.0)  # compile outside the timing
    H.lane_change("hmmwv_embedded", duration=1.0)
    res = {"machine": platform.processor() or platform.machine(), "python": sys.version.split()[0],
           "lane_change": lane_change(1 if args.quick else args.repeat, args.dt),
           "roll": roll(args.quick), "off_road": off_road(args.quick)}
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(res, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
