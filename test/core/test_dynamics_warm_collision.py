"""Warm-started wheel collision in the dynamics (``simulate_dynamics(collision="warm")``).

Oracle: the cold fan search of every step (``collision="cold"``), which the warm search must
reproduce within the collision search's own tolerance: both end with the same fine parabolic
fit at a quarter of the fan spacing, so the contacts (and the trajectories) agree to far below
a centimetre over a short drive.
"""

from __future__ import annotations

import numpy as np
import pytest

from wmr_model.dynamics.simulate import simulate_dynamics
from wmr_model.errors import ParameterError
from wmr_model.experiments import dynamic as sc
from wmr_model.io.terrain_files import load_wmrde_benchmark_terrains
from wmr_model.io.vehicles import load_vehicle
from wmr_model.terrain.surface import flat


def _drive(terrain, collision: str, seconds: float = 2.0, dt: float = 0.04):
    m = load_vehicle("zoe")
    q0, qd0 = sc._moving_start(m, terrain, 1.0)
    U = np.tile(sc.straight_wheel_rates(m, 1.0), (round(seconds / dt), 1))
    return simulate_dynamics(m, terrain, q0, qd0, U, dt, contact_model="pacejka",
                             collision=collision)


def test_warm_collision_matches_cold_on_flat_ground() -> None:
    cold = _drive(flat(), "cold")
    warm = _drive(flat(), "warm")
    assert np.all(np.isfinite(warm.q))
    np.testing.assert_allclose(warm.q[:, 4:7], cold.q[:, 4:7], atol=1e-6)
    np.testing.assert_allclose(warm.dz, cold.dz, atol=1e-6)


def test_warm_collision_matches_cold_on_rough_terrain() -> None:
    ter = load_wmrde_benchmark_terrains()[0]
    cold = _drive(ter, "cold")
    warm = _drive(ter, "warm")
    # ~2 m of rough terrain: same path within a centimetre, contact heights within 5 mm
    assert np.linalg.norm(warm.q[-1, 4:7] - cold.q[-1, 4:7]) < 0.01
    assert np.max(np.abs(warm.dz - cold.dz)) < 5e-3  # half the static sinkage (1 cm)


def test_unknown_collision_search_is_rejected() -> None:
    with pytest.raises(ParameterError, match="collision"):
        _drive(flat(), "lukewarm", seconds=0.04)
