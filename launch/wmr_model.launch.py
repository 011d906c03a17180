"""Launch the wmr_model nodes for one vehicle.

    ros2 launch wmr_model wmr_model.launch.py vehicle:=rocky7 \
        use_prediction:=true use_calibration:=false

Each node is started only if its executable is installed in lib/wmr_model (they land with later
issues). Needs the ROS 2 `launch`/`launch_ros` packages, which the PyPI wheels do not provide:
this file is for a real ROS 2 install and is never imported by the tests.
"""

from pathlib import Path

from ament_index_python.packages import get_package_prefix, get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, LogInfo
from launch.conditions import IfCondition
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

# (executable in lib/wmr_model, launch argument that enables it, default)
NODES = (
    ("odometry_node", "use_odometry", "true"),
    ("prediction_node", "use_prediction", "true"),
    ("calibration_node", "use_calibration", "false"),
)


def generate_launch_description() -> LaunchDescription:
    share = Path(get_package_share_directory("wmr_model"))
    libexec = Path(get_package_prefix("wmr_model")) / "lib" / "wmr_model"
    vehicle = LaunchConfiguration("vehicle")
    params_file = LaunchConfiguration("params_file")
    actions = [
        DeclareLaunchArgument("vehicle", default_value="rocky7",
                              description="vehicle name or path to its URDF"),
        DeclareLaunchArgument("params_file", default_value=str(share / "config" / "default.yaml"),
                              description="YAML file with the nodes' parameters"),
        DeclareLaunchArgument("namespace", default_value="", description="node namespace"),
    ]
    for executable, flag, default in NODES:
        actions.append(DeclareLaunchArgument(flag, default_value=default))
        if not (libexec / executable).exists():
            actions.append(LogInfo(msg=f"wmr_model: {executable} is not installed; skipped"))
            continue
        actions.append(
            Node(
                package="wmr_model",
                executable=executable,
                namespace=LaunchConfiguration("namespace"),
                parameters=[params_file, {"vehicle": vehicle}],
                output="screen",
                condition=IfCondition(LaunchConfiguration(flag)),
            )
        )
    return LaunchDescription(actions)
