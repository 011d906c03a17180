"""``wmr calibrate``: offline/online batch IPEM on a bag and a Table 3.3-style comparison.

Reads encoder, pose (ground truth) and IMU streams from BAG, cuts the run into intervals and
compares diff drive, diff drive+ (alpha), 3D kinematic and 3D enhanced kinematic predictions
(online and converged, plus the offline fit (3.44)/(3.46) with --offline). The headline table
is out of sample (--split F): models calibrated on the first F of the log ("calibrated") or
still learning causally ("online") predict the intervals after it. The in-sample table (whole
log; its "converged" rows score the final estimate on the data it was fitted to) follows. The
calibrators learn from the informative intervals (path >= --min-distance or net yaw change >=
--min-turn; counts of straight, arc and spin intervals in the notes); the tables are over all
intervals (standing still included, minus ground-truth jumps with --max-speed).
The ground-truth latency is estimated as ``time_offset.pose`` with the calibrated models.
``--overlay`` writes the offline (else online) 3D kin+ estimate as a vehicle YAML overlay.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

__all__ = ["register", "run"]


def register(subparsers: Any) -> None:
    """Add the ``calibrate`` subcommand."""
    from wmr_model.calibration.intervals import MOVING_MIN_DISTANCE, MOVING_MIN_TURN
    from wmr_model.cli._output import add_json_flag

    p = subparsers.add_parser(
        "calibrate", help="calibrate a vehicle model to a bag (IPEM, thesis ch. 3)",
        description=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("bag", metavar="BAG", help="rosbag2 folder/file or ROS 1 bag")
    p.add_argument("--vehicle", required=True, metavar="FILE_OR_NAME",
                   help="shipped vehicle name or URDF/frame table")
    p.add_argument("--params", default=None, metavar="NAMES",
                   help="comma-separated parameters of the 3D kin+ model (default: the "
                   "vehicle's identifiability-checked calibrator set in config/nodes/<vehicle>"
                   ".yaml plus time_offset.pose, else slip.p2..p6,time_offset.pose)")
    p.add_argument("--noise", default="noise.U.wz_wz,noise.U.vx_vx,noise.U.vy_vy",
                   metavar="NAMES", help="Q' Cholesky entries to estimate ('' for none)")
    p.add_argument("--interval", type=float, default=2.0, metavar="S",
                   help="interval length [s] (default 2)")
    p.add_argument("--min-distance", type=float, default=MOVING_MIN_DISTANCE, metavar="M",
                   help="informative filter: calibrate on intervals whose ground-truth path is "
                   f"at least this long [m] (default {MOVING_MIN_DISTANCE:g}) ...")
    p.add_argument("--min-turn", type=float, default=MOVING_MIN_TURN, metavar="RAD",
                   help="... or whose net ground-truth yaw change is at least this [rad] "
                   f"(spins; default {MOVING_MIN_TURN:g}); both 0 use all")
    p.add_argument("--split", type=float, default=0.6, metavar="F",
                   help="calibrate on the first F of the log, evaluate out of sample on the "
                   "rest (default 0.6; 0 or 1: in-sample table only)")
    p.add_argument("--max-speed", type=float, default=None, metavar="M_PER_S",
                   help="drop intervals with a ground-truth step faster than this [m/s] "
                   "(re-localization jumps) from calibration and evaluation (default: keep)")
    p.add_argument("--no-reference-check", action="store_true",
                   help="keep intervals over reference jumps and diverged stretches (found by "
                   "comparing the latency-corrected reference with wheels and gyro; default: "
                   "excluded and reported)")
    p.add_argument("--inputs", default="", metavar="NAMES",
                   help="measured inputs of the 3D models: roll_pitch (IMU orientation), "
                   "gyro_yaw (gyro yaw rate); comma-separated (default none; slower)")
    p.add_argument("--iterations", type=int, default=1, metavar="N",
                   help="Gauss-Newton iterations per online update (1 = EKF; default 1)")
    p.add_argument("--dt", type=float, default=0.05, metavar="S", help="step size [s] (0.05)")
    p.add_argument("--pose-std", default=None, metavar="ROT,POS",
                   help="override the ground-truth covariance: std [rad],[m]")
    p.add_argument("--encoder-topic", default="/joint_states")
    p.add_argument("--pose-topic", default="/icp/odom")
    p.add_argument("--offline", action="store_true", help="also run the offline fit (slower)")
    p.add_argument("--overlay", default=None, metavar="YAML",
                   help="write the calibrated values as a vehicle overlay")
    add_json_flag(p)
    p.set_defaults(func=run)


def _checks(info: dict) -> list[str]:
    """Notes of the identifiability check and the physical-range warnings of 3D kin.+."""
    d = info.get("3D kin.+", {})
    out = [f"WARNING: 3D kin.+ {w}" for w in d.get("warnings", [])]
    idf = d.get("identifiability")
    if idf and idf["checked"]:
        out += [f"WARNING: 3D kin.+ {n} not identifiable on this log: {why}"
                for n, why in idf["confounded"].items()]
        if not idf["confounded"]:
            out.append("3D kin.+ identifiability: every parameter pinned by the data (posterior "
                       "std <= 0.5 of the prior along every direction)")
    return out


def run(args: argparse.Namespace) -> int:
    """Run the comparison and print it."""
    from wmr_model.calibration.intervals import (
        IntervalPolicy,
        classify_intervals,
        interval_class_counts,
        select_intervals,
        unwrapped_yaw,
    )
    from wmr_model.calibration.logs import log_from_bag, with_pose_std
    from wmr_model.calibration.overlay import overlay_yaml
    from wmr_model.calibration.table import compare_models
    from wmr_model.cli._output import emit
    from wmr_model.errors import ParameterError
    from wmr_model.vehicles import load_vehicle

    for flag, v, lo in (("--dt", args.dt, 0.0), ("--interval", args.interval, 0.0)):
        if not (math.isfinite(v) and v > lo):
            raise ParameterError(f"{flag}: must be a finite number > 0 s, got {v}")
    if not (math.isfinite(args.min_distance) and args.min_distance >= 0):
        raise ParameterError(f"--min-distance: must be a finite number >= 0 m, got "
                             f"{args.min_distance}")
    if not (math.isfinite(args.min_turn) and args.min_turn >= 0):
        raise ParameterError(f"--min-turn: must be a finite number >= 0 rad, got "
                             f"{args.min_turn}")
    if not (math.isfinite(args.split) and 0 <= args.split <= 1):
        raise ParameterError(f"--split: must be a fraction in [0, 1], got {args.split}")
    if args.max_speed is not None and not (args.max_speed > 0):
        raise ParameterError(f"--max-speed: must be > 0 m/s, got {args.max_speed}")
    from wmr_model.budgets import MAX_INTERVAL_STEPS, check_budget

    check_budget(f"--interval {args.interval:g} s / --dt {args.dt:g} s: steps per interval",
                 args.interval / args.dt, MAX_INTERVAL_STEPS, "use a larger --dt")
    if args.overlay:
        from wmr_model.io.files import prepare_output_dir

        prepare_output_dir(Path(args.overlay).expanduser().parent, "--overlay folder")
    model = load_vehicle(args.vehicle)
    log = log_from_bag(args.bag, model, encoder_topic=args.encoder_topic,
                       pose_topic=args.pose_topic)
    if args.pose_std:
        try:
            rot, pos = (float(v) for v in args.pose_std.split(","))
        except ValueError:
            raise ParameterError(f"--pose-std: expected ROT,POS, got {args.pose_std!r}") from None
        log = with_pose_std(log, rot, pos)
    if args.iterations < 1:
        raise ParameterError(f"--iterations: must be >= 1, got {args.iterations}")
    vmax = math.inf if args.max_speed is None else args.max_speed
    iv = select_intervals(log.pose_time, IntervalPolicy("time", args.interval, max_speed=vmax),
                          log.pose[:, 4:7])
    notes = list(log.notes)
    if not args.no_reference_check:
        from wmr_model.calibration.predictors import DiffDrivePredictor
        from wmr_model.calibration.reference import (
            estimate_latency,
            fault_note,
            reference_faults,
            sanity_warnings,
            trusted_intervals,
            yaw_track,
        )

        dd = DiffDrivePredictor.from_model(model)
        faults = reference_faults(log, dd, latency=estimate_latency(log, dd))
        n_all = len(iv)
        iv = trusted_intervals(iv, faults)
        notes.insert(0, fault_note(args.pose_topic, log.pose_time, faults, n_all - len(iv),
                                   n_all))
        warn, _ = sanity_warnings(log, dd, yaw_track(model), faults, args.bag)
        notes[:0] = [f"WARNING: {w}" for w in warn]
    yaw = unwrapped_yaw(log.pose[:, :4])
    pol = IntervalPolicy("time", args.interval, min_distance=args.min_distance,
                         min_turn=args.min_turn, max_speed=vmax)
    ivc = select_intervals(log.pose_time, pol, log.pose[:, 4:7], yaw)
    if not args.no_reference_check:
        ivc = trusted_intervals(ivc, faults)
    if len(ivc) == 0:
        raise ParameterError(f"{args.bag}: no {args.interval} s interval of the ground truth "
                             f"moves --min-distance {args.min_distance} m or turns --min-turn "
                             f"{args.min_turn} rad; nothing to calibrate")
    counts = interval_class_counts(classify_intervals(ivc, log.pose[:, 4:7], yaw, pol))
    class_note = (f"calibration intervals: {len(ivc)} of {len(iv)} ("
                  + ", ".join(f"{n} {k}" for k, n in counts.items() if k != "still")
                  + f"; path >= {args.min_distance:g} m or |yaw change| >= "
                  f"{args.min_turn:g} rad)")
    if args.params is not None:
        params = [n for n in args.params.split(",") if n]
    else:
        from wmr_model.calibration.table import DEFAULT_3D_PARAMS
        from wmr_model.calibration.vehicle_sets import vehicle_parameter_set

        vs = vehicle_parameter_set(model.name)
        params = (list(DEFAULT_3D_PARAMS) if vs is None
                  else [*vs[0], "time_offset.pose"])
        notes.append(f"3D kin.+ parameters: {', '.join(params)} ("
                     + ("default set" if vs is None else f"the identifiability-checked set of "
                        f"{vs[1]}") + ")")
    noise = [n for n in args.noise.split(",") if n]
    rows, info = compare_models(model, log, iv, calibration_intervals=ivc, params=params,
                                noise=noise, dt=args.dt, offline=args.offline,
                                iterations=args.iterations,
                                inputs=[n for n in args.inputs.split(",") if n],
                                split=args.split if 0 < args.split < 1 else None)

    def row(r) -> dict:
        return {"model": r.model, "mean_pos_m": r.pos, "mean_yaw_rad": r.yaw,
                "values": r.values, "intervals": r.intervals}

    data = {"bag": args.bag, "vehicle": model.name, "intervals": len(iv),
            "calibration_intervals": len(ivc), "interval_s": args.interval,
            "interval_classes": {k: n for k, n in counts.items() if k != "still"},
            "out_of_sample": ({**info["split"],
                               "rows": [row(r) for r in rows if r.table == "out-of-sample"]}
                              if "split" in info else None),
            "rows": [row(r) for r in rows if r.table == "in-sample"],
            "details": {k: v for k, v in info.items() if k != "split"},
            "notes": [class_note, *notes, *_checks(info)]}
    if args.overlay:
        key = "3D kin.+ offline" if "3D kin.+ offline" in info else "3D kin.+"
        from wmr_model.io.files import write_text_atomically

        write_text_atomically(args.overlay, overlay_yaml(
            model.name, info[key]["estimate"], info[key]["std"], note=f"{key} on {args.bag}"))

    def text(d: dict) -> str:
        head = f"{'model':28s} {'mean pos (m)':>12s} {'mean yaw (rad)':>14s}"
        lines = [f"{d['bag']}: {d['intervals']} intervals of {d['interval_s']} s "
                 f"({d['calibration_intervals']} informative ones calibrate)"]
        o = d["out_of_sample"]
        if o:
            lines += [f"OUT OF SAMPLE: calibrated on the first {o['fraction']:g} of the log "
                      f"(to {o['t_split']:.1f} s, {o['calibration_intervals']} calibration "
                      f"intervals), evaluated on the {o['evaluation_intervals']} intervals "
                      "after it", head]
            lines += [f"{r['model']:28s} {r['mean_pos_m']:12.4f} {r['mean_yaw_rad']:14.4f}"
                      for r in o["rows"]]
        lines += [f"IN SAMPLE: whole log, {d['intervals']} intervals (converged = final "
                  "estimate on the data it was fitted to)", head]
        lines += [f"{r['model']:28s} {r['mean_pos_m']:12.4f} {r['mean_yaw_rad']:14.4f}"
                  for r in d["rows"]]
        for k, v in d["details"].items():
            est = ", ".join(f"{n}={x:.4g}" for n, x in v["estimate"].items())
            lines.append(f"{k}: {est}")
        lines += [f"note: {n}" for n in d["notes"]]
        return "\n".join(lines)

    emit(args, data, text)
    return 0
