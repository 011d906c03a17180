"""Constrained 3D dynamics with force-balance optimization (Seegmiller 2014, §2.4)."""

from wmr_model.dynamics.api import (
    Data,
    bias_force,
    crba,
    create_data,
    gravity_of,
    rnea,
)
from wmr_model.dynamics.model import DynamicsModel, DynamicsOptions, compile_dynamics

__all__ = [
    "Data",
    "DynamicsModel",
    "DynamicsOptions",
    "bias_force",
    "compile_dynamics",
    "create_data",
    "crba",
    "gravity_of",
    "rnea",
]
