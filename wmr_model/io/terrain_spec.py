"""Terrain from a short text spec, as used by the ``wmr`` command line and node parameters.

Grammar (angles in degrees at this I/O boundary, lengths in metres):

==============================  ===========================================================
``flat[:Z]``                    horizontal plane at height Z (default 0)
``plane:SLOPE_DEG[,HEADING_DEG]``  inclined plane rising toward HEADING (default 0 = +x)
``rough:RMS,CORR[,SEED]``       random rough terrain (§2.5.1), RMS height and correlation
                                length [m], seed (default 0), 40 m x 20 m around the origin
``ramp:HEIGHT,UP,TOP,DOWN,START``  trapezoidal ramp across the x axis
``step:HEIGHT,AT``              step of HEIGHT at x = AT
``zoe-ramp[:START]``            the 0.41 m Zoë ramp of §3.4.3 starting at x = START (default 2)
``wmrde:N``                     benchmark terrain N (1-10) of the thesis' library (§2.5.4)
``file:PATH``                   height map file; wmrde ``gridsurfdata`` text carries its own
                                grid, other formats need ``resolution``/``origin`` arguments
==============================  ===========================================================
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from wmr_model.errors import TerrainError
from wmr_model.terrain import surface as tr

__all__ = ["parse_terrain_spec"]


def _numbers(spec: str, body: str, lo: int, hi: int) -> list[float]:
    parts = [p for p in body.split(",") if p.strip()] if body else []
    if not lo <= len(parts) <= hi:
        want = str(lo) if lo == hi else f"{lo} to {hi}"
        raise TerrainError(f"terrain spec {spec!r}: expected {want} comma-separated numbers, "
                           f"got {len(parts)}")
    try:
        vals = [float(p) for p in parts]
    except ValueError:
        raise TerrainError(f"terrain spec {spec!r}: {body!r} is not a list of numbers") from None
    if not all(math.isfinite(v) for v in vals):
        raise TerrainError(f"terrain spec {spec!r}: numbers must be finite")
    return vals


def parse_terrain_spec(spec: str, *, resolution: float | Sequence[float] | None = None,
                       origin: Sequence[float] | None = None) -> tr.Terrain:
    """Build a :class:`~wmr_model.terrain.surface.Terrain` from ``spec`` (grammar: module doc)."""
    kind, _, body = spec.strip().partition(":")
    kind = kind.lower()
    if kind == "flat":
        (z,) = _numbers(spec, body, 0, 1) or [0.0]
        return tr.flat(z)
    if kind == "plane":
        v = _numbers(spec, body, 1, 2)
        return tr.inclined_plane(math.radians(v[0]), math.radians(v[1]) if len(v) > 1 else 0.0)
    if kind == "rough":
        v = _numbers(spec, body, 2, 3)
        seed = int(v[2]) if len(v) > 2 else 0
        if len(v) > 2 and (v[2] != seed or seed < 0):
            raise TerrainError(f"terrain spec {spec!r}: SEED must be an integer >= 0, "
                               f"got {v[2]:g}")
        if v[1] <= 0:
            raise TerrainError(f"terrain spec {spec!r}: CORR must be > 0 m, got {v[1]:g}")
        return tr.rough(v[0], v[1], seed=seed, x_range=(-10.0, 30.0), y_range=(-10.0, 10.0),
                        resolution=min(0.05, v[1] / 4))
    if kind == "ramp":
        h, up, top, down, start = _numbers(spec, body, 5, 5)
        return tr.ramp(h, up, top, down, start)
    if kind == "step":
        h, at = _numbers(spec, body, 2, 2)
        return tr.step(h, at)
    if kind == "zoe-ramp":
        v = _numbers(spec, body, 0, 1)
        return tr.zoe_ramp(start=v[0] if v else 2.0)
    if kind == "wmrde":
        (n,) = _numbers(spec, body, 1, 1)
        if n != int(n) or not 1 <= n <= 10:
            raise TerrainError(f"terrain spec {spec!r}: benchmark terrain number must be 1..10")
        from wmr_model.io.terrain_files import load_wmrde_benchmark_terrains

        return load_wmrde_benchmark_terrains()[int(n) - 1]
    if kind == "file":
        if not body:
            raise TerrainError(f"terrain spec {spec!r}: file: needs a path")
        from wmr_model.io.terrain_files import load_height_map

        return load_height_map(body, resolution=resolution, origin=origin)
    raise TerrainError(f"terrain spec {spec!r}: unknown kind {kind!r}; expected flat, plane, "
                       "rough, ramp, step, zoe-ramp, wmrde or file")
