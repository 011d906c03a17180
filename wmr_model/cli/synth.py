"""``wmr synth``: write a synthetic field run of a vehicle as a rosbag2 (MCAP or SQLite3).

The truth (slip p1..p6 of a terrain preset, a mis-set wheel radius, a GPS antenna offset,
process noise) is simulated by ``wmr_model.calibration.synthetic``; encoders, IMU, RTK GPS/INS,
commands and the exact ground truth are written as /joint_states, /imu/data, /gps/odom,
/cmd_vel and /ground_truth/odom with noise, quantization, bias and latency
(``wmr_model.io.synth_bag``). The same seed gives the same bag. ``wmr replay OUT`` replays it.
"""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["register", "run"]


def register(subparsers: Any) -> None:
    """Add the ``synth`` subcommand."""
    from wmr_model.cli._output import add_json_flag

    p = subparsers.add_parser(
        "synth", help="write a synthetic field-run rosbag2 with known true parameters",
        description=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, metavar="DIR", help="bag folder to create")
    p.add_argument("--vehicle", default="warthog", metavar="NAME",
                   help="shipped vehicle with differential/skid steering (default warthog)")
    p.add_argument("--terrain", default="grass", choices=("asphalt", "dirt", "grass"),
                   help="terrain preset: true slip p1..p6, roughness and Q' (default grass)")
    p.add_argument("--duration", type=float, default=120.0, metavar="S",
                   help="length of the run [s] (default 120)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--storage", choices=("mcap", "sqlite3"), default="mcap",
                   help="rosbag2 storage (default mcap)")
    p.add_argument("--encoder-rate", type=float, default=50.0, metavar="HZ",
                   help="/joint_states rate (default 50)")
    p.add_argument("--imu-rate", type=float, default=100.0, metavar="HZ",
                   help="/imu/data rate = simulation rate; the other rates must divide it "
                        "(default 100)")
    p.add_argument("--gps-rate", type=float, default=10.0, metavar="HZ",
                   help="/gps/odom rate (default 10)")
    p.add_argument("--cmd-rate", type=float, default=20.0, metavar="HZ",
                   help="/cmd_vel rate (default 20)")
    p.add_argument("--truth-rate", type=float, default=50.0, metavar="HZ",
                   help="/ground_truth/odom rate (default 50)")
    p.add_argument("--gps-latency", type=float, default=0.1, metavar="S",
                   help="GPS/INS stamps are this late [s] (default 0.1)")
    p.add_argument("--force", action="store_true", help="replace an existing --out folder")
    add_json_flag(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Simulate and write the bag; print what was written."""
    import dataclasses

    from wmr_model.cli._output import emit
    from wmr_model.io.synth_bag import SensorNoise, SensorRates, SynthConfig, write_synth_bag

    cfg = SynthConfig(
        vehicle=args.vehicle, terrain=args.terrain, duration=args.duration, seed=args.seed,
        rates=SensorRates(encoders=args.encoder_rate, imu=args.imu_rate, gps=args.gps_rate,
                          cmd_vel=args.cmd_rate, ground_truth=args.truth_rate),
        noise=SensorNoise(gps_latency=args.gps_latency))
    s = write_synth_bag(args.out, cfg, storage=args.storage, overwrite=args.force)
    data = dataclasses.asdict(s)

    def text(d: dict) -> str:
        lines = [f"wrote {d['path']} ({d['storage']}, {d['duration']:g} s, {args.vehicle} on "
                 f"{args.terrain}, seed {args.seed})"]
        lines += [f"  {t:20s} {n:6d} msgs  {d['rates'][t]:g} Hz" for t, n in
                  sorted(d["counts"].items())]
        lines.append("truth: " + ", ".join(f"{k}={v:.4g}" for k, v in d["truth"].items()))
        return "\n".join(lines)

    emit(args, data, text)
    return 0
