"""Launch files: their structure, parsed without importing ``launch`` (so this runs where
ros-extra is absent). Running them is test/ros/test_launch_bringup.py and test_field_run.py."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LAUNCH = REPO / "launch"


def _strings(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    return {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)
            and isinstance(n.value, str)}


@pytest.mark.parametrize("name", ["node", "odometry", "prediction", "calibration", "bringup",
                                  "wmr_model"])
def test_launch_file_parses_and_defines_a_description(name):
    path = LAUNCH / f"{name}.launch.py"
    tree = ast.parse(path.read_text(), str(path))
    funcs = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert "generate_launch_description" in funcs


def test_launch_files_name_existing_executables_and_files():
    scripts = {p.name for p in (REPO / "scripts").iterdir()}
    for name in ("odometry", "prediction", "calibration"):
        s = _strings(LAUNCH / f"{name}.launch.py")
        exe = {v for v in s if v.endswith("_node")}
        assert exe and exe <= scripts, (name, exe, scripts)
    bringup = _strings(LAUNCH / "bringup.launch.py")
    for file in ("odometry.launch.py", "prediction.launch.py", "calibration.launch.py"):
        assert file in bringup and (LAUNCH / file).is_file()
    assert "vehicle" in bringup
    assert "default.yaml" in _strings(LAUNCH / "node.launch.py")
    assert (REPO / "config" / "default.yaml").is_file()
