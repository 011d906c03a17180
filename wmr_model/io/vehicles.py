"""Registry of the shipped vehicles and one entry point to load any vehicle description.

Shipped vehicles are a URDF ``urdf/<name>.urdf`` plus its sidecar ``config/vehicles/<name>.yaml``
(thesis vehicles: ``rocky7`` Table 2.2; ``landtamer``, ``zoe``, ``crusher``, ``recbot`` Tables
E.1-E.4; plus ``diffdrive``, ``warthog``, and the HMMWV-class ``hmmwv`` with closed-chain
suspension and steering and its one-joint-per-corner form ``hmmwv_embedded``,
:mod:`wmr_model.experiments.hmmwv`). They are looked up, in order, in

1. the source tree (``<repo>/urdf``, ``<repo>/config/vehicles``),
2. ``<sys.prefix>/share/wmr_model/`` (pip/colcon install into an environment),
3. the ament index share directory of ``wmr_model`` when ``ament_index_python`` is importable.

:func:`load_vehicle` accepts a shipped name, a URDF path or XML text (sidecar optional; default
``<stem>.yaml`` next to the URDF, else ``config/vehicles/<stem>.yaml`` in the places above), or a
frame-table YAML path (detected by content: a top-level ``frames`` list).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from wmr_model.errors import ModelError
from wmr_model.vehicles.model import VehicleModel, VehicleSpec, compile_vehicle

__all__ = [
    "SHIPPED_VEHICLES",
    "SHIPPED_TRACKED_VEHICLES",
    "data_roots",
    "list_vehicles",
    "vehicle_kind",
    "vehicle_files",
    "load_vehicle_spec",
    "load_vehicle",
    "require_ground_contact",
    "vehicle_parameter_set",
]

#: The vehicles this package ships, in documentation order.
SHIPPED_VEHICLES = ("rocky7", "landtamer", "zoe", "crusher", "recbot", "diffdrive", "warthog",
                    "husky", "hmmwv", "hmmwv_embedded", "tricycle", "f1tenth", "pathfinder")
#: Shipped tracked vehicles (sidecar ``tracks:``); ``list_vehicles(include_tracked=True)``.
SHIPPED_TRACKED_VEHICLES = ("absolem",)


def data_roots() -> list[Path]:
    """Directories that may hold ``urdf/`` and ``config/vehicles/``, in search order."""
    # the checkout (wmr_model/io/vehicles.py -> its root), then installed share directories
    roots = [Path(__file__).resolve().parents[2], Path(sys.prefix) / "share" / "wmr_model"]
    try:  # pragma: no cover - only with a ROS 2 environment
        from ament_index_python.packages import get_package_share_directory

        roots.append(Path(get_package_share_directory("wmr_model")))
    except Exception:  # ImportError, PackageNotFoundError
        pass
    out: list[Path] = []
    for r in roots:
        if r not in out:
            out.append(r)
    return out


def _has_tracks(sidecar: Path) -> bool:
    try:
        data = yaml.safe_load(sidecar.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return False
    return isinstance(data, dict) and bool(data.get("tracks"))


def list_vehicles(include_tracked: bool = False) -> list[str]:
    """Names of the available shipped vehicles (URDF and sidecar both found).

    Wheeled vehicles only unless ``include_tracked`` (sidecars with a ``tracks:`` section, e.g.
    ``absolem``), for callers that need wheels (wheel radii, wheel-only tools). ``wmr vehicles``
    lists both, with :func:`vehicle_kind`.
    """
    names: list[str] = []
    for root in data_roots():
        for urdf in sorted((root / "urdf").glob("*.urdf")):
            sidecar = root / "config" / "vehicles" / f"{urdf.stem}.yaml"
            if sidecar.is_file() and urdf.stem not in names:
                if include_tracked or not _has_tracks(sidecar):
                    names.append(urdf.stem)
    order = {n: i for i, n in enumerate(SHIPPED_VEHICLES + SHIPPED_TRACKED_VEHICLES)}
    return sorted(names, key=lambda n: (order.get(n, len(order)), n))


def vehicle_kind(model: VehicleModel) -> str:
    """``"tracked"`` (track contact patches), ``"closed-chain"`` (wheeled with loop closures,
    e.g. ``hmmwv``) or ``"wheeled"``."""
    if model.ntp:
        return "tracked"
    return "closed-chain" if model.nlc else "wheeled"


def require_ground_contact(model: VehicleModel) -> None:
    """Raise :class:`ModelError` (one line naming the file and vehicle) when ``model`` has
    neither wheels nor tracks: nothing of it touches the ground, so no kinematics, odometry or
    simulation is defined for it (``wmr check`` and ``wmr simulate`` refuse it)."""
    if model.wheel_radius.size == 0 and len(model.track_names) == 0:
        raise ModelError(f"{model.source}: vehicle {model.name!r} has no wheels and no tracks; "
                         "nothing touches the ground (URDF: make the wheels `continuous` joints "
                         "or list them under the sidecar's wheels:)")


def vehicle_files(name: str) -> tuple[Path, Path]:
    """``(urdf_path, sidecar_path)`` of shipped vehicle ``name``.

    Raises ModelError listing the places searched and the known names when absent.
    """
    looked = []
    for root in data_roots():
        urdf = root / "urdf" / f"{name}.urdf"
        sidecar = root / "config" / "vehicles" / f"{name}.yaml"
        looked.append(str(urdf))
        if urdf.is_file() and sidecar.is_file():
            return urdf, sidecar
    raise ModelError(
        f"no shipped vehicle {name!r}; known vehicles are {list_vehicles(include_tracked=True)} "
        f"(looked for {looked})"
    )


def _default_sidecar(urdf: Path) -> Path | None:
    candidates = [
        urdf.with_suffix(".yaml"),
        urdf.parent.parent / "config" / "vehicles" / f"{urdf.stem}.yaml",
    ]
    candidates += [root / "config" / "vehicles" / f"{urdf.stem}.yaml" for root in data_roots()]
    return next((c for c in candidates if c.is_file()), None)


def _is_name(s: str) -> bool:
    return bool(s) and os.sep not in s and "/" not in s and "." not in s and not s.startswith("<")


def load_vehicle_spec(
    name_or_path: str | os.PathLike[str],
    sidecar: str | os.PathLike[str] | Mapping[str, Any] | None = None,
) -> VehicleSpec:
    """The :class:`VehicleSpec` of a shipped name, URDF (path or XML text) or frame table."""
    from wmr_model.io.frame_table import is_frame_table, load_frame_table
    from wmr_model.io.urdf import load_urdf

    if isinstance(name_or_path, str) and name_or_path.lstrip().startswith("<"):
        return load_urdf(name_or_path, sidecar)
    if isinstance(name_or_path, str) and _is_name(name_or_path) and not Path(name_or_path).exists():
        urdf, default = vehicle_files(name_or_path)
        return load_urdf(urdf, default if sidecar is None else sidecar)
    path = Path(name_or_path)
    if not path.is_file():
        raise ModelError(
            f"{path}: no such file, and not a shipped vehicle; known vehicles are "
            f"{list_vehicles(include_tracked=True)}"
        )
    if path.suffix.lower() in (".yaml", ".yml"):
        try:
            from wmr_model.io.files import read_text

            data = yaml.safe_load(read_text(path, "vehicle file", ModelError))
        except yaml.YAMLError:
            data = None  # load_frame_table reports the parse error with its position
        if data is None or is_frame_table(data):
            if sidecar is not None:
                raise ModelError(f"{path}: a frame table takes no sidecar (got {sidecar})")
            return load_frame_table(path)
        raise ModelError(
            f"{path}: not a frame table (no 'frames' list); if it is a URDF sidecar, pass the "
            f"URDF and this file as its sidecar"
        )
    return load_urdf(path, _default_sidecar(path) if sidecar is None else sidecar)


def load_vehicle(
    name_or_path: str | os.PathLike[str],
    sidecar: str | os.PathLike[str] | Mapping[str, Any] | None = None,
) -> VehicleModel:
    """Load and compile a vehicle: shipped name, URDF (+ sidecar) or frame-table YAML.

    Examples
    --------
    >>> load_vehicle("rocky7").nw
    6
    """
    return compile_vehicle(load_vehicle_spec(name_or_path, sidecar))


def vehicle_parameter_set(vehicle: str) -> tuple[list[str], str] | None:
    """``(params, source)``: the default calibrated parameter set of a shipped vehicle, or None
    when it ships none.

    It is the ``params`` list of the calibrator section of ``config/nodes/<vehicle>.yaml``: the
    set the identifiability check (:mod:`wmr_model.calibration.identifiability`) passes on a
    synthetic run of that vehicle (``test_calibration_identifiability.py``), e.g. the
    Warthog's ``slip.p2, slip.p6`` and one wheel radius (``{p2, p5, radius}`` is confounded on
    a skid steer; p3, p4 need lateral forces that flat driving barely excites). ``wmr
    calibrate``, ``wmr replay`` and fleet fits use it (plus ``time_offset.pose``) when no
    ``--params`` are given; without one they use
    :data:`wmr_model.calibration.table.DEFAULT_3D_PARAMS`.
    """
    for root in data_roots():
        p = root / "config" / "nodes" / f"{vehicle}.yaml"
        if p.is_file():
            doc = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
            sec = (doc.get("/**/calibrator_node") or {}).get("ros__parameters") or {}
            if sec.get("params"):
                return [str(n) for n in sec["params"]], str(p)
    return None
