"""Soft soil: Rocky 7 slip-versus-slope matrix (seed 001), power per run, multipass, calibration.

Prints (asserts nothing):

1. the slip matrix - uphill, downhill, cross-hill at 0, 2.5, 5, 10, 15, 20° on a Bekker-Wong
   soil (slip = 1 - achieved / commanded travel per 1 s window after 2 s of settling; mean and
   spread over windows), the downhill drift angle cross-hill, the motor power (R w f_x), the
   Bekker wheel-torque power (T w), the energy-balance residual and the quasi-static limit;
2. uphill with ROAMS contact, c = 0 and phi = 20° (so that the slopes approach the traction
   limit, where the variability acts) with traction variability (eqs. 11-13, p1 = 0.3,
   p2 = 0.2), mean and spread over windows and seeds;
3. single-wheel multipass (sinkage and slip per pass) per soil preset;
4. vehicle-level multipass (:mod:`wmr_model.experiments.soft_soil`): rocky7 driving straight on a
   deformable map, per wheel row the sinkage, the sinkage of a wheel of the same load and slip
   on virgin soil (quasi-static), the slip and the multipass state over the last 2 s (all
   wheels in the ruts), for soft (speed-droop) and stiff (ideal) wheel drives; the soil mass
   error, a second pass over the same strip and the wall time;
5. the soil calibration fit (phi, kphi) and its wall time;
6. imprint cost vs grid: HMMWV (on-road tyre options, issue 26) driving 3 s at 1 m/s on
   ``--soil`` with ruts on a 2 cm and a 1 cm grid: wall time, real-time factor, grid nodes
   (the avalanche runs in a window around each wheel's new rut, so the cost follows the wheels'
   footprint, not the grid); ``--only-grid`` runs this section alone.

Usage: ``python bench/bench_soil.py [--soil NAME] [--quick] [--json OUT]``.
"""

from __future__ import annotations

import argparse
import json
import math
import time

import numpy as np

