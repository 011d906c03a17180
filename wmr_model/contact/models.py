"""Per-wheel contact model selection and the compiled dispatcher (Seegmiller 2014, eq. 2.71).

Every model is a kernel ``f(params, vc (3,), Rw, dz) -> fc (3,)`` that also writes its Jacobian
``J`` (3, 5) with respect to ``[vx, vy, vz, Rw, dz]``; :func:`contact_force` dispatches on an
integer kind so that compiled simulation loops can mix models per wheel.

Selection comes from the vehicle sidecar's ``options`` (or keyword overrides)::

    options:
      contact_model: pacejka            # piecewise_linear | coulomb_cone | pacejka | ishigami
                                        # | ishigami_direct | roams | bekker
      contact_params: {mu: 0.6}         # overrides of the named parameters of contact_model
      # contact_params: {pacejka: {mu: 0.6}, bekker: {n: 1.1}}   # or per model: each applies
      #                                 #   whenever that model is selected (e.g. by a keyword)
      wheel_contact:                    # optional per-wheel overrides
        FL: {contact_model: roams, contact_params: {c: 0.0}}

A flat ``contact_params`` belongs to the sidecar's ``contact_model``: when a keyword selects
another model (a soft-soil run of an on-road vehicle), the flat overrides are not applied to it
(:func:`params_for_model`).

Defaults that depend on the vehicle (normal stiffness, slip gains) are scaled by the static
wheel load ``W = m g / nw`` so that every shipped vehicle sinks ~1 cm and saturates friction at
~1 cm/s slip; they are named below.

Tracked vehicles: the contacts are the wheels, then the track patches (``model.nc`` in all).
A track's parameters describe the **whole track** as one contact (defaults from the load
``W = m g / n_s`` with ``n_s`` = wheels + tracks carried by the body frame, radius the belt's
drive radius); the dynamics give each patch a share of that track's force
(:func:`wmr_model.dynamics.track_contact.track_shares`), so the support does not depend on the
number of patches. Per-track overrides::

    options:
      track_contact:
        left: {contact_model: pacejka, contact_params: {mu: 0.7}}
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from wmr_model._jit import njit
from wmr_model.contact import bekker as _bek
from wmr_model.contact import ishigami as _ish
from wmr_model.contact import pacejka as _pac
from wmr_model.contact import piecewise_linear as _pl
from wmr_model.contact import roams as _roams
from wmr_model.errors import ParameterError
from wmr_model.spatial import STANDARD_GRAVITY
from wmr_model.terrain import soil as _soil
from wmr_model.vehicles.model import VehicleModel

__all__ = ["PIECEWISE_LINEAR", "PACEJKA", "ISHIGAMI", "ISHIGAMI_DIRECT", "ROAMS", "BEKKER",
           "MODEL_KINDS", "ContactSetup", "contact_force", "default_params", "contact_setup"]

PIECEWISE_LINEAR = 0
PACEJKA = 1
ISHIGAMI = 2
ISHIGAMI_DIRECT = 3
ROAMS = 4
BEKKER = 5
MODEL_KINDS = {"piecewise_linear": PIECEWISE_LINEAR, "coulomb_cone": PIECEWISE_LINEAR,
               "pacejka": PACEJKA, "ishigami": ISHIGAMI, "ishigami_direct": ISHIGAMI_DIRECT,
               "roams": ROAMS, "bekker": BEKKER}
_NAMES = {PIECEWISE_LINEAR: _pl.PARAM_NAMES, PACEJKA: _pac.PARAM_NAMES,
          ISHIGAMI: _ish.PARAM_NAMES, ISHIGAMI_DIRECT: _ish.PARAM_NAMES,
          ROAMS: _roams.PARAM_NAMES, BEKKER: _bek.PARAM_NAMES}
N_PARAMS = max(len(v) for v in _NAMES.values())

# Static sinkage [m] and slip speed at which friction saturates [m/s] used to scale defaults.
STATIC_SINKAGE = 0.01
SATURATION_SLIP = 0.01
# Damping ratio of the normal spring-damper per wheel (critical damping of the wheel's share of
# the vehicle mass): enough to stop contact chatter after touchdown.
NORMAL_DAMPING_RATIO = 1.0
DEFAULT_MU = 0.8


# Relative central-difference step for the Jacobians of models without analytic derivatives:
# ~cube root of machine epsilon balances truncation and rounding error.
FD_REL_STEP = 1e-6


# Inlined into the force balance with it (wmr_model.dynamics.joint_acceleration): the dispatch
# in line; each model stays one call (inlining the models as well gained 1-2 % per step for
# +60 s of compilation).
@njit(refcount=False, inline="always")
def contact_force(kind, params, table, axes, vc, Rw, dz, fc, J):
    """Contact force ``fc`` (3,) on the wheel in contact coordinates and ``J`` (3, 5), (2.71).

    Piecewise-linear, ROAMS, Pacejka and the Ishigami lookup table give analytic Jacobians;
    Ishigami direct and Bekker central differences with respect to ``[vx, vy, vz, Rw, dz]``
    (relative step :data:`FD_REL_STEP`).
    """
    if kind == PIECEWISE_LINEAR:
        _pl.piecewise_linear(params, vc, Rw, dz, fc, J)
    elif kind == ROAMS:
        _roams.roams(params, vc, Rw, dz, fc, J)
    elif kind == PACEJKA:
        _pac.pacejka(params, vc, Rw, dz, fc, J)
    elif kind == ISHIGAMI:
        _ish.lookup(params, table, axes, vc, Rw, dz, fc, J)
    elif kind == BEKKER:
        _bek.bekker_force_jacobian(params, vc[0], vc[1], vc[2], Rw, dz, FD_REL_STEP, fc, J)
    else:
        _difference_contact_force(params, vc, Rw, dz, fc, J)


@njit
def _difference_contact_force(params, vc, Rw, dz, fc, J):
    """:func:`contact_force` of Ishigami direct: central differences with respect to
    ``[vx, vy, vz, Rw, dz]``."""
    y = np.array([vc[0], vc[1], vc[2], Rw, dz])
    _ish.ishigami_force(params, y[0], y[1], y[2], y[3], y[4], fc)
    fp = np.empty(3)
    fm = np.empty(3)
    for k in range(5):
        h = FD_REL_STEP * (1.0 + abs(y[k]))
        a = y.copy()
        b = y.copy()
        a[k] += h
        b[k] -= h
        _ish.ishigami_force(params, a[0], a[1], a[2], a[3], a[4], fp)
        _ish.ishigami_force(params, b[0], b[1], b[2], b[3], b[4], fm)
        for r in range(3):
            J[r, k] = (fp[r] - fm[r]) / (2.0 * h)


def default_params(name: str, wheel_load: float, wheel_mass: float, radius: float,
                   width: float) -> dict[str, float]:
    """Named default parameters of contact model ``name`` for one wheel.

    ``wheel_load`` [N] static normal load, ``wheel_mass`` [kg] the vehicle mass share of the
    wheel, ``radius``/``width`` [m].
    """
    W = wheel_load
    Kp = W / STATIC_SINKAGE
    Kd = 2.0 * NORMAL_DAMPING_RATIO * math.sqrt(Kp * wheel_mass)
    if name in ("piecewise_linear", "coulomb_cone"):
        C = DEFAULT_MU * W / SATURATION_SLIP
        return {"Kp": Kp, "Kd": Kd, "Cx": C, "Cy": C, "Crr": 0.0, "mu_x": DEFAULT_MU,
                "mu_y": DEFAULT_MU, "cone": 1.0 if name == "coulomb_cone" else 0.0}
    if name == "pacejka":
        return {"Kp": Kp, "Kd": Kd, "mu": 1.0, **_pac.TABLE_C1, "Vmin": 0.1, "Crr": 0.0}
    if name in ("ishigami", "ishigami_direct"):
        return {**_ish.TABLE_C2, "R": radius, "b": width if width > 0 else 0.4 * radius,
                "Kd": Kd}
    if name == "roams":
        n = 1.5
        kN = W / STATIC_SINKAGE**n
        return {"kN": kN, "alphaN": 0.5 * kN, "n": n,
                "dT": DEFAULT_MU * W / SATURATION_SLIP, "c": 0.0,
                "phi": math.atan(DEFAULT_MU), "b": width if width > 0 else 0.4 * radius,
                "R": radius, "s": 1.0}
    if name == "bekker":
        return {**_soil.bekker_params("dry_sand"), "c1": _bek.WONG_REECE_C1,
                "c2": _bek.WONG_REECE_C2, "R": radius,
                "b": width if width > 0 else 0.4 * radius, "zc": 0.0, "j0": 0.0,
                "Vmin": _ish.TABLE_C2["Vmin"], "Kd": Kd}
    raise ParameterError(f"contact_model must be one of {sorted(MODEL_KINDS)}, got {name!r}")


@dataclass(frozen=True)
class ContactSetup:
    """Compiled per-contact models: the wheels, then the track patches (nc = nw + ntp).

    Attributes:
        names: (nc,) model names; kinds: (nc,) int64 kinds; params: (nc, N_PARAMS) vectors;
        tables: (nc, ns, nb, nz, 3) Ishigami lookup tables (zeros for other models);
        axes: (nc, 6) table grid axes.
    """

    names: tuple[str, ...]
    kinds: np.ndarray
    params: np.ndarray
    tables: np.ndarray
    axes: np.ndarray


def _params_vector(name: str, defaults: dict[str, float], overrides: Mapping[str, Any],
                   where: str) -> np.ndarray:
    names = _NAMES[MODEL_KINDS[name]]
    vals = dict(defaults)
    for k, v in overrides.items():
        if k not in names:
            raise ParameterError(f"{where}: unknown parameter {k!r} of {name}; known {list(names)}")
        try:
            fv = float(v)
        except (TypeError, ValueError):
            raise ParameterError(f"{where}: {k} must be a number, got {v!r}") from None
        if not math.isfinite(fv):
            raise ParameterError(f"{where}: {k} must be finite, got {v!r}")
        vals[k] = fv
    out = np.zeros(N_PARAMS)
    out[:len(names)] = [vals[k] for k in names]
    return out


@functools.lru_cache(maxsize=16)
def _cached_table(params_bytes: bytes) -> tuple[np.ndarray, np.ndarray]:
    """Ishigami lookup table of a parameter vector (building it takes ~0.1 s; cached so that
    repeated simulations, e.g. a benchmark, time the simulation and not the table)."""
    table, axes = _ish.build_table(np.frombuffer(params_bytes, dtype=float))
    table.setflags(write=False)
    axes.setflags(write=False)
    return table, axes


def _track_supports(model: VehicleModel) -> int:
    """Number of supports sharing the static load: wheels plus the tracks carried by the body
    frame (all tracks if none is, e.g. a vehicle made only of flipper-like tracks)."""
    nt = len(model.track_names)
    if nt == 0:
        return model.nw
    on_body = {int(model.track_of[k]) for k in range(model.ntp) if model.track_frame[k] == 0}
    return model.nw + (len(on_body) or nt)


def _per_model(params: Mapping[str, Any]) -> bool:
    """True when ``params`` is keyed by contact model names (``{pacejka: {mu: 0.9}}``)."""
    return bool(params) and all(k in MODEL_KINDS and (v is None or isinstance(v, Mapping))
                                for k, v in params.items())


def params_for_model(params: Mapping[str, Any] | None, name: str, owner: str | None) -> dict:
    """The overrides of ``params`` that apply to contact model ``name``.

    ``params`` is flat (``{mu: 0.9}``: the parameters of model ``owner``, applied only when
    ``name == owner``; ``owner`` None: whatever model is used) or per model (``{pacejka:
    {mu: 0.9}, bekker: {...}}``: the entry of ``name``, if any).
    """
    params = params or {}
    if _per_model(params):
        return dict(params.get(name) or {})
    return dict(params) if owner is None or name == owner else {}


def contact_setup(model: VehicleModel, contact_model: str | None = None,
                  contact_params: Mapping[str, Any] | None = None,
                  gravity: float = STANDARD_GRAVITY) -> ContactSetup:
    """Per-contact models of ``model`` from ``model.options`` and keyword overrides.

    One entry per wheel, then one per track patch (a patch takes its track's parameters,
    ``options.track_contact.<track>`` overriding the vehicle-wide ones; see the module
    docstring for the whole-track defaults).
    """
    opts = model.options
    own = opts.get("contact_model", "piecewise_linear")
    base = contact_model or own
    # the sidecar's flat contact_params are its own model's; a keyword's apply to the model used
    base_over = params_for_model(opts.get("contact_params"), base, own)
    base_over.update(params_for_model(contact_params, base, None))
    per_wheel = opts.get("wheel_contact", {}) or {}
    per_track = opts.get("track_contact", {}) or {}
    ns = _track_supports(model)
    W = model.total_mass * gravity / max(ns, 1)
    mw = model.total_mass / max(ns, 1)
    names, kinds, params, tabs = [], [], [], []

    def add(name: str, over: dict[str, Any], radius: float, width: float, where: str) -> None:
        d = default_params(name, W, mw, radius, width)
        p = _params_vector(name, d, over, where)
        names.append(name)
        kinds.append(MODEL_KINDS[name])
        params.append(p)
        tabs.append(_cached_table(p.tobytes()) if MODEL_KINDS[name] == ISHIGAMI else None)

    def pick(opt: Mapping[str, Any], where: str) -> tuple[str, dict[str, Any]]:
        name = opt.get("contact_model", base)
        if name not in MODEL_KINDS:
            raise ParameterError(
                f"{where}: contact_model must be one of {sorted(MODEL_KINDS)}, got {name!r}")
        over = dict(base_over) if name == base else {}
        over.update(opt.get("contact_params", {}) or {})
        return name, over

    for k, wname in enumerate(model.wheel_names):
        where = f"{model.source}: options.wheel_contact.{wname}"
        name, over = pick(per_wheel.get(wname, {}) or {}, where)
        add(name, over, float(model.wheel_radius[k]), float(model.wheel_width[k]),
            where if wname in per_wheel else f"{model.source}: options.contact_params")
    unknown = sorted(set(per_track) - set(model.track_names))
    if unknown:
        raise ParameterError(f"{model.source}: options.track_contact names unknown tracks "
                             f"{unknown}; tracks are {list(model.track_names)}")
    M = model.track_path.shape[1]
    for k in range(model.ntp):
        tname = model.track_names[int(model.track_of[k])]
        where = f"{model.source}: options.track_contact.{tname}"
        name, over = pick(per_track.get(tname, {}) or {}, where)
        radius = float(np.linalg.norm(model.track_path[k, M // 2, 3:6]))  # drive radius
        add(name, over, radius, 0.0,
            where if tname in per_track else f"{model.source}: options.contact_params")
    nc = len(names)
    shape = next((t[0].shape for t in tabs if t is not None), (2, 2, 2, 3))
    tables = np.zeros((nc, *shape))
    axes = np.tile(np.array([0.0, 1.0, 0.0, 1.0, 0.0, 1.0]), (nc, 1))
    for k, t in enumerate(tabs):
        if t is not None:
            tables[k] = t[0]
            axes[k] = t[1]
    return ContactSetup(tuple(names), np.array(kinds, dtype=np.int64),
                        np.array(params).reshape(nc, N_PARAMS), tables, axes)
