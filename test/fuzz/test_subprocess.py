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


def test_valid_input_exit_0():
    p = _wmr("check", "diffdrive")  # no simulation: a fresh process may compile numba kernels
    assert p.returncode == 0 and p.stderr == "" and "left_wheel_joint" in p.stdout
