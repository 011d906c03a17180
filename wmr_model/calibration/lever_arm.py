"""Pose-sensor lever arm (GPS antenna, prism, tracker) as named parameters ``sensor.<name>.x/y/z``.

The offsets of (3.57)-(3.58) need a sensor frame in the model. A URDF often has none for the
antenna (or has it in the wrong place); :func:`with_lever_arm` sets it without editing the
description: an existing sensor frame gets the new translation (its parent and rotation kept,
as :func:`wmr_model.vehicles.parameters.with_parameters` does), a missing one is added rigidly
on the body frame with the body's orientation. The result is calibratable like a URDF sensor:
``sensor.<name>.x/y/z`` are then model parameters of the returned model.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from wmr_model.parameters import check_value
from wmr_model.vehicles.model import VehicleModel
from wmr_model.vehicles.parameters import with_parameters

__all__ = ["lever_arm", "with_lever_arm"]


def lever_arm(model: VehicleModel, sensor: str) -> np.ndarray | None:
    """Translation (3,) [m] of ``sensor`` in its parent frame, or None when the model has no
    such sensor."""
    if sensor not in model.sensor_frame:
        return None
    return np.array(model.sensor_frame[sensor][1][:3, 3], dtype=float)


def with_lever_arm(model: VehicleModel, sensor: str, xyz: Sequence[float]) -> VehicleModel:
    """New model whose sensor frame ``sensor`` is at ``xyz`` (3,) [m] (module docstring)."""
    names = [f"sensor.{sensor}.{c}" for c in "xyz"]
    vals = [check_value(n, v) for n, v in zip(names, xyz, strict=True)]
    if sensor in model.sensor_frame:
        return with_parameters(model, dict(zip(names, vals)))
    T = np.eye(4)
    T[:3, 3] = vals
    T.setflags(write=False)
    frames = dict(model.sensor_frame)
    frames[sensor] = (0, T)  # frame 0 is the body
    return dataclasses.replace(model, sensor_frame=frames)
