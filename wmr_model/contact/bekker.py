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
           "wheel_stresses", "stress_resultants", "slip_inputs", "bekker_force",
           "bekker_force_jacobian", "static_sinkage",
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


@njit(refcount=False)
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


@njit(refcount=False)
def _integrand(params, s, tb, thm, th1, c1, s1, tphi, th, ct, st, sig_front):
    """Stresses at angle ``th`` (cos ``ct``, sin ``st``): ``(tau_x, tau_y, sigma, |tau|, j)``;
    ``tphi`` = tan φ.

    ``sig_front`` is σ in front of the maximum-stress angle, ``p(R(cos th - cos th1))``,
    used where ``th >= thm`` (it depends on the sinkage only, not on the slip).
    """
    R, K, j0 = params[_R], params[_K], params[_J0]
    th2 = 0.0
    if th >= thm:
        sig = sig_front
    else:
        sig = pressure(params, R * (math.cos(th1 - (th - th2) / (thm - th2) * (th1 - thm)) - c1))
    jx = R * ((th1 - th) - (1.0 - s) * (s1 - st))
    jy = R * (1.0 - s) * (th1 - th) * tb
    j = math.sqrt(jx * jx + jy * jy)
    tau = (params[_C] + sig * tphi) * min(j / K, 1.0 - math.exp(-(j0 + j) / K)) if j > 0.0 else 0.0
    tx = tau * jx / j if j > 0.0 else 0.0
    ty = tau * jy / j if j > 0.0 else 0.0
    return tx, ty, sig, tau, j


@njit(refcount=False)
def _patch(params, h):
    """Contact arc of sinkage ``h`` > 0: ``(th1, cos th1, sin th1, dth)``, θ2 = 0."""
    th1 = math.acos(max(-1.0, 1.0 - h / params[_R]))
    return th1, math.cos(th1), math.sin(th1), th1 / N_THETA


@njit(refcount=False)
def _max_stress_angle(params, s, th1):
    """θm = (c1 + c2 s) θ1, the factor clipped to [0, 1]."""
    return min(max(params[_C1] + params[_C2] * s, 0.0), 1.0) * th1


@njit(refcount=False)
def stress_resultants(params, s, beta_abs, h, n_theta):
    """The seven values of :func:`wheel_stresses` as a tuple (allocation-free form)."""
    fx = fy = fz = T = S_sig = S_tau = j_exit = 0.0
    if h <= 0.0:
        return fx, fy, fz, T, S_sig, S_tau, j_exit
    R, b = params[_R], params[_B]
    tphi = math.tan(params[_PHI])
    th1 = math.acos(max(-1.0, 1.0 - h / R))
    thm = _max_stress_angle(params, s, th1)
    c1 = math.cos(th1)
    s1 = math.sin(th1)
    tb = math.tan(beta_abs)
    dth = th1 / n_theta
    for k in range(n_theta + 1):
        th = k * dth
        w = 0.5 * dth if (k == 0 or k == n_theta) else dth
        ct, st = math.cos(th), math.sin(th)
        sig_front = pressure(params, R * (ct - c1)) if th >= thm else 0.0
        tx, ty, sig, tau, j = _integrand(params, s, tb, thm, th1, c1, s1, tphi, th, ct, st,
                                         sig_front)
        fx += w * R * b * (tx * ct - sig * st)
        fy += w * R * b * ty
        fz += w * R * b * (tx * st + sig * ct)
        T += w * R * R * b * tx
        S_sig += w * R * b * sig
        S_tau += w * R * b * tau
        if k == 0:
            j_exit = params[_J0] + j
    return fx, fy, fz, T, S_sig, S_tau, j_exit


@njit(refcount=False)
def _cached_forces(params, s, beta_abs, th1, c1, s1, dth, cache):
    """``(fx, fy_mag, fz)`` of :func:`stress_resultants` with the sinkage-only quantities of
    each angle (cos, sin, front σ) read from ``cache`` (3, N_THETA + 1): the same numbers."""
    R, b = params[_R], params[_B]
    tphi = math.tan(params[_PHI])
    thm = _max_stress_angle(params, s, th1)
    tb = math.tan(beta_abs)
    fx = fy = fz = 0.0
    for k in range(N_THETA + 1):
        th = k * dth
        w = 0.5 * dth if (k == 0 or k == N_THETA) else dth
        ct, st = cache[0, k], cache[1, k]
        tx, ty, sig, _, _ = _integrand(params, s, tb, thm, th1, c1, s1, tphi, th, ct, st,
                                       cache[2, k])
        fx += w * R * b * (tx * ct - sig * st)
        fy += w * R * b * ty
        fz += w * R * b * (tx * st + sig * ct)
    return fx, fy, fz


@njit(refcount=False)
def wheel_stresses(params, s, beta_abs, h, n_theta, out):
    """Stress resultants of the wheel for slip ratio s, |beta|, sinkage h >= 0 [m].

    Writes ``out`` (7,): ``[fx, fy_mag, fz, T, S_sigma, S_tau, j_exit]``: drawbar pull, lateral
    force magnitude (opposing lateral slip), load [N], wheel torque [N m], the patch integrals
    of the normal stress and of the shear-stress magnitude, ``R b ∫σ dθ`` and ``R b ∫|τ| dθ``
    [N], and the shear displacement the soil carries after the wheel, j0 + j(θ2) [m].
    """
    r = stress_resultants(params, s, beta_abs, h, n_theta)
    for i in range(7):
        out[i] = r[i]


