"""Per-contact-model options (issue 26): on-road tyre options stay with their model."""

import numpy as np
import pytest

from wmr_model.contact.models import contact_setup, params_for_model
from wmr_model.errors import ParameterError
from wmr_model.soft_soil_sim import drive_straight_on_soil
from wmr_model.vehicles import load_vehicle


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
