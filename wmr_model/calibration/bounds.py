"""Physical bounds of calibrated parameters, and warnings for estimates outside them.

:func:`physical_warnings` names estimates outside the physically plausible range of their
family (:data:`PLAUSIBLE`): a slip coefficient beyond it means the fit absorbed something the
model does not have (a wrong radius or track width, reference faults) - never silently. The
online and offline fits clip at :func:`physical_bounds`. (Which parameters a vehicle calibrates
by default comes with its node configuration: :func:`wmr_model.io.vehicles.vehicle_parameter_set`.)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

__all__ = ["physical_warnings", "physical_bounds", "PLAUSIBLE"]

#: Plausible magnitude of each slip coefficient (|value| above it is reported): longitudinal and
#: lateral slip ratios stay well below 1 on any traversable ground, yaw terms below 2.
PLAUSIBLE = {"slip.p1": 1.0, "slip.p2": 1.0, "slip.p3": 1.0, "slip.p4": 2.0, "slip.p5": 2.0,
             "slip.p6": 1.0, "slip.p7": 2.0, "slip.p8": 2.0, "time_offset.pose": 1.0}


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
