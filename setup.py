"""Plain pip install of the ROS-free wmr_model core, io layer and the ``wmr`` command line.

The ROS 2 side (generated msg/srv, nodes, launch files) is built by CMake/colcon from
CMakeLists.txt; see README.md.
"""

from pathlib import Path

from setuptools import find_packages, setup

HERE = Path(__file__).parent


def _share(folder: str, pattern: str) -> tuple[str, list[str]]:
    """Install repo-root data (vehicle descriptions) into <prefix>/share/wmr_model/<folder>,
    where wmr_model.io.vehicles looks for them after a non-editable pip install."""
    files = sorted(str(p.relative_to(HERE)) for p in (HERE / folder).glob(pattern))
    return f"share/wmr_model/{folder}", files

setup(
    name="wmr_model",
    version="0.1.0",
    description="Fast, calibrated 3D motion models for wheeled and tracked ground robots",
    long_description=(HERE / "README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    license="BSD-3-Clause",
    python_requires=">=3.11",
    packages=find_packages(include=["wmr_model", "wmr_model.*"]),
    # Data shipped inside the package (vehicle descriptions, terrains, schemas).
    package_data={
        "wmr_model": [
            "py.typed",
            *(f"**/*.{ext}" for ext in ("yaml", "yml", "urdf", "xacro", "json", "csv", "npz",
                                        "npy", "png", "stl", "dae", "obj")),
            # wmrde benchmark terrains (`--terrain wmrde:N`) with their license and provenance
            "data/wmrde_terrains/*.txt",
            "data/wmrde_terrains/LICENSE",
            "data/wmrde_terrains/PROVENANCE.md",
        ]
    },
    data_files=[
        _share("urdf", "*.urdf"),
        _share("config/vehicles", "*.yaml"),
        _share("config/frame_tables", "*.yaml"),
    ],
    install_requires=[
        "numpy>=1.26",
        "scipy>=1.11",
        "numba>=0.59",
        "pyyaml>=6.0",
        "yourdfpy>=0.0.56",
        "rosbags>=0.10",
        "matplotlib>=3.8",
    ],
    extras_require={
        # sensor_msgs/NavSatFix input of the calibrator node (geodetic -> local ENU)
        "gps": ["pymap3d==3.2.0"],
        # Ray: `wmr calibrate` over many bags with --workers N / --ray-address
        # (wmr_model.pipelines.runner)
        "cluster": ["ray==2.60.0"],
        "test": ["pytest>=8", "pytest-timeout>=2.3", "pytest-xdist>=3.5", "hypothesis>=6.100",
                 "ruff>=0.6", "import-linter>=2.1", "mypy>=1.10"],
    },
    entry_points={"console_scripts": ["wmr = wmr_model.cli:main"]},
    zip_safe=False,
)
