"""``ros2 launch wmr_model bringup.launch.py`` starts every node for every shipped vehicle that
has a node configuration, with only the shipped files (as a user runs it)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from launching import Launched, require_launch_tools, ros2

REPO = Path(__file__).resolve().parents[2]
VEHICLES = sorted(p.stem for p in (REPO / "config" / "nodes").glob("*.yaml"))
NODES = ("odometry_node", "prediction_node", "calibrator_node")
SERVICES = {"odometry_node": "get_parameters", "prediction_node": "predict",
            "calibrator_node": "save"}


def test_every_node_config_is_a_shipped_vehicle():
    shipped = {p.stem for p in (REPO / "config" / "vehicles").glob("*.yaml")}
    assert VEHICLES and set(VEHICLES) <= shipped


def test_bringup_starts_every_node_for_every_vehicle(ros, tmp_path):
    require_launch_tools()
    launched = {v: Launched(ros2("launch", "wmr_model", "bringup.launch.py", f"vehicle:={v}",
                                "use_calibration:=true", f"namespace:=/{v}"),
                            tmp_path / f"{v}.log", env=ros.env)
                for v in VEHICLES}
    want = {f"/{v}/{n}/{SERVICES[n]}" for v in VEHICLES for n in NODES}
    try:
        deadline = time.monotonic() + 240
        while True:
            for v, proc in launched.items():
                assert proc.alive(), f"ros2 launch for {v} ended:\n{proc.output()}"
                assert "process has died" not in proc.output(), f"{v}:\n{proc.output()}"
            have = {n for n, _ in ros.node.get_service_names_and_types()}
            if want <= have:
                break
            assert time.monotonic() < deadline, (
                f"missing {sorted(want - have)}\n" +
                "\n".join(f"--- {v} ---\n{p.output(4000)}" for v, p in launched.items()))
            ros.spin_once(0.2)
        for proc in launched.values():
            assert "Traceback" not in proc.output(), proc.output()
    finally:
        codes = {v: p.stop() for v, p in launched.items()}
    # Ctrl-C: launch shuts its nodes down and exits 0 when they finished cleanly.
    for v, code in codes.items():
        assert code == 0, f"ros2 launch for {v} exited {code}:\n{launched[v].output()}"
    for proc in launched.values():
        assert "process has died" not in proc.output(), proc.output()


@pytest.mark.parametrize("node", NODES)
def test_launch_files_exist_for_each_node(node):
    name = {"odometry_node": "odometry", "prediction_node": "prediction",
            "calibrator_node": "calibration"}[node]
    assert (REPO / "launch" / f"{name}.launch.py").is_file()
