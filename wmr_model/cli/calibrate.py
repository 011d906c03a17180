"""``wmr calibrate``: offline/online batch IPEM on a bag and a Table 3.3-style comparison.

Reads encoder, pose (ground truth) and IMU streams from BAG, cuts the run into intervals and
compares the planar model of the vehicle's kind (diff drive, or the bicycle for steered vehicles)
uncalibrated and calibrated ("+"), 3D kinematic and 3D enhanced kinematic predictions
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
    from wmr_model.cli._options import add_interval_arguments, add_reference_arguments
    from wmr_model.cli._output import add_json_flag

    p = subparsers.add_parser(
        "calibrate", help="calibrate a vehicle model to a bag (IPEM, thesis ch. 3)",
        description=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("bag", metavar="BAG", help="rosbag2 folder/file or ROS 1 bag; or many: a "
                   "folder of bags, a quoted glob pattern or a manifest YAML (fleet "
                   "calibration, see below)")
    p.add_argument("--vehicle", default=None, metavar="FILE_OR_NAME",
                   help="shipped vehicle name or URDF/frame table (required for one bag; with "
                   "many, the default of bags whose manifest entry names none)")
    p.add_argument("--params", default=None, metavar="NAMES",
                   help="comma-separated parameters of the 3D kin+ model (default: the "
                   "vehicle's identifiability-checked calibrator set in config/nodes/<vehicle>"
                   ".yaml plus time_offset.pose, else slip.p2..p6,time_offset.pose)")
    p.add_argument("--noise", default="noise.U.wz_wz,noise.U.vx_vx,noise.U.vy_vy",
                   metavar="NAMES", help="Q' Cholesky entries to estimate ('' for none)")
    add_interval_arguments(p)
    p.add_argument("--max-speed", type=float, default=None, metavar="M_PER_S",
                   help="drop intervals with a ground-truth step faster than this [m/s] "
                   "(re-localization jumps) from calibration and evaluation (default: keep)")
    add_reference_arguments(p)
    p.add_argument("--inputs", default="", metavar="NAMES",
                   help="measured inputs of the 3D models: roll_pitch (IMU orientation), "
                   "gyro_yaw (gyro yaw rate); comma-separated (default none; slower)")
    p.add_argument("--iterations", type=int, default=1, metavar="N",
                   help="Gauss-Newton iterations per online update (1 = EKF; default 1)")
    p.add_argument("--dt", type=float, default=0.05, metavar="S", help="step size [s] (0.05)")
    p.add_argument("--pose-std", default=None, metavar="ROT,POS",
                   help="override the ground-truth covariance: std [rad],[m]")
    p.add_argument("--encoder-topic", default="/joint_states")
    p.add_argument("--steer-topic", default=None, metavar="TOPIC",
                   help="JointState topic with the steering angles when the encoder topic "
                        "lacks them (default: the vehicle sidecar's steering.<joint>.topic)")
    p.add_argument("--pose-topic", default=None,
                   help="reference topic: nav_msgs/Odometry, PoseWithCovarianceStamped, "
                        "PoseStamped or sensor_msgs/NavSatFix (position only: the heading is "
                        "derived); default: first of /gps/odom, /ins/pose, /odometry/gps, "
                        "/icp/odom, /ground_truth/odom, /mocap/odom, /pf/odom, /gps/fix")
    p.add_argument("--offline", action="store_true", help="also run the offline fit (slower)")
    p.add_argument("--overlay", default=None, metavar="YAML",
                   help="write the calibrated values as a vehicle overlay")
    f = p.add_argument_group(
        "fleet (many bags)", "Per-bag offline fits, one fit per group written as an overlay "
        "(--library) and a cross-validated error table; tasks run in-process, on local Ray "
        "(--workers N) or on a Ray cluster (--ray-address), cached by input hash.")
    f.add_argument("--group-by", choices=("robot", "terrain", "vehicle"), default=None,
                   help="group the bags by this label for the grouped fits (default vehicle)")
    f.add_argument("--library", default=None, metavar="DIR",
                   help="write one vehicle overlay YAML (values and 1-sigma) per group here")
    f.add_argument("--folds", type=int, default=5, metavar="K",
                   help="cross-validation folds per group (leave-one-bag-out up to K bags; "
                   "default 5)")
    f.add_argument("--workers", type=int, default=None, metavar="N",
                   help="run the fits on a local Ray instance with N workers (needs "
                   "pip install '.[cluster]'; default: in-process)")
    f.add_argument("--ray-address", default=None, metavar="ADDR",
                   help="run the fits on an existing Ray cluster (e.g. 'auto' or "
                   "'ray://head:10001')")
    f.add_argument("--cache-dir", default=None, metavar="DIR",
                   help="result cache (default $XDG_CACHE_HOME/wmr_model/runner): an "
                   "interrupted run resumes, an unchanged one does no work")
    f.add_argument("--no-cache", action="store_true", help="neither read nor write the cache")
    f.add_argument("--quiet", action="store_true", help="no progress bar on stderr")
    add_json_flag(p)
    p.set_defaults(func=run)


def _checks(info: dict) -> list[str]:
    """Notes of an empty calibration part, the identifiability check and the physical-range
    warnings of 3D kin.+."""
    from wmr_model.calibration.identifiability import DEFAULT_MIN_INTERVALS
    from wmr_model.calibration.table import empty_split_warning

    d = info.get("3D kin.+", {})
    out = empty_split_warning(info.get("split"))
    out += [f"WARNING: 3D kin.+ {w}" for w in d.get("warnings", [])]
    idf = d.get("identifiability")
    if idf and not idf["checked"]:
        out.append(f"3D kin.+ identifiability not checked: {idf.get('accepted', 0)} accepted "
                   f"intervals, the check needs {DEFAULT_MIN_INTERVALS} (--min-distance / "
                   "--min-turn / --interval select more)")
    if idf and idf["checked"]:
        out += [f"WARNING: 3D kin.+ {n} not identifiable on this log: {why}"
                for n, why in idf["confounded"].items()]
        if not idf["confounded"]:
            out.append("3D kin.+ identifiability: every parameter pinned by the data (posterior "
                       "std <= 0.5 of the prior along every direction)")
    return out


def _options(args: argparse.Namespace):
    """The fit options of the flags (checked; ParameterError naming the flag)."""
    from wmr_model.cli._options import check_interval_arguments, check_reference_arguments
    from wmr_model.errors import ParameterError
    from wmr_model.pipelines.fleet import FitOptions

    if not (math.isfinite(args.dt) and args.dt > 0):
        raise ParameterError(f"--dt: must be a finite number > 0 s, got {args.dt}")
    check_interval_arguments(args)
    check_reference_arguments(args)
    if args.max_speed is not None and not (args.max_speed > 0):
        raise ParameterError(f"--max-speed: must be > 0 m/s, got {args.max_speed}")
    pose_std: tuple[float, float] | None = None
    if args.pose_std:
        try:
            stds = tuple(float(v) for v in args.pose_std.split(","))
        except ValueError:
            stds = ()
        if len(stds) != 2:
            raise ParameterError(f"--pose-std: expected ROT,POS, got {args.pose_std!r}")
        pose_std = (stds[0], stds[1])
    from wmr_model.budgets import MAX_INTERVAL_STEPS, check_budget

    check_budget(f"--interval {args.interval:g} s / --dt {args.dt:g} s: steps per interval",
                 args.interval / args.dt, MAX_INTERVAL_STEPS, "use a larger --dt")
    return FitOptions(
        interval=args.interval, min_distance=args.min_distance, min_turn=args.min_turn,
        max_speed=args.max_speed, reference_check=not args.no_reference_check,
        reference_settle=args.reference_settle,
        encoder_topic=args.encoder_topic, pose_topic=args.pose_topic,
        steer_topic=args.steer_topic, pose_std=pose_std,
        dt=args.dt, params=(None if args.params is None
                            else tuple(n for n in args.params.split(",") if n)),
        noise=tuple(n for n in args.noise.split(",") if n),
        inputs=tuple(n for n in args.inputs.split(",") if n))


def _is_fleet(args: argparse.Namespace) -> bool:
    """Many bags (folder, glob, manifest) or any fleet flag: the fleet path."""
    from wmr_model.pipelines.fleet import is_bag

    p = Path(args.bag).expanduser()
    flags = (args.group_by, args.library, args.workers, args.ray_address, args.cache_dir)
    if any(f is not None for f in flags):
        return True
    if p.is_dir():
        return not is_bag(p)
    if p.is_file():
        return p.suffix.lower() in (".yaml", ".yml")
    return any(c in args.bag for c in "*?[")


def _run_fleet(args: argparse.Namespace) -> int:
    """Fleet calibration (wmr_model.pipelines.fleet) on the runner; 0, or 1 when a fit failed."""
    from wmr_model.cli._output import emit
    from wmr_model.errors import ParameterError
    from wmr_model.pipelines.fleet import calibrate_fleet, discover_bags, fleet_text, write_library
    from wmr_model.pipelines.runner import Runner

    for flag, bad in (("--overlay", args.overlay), ("--offline", args.offline)):
        if bad:
            raise ParameterError(f"{flag}: single-bag only; with many bags every fit is "
                                 "offline and --library DIR writes one overlay per group")
    if args.workers is not None and args.workers < 1:
        raise ParameterError(f"--workers: must be >= 1, got {args.workers}")
    if args.folds < 2:
        raise ParameterError(f"--folds: must be >= 2, got {args.folds}")
    opts = _options(args)
    bags = discover_bags(args.bag, args.vehicle)
    cache = None if args.no_cache else (args.cache_dir or _default_cache())
    with Runner(workers=args.workers, ray_address=args.ray_address, cache_dir=cache,
                quiet=args.quiet, label="calibrate ") as runner:
        report = calibrate_fleet(bags, opts, runner, group_by=args.group_by or "vehicle",
                                 folds=args.folds)
    if args.library:
        write_library(report, args.library)
    emit(args, report, fleet_text)
    return 1 if report["failed"] else 0


def _default_cache() -> str:
    """``$XDG_CACHE_HOME/wmr_model/runner`` (default ``~/.cache/...``)."""
    import os

    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    Path(root).mkdir(parents=True, exist_ok=True)
    (Path(root) / "wmr_model").mkdir(exist_ok=True)
    return str(Path(root) / "wmr_model" / "runner")


def run(args: argparse.Namespace) -> int:
    """Run the comparison and print it (one bag) or the fleet calibration (many bags)."""
    from wmr_model.calibration.table import compare_models
    from wmr_model.cli._output import emit
    from wmr_model.errors import ParameterError
    from wmr_model.io.calibration_file import overlay_yaml
    from wmr_model.io.vehicles import load_vehicle
    from wmr_model.pipelines.fleet import default_params, prepare_bag

    if _is_fleet(args):
        return _run_fleet(args)
    if args.vehicle is None:
        raise ParameterError("--vehicle: required for one bag (with many, a manifest may name "
                             "the vehicle per bag)")
    opts = _options(args)
    if args.iterations < 1:
        raise ParameterError(f"--iterations: must be >= 1, got {args.iterations}")
    if args.overlay:
        from wmr_model.io.files import prepare_output_dir

        prepare_output_dir(Path(args.overlay).expanduser().parent, "--overlay folder")
    model = load_vehicle(args.vehicle)
    prep = prepare_bag(args.bag, model, opts)
    log, iv, ivc, counts = prep.log, prep.intervals, prep.calibration_intervals, prep.class_counts
    notes = list(prep.notes)
    class_note = (f"calibration intervals: {len(ivc)} of {len(iv)} ("
                  + ", ".join(f"{n} {k}" for k, n in counts.items() if k != "still")
                  + f"; path >= {args.min_distance:g} m or |yaw change| >= "
                  f"{args.min_turn:g} rad)")
    if args.params is not None:
        params = [n for n in args.params.split(",") if n]
    else:
        params, note = default_params(model)
        notes.append(note)
    noise = [n for n in args.noise.split(",") if n]
    rows, info = compare_models(model, log, iv, calibration_intervals=ivc, params=params,
                                noise=noise, dt=args.dt, offline=args.offline,
                                iterations=args.iterations,
                                inputs=[n for n in args.inputs.split(",") if n],
                                split=args.split if 0 < args.split < 1 else None)

    row = _row_dict
    data = {"bag": args.bag, "vehicle": model.name, "intervals": len(iv),
            "calibration_intervals": len(ivc), "interval_s": args.interval,
            "interval_classes": {k: n for k, n in counts.items() if k != "still"},
            "out_of_sample": ({**info["split"],
                               "rows": [row(r) for r in rows if r.table == "out-of-sample"]}
                              if "split" in info else None),
            "rows": [row(r) for r in rows if r.table == "in-sample"],
            "details": {k: v for k, v in info.items() if k != "split"},
            "notes": [class_note, *notes, *_checks(info)]}
    from wmr_model.calibration.table import resolution_note

    head = data["out_of_sample"]["rows"] if data["out_of_sample"] else data["rows"]
    data["notes"] += resolution_note(
        log, head[0]["intervals"] if head else len(iv),
        [(r["model"], r["mean_pos_m"]) for r in head if "+" in r["model"]])
    if args.overlay:
        key = "3D kin.+ offline" if "3D kin.+ offline" in info else "3D kin.+"
        from wmr_model.io.files import write_text_atomically

        write_text_atomically(args.overlay, overlay_yaml(
            model.name, info[key]["estimate"], info[key]["std"], note=f"{key} on {args.bag}"))

    emit(args, data, _text)
    return 0


def _row_dict(r) -> dict:
    """One comparison row as JSON."""
    return {"model": r.model, "mean_pos_m": r.pos, "mean_yaw_rad": r.yaw,
            "values": r.values, "intervals": r.intervals}


def _row_text(r: dict) -> str:
    """One table row; ``n/a`` where the reference cannot score a column (the yaw of a
    position-only reference)."""
    def num(v: float, w: int) -> str:
        return f"{v:{w}.4f}" if math.isfinite(v) else f"{'n/a':>{w}s}"

    return f"{r['model']:28s} {num(r['mean_pos_m'], 12)} {num(r['mean_yaw_rad'], 14)}"


def _text(d: dict) -> str:
    """The text report: out-of-sample table first, then in sample, estimates and notes."""
    head = f"{'model':28s} {'mean pos (m)':>12s} {'mean yaw (rad)':>14s}"
    lines = [f"{d['bag']}: {d['intervals']} intervals of {d['interval_s']} s "
             f"({d['calibration_intervals']} informative ones calibrate)"]
    o = d["out_of_sample"]
    if o:
        lines += [f"OUT OF SAMPLE: calibrated on the first {o['fraction']:g} of the log "
                  f"(to {o['t_split']:.1f} s, {o['calibration_intervals']} calibration "
                  f"intervals), evaluated on the {o['evaluation_intervals']} intervals "
                  "after it", head]
        lines += [_row_text(r) for r in o["rows"]]
    lines += [f"IN SAMPLE: whole log, {d['intervals']} intervals (converged = final "
              "estimate on the data it was fitted to)", head]
    lines += [_row_text(r) for r in d["rows"]]
    for k, v in d["details"].items():
        est = ", ".join(f"{n}={x:.4g}" for n, x in v["estimate"].items())
        lines.append(f"{k}: {est}")
    lines += [f"note: {n}" for n in d["notes"]]
    return "\n".join(lines)
