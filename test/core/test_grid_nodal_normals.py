"""Nodal grid normals (the thesis' C++ library's convention) and Table 2.7 on them.

* ``normals="nodal"``: same bilinear heights, slopes at the nodes by central differences
  (one-sided on the border) interpolated bilinearly (``np.gradient`` + scipy's bilinear
  interpolator as the independent reference), so the normal is continuous across grid lines
  where the exact bilinear-patch normal jumps.
* Table 2.7, linear contact with the library's parameters and Zoë's controller, wmrde terrain 4:
  the dt 0.02 yaw error against dt 0.01 stays within 2x the thesis' mean (0.0003 rad). With the
  bilinear-patch normals it is 0.0037 rad on this terrain (the normal jumps every 0.1 m and
  each step size samples the jumps at different times).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.interpolate import RegularGridInterpolator

from wmr_model.errors import TerrainError
from wmr_model.io import terrain_files as TF
from wmr_model.terrain import surface as T

DX, DY, X0, Y0 = 0.1, 0.07, -1.0, 0.5


def _heights() -> np.ndarray:
    rng = np.random.default_rng(3)
    return rng.normal(scale=0.05, size=(9, 12))


def _reference_normal(h: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    gy, gx = np.gradient(h, DY, DX)  # central inside, one-sided first order on the border
    xs = X0 + DX * np.arange(h.shape[1])
    ys = Y0 + DY * np.arange(h.shape[0])
    pts = np.stack([y, x], axis=-1)
    sx = RegularGridInterpolator((ys, xs), gx)(pts)
    sy = RegularGridInterpolator((ys, xs), gy)(pts)
    n = np.stack([-sx, -sy, np.ones_like(sx)], axis=-1)
    return n / np.linalg.norm(n, axis=-1, keepdims=True)


def test_nodal_normals_interpolate_node_slopes() -> None:
    h = _heights()
    nodal = T.height_map(h, (DX, DY), (X0, Y0), normals="nodal")
    exact = T.height_map(h, (DX, DY), (X0, Y0))
    assert exact.params.shape == (4,) and nodal.params.tolist()[4] == 1.0
    rng = np.random.default_rng(4)
    x = X0 + rng.uniform(0.0, (h.shape[1] - 1) * DX, 300)
    y = Y0 + rng.uniform(0.0, (h.shape[0] - 1) * DY, 300)
    hn, nn = nodal.height_normal(x, y)
    he, ne = exact.height_normal(x, y)
    np.testing.assert_array_equal(hn, he)  # heights are the same bilinear surface
    np.testing.assert_allclose(nn, _reference_normal(h, x, y), atol=1e-12)
    assert np.abs(nn - ne).max() > 1e-3  # the conventions differ between nodes


def test_nodal_normals_continuous_across_grid_lines() -> None:
    h = _heights()
    nodal = T.height_map(h, (DX, DY), (X0, Y0), normals="nodal")
    exact = T.height_map(h, (DX, DY), (X0, Y0))
    eps = 1e-9
    xl = X0 + DX * np.arange(1, h.shape[1] - 1)  # interior vertical grid lines
    y = np.full(xl.shape, Y0 + 2.4 * DY)
    jump_nodal = np.abs(nodal.height_normal(xl + eps, y)[1] - nodal.height_normal(xl - eps, y)[1])
    jump_exact = np.abs(exact.height_normal(xl + eps, y)[1] - exact.height_normal(xl - eps, y)[1])
    assert jump_nodal.max() < 1e-6
    assert jump_exact.max() > 1e-2


def test_nodal_normals_outside_grid_have_no_slope_across_the_edge() -> None:
    nodal = T.height_map(_heights(), (DX, DY), (X0, Y0), normals="nodal")
    _, n = nodal.height_normal([X0 - 1.0, X0 - 1.0], [Y0 - 1.0, Y0 + 0.2])
    assert np.all(n[0] == [0.0, 0.0, 1.0])  # beyond a corner
    assert n[1, 0] == 0.0 and n[1, 1] != 0.0  # left of the grid: slope along the edge only


def test_normals_option_validated() -> None:
    with pytest.raises(TerrainError, match="normals must be one of bilinear, nodal, got 'smooth'"):
        T.height_map(_heights(), 0.1, normals="smooth")
    with pytest.raises(TerrainError, match=r"GRID params\[4\] \(normals\) must be one of"):
        T.Terrain(T.GRID, np.array([0.0, 0.0, 0.1, 0.1, 2.0]), _heights())


def test_benchmark_terrains_with_nodal_normals() -> None:
    default = TF.load_wmrde_benchmark_terrains()[0]
    nodal = TF.load_wmrde_benchmark_terrains(normals="nodal")[0]
    assert default.params.shape == (4,) and nodal.params[4] == 1.0
    np.testing.assert_array_equal(default.grid, nodal.grid)


def test_table27_linear_dt002_yaw_error_on_nodal_terrain() -> None:
    from wmr_model.experiments import dynamic as sc
    from wmr_model.io.vehicles import load_vehicle
    from wmr_model.prediction.controllers import simulate_dynamics_controlled
    from wmr_model.spatial import quat_to_rot, rot_to_euler

    model = load_vehicle("zoe")
    terrain = TF.load_wmrde_benchmark_terrains(normals="nodal")[3]  # gridsurfdata4
    params = sc.zoe_library_contact_params(model)
    yaw = []
    for dt in (0.01, 0.02):
        n = round(10.0 / dt)
        q0, qd0 = sc._moving_start(model, terrain, 1.0)
        tr = simulate_dynamics_controlled(model, terrain, q0, qd0, np.full(n, 1.0), np.zeros(n),
                                          dt, controller="passive_steer",
                                          contact_model="piecewise_linear",
                                          contact_params=params)
        yaw.append(float(rot_to_euler(quat_to_rot(tr.q[-1, 0:4]))[2]))
    thesis = sc.THESIS_TABLE_2_7["piecewise_linear"][0.02][1]
    assert abs(math.remainder(yaw[1] - yaw[0], 2 * math.pi)) <= 2.0 * thesis
