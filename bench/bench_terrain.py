"""Throughput of terrain height + normal queries (prints numbers, asserts nothing).

For each terrain, 1e6 random points over its extent are queried two ways:

- ``vectorized``: ``Terrain.height_normal(x, y)`` (one compiled loop, plus array allocation);
- ``njit loop``: a user's compiled loop calling ``terrain_height_normal(*terrain.kernel_args(),
  x, y)`` per point, as the kinematics does inside its simulation loop.

Run: ``.venv/bin/python bench/bench_terrain.py [n_points]``.
"""

from __future__ import annotations

import math
import sys
import time
from typing import Any

import numpy as np

from wmr_model._jit import JIT_ENABLED, njit
from wmr_model.errors import TerrainError
from wmr_model.io.terrain_files import load_wmrde_benchmark_terrains
from wmr_model.terrain import surface as T


@njit
def _loop(kind: int, params: Any, grid: Any, xs: Any, ys: Any) -> float:
    acc = 0.0
    for k in range(xs.shape[0]):
        h, nx, ny, nz = T.terrain_height_normal(kind, params, grid, xs[k], ys[k])
        acc += h + nx + ny + nz
    return acc


def _best(f: Any, repeat: int = 5) -> float:
    f()  # compile / warm up
    best = math.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - t0)
    return best


def main(n: int = 1_000_000) -> None:
    try:
        benchmark = load_wmrde_benchmark_terrains()[0]
    except TerrainError as exc:
        print(f"(wmrde terrains unavailable: {exc}; using rough() instead)")
        benchmark = T.rough(0.15, 0.8, seed=1, x_range=(-6, 14), y_range=(-5, 5), resolution=0.1)
    terrains = [
        ("gridsurfdata1 (GRID 101x201)", benchmark, (-6.0, 14.0), (-5.0, 5.0)),
        ("rough 0.05 m (GRID 201x401)", T.rough(0.15, 0.8, seed=1), (-5.0, 15.0), (-5.0, 5.0)),
        ("zoe_ramp (PROFILE)", T.zoe_ramp(), (0.0, 6.0), (-2.0, 2.0)),
        ("inclined_plane (PLANE)", T.inclined_plane(0.2, 0.5), (-5.0, 5.0), (-5.0, 5.0)),
    ]
    rng = np.random.default_rng(0)
    print(f"numba JIT enabled: {JIT_ENABLED}; {n:.0e} points per call; best of 5")
    print(f"{'terrain':32s} {'vectorized [Mq/s]':>18s} {'njit loop [Mq/s]':>17s}")
    for label, terrain, (x0, x1), (y0, y1) in terrains:
        xs = rng.uniform(x0, x1, n)
        ys = rng.uniform(y0, y1, n)
        t_vec = _best(lambda t=terrain, x=xs, y=ys: t.height_normal(x, y))
        args = terrain.kernel_args()
        t_loop = _best(lambda a=args, x=xs, y=ys: _loop(*a, x, y))
        print(f"{label:32s} {n / t_vec / 1e6:18.1f} {n / t_loop / 1e6:17.1f}")


if __name__ == "__main__":
    main(int(float(sys.argv[1])) if len(sys.argv) > 1 else 1_000_000)
