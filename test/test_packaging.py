"""Packaging invariants: versions agree, package.xml is valid, interfaces are wired up, and a
source checkout sees its own modules plus the generated msg/srv installed in the venv."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import wmr_model

REPO = Path(__file__).resolve().parents[1]


def _package_xml_version() -> str:
    return ET.parse(REPO / "package.xml").getroot().findtext("version")


def test_versions_agree():
    setup_py = (REPO / "setup.py").read_text()
    setup_version = re.search(r'version="([^"]+)"', setup_py).group(1)
    assert wmr_model.__version__ == setup_version == _package_xml_version()


def test_package_xml_is_valid_for_catkin_pkg():
    catkin_pkg = pytest.importorskip("catkin_pkg.package")
    pkg = catkin_pkg.parse_package(str(REPO / "package.xml"))
    pkg.validate()
    assert pkg.name == "wmr_model"
    assert pkg.package_format == 3
    assert pkg.get_build_type() == "ament_cmake"
    assert "rosidl_interface_packages" in [g.name for g in pkg.member_of_groups]
    deps = {d.name for d in pkg.exec_depends + pkg.build_depends + pkg.buildtool_depends}
    for name in ("rclpy", "std_msgs", "builtin_interfaces", "nav_msgs", "sensor_msgs",
                 "geometry_msgs", "trajectory_msgs", "std_srvs", "diagnostic_msgs",
                 "python3-numpy", "python3-scipy", "python3-yaml", "python3-numba",
                 "rosidl_default_generators", "rosidl_default_runtime"):
        assert name in deps, name


def test_every_interface_file_is_generated():
    cmake = (REPO / "CMakeLists.txt").read_text()
    files = sorted(p.relative_to(REPO).as_posix()
                   for p in [*REPO.glob("msg/*.msg"), *REPO.glob("srv/*.srv")])
    assert files
    for f in files:
        assert f'"{f}"' in cmake, f"{f} is not listed in rosidl_generate_interfaces"
    code = "\n".join(line.split("#")[0] for line in cmake.splitlines())
    assert "ament_python_install_package(" not in code  # collides with rosidl's own call


def test_source_checkout_wins_and_finds_generated_interfaces():
    assert Path(wmr_model.__file__).resolve() == REPO / "wmr_model" / "__init__.py"
    assert Path(wmr_model.__path__[0]).resolve() == REPO / "wmr_model"
    from wmr_model import cli

    assert Path(cli.__file__).resolve().is_relative_to(REPO)
    pytest.importorskip("rclpy", reason="ROS 2 wheels not installed (run `make setup`)")
    from wmr_model.msg import CalibrationState
    from wmr_model.srv import PredictTrajectory

    assert CalibrationState.__name__ == "CalibrationState"
    assert PredictTrajectory.Request.DYNAMIC == 2
