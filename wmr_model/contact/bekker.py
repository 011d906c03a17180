"""Bekker-Wong rigid-wheel terramechanics in the form f(v_c, R w, Δz) (Wong and Reece 1967).

A rigid wheel of radius R and width b sinks by h into soil. Angles θ are measured from the
vertical below the axle, positive toward the front; the soil is in contact from the exit angle
θ2 = 0 (no rebound) to the entry angle θ1 = acos(1 - h / R).

Pressure-sinkage (Bekker; Wong, *Theory of Ground Vehicles*, 4th ed. 2008, ch. 2) at depth z
below the local surface, with :math:`k = k_c / b + k_\\phi`:

.. math:: p(z) = k z^n \\quad\\text{(virgin soil)}, \\qquad
          p(z) = \\min\\big(k_u z,\\; k (z_c + z)^n\\big) \\quad\\text{(pre-compacted by } z_c),

the second form being Wong's repetitive-loading response (ch. 2): soil already pressed down by
``zc`` by earlier wheels reloads along a stiff linear branch of modulus ``ku`` until it reaches
the virgin curve again. ``zc`` is the multipass state (:mod:`wmr_model.terrain.deformable`).

Normal stress (Wong-Reece): in front of the maximum-stress angle
:math:`\\theta_m = (c_1 + c_2 s)\\theta_1`, :math:`\\sigma(\\theta) = p(R(\\cos\\theta -
\\cos\\theta_1))`; behind it the front profile is mapped onto [θ2, θm],
:math:`\\sigma(\\theta) = p(R(\\cos(\\theta_1 - \\frac{\\theta - \\theta_2}{\\theta_m - \\theta_2}
(\\theta_1 - \\theta_m)) - \\cos\\theta_1))`.

Shear (Janosi-Hanamoto, Wong ch. 2) with shear deformation modulus K and Mohr-Coulomb limit
:math:`\\tau_{max} = c + \\sigma\\tan\\phi`; the longitudinal and lateral soil deformations
(Wong-Reece; lateral as in Seegmiller 2014 eq. C.29)

.. math:: j_x = R[(\\theta_1 - \\theta) - (1 - s)(\\sin\\theta_1 - \\sin\\theta)], \\qquad
          j_y = R (1 - s)(\\theta_1 - \\theta)\\tan\\beta

are combined into one shear displacement :math:`j = \\sqrt{j_x^2 + j_y^2}` whose stress
:math:`\\tau = \\tau_{max}(1 - e^{-j/K})` acts along :math:`(j_x, j_y)/j`: the shear stress at a
point never exceeds Mohr-Coulomb, so with c = 0 the tangential traction of the whole patch is
bounded by tanφ times its normal load (a Coulomb friction cone with μ = tan φ).

Forces on the wheel (contact frame; drawbar pull, lateral force, load) and the wheel torque:

.. math:: f_x = R b\\int(\\tau_x\\cos\\theta - \\sigma\\sin\\theta)d\\theta, \\quad
          f_y = R b\\int\\tau_y d\\theta, \\quad
          f_z = R b\\int(\\tau_x\\sin\\theta + \\sigma\\cos\\theta)d\\theta, \\quad
          T = R^2 b\\int\\tau_x d\\theta.

Inputs as for the thesis' Ishigami model (:mod:`wmr_model.contact.ishigami`): slip ratio
:math:`s = -v_x / R\\omega` (C.19) clipped to [-1, 1], slip angle
:math:`\\beta = \\tan^{-1}(|v_y| / |V_x|)` (C.20), sinkage :math:`h = -\\Delta z` clipped to
[0, R]; ``|R w|`` and ``|V_x|`` floored at ``Vmin``; reverse driving mirrors the x axis; the
lateral force opposes ``v_y`` through the smooth sign ``-v_y / sqrt(v_y^2 + Vmin^2)``. Unlike
the Ishigami model there is no sidewall bulldozing term and θ2 = 0.

Integration: composite trapezoid rule on :data:`N_THETA` intervals of [θ2, θ1]. Jacobian: central
differences in the dispatcher (:func:`wmr_model.contact.models.contact_force`).

Multipass shear: soil already sheared by earlier wheels by :math:`j_0` reloads in shear like it
does in pressure (Wong's repetitive shear loading, 2008 ch. 2): along a straight line, here the
initial tangent :math:`\\tau_{max} j / K` of the virgin curve, until it meets the virgin curve
continued from :math:`j_0`: :math:`\\tau = \\tau_{max}\\min(j/K,\\, 1 - e^{-(j_0 + j)/K})`. For
:math:`j_0 = 0` this is the virgin curve (:math:`1 - e^{-x} \\le x`); there is no shear stress at
zero displacement in either case.

``params`` layout (:data:`PARAM_NAMES`): ``[c Pa, phi rad, kc N/m^(n+1), kphi N/m^(n+2), n,
K m, c1, c2, R m, b m, zc m, ku N/m^3, j0 m, Vmin m/s, Kd N s/m]``.
"""

