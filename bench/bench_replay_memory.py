"""Peak RSS of ``wmr replay`` for 10, 30 and 60 minutes of synthetic log (issue 24).

One ``wmr synth`` run of ``--base`` seconds (default 600) is generated once and tiled into
longer logs: tile k is the same run with its stamps and bag times shifted by k times its length
and its poses (``/gps/odom``, ``/ground_truth/odom``, IMU attitude) moved by the planar rigid
motion that puts its start on the previous tile's end, so the path is continuous. Each log is
replayed by ``wmr replay --quiet --json`` as a subprocess; its peak resident set size comes from
``os.wait4``'s rusage of that child (``ru_maxrss``, KiB on Linux). Generated bags live in
``--work`` (default a folder under /tmp), never in the checkout.

    python bench/bench_replay_memory.py                 # 10, 30, 60 minutes
    python bench/bench_replay_memory.py --minutes 10,30 --json out.json

The acceptance numbers of issue 24: 60 minutes <= 600 MB and within 20 % of 10 minutes.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WMR = [sys.executable, "-m", "wmr_model"]
POSE_TOPICS = ("/gps/odom", "/ground_truth/odom")


def _yaw(q) -> float:
    return math.atan2(2 * (q.w * q.z + q.x * q.y), 1 - 2 * (q.y * q.y + q.z * q.z))


def _rotate_quat(q, dyaw: float) -> None:
    """q <- Rz(dyaw) * q in place (rosbags message quaternion)."""
    c, s = math.cos(dyaw / 2), math.sin(dyaw / 2)
    w, x, y, z = q.w, q.x, q.y, q.z
    q.w, q.x, q.y, q.z = c * w - s * z, c * x - s * y, c * y + s * x, c * z + s * w


def tile_bag(src: Path, dst: Path, tiles: int) -> Path:
    """Write ``tiles`` continuous copies of bag folder ``src`` as bag folder ``dst``."""
    from rosbags.highlevel import AnyReader
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore

    ts = get_typestore(Stores.ROS2_JAZZY)
    with AnyReader([src]) as r:
        span = r.end_time - r.start_time + 10_000_000  # + 10 ms: tiles never share a stamp
        first = last = None
        for c, _, raw in r.messages(connections=[c for c in r.connections
                                                 if c.topic == "/ground_truth/odom"]):
            p = r.deserialize(raw, c.msgtype).pose.pose
            last = (p.position.x, p.position.y, _yaw(p.orientation))
            first = first or last
    with AnyReader([src]) as r, Writer(dst, version=8, storage_plugin=StoragePlugin.MCAP) as w:
        conns = {}
        x0, y0, a0 = 0.0, 0.0, 0.0  # rigid motion of the current tile
        for k in range(tiles):
            for c, t, raw in r.messages():
                m = r.deserialize(raw, c.msgtype)
                h = getattr(m, "header", None)
                if h is not None:
                    ns = h.stamp.sec * 10**9 + h.stamp.nanosec + k * span
                    h.stamp.sec, h.stamp.nanosec = ns // 10**9, ns % 10**9
                if k and c.topic in POSE_TOPICS:
                    p = m.pose.pose
                    ca, sa = math.cos(a0), math.sin(a0)
                    px, py = p.position.x, p.position.y
                    p.position.x, p.position.y = x0 + ca * px - sa * py, y0 + sa * px + ca * py
                    _rotate_quat(p.orientation, a0)
                elif k and c.msgtype == "sensor_msgs/msg/Imu":
                    _rotate_quat(m.orientation, a0)
                if c.topic not in conns:
                    conns[c.topic] = w.add_connection(c.topic, c.msgtype, typestore=ts)
                w.write(conns[c.topic], t + k * span, ts.serialize_cdr(m, c.msgtype))
            # next tile: its start (first) goes where this tile ended (last, moved)
            ca, sa = math.cos(a0), math.sin(a0)
            ex, ey = x0 + ca * last[0] - sa * last[1], y0 + sa * last[0] + ca * last[1]
            a_end = a0 + last[2]
            a0 = a_end - first[2]
            ca, sa = math.cos(a0), math.sin(a0)
            x0, y0 = ex - (ca * first[0] - sa * first[1]), ey - (sa * first[0] + ca * first[1])
    shutil.copy(src / "wmr_synth.yaml", dst / "wmr_synth.yaml")
    return dst


def peak_rss_mb(cmd: list[str]) -> tuple[float, float, int]:
    """Run ``cmd``; return (peak RSS [MB] of that child, wall time [s], exit code)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if proc.returncode:
        sys.stderr.write(err)
    return usage.ru_maxrss / 1024.0, time.perf_counter() - t0, proc.returncode


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", default="10,30,60", help="log lengths [min] (default 10,30,60)")
    ap.add_argument("--base", type=float, default=600.0, help="synth run length [s] (600)")
    ap.add_argument("--work", default=None, help="folder for the bags (default: under /tmp)")
    ap.add_argument("--keep", action="store_true", help="keep the generated bags")
    ap.add_argument("--json", default=None, help="also write the results here")
    args = ap.parse_args(argv)
    work = Path(args.work or tempfile.mkdtemp(prefix="wmr_bench_mem_", dir="/tmp"))
    work.mkdir(parents=True, exist_ok=True)
    base = work / "base"
    if not (base / "wmr_synth.yaml").is_file():
        subprocess.run([*WMR, "synth", "--out", str(base), "--duration", f"{args.base:g}",
                        "--seed", "0", "--force"], check=True, stdout=subprocess.DEVNULL)
    rows = []
    for minutes in (float(m) for m in args.minutes.split(",")):
        tiles = max(1, round(minutes * 60 / args.base))
        bag = base if tiles == 1 else work / f"tiles_{tiles}"
        if tiles > 1 and not (bag / "wmr_synth.yaml").is_file():
            shutil.rmtree(bag, ignore_errors=True)
            tile_bag(base, bag, tiles)
        rss, wall, code = peak_rss_mb([*WMR, "replay", str(bag), "--quiet", "--json"])
        rows.append({"minutes": tiles * args.base / 60, "peak_rss_mb": round(rss, 1),
                     "wall_s": round(wall, 1), "exit": code})
        print(f"replay of {tiles * args.base / 60:5.1f} min: peak RSS {rss:7.1f} MB, "
              f"{wall:6.1f} s wall, exit {code}", flush=True)
    if len(rows) > 1:
        ratio = rows[-1]["peak_rss_mb"] / rows[0]["peak_rss_mb"]
        print(f"longest / shortest peak RSS: {ratio:.3f}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")
    if not args.keep and args.work is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if all(r["exit"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
