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
Vmin m/s, Crr N s/m]``; Table C.1 values in :data:`TABLE_C1`. The Jacobian is by central finite
differences (the thesis derived it symbolically; both are derivatives of the same function).
"""

from __future__ import annotations

import math

from wmr_model._jit import njit
from wmr_model.contact.piecewise_linear import normal_force

__all__ = ["PARAM_NAMES", "TABLE_C1", "magic_formula", "pacejka_force"]

PARAM_NAMES = ("Kp", "Kd", "mu", "Bs", "Cs", "Ds", "Es", "Ks", "Ba", "Ca", "Da", "Ea", "Ka",
               "Vmin", "Crr")

#: Table C.1 coefficients of (C.13)-(C.14).
TABLE_C1 = {"Bs": 1.0 / 15.0, "Cs": 1.5, "Ds": 1.0, "Es": 0.3, "Ks": 100.0,
            "Ba": 8.0 / 75.0, "Ca": 1.5, "Da": 1.0, "Ea": 0.6, "Ka": 100.0}

# |x| below which the magic formula's ratio g(x) = f(x)/x uses its limit B K C D (relative error
# of the first-order limit is O(x^2) ~ 1e-16 at this size).
_SMALL_SLIP = 1e-8


@njit
def magic_formula(B, C, D, E, K, x):
    """Pure-slip normalized force, (C.13)/(C.14): ``D sin(C atan(B(1-E)K x + E atan(B K x)))``."""
    return D * math.sin(C * math.atan(B * (1.0 - E) * K * x + E * math.atan(B * K * x)))


@njit
def _ratio(B, C, D, E, K, x):
    """g(x) = |magic_formula(x) / x| (even; finite limit B C D K at x = 0)."""
    if abs(x) < _SMALL_SLIP:
        return abs(B * C * D * K)
    return abs(magic_formula(B, C, D, E, K, x) / x)


@njit
def pacejka_force(params, vx, vy, vz, Rw, dz, fc):
    """Contact force (3,) of the Pacejka/Nicolas-Comstock model, (C.3)-(C.4), (C.10)-(C.18)."""
    Kp, Kd, mu = params[0], params[1], params[2]
    fz = normal_force(Kp, Kd, vz, dz)[0]
    Vx = vx + Rw
    Vabs = math.sqrt(Vx * Vx + params[13] * params[13])
    s_abs = abs(vx) / Vabs  # |s|
    t_abs = abs(vy) / Vabs  # |tan(alpha)|
    gx = _ratio(params[3], params[4], params[5], params[6], params[7], s_abs)
    alpha = math.atan(t_abs)
    ga = abs(magic_formula(params[8], params[9], params[10], params[11], params[12],
                           2.0 * alpha / math.pi))
    gy = ga / t_abs if t_abs > _SMALL_SLIP else abs(
        params[8] * params[9] * params[10] * params[12] * 2.0 / math.pi)
    F = gx * gy / math.sqrt(gx * gx + gy * gy)
    fc[0] = -mu * fz * F * vx / Vabs - params[14] * Rw
    fc[1] = -mu * fz * F * vy / Vabs
    fc[2] = fz
