"""wmr_model: fast, calibrated 3D motion models for wheeled and tracked ground robots.

Layers: core (kinematics, dynamics, calibration; numpy/scipy/numba, no ROS) -> io (URDF/YAML,
bags, reports) -> ros (nodes) -> cli (``wmr``). Importing this package imports nothing heavy.
"""

import pkgutil

# The generated ROS interfaces (wmr_model.msg, wmr_model.srv and their typesupport libraries)
# are installed into the environment's site-packages; a source checkout earlier on sys.path
# still finds them because every wmr_model directory on sys.path joins this package's path.
__path__ = pkgutil.extend_path(__path__, __name__)

__version__ = "0.1.0"

__all__ = ["__version__"]
