"""The collision fan leaves out the points that cannot be its lowest (issue 22): same angle.

``_wheel_fan`` evaluates the middle point first and, once it is at or below the terrain, skips
the lookups of the points above every grid node under the fan (``_fan_height_bound``). The
oracle here is the plain search, every one of the 17 points evaluated in order, written in
Python from the compiled pieces (the same floating-point operations): the angles must be equal
bit for bit, over wheels sinking in, touching and clear of two rough grids (both normal
conventions), across grid edges, outside the grid and on node lines, and on the analytic kinds.
The bound itself is checked against the terrain height at every fan point.
"""

import math

import numpy as np
import pytest

from wmr_model.kinematics.wheel_collision import (
    CONTACT_FAN_HALF_SPAN,
    CONTACT_FAN_POINTS,
    FAN_BOUND_MAX_NODES,
    _contact_height_error_sc,
    _fan_height_bound,
    _fan_start,
    _parabola_offset,
    _rotate_angle,
    _wheel_fan,
    _wheel_point,
)
from wmr_model.spatial import rot_axis_angle
from wmr_model.terrain import surface as tr

K = CONTACT_FAN_POINTS
HALF = K // 2
STEP = CONTACT_FAN_HALF_SPAN / HALF
OFFSETS = (np.arange(K) - HALF) * STEP
FAN_SIN = np.sin(OFFSETS)
FAN_COS = np.cos(OFFSETS)


def _plain_fan(targs, p, xw, yw, zw, R):
    """Every fan point in order, the first lowest kept, one parabolic fit (the search before
    the bound)."""
    kind, params, grid = targs
    delta0, s0, c0 = _fan_start(kind, params, grid, p, xw, yw, zw)
    f = []
    for j in range(K):
        sj, cj = _rotate_angle(s0, c0, FAN_SIN[j], FAN_COS[j])
        f.append(_contact_height_error_sc(kind, params, grid, p, xw, zw, R, sj, cj)[0])
    best, fbest = 0, math.inf
    for j, v in enumerate(f):
        if v < fbest:
            best, fbest = j, v
    d = delta0 + (best - HALF) * STEP
    if 0 < best < K - 1:
        d += _parabola_offset(f[best - 1], fbest, f[best + 1], STEP)
    return d


def _wheels(terrain, rng, n, R, box):
    """``n`` wheel poses (centre, x, y, z axes as tuples): random heading, pitch of the wheel
    frame and roll up to 0.4 rad, centre R + U(-0.3 R, 0.3 R) above the terrain below it (wheels
    sinking in, touching and clear), x, y uniform in ``box``."""
    out = []
    for _ in range(n):
        x, y = rng.uniform(box[0], box[1]), rng.uniform(box[2], box[3])
        h = float(terrain.height(x, y))
        Rz = rot_axis_angle(np.array([0.0, 0.0, 1.0]), rng.uniform(-math.pi, math.pi))
        Rx = rot_axis_angle(np.array([1.0, 0.0, 0.0]), rng.uniform(-0.4, 0.4))
        Ry = rot_axis_angle(np.array([0.0, 1.0, 0.0]), rng.uniform(-0.4, 0.4))
        Rot = Rz @ Rx @ Ry
        p = (x, y, h + R * (1.0 + rng.uniform(-0.3, 0.3)))
        out.append((p, tuple(Rot[:, 0]), tuple(Rot[:, 1]), tuple(Rot[:, 2])))
    return out


@pytest.fixture(scope="module", params=["bilinear", "nodal"])
def rough(request):
    base = tr.rough(0.15, 0.8, seed=3, x_range=(-3.0, 3.0), y_range=(-3.0, 3.0),
                    resolution=0.1)
    x0, y0, dx, dy = base.params[:4]
    return tr.height_map(base.grid, (dx, dy), origin=(x0, y0), normals=request.param)


