"""Wheel-ground contact models f(v_c, R w, Δz) -> f_c (Seegmiller 2014, eq. 2.71, App. C)."""

from wmr_model.contact.models import (
    BEKKER,
    ISHIGAMI,
    ISHIGAMI_DIRECT,
    MODEL_KINDS,
    PACEJKA,
    PIECEWISE_LINEAR,
    ROAMS,
    ContactSetup,
    contact_force,
    contact_setup,
    default_params,
)

__all__ = [
    "BEKKER",
    "ISHIGAMI",
    "ISHIGAMI_DIRECT",
    "MODEL_KINDS",
    "PACEJKA",
    "PIECEWISE_LINEAR",
    "ROAMS",
    "ContactSetup",
    "contact_force",
    "contact_setup",
    "default_params",
]
