"""Pacejka / Nicolas-Comstock empirical tire model (Seegmiller 2014, App. C, eqs. C.10-C.18).

Normal force as in the piecewise-linear model (C.3-C.4). Slip ratio and angle (C.10)-(C.12)

.. math:: s = -v_x / V_x, \\quad \\alpha = \\tan^{-1}(v_y / V_x), \\quad V_x = v_x + R\\omega,

the magic formulas (C.13)-(C.14) for the pure-slip normalized forces, and the Nicolas-Comstock
coupling (C.16)-(C.18).

Numerics (named choices, each with its reason):

* The coupling (C.18) is 0/0 on the axes s = 0 or alpha = 0; the thesis thresholds s and alpha
  away from zero. Writing :math:`f'_x = g_x(s)\\, s`, :math:`f'_y = g_y(\\alpha) \\tan\\alpha`
  with even, finite :math:`g_x, g_y`, (C.18) is exactly :math:`F = g_x g_y / \\sqrt{g_x^2 +
  g_y^2}` whenever s, alpha != 0, i.e. the value any threshold produces; we evaluate that
  smooth form everywhere (magnitudes of :math:`f'_x, f'_y`, so F >= 0 as the text intends).
* ``sgn(V_x) s = -v_x / |V_x|`` and ``sgn(V_x) tan(alpha) = v_y / |V_x|``, so (C.16)-(C.17)
  depend on ``|V_x|`` only; it is regularized to :math:`\\sqrt{V_x^2 + V_{min}^2}` so that the
  model is smooth through standstill (the singularity V_x = 0 noted under C.12). Below V_min the
  model behaves like a stiff viscous damper.
* Optional rolling resistance ``-Crr R w`` as in (C.5).

``params`` layout (:data:`PARAM_NAMES`): ``[Kp, Kd, mu, Bs, Cs, Ds, Es, Ks, Ba, Ca, Da, Ea, Ka,
Vmin m/s, Crr N s/m]``; Table C.1 values in :data:`TABLE_C1`. :func:`pacejka` also gives the
analytic Jacobian (the thesis derived it symbolically), by the chain rule through
:math:`\\sigma_x = v_x/|V_x|`, :math:`\\sigma_y = v_y/|V_x|` and
:math:`\\partial F/\\partial g_x = g_y^3/(g_x^2+g_y^2)^{3/2}` (and symmetrically for g_y).

Peak of the force-slip curve (Table C.1, straight driving). (C.13) peaks where
``C_s atan(u) = pi/2``, i.e. ``u = tan(pi/3) = sqrt(3)`` for C_s = 1.5, which for
``B_s K_s = 20/3``, ``E_s = 0.3`` gives ``|s| = 0.300`` (f'_x = D_s = 1). With the coupling
(C.16)-(C.18) in the limit alpha -> 0 (``f'_y ~ k_a tan(alpha)``, ``k_a = B_a C_a D_a K_a 2/pi =
10.19``) the normalized longitudinal force is ``f'_x(s) s k_a / sqrt(s^2 k_a^2 + f'_x(s)^2)``,
whose maximum, 0.961, lies at ``|s| = 0.381`` (the curve is flat within 1 % for 0.30-0.50). The
"critical value (approximately 0.2)" quoted with Fig. 2.15 of the thesis is the Brach and Brach
pneumatic-tire measurement, not a property of Table C.1: the dynamics' force-slip curve
(Fig. 2.17, :func:`wmr_model.experiments.dynamic.force_slip_curve`) therefore peaks near 0.3-0.4,
with the slip ratio of (C.10), ``s = -v_x/V_x`` (normalized by the wheel-centre speed; the same
curve over ``(R w - V)/(R w)`` peaks at 0.23 without and 0.28 with the coupling).
"""

from __future__ import annotations

import math

import numpy as np

from wmr_model._jit import njit
from wmr_model.contact.piecewise_linear import normal_force

__all__ = ["PARAM_NAMES", "TABLE_C1", "magic_formula", "pacejka_force", "pacejka"]

PARAM_NAMES = ("Kp", "Kd", "mu", "Bs", "Cs", "Ds", "Es", "Ks", "Ba", "Ca", "Da", "Ea", "Ka",
               "Vmin", "Crr")

#: Table C.1 coefficients of (C.13)-(C.14).
TABLE_C1 = {"Bs": 1.0 / 15.0, "Cs": 1.5, "Ds": 1.0, "Es": 0.3, "Ks": 100.0,
            "Ba": 8.0 / 75.0, "Ca": 1.5, "Da": 1.0, "Ea": 0.6, "Ka": 100.0}

# |x| below which the magic formula's ratio g(x) = f(x)/x uses its limit B K C D (relative error
# of the first-order limit is O(x^2) ~ 1e-16 at this size).
_SMALL_SLIP = 1e-8


@njit(refcount=False)
def magic_formula(B, C, D, E, K, x):
    """Pure-slip normalized force, (C.13)/(C.14): ``D sin(C atan(B(1-E)K x + E atan(B K x)))``."""
    return D * math.sin(C * math.atan(B * (1.0 - E) * K * x + E * math.atan(B * K * x)))


