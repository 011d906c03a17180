"""Kept for existing users: the same as bringup.launch.py (same arguments).

    ros2 launch wmr_model wmr_model.launch.py vehicle:=rocky7 use_calibration:=true
"""

from pathlib import Path

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import IncludeLaunchDescription
from launch.launch_description_sources import PythonLaunchDescriptionSource


def generate_launch_description() -> LaunchDescription:
    bringup = Path(get_package_share_directory("wmr_model")) / "launch" / "bringup.launch.py"
    return LaunchDescription([IncludeLaunchDescription(PythonLaunchDescriptionSource(
        str(bringup)))])
