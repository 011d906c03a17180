"""The nodes' ``terrain`` parameter uses the CLI's terrain grammar."""

import math

import pytest

pytest.importorskip("rclpy", reason="rclpy (ROS 2) is not installed")

from wmr_model.errors import TerrainError
from wmr_model.ros.params import terrain_from_parameters


def test_terrain_parameter_builds_the_named_terrain():
    assert terrain_from_parameters({}).height(3.0, 4.0) == 0.0
    plane = terrain_from_parameters({"terrain": "plane:10,90"})
    assert plane.height(0.0, 2.0) == pytest.approx(2.0 * math.tan(math.radians(10)))
    with pytest.raises(TerrainError, match="unknown kind 'hill'"):
        terrain_from_parameters({"terrain": "hill:3"})