from __future__ import annotations

import math

import numpy as np

from wmr_model._jit import njit
from wmr_model.contact.piecewise_linear import DAMPING_ONSET_DEPTH

__all__ = ["PARAM_NAMES", "N_THETA", "WONG_REECE_C1", "WONG_REECE_C2", "pressure",
           "wheel_stresses", "slip_inputs", "bekker_force", "static_sinkage",
           "compaction_resistance"]

PARAM_NAMES = ("c", "phi", "kc", "kphi", "n", "K", "c1", "c2", "R", "b", "zc", "ku", "j0",
               "Vmin", "Kd")

#: Coefficients of the maximum-stress angle θm = (c1 + c2 s) θ1 (Wong and Reece 1967; the
#: values commonly quoted for sand).
WONG_REECE_C1 = 0.43
WONG_REECE_C2 = 0.32

N_THETA = 64

# Indices into ``params`` (see PARAM_NAMES).
_C, _PHI, _KC, _KPHI, _N, _K, _C1, _C2, _R, _B, _ZC, _KU, _J0, _VMIN, _KD = range(15)


@njit
def pressure(params, z):
    """Normal pressure [Pa] at depth ``z`` >= 0 [m] below the (rut) surface, Bekker/Wong."""
    if z <= 0.0:
        return 0.0
    k = params[_KC] / params[_B] + params[_KPHI]
    n = params[_N]
    zc = params[_ZC]
    if zc <= 0.0:
        return k * z ** n
    return min(params[_KU] * z, k * (zc + z) ** n)


@njit
def wheel_stresses(params, s, beta_abs, h, n_theta, out):
    """Stress resultants of the wheel for slip ratio s, |beta|, sinkage h >= 0 [m].

    Writes ``out`` (7,): ``[fx, fy_mag, fz, T, S_sigma, S_tau, j_exit]``: drawbar pull, lateral
    force magnitude (opposing lateral slip), load [N], wheel torque [N m], the patch integrals
    of the normal stress and of the shear-stress magnitude, ``R b ∫σ dθ`` and ``R b ∫|τ| dθ``
    [N], and the shear displacement the soil carries after the wheel, j0 + j(θ2) [m].
    """
    for r in range(7):
        out[r] = 0.0
    if h <= 0.0:
        return
    R, b, K, j0 = params[_R], params[_B], params[_K], params[_J0]
    coh, tphi = params[_C], math.tan(params[_PHI])
    th1 = math.acos(max(-1.0, 1.0 - h / R))
    th2 = 0.0
    thm = min(max(params[_C1] + params[_C2] * s, 0.0), 1.0) * th1
    c1 = math.cos(th1)
    s1 = math.sin(th1)
    tb = math.tan(beta_abs)
    dth = (th1 - th2) / n_theta
    for k in range(n_theta + 1):
        th = th2 + k * dth
        w = 0.5 * dth if (k == 0 or k == n_theta) else dth
        if th >= thm:
            z = R * (math.cos(th) - c1)
        else:
            z = R * (math.cos(th1 - (th - th2) / (thm - th2) * (th1 - thm)) - c1)
        sig = pressure(params, z)
        jx = R * ((th1 - th) - (1.0 - s) * (s1 - math.sin(th)))
        jy = R * (1.0 - s) * (th1 - th) * tb
        j = math.sqrt(jx * jx + jy * jy)
        tau = (coh + sig * tphi) * min(j / K, 1.0 - math.exp(-(j0 + j) / K)) if j > 0.0 else 0.0
        tx = tau * jx / j if j > 0.0 else 0.0
        ty = tau * jy / j if j > 0.0 else 0.0
        ct, st = math.cos(th), math.sin(th)
        out[0] += w * R * b * (tx * ct - sig * st)
        out[1] += w * R * b * ty
        out[2] += w * R * b * (tx * st + sig * ct)
        out[3] += w * R * R * b * tx
        out[4] += w * R * b * sig
        out[5] += w * R * b * tau
        if k == 0:
            out[6] = j0 + j


