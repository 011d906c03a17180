"""The default calibrated parameter set of a vehicle, and physical-bound warnings.

Each shipped vehicle's calibrator section (``config/nodes/<name>.yaml``, ``params``) lists the
set that the identifiability check (:mod:`wmr_model.calibration.identifiability`) passes on a
synthetic run of that vehicle (``test_calibration_identifiability.py``): e.g. the Warthog's
``slip.p2, slip.p6`` and one wheel radius (``{p2, p5, radius}`` is confounded on a skid steer;
p3, p4 need lateral forces that flat driving barely excites). ``wmr calibrate`` and ``wmr
replay`` use it (plus ``time_offset.pose``) when no ``--params`` are given; a vehicle without
such a section gets :data:`wmr_model.calibration.table.DEFAULT_3D_PARAMS`.

:func:`physical_warnings` names estimates outside the physically plausible range of their
family (:data:`PLAUSIBLE`): a slip coefficient beyond it means the fit absorbed something the
model does not have (a wrong radius or track width, reference faults) - never silently.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = ["vehicle_parameter_set", "physical_warnings", "physical_bounds", "PLAUSIBLE"]

#: Plausible magnitude of each slip coefficient (|value| above it is reported): longitudinal and
#: lateral slip ratios stay well below 1 on any traversable ground, yaw terms below 2.
PLAUSIBLE = {"slip.p1": 1.0, "slip.p2": 1.0, "slip.p3": 1.0, "slip.p4": 2.0, "slip.p5": 2.0,
             "slip.p6": 1.0, "slip.p7": 2.0, "slip.p8": 2.0, "time_offset.pose": 1.0}


def _node_configs() -> list[Path]:
    import sys

    roots = [Path(__file__).resolve().parents[2], Path(sys.prefix) / "share" / "wmr_model"]
    return [r / "config" / "nodes" for r in roots]


def vehicle_parameter_set(vehicle: str) -> tuple[list[str], str] | None:
    """``(params, source)``: the identifiability-checked calibrator set of a shipped vehicle
    (without noise entries), or None when the vehicle ships none."""
    import yaml

    for d in _node_configs():
        p = d / f"{vehicle}.yaml"
        if p.is_file():
            doc = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
            sec = (doc.get("/**/calibrator_node") or {}).get("ros__parameters") or {}
            if sec.get("params"):
                return [str(n) for n in sec["params"]], str(p)
    return None


def physical_bounds(names: Sequence[str]) -> dict[str, tuple[float, float]]:
    """``name -> (-limit, limit)`` of :data:`PLAUSIBLE` for the named parameters (the online
    and offline fits clip there; :func:`physical_warnings` reports an estimate at a bound)."""
    return {n: (-PLAUSIBLE[n], PLAUSIBLE[n]) for n in names if n in PLAUSIBLE}


def physical_warnings(estimate: Mapping[str, float], std: Mapping[str, float] | None = None,
                      names: Sequence[str] | None = None) -> list[str]:
    """One line per estimate outside :data:`PLAUSIBLE`, or whose 1-sigma exceeds its value's
    plausible range (the data did not pin it)."""
    out = []
    for n in names or estimate:
        lim = PLAUSIBLE.get(n)
        if lim is None or n not in estimate:
            continue
        v = float(estimate[n])
        if abs(v) >= 0.999 * lim:
            out.append(f"{n} = {v:.4g} is at or outside the physical range +-{lim:g}: the fit "
                       "absorbed something the model lacks (wrong vehicle/radius/track width "
                       "or reference faults?); do not use it")
        elif std is not None and float(std.get(n, 0.0)) > lim:
            out.append(f"{n} = {v:.4g} +- {float(std[n]):.2g}: not determined by these data")
    return out
