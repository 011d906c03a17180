"""Apply named vehicle parameters to a compiled model (design.md §4; IPEM, thesis §3.3.1).

A :class:`~wmr_model.vehicles.model.VehicleModel` is frozen; :func:`with_parameters` returns a new
one (``dataclasses.replace`` with new arrays) in which the named dimensions take the given values.
Names and their schema rows (:mod:`wmr_model.parameters`):

==============================  =====  =========================================================
name                            unit   effect on the model
==============================  =====  =========================================================
``wheel.<wheel>.radius``        m      ``wheel_radius`` of that wheel (wheel frame name)
``vehicle.track_scale``         1      y component of every non-body frame origin in ``T0``
                                       multiplied (relative to the *given* model)
``sensor.<sensor>.x`` / y / z   m      translation of that sensor frame in its parent frame
``vehicle.cg.x`` / y / z        m      whole-vehicle centre of gravity in body coordinates at
                                       the neutral joint state; set by moving the body frame's
                                       centre of mass by ``(M / m_body) * change``
==============================  =====  =========================================================

Other calibratable names (``slip.p*``, ``noise.U.*``, ``time_offset.*``, ``diff_drive.alpha``,
``steer.<joint>.gain/offset`` - the steering-potentiometer map the calibration predictor applies
to logged pot readings) are not model arrays; :func:`split_parameters` separates them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from wmr_model.errors import ParameterError
from wmr_model.parameters import check_value
from wmr_model.vehicles.model import VehicleModel

__all__ = [
    "MODEL_PREFIXES",
    "is_model_parameter",
    "model_parameter_names",
    "get_parameter",
    "with_parameters",
    "split_parameters",
]

#: Leading segments of the names :func:`with_parameters` applies.
MODEL_PREFIXES = ("wheel.", "vehicle.track_scale", "vehicle.cg.", "sensor.")


def is_model_parameter(name: str) -> bool:
    """True when ``name`` changes the compiled model (wheel radius, track scale, sensor pose)."""
    return name.startswith(MODEL_PREFIXES)


def split_parameters(values: Mapping[str, float]) -> tuple[dict[str, float], dict[str, float]]:
    """``(model_values, other_values)`` of a mapping of named parameters."""
    model = {k: float(v) for k, v in values.items() if is_model_parameter(k)}
    other = {k: float(v) for k, v in values.items() if not is_model_parameter(k)}
    return model, other


def model_parameter_names(model: VehicleModel) -> list[str]:
    """All model parameter names that apply to ``model``, in a stable order."""
    names = [f"wheel.{w}.radius" for w in model.wheel_names]
    names.append("vehicle.track_scale")
    if model.total_mass > 0:
        names += [f"vehicle.cg.{c}" for c in "xyz"]
    for s in model.sensor_frame:
        names += [f"sensor.{s}.{c}" for c in "xyz"]
    return names


def _wheel(model: VehicleModel, name: str) -> int:
    w = name.split(".")[1]
    try:
        return model.wheel_names.index(w)
    except ValueError:
        raise ParameterError(f"{name}: {model.name} has no wheel {w!r}; wheels are "
                             f"{list(model.wheel_names)}") from None


def _sensor(model: VehicleModel, name: str) -> tuple[str, int]:
    s = name.split(".")[1]
    if s not in model.sensor_frame:
        raise ParameterError(f"{name}: {model.name} has no sensor {s!r}; sensors are "
                             f"{sorted(model.sensor_frame)}")
    return s, "xyz".index(name.split(".")[2])


def _cg(model: VehicleModel) -> np.ndarray:
    """Whole-vehicle centre of gravity (3,) in body coordinates at the neutral state."""
    from wmr_model.vehicles.inertia import composite_inertia, inertia_mass_com

    if not model.total_mass > 0:
        raise ParameterError(f"vehicle.cg: {model.name} has no mass; the cg is undefined")
    return np.asarray(inertia_mass_com(composite_inertia(model, model.neutral_state()))[1],
                      dtype=float)


def get_parameter(model: VehicleModel, name: str) -> float:
    """Current value of model parameter ``name`` (``vehicle.track_scale`` is always 1)."""
    parts = name.split(".")
    if len(parts) == 3 and parts[0] == "wheel" and parts[2] == "radius":
        return float(model.wheel_radius[_wheel(model, name)])
    if name == "vehicle.track_scale":
        return 1.0
    if len(parts) == 3 and parts[0] == "sensor" and parts[2] in ("x", "y", "z"):
        s, c = _sensor(model, name)
        return float(model.sensor_frame[s][1][c, 3])
    if len(parts) == 3 and parts[:2] == ["vehicle", "cg"] and parts[2] in ("x", "y", "z"):
        return float(_cg(model)["xyz".index(parts[2])])
    raise ParameterError(f"{name}: not a model parameter; expected wheel.<wheel>.radius, "
                         "vehicle.track_scale, vehicle.cg.x/y/z or sensor.<sensor>.x/y/z")


def with_parameters(model: VehicleModel, values: Mapping[str, float]) -> VehicleModel:
    """New model with the named dimensions set (see the module table).

    Values are validated against the schema (bounds, finiteness); unknown wheels or sensors
    raise :class:`~wmr_model.errors.ParameterError` naming the known ones. An empty mapping
    returns ``model`` itself.
    """
    if not values:
        return model
    radius = np.array(model.wheel_radius)
    T0 = np.array(model.T0)
    sensors = {k: (i, np.array(T)) for k, (i, T) in model.sensor_frame.items()}
    com = np.array(model.com)
    cg_target: dict[int, float] = {}
    touched = set()
    for name, value in values.items():
        parts = name.split(".")
        if len(parts) == 3 and parts[0] == "wheel" and parts[2] == "radius":
            radius[_wheel(model, name)] = check_value(name, value)
            touched.add("wheel_radius")
        elif name == "vehicle.track_scale":
            T0[1:, 1, 3] *= check_value(name, value)
            touched.add("T0")
        elif len(parts) == 3 and parts[0] == "sensor" and parts[2] in ("x", "y", "z"):
            s, c = _sensor(model, name)
            sensors[s][1][c, 3] = check_value(name, value)
            touched.add("sensor_frame")
        elif len(parts) == 3 and parts[:2] == ["vehicle", "cg"] and parts[2] in ("x", "y", "z"):
            cg_target["xyz".index(parts[2])] = check_value(name, value)
            touched.add("com")
        else:
            raise ParameterError(f"{name}: not a model parameter; expected "
                                 "wheel.<wheel>.radius, vehicle.track_scale, vehicle.cg.x/y/z "
                                 "or sensor.<sensor>.x/y/z")
    if cg_target:
        m_body = float(model.mass[0])
        if not m_body > 0:
            raise ParameterError(f"vehicle.cg: the body frame of {model.name} has no mass to "
                                 "move")
        cg = _cg(model)
        for c, v in cg_target.items():  # body frame (frame 0) coordinates = body coordinates
            com[0, c] += (v - cg[c]) * model.total_mass / m_body

    def ro(a: np.ndarray) -> np.ndarray:
        a = np.ascontiguousarray(a)
        a.setflags(write=False)
        return a

    changes: dict[str, Any] = {}
    if "wheel_radius" in touched:
        changes["wheel_radius"] = ro(radius)
    if "T0" in touched:
        changes["T0"] = ro(T0)
    if "com" in touched:
        changes["com"] = ro(com)
    if "sensor_frame" in touched:
        changes["sensor_frame"] = {k: (i, ro(T)) for k, (i, T) in sensors.items()}
    return dataclasses.replace(model, **changes)
