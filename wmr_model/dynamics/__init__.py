"""Constrained 3D dynamics with force-balance optimization (Seegmiller 2014, §2.4)."""

from wmr_model.dynamics.api import (
    DynamicsData,
    bias_force,
    crba,
    create_data,
    gravity_of,
    rnea,
)

__all__ = [
    "DynamicsData",
    "bias_force",
    "create_data",
    "crba",
    "gravity_of",
    "rnea",
]
