"""Steady-state planar skid steering with shear-displacement-dependent track friction.

A ground-truth model for the track-slip calibration (issue 9): two rigid tracks of ground
contact length ``L`` at gauge ``B`` (centre lines at ``y = +-B/2`` of a body frame whose origin
is the centre of gravity, x forward) on firm level ground. Track ``i`` has belt speed ``V_i``
(positive drives the vehicle forward); the body moves with the planar twist
``(v_lon, v_lat, yaw_rate)``. Theory after Wong & Chiang (2001), "A general theory for skid
steering of tracked vehicles on firm ground", Proc. IMechE Part D 215, and Wong, *Theory of
Ground Vehicles* (4th ed., 2008), ch. 7.

**Sliding velocity** of the belt element at ``x`` of track ``i`` relative to the ground
(Wong & Chiang 2001, the track's slip velocity components):

.. math:: u_x = v_{lon} - \\omega y_i - V_i, \\qquad u_y = v_{lat} + \\omega x

**Shear displacement.** An element enters the contact at the leading end
``x_e = sign(V_i) L/2`` and has been in contact for ``t = (L/2 - sign(V_i) x)/|V_i|``; its
displacement relative to the ground is the integral of ``u`` along its path
``x(t') = x_e - V_i t'``:

.. math:: j_x = u_x t, \\qquad j_y = v_{lat} t + \\omega (x_e t - V_i t^2 / 2), \\qquad
          j = \\sqrt{j_x^2 + j_y^2}

**Shear stress** (Janosi & Hanamoto 1961; Wong ch. 2), opposite to the sliding velocity; an
optional anisotropy scales its components (our simple form: ``mu_lat`` across the track,
``mu_lon`` along it):

.. math:: \\tau = p\\,(1 - e^{-j/K})\\,\\big(-\\mu_{lon} \\hat u_x, -\\mu_{lat} \\hat u_y\\big)

``K`` [m] is the shear deformation modulus; ``K = 0`` is Coulomb friction (full friction at any
sliding). The pressure is uniform along each track, ``p_i = N_i / L`` per unit length, with
``N_{l,r} = m g / 2 \\mp m a_y h / B`` when a cg height ``h`` is given (lateral load transfer,
``a_y = \\omega v_{lon}``).

**Balance** (steady state, cg at the geometric centre): the resultant ground force equals the
body's acceleration ``m (-\\omega v_{lat}, \\omega v_{lon})`` when ``centripetal`` (else zero)
and the yaw moment about the cg vanishes:

.. math:: \\sum_i \\int (\\tau_x, \\tau_y)\\,dx = m\\,a, \\qquad
          \\sum_i \\int (x \\tau_y - y_i \\tau_x)\\,dx = 0

Three equations for ``(v_lon, v_lat, yaw_rate)`` given ``(V_left, V_right)``, solved by
:func:`steady_state_motion`; the integrals use the midpoint rule on ``n_points`` cells.

**Coulomb limit** (``K = 0``, isotropic, no centripetal term): ``v_lat = 0``,
``v_lon = (V_l + V_r)/2`` and each track's instantaneous centre lies a distance ``a`` outboard
of its centre line, ``a`` the root of
``(L/2) sqrt(a^2 + L^2/4) - a^2 asinh(L/(2a)) = B a asinh(L/(2a))``, so the yaw efficiency
``chi = omega_cmd / omega = 1 + 2a/B`` (``omega_cmd = (V_r - V_l)/B``) does not depend on the
turn radius (L = 0.5 m, B = 0.4 m: chi = 1.346). With finite ``K`` the friction an element
develops grows with the distance it has slid, which depends on the belt speed, so ``chi``
changes with the turn radius: nearly the Coulomb value when spinning in place (belts long in
contact relative to their sliding), another value on wide arcs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import root

from wmr_model.errors import ParameterError
from wmr_model.spatial import STANDARD_GRAVITY

__all__ = [
    "SkidSteerVehicle",
    "SkidSteerMotion",
    "track_forces",
    "balance_residual",
    "steady_state_motion",
    "yaw_efficiency",
]

#: Relative tolerance of the balance (forces in units of mu m g, moments of mu m g L).
_BALANCE_TOL = 1e-10


@dataclass(frozen=True)
class SkidSteerVehicle:
    """Two-track vehicle and ground for the steady-state skid-steer model.

    Attributes:
        length: ground contact length L of each track [m] (> 0).
        gauge: distance B between the track centre lines [m] (> 0).
        mass: vehicle mass m [kg] (> 0); only matters with ``centripetal``.
        mu_lon, mu_lat: friction coefficients along and across the track [-] (> 0).
        shear_k: Janosi-Hanamoto shear deformation modulus K [m] (>= 0; 0 = Coulomb).
        cg_height: cg height h above the ground [m] (>= 0) for lateral load transfer.
        centripetal: include the body's acceleration in the force balance.
        gravity: g [m/s^2].
        n_points: midpoint-rule cells per track.
    """

    length: float = 0.5
    gauge: float = 0.4
    mass: float = 22.0
    mu_lon: float = 0.8
    mu_lat: float = 0.8
    shear_k: float = 0.01
    cg_height: float = 0.0
    centripetal: bool = False
    gravity: float = STANDARD_GRAVITY
    n_points: int = 2000

    def __post_init__(self) -> None:
        for name in ("length", "gauge", "mass", "mu_lon", "mu_lat", "gravity"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v > 0.0):
                raise ParameterError(f"SkidSteerVehicle.{name}: must be finite and > 0, got {v}")
        for name in ("shear_k", "cg_height"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v >= 0.0):
                raise ParameterError(f"SkidSteerVehicle.{name}: must be finite and >= 0, "
                                     f"got {v}")
        if self.n_points < 10:
            raise ParameterError(f"SkidSteerVehicle.n_points: must be >= 10, got "
                                 f"{self.n_points}")


@dataclass(frozen=True)
class SkidSteerMotion:
    """Steady body motion for one pair of belt speeds.

    Attributes:
        v_lon, v_lat: body velocity at the cg [m/s] (x forward, y left).
        yaw_rate: omega [rad/s] (counter-clockwise positive).
        residual: (3,) force/moment balance residual in units of (mu_lon m g, mu_lon m g,
            mu_lon m g L).
        icr_y: (2,) lateral positions [m] of the left and right tracks' instantaneous centres
            of rotation (``(v_lon - V_i)/omega``; NaN when not turning).
        icr_x: longitudinal position [m] of the instantaneous centres (``-v_lat/omega``).
    """

    v_lon: float
    v_lat: float
    yaw_rate: float
    residual: np.ndarray
    icr_y: np.ndarray
    icr_x: float


def _normal_loads(veh: SkidSteerVehicle, v_lon: float, yaw_rate: float) -> tuple[float, float]:
    """(N_left, N_right) [N]: half the weight each, minus/plus the lateral load transfer
    ``m a_y h / B`` (``a_y = omega v_lon``, inertial force outward)."""
    w = 0.5 * veh.mass * veh.gravity
    dn = veh.mass * yaw_rate * v_lon * veh.cg_height / veh.gauge
    return w - dn, w + dn


def track_forces(veh: SkidSteerVehicle, v_lon: float, v_lat: float, yaw_rate: float,
                 V_left: float, V_right: float) -> np.ndarray:
    """Resultant ground force on the body, ``[F_x, F_y, M_z]`` (3,) [N, N, N m] about the cg.

    Integrates the Janosi-Hanamoto shear stress along both tracks (module docstring) for the
    body twist ``(v_lon, v_lat, yaw_rate)`` and belt speeds ``V_left``, ``V_right`` [m/s].
    """
    L = veh.length
    n = veh.n_points
    x = (np.arange(n) + 0.5) * (L / n) - 0.5 * L
    dx = L / n
    out = np.zeros(3)
    loads = _normal_loads(veh, v_lon, yaw_rate)
    for y, V, N in ((0.5 * veh.gauge, V_left, loads[0]), (-0.5 * veh.gauge, V_right, loads[1])):
        ux = np.full(n, v_lon - yaw_rate * y - V)
        uy = v_lat + yaw_rate * x
        speed = np.hypot(ux, uy)
        if veh.shear_k == 0.0 or V == 0.0:
            mobilized = (speed > 0.0).astype(float)
        else:
            s = math.copysign(1.0, V)
            t = (0.5 * L - s * x) / abs(V)  # time in contact since the leading end
            jx = ux * t
            jy = v_lat * t + yaw_rate * (s * 0.5 * L * t - 0.5 * V * t * t)
            mobilized = -np.expm1(-np.hypot(jx, jy) / veh.shear_k)
        inv = np.divide(1.0, speed, out=np.zeros(n), where=speed > 0.0)
        p = N / L
        tx = -p * veh.mu_lon * mobilized * ux * inv
        ty = -p * veh.mu_lat * mobilized * uy * inv
        out[0] += tx.sum() * dx
        out[1] += ty.sum() * dx
        out[2] += (x * ty - y * tx).sum() * dx
    return out


def balance_residual(veh: SkidSteerVehicle, v_lon: float, v_lat: float, yaw_rate: float,
                     V_left: float, V_right: float) -> np.ndarray:
    """Force/moment balance residual (3,): ground force minus ``m a`` (``centripetal``) and the
    yaw moment, scaled by ``mu_lon m g`` (forces) and ``mu_lon m g L`` (moment)."""
    F = track_forces(veh, v_lon, v_lat, yaw_rate, V_left, V_right)
    if veh.centripetal:
        F[0] -= veh.mass * (-yaw_rate * v_lat)
        F[1] -= veh.mass * (yaw_rate * v_lon)
    scale = veh.mu_lon * veh.mass * veh.gravity
    return F / np.array([scale, scale, scale * veh.length])


def steady_state_motion(veh: SkidSteerVehicle, V_left: float, V_right: float,
                        guess: tuple[float, float, float] | None = None) -> SkidSteerMotion:
    """Solve the balance (module docstring) for the body twist given belt speeds [m/s].

    ``guess``: starting ``(v_lon, v_lat, yaw_rate)``; default the Coulomb-like
    ``((V_l + V_r)/2, 0, (V_r - V_l)/(1.35 B))``. Raises ParameterError for non-finite speeds
    and RuntimeError when the solver does not reach the balance.
    """
    if not (math.isfinite(V_left) and math.isfinite(V_right)):
        raise ParameterError(f"belt speeds must be finite, got ({V_left}, {V_right})")
    vm = 0.5 * (V_left + V_right)
    w0 = (V_right - V_left) / (1.35 * veh.gauge)
    x0 = np.array(guess if guess is not None else (vm, 0.0, w0), dtype=float)
    scale = max(abs(V_left), abs(V_right), 1e-9)

    def f(z: np.ndarray) -> np.ndarray:
        return balance_residual(veh, z[0] * scale, z[1] * scale, z[2] * scale / veh.gauge,
                                V_left, V_right)

    z0 = x0 / np.array([scale, scale, scale / veh.gauge])
    r0 = f(z0)
    if np.max(np.abs(r0)) <= _BALANCE_TOL:
        z = z0
    else:
        sol = root(f, z0, method="hybr", options={"xtol": 1e-13})
        z = sol.x
        if np.max(np.abs(f(z))) > 1e-7:
            sol = root(f, z, method="lm", options={"xtol": 1e-14, "ftol": 1e-14})
            z = sol.x
    res = f(z)
    if np.max(np.abs(res)) > 1e-6:
        raise RuntimeError(f"skid-steer balance not reached for belt speeds ({V_left}, "
                           f"{V_right}): residual {res}")
    v_lon, v_lat, w = z[0] * scale, z[1] * scale, z[2] * scale / veh.gauge
    if w != 0.0:
        icr_y = np.array([(v_lon - V_left) / w, (v_lon - V_right) / w])
        icr_x = -v_lat / w
    else:
        icr_y = np.full(2, np.nan)
        icr_x = math.nan
    return SkidSteerMotion(float(v_lon), float(v_lat), float(w), res, icr_y, float(icr_x))


def yaw_efficiency(veh: SkidSteerVehicle, radius: float, speed: float = 0.2) -> float:
    """Yaw efficiency ``chi = omega_cmd / omega`` [-] for a commanded turn radius [m].

    The commanded (no-slip) motion turns left about a centre ``radius`` to the left of the cg
    at the faster belt's speed ``speed`` [m/s] (radius 0: spin in place with belts at
    ``-+speed``); ``omega_cmd = (V_r - V_l)/B``.
    """
    if not (math.isfinite(radius) and radius >= 0.0):
        raise ParameterError(f"radius: must be finite and >= 0 m, got {radius}")
    b = 0.5 * veh.gauge
    w_cmd = speed / (radius + b)
    V_l, V_r = w_cmd * (radius - b), w_cmd * (radius + b)
    m = steady_state_motion(veh, V_l, V_r)
    return w_cmd / m.yaw_rate