@njit(refcount=False)
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


@njit(refcount=False)
def _damped_load(params, fz_soil, h, vz):
    """Load with the normal damping of the contact onset, floored at zero [N]."""
    return max(fz_soil - min(1.0, h / DAMPING_ONSET_DEPTH) * params[_KD] * vz, 0.0)


@njit(refcount=False)
def _assemble(params, fx, fy_mag, fz_soil, sx, vy, vz, h):
    """Contact force ``(fx, fy, fz)`` from the stress resultants: the x axis mirrored for
    reverse driving, the lateral force opposing v_y, the onset damping on the load."""
    vmin = params[_VMIN]
    return sx * fx, -vy / math.sqrt(vy * vy + vmin * vmin) * fy_mag, \
        _damped_load(params, fz_soil, h, vz)


@njit(refcount=False)
def _force(params, vx, vy, vz, Rw, dz):
    """Contact force ``(fx, fy, fz)`` in contact coordinates from (v_c, R w, Δz)."""
    s, beta, h, sx = slip_inputs(params, vx, vy, Rw, dz)
    if h <= 0.0:
        return 0.0, 0.0, 0.0
    r = stress_resultants(params, s, beta, h, N_THETA)
    return _assemble(params, r[0], r[1], r[2], sx, vy, vz, h)


@njit(refcount=False)
def bekker_force(params, vx, vy, vz, Rw, dz, fc):
    """Contact force ``fc`` (3,) on the wheel in contact coordinates from (v_c, R w, Δz)."""
    fc[0], fc[1], fc[2] = _force(params, vx, vy, vz, Rw, dz)


@njit(refcount=False)
def _same_sinkage_force(params, vx, vy, vz, Rw, dz, patch, cache):
    """:func:`_force` at a point of the sinkage ``cache`` was filled for (same numbers)."""
    s, beta, h, sx = slip_inputs(params, vx, vy, Rw, dz)
    if h <= 0.0:
        return 0.0, 0.0, 0.0
    th1, c1, s1, dth = patch
    fx, fy, fz = _cached_forces(params, s, beta, th1, c1, s1, dth, cache)
    return _assemble(params, fx, fy, fz, sx, vy, vz, h)


@njit
def bekker_force_jacobian(params, vx, vy, vz, Rw, dz, rel_step, fc, J):
    """:func:`bekker_force` and its central-difference Jacobian ``J`` (3, 5) with respect to
    ``[vx, vy, vz, Rw, dz]``, step ``rel_step (1 + |y_k|)``: the same numbers as evaluating the
    whole force at each perturbed point, with less work.

    Only a change of Δz changes the sinkage. The other eight evaluations share it, so the
    cosines, sines and front normal stresses of the contact arc are computed once (N_THETA + 1
    of each instead of up to seven times); and the soil stresses do not depend on vz (only the
    onset damping does), so the vz column reuses the unperturbed point's resultants.
    """
    s, beta, h, sx = slip_inputs(params, vx, vy, Rw, dz)
    patch = (0.0, 0.0, 0.0, 0.0)
    cache = np.empty((3, N_THETA + 1))
    f = (0.0, 0.0, 0.0)
    fz_soil = 0.0
    if h > 0.0:
        patch = _patch(params, h)
        th1, c1, s1, dth = patch
        for k in range(N_THETA + 1):
            ct = math.cos(k * dth)
            cache[0, k] = ct
            cache[1, k] = math.sin(k * dth)
            cache[2, k] = pressure(params, params[_R] * (ct - c1))
        fx, fy, fz_soil = _cached_forces(params, s, beta, th1, c1, s1, dth, cache)
        f = _assemble(params, fx, fy, fz_soil, sx, vy, vz, h)
    fc[0], fc[1], fc[2] = f
    y = (vx, vy, vz, Rw, dz)
    for k in range(5):
        hk = rel_step * (1.0 + abs(y[k]))
        if k == 0:
            fp = _same_sinkage_force(params, vx + hk, vy, vz, Rw, dz, patch, cache)
            fm = _same_sinkage_force(params, vx - hk, vy, vz, Rw, dz, patch, cache)
        elif k == 1:
            fp = _same_sinkage_force(params, vx, vy + hk, vz, Rw, dz, patch, cache)
            fm = _same_sinkage_force(params, vx, vy - hk, vz, Rw, dz, patch, cache)
        elif k == 2:
            fp = fm = f
            if h > 0.0:
                fp = (f[0], f[1], _damped_load(params, fz_soil, h, vz + hk))
                fm = (f[0], f[1], _damped_load(params, fz_soil, h, vz - hk))
        elif k == 3:
            fp = _same_sinkage_force(params, vx, vy, vz, Rw + hk, dz, patch, cache)
            fm = _same_sinkage_force(params, vx, vy, vz, Rw - hk, dz, patch, cache)
        else:
            fp = _force(params, vx, vy, vz, Rw, dz + hk)
            fm = _force(params, vx, vy, vz, Rw, dz - hk)
        for r in range(3):
            J[r, k] = (fp[r] - fm[r]) / (2.0 * hk)


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
