"""launch_testing description: bringup.launch.py for warthog with the calibrator; run by
``launch_test`` (see test_launch_files.py, which skips where launch_testing is absent)."""

import time
import unittest
from pathlib import Path

import launch
import launch_testing.actions
import rclpy
from ament_index_python.packages import get_package_share_directory
from launch.actions import IncludeLaunchDescription
from launch.launch_description_sources import PythonLaunchDescriptionSource


def generate_test_description():
    bringup = Path(get_package_share_directory("wmr_model")) / "launch" / "bringup.launch.py"
    return launch.LaunchDescription([
        IncludeLaunchDescription(PythonLaunchDescriptionSource(str(bringup)),
                                 launch_arguments={"vehicle": "warthog",
                                                   "use_calibration": "true",
                                                   "namespace": "lt"}.items()),
        launch_testing.actions.ReadyToTest(),
    ])


class TestBringup(unittest.TestCase):
    def test_interfaces_appear(self):
        rclpy.init()
        node = rclpy.create_node("wmr_launch_probe")
        try:
            want = {"/lt/prediction_node/predict", "/lt/calibrator_node/save",
                    "/lt/calibrator_node/reset", "/lt/odometry_node/set_parameters"}
            deadline = time.monotonic() + 60
            while True:
                have = {n for n, _ in node.get_service_names_and_types()}
                if want <= have:
                    break
                self.assertLess(time.monotonic(), deadline, f"missing {want - have}")
                rclpy.spin_once(node, timeout_sec=0.2)
        finally:
            node.destroy_node()
            rclpy.shutdown()


@launch_testing.post_shutdown_test()
class TestShutdown(unittest.TestCase):
    def test_exit_codes(self, proc_info):
        launch_testing.asserts.assertExitCodes(proc_info, allowable_exit_codes=[0, -2, -15])
