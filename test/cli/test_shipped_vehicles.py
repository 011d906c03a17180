"""Every shipped vehicle, wheeled and tracked, works with ``wmr check``, ``wmr simulate`` and
:func:`wmr_model.prediction.predict.predict` (issue 25: ``wmr simulate absolem`` crashed, ``wmr vehicles``
did not list it).

Oracles: the closed form of straight driving on flat ground (x = v t, y = 0, level), the
vehicle's geometry read from the model (wheel radii, the belt speed per unit sprocket rate of
the track path), and the CLI's JSON summary against its own CSV.
"""

import json
import math

import numpy as np
import pytest

from wmr_model import kinematics as kin
from wmr_model.cli import main
from wmr_model.io.vehicles import (
    SHIPPED_TRACKED_VEHICLES,
    SHIPPED_VEHICLES,
    list_vehicles,
    load_vehicle,
    vehicle_kind,
)
from wmr_model.prediction.predict import predict, twist_commands
from wmr_model.terrain.surface import flat

ALL = list_vehicles(include_tracked=True)
SPEED, DURATION, DT = 0.5, 1.0, 0.04  # [m/s], [s], [s]: 25 steps


def _run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_all_shipped_vehicles_are_found():
    assert ALL == [*SHIPPED_VEHICLES, *SHIPPED_TRACKED_VEHICLES]
    assert "absolem" in ALL


def test_wmr_vehicles_lists_every_vehicle_with_its_kind(capsys):
    code, out, _ = _run(capsys, "vehicles", "--json")
    assert code == 0
    rows = {r["name"]: r for r in json.loads(out)}
    assert list(rows) == ALL
    assert rows["absolem"]["kind"] == "tracked" and rows["absolem"]["wheels"] == 0
    assert rows["absolem"]["track_patches"] == 2 * 20 + 4 * 12 and len(rows["absolem"]["tracks"]) == 6
    assert rows["hmmwv"]["kind"] == "closed-chain"
    assert rows["zoe"]["kind"] == "wheeled" and rows["zoe"]["tracks"] == []
    for name, r in rows.items():
        assert r["kind"] == vehicle_kind(load_vehicle(name))
    code, out, _ = _run(capsys, "vehicles")
    assert code == 0
    lines = {line.split()[0]: line.split() for line in out.splitlines()[1:]}
    assert list(lines) == ALL
    assert lines["absolem"][1:4] == ["tracked", "0", "6"]


@pytest.mark.parametrize("name", ALL)
def test_check_simulate_predict(name, tmp_path, capsys):
    model = load_vehicle(name)
    # wmr check
    code, out, err = _run(capsys, "check", name, "--json")
    assert code == 0, err
    assert json.loads(out)["valid"] is True
    # wmr simulate: straight at SPEED on flat ground for DURATION
    csv = tmp_path / "traj.csv"
    code, out, err = _run(capsys, "simulate", name, "--speed", str(SPEED), "--duration",
                          str(DURATION), "--dt", str(DT), "--json", "--out", str(csv))
    assert code == 0, err
    s = json.loads(out)
    assert s["steps"] == round(DURATION / DT)
    x, y, _ = s["final_position"]
    assert x == pytest.approx(SPEED * DURATION, rel=0.01), name
    header = csv.read_text().splitlines()[0].split(",")
    assert len(header) == 7 + model.nj + model.nc  # t, pose, joints, one dz per contact
    table = np.loadtxt(csv, delimiter=",", skiprows=1)
    assert table.shape == (s["steps"] + 1, len(header))
    np.testing.assert_allclose(table[-1, 1:3], [x, y], atol=1e-8)
    # no sideways drift or turn; attitude as placed (RecBot pitches: unequal wheel radii)
    assert abs(y) < 1e-3 and abs(s["final_rpy_deg"][0]) < 0.1 and abs(s["final_rpy_deg"][2]) < 0.1
    np.testing.assert_allclose(table[-1, 3:7], table[0, 3:7], atol=1e-3)  # z, roll, pitch, yaw
    # wmr_model.prediction.predict.predict: the same commands as a batch of two candidates (1x, 2x speed)
    ter = flat()
    q = model.neutral_state()
    q[6] = 1.0
    q0, _ = kin.initialize_contact(model, ter, q)
    u = twist_commands(model, np.array([[SPEED, 0.0, DURATION]]), DT)[0]
    pred = predict(model, ter, q0, np.stack([u, 2 * u]), DT)
    end = pred.position[:, -1]
    np.testing.assert_allclose(end[:, 0], [SPEED * DURATION, 2 * SPEED * DURATION], rtol=0.01)
    np.testing.assert_allclose(end[:, 1], 0.0, atol=1e-3)


def _belt_speed_per_rate(model, track: str) -> float:
    """Belt speed per unit sprocket rate [m/rad] of ``track``, read from its track path."""
    t = model.track_names.index(track)
    k = int(np.flatnonzero(model.track_of == t)[0])
    return float(np.linalg.norm(model.track_path[k, model.track_path.shape[1] // 2, 3:6]))


@pytest.mark.parametrize("vx, wz", [(0.5, 0.0), (0.3, 0.5), (-0.2, -0.3)])
def test_tracked_twist_commands_drive_the_sprockets(vx, wz):
    """Absolem: a twist becomes sprocket rates (flippers held), with the belt speeds of a skid
    steer of the main tracks' width on flat ground: mean vx, difference wz * 0.4 m. Before
    issue 25 the sprockets got 0 rad/s and the flippers turned instead."""
    m = load_vehicle("absolem")
    u = twist_commands(m, np.array([[vx, wz, 0.4]]), DT)[0]
    names = [m.joint_names[k] for k in m.actuated_joints]
    il, ir = names.index("left_sprocket"), names.index("right_sprocket")
    flippers = [i for i, n in enumerate(names) if n.startswith("flipper")]
    assert len(flippers) == 4
    np.testing.assert_array_equal(u[:, flippers], 0.0)
    vl = u[:, il] * _belt_speed_per_rate(m, "left")
    vr = u[:, ir] * _belt_speed_per_rate(m, "right")
    width = 0.40  # main tracks at y = +-0.20 m (config/vehicles/absolem.yaml)
    np.testing.assert_allclose((vl + vr) / 2, vx, rtol=0.01, atol=1e-9)
    np.testing.assert_allclose((vr - vl) / width, wz, rtol=0.02, atol=1e-9)


def test_simulate_absolem_on_rough_terrain(capsys):
    """The original crash (``wheel_radius.max()`` of no wheels), on a benchmark terrain."""
    code, out, err = _run(capsys, "simulate", "absolem", "--terrain", "wmrde:1", "--speed", "0.3",
                          "--duration", "1", "--json")
    assert code == 0, err
    s = json.loads(out)
    assert s["vehicle"] == "absolem" and s["terrain"] == "gridsurfdata1"
    assert all(math.isfinite(v) for v in s["final_position"])
    assert s["final_position"][0] > 0.1  # it drove forward
