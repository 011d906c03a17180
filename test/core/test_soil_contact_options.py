"""Per-contact-model options (issue 26): on-road tyre options stay with their model."""

import numpy as np
import pytest

from wmr_model.contact.models import contact_setup, params_for_model
from wmr_model.errors import ParameterError
from wmr_model.experiments.soft_soil import drive_straight_on_soil
from wmr_model.io.vehicles import load_vehicle


def test_flat_params_belong_to_the_sidecar_model_and_per_model_params_to_each():
    assert params_for_model({"mu": 0.9}, "pacejka", "pacejka") == {"mu": 0.9}
    assert params_for_model({"mu": 0.9}, "bekker", "pacejka") == {}
    assert params_for_model({"mu": 0.9}, "bekker", None) == {"mu": 0.9}  # keyword: model used
    per = {"pacejka": {"mu": 0.9}, "bekker": {"n": 1.1}}
    assert params_for_model(per, "bekker", "pacejka") == {"n": 1.1}
    assert params_for_model(per, "ishigami", "pacejka") == {}


def test_hmmwv_keeps_its_tyre_friction_on_road_and_drops_it_on_soil():
    m = load_vehicle("hmmwv")  # sidecar: contact_model pacejka, contact_params {mu: 0.9}
    road = contact_setup(m)
    soil = contact_setup(m, "bekker")
    assert set(road.names) == {"pacejka"} and set(soil.names) == {"bekker"}
    assert road.params[0, 2] == pytest.approx(0.9)  # Kp, Kd, mu, ... (pacejka layout)
    with pytest.raises(ParameterError, match=r"unknown parameter 'mu' of bekker"):
        contact_setup(m, "bekker", {"mu": 0.9})  # a keyword's flat params still apply


@pytest.mark.parametrize("name", ["hmmwv", "hmmwv_embedded"])
def test_hmmwv_drives_on_soil(name):
    run = drive_straight_on_soil(load_vehicle(name), "sandy_loam", speed=0.5, duration=0.5)
    q = run.trajectory.q
    assert np.all(np.isfinite(q)) and q[-1, 4] - q[0, 4] > 0.1  # moved forward
    assert np.all(run.sinkage[-1] > 0)  # the tyres sank into the soil


def test_footprint_window_equals_a_full_grid_scan():
    """The swept-node mask is computed in the segment's bounding box only: same nodes as
    testing every node of the grid (random segments, some leaving the grid)."""
    from wmr_model.terrain.deformable import DeformableTerrain

    dtm = DeformableTerrain.flat((-1.0, 1.0), (-0.5, 0.7), 0.013, 1500.0, 0.6)
    X, Y = dtm.node_xy()
    rng = np.random.default_rng(4)
    for _ in range(20):
        p0, p1 = rng.uniform(-1.3, 1.3, 2), rng.uniform(-1.3, 1.3, 2)
        w = float(rng.uniform(0.01, 0.5))
        u = (p1 - p0) / np.hypot(*(p1 - p0))
        along = (X - p0[0]) * u[0] + (Y - p0[1]) * u[1]
        lat = -(X - p0[0]) * u[1] + (Y - p0[1]) * u[0]
        full = (along >= 0) & (along <= np.hypot(*(p1 - p0))) & (np.abs(lat) <= w / 2)
        np.testing.assert_array_equal(dtm.footprint(p0, p1, w), full)


def test_windowed_relax_equals_the_full_relax_for_a_local_rut():
    """A rut's avalanche stays inside a window with room for its run-out: relaxing the window
    gives the full-grid result bit for bit (the other pairs are at repose: no-ops)."""
    from wmr_model.terrain.deformable import DeformableTerrain

    maps = [DeformableTerrain.flat((0.0, 3.0), (-1.0, 1.0), 0.01, 1500.0, 0.6, xi=0.5)
            for _ in range(2)]
    for dtm in maps:
        m = dtm.footprint((0.5, 0.0), (1.0, 0.0), 0.2)
        dtm.press(m, 0.03, relax=False)
    held = maps[0].footprint((0.9, 0.0), (1.0, 0.0), 0.2)
    n_full = maps[0].relax(fixed=held)
    pad = 0.1 + 2 * 0.03 / np.tan(0.6)
    n_win = maps[1].relax(fixed=held, window=maps[1].window(np.array([0.5, 0.0]) - pad,
                                                            np.array([1.0, 0.0]) + pad))
    assert n_full == n_win > 1
    np.testing.assert_array_equal(maps[0].h, maps[1].h)
