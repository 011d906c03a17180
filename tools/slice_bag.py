#!/usr/bin/env python3
"""Write a time slice of a rosbag2 (every topic, messages unchanged) as a new MCAP rosbag2.

Used to ship the small real-log slices the tests read (``data/real_logs/``): a slice keeps the
recorded bytes of each message in ``[start, start + duration)`` seconds after the bag's first
message (receive time), with its topic's type and QoS.

    python tools/slice_bag.py SRC_BAG DST_BAG --start 0 --duration 60
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("src")
    p.add_argument("dst")
    p.add_argument("--start", type=float, default=0.0, help="[s] after the first message")
    p.add_argument("--duration", type=float, required=True, help="[s]")
    a = p.parse_args(argv)
    from rosbags.highlevel import AnyReader
    from rosbags.rosbag2 import StoragePlugin, Writer

    dst = Path(a.dst)
    if dst.exists():
        print(f"slice_bag: {dst} exists", file=sys.stderr)
        return 2
    with AnyReader([Path(a.src)]) as r:
        t0 = r.start_time + int(a.start * 1e9)
        t1 = t0 + int(a.duration * 1e9)
        with Writer(dst, version=8, storage_plugin=StoragePlugin.MCAP) as w:
            out = {}
            for c in r.connections:
                if c.topic not in out:
                    out[c.topic] = w.add_connection(c.topic, c.msgtype, typestore=r.typestore,
                                                    serialization_format="cdr",
                                                    offered_qos_profiles=c.ext.offered_qos_profiles
                                                    if hasattr(c.ext, "offered_qos_profiles")
                                                    else "")
            n = 0
            for c, t, raw in r.messages(start=t0, stop=t1):
                w.write(out[c.topic], t, raw)
                n += 1
    print(f"slice_bag: {n} messages, [{a.start:g}, {a.start + a.duration:g}) s -> {dst}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