def test_fan_angle_equals_the_plain_search_bit_for_bit(rough):
    rng = np.random.default_rng(11)
    targs = rough.kernel_args()
    R = 0.325  # Zoë's wheels
    left_out = 0
    poses = _wheels(rough, rng, 400, R, (-3.5, 3.5, -3.5, 3.5))  # some beyond the grid edges
    for p, xw, yw, zw in poses:
        d = _wheel_fan(*targs, p, xw, yw, zw, R)
        assert d == _plain_fan(targs, p, xw, yw, zw, R)
        _, s0, c0 = _fan_start(*targs, p, xw, yw, zw)
        bound = _fan_height_bound(*targs, p, xw, zw, R, s0, c0)
        z = [_wheel_point(p, xw, zw, R, *_rotate_angle(s0, c0, FAN_SIN[j], FAN_COS[j]))[2]
             for j in range(K)]
        left_out += sum(zj > bound for zj in z)
    # the bound left points out (so the comparison above covered the skipping path)
    assert left_out > 0.2 * len(poses) * (K - 1)


def test_fan_height_bound_is_above_the_terrain_at_every_fan_point(rough):
    rng = np.random.default_rng(5)
    targs = rough.kernel_args()
    for R in (0.1, 0.325):
        for p, xw, yw, zw in _wheels(rough, rng, 200, R, (-3.4, 3.4, -3.4, 3.4)):
            _, s0, c0 = _fan_start(*targs, p, xw, yw, zw)
            bound = _fan_height_bound(*targs, p, xw, zw, R, s0, c0)
            assert math.isfinite(bound)
            for j in range(K):
                x, y, _ = _wheel_point(p, xw, zw, R, *_rotate_angle(s0, c0, FAN_SIN[j],
                                                                     FAN_COS[j]))
                assert tr.terrain_height_normal(*targs, x, y)[0] <= bound


def test_fan_on_node_lines_and_flat_grids_equals_the_plain_search():
    """Fan points exactly on grid lines (snapped lookups) and a flat grid (all nodes equal: the
    bound is the height itself, no margin)."""
    xs = np.arange(-1.0, 1.0001, 0.1)
    heights = np.add.outer(0.05 * np.sin(3 * xs), 0.04 * np.cos(2 * xs))
    for grid in (heights, np.full_like(heights, 0.2)):
        terrain = tr.height_map(grid, 0.1, origin=(-1.0, -1.0))
        targs = terrain.kernel_args()
        R = 0.3
        for x in (-0.3, 0.0, 0.2):
            for sink in (-0.02, 0.0, 1e-12, 0.03):
                h = float(terrain.height(x, 0.0))
                p = (x, 0.0, h + R - sink)  # the middle point lands on the node line x
                axes = ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0))
                assert _wheel_fan(*targs, p, *axes, R) == _plain_fan(targs, p, *axes, R)


def test_fan_on_analytic_terrains_and_big_wheels_searches_without_the_bound():
    rng = np.random.default_rng(2)
    plane = tr.inclined_plane(0.2, heading=0.3)
    ramp = tr.step(0.1, at=0.5)
    for terrain in (plane, ramp):
        targs = terrain.kernel_args()
        for p, xw, yw, zw in _wheels(terrain, rng, 50, 0.3, (-1.0, 1.0, -1.0, 1.0)):
            _, s0, c0 = _fan_start(*targs, p, xw, yw, zw)
            assert _fan_height_bound(*targs, p, xw, zw, 0.3, s0, c0) == math.inf
            assert _wheel_fan(*targs, p, xw, yw, zw, 0.3) == _plain_fan(targs, p, xw, yw, zw,
                                                                       0.3)
    # a wheel spanning more than FAN_BOUND_MAX_NODES nodes of a fine grid: no bound, same angle
    fine = tr.rough(0.02, 0.3, seed=1, x_range=(-2.0, 2.0), y_range=(-2.0, 2.0),
                    resolution=0.02)
    targs = fine.kernel_args()
    R = 1.0
    assert (2 * R / 0.02) > FAN_BOUND_MAX_NODES
    for p, xw, yw, zw in _wheels(fine, rng, 30, R, (-0.5, 0.5, -0.5, 0.5)):
        _, s0, c0 = _fan_start(*targs, p, xw, yw, zw)
        assert _fan_height_bound(*targs, p, xw, zw, R, s0, c0) == math.inf
        assert _wheel_fan(*targs, p, xw, yw, zw, R) == _plain_fan(targs, p, xw, yw, zw, R)
