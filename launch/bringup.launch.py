"""Bring up the wmr_model nodes for one vehicle.

    ros2 launch wmr_model bringup.launch.py vehicle:=warthog use_calibration:=true

Starts odometry_node and prediction_node (and calibrator_node with ``use_calibration:=true``)
in one namespace, each with config/default.yaml, config/nodes/<vehicle>.yaml and the optional
``params_file``; ``calibration_file`` starts them from a saved calibration. Tested by
test/ros/test_launch_bringup.py and the field-run test (``ros2 launch`` as a user runs it).
"""

from pathlib import Path

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, IncludeLaunchDescription
from launch.conditions import IfCondition
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import LaunchConfiguration

# (launch file, argument that enables it, default)
NODES = (
    ("odometry.launch.py", "use_odometry", "true"),
    ("prediction.launch.py", "use_prediction", "true"),
    ("calibration.launch.py", "use_calibration", "false"),
)
FORWARDED = ("vehicle", "params_file", "namespace", "use_sim_time", "calibration_file",
             "steer_topic", "reference_topic")


def generate_launch_description() -> LaunchDescription:
    launch_dir = Path(get_package_share_directory("wmr_model")) / "launch"
    actions = [
        DeclareLaunchArgument("vehicle", default_value="warthog",
                              description="shipped vehicle name, URDF path or frame table"),
        DeclareLaunchArgument("params_file", default_value="",
                              description="extra parameter YAML for all nodes"),
        DeclareLaunchArgument("namespace", default_value="", description="node namespace"),
        DeclareLaunchArgument("use_sim_time", default_value="false",
                              description="true for bag replay with /clock"),
        DeclareLaunchArgument("calibration_file", default_value="",
                              description="calibration YAML from the calibrator's ~/save"),
        DeclareLaunchArgument("steer_topic", default_value="",
                              description="JointState topic with the steering angles when "
                              "joint_states lacks them (default: the vehicle sidecar's)"),
        DeclareLaunchArgument("reference_topic", default_value="",
                              description="the calibrator's reference topic (remapped onto its "
                              "ground_truth/odom, ground_truth/pose or gps/fix input)"),
    ]
    args = {k: LaunchConfiguration(k) for k in FORWARDED}
    for file, flag, default in NODES:
        actions.append(DeclareLaunchArgument(flag, default_value=default))
        actions.append(IncludeLaunchDescription(
            PythonLaunchDescriptionSource(str(launch_dir / file)),
            launch_arguments=args.items(), condition=IfCondition(LaunchConfiguration(flag))))
    return LaunchDescription(actions)
