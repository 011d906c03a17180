"""ROAMS wheel-terrain contact (Sohl and Jain 2005, eqs. 1-8) in the form f(v_c, R w, Δz).

Normal force: Hunt-Crossley compliance (eq. 1) with deflection :math:`\\delta_N = -\\Delta z`
and its rate :math:`\\dot\\delta_N = -v_z`, bounded at zero (the ground cannot pull):

.. math:: F_N = k_N \\delta_N^n + \\tfrac32 \\alpha_N \\dot\\delta_N \\delta_N^n.

Traction limit (Terzaghi, eq. 2): :math:`F_{Tmax} = c A + F_N \\tan\\phi`, with contact area
:math:`A = b \\cdot 2\\sqrt{2 R \\delta_N - \\delta_N^2}` (wheel width times the chord of the
penetrating circle).

Tangent plane: ROAMS' stick regime is a spring-damper on a deflection state (eqs. 5-7). The
force-balance form (2.71) has no extra state, so here the stick regime keeps only the damper,
:math:`\\vec F_T = -d_T \\vec v_c` (eq. 5 with eq. 6, spring term dropped), and the slip regime
(eq. 3/8) applies when :math:`\\|\\vec F_T\\| > F_{Tmax}`: :math:`\\vec F_T = -F_{Tmax}\\,
\\hat v_c`. With c = 0 this is Coulomb friction with :math:`\\mu = \\tan\\phi`, regularized
below the slip speed :math:`F_{Tmax}/d_T`.

Soil randomness (eqs. 11-13): the limit is scaled by a factor s,
:math:`F_{Tmax} = s (c A + F_N \\tan\\phi)` (eq. 11), with s drawn from a Gaussian of mean 1
and standard deviation :math:`s_{std} = p_1 - p_2 R_\\theta` (eq. 12), where
:math:`R_\\theta = \\theta/\\phi` for :math:`\\theta \\le \\phi` and :math:`\\phi/\\theta`
otherwise (eq. 13), θ the angle between terrain normal and vertical. The spread is smallest
where the slope equals the friction angle and largest on flat ground or far steeper slopes.
The kernel is deterministic and takes s as a parameter (default 1, the plain model);
:func:`traction_scale_std` and :func:`sample_traction_scale` draw it, seeded, once per wheel per
simulation segment (see :mod:`wmr_model.experiments.soil`).

``params`` layout (:data:`PARAM_NAMES`): ``[kN N/m^n, alphaN s/m, n, dT N s/m, c Pa, phi rad,
b m, R m, s]``. Analytic Jacobian.
"""

from __future__ import annotations

import math

import numpy as np

from wmr_model._jit import njit
from wmr_model.errors import ParameterError

__all__ = ["PARAM_NAMES", "roams", "traction_scale_std", "sample_traction_scale"]

PARAM_NAMES = ("kN", "alphaN", "n", "dT", "c", "phi", "b", "R", "s")


def traction_scale_std(theta: np.ndarray | float, phi: float, p1: float,
                       p2: float) -> np.ndarray:
    """Standard deviation of the traction-limit scale factor, Sohl and Jain eqs. 12-13.

    ``theta`` (...) angle between terrain normal and vertical [rad], ``phi`` friction angle
    [rad] (> 0), ``p1`` maximum standard deviation, ``p2`` its reduction at theta = phi.
    Returns ``p1 - p2 R`` (...), clipped at 0.
    """
    if not phi > 0.0:
        raise ParameterError(f"phi must be > 0 rad for eq. 13, got {phi}")
    th = np.abs(np.asarray(theta, dtype=float))
    ratio = np.where(th <= phi, th / phi, phi / np.maximum(th, 1e-300))
    return np.maximum(p1 - p2 * ratio, 0.0)


def sample_traction_scale(theta: np.ndarray | float, phi: float, p1: float, p2: float,
                          rng: np.random.Generator) -> np.ndarray:
    """Scale factors s (...) ~ N(1, s_std(theta)) of eq. 11, clipped at 0 (the limit >= 0)."""
    std = traction_scale_std(theta, phi, p1, p2)
    return np.maximum(1.0 + std * rng.standard_normal(np.shape(std)), 0.0)


@njit(refcount=False)
def roams(params, vc, Rw, dz, fc, J):
    """Contact force ``fc`` (3,) and Jacobian ``J`` (3, 5) w.r.t. ``[vx, vy, vz, Rw, dz]``."""
    kN, aN, n, dT, coh, phi, b, R, sT = (params[0], params[1], params[2], params[3],
                                         params[4], params[5], params[6], params[7],
                                         params[8])
    for r in range(3):
        fc[r] = 0.0
        for k in range(5):
            J[r, k] = 0.0
    d = -dz
    if d <= 0.0:
        return
    dn = d ** n
    ddn = n * d ** (n - 1.0)  # d(delta^n)/d(delta)
    dd = -vc[2]
    FN = kN * dn + 1.5 * aN * dd * dn
    if FN <= 0.0:
        return
    fc[2] = FN
    dFN_dvz = -1.5 * aN * dn
    dFN_ddz = -(kN + 1.5 * aN * dd) * ddn
    J[2, 2] = dFN_dvz
    J[2, 4] = dFN_ddz
    dc = min(d, R)
    chord2 = 2.0 * R * dc - dc * dc
    A = 2.0 * b * math.sqrt(chord2) if chord2 > 0.0 else 0.0
    dA_ddz = 0.0
    if chord2 > 0.0 and d < R:
        dA_ddz = -2.0 * b * (R - d) / math.sqrt(chord2)  # d/d(dz) = -d/d(delta)
    tphi = math.tan(phi)
    Fmax = sT * (coh * A + FN * tphi)  # eq. 11
    vx, vy = vc[0], vc[1]
    v = math.sqrt(vx * vx + vy * vy)
    if dT * v <= Fmax:  # stick (damper) regime
        fc[0] = -dT * vx
        fc[1] = -dT * vy
        J[0, 0] = -dT
        J[1, 1] = -dT
        return
    ux, uy = vx / v, vy / v
    fc[0] = -Fmax * ux
    fc[1] = -Fmax * uy
    s = Fmax / v
    J[0, 0] = -s * (1.0 - ux * ux)
    J[0, 1] = s * ux * uy
    J[1, 0] = s * ux * uy
    J[1, 1] = -s * (1.0 - uy * uy)
    dF_dvz = sT * tphi * dFN_dvz
    dF_ddz = sT * (tphi * dFN_ddz + coh * dA_ddz)
    J[0, 2] = -ux * dF_dvz
    J[1, 2] = -uy * dF_dvz
    J[0, 4] = -ux * dF_ddz
    J[1, 4] = -uy * dF_ddz