@njit
def slip_inputs(params, vx, vy, Rw, dz):
    """``(s, |beta|, h, sign_x)`` from contact velocity, R w and Δz, (C.19)-(C.20) as above."""
    vmin = params[_VMIN]
    sx = 1.0 if Rw >= 0.0 else -1.0
    s = -sx * vx / max(abs(Rw), vmin)
    s = min(1.0, max(-1.0, s))
    Vx = max(abs(vx + Rw), vmin)
    beta = math.atan(abs(vy) / Vx)
    h = min(max(-dz, 0.0), params[_R])
    return s, beta, h, sx


@njit
def bekker_force(params, vx, vy, vz, Rw, dz, fc):
    """Contact force ``fc`` (3,) on the wheel in contact coordinates from (v_c, R w, Δz)."""
    s, beta, h, sx = slip_inputs(params, vx, vy, Rw, dz)
    vmin = params[_VMIN]
    fc[0] = 0.0
    fc[1] = 0.0
    fc[2] = 0.0
    if h <= 0.0:
        return
    out = np.empty(7)
    wheel_stresses(params, s, beta, h, N_THETA, out)
    fc[0] = sx * out[0]
    fc[1] = -vy / math.sqrt(vy * vy + vmin * vmin) * out[1]
    fc[2] = max(out[2] - min(1.0, h / DAMPING_ONSET_DEPTH) * params[_KD] * vz, 0.0)


def static_sinkage(W: float, D: float, b: float, kc: float, kphi: float, n: float) -> float:
    """Bekker's closed-form static sinkage [m] of a rigid wheel (Bekker 1956; Wong 2008, ch. 2).

    .. math:: z_0 = \\Big(\\frac{3 W}{(3 - n)(k_c + b k_\\phi)\\sqrt{D}}\\Big)^{2/(2n+1)}

    ``W`` load [N], ``D`` wheel diameter [m], ``b`` width [m]; small-sinkage approximation
    (contact length ~ sqrt(D z), shear stresses ignored).
    """
    return (3.0 * W / ((3.0 - n) * (kc + b * kphi) * math.sqrt(D))) ** (2.0 / (2.0 * n + 1.0))


def compaction_resistance(z0: float, b: float, kc: float, kphi: float, n: float) -> float:
    """Bekker's compaction resistance [N] of a rigid wheel sunk by ``z0`` in virgin soil.

    .. math:: R_c = b\\,(k_c / b + k_\\phi)\\,\\frac{z_0^{n+1}}{n+1}

    (the work per unit travel of pressing a rut of depth z0; exact for the front-only stress
    profile since :math:`dz = -R\\sin\\theta\\,d\\theta`).
    """
    k = kc / b + kphi
    return b * k * z0 ** (n + 1.0) / (n + 1.0)
