"""Calibration files: a vehicle overlay of named parameters with their 1-sigma.

One format, a sidecar fragment (:mod:`wmr_model.io.sidecar` schema)::

    version: 1
    vehicle: warthog
    description: IPEM calibration; ...        # provenance, free text
    parameters: {slip.p2: -0.041, wheel.front_left_wheel.radius: 0.3054}
    std: {slip.p2: 0.0069, wheel.front_left_wheel.radius: 0.0058}   # optional

:func:`save_calibration` writes it atomically (temporary file in the same directory, then a
rename) and :func:`load_calibration` reads it back, validating every value against the
parameter schema; the ``wmr calibrate --overlay`` output, the calibrator node's ``~/save`` and
the nodes' ``calibration_file`` parameter all go through this pair.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from wmr_model.errors import ParameterError
from wmr_model.io.files import write_text_atomically  # the one atomic writer (re-exported)
from wmr_model.parameters import check_value

__all__ = ["CALIBRATION_KEYS", "OVERLAY_VERSION", "CalibrationFile", "load_calibration",
           "overlay_dict", "overlay_yaml", "save_calibration", "write_text_atomically"]

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


#: Top-level keys of a calibration file.
CALIBRATION_KEYS = ("version", "vehicle", "description", "parameters", "std")


@dataclass(frozen=True)
class CalibrationFile:
    """A loaded calibration file.

    Attributes:
        path: where it was read from.
        vehicle: vehicle name it was calibrated for ("" when the file names none).
        values: name -> value (schema-validated).
        std: name -> 1-sigma, for the names that have one.
        description: provenance text.
    """

    path: Path
    vehicle: str
    values: dict[str, float]
    std: dict[str, float] = field(default_factory=dict)
    description: str = ""


def save_calibration(path: str | os.PathLike[str], vehicle: str, values: Mapping[str, float],
                     std: Mapping[str, float] | None = None, note: str = "") -> Path:
    """Write a calibration file (module docstring) atomically; returns the path written."""
    return write_text_atomically(path, overlay_yaml(vehicle, values, std, note))


def load_calibration(path: str | os.PathLike[str], vehicle: str | None = None
                     ) -> CalibrationFile:
    """Read a calibration file; ParameterError naming the file and the key on any fault.

    Args:
        path: the YAML file.
        vehicle: when given, the file's ``vehicle`` must be this name (a file calibrated for
            another vehicle is refused).
    """
    p = Path(path).expanduser()
    try:
        doc = yaml.safe_load(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ParameterError(f"{p}: cannot read the calibration file: {exc.strerror or exc}"
                             ) from None
    except yaml.YAMLError as exc:
        raise ParameterError(f"{p}: not valid YAML: {exc}") from None
    if not isinstance(doc, dict):
        raise ParameterError(f"{p}: expected a mapping with {list(CALIBRATION_KEYS)}, got "
                             f"{type(doc).__name__}")
    unknown = [k for k in doc if k not in CALIBRATION_KEYS]
    if unknown:
        raise ParameterError(f"{p}: unknown key(s) {unknown}; a calibration file has "
                             f"{list(CALIBRATION_KEYS)}")
    version = doc.get("version", OVERLAY_VERSION)
    if version != OVERLAY_VERSION:
        raise ParameterError(f"{p}: version: expected {OVERLAY_VERSION}, got {version!r}")
    name = str(doc.get("vehicle") or "")
    if vehicle is not None and name and name != vehicle:
        raise ParameterError(f"{p}: vehicle: calibrated for {name!r}, not for {vehicle!r}")
    params = doc.get("parameters")
    if not isinstance(params, dict) or not params:
        raise ParameterError(f"{p}: parameters: expected a non-empty mapping of dotted names "
                             "to numbers")
    values = {}
    for k, v in params.items():
        try:
            values[str(k)] = check_value(str(k), v)
        except ParameterError as exc:
            raise ParameterError(f"{p}: parameters.{exc}") from None
    std_doc = doc.get("std") or {}
    if not isinstance(std_doc, dict):
        raise ParameterError(f"{p}: std: expected a mapping of parameter names to 1-sigma")
    std = {}
    for k, v in std_doc.items():
        if k not in values:
            raise ParameterError(f"{p}: std.{k}: not one of the file's parameters")
        try:
            s = float(v)
        except (TypeError, ValueError):
            s = math.nan
        if not (math.isfinite(s) and s >= 0):
            raise ParameterError(f"{p}: std.{k}: must be a finite number >= 0, got {v!r}")
        std[str(k)] = s
    return CalibrationFile(p, name, values, std, str(doc.get("description") or ""))
