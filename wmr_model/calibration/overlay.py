"""Export calibrated values as a vehicle sidecar overlay (YAML ``parameters:`` block).

The overlay is a sidecar fragment in the sidecar schema (``version: 1``,
:mod:`wmr_model.io.sidecar`): ``vehicle`` plus ``parameters`` mapping dotted names to values,
``std`` mapping the same names to their 1-sigma (finite ones only) and provenance in
``description`` (both ignored by the sidecar loader), so the file loads as-is with
:func:`wmr_model.io.sidecar.parse_parameters`. It is the one calibration file format: ``wmr
calibrate --overlay`` and the calibrator node's ``~/save`` write it, the nodes'
``calibration_file`` parameter reads it (:mod:`wmr_model.io.calibration_file`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import yaml

from wmr_model.parameters import check_value

__all__ = ["OVERLAY_VERSION", "overlay_dict", "overlay_yaml"]

#: Version of the overlay document (the sidecar schema version it follows).
OVERLAY_VERSION = 1


def overlay_dict(vehicle: str, values: Mapping[str, float],
                 std: Mapping[str, float] | None = None, note: str = "") -> dict:
    """Overlay document as a mapping; values are validated against the schema."""
    params = {n: check_value(n, v) for n, v in sorted(values.items())}
    lines = [note] if note else []
    for n in sorted(std or {}):
        s = float((std or {})[n])
        if math.isfinite(s):
            lines.append(f"{n}: 1-sigma {s:.3g}")
    doc: dict = {"version": OVERLAY_VERSION, "vehicle": vehicle}
    if lines:
        doc["description"] = "IPEM calibration; " + "; ".join(lines)
    doc["parameters"] = params
    sig = {n: float(v) for n, v in sorted((std or {}).items())
           if n in params and math.isfinite(float(v))}
    if sig:
        doc["std"] = sig
    return doc


def overlay_yaml(vehicle: str, values: Mapping[str, float],
                 std: Mapping[str, float] | None = None, note: str = "") -> str:
    """Overlay document as YAML text (see :func:`overlay_dict`)."""
    return yaml.safe_dump(overlay_dict(vehicle, values, std, note), sort_keys=False)
