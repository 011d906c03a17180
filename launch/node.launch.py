"""Launch one wmr_model node for one vehicle (included by the other launch files).

    ros2 launch wmr_model node.launch.py executable:=odometry_node vehicle:=warthog

Parameters, in increasing precedence: config/default.yaml, config/nodes/<vehicle>.yaml (when
the vehicle is a shipped name with such a file), ``params_file`` (when given), then
``vehicle``, ``use_sim_time``, ``calibration_file`` and ``steer_topic`` themselves;
``reference_topic`` remaps the calibrator's reference input.
"""

from pathlib import Path

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

#: the calibrator's reference inputs (pose_source odometry, pose, navsatfix)
REFERENCE_INPUTS = ("ground_truth/odom", "ground_truth/pose", "gps/fix")


def _node(context):
    share = Path(get_package_share_directory("wmr_model"))
    executable = LaunchConfiguration("executable").perform(context)
    vehicle = LaunchConfiguration("vehicle").perform(context)
    extra = LaunchConfiguration("params_file").perform(context)
    files = [str(share / "config" / "default.yaml")]
    per_vehicle = share / "config" / "nodes" / f"{vehicle}.yaml"
    if per_vehicle.is_file():
        files.append(str(per_vehicle))
    if extra:
        files.append(extra)
    use_sim_time = LaunchConfiguration("use_sim_time").perform(context).lower() == "true"
    overrides = {"vehicle": vehicle, "use_sim_time": use_sim_time}
    calibration = LaunchConfiguration("calibration_file").perform(context)
    if calibration:
        overrides["calibration_file"] = str(Path(calibration).expanduser().resolve())
    steer = LaunchConfiguration("steer_topic").perform(context)
    if steer and executable in ("odometry_node", "calibrator_node"):
        overrides["steer_topic"] = steer
    # the reference the calibrator reads, whichever its pose_source is
    ref = LaunchConfiguration("reference_topic").perform(context)
    remaps = [(t, ref) for t in REFERENCE_INPUTS] if ref else []
    return [Node(package="wmr_model", executable=executable, name=executable,
                 namespace=LaunchConfiguration("namespace"), output="screen",
                 parameters=[*files, overrides], remappings=remaps)]


def generate_launch_description() -> LaunchDescription:
    return LaunchDescription([
        DeclareLaunchArgument("executable", description="odometry_node, prediction_node or "
                              "calibrator_node"),
        DeclareLaunchArgument("vehicle", default_value="warthog",
                              description="shipped vehicle name, URDF path or frame table"),
        DeclareLaunchArgument("params_file", default_value="",
                              description="extra parameter YAML (highest precedence)"),
        DeclareLaunchArgument("namespace", default_value="", description="node namespace"),
        DeclareLaunchArgument("use_sim_time", default_value="false",
                              description="true for bag replay with /clock"),
        DeclareLaunchArgument("calibration_file", default_value="",
                              description="calibration YAML written by the calibrator's ~/save: "
                              "the nodes start from its values"),
        DeclareLaunchArgument("steer_topic", default_value="",
                              description="JointState topic with the steering angles when "
                              "joint_states lacks them (odometry and calibrator)"),
        DeclareLaunchArgument("reference_topic", default_value="",
                              description="the calibrator's reference topic (remaps "
                              "ground_truth/odom, ground_truth/pose and gps/fix to it), e.g. "
                              "/icp/odom of the shipped Warthog log"),
        OpaqueFunction(function=_node),
    ])
