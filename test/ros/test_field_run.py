"""The field-run test: the node suite as a ROS user runs it, end to end.

``wmr synth`` makes a Warthog field run (its ground truth and calibration truth known); the
launch test ``test/launch/field_run_launch.py`` brings the nodes up with ``ros2 launch`` and
the shipped configuration only (``use_sim_time:=true use_calibration:=true``), plays the bag in
with ``wmr play`` at 1x and at 4x with /clock, and checks odometry drift, /tf, one
CalibrationState per interval with every estimate within 3 sigma of the truth, pushed values in
both other nodes, ~/save and a restart from the saved file, and diagnostics at OK. Each rate's
numbers are printed (``-s``) and kept in the test's folder as ``results.json``.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from launching import BIN, launch_test_results, require_launch_tools

REPO = Path(__file__).resolve().parents[2]
LAUNCH_FILE = REPO / "test" / "launch" / "field_run_launch.py"
DURATION = 150.0


@pytest.fixture(scope="module")
def field_run_bag(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("field_run") / "bag"
    res = subprocess.run([str(BIN / "wmr"), "synth", "--out", str(out), "--vehicle", "warthog",
                          "--terrain", "grass", "--duration", str(DURATION), "--seed", "7"],
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    return out


@pytest.mark.parametrize("rate", [1.0, 4.0], ids=["1x", "4x"])
def test_field_run(ros, field_run_bag: Path, tmp_path: Path, rate: float):
    require_launch_tools()
    env = dict(ros.env, WMR_FIELD_RUN_BAG=str(field_run_bag), WMR_FIELD_RUN_RATE=str(rate),
               WMR_FIELD_RUN_OUT=str(tmp_path), ROS_HOME=str(tmp_path / "ros_home"),
               ROS_LOG_DIR=str(tmp_path / "ros_log"))
    data = launch_test_results(LAUNCH_FILE, env, tmp_path, DURATION / rate + 900,
                               f"field run at {rate:g}x")
    results = tmp_path / "results.json"
    assert data["drift_percent"] <= 2.0
    if os.environ.get("WMR_FIELD_RUN_KEEP"):
        Path(os.environ["WMR_FIELD_RUN_KEEP"]).mkdir(parents=True, exist_ok=True)
        (Path(os.environ["WMR_FIELD_RUN_KEEP"]) / f"results_{rate:g}x.json").write_text(
            results.read_text())
