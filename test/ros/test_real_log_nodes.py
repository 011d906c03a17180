"""Real logs of steered vehicles through the node suite as a ROS user runs it: ``ros2 launch``
(``bringup.launch.py`` with ``reference_topic`` and the sidecar's or a given ``steer_topic``)
and ``wmr play`` with /clock, via ``test/launch/real_log_launch.py``: the tricycle (steering
angle measured on ``/joint_states``, free-rolling rear wheels) and the F1TENTH car (steering
only commanded, on a second topic, followed with its lag; motor through a differential), and the
calibrator on the Pathfinder's GNSS fixes (no INS attitude: the heading derived live). The
odometry node's output must equal the offline odometry of the same bag; the drift against the
reference and the calibrator's estimate are printed (``-s``) and kept as ``results.json``."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from launching import launch_test_results, require_launch_tools

REPO = Path(__file__).resolve().parents[2]
LAUNCH_FILE = REPO / "test" / "launch" / "real_log_launch.py"
LOGS = REPO / "data" / "real_logs"

CASES = {
    "tricycle": ("tricycle_circular_140120211415", "tricycle", "/mocap/odom", "", "odometry",
                 {}),
    "f1tenth": ("f1tenth_frictionmaps_DS3", "f1tenth", "/pf/odom", "/joint_states_cmd_steer",
                "odometry", {}),
    # GNSS fixes without an INS attitude (the IMU gives none): the calibrator derives their
    # heading (navsatfix.heading auto); the fixes carry no covariance (UNKNOWN): 2 cm stands in
    "pathfinder": ("pathfinder_test17run", "pathfinder", "/gps/fix", "", "navsatfix",
                   {"navsatfix.unknown_position_std": 0.02}),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CASES))
def test_real_log_through_the_nodes(ros, case, tmp_path):
    require_launch_tools()
    log, vehicle, ref, steer, source, calibrator = CASES[case]
    env = dict(ros.env, WMR_REAL_LOG_BAG=str(LOGS / log / "bag"), WMR_REAL_LOG_VEHICLE=vehicle,
               WMR_REAL_LOG_REFERENCE=ref, WMR_REAL_LOG_STEER=steer,
               WMR_REAL_LOG_POSE_SOURCE=source, WMR_REAL_LOG_CALIBRATOR=json.dumps(calibrator), WMR_REAL_LOG_RATE=os.environ.get("WMR_REAL_LOG_TEST_RATE", "2"),
               WMR_REAL_LOG_OUT=str(tmp_path), ROS_HOME=str(tmp_path / "ros_home"),
               ROS_LOG_DIR=str(tmp_path / "ros_log"))
    data = launch_test_results(LAUNCH_FILE, env, tmp_path, 900, f"{case} through the nodes")
    assert data["max_difference_to_offline_m"] < 1e-6
    assert data["calibration_states"] > 0
