"""Enhanced kinematics: body-level slip and rollover risk (Seegmiller 2014, §2.3, eqs. 2.44-2.52).

The kinematic model of §2.2 minimizes wheel slip. The enhancement predicts *body-level* slip from
gravitational, inertial and dissipative forces with six coefficients ``p = (p1..p6)``, converts
it to wheel slip (2.52) and re-solves the constrained velocity problem (2.38) so the wheels stay
on the terrain. The same force at the centre of gravity gives a rollover/liftoff risk measure.

Conventions (stated once; every function below follows them)
----------------------------------------------------------------

**Force sign.** (2.44) uses Featherstone's force cross product ``crf(v) = -crm(v)^T``
(:func:`wmr_model.spatial.crf`), so

.. math:: f_b = I_b^c g - v_b \\times_f I_b^c v_b

is *minus* the approximate bias force (2.89): it is the gravity plus d'Alembert (centrifugal)
force the vehicle exerts on its supports, i.e. the negative of what the ground must supply. On a
side slope its lateral component points **downhill**; in a steady turn it points **outward**;
on level ground at rest it is ``m g`` pointing down the body z axis.

**Normal load.** :math:`f_z = -f_{cg} \\cdot \\hat z` with :math:`\\hat z` the normal direction
(default body +z, pointing out of the ground). So ``f_z > 0`` while the vehicle presses on the
ground and ``f_lon / f_z``, ``f_lat / f_z`` are the normalized forces along the slip directions.

**Slip coefficients** (2.48)-(2.49), units in brackets:

======  =====  =============================================================================
p1      [-]    longitudinal slip per normalized longitudinal force; > 0 loses speed uphill
p2      [-]    rolling resistance; ``p2 < 0`` reduces speed (v_lon scaled by 1 + p2)
p3      [-]    lateral slip per normalized lateral force; > 0 slips downhill / outward in turns
p4      [1/m]  yaw slip per normalized lateral force; **p4 > 0 understeer, p4 < 0 oversteer**
p5      [1/m]  yaw slip per forward speed (left/right rolling resistance asymmetry)
p6      [-]    yaw slip per yaw rate (anisotropic skid friction); ``p6 < 0`` turns less
======  =====  =============================================================================

**Slip directions** ``slip_axes`` (4, 3), unit vectors in body coordinates: rows ``lon``,
``lat``, ``ang`` (Figure 2.7) and the normal ``z``; default body x, y, z, z
(:data:`DEFAULT_SLIP_AXES`).

**Stability margin** (§2.3, last paragraph): the line of action of :math:`f_{cg}` through the cg
meets the *ground plane* (least-squares plane through the wheel-terrain contact points) at a
point; the margin is its signed distance to the nearest edge of the *support polygon* (convex hull
of the contact points projected on that plane), positive inside, negative outside, ``-inf`` when
the force does not point into the ground. A margin below zero means liftoff/rollover is imminent.

Kernels take explicit arrays (numba); :mod:`wmr_model.kinematics.loops` composes them inside the
compiled simulation loops, and :mod:`wmr_model.prediction.predict` is the Python entry point.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from wmr_model._jit import njit
from wmr_model.errors import ParameterError, ShapeError
from wmr_model.kinematics.solve import joint_space_velocity, resolve_partitioned_with
from wmr_model.kinematics.track_collision import track_activation
from wmr_model.vehicles.inertia import (
    body_composite_inertia_into,
    composite_inertias_into,
    composite_workspace,
    fold_spinning_leaves,
    mass_com_into,
)

__all__ = [
    "DEFAULT_SLIP_AXES",
    "MIN_NORMAL_LOAD_FRACTION",
    "body_force",
    "body_force_into",
    "cg_motion",
    "cg_force",
    "cg_force_into",
    "cg_slip_velocity",
    "cg_slip_velocity_into",
    "body_slip_velocity",
    "wheel_slip_velocity",
    "BodySlip",
    "enhanced_joint_space_velocity",
    "enhanced_workspace",
    "folded_enhanced_workspace",
    "ground_plane",
    "ground_plane_into",
    "support_polygon",
    "support_polygon_into",
    "stability_margin",
    "margin_workspace",
    "slip_axes_array",
]

#: Default slip directions in body coordinates: lon = x, lat = y, ang = z, normal = z.
DEFAULT_SLIP_AXES = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0],
                              [0.0, 0.0, 1.0]])

# Below this normal load (as a fraction of the vehicle's weight m g) the force ratios of
# (2.48)-(2.49) are set to zero: near liftoff f_z -> 0 and the ratios blow up, while the model has
# no traction information there anyway (the thesis notes it cannot predict liftoff motion).
MIN_NORMAL_LOAD_FRACTION = 1e-3

# Contact points whose scatter has a second principal value below this fraction of the largest
# are treated as collinear (e.g. two wheels): the ground-plane normal then comes from the mean
# terrain normal at the contacts instead of the (undefined) least-squares plane.
COLLINEAR_FRACTION = 1e-9


@njit
def body_force(Ic, g_body, v_b):
    """Gravity and inertial force on the body frame, (2.44).

    .. math:: f_b = I_b^c g - v_b \\times_f I_b^c v_b

    ``Ic`` (6, 6) composite inertia in body coordinates; ``g_body`` (6,) spatial gravitational
    acceleration ``[0; R_b^T g_w]`` in body coordinates; ``v_b`` (6,) body twist ``[w; v]``.
    Returns ``f_b`` (6,) ``[tau; f]`` (sign convention: see the module docstring).
    """
    out = np.empty(6)
    body_force_into(Ic, g_body, v_b, out)
    return out


@njit(refcount=False)
def _row_dot(M, r, x):
    """``sum_k M[r, k] x[k]`` accumulated from 0 in index order."""
    a = 0.0
    for k in range(x.shape[0]):
        a += M[r, k] * x[k]
    return a


@njit(refcount=False)
def body_force_into(Ic, g_body, v_b, out):
    """:func:`body_force` written to ``out`` (6,), which must not alias the inputs."""
    for r in range(6):
        out[r] = _row_dot(Ic, r, g_body)
    # h = Ic v_b; - v x_f h = -crf(v) h (B.7): [w x h_w + v x h_v; w x h_v]
    h0, h1, h2 = _row_dot(Ic, 0, v_b), _row_dot(Ic, 1, v_b), _row_dot(Ic, 2, v_b)
    h3, h4, h5 = _row_dot(Ic, 3, v_b), _row_dot(Ic, 4, v_b), _row_dot(Ic, 5, v_b)
    w0, w1, w2, u0, u1, u2 = v_b[0], v_b[1], v_b[2], v_b[3], v_b[4], v_b[5]
    out[0] -= w1 * h2 - w2 * h1 + u1 * h5 - u2 * h4
    out[1] -= w2 * h0 - w0 * h2 + u2 * h3 - u0 * h5
    out[2] -= w0 * h1 - w1 * h0 + u0 * h4 - u1 * h3
    out[3] -= w1 * h5 - w2 * h4
    out[4] -= w2 * h3 - w0 * h5
    out[5] -= w0 * h4 - w1 * h3


@njit(refcount=False)
def _shift_motion(v, r, sign, out):
    """Motion vector ``v`` (6,) re-expressed at a parallel frame whose origin is at
    ``sign * r`` (``sign`` = +1 or -1): ``[w; v + w x (sign r)]`` (Plücker translation, B.2
    with R = I), written to ``out`` (6,) (must not alias ``v``)."""
    out[0] = v[0]
    out[1] = v[1]
    out[2] = v[2]
    out[3] = v[3] + v[1] * (sign * r[2]) - v[2] * (sign * r[1])
    out[4] = v[4] + v[2] * (sign * r[0]) - v[0] * (sign * r[2])
    out[5] = v[5] + v[0] * (sign * r[1]) - v[1] * (sign * r[0])


@njit
def cg_motion(c, v_b):
    """Spatial velocity at the cg, (2.45): :math:`v_{cg} = X_b^{cg} v_b`.

    The cg frame has its origin at ``c`` (3,) (body coordinates) and body-parallel axes, so
    :math:`\\omega_{cg} = \\omega_b` and :math:`v_{cg} = v_b + \\omega_b \\times c`.
    """
    out = np.empty(6)
    _shift_motion(v_b, c, 1.0, out)
    return out


@njit
def cg_force(c, f_b):
    """Spatial force at the cg, (2.46): :math:`f_{cg} = (X_b^{cg})^{-T} f_b`.

    :math:`\\tau_{cg} = \\tau_b - c \\times f`, :math:`f_{cg} = f_b` (linear part unchanged).
    """
    out = np.empty(6)
    cg_force_into(c, f_b, out)
    return out


@njit(refcount=False)
def cg_force_into(c, f_b, out):
    """:func:`cg_force` written to ``out`` (6,), which must not alias ``f_b``."""
    out[0] = f_b[0] - (c[1] * f_b[5] - c[2] * f_b[4])
    out[1] = f_b[1] - (c[2] * f_b[3] - c[0] * f_b[5])
    out[2] = f_b[2] - (c[0] * f_b[4] - c[1] * f_b[3])
    out[3] = f_b[3]
    out[4] = f_b[4]
    out[5] = f_b[5]


#: Reference length b [m] of the turn ratio of ``p7``, ``p8`` in :func:`cg_slip_velocity`: the
#: turn ratio is 1/2 at a turn radius of b. Chosen from the Janosi-Hanamoto skid-steer truth
#: (:mod:`wmr_model.kinematics.skid_steer`; L = 0.5 m, B = 0.4 m, K = 5-20 mm), whose yaw efficiency
# moves
#: from its spin value to its wide-arc value over radii of about 0.5-5 m.
TURN_RATIO_LENGTH = 1.0


@njit
def cg_slip_velocity(v_cg, f_cg, p, slip_axes, min_load):
    """Body slip velocity at the cg, (2.48)-(2.49), plus the turn-ratio yaw slip of p7, p8.

    .. math::

        v_{cg,slip} = (p_1 \\tfrac{f_{lon}}{f_z} V_{lon} + p_2 V_{lon})\\,\\hat{lon}
                      + p_3 \\tfrac{f_{lat}}{f_z} V_{lon}\\,\\hat{lat}

        \\omega_{cg,slip} = (p_4 \\tfrac{f_{lat}}{f_z} V_{lon} + p_5 V_{lon}
                            + (p_6 + p_7 \\rho + p_8 \\rho^2) V_{ang})\\,\\hat{ang},
        \\qquad \\rho = \\frac{|V_{ang}|\\,b}{|V_{lon}| + |V_{ang}|\\,b}

    The thesis has p1..p6. ``p7``, ``p8`` (ours, issue 9) make the yaw slip of skid steering
    depend on the turn radius ``R = |V_lon / V_ang|`` through the dimensionless turn ratio
    ``rho = b / (R + b)`` (1 spinning in place, 0 driving straight; ``b`` =
    :data:`TURN_RATIO_LENGTH`): track friction that builds up with shear displacement
    (Janosi-Hanamoto, :mod:`wmr_model.kinematics.skid_steer`) gives a yaw efficiency that changes
    with R, which the constant ratio p6 cannot express.

    ``v_cg``, ``f_cg`` (6,); ``p`` (6,) = p1..p6 or (8,) = p1..p8 (p7 = p8 = 0 and a (6,)
    ``p`` give the same result bit for bit); ``slip_axes`` (4, 3) rows lon, lat, ang, z;
    ``min_load`` [N]: below it (``f_z <= min_load``) the force-ratio terms are zero.
    Returns the spatial slip velocity (6,) ``[w; v]`` at the cg.
    """
    out = np.empty(6)
    cg_slip_velocity_into(v_cg, f_cg, p, slip_axes, min_load, out)
    return out


@njit(refcount=False)
def cg_slip_velocity_into(v_cg, f_cg, p, slip_axes, min_load, out):
    """:func:`cg_slip_velocity` written to ``out`` (6,), which must not alias the inputs."""
    lon = slip_axes[0]
    lat = slip_axes[1]
    ang = slip_axes[2]
    zn = slip_axes[3]
    f = f_cg[3:6]
    f_lon = f[0] * lon[0] + f[1] * lon[1] + f[2] * lon[2]
    f_lat = f[0] * lat[0] + f[1] * lat[1] + f[2] * lat[2]
    f_z = -(f[0] * zn[0] + f[1] * zn[1] + f[2] * zn[2])
    V_lon = v_cg[3] * lon[0] + v_cg[4] * lon[1] + v_cg[5] * lon[2]
    V_ang = v_cg[0] * ang[0] + v_cg[1] * ang[1] + v_cg[2] * ang[2]
    r_lon = 0.0
    r_lat = 0.0
    if f_z > min_load:
        r_lon = f_lon / f_z
        r_lat = f_lat / f_z
    s_lon = p[0] * r_lon * V_lon + p[1] * V_lon
    s_lat = p[2] * r_lat * V_lon
    s_ang = p[3] * r_lat * V_lon + p[4] * V_lon + p[5] * V_ang
    if p.shape[0] > 6 and (p[6] != 0.0 or p[7] != 0.0):
        w_b = abs(V_ang) * TURN_RATIO_LENGTH
        if w_b > 0.0:
            rho = w_b / (abs(V_lon) + w_b)
            s_ang += (p[6] * rho + p[7] * rho * rho) * V_ang
    for r in range(3):
        out[r] = s_ang * ang[r]
        out[3 + r] = s_lon * lon[r] + s_lat * lat[r]


@njit
def body_slip_velocity(c, v_cg_slip):
    """Slip velocity moved back to the body frame, (2.50): :math:`(X_b^{cg})^{-1} v_{cg,slip}`.

    :math:`\\omega_{b} = \\omega_{cg}`, :math:`v_b = v_{cg} + c \\times \\omega_{cg}`.
    """
    out = np.empty(6)
    _shift_motion(v_cg_slip, c, -1.0, out)
    return out


@njit(refcount=False)
def wheel_slip_velocity(A, v_b_slip, nw, vc_xy):
    """Wheel slip from body slip, (2.52): ``vc(x u y) = A_wheel(x u y, 1..6) v_b,slip``.

    ``A`` (3 nw + ncj, nv) stacked constraint matrix (wheel k in rows 3k..3k+2); writes the x, y
    contact velocities ``vc_xy`` (nw, 2) (the z rows are left to the Baumgarte term).
    """
    for k in range(nw):
        for r in range(2):
            s = 0.0
            for j in range(6):
                s += A[3 * k + r, j] * v_b_slip[j]
            vc_xy[k, r] = s


@njit
def enhanced_workspace():
    """Scratch of :func:`enhanced_joint_space_velocity`: the composite-inertia scratch
    (:func:`wmr_model.vehicles.inertia.composite_workspace`), ``g_b``, ``f_b``, ``v_cg``, ``s_cg``
    (6,) each, and no reduced tree (``keep`` (0,): the composite inertia comes from ``I_frame``,
    :func:`wmr_model.vehicles.inertia.composite_inertias`)."""
    return (composite_workspace(), np.zeros(6), np.empty(6), np.empty(6), np.empty(6),
            np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.empty((0, 6, 6)),
            np.empty((0, 4, 4)), np.empty((0, 6, 6)))


@njit
def folded_enhanced_workspace(parent, jtype, axis, T0, I_frame):
    """:func:`enhanced_workspace` with the model's spinning leaves (rigid axisymmetric wheels)
    folded into their parents (:func:`wmr_model.vehicles.inertia.fold_spinning_leaves`, from the
    ``I_frame`` (nf, 6, 6) later passed to the kernel): the body composite inertia then comes
    from the reduced tree (:func:`wmr_model.vehicles.inertia.body_composite_inertia`; equal to
    round-off) and ``Ic`` is not written. The simulation loops make one per trajectory."""
    keep, parent_k, I_k = fold_spinning_leaves(parent, jtype, axis, T0, I_frame)
    return folded_workspace_of(keep, parent_k, I_k)


@njit
def folded_workspace_of(keep, parent_k, I_k):
    """:func:`folded_enhanced_workspace` on a reduced tree ``(keep, parent_k, I_k)`` already
    folded (:func:`wmr_model.vehicles.inertia.fold_spinning_leaves`): fresh scratch, the tree's
    arrays shared (the kernels only read them), so a batch folds its model once."""
    nk = keep.shape[0]
    return (composite_workspace(), np.zeros(6), np.empty(6), np.empty(6), np.empty(6), keep,
            parent_k, I_k, np.empty((nk, 4, 4)), np.empty((nk, 6, 6)))


class BodySlip(NamedTuple):
    """Inputs of enhanced kinematics (§2.3) besides the model, terrain and workspace.

    ``I_frame`` (nf, 6, 6) per-frame spatial inertias; ``gravity`` (3,) world gravity
    [m/s^2]; ``p`` (6,) slip parameters p1..p6 (2.48)-(2.49); ``axes`` (4, 3) slip directions
    lon, lat, ang, normal in body coordinates (:func:`slip_axes_array`); ``enhanced``: add the
    body slip (else only the cg force ``f_cg`` is computed, for the stability margin).
    """

    I_frame: np.ndarray
    gravity: np.ndarray
    p: np.ndarray
    axes: np.ndarray
    enhanced: bool


@njit(refcount=False)
def enhanced_joint_space_velocity(m, t, d, q, known, qdot_known, sigma, vc_xy, qdot, s,
                                  solver=None):
    """Joint-space velocity with body-level slip, (2.44)-(2.52) then (2.38).

    1. least-squares (no added slip) solve of (2.37)-(2.38) with the given ``vc_xy`` (nc, 2)
       (:func:`wmr_model.kinematics.solve.joint_space_velocity`, model ``m``, terrain
       ``t``, workspace ``d`` (:class:`wmr_model.kinematics.data.KernelData`), ``qdot``
       (nv,) written);
    2. composite inertia (Algorithm 3 backward pass), cg ``d.cg`` (3,), body force (2.44) and
       its cg form (2.45)-(2.47), written to ``d.f_cg`` (6,) - also without ``s.enhanced``,
       for the stability margin;
    3. when ``s.enhanced``: slip at the cg (2.48)-(2.49), back to the body (2.50) into
       ``d.v_b_slip`` (6,), wheel slip (2.52) added to ``vc_xy`` into ``d.vc_slip`` (nc, 2),
       and the same constraint matrix ``A`` solved again with the new right-hand side (2.38),
       reusing the first solve's index set and Cholesky factor
       (:func:`wmr_model.kinematics.solve.resolve_partitioned`).

    ``s``: :class:`BodySlip` (inertias, gravity, slip parameters and axes, the enhanced
    switch). ``d.enhanced_ws`` from :func:`enhanced_workspace` (then ``d.Ic`` (nf, 6, 6) is
    written) or :func:`folded_enhanced_workspace` (then it is not). Contacts are wheels then
    track patches; a patch's rows are activation-weighted, so its slip (2.52) is applied to
    the weighted rows. ``solver``: the vehicle's specialized solve and re-solve
    (:func:`wmr_model.kinematics.solve.solve_partitioned_with`; None: generic). Returns the
    residual norm of the final solve.
    """
    I_frame, gravity, p, slip_axes = s.I_frame, s.gravity, s.p, s.axes
    A, v, dz, T_world = d.A, d.v, d.dz, d.T_world
    f_cg, c, v_b_slip, vc_slip = d.f_cg, d.cg, d.v_b_slip, d.vc_slip
    cws, g_b, f_b, v_cg, s_cg, keep, parent_k, I_k, T_k, Ic_k = d.enhanced_ws
    res = joint_space_velocity(m, t, d, q, known, qdot_known, sigma, vc_xy, qdot, solver)
    if keep.shape[0] > 0:
        body_composite_inertia_into(keep, parent_k, I_k, T_world, T_k, Ic_k, cws)
        Ib = Ic_k[0]
    else:
        composite_inertias_into(m.parent, I_frame, T_world, d.Ic, cws)
        Ib = d.Ic[0]
    mass = mass_com_into(Ib, c)
    Rb = T_world[0, :3, :3]
    for r in range(3):
        g_b[r] = 0.0
        g_b[3 + r] = Rb[0, r] * gravity[0] + Rb[1, r] * gravity[1] + Rb[2, r] * gravity[2]
    v_b = qdot[0:6]  # read only until the final solve
    body_force_into(Ib, g_b, v_b, f_b)
    cg_force_into(c, f_b, f_cg)
    nw = m.wheel_frame.shape[0]
    if not s.enhanced:
        v_b_slip[:] = 0.0
        for k in range(vc_slip.shape[0]):  # vc_slip = vc_xy, element by element
            vc_slip[k, 0] = vc_xy[k, 0]
            vc_slip[k, 1] = vc_xy[k, 1]
        return res
    gnorm = math.sqrt(gravity[0] ** 2 + gravity[1] ** 2 + gravity[2] ** 2)
    min_load = MIN_NORMAL_LOAD_FRACTION * mass * gnorm
    _shift_motion(v_b, c, 1.0, v_cg)  # (2.45)
    cg_slip_velocity_into(v_cg, f_cg, p, slip_axes, min_load, s_cg)
    _shift_motion(s_cg, c, -1.0, v_b_slip)  # (2.50)
    wheel_slip_velocity(A, v_b_slip, nw, vc_slip)
    for k in range(nw):
        vc_slip[k, 0] += vc_xy[k, 0]
        vc_slip[k, 1] += vc_xy[k, 1]
        v[3 * k] = vc_slip[k, 0]
        v[3 * k + 1] = vc_slip[k, 1]
    nc = nw + m.track_frame.shape[0]
    for k in range(nw, nc):
        # weighted rows: w vc = (w A) v_b,slip + w vc_xy; report the unweighted slip
        w = track_activation(dz[k], m.track_act)
        for r in range(2):
            a = 0.0
            for j in range(6):
                a += A[3 * k + r, j] * v_b_slip[j]
            v[3 * k + r] = a + w * vc_xy[k, r]
            vc_slip[k, r] = (a / w if w > 0.0 else 0.0) + vc_xy[k, r]
    # same A and known set as the first solve: keep its factor (2.38)
    return resolve_partitioned_with(solver, A, v, known, qdot_known, qdot, d.solve_ws)


# ----------------------------------------------------------------------------------------------
# Rollover / liftoff risk
# ----------------------------------------------------------------------------------------------


@njit(refcount=False)
def _sym3_eigenvalues(S):
    """Eigenvalues ``l0 <= l1 <= l2`` of a symmetric 3x3 matrix in closed form (the
    trigonometric solution of its characteristic cubic; no LAPACK call per step)."""
    p1 = S[0, 1] ** 2 + S[0, 2] ** 2 + S[1, 2] ** 2
    q = (S[0, 0] + S[1, 1] + S[2, 2]) / 3.0
    a, b, c = S[0, 0] - q, S[1, 1] - q, S[2, 2] - q
    p = math.sqrt((a * a + b * b + c * c + 2.0 * p1) / 6.0)
    if p == 0.0:
        return q, q, q
    # r = det((S - q I) / p) / 2, clamped against rounding
    r = (a * (b * c - S[1, 2] ** 2) - S[0, 1] * (S[0, 1] * c - S[1, 2] * S[0, 2])
         + S[0, 2] * (S[0, 1] * S[1, 2] - b * S[0, 2])) / (2.0 * p ** 3)
    r = min(1.0, max(-1.0, r))
    phi = math.acos(r) / 3.0
    l2 = q + 2.0 * p * math.cos(phi)
    l0 = q + 2.0 * p * math.cos(phi + 2.0 * math.pi / 3.0)
    return l0, 3.0 * q - l0 - l2, l2


@njit(refcount=False)
def _sym3_null_vector(S, lam, out):
    """Unit eigenvector of symmetric 3x3 ``S`` for its simple eigenvalue ``lam``: the largest
    cross product of two rows of ``S - lam I`` (orthogonal to both). Written to ``out``."""
    best = -1.0
    for i, j in ((0, 1), (0, 2), (1, 2)):
        ax, ay, az = S[i, 0], S[i, 1], S[i, 2]
        bx, by, bz = S[j, 0], S[j, 1], S[j, 2]
        if i == 0:
            ax -= lam
        elif i == 1:
            ay -= lam
        if j == 1:
            by -= lam
        else:
            bz -= lam
        cx = ay * bz - az * by
        cy = az * bx - ax * bz
        cz = ax * by - ay * bx
        nn = cx * cx + cy * cy + cz * cz
        if nn > best:
            best = nn
            out[0], out[1], out[2] = cx, cy, cz
    s = math.sqrt(best)
    out[0] /= s
    out[1] /= s
    out[2] /= s


@njit
def ground_plane(T_contact, Rb):
    """Least-squares ground plane through the contact points.

    ``T_contact`` (nw, 4, 4) contact frames, ``Rb`` (3, 3) body orientation. Returns
    ``(origin (3,), normal (3,))``: the centroid of the contact points and the unit normal of the
    total-least-squares plane (smallest principal direction of their scatter), oriented along the
    body's +z. With fewer than three contacts or collinear contacts the normal is the mean of the
    terrain normals at the contacts.
    """
    o = np.empty(3)
    n = np.empty(3)
    ground_plane_into(T_contact, Rb, o, n, np.empty((3, 3)))
    return o, n


@njit(refcount=False)
def ground_plane_into(T_contact, Rb, o, n, S):
    """:func:`ground_plane` writing ``o`` (3,), ``n`` (3,); ``S`` (3, 3) scratch (scatter)."""
    nw = T_contact.shape[0]
    for i in range(3):
        o[i] = 0.0
        n[i] = 0.0
        for j in range(3):
            S[i, j] = 0.0
    for k in range(nw):
        for i in range(3):
            o[i] += T_contact[k, i, 3]
    for i in range(3):
        o[i] /= nw
    for k in range(nw):
        d0 = T_contact[k, 0, 3] - o[0]
        d1 = T_contact[k, 1, 3] - o[1]
        d2 = T_contact[k, 2, 3] - o[2]
        S[0, 0] += d0 * d0
        S[0, 1] += d0 * d1
        S[0, 2] += d0 * d2
        S[1, 0] += d1 * d0
        S[1, 1] += d1 * d1
        S[1, 2] += d1 * d2
        S[2, 0] += d2 * d0
        S[2, 1] += d2 * d1
        S[2, 2] += d2 * d2
    lam0, lam1, lam2 = _sym3_eigenvalues(S)
    if nw >= 3 and lam1 > COLLINEAR_FRACTION * lam2 and lam2 > 0.0:
        _sym3_null_vector(S, lam0, n)
    else:
        for k in range(nw):
            for i in range(3):
                n[i] += T_contact[k, i, 2]
    nn = math.sqrt(n[0] * n[0] + n[1] * n[1] + n[2] * n[2])
    for i in range(3):
        n[i] /= nn
    if n[0] * Rb[0, 2] + n[1] * Rb[1, 2] + n[2] * Rb[2, 2] < 0.0:
        for i in range(3):
            n[i] = -n[i]


@njit(refcount=False)
def _cross2(ax, ay, bx, by):
    return ax * by - ay * bx


@njit
def support_polygon(pts):
    """Convex hull of 2-D points ``pts`` (n, 2), counter-clockwise; gift wrapping.

    Returns the vertex indices (h,) in order. Collinear boundary points are skipped (the farthest
    one is kept), so ``h`` may be 1 or 2 for degenerate input.
    """
    hull = np.empty(pts.shape[0], dtype=np.int64)
    return hull[:support_polygon_into(pts, hull)]


@njit(refcount=False)
def support_polygon_into(pts, hull):
    """:func:`support_polygon` writing the vertex indices to ``hull`` (n,) int64; returns
    their number ``h`` (``hull[:h]``)."""
    n = pts.shape[0]
    start = 0
    for i in range(1, n):
        if pts[i, 0] < pts[start, 0] or (pts[i, 0] == pts[start, 0]
                                         and pts[i, 1] < pts[start, 1]):
            start = i
    h = 0
    cur = start
    for _ in range(n):
        hull[h] = cur
        h += 1
        nxt = -1
        for j in range(n):
            if j == cur:
                continue
            if nxt < 0:
                nxt = j
                continue
            cr = _cross2(pts[nxt, 0] - pts[cur, 0], pts[nxt, 1] - pts[cur, 1],
                         pts[j, 0] - pts[cur, 0], pts[j, 1] - pts[cur, 1])
            if cr < 0.0:  # j is clockwise of nxt: wrap tighter
                nxt = j
            elif cr == 0.0:
                dn = (pts[nxt, 0] - pts[cur, 0]) ** 2 + (pts[nxt, 1] - pts[cur, 1]) ** 2
                dj = (pts[j, 0] - pts[cur, 0]) ** 2 + (pts[j, 1] - pts[cur, 1]) ** 2
                if dj > dn:
                    nxt = j
        if nxt < 0 or nxt == start:
            break
        if (pts[nxt, 0] == pts[cur, 0]) and (pts[nxt, 1] == pts[cur, 1]):
            break
        cur = nxt
    return h


@njit(refcount=False)
def _segment_distance(px, py, ax, ay, bx, by):
    dx = bx - ax
    dy = by - ay
    L2 = dx * dx + dy * dy
    t = 0.0
    if L2 > 0.0:
        t = ((px - ax) * dx + (py - ay) * dy) / L2
        t = min(1.0, max(0.0, t))
    ex = ax + t * dx - px
    ey = ay + t * dy - py
    return math.sqrt(ex * ex + ey * ey)


@njit
def stability_margin(T_world, T_contact, c, f_cg, ws=None):
    """Signed rollover stability margin [m] (§2.3, after [124]).

    The line of action of the linear force ``f_cg[3:]`` (body coordinates) through the cg ``c``
    (3,) (body coordinates) is intersected with the least-squares ground plane
    (:func:`ground_plane`); the margin is the distance from the intersection to the nearest edge
    of the support polygon (:func:`support_polygon` of the contacts projected on the plane),
    positive inside and negative outside. ``-inf`` when the force does not point into the
    ground (``n . f >= 0``: the vehicle would lift off entirely) or vanishes. ``ws``: optional
    scratch from :func:`margin_workspace` (allocated when omitted).
    """
    if ws is None:
        return _stability_margin(T_world, T_contact, c, f_cg,
                                 margin_workspace(T_contact.shape[0]))
    return _stability_margin(T_world, T_contact, c, f_cg, ws)


@njit
def margin_workspace(nc):
    """Scratch of :func:`stability_margin` for ``nc`` contacts: ``Rb``, ``S`` (3, 3); ``o``,
    ``n``, ``d``, ``r_cg``, ``e1`` (3,); ``pts`` (nc, 2); ``hull`` (nc,) int64."""
    return (np.empty((3, 3)), np.empty((3, 3)), np.empty(3), np.empty(3), np.empty(3),
            np.empty(3), np.empty(3), np.empty((nc, 2)), np.empty(nc, dtype=np.int64))


@njit(refcount=False)
def _stability_margin(T_world, T_contact, c, f_cg, ws):
    """:func:`stability_margin` with its scratch ``ws`` (no allocation here)."""
    Rb, S, o, n, d, r_cg, e1, pts, hull = ws
    for i in range(3):
        for j in range(3):
            Rb[i, j] = T_world[0, i, j]
    ground_plane_into(T_contact, Rb, o, n, S)
    for i in range(3):  # d = Rb f (world), plain sums (no BLAS call per step)
        d[i] = Rb[i, 0] * f_cg[3] + Rb[i, 1] * f_cg[4] + Rb[i, 2] * f_cg[5]
    dn = d[0] * n[0] + d[1] * n[1] + d[2] * n[2]
    dnorm = math.sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2])
    if not (dn < -1e-12 * dnorm) or dnorm == 0.0:
        return -np.inf
    for i in range(3):  # cg in world coordinates
        r_cg[i] = Rb[i, 0] * c[0] + Rb[i, 1] * c[1] + Rb[i, 2] * c[2] + T_world[0, i, 3]
    s = ((o[0] - r_cg[0]) * n[0] + (o[1] - r_cg[1]) * n[1] + (o[2] - r_cg[2]) * n[2]) / dn
    hit0 = r_cg[0] + s * d[0]
    hit1 = r_cg[1] + s * d[1]
    hit2 = r_cg[2] + s * d[2]
    # plane basis: e1 = body x projected on the plane, e2 = n x e1
    bn = Rb[0, 0] * n[0] + Rb[1, 0] * n[1] + Rb[2, 0] * n[2]
    for i in range(3):
        e1[i] = Rb[i, 0] - bn * n[i]
    ne = math.sqrt(e1[0] ** 2 + e1[1] ** 2 + e1[2] ** 2)
    if ne < 1e-9:
        bn = Rb[0, 1] * n[0] + Rb[1, 1] * n[1] + Rb[2, 1] * n[2]
        for i in range(3):
            e1[i] = Rb[i, 1] - bn * n[i]
        ne = math.sqrt(e1[0] ** 2 + e1[1] ** 2 + e1[2] ** 2)
    for i in range(3):
        e1[i] /= ne
    e20 = n[1] * e1[2] - n[2] * e1[1]
    e21 = n[2] * e1[0] - n[0] * e1[2]
    e22 = n[0] * e1[1] - n[1] * e1[0]
    nw = T_contact.shape[0]
    for k in range(nw):
        r0 = T_contact[k, 0, 3] - o[0]
        r1 = T_contact[k, 1, 3] - o[1]
        r2 = T_contact[k, 2, 3] - o[2]
        pts[k, 0] = r0 * e1[0] + r1 * e1[1] + r2 * e1[2]
        pts[k, 1] = r0 * e20 + r1 * e21 + r2 * e22
    hr0 = hit0 - o[0]
    hr1 = hit1 - o[1]
    hr2 = hit2 - o[2]
    px = hr0 * e1[0] + hr1 * e1[1] + hr2 * e1[2]
    py = hr0 * e20 + hr1 * e21 + hr2 * e22
    h = support_polygon_into(pts, hull)
    if h == 1:
        return -math.sqrt((px - pts[hull[0], 0]) ** 2 + (py - pts[hull[0], 1]) ** 2)
    dist = np.inf
    inside = h >= 3
    for j in range(h):
        a = hull[j]
        b = hull[(j + 1) % h]
        dj = _segment_distance(px, py, pts[a, 0], pts[a, 1], pts[b, 0], pts[b, 1])
        if dj < dist:
            dist = dj
        if _cross2(pts[b, 0] - pts[a, 0], pts[b, 1] - pts[a, 1],
                   px - pts[a, 0], py - pts[a, 1]) < 0.0:
            inside = False
    return dist if inside else -dist


# ----------------------------------------------------------------------------------------------
# Python helpers
# ----------------------------------------------------------------------------------------------


def slip_axes_array(lon=None, lat=None, ang=None, normal=None) -> np.ndarray:
    """Slip directions (4, 3) [lon; lat; ang; normal] in body coordinates, validated unit vectors.

    ``None`` keeps the default (body x, y, z, z). Vectors are normalized; a zero or non-finite
    vector raises :class:`~wmr_model.errors.ParameterError` naming it.
    """
    out = DEFAULT_SLIP_AXES.copy()
    for r, (name, vec) in enumerate((("lon", lon), ("lat", lat), ("ang", ang),
                                     ("normal", normal))):
        if vec is None:
            continue
        a = np.asarray(vec, dtype=float)
        if a.shape != (3,):
            raise ShapeError(f"slip axis {name}: expected shape (3,), got {a.shape}")
        na = float(np.linalg.norm(a))
        if not (np.all(np.isfinite(a)) and na > 1e-12):
            raise ParameterError(f"slip axis {name}: must be a finite nonzero vector, "
                                 f"got {a.tolist()}")
        out[r] = a / na
    return out
