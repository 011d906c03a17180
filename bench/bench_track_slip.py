"""Track-slip calibration (issue 9): seed 003's gains vs the turn-ratio yaw slip, on the Absolem.

Usage: ``python bench/bench_track_slip.py [--json OUT] [--shear-k K ...] [--model-predictor]``.

Truth: the Janosi-Hanamoto skid-steer model (:mod:`wmr_model.kinematics.skid_steer`) with the
Absolem's track length and gauge (friction 0.8, shear modulus K, no centripetal term). First the
truth's yaw efficiency chi = omega_cmd / omega over turn radius. Then, per K, a synthetic log of
spins and arcs at R = 0.25, 0.5, 1, 2, 4 m (left and right) and straights forward and back (outer
belt 0.25 m/s, 4 s each, two 2 s intervals; pose noise 0.003 rad / 0.005 m), fitted with the
offline IPEM (3.44) for the parameter sets (a) slip.p2, p6 (seed 003's linear and angular gain)
and (b) slip.p2, p6, p7, p8; per manoeuvre class the RMS yaw and position error of the fitted
model against the noise-free truth, on the fitted radii and on held-out radii 0.35, 0.75, 3 m.
Predictor: the slip law on the belts' ideal differential drive
(:class:`~wmr_model.calibration.track_slip.PlanarSlipPredictor`); ``--model-predictor`` also
runs the 3D enhanced track kinematics of the Absolem (:class:`ModelPredictor`, dt 0.01 s,
about a minute per fit).
"""

from __future__ import annotations

import argparse
import json
import time

from wmr_model.calibration.offline import fit_systematic
from wmr_model.calibration.predictors import ModelPredictor
from wmr_model.calibration.track_slip import (
    SEED_003_SET,
    TURN_RATIO_SET,
    PlanarSlipPredictor,
    class_errors,
    manoeuvre_intervals,
    standard_manoeuvres,
    track_slip_log,
    truth_vehicle,
)
from wmr_model.io.vehicles import load_vehicle
from wmr_model.kinematics.skid_steer import yaw_efficiency

POSE_STD = (0.003, 0.005)
RADII = (0.0, 0.25, 0.5, 1.0, 2.0, 4.0)
HELD_OUT = (0.35, 0.75, 3.0)
CHI_RADII = (0.0, 0.25, 0.5, 1.0, 2.0, 4.0, 10.0)


def _fit(pred, run, held, names) -> dict:
    iv, lab = manoeuvre_intervals(run)
    ivh, labh = manoeuvre_intervals(held)
    t0 = time.perf_counter()
    res = fit_systematic(pred, run.log, iv, names, outlier_probability=1.0)
    wall = time.perf_counter() - t0
    return {"values": res.values, "std": res.std, "cost": res.cost, "intervals": len(iv),
            "fit_s": wall, "fitted": class_errors(pred, run.truth_log, iv, lab, res.values),
            "held_out": class_errors(pred, held.truth_log, ivh, labh, res.values)}


def _print_table(title: str, fits: dict) -> None:
    print(title)
    a, b = fits["seed003"], fits["turn_ratio"]
    for key in ("seed003", "turn_ratio"):
        f = fits[key]
        vals = ", ".join(f"{n.split('.')[1]} {v:+.4f}+-{f['std'][n]:.4f}"
                         for n, v in f["values"].items())
        print(f"  ({'a' if key == 'seed003' else 'b'}) {vals}; cost (3.44) {f['cost']:.1f} over "
              f"{f['intervals']} intervals, fit {f['fit_s']:.1f} s")
    print(f"  {'class':14s} {'(a) yaw [rad]':>14s} {'(a) pos [m]':>12s} {'(b) yaw [rad]':>14s} "
          f"{'(b) pos [m]':>12s}")
    for part in ("fitted", "held_out"):
        for cls in a[part]:
            name = cls if part == "fitted" else f"{cls} (held)"
            print(f"  {name:14s} {a[part][cls]['yaw_rms']:14.4f} {a[part][cls]['pos_rms']:12.4f} "
                  f"{b[part][cls]['yaw_rms']:14.4f} {b[part][cls]['pos_rms']:12.4f}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", help="write the results to this file")
    ap.add_argument("--shear-k", type=float, nargs="+", default=[0.005, 0.01, 0.02],
                    help="Janosi-Hanamoto shear moduli K [m] of the truth (default 5, 10, 20 mm)")
    ap.add_argument("--model-predictor", action="store_true",
                    help="also fit with the 3D enhanced track kinematics (slow)")
    args = ap.parse_args(argv)
    model = load_vehicle("absolem")
    out: dict = {"pose_std": POSE_STD, "chi": {}, "planar": {}, "model": {}}
    print(f"noise: {POSE_STD[0]} rad, {POSE_STD[1]} m per pose; errors are RMS against the "
          "noise-free truth over each class's intervals (2 s)")
    print("truth yaw efficiency chi = omega_cmd / omega at R = "
          + ", ".join(f"{r:g}" for r in CHI_RADII) + " m")
    for K in [0.0, *args.shear_k]:
        veh = truth_vehicle(model, shear_k=K)
        chi = [yaw_efficiency(veh, r) for r in CHI_RADII]
        out["chi"][str(K)] = dict(zip(map(str, CHI_RADII), chi))
        print(f"  K = {K * 1e3:4.1f} mm: " + " ".join(f"{c:.4f}" for c in chi))
    for K in args.shear_k:
        veh = truth_vehicle(model, shear_k=K)
        run = track_slip_log(model, standard_manoeuvres(RADII), veh, pose_std=POSE_STD, seed=1)
        held = track_slip_log(model, standard_manoeuvres(HELD_OUT, straight=False), veh,
                              pose_std=POSE_STD, seed=2)
        preds = [("planar", PlanarSlipPredictor.from_model(model))]
        if args.model_predictor:
            preds.append(("model", ModelPredictor(model, dt=0.01)))
        for tag, pred in preds:
            fits = {"seed003": _fit(pred, run, held, SEED_003_SET),
                    "turn_ratio": _fit(pred, run, held, TURN_RATIO_SET)}
            out[tag][str(K)] = fits
            _print_table(f"K = {K * 1e3:.1f} mm, {tag} predictor: (a) slip.p2, p6 "
                         "(seed 003 gains); (b) slip.p2, p6, p7, p8", fits)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
