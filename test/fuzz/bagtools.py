"""Rewrite a rosbag2 message by message (real bags in, real bags out) for the reliability suite."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
from rosbags.highlevel import AnyReader
from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.typesys import Stores, get_typestore

TS = get_typestore(Stores.ROS2_JAZZY)


def stamp_of(msg) -> float | None:
    h = getattr(msg, "header", None)
    return None if h is None else h.stamp.sec + 1e-9 * h.stamp.nanosec


def set_stamp(msg, t: float) -> None:
    ns = int(round(t * 1e9))
    msg.header.stamp.sec, msg.header.stamp.nanosec = ns // 10**9, ns % 10**9


def rewrite(src: Path, dst: Path, edit: Callable[[int, str, object], list[object] | None]) -> Path:
    """Copy bag folder ``src`` (with its ``wmr_synth.yaml``) to ``dst``; ``edit(k, topic, msg)``
    may change ``msg`` in place and returns the messages to write in its place (None: ``[msg]``,
    ``[]``: drop it). ``k`` counts messages of that topic."""
    dst.mkdir(parents=True)
    counts: dict[str, int] = {}
    with AnyReader([src]) as r, Writer(dst / "bag", version=8,
                                       storage_plugin=StoragePlugin.MCAP) as w:
        conns = {}
        for c, t, raw in r.messages():
            m = r.deserialize(raw, c.msgtype)
            k = counts.get(c.topic, 0)
            counts[c.topic] = k + 1
            out = edit(k, c.topic, m)
            for mm in [m] if out is None else out:
                if c.topic not in conns:
                    conns[c.topic] = w.add_connection(c.topic, c.msgtype, typestore=TS)
                w.write(conns[c.topic], t, TS.serialize_cdr(mm, c.msgtype))
    side = src / "wmr_synth.yaml"
    if side.is_file():
        (dst / "bag" / "wmr_synth.yaml").write_bytes(side.read_bytes())
    return dst / "bag"


def empty(dtype=float) -> np.ndarray:
    return np.array([], dtype=dtype)
