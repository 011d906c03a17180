"""Piecewise-linear wheel-ground contact model (Seegmiller 2014, App. C, eqs. C.3-C.9).

Open Dynamics Engine's friction approximation: a spring-damper normal force that cannot pull
(C.3-C.4), tangential forces linear in slip velocity with rolling resistance (C.5-C.6), bounded
either by the "pyramid" (C.7-C.8, each direction separately) or the true Coulomb cone (C.9).

Sign convention (fixed here; the printed C.3 and C.5 leave the gains' signs implicit): all gains
are positive and the force on the wheel opposes penetration and slip,

.. math::
    f'_z = -(K_p \\Delta z + \\kappa K_d v_z) \\ (\\Delta z < 0), \\quad
    f'_x = -(C_x v_x + C_{rr} R\\omega), \\quad f'_y = -C_y v_y.

with :math:`\\kappa = \\min(1, -\\Delta z / \\delta_d)` (:data:`DAMPING_ONSET_DEPTH`): the printed
(C.3) has :math:`\\kappa = 1`, a force that jumps at touchdown; the ramp keeps it continuous.

``params`` layout (:data:`PARAM_NAMES`): ``[Kp N/m, Kd N s/m, Cx N s/m, Cy N s/m,
Crr N s/m, mu_x, mu_y, cone (0 pyramid, 1 Coulomb cone)]``.
"""

from __future__ import annotations

import math

from wmr_model._jit import njit

__all__ = ["PARAM_NAMES", "DAMPING_ONSET_DEPTH", "normal_force", "piecewise_linear"]

PARAM_NAMES = ("Kp", "Kd", "Cx", "Cy", "Crr", "mu_x", "mu_y", "cone")


# Penetration [m] over which the normal damping grows from zero to Kd. (C.3) as printed jumps
# from 0 to -Kd v_z at touchdown; a step of the force balance that ends on that jump has no root
# (the cost stalls at ~Kd |v_z|, found in the ramp-and-turn scenario of §2.5.2). Ramping the
# damping in, as Hunt-Crossley damping proportional to penetration does, makes f_z continuous.
# 2 mm is a fifth of the default static sinkage (1 cm), so a wheel at rest sees the full Kd.
DAMPING_ONSET_DEPTH = 0.002


@njit(refcount=False)
def normal_force(Kp, Kd, vz, dz):
    """Spring-damper normal force bounded at zero, (C.3)-(C.4). Returns (f_z, df/dvz, df/ddz).

    The damping gain is ``Kd min(1, -Δz / DAMPING_ONSET_DEPTH)`` so that the force is
    continuous at touchdown (see :data:`DAMPING_ONSET_DEPTH`).
    """
    if dz >= 0.0:
        return 0.0, 0.0, 0.0
    depth = -dz
    if depth < DAMPING_ONSET_DEPTH:
        ramp = depth / DAMPING_ONSET_DEPTH
        dramp_ddz = -1.0 / DAMPING_ONSET_DEPTH
    else:
        ramp = 1.0
        dramp_ddz = 0.0
    fz = -(Kp * dz + ramp * Kd * vz)
    if fz <= 0.0:
        return 0.0, 0.0, 0.0
    return fz, -ramp * Kd, -Kp - dramp_ddz * Kd * vz


@njit(refcount=False)
def piecewise_linear(params, vc, Rw, dz, fc, J):
    """Contact force ``fc`` (3,) and its Jacobian ``J`` (3, 5) w.r.t. ``[vx, vy, vz, Rw, dz]``.

    (C.3)-(C.8) with the pyramid limit, or (C.9) (tangential force scaled onto the cone
    ``|f_t| <= mu_x f_z``) when ``params[7] != 0``. Analytic Jacobian.
    """
    Kp, Kd, Cx, Cy, Crr = params[0], params[1], params[2], params[3], params[4]
    mux, muy, cone = params[5], params[6], params[7] != 0.0
    for r in range(3):
        for k in range(5):
            J[r, k] = 0.0
    fz, dfz_dvz, dfz_ddz = normal_force(Kp, Kd, vc[2], dz)
    fc[2] = fz
    J[2, 2] = dfz_dvz
    J[2, 4] = dfz_ddz
    fx = -(Cx * vc[0] + Crr * Rw)
    fy = -Cy * vc[1]
    if not cone:
        lim = mux * fz
        if fx > lim:
            fc[0] = lim
            J[0, 2] = mux * dfz_dvz
            J[0, 4] = mux * dfz_ddz
        elif fx < -lim:
            fc[0] = -lim
            J[0, 2] = -mux * dfz_dvz
            J[0, 4] = -mux * dfz_ddz
        else:
            fc[0] = fx
            J[0, 0] = -Cx
            J[0, 3] = -Crr
        lim = muy * fz
        if fy > lim:
            fc[1] = lim
            J[1, 2] = muy * dfz_dvz
            J[1, 4] = muy * dfz_ddz
        elif fy < -lim:
            fc[1] = -lim
            J[1, 2] = -muy * dfz_dvz
            J[1, 4] = -muy * dfz_ddz
        else:
            fc[1] = fy
            J[1, 1] = -Cy
        return
    lim = mux * fz
    nt = math.sqrt(fx * fx + fy * fy)
    if nt <= lim:
        fc[0] = fx
        fc[1] = fy
        J[0, 0] = -Cx
        J[0, 3] = -Crr
        J[1, 1] = -Cy
        return
    # f_t = lim * u / |u| with u = (fx, fy): d(u/|u|) = (I - u u^T/|u|^2) du / |u|
    ux, uy = fx / nt, fy / nt
    fc[0] = lim * ux
    fc[1] = lim * uy
    s = lim / nt
    # du/dy: fx depends on vx (-Cx) and Rw (-Crr); fy on vy (-Cy)
    P00, P01, P11 = 1.0 - ux * ux, -ux * uy, 1.0 - uy * uy
    J[0, 0] = s * P00 * -Cx
    J[1, 0] = s * P01 * -Cx
    J[0, 3] = s * P00 * -Crr
    J[1, 3] = s * P01 * -Crr
    J[0, 1] = s * P01 * -Cy
    J[1, 1] = s * P11 * -Cy
    J[0, 2] = ux * mux * dfz_dvz
    J[1, 2] = uy * mux * dfz_dvz
    J[0, 4] = ux * mux * dfz_ddz
    J[1, 4] = uy * mux * dfz_ddz