from wmr_model.experiments.soft_soil import drive_straight_on_soil, wheel_rows
from wmr_model.experiments.soil import (
    SLOPES_DEG,
    calibrate_soil,
    max_climbable_slope,
    multipass,
    sinkage_for_load,
    slip_vs_slope,
    wheel_params,
)
from wmr_model.io.vehicles import load_vehicle
from wmr_model.terrain.soil import SOIL_PRESETS, bekker_params


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--soil", default="sandy_loam", choices=sorted(SOIL_PRESETS))
    p.add_argument("--quick", action="store_true", help="fewer slopes and seeds")
    p.add_argument("--json", default=None, metavar="OUT", help="also write results as JSON")
    p.add_argument("--only-grid", action="store_true", help="section 6 only")
    args = p.parse_args()
    if args.only_grid:
        print(json.dumps(_grid_cost(args.soil), default=float))
        return
    model = load_vehicle("rocky7")
    slopes = (0.0, 5.0, 10.0) if args.quick else SLOPES_DEG
    out: dict = {"soil": args.soil}

    wp = wheel_params(args.soil, float(model.wheel_radius[0]), float(model.wheel_width[0]))
    limit = math.degrees(max_climbable_slope(wp, model.total_mass, model.nw))
    print(f"rocky7 on {args.soil}: quasi-static climbable slope {limit:.2f} deg")
    out["limit_deg"] = limit

    t0 = time.perf_counter()
    rows = slip_vs_slope(model, slopes, contact_params=bekker_params(args.soil), duration=6.0)
    wall = time.perf_counter() - t0
    print(f"\nBekker-Wong contact ({len(rows)} runs of 6 s, {wall:.1f} s incl. compile)")
    print(f"{'direction':>10} {'slope':>6} {'slip mean':>10} {'slip std':>9} {'drift':>7} "
          f"{'P_motor W':>10} {'P_soil W':>9} {'E resid':>9} {'stall':>6}")
    for r in rows:
        s = r.summary()
        print(f"{s['direction']:>10} {s['slope_deg']:6.1f} {s['slip_mean']:10.4f} "
              f"{s['slip_std']:9.2e} {s['drift_deg']:7.2f} {s['power_W']:10.4f} "
              f"{s['soil_power_W']:9.4f} {s['energy_residual']:9.1e} {s['stalled']!s:>6}")
    out["bekker"] = [r.summary() for r in rows]

    seeds = (0, 1) if args.quick else (0, 1, 2, 3, 4)
    t0 = time.perf_counter()
    rr = slip_vs_slope(model, slopes, ("uphill",), seeds=seeds, contact_model="roams",
                       contact_params={"c": 0.0, "phi": math.radians(20.0)},
                       variability=(0.3, 0.2), duration=6.0)
    print(f"\nROAMS, c 0, phi 20 deg, traction variability (p1 0.3, p2 0.2), {len(seeds)} "
          f"seeds, {time.perf_counter() - t0:.1f} s")
    for r in rr:
        print(f"{r.direction:>10} {r.slope_deg:6.1f} slip {r.slip_mean:8.4f} +- "
              f"{r.slip_std:.4f}")
    out["roams_variability"] = [r.summary() for r in rr]

    print("\nmultipass (single wheel, W = m g / 6, zero drawbar pull): sinkage mm, slip")
    W = model.total_mass * 9.80665 / model.nw
    out["multipass"] = {}
    for name in SOIL_PRESETS:
        states, _ = multipass(name, W, float(model.wheel_radius[0]),
                              float(model.wheel_width[0]), n_passes=3)
        print(f"{name:>17} " + "  ".join(f"pass {k + 1}: {st.h * 1e3:6.2f} mm s={st.s:.3f}"
                                           + (" STALL" if st.stalled else "")
                                           for k, st in enumerate(states)))
        out["multipass"][name] = [(st.h, st.s, st.stalled) for st in states]

    out["vehicle_multipass"] = _vehicle_multipass(model, args.soil, 6.0 if args.quick else 10.0)

    t0 = time.perf_counter()
    fit = calibrate_soil(model, args.soil)
    wall = time.perf_counter() - t0
    print(f"\ncalibration ({fit.n_sim} simulations, {wall:.1f} s), rms {fit.rms:.2e} m")
    for n, e, s, t in zip(fit.names, fit.estimate, fit.sigma, fit.truth):
        print(f"  {n:>5}: {e:.6g} +- {s:.2g} (truth {t:.6g}, error {abs(e - t) / s:.2f} sigma)")
    out["calibration"] = {"names": fit.names, "estimate": fit.estimate.tolist(),
                          "sigma": fit.sigma.tolist(), "truth": fit.truth.tolist(),
                          "n_sim": fit.n_sim, "wall_s": wall}
    out["grid_cost"] = _grid_cost(args.soil)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(out, f, indent=1, default=float)


def _grid_cost(soil: str, duration: float = 3.0, speed: float = 1.0) -> dict:
    """Section 6: HMMWV with ruts on a 2 cm and a 1 cm grid, best of two runs each."""
    m = load_vehicle("hmmwv")
    res = {}
    print(f"\nimprint cost vs grid: hmmwv on {soil}, {duration:g} s at {speed:g} m/s, ruts")
    for r in (0.02, 0.01):
        drive_straight_on_soil(m, soil, duration=0.1, speed=speed, resolution=r)  # compile
        best, run = math.inf, None
        for _ in range(2):
            t0 = time.perf_counter()
            run = drive_straight_on_soil(m, soil, duration=duration, speed=speed, resolution=r)
            best = min(best, time.perf_counter() - t0)
        assert run is not None
        res[f"{r * 100:g} cm"] = {"wall_s": best, "real_time_factor": duration / best,
                                  "nodes": int(run.soil_map.h.size),
                                  "segments": int(run.segment_start.size)}
        print(f"  grid {r * 100:g} cm ({run.soil_map.h.size} nodes): wall {best:.2f} s, "
              f"{duration / best:.2f}x real time")
    return res


