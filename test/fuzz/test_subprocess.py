"""A handful of cases as real ``wmr`` processes: exit code and exactly one stderr line."""

from __future__ import annotations

import subprocess
import sys

import pytest


def _wmr(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "wmr_model", *map(str, args)],
                          capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("args,needle", [
    (["simulate", "diffdrive", "--dt", "0"], "--dt: must be > 0 s, got 0.0"),
    (["simulate", "diffdrive", "--terrain", "rough:0.05,1e-3"], "exceeds the budget"),
    (["simulate", "diffdrive", "--joint-rates", "1e308,1e308"], "rim speed"),
])
def test_error_is_one_line_exit_2(args, needle):
    p = _wmr(*args)
    assert p.returncode == 2, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("wmr: error: ") and needle in lines[0]


def test_out_bag_missing_parent_process(synth_bag, tmp_path):
    p = _wmr("replay", synth_bag, "--quiet", "--out-bag", tmp_path / "no" / "such" / "x")
    assert p.returncode == 2
    assert p.stderr.count("\n") == 1 and "does not exist" in p.stderr
    assert not (tmp_path / "no").exists()


def test_check_vehicle_without_wheels_process(tmp_path):
    """``wmr check`` of a vehicle nothing of which touches the ground: exit 2, one line."""
    u, s = tmp_path / "bare.urdf", tmp_path / "bare.yaml"
    u.write_text('<robot name="bare"><link name="base_link"/><link name="arm"/>'
                 '<joint name="j" type="revolute"><parent link="base_link"/><child link="arm"/>'
                 '<axis xyz="0 0 1"/><limit lower="-1" upper="1" effort="1" velocity="1"/>'
                 '</joint></robot>')
    s.write_text("version: 1\nvehicle: bare\nbody_link: base_link\n")
    p = _wmr("check", u, "--sidecar", s)
    assert p.returncode == 2 and p.stdout == ""
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("wmr: error: ")
    assert "bare.urdf: vehicle 'bare' has no wheels and no tracks" in lines[0]


def test_valid_input_exit_0():
    p = _wmr("check", "diffdrive")  # no simulation: a fresh process may compile numba kernels
    assert p.returncode == 0 and p.stderr == "" and "left_wheel_joint" in p.stdout