@njit(refcount=False)
def _magic_formula_d(B, C, D, E, K, x):
    """(C.13)/(C.14) and its derivative with respect to ``x``."""
    BK = B * K
    w = BK * x
    u = B * (1.0 - E) * K * x + E * math.atan(w)
    du = B * (1.0 - E) * K + E * BK / (1.0 + w * w)
    a = C * math.atan(u)
    return D * math.sin(a), D * math.cos(a) * C / (1.0 + u * u) * du


@njit(refcount=False)
def _ratio_d(B, C, D, E, K, x):
    """g(x) = |f(x) / x| of :func:`_ratio` and dg/dx for ``x >= 0``."""
    if x < _SMALL_SLIP:
        return abs(B * C * D * K), 0.0
    f, df = _magic_formula_d(B, C, D, E, K, x)
    sg = 1.0 if f >= 0.0 else -1.0
    return abs(f / x), sg * (df * x - f) / (x * x)


@njit(refcount=False)
def _ratio(B, C, D, E, K, x):
    """g(x) = |magic_formula(x) / x| (even; finite limit B C D K at x = 0)."""
    if abs(x) < _SMALL_SLIP:
        return abs(B * C * D * K)
    return abs(magic_formula(B, C, D, E, K, x) / x)


@njit
def pacejka_force(params, vx, vy, vz, Rw, dz, fc):
    """Contact force (3,) of the Pacejka/Nicolas-Comstock model, (C.3)-(C.4), (C.10)-(C.18)."""
    pacejka(params, np.array([vx, vy, vz]), Rw, dz, fc, np.empty((3, 5)))


@njit(refcount=False)
def pacejka(params, vc, Rw, dz, fc, J):
    """Contact force ``fc`` (3,) of :func:`pacejka_force` and its analytic Jacobian ``J`` (3, 5)
    with respect to ``[vx, vy, vz, Rw, dz]``, (C.3)-(C.4), (C.10)-(C.18)."""
    Kp, Kd, mu = params[0], params[1], params[2]
    vx, vy = vc[0], vc[1]
    for r in range(3):
        for k in range(5):
            J[r, k] = 0.0
    fz, dfz_dvz, dfz_ddz = normal_force(Kp, Kd, vc[2], dz)
    Vx = vx + Rw
    Vabs = math.sqrt(Vx * Vx + params[13] * params[13])
    s_abs = abs(vx) / Vabs  # |s|
    t_abs = abs(vy) / Vabs  # |tan(alpha)|
    gx, dgx = _ratio_d(params[3], params[4], params[5], params[6], params[7], s_abs)
    alpha = math.atan(t_abs)
    fa, dfa = _magic_formula_d(params[8], params[9], params[10], params[11], params[12],
                               2.0 * alpha / math.pi)
    ga = abs(fa)
    if t_abs > _SMALL_SLIP:
        gy = ga / t_abs
        dga = (1.0 if fa >= 0.0 else -1.0) * dfa * 2.0 / (math.pi * (1.0 + t_abs * t_abs))
        dgy = (dga * t_abs - ga) / (t_abs * t_abs)
    else:
        gy = abs(params[8] * params[9] * params[10] * params[12] * 2.0 / math.pi)
        dgy = 0.0
    Sq = math.sqrt(gx * gx + gy * gy)
    F = gx * gy / Sq
    Sq3 = Sq * Sq * Sq
    F_s = gy * gy * gy / Sq3 * dgx  # dF/d|s|
    F_t = gx * gx * gx / Sq3 * dgy  # dF/d|tan(alpha)|
    sx = vx / Vabs
    sy = vy / Vabs
    fc[0] = -mu * fz * F * vx / Vabs - params[14] * Rw  # as pacejka_force, bit for bit
    fc[1] = -mu * fz * F * vy / Vabs
    fc[2] = fz
    J[2, 2] = dfz_dvz
    J[2, 4] = dfz_ddz
    J[0, 3] = -params[14]
    if fz == 0.0:
        return
    # d(sigma)/d(vx, vy, Rw); d|sigma| = sgn(sigma) d(sigma)
    dV = Vx / (Vabs * Vabs * Vabs)
    dsx_dvx = 1.0 / Vabs - vx * dV
    dsx_dRw = -vx * dV
    dsy_dvx = -vy * dV
    dsy_dvy = 1.0 / Vabs
    dsy_dRw = -vy * dV
    gsx = F_s * (1.0 if sx >= 0.0 else -1.0)
    gsy = F_t * (1.0 if sy >= 0.0 else -1.0)
    dF_dvx = gsx * dsx_dvx + gsy * dsy_dvx
    dF_dvy = gsy * dsy_dvy
    dF_dRw = gsx * dsx_dRw + gsy * dsy_dRw
    k = -mu * fz
    J[0, 0] = k * (dF_dvx * sx + F * dsx_dvx)
    J[0, 1] = k * dF_dvy * sx
    J[0, 3] += k * (dF_dRw * sx + F * dsx_dRw)
    J[1, 0] = k * (dF_dvx * sy + F * dsy_dvx)
    J[1, 1] = k * (dF_dvy * sy + F * dsy_dvy)
    J[1, 3] = k * (dF_dRw * sy + F * dsy_dRw)
    J[0, 2] = -mu * F * sx * dfz_dvz
    J[1, 2] = -mu * F * sy * dfz_dvz
    J[0, 4] = -mu * F * sx * dfz_ddz
    J[1, 4] = -mu * F * sy * dfz_ddz