def _vehicle_multipass(model, soil: str, duration: float) -> dict:
    """Section 4: rocky7 on a deformable map, per wheel row over the last 2 s."""
    rows = wheel_rows(model)
    names = ("front", "middle", "rear") if len(rows) == 3 else tuple(map(str, range(len(rows))))
    R, b = float(model.wheel_radius[0]), float(model.wheel_width[0])
    res: dict = {}
    print(f"\nvehicle multipass on {soil} ({duration:.0f} s at 0.1 m/s commanded, segments of "
          "R/4, grid 1 cm), last 2 s:")
    drives = {"soft drive (Kp 0.3 N m s/rad)": {"actuator": "p",
                                                 "actuator_params": {"Kp": 0.3}},
              "ideal drive": {}}
    drive_straight_on_soil(model, soil, duration=0.2)  # compile outside the timed runs
    for label, drive in drives.items():
        for imprint in (True, False):
            t0 = time.perf_counter()
            run = drive_straight_on_soil(model, soil, duration=duration, imprint=imprint,
                                         **drive)
            wall = time.perf_counter() - t0
            T = run.trajectory.q.shape[0] - 1
            i0 = T - 200
            seg0 = int(np.searchsorted(run.segment_start, i0))
            travel = run.trajectory.q[-1, 4] - run.trajectory.q[0, 4]
            kind = "ruts" if imprint else "virgin (no imprint)"
            print(f"  {label}, {kind}: travel {travel:.3f} m, soil mass rel. error "
                  f"{(run.mass - run.mass0) / run.mass0:.1e}, wall {wall:.2f} s "
                  f"({T} steps, {run.segment_start.size} segments)")
            key = f"{label}, {kind}"
            res[key] = {"wall_s": wall, "travel_m": travel}
            slip = run.wheel_slip(i0, T)
            for name, row in zip(names, rows):
                k = row[0]
                h = float(run.sinkage[i0:, k].mean())
                s = float(run.slip_ratio[i0:, k].mean())
                W = float(run.trajectory.f_contact[i0:, k, 2].mean())
                h_virgin = sinkage_for_load(wheel_params(soil, R, b), s, W)
                zc, j0 = run.zc[seg0:, k].mean(), run.j0[seg0:, k].mean()
                print(f"    {name:>6}: load {W:5.2f} N  sinkage {h * 1e3:5.2f} mm "
                      f"(virgin, same load and slip {h_virgin * 1e3:5.2f} mm, ratio "
                      f"{h / h_virgin:.3f})  slip {slip[k]:.4f}  zc {zc * 1e3:5.2f} mm  "
                      f"j0 {j0 * 1e3:5.2f} mm")
                res[key][name] = {"load_N": W, "sinkage_m": h, "virgin_sinkage_m": h_virgin,
                                  "slip": float(slip[k])}
            if imprint and drive:
                again = drive_straight_on_soil(model, soil, duration=duration,
                                               soil_map=run.soil_map, **drive)
                n = 200
                h1 = run.sinkage[1:n + 1].mean(0)
                h2 = again.sinkage[1:n + 1].mean(0)
                print("    second pass over the same strip, first 2 s, sinkage mm "
                      + "  ".join(f"{nm} {h1[r[0]] * 1e3:.2f} -> {h2[r[0]] * 1e3:.2f}"
                                  for nm, r in zip(names, rows))
                      + f"; slip {run.wheel_slip(0, n)[rows[0][0]]:.4f} -> "
                      f"{again.wheel_slip(0, n)[rows[0][0]]:.4f} (front)")
                res[key]["second_pass_sinkage_m"] = [h1.tolist(), h2.tolist()]
    return res


if __name__ == "__main__":
    main()
