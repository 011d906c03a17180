"""Launch the wmr_model calibrator node:
``ros2 launch wmr_model calibration.launch.py vehicle:=warthog``.

Arguments as node.launch.py (vehicle, params_file, namespace, use_sim_time). The calibrator
pushes accepted estimates to odometry_node and prediction_node in the same namespace (see
``push.*`` in config/nodes/<vehicle>.yaml).
"""

from pathlib import Path

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import IncludeLaunchDescription
from launch.launch_description_sources import PythonLaunchDescriptionSource

EXECUTABLE = "calibrator_node"


def generate_launch_description() -> LaunchDescription:
    node = Path(get_package_share_directory("wmr_model")) / "launch" / "node.launch.py"
    return LaunchDescription([IncludeLaunchDescription(
        PythonLaunchDescriptionSource(str(node)),
        launch_arguments={"executable": EXECUTABLE}.items())])
