"""``wmr simulate`` end to end: closed-form arc, CSV output, scripted commands, bad input."""

import json
import math

import numpy as np
import pytest

from wmr_model.cli import main
from wmr_model.errors import TerrainError
from wmr_model.io.terrain_spec import parse_terrain_spec


def _run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_twist_command_follows_the_arc(tmp_path, capsys):
    """diffdrive at v = 0.4 m/s, w = 0.5 rad/s for 2 s: yaw = 1 rad on a circle of radius 0.8."""
    csv = tmp_path / "traj.csv"
    code, out, _ = _run(capsys, "simulate", "diffdrive", "--speed", "0.4", "--yaw-rate", "0.5",
                        "--duration", "2", "--dt", "0.01", "--integrator", "rk4", "--json",
                        "--out", str(csv))
    assert code == 0
    s = json.loads(out)
    assert s["steps"] == 200
    assert math.radians(s["final_rpy_deg"][2]) == pytest.approx(1.0, abs=1e-3)
    r = 0.4 / 0.5
    x, y = s["final_position"][:2]
    assert x == pytest.approx(r * math.sin(1.0), abs=2e-3)
    assert y == pytest.approx(r * (1 - math.cos(1.0)), abs=2e-3)
    table = np.loadtxt(csv, delimiter=",", skiprows=1)
    assert table.shape[0] == 201
    header = csv.read_text().splitlines()[0].split(",")
    assert header[:7] == ["t", "x", "y", "z", "roll", "pitch", "yaw"]
    np.testing.assert_allclose(table[-1, 1:3], [x, y], atol=1e-9)


def test_scripted_commands_zero_order_hold(tmp_path, capsys):
    """A CSV script: 1 s straight then 1 s spinning in place (skid steer on flat ground)."""
    script = tmp_path / "cmd.csv"
    # warthog actuated joints are its four wheels; the closed form holds for equal sides
    code, out, _ = _run(capsys, "check", "warthog", "--json")
    names = json.loads(out)["actuated"]
    rows = ["time," + ",".join(names)]
    w = 1.0 / 0.3
    rows.append("0," + ",".join(str(w) for _ in names))
    left = ["left" in n for n in names]
    rows.append("1," + ",".join(str(-w if lf else w) for lf in left))
    rows.append("2," + ",".join("0" for _ in names))
    script.write_text("\n".join(rows) + "\n")
    code, out, _ = _run(capsys, "simulate", "warthog", "--commands", str(script), "--dt", "0.01",
                        "--json")
    assert code == 0
    s = json.loads(out)
    assert s["steps"] == 200
    assert s["final_position"][0] == pytest.approx(1.0, abs=1e-6)  # spin adds no translation
    assert abs(s["final_rpy_deg"][2]) > 10  # it turned


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["simulate", "nosuchvehicle"], "nosuchvehicle"),
        (["simulate", "zoe", "--terrain", "rough:0.1"], r"expected 2 to 3 comma-separated"),
        (["simulate", "zoe", "--dt", "-1"], r"--dt: must be > 0 s, got -1"),
        (["simulate", "zoe", "--joint-rates", "1,2"], r"--joint-rates: expected 4 numbers, got 2"),
        (["simulate", "zoe", "--start", "0,nan,0"], r"--start: numbers must be finite"),
    ],
)
def test_bad_input_one_line_and_exit_2(capsys, argv, message):
    code, _, err = _run(capsys, *argv)
    assert code == 2
    assert err.startswith("wmr: error:")
    assert len(err.strip().splitlines()) == 1
    import re

    assert re.search(message, err)


def test_terrain_specs():
    assert parse_terrain_spec("flat:1.5").height(3.0, -2.0) == 1.5
    plane = parse_terrain_spec("plane:10,90")
    assert plane.height(0.0, 1.0) == pytest.approx(math.tan(math.radians(10)))
    assert parse_terrain_spec("zoe-ramp:1").height(1.0 + 0.59 + 0.3, 0.0) == pytest.approx(0.41)
    r1 = parse_terrain_spec("rough:0.05,0.2,3")
    r2 = parse_terrain_spec("rough:0.05,0.2,3")
    assert np.array_equal(r1.grid, r2.grid)
    assert np.std(r1.grid) == pytest.approx(0.05, rel=1e-6)
    with pytest.raises(TerrainError, match="unknown kind 'hills'"):
        parse_terrain_spec("hills:1")
    with pytest.raises(TerrainError, match=r"benchmark terrain number must be 1\.\.10"):
        parse_terrain_spec("wmrde:11")
