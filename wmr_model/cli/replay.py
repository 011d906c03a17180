"""``wmr replay BAG``: odometry + online IPEM calibration over a bag, Table 3.3 errors, report.

Reads rosbag2 (MCAP, SQLite3) or ROS 1 bags, runs the odometry node's Odometry3D (encoders,
encoders + gyro, calibrated enhanced kinematics) and the online calibrator in stamp order as
fast as the CPU allows, evaluates diff drive, diff drive+, 3D kin. and 3D kin.+ (online and
converged) over 1/2/4 s intervals and the long-run odometry drift, and writes CSV (odometry,
calibration state), results.json, a Markdown/HTML report with PNG plots and, with --out-bag, a
rosbag2 of odometry and calibration state. Defaults match 'wmr synth' bags (their
wmr_synth.yaml supplies vehicle, terrain, antenna and parameter list) and common drivers.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

__all__ = ["register", "run", "results_dict"]


def register(subparsers: Any) -> None:
    """Add the ``replay`` subcommand."""
    from wmr_model.cli._options import add_interval_arguments, add_reference_arguments
    from wmr_model.cli._output import add_json_flag

    p = subparsers.add_parser(
        "replay", help="odometry + online calibration over a bag, error tables and a report",
        description=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("bag", metavar="BAG", help="rosbag2 folder/file or ROS 1 bag")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="write CSV, results.json and the report here (default: no files)")
    p.add_argument("--out-bag", default=None, metavar="PATH",
                   help="also write odometry + calibration state as a rosbag2 (MCAP)")
    p.add_argument("--vehicle", default=None, metavar="FILE_OR_NAME",
                   help="vehicle (default: the synthetic bag's, else warthog)")
    p.add_argument("--encoder-topic", default="/joint_states")
    p.add_argument("--steer-topic", default=None, metavar="TOPIC",
                   help="JointState topic with the steering angles when the encoder topic "
                        "lacks them (default: the vehicle sidecar's steering.<joint>.topic)")
    p.add_argument("--imu-topic", default="/imu/data", help="'' for none")
    p.add_argument("--pose-topic", default=None,
                   help="reference topic: nav_msgs/Odometry, PoseWithCovarianceStamped, "
                        "PoseStamped or sensor_msgs/NavSatFix (position only: the heading is "
                        "derived); default: first of /gps/odom, /ins/pose, /odometry/gps, "
                        "/icp/odom, /ground_truth/odom, /mocap/odom, /pf/odom, /gps/fix")
    p.add_argument("--truth-topic", default="/ground_truth/odom",
                   help="exact truth for the drift evaluation, when present")
    p.add_argument("--pose-sensor", default=None, metavar="NAME",
                   help="sensor frame of the pose topic (default: its child_frame_id)")
    p.add_argument("--pose-sensor-xyz", default=None, metavar="X,Y,Z",
                   help="nominal position of that sensor in the body frame [m]")
    p.add_argument("--terrain", default=None, metavar="SPEC",
                   help="terrain spec as in 'wmr simulate' (default: synthetic bag's, else flat)")
    p.add_argument("--params", default=None, metavar="NAMES",
                   help="comma-separated 3D kin.+ parameters (default: synthetic bag's list, "
                        "else slip.p2..p6,time_offset.pose [+ sensor x,y])")
    p.add_argument("--noise", default="noise.U.wz_wz,noise.U.vx_vx,noise.U.vy_vy",
                   metavar="NAMES", help="Q' Cholesky entries to estimate")
    add_interval_arguments(p)
    add_reference_arguments(p)
    p.add_argument("--dt", type=float, default=0.05, metavar="S",
                   help="prediction step [s] (default 0.05)")
    p.add_argument("--stale-hold", type=float, default=0.3, metavar="S",
                   help="repeated wheel speeds younger than this are stale (sample-and-hold) "
                        "[s]; 0 disables (default 0.3)")
    p.add_argument("--pose-std", default=None, metavar="ROT,POS",
                   help="override the ground-truth covariance: std [rad],[m]")
    p.add_argument("--no-plots", action="store_true", help="report text only")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    add_json_flag(p)
    p.set_defaults(func=run)


def results_dict(res) -> dict:
    """The numbers of a replay (results.json; no wall-clock values)."""
    from wmr_model.pipelines.replay import RESULTS_VERSION

    return {
        "version": RESULTS_VERSION, "bag": res.bag, "vehicle": res.vehicle,
        "topics": res.topics, "counts": res.counts, "duration_s": res.duration,
        "table": {f"{L:g}": [{"model": m, "mean_pos_m": p, "mean_yaw_rad": y, "intervals": k}
                             for m, p, y, k in rows] for L, rows in res.table.items()},
        "out_of_sample": ({**res.split, "table": {
            f"{L:g}": [{"model": m, "mean_pos_m": p, "mean_yaw_rad": y, "intervals": k}
                       for m, p, y, k in rows] for L, rows in res.table_oos.items()}}
            if res.split else None),
        "interval_classes": res.interval_classes,
        "drift": {lab: {"drift_pct": t.drift_pct, "end_error_m": t.end_error,
                        "path_m": t.length, "trusted_stretches": t.segments,
                        "diagnostics": t.diagnostics}
                  for lab, t in res.odometry.items()},
        "estimate": res.estimate, "std": res.std, "truth": res.truth, "z": res.z_scores(),
        "planar_plus": {"model": f"{res.planar}+", "estimate": res.dd_estimate,
                        "std": res.dd_std},
        "calibration_intervals": res.calibration_intervals, "rejected": res.rejected,
        "notes": res.notes,
    }


def _floats(text: str | None, n: int, flag: str):
    from wmr_model.errors import ParameterError

    if text is None:
        return None
    try:
        v = tuple(float(x) for x in text.split(","))
    except ValueError:
        raise ParameterError(f"{flag}: expected {n} comma-separated numbers, got {text!r}") \
            from None
    if len(v) != n:
        raise ParameterError(f"{flag}: expected {n} comma-separated numbers, got {text!r}")
    return v


def run(args: argparse.Namespace) -> int:
    """Replay, print the tables and write the outputs."""
    from wmr_model.cli._output import emit
    from wmr_model.pipelines.replay import replay

    opt = _replay_options(args)
    _check_outputs(args)
    res = replay(args.bag, opt)
    data = results_dict(res)
    files = _write_outputs(args, res, data)
    speed = res.duration / max(res.wall_time, 1e-9)
    data = {**data, "files": files, "wall_time_s": res.wall_time, "speed_x_realtime": speed}
    emit(args, data, lambda d: _text(d, res, speed, files))
    return 0


def _replay_options(args: argparse.Namespace):
    """The checked :class:`wmr_model.pipelines.replay.ReplayOptions` of the flags."""
    from wmr_model.cli._options import check_interval_arguments, check_reference_arguments
    from wmr_model.pipelines.replay import ReplayOptions

    check_interval_arguments(args)
    check_reference_arguments(args)
    return ReplayOptions(
        vehicle=args.vehicle, encoder_topic=args.encoder_topic, steer_topic=args.steer_topic,
        imu_topic=args.imu_topic or None, pose_topic=args.pose_topic,
        truth_topic=args.truth_topic or None, pose_sensor=args.pose_sensor,
        pose_sensor_xyz=_floats(args.pose_sensor_xyz, 3, "--pose-sensor-xyz"),
        terrain=args.terrain,
        params=None if args.params is None else tuple(n for n in args.params.split(",") if n),
        noise=tuple(n for n in args.noise.split(",") if n), interval=args.interval,
        min_distance=args.min_distance, min_turn=args.min_turn,
        split=args.split if 0 < args.split < 1 else None, dt=args.dt,
        stale_hold=args.stale_hold if args.stale_hold > 0 else None,
        pose_std=_floats(args.pose_std, 2, "--pose-std"),
        reference_check=not args.no_reference_check, reference_settle=args.reference_settle,
        progress=not args.quiet and not args.json and sys.stderr.isatty())


def _check_outputs(args: argparse.Namespace) -> None:
    """Refuse an existing --out-bag or one in a missing folder; prepare the --out folder."""
    from pathlib import Path

    from wmr_model.errors import ParameterError

    if args.out_bag:
        ob = Path(args.out_bag).expanduser()
        if ob.exists():
            raise ParameterError(f"--out-bag {ob}: exists; choose a new output bag path")
        if not ob.parent.is_dir():
            raise ParameterError(f"--out-bag {ob}: folder {ob.parent} does not exist (only the "
                                 "bag itself is created)")
    if args.out:
        from wmr_model.io.files import prepare_output_dir

        prepare_output_dir(args.out, "--out")


def _write_outputs(args: argparse.Namespace, res, data: dict) -> dict[str, str]:
    """CSV, results.json and the report in --out, the --out-bag; the files by kind."""
    import json
    from pathlib import Path

    from wmr_model.cli._output import to_jsonable
    from wmr_model.pipelines.replay import write_csv, write_output_bag

    files = {}
    if args.out:
        from wmr_model.io.report import write_report

        out = Path(args.out)
        files.update({k: str(v) for k, v in write_csv(res, out).items()})
        from wmr_model.io.files import write_text_atomically

        write_text_atomically(out / "results.json", json.dumps(to_jsonable(data), indent=2,
                                                               allow_nan=False) + "\n")
        files["results"] = str(out / "results.json")
        files.update({k: str(v) for k, v in write_report(res, out,
                                                         plots=not args.no_plots).items()})
    if args.out_bag:
        files["bag"] = str(write_output_bag(res, args.out_bag))
    return files


def _text(d: dict, res, speed: float, files: dict[str, str]) -> str:
    """The text report: tables (out of sample first), drift, estimates, notes, files."""
    from wmr_model.io.report import table_text

    lines = [f"{d['bag']}: {d['vehicle']}, {d['duration_s']:.1f} s replayed in "
             f"{res.wall_time:.1f} s ({speed:.0f}x real time)", "",
             f"Interval prediction errors (Table 3.3): uncalibrated = {res.planar}, 3D kin.; "
             f"calibrated = {res.planar}+, 3D kin.+"]
    if res.table_oos:
        sp = res.split
        lines += [f"OUT OF SAMPLE: calibrated on the first {sp['fraction']:g} of the log "
                  f"(to {sp['t_split']:.1f} s, {sp['calibration_intervals']} updates), "
                  "scored on the intervals after it"]
        lines += table_text(res, out_of_sample=True)
        lines += ["", "IN SAMPLE (whole log; converged = final estimate on the data it was "
                  "fitted to)"]
    lines += table_text(res)
    lines += ["", "Odometry drift (% of path):"]
    lines += [f"  {lab:36s} {v['drift_pct']:6.2f} %  ({v['end_error_m']:.2f} m of "
              f"{v['path_m']:.1f} m" + (f", {v['trusted_stretches']} trusted stretches"
                                        if v["trusted_stretches"] > 1 else "") + ")"
              for lab, v in d["drift"].items()]
    lines += ["", "3D kin.+ calibrated (online, final):"]
    z = d["z"]
    for n, v in d["estimate"].items():
        t = d["truth"].get(n)
        extra = "" if t is None else f"  truth {t:.4g}  ({z[n]:+.1f} sigma)"
        lines.append(f"  {n:32s} {v:9.4g} ± {d['std'][n]:.2g}{extra}")
    lines += ["", *[f"note: {n}" for n in d["notes"]]]
    if files:
        lines.append("")
        lines += [f"{k}: {v}" for k, v in files.items()]
    return "\n".join(lines)
