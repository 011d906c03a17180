"""Shipped vehicles against the numbers printed in the thesis / the shared Warthog yaml; CLI."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np
import pytest

from wmr_model.errors import ModelError
from wmr_model.io.vehicles import (
    SHIPPED_VEHICLES,
    list_vehicles,
    load_vehicle,
    load_vehicle_spec,
    vehicle_files,
)
from wmr_model.vehicles.model import PRISMATIC, REVOLUTE

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "test" / "data"
IN = 0.0254  # m per inch
LBM = 0.45359237  # kg per lbm


def _pose_in_body(model, name: str) -> np.ndarray:
    """4x4 pose of frame ``name`` in the body at zero joints: product of T0 up the chain."""
    i = model.frame_index(name)
    T = np.eye(4)
    while i > 0:
        T = model.T0[i] @ T
        i = int(model.parent[i])
    return T


def _wheel_xyz(model) -> dict[str, np.ndarray]:
    return {n: _pose_in_body(model, n)[:3, 3] for n in model.wheel_names}


def _actuated(model) -> set[str]:
    return {model.joint_names[k] for k in model.actuated_joints}


def test_all_shipped_vehicles_are_listed_and_compile():
    assert list_vehicles() == list(SHIPPED_VEHICLES)
    # 8 + the HMMWV closed-chain and embedded forms + the real logs' tricycle, car and rover
    assert len(SHIPPED_VEHICLES) == 13
    for name in SHIPPED_VEHICLES:
        urdf, sidecar = vehicle_files(name)
        assert urdf.name == f"{name}.urdf" and sidecar.name == f"{name}.yaml"
        model = load_vehicle(name)
        assert model.name == name
        assert model.source == str(urdf)
        assert model.nw >= 3
        # every wheel frame spins about its own y axis (contact-code convention)
        np.testing.assert_allclose(model.axis[model.wheel_frame], np.tile([0, 1, 0], (model.nw, 1)))
        assert np.all(model.mass > -1e-15) and model.mass[0] > 0


def test_rocky7_table_2_2():
    m = load_vehicle("rocky7")
    cm = 0.01
    assert m.nw == 6
    np.testing.assert_allclose(m.wheel_radius, 6.5 * cm)  # "wheel radius=6.5"
    assert m.total_mass == pytest.approx(11.0, rel=1e-12)  # "total mass = 11 kg"
    k1, k2, k3, k4, k5, k7, k8 = 10.5, 12.075, 20, 28.8, 12.5, 6.9, 2
    k6x, k6z = 16 * math.sin(math.radians(49)), 16 * math.cos(math.radians(49))
    xyz = _wheel_xyz(m)
    np.testing.assert_allclose(xyz["A1"], np.array([k2 + k4, k3, k1 - k5]) * cm, atol=1e-15)
    np.testing.assert_allclose(xyz["A2"], np.array([k2 + k4, -k3, k1 - k5]) * cm, atol=1e-15)
    np.testing.assert_allclose(xyz["A3"], np.array([k2 - k6x + k7, k3, k1 - k6z - k8]) * cm,
                               atol=1e-15)
    np.testing.assert_allclose(xyz["A6"], np.array([k2 - k6x - k7, -k3, k1 - k6z - k8]) * cm,
                               atol=1e-15)
    assert m.frame_names[int(m.parent[m.frame_index("A4")])] == "B2"  # typo corrected
    assert _actuated(m) == {"S1", "S2", "A1", "A2", "A3", "A4", "A5", "A6"}
    expected = np.zeros((1, m.nv))  # eq. 2.26: rocker rates at indices 7 and 13 (1-based)
    expected[0, [6, 12]] = 1.0
    np.testing.assert_array_equal(m.A_joint, expected)


def test_landtamer_table_e1():
    m = load_vehicle("landtamer")
    l, w = 42 * IN, 32.25 * IN
    assert m.nw == 6 and m.nj == 6
    np.testing.assert_allclose(m.wheel_radius, 16.5 * IN)
    assert m.total_mass == pytest.approx(3225 * LBM, rel=1e-12)
    expected = {"FL": (l, w, 0), "FR": (l, -w, 0), "ML": (0, w, 0), "MR": (0, -w, 0),
                "BL": (-l, w, 0), "BR": (-l, -w, 0)}
    xyz = _wheel_xyz(m)
    for n, p in expected.items():
        np.testing.assert_allclose(xyz[n], p, atol=1e-15, err_msg=n)
    assert _actuated(m) == set(expected)
    assert m.ncj == 0


def test_zoe_table_e2():
    m = load_vehicle("zoe")
    l, w, d = 0.955, 0.820, 0.119
    assert m.nw == 4
    np.testing.assert_allclose(m.wheel_radius, 0.325)
    assert m.total_mass == pytest.approx(198.0, rel=1e-12)
    xyz = _wheel_xyz(m)
    expected = {"FL": (l, w, -d), "FR": (l, -w, -d), "BL": (-l, w, -d), "BR": (-l, -w, -d)}
    for n, p in expected.items():
        np.testing.assert_allclose(xyz[n], p, atol=1e-15, err_msg=n)
    np.testing.assert_allclose(m.axis[m.frame_index("s1")], [0, 0, 1])  # RZ
    np.testing.assert_allclose(m.axis[m.frame_index("r2")], [1, 0, 0])  # RX
    assert m.frame_names[int(m.parent[m.frame_index("s2")])] == "r2"
    assert _actuated(m) == {"FL", "FR", "BL", "BR"}


def test_crusher_table_e3():
    m = load_vehicle("crusher")
    t1, t2, t3, t4, t5, t6, t7 = 1.450, 1.175, 0.250, 1.000, 0.300, 1.100, -1.050
    assert m.nw == 6 and m.nj == 12
    np.testing.assert_allclose(m.wheel_radius, 0.7)
    assert m.total_mass == pytest.approx(13200 * LBM, rel=1e-12)
    xyz = _wheel_xyz(m)
    expected = {"FL": (t1 + t4, t2 + t5, t3), "FR": (t1 + t4, -t2 - t5, t3),
                "ML": (t6 - t4, t2 + t5, t3), "MR": (t6 - t4, -t2 - t5, t3),
                "BL": (t7 - t4, t2 + t5, t3), "BR": (t7 - t4, -t2 - t5, t3)}
    for n, p in expected.items():
        np.testing.assert_allclose(xyz[n], p, atol=1e-15, err_msg=n)
    # E.1/E.2: six constraints, each a single 1 at its link joint's rate, natural value 0
    assert m.ncj == 6
    for row, b in zip(m.A_joint, m.joint_offset):
        (k,) = np.flatnonzero(row)
        assert row[k] == 1.0 and b == 0.0
        assert m.frame_names[k - 5].startswith("link")
    assert m.A_joint[:, 6].sum() == 1.0  # linkFL is frame 2 -> joint-space index 7 (1-based)
    assert _actuated(m) == set(expected)


def test_recbot_table_e4():
    m = load_vehicle("recbot")
    l, w1, w2, h = 1.770, 0.635, 0.610, -0.075
    radius = dict(zip(m.wheel_names, m.wheel_radius))
    assert radius == pytest.approx({"FL": 11 * IN, "FR": 11 * IN, "BL": 12 * IN, "BR": 12 * IN})
    assert m.total_mass == pytest.approx(667.0, rel=1e-12)
    xyz = _wheel_xyz(m)
    for n, p in {"FL": (l, w1, h), "FR": (l, -w1, h), "BL": (0, w2, 0), "BR": (0, -w2, 0)}.items():
        np.testing.assert_allclose(xyz[n], p, atol=1e-15, err_msg=n)
    for s in ("suspL", "suspR"):
        i = m.frame_index(s)
        assert m.joint_type[i] == PRISMATIC
        np.testing.assert_allclose(m.axis[i], [0, 0, 1])
    assert m.joint_type[m.frame_index("steerL")] == REVOLUTE
    assert _actuated(m) == {"steerL", "steerR", "BL", "BR"}  # front wheels passive
    assert m.ncj == 2 and set(m.joint_constraint_names) == {"suspL_natural", "suspR_natural"}


def test_diffdrive_caster():
    m = load_vehicle("diffdrive")
    assert m.body_name == "base_link"
    assert set(m.wheel_names) == {"left_wheel_joint", "right_wheel_joint", "caster_wheel_joint"}
    assert _actuated(m) == {"left_wheel_joint", "right_wheel_joint"}
    xyz = _wheel_xyz(m)
    assert xyz["left_wheel_joint"][1] - xyz["right_wheel_joint"][1] == pytest.approx(0.4)
    # all three wheels touch the same ground plane at zero joints
    radius = dict(zip(m.wheel_names, m.wheel_radius))
    bottoms = {n: xyz[n][2] - radius[n] for n in radius}
    assert max(bottoms.values()) - min(bottoms.values()) < 1e-12
    swivel = m.frame_index("caster_swivel_joint")
    np.testing.assert_allclose(m.axis[swivel], [0, 0, 1])
    assert not m.actuated[swivel]
    assert xyz["caster_wheel_joint"][0] < _pose_in_body(m, "caster_swivel_joint")[0, 3]  # trails
    assert m.total_mass == pytest.approx(20.0, rel=1e-12)
    assert set(m.sensor_frame) == {"imu", "laser"}


def test_warthog_matches_shared_vehicle_yaml():
    # data/warthog_grass_A/vehicle.yaml: radius 0.3, track 1.08,
    # wheelbase 0.914734 (x = +-0.457367), rockers +-0.4 rad, axles 0.012977 m below the pivot.
    m = load_vehicle("warthog")
    assert m.nw == 4
    np.testing.assert_allclose(m.wheel_radius, 0.3)
    xyz = _wheel_xyz(m)
    assert xyz["front_left_wheel"][1] - xyz["front_right_wheel"][1] == pytest.approx(1.08)
    assert xyz["front_left_wheel"][0] - xyz["rear_left_wheel"][0] == pytest.approx(0.914734)
    for p in xyz.values():
        assert abs(p[0]) == pytest.approx(0.457367) and abs(p[1]) == pytest.approx(0.54)
    for side in ("left", "right"):
        i = m.frame_index(f"{side}_diff_unit_joint")
        np.testing.assert_allclose(m.axis[i], [0, 1, 0])
        assert (m.lower[i], m.upper[i]) == (-0.4, 0.4)
        assert not m.actuated[i]
        assert _pose_in_body(m, f"{side}_diff_unit_joint")[0, 3] == 0.0
        for pos in ("front", "rear"):
            w = m.frame_index(f"{pos}_{side}_wheel")
            assert m.frame_names[int(m.parent[w])] == f"{side}_diff_unit_joint"
            assert m.T0[w][2, 3] == pytest.approx(-0.012977)
    (row,) = m.A_joint
    assert row[6 + m.joint_index("left_diff_unit_joint")] == 1.0
    assert row[6 + m.joint_index("right_diff_unit_joint")] == 1.0
    assert np.count_nonzero(row) == 2
    assert m.options["encoder_map"] == {
        "left_wheel_joint": ["front_left_wheel", "rear_left_wheel"],
        "right_wheel_joint": ["front_right_wheel", "rear_right_wheel"],
    }
    assert "imu" in m.sensor_frame


def test_load_vehicle_detects_input_kind(tmp_path):
    urdf, sidecar = vehicle_files("warthog")
    by_name = load_vehicle("warthog")
    by_path = load_vehicle(urdf)  # default sidecar found in config/vehicles
    by_text = load_vehicle(urdf.read_text(), sidecar)
    for m in (by_path, by_text):
        np.testing.assert_allclose(m.T0, by_name.T0)
        assert m.ncj == 1 and m.wheel_names == by_name.wheel_names
    table = load_vehicle(ROOT / "config" / "frame_tables" / "rocky7.yaml")
    assert table.body_name == "body" and table.nw == 6
    # a URDF copied elsewhere picks up <stem>.yaml next to it
    (tmp_path / "mybot.urdf").write_text(urdf.read_text())
    (tmp_path / "mybot.yaml").write_text(sidecar.read_text().replace("vehicle: warthog",
                                                                      "vehicle: mybot"))
    assert load_vehicle(tmp_path / "mybot.urdf").name == "mybot"
    with pytest.raises(ModelError, match=r"no shipped vehicle 'nope'; known vehicles are"):
        load_vehicle("nope")
    with pytest.raises(ModelError, match=r"warthog\.yaml: not a frame table"):
        load_vehicle_spec(sidecar)


# ---- CLI ------------------------------------------------------------------------------------

def _ns(**kw) -> argparse.Namespace:
    return argparse.Namespace(**kw)


def test_cli_vehicles_json_lists_all_ten(capsys):
    from wmr_model.cli import vehicles as cli_vehicles

    assert cli_vehicles.run(_ns(json=True)) == 0
    rows = json.loads(capsys.readouterr().out)
    # the nine wheeled ones, then the tracked absolem (issue 25)
    assert [r["name"] for r in rows] == [*SHIPPED_VEHICLES, "absolem"]
    mass = {r["name"]: r["total_mass"] for r in rows}
    assert mass["landtamer"] == pytest.approx(3225 * LBM)
    assert {r["name"]: r["wheels"] for r in rows}["crusher"] == 6
    assert cli_vehicles.run(_ns(json=False)) == 0
    text = capsys.readouterr().out
    assert all(n in text for n in SHIPPED_VEHICLES)


@pytest.mark.parametrize("name", SHIPPED_VEHICLES)
def test_cli_check_shipped(name, capsys):
    from wmr_model.cli import check

    assert check.run(_ns(vehicle=name, sidecar=None, json=False)) == 0
    assert f"vehicle {name}" in capsys.readouterr().out
    assert check.run(_ns(vehicle=name, sidecar=None, json=True)) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["valid"] is True and data["name"] == name


def test_cli_check_broken_file():
    from wmr_model.cli import check

    with pytest.raises(ModelError, match=r"zero_axis\.urdf: joint 'rocker_joint': axis"):
        check.run(_ns(vehicle=str(DATA / "zero_axis.urdf"), sidecar=None, json=False))


def test_wmr_main_exit_codes(capsys):
    cli = pytest.importorskip("wmr_model.cli")
    assert cli.main(["check", "rocky7"]) == 0
    capsys.readouterr()
    assert cli.main(["check", str(DATA / "cycle.urdf")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("wmr: error: ") and "cycle.urdf" in err and err.count("\n") == 1
    assert cli.main(["vehicles", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 14  # 13 wheeled + absolem
