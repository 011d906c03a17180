"""Compiled per-step kernels of the stabilized-DAE kinematics (Seegmiller 2014, §2.2).

One function per algorithm/equation, written in loop form with the thesis' symbols so that the
compiled code reads like the text. These take the model's arrays (``VehicleModel
.kinematic_arrays()``) and the terrain's ``(kind, params, grid)`` explicitly, so whole simulation
loops run inside numba; :mod:`wmr_model.kinematics.api` wraps them as ``f(model, data, ...)``.

Argument names used below:

``parent, jtype, axis, T0``
    model tree arrays, (nf,), (nf,), (nf, 3), (nf, 4, 4).
``wheel_frame, wheel_radius``
    (nw,), (nw,).
``A_joint, joint_offset``
    (ncj, nv), (ncj,): holonomic joint constraints (2.26), c = A_joint[:, 6:] theta - offset.
``loop_closure``
    (nlc, LOOP_WIDTH): loop closures between two frames of the tree
    (:class:`wmr_model.vehicles.model.LoopClosureSpec`); with the joint constraints they make the
    nhc holonomic rows of :func:`holonomic_constraints`.
``track_frame, track_drive, track_path, track_act``
    track contact patches (:mod:`wmr_model.vehicles.tracks`): (ntp,) carrying frame, (ntp,) drive
    joint frame, (ntp, M, 6) sub-point positions and belt velocity per unit drive rate in the
    carrying frame, (3,) activation rule. Empty (ntp = 0) for wheeled vehicles.

Contacts are the nw wheels followed by the ntp track patches (nc = nw + ntp): ``T_contact``
(nc, 4, 4), ``dz`` (nc,), ``contact_angle`` (nc,) (for a patch: its fractional sub-point
coordinate in [0, M-1]), ``vc_xy`` (nc, 2), rows 3k..3k+2 of ``A`` for contact k.
``tkind, tparams, tgrid``
    terrain kernel arguments (:func:`wmr_model.terrain.surface.terrain_height_normal`).
``q``
    state (nq,) = [quaternion w x y z, position (3), joints (nj)].
``qdot``
    joint-space velocity (nv,) = [body angular velocity (3), body linear velocity (3), joint
    rates (nj)], body quantities in body coordinates (2.14).
"""

from __future__ import annotations

import math

import numpy as np

from wmr_model._jit import njit
from wmr_model.spatial import (
    omega_euler_rates_inv,
    quat_exp_body_into,
    quat_from_euler,
    quat_mul,
    quat_normalize,
    quat_rot_entries,
    quat_to_rot,
    rot_to_euler,
)
from wmr_model.terrain.surface import terrain_height_normal
from wmr_model.vehicles.model import LOOP_DISTANCE, LOOP_POINT, PRISMATIC, REVOLUTE
from wmr_model.vehicles.tree import compose_column, forward_kinematics

# Collision detection samples the lower wheel arc at CONTACT_FAN_POINTS contact angles spread
# +-CONTACT_FAN_HALF_SPAN about the direction opposite the terrain normal, then refines the
# minimum by two parabolic fits. 10 degree spacing resolves bumps of a tenth of the wheel radius;
# +-80 degrees reaches a step face in front of the wheel.
CONTACT_FAN_POINTS = 17
CONTACT_FAN_HALF_SPAN = math.radians(80.0)

# A track patch's contact point averages its sub-points whose Δz is within this of the patch's
# minimum [m]: 2 mm is below the activation band (tracks.TRACK_CONTACT_ON) and well above the
# Δz differences rounding or a slight pitch make along a flat patch (micrometres).
TRACK_PATCH_TOL = 0.002


# Fan offsets (j - half) * step as cosines/sines: each fan point's angle is the reference angle
# plus a constant offset, so its sine/cosine follow from the angle-sum identities without
# evaluating trigonometric functions per point.
_FAN_HALF = CONTACT_FAN_POINTS // 2
_FAN_STEP = CONTACT_FAN_HALF_SPAN / _FAN_HALF
_FAN_COS = np.cos((np.arange(CONTACT_FAN_POINTS) - _FAN_HALF) * _FAN_STEP)
_FAN_SIN = np.sin((np.arange(CONTACT_FAN_POINTS) - _FAN_HALF) * _FAN_STEP)


@njit
def _contact_height_error_sc(tkind, tparams, tgrid, p, xw, zw, R, s, c):
    """Point on the wheel circle at the contact angle with sine ``s``, cosine ``c`` (2.9) and its
    Δz (2.8).

    ``p``, ``xw``, ``zw``: wheel centre and x, z axes (world, 3-tuples) of the wheel frame
    without its spin rotation. Returns ``(Δz, r_x, r_y, r_z, n_x, n_y, n_z)``.
    """
    rx = p[0] - R * (s * xw[0] + c * zw[0])
    ry = p[1] - R * (s * xw[1] + c * zw[1])
    rz = p[2] - R * (s * xw[2] + c * zw[2])
    h, nx, ny, nz = terrain_height_normal(tkind, tparams, tgrid, rx, ry)
    # (2.8): (r_contact - r_terrain) . n with r_terrain directly below the contact point.
    return (rz - h) * nz, rx, ry, rz, nx, ny, nz


@njit
def _parabola_offset(f_minus, f0, f_plus, step):
    """Vertex abscissa, relative to the middle point and clamped to +-step, of the parabola
    through (-step, f-), (0, f0), (step, f+); 0 when it does not open upwards."""
    den = f_minus - 2.0 * f0 + f_plus
    if den <= 0.0:
        return 0.0
    off = 0.5 * step * (f_minus - f_plus) / den
    if off > step:
        off = step
    elif off < -step:
        off = -step
    return off


@njit
def _rotate_angle(s, c, sd, cd):
    """Sine and cosine of ``delta + e`` from those of ``delta`` (s, c) and ``e`` (sd, cd)."""
    return s * cd + c * sd, c * cd - s * sd


@njit
def _sin_cos_small(x):
    """Sine and cosine of a small angle (|x| <= 0.1 rad) by their Taylor series.

    Truncated after the x^9 and x^10 terms: the remainders, below x^11/11! and x^12/12!, are
    under 1e-19 for |x| <= 0.1 (3e-23 at the 2.5 degree bracket of the collision search, the
    largest offset it is used for), so this matches ``math.sin``/``math.cos`` to round-off at a
    fraction of the cost.
    """
    x2 = x * x
    sn = x * (1.0 - x2 / 6.0 * (1.0 - x2 / 20.0 * (1.0 - x2 / 42.0 * (1.0 - x2 / 72.0))))
    cs = 1.0 - x2 / 2.0 * (1.0 - x2 / 12.0 * (1.0 - x2 / 30.0 * (1.0 - x2 / 56.0
                                                                    * (1.0 - x2 / 90.0))))
    return sn, cs


@njit
def _write_contact_frame(Tc, ax, ay, az, fx, fy, fz, nx, ny, nz, rx, ry, rz):
    """Contact frame (Figure 2.3): z = n, x = unit(a x n), y = z x x, origin r.

    ``a`` is the spin (wheel) or lateral (track) axis; when it is parallel to the normal, x falls
    back to ``f`` projected onto the tangent plane (the frame's own forward axis).
    """
    cx = ay * nz - az * ny
    cy = az * nx - ax * nz
    cz = ax * ny - ay * nx
    cn = math.sqrt(cx * cx + cy * cy + cz * cz)
    if cn < 1e-6:
        d = fx * nx + fy * ny + fz * nz
        cx = fx - d * nx
        cy = fy - d * ny
        cz = fz - d * nz
        cn = math.sqrt(cx * cx + cy * cy + cz * cz)
    cx /= cn
    cy /= cn
    cz /= cn
    Tc[3, 0] = 0.0
    Tc[3, 1] = 0.0
    Tc[3, 2] = 0.0
    Tc[0, 0] = cx
    Tc[1, 0] = cy
    Tc[2, 0] = cz
    Tc[0, 1] = ny * cz - nz * cy
    Tc[1, 1] = nz * cx - nx * cz
    Tc[2, 1] = nx * cy - ny * cx
    Tc[0, 2] = nx
    Tc[1, 2] = ny
    Tc[2, 2] = nz
    Tc[0, 3] = rx
    Tc[1, 3] = ry
    Tc[2, 3] = rz
    Tc[3, 3] = 1.0


# Warm-started collision detection: a wheel moves little per step, so its contact angle is
# searched first in a bracket of +-WARM_CONTACT_BRACKET about the previous step's angle (the same
# spacing as the final refinement of the fan search, so both end at the same tolerance); while
# an end of the bracket is lower than its centre the bracket slides that way, at most
# WARM_CONTACT_MAX_WALK times. The full fan runs instead when that leaves the minimum
# unbracketed, on the first call, and whenever the wheel centre has travelled more than
# WARM_CONTACT_MAX_TRAVEL wheel radii since its last fan (so a lower contact that appears
# elsewhere on the arc - a new bump ahead - is picked up within that distance).
WARM_CONTACT_BRACKET = 0.25 * CONTACT_FAN_HALF_SPAN / (CONTACT_FAN_POINTS // 2)
WARM_CONTACT_MAX_TRAVEL = 1.0
WARM_CONTACT_MAX_WALK = 3
# The bracket points' sines and cosines follow from the centre's by the angle-sum identities.
_BRACKET_SIN = math.sin(WARM_CONTACT_BRACKET)
_BRACKET_COS = math.cos(WARM_CONTACT_BRACKET)

#: Columns of a collision workspace row (:func:`contact_workspace`): has-previous flag, the
#: wheel centre (world, 3) at the last full fan search, then the last contact angle written and
#: its sine and cosine (reused while ``contact_angle`` still holds that angle).
CONTACT_WS_WIDTH = 7


def contact_workspace(nc: int) -> np.ndarray:
    """Fresh per-trajectory collision workspace (nc, CONTACT_WS_WIDTH): no previous angle."""
    return np.zeros((nc, CONTACT_WS_WIDTH))


@njit
def _wheel_fan(tkind, tparams, tgrid, p, xw, yw, zw, R):
    """Coarse fan search of (2.8) over the lower arc plus one parabolic fit: contact angle."""
    K = CONTACT_FAN_POINTS
    half = K // 2
    step = CONTACT_FAN_HALF_SPAN / half
    # Reference direction: terrain normal below the centre, projected onto the wheel plane.
    _, n0x, n0y, n0z = terrain_height_normal(tkind, tparams, tgrid, p[0], p[1])
    dot = n0x * yw[0] + n0y * yw[1] + n0z * yw[2]
    ux = n0x - dot * yw[0]
    uy = n0y - dot * yw[1]
    uz = n0z - dot * yw[2]
    delta0 = math.atan2(ux * xw[0] + uy * xw[1] + uz * xw[2],
                        ux * zw[0] + uy * zw[1] + uz * zw[2])
    best = 0
    fbest = np.inf
    f_prev = np.inf  # fan values at best - 1, j - 1 and best + 1
    f_before = np.inf
    f_after = np.inf
    s0, c0 = math.sin(delta0), math.cos(delta0)
    for j in range(K):
        sj, cj = _rotate_angle(s0, c0, _FAN_SIN[j], _FAN_COS[j])
        f = _contact_height_error_sc(tkind, tparams, tgrid, p, xw, zw, R, sj, cj)[0]
        if f < fbest:
            fbest = f
            best = j
            f_before = f_prev
        elif j == best + 1:
            f_after = f
        f_prev = f
    d = delta0 + (best - half) * step
    if 0 < best < K - 1:
        d += _parabola_offset(f_before, fbest, f_after, step)
    return d


@njit
def wheel_contact(parent, T0, wheel_frame, wheel_radius, tkind, tparams, tgrid, T_world,
                  T_contact, dz, contact_angle, contact_ws=None):
    """Wheel-terrain collision detection for every wheel (§2.2.1, eqs. 2.8-2.9).

    The wheel is a 3D circle of radius R in the x-z plane of its frame. The contact point is the
    point of the circle with the smallest contact height error Δz (2.8); its contact angle δ
    (2.9) is measured about the wheel's y axis from its -z axis, in the wheel frame with the spin
    angle removed (spin does not move the circle). The contact frame has z along the terrain
    normal at the contact point and x along the wheel's longitudinal direction (y_wheel x n),
    Figure 2.3.

    Search: a fan of contact angles, a parabolic fit about its lowest sample, then a finer fit
    at a quarter of the fan spacing. With ``contact_ws`` (nc, CONTACT_WS_WIDTH) (per-trajectory
    workspace from :func:`contact_workspace`, carried from step to step) the search is
    warm-started from the previous ``contact_angle`` (see WARM_CONTACT_BRACKET); without it
    every call is a cold fan search.

    Writes ``T_contact`` (nw, 4, 4), ``dz`` (nw,), ``contact_angle`` (nw,) (and ``contact_ws``).
    """
    if contact_ws is None:
        _wheel_contact(parent, T0, wheel_frame, wheel_radius, tkind, tparams, tgrid, T_world,
                       T_contact, dz, contact_angle, np.zeros((0, CONTACT_WS_WIDTH)))
    else:
        _wheel_contact(parent, T0, wheel_frame, wheel_radius, tkind, tparams, tgrid, T_world,
                       T_contact, dz, contact_angle, contact_ws)


@njit
def _bracket_fit(tkind, tparams, tgrid, p, xw, zw, R, d, s0, c0, fm, e0, fp):
    """Fine parabolic fit through the bracket (d - h, d, d + h), h = WARM_CONTACT_BRACKET.

    ``fm``, ``fp``: Δz at the ends; ``e0``: :func:`_contact_height_error_sc` at the centre,
    whose sine and cosine are ``s0``, ``c0``. Returns the refined angle, its sine and cosine and
    the contact there, or the centre's when the parabola overshot (a kink in the terrain: the
    vertex is higher).
    """
    off = _parabola_offset(fm, e0[0], fp, WARM_CONTACT_BRACKET)
    so, co = _sin_cos_small(off)
    s1, c1 = _rotate_angle(s0, c0, so, co)
    e1 = _contact_height_error_sc(tkind, tparams, tgrid, p, xw, zw, R, s1, c1)
    if e0[0] < e1[0]:
        return d, s0, c0, e0
    return d + off, s1, c1, e1


@njit
def _wheel_contact(parent, T0, wheel_frame, wheel_radius, tkind, tparams, tgrid, T_world,
                   T_contact, dz, contact_angle, contact_ws):
    """:func:`wheel_contact`; ``contact_ws`` with zero rows means cold."""
    nw = wheel_frame.shape[0]
    warm = contact_ws.shape[0] > 0
    for k in range(nw):
        i = wheel_frame[k]
        R = wheel_radius[k]
        # wheel frame without its spin rotation: axes and centre (world)
        Tp = T_world[parent[i]]
        Ti = T0[i]
        xw = compose_column(Tp, Ti, 0)
        yw = compose_column(Tp, Ti, 1)
        zw = compose_column(Tp, Ti, 2)
        p = compose_column(Tp, Ti, 3)
        done = False
        if warm and contact_ws[k, 0] > 0.0:
            ex = p[0] - contact_ws[k, 1]
            ey = p[1] - contact_ws[k, 2]
            ez = p[2] - contact_ws[k, 3]
            lim = WARM_CONTACT_MAX_TRAVEL * R
            if ex * ex + ey * ey + ez * ez <= lim * lim:
                d = contact_angle[k]
                h = WARM_CONTACT_BRACKET
                if contact_ws[k, 4] == d:
                    s0, c0 = contact_ws[k, 5], contact_ws[k, 6]
                else:
                    s0, c0 = math.sin(d), math.cos(d)
                sm, cm = _rotate_angle(s0, c0, -_BRACKET_SIN, _BRACKET_COS)
                sp, cp = _rotate_angle(s0, c0, _BRACKET_SIN, _BRACKET_COS)
                em = _contact_height_error_sc(tkind, tparams, tgrid, p, xw, zw, R, sm, cm)
                e0 = _contact_height_error_sc(tkind, tparams, tgrid, p, xw, zw, R, s0, c0)
                ep = _contact_height_error_sc(tkind, tparams, tgrid, p, xw, zw, R, sp, cp)
                for _ in range(WARM_CONTACT_MAX_WALK):  # slide the bracket downhill
                    if em[0] < e0[0] and em[0] <= ep[0]:
                        d -= h
                        ep, sp, cp = e0, s0, c0
                        e0, s0, c0 = em, sm, cm
                        sm, cm = _rotate_angle(s0, c0, -_BRACKET_SIN, _BRACKET_COS)
                        em = _contact_height_error_sc(tkind, tparams, tgrid, p, xw, zw, R, sm, cm)
                    elif ep[0] < e0[0]:
                        d += h
                        em, sm, cm = e0, s0, c0
                        e0, s0, c0 = ep, sp, cp
                        sp, cp = _rotate_angle(s0, c0, _BRACKET_SIN, _BRACKET_COS)
                        ep = _contact_height_error_sc(tkind, tparams, tgrid, p, xw, zw, R, sp, cp)
                    else:
                        break
                if e0[0] <= em[0] and e0[0] <= ep[0]:  # minimum bracketed: one fine fit
                    d, s0, c0, e1 = _bracket_fit(tkind, tparams, tgrid, p, xw, zw, R, d, s0, c0,
                                                 em[0], e0, ep[0])
                    f, rx, ry, rz, nx, ny, nz = e1
                    done = True
        if not done:
            d = _wheel_fan(tkind, tparams, tgrid, p, xw, yw, zw, R)
            # Second, finer parabolic refinement about the refined angle.
            s0, c0 = math.sin(d), math.cos(d)
            sm, cm = _rotate_angle(s0, c0, -_BRACKET_SIN, _BRACKET_COS)
            sp, cp = _rotate_angle(s0, c0, _BRACKET_SIN, _BRACKET_COS)
            fm = _contact_height_error_sc(tkind, tparams, tgrid, p, xw, zw, R, sm, cm)[0]
            e0 = _contact_height_error_sc(tkind, tparams, tgrid, p, xw, zw, R, s0, c0)
            fp = _contact_height_error_sc(tkind, tparams, tgrid, p, xw, zw, R, sp, cp)[0]
            d, s0, c0, e1 = _bracket_fit(tkind, tparams, tgrid, p, xw, zw, R, d, s0, c0, fm, e0,
                                         fp)
            f, rx, ry, rz, nx, ny, nz = e1
            if warm:
                contact_ws[k, 0] = 1.0
                contact_ws[k, 1] = p[0]
                contact_ws[k, 2] = p[1]
                contact_ws[k, 3] = p[2]
        dz[k] = f
        contact_angle[k] = d
        if warm:
            contact_ws[k, 4] = d
            contact_ws[k, 5] = s0
            contact_ws[k, 6] = c0
        # Contact frame axes: z = n, x = y_wheel x n (longitudinal), y = z x x (lateral).
        _write_contact_frame(T_contact[k], yw[0], yw[1], yw[2], xw[0], xw[1], xw[2],
                             nx, ny, nz, rx, ry, rz)


@njit
def chain_point_jacobian(parent, jtype, axis, T_world, i, p, sign, W):
    """Add ``sign`` times the joint columns of the world velocity of point ``p`` (3,).

    ``p`` (world coordinates) moves with frame ``i``; the loop runs from frame ``i`` up the
    chain to the body (2.19): a revolute joint contributes ``axis x (p - r_j)`` (Algorithm 2
    line 6), a prismatic joint its axis (line 8). Body columns are not touched. ``W`` (3, nv).
    """
    _chain_point_rows(parent, jtype, axis, T_world, i, p[0], p[1], p[2], sign, W, 0)


@njit
def _chain_point_rows(parent, jtype, axis, T_world, i, px, py, pz, sign, W, r0):
    """:func:`chain_point_jacobian` of the point (px, py, pz) into rows r0..r0+2 of ``W``."""
    while i > 0:
        ax, ay, az = _compose_axis(T_world, i, axis)
        if jtype[i] == REVOLUTE:
            dx = px - T_world[i, 0, 3]
            dy = py - T_world[i, 1, 3]
            dz = pz - T_world[i, 2, 3]
            W[r0, 5 + i] += sign * (ay * dz - az * dy)
            W[r0 + 1, 5 + i] += sign * (az * dx - ax * dz)
            W[r0 + 2, 5 + i] += sign * (ax * dy - ay * dx)
        elif jtype[i] == PRISMATIC:
            W[r0, 5 + i] += sign * ax
            W[r0 + 1, 5 + i] += sign * ay
            W[r0 + 2, 5 + i] += sign * az
        i = parent[i]


@njit
def _compose_axis(T_world, i, axis):
    """Joint axis of frame ``i`` in world coordinates, ``R_i axis[i]`` (3-tuple)."""
    return ((T_world[i, 0, 0] * axis[i, 0] + T_world[i, 0, 1] * axis[i, 1]
             + T_world[i, 0, 2] * axis[i, 2]),
            (T_world[i, 1, 0] * axis[i, 0] + T_world[i, 1, 1] * axis[i, 1]
             + T_world[i, 1, 2] * axis[i, 2]),
            (T_world[i, 2, 0] * axis[i, 0] + T_world[i, 2, 1] * axis[i, 1]
             + T_world[i, 2, 2] * axis[i, 2]))


@njit
def wheel_jacobian(parent, jtype, axis, wheel_frame, T_world, T_contact, k, out):
    """Wheel Jacobian of wheel ``k``: ``A_wheel qdot = v_c`` in contact coordinates, Algorithm 2.

    Loops from the wheel frame up the chain to the body (2.19), adding each joint's contribution
    to the contact point velocity (2.23): a revolute joint contributes ``axis x (r_c - r_i)``
    (Alg. 2 line 6), a prismatic joint its axis (line 8), the body ``[r_c - r_b]^T_x R_b`` and
    ``R_b`` (lines 12-13); the result is rotated into contact coordinates (line 14).
    ``out`` (3, nv) is overwritten.
    """
    _wheel_jacobian_rows(parent, jtype, axis, wheel_frame[k], T_world, T_contact, k, out, 0)


@njit
def _wheel_jacobian_rows(parent, jtype, axis, i, T_world, T_contact, k, out, r0):
    """:func:`wheel_jacobian` of contact ``k`` carried by frame ``i``, into rows r0..r0+2 of
    ``out`` (the world-frame Jacobian is built there, then rotated in place column by column)."""
    nv = out.shape[1]
    for r in range(r0, r0 + 3):
        for j in range(nv):
            out[r, j] = 0.0
    rx, ry, rz = T_contact[k, 0, 3], T_contact[k, 1, 3], T_contact[k, 2, 3]
    _chain_point_rows(parent, jtype, axis, T_world, i, rx, ry, rz, 1.0, out, r0)
    d0 = rx - T_world[0, 0, 3]
    d1 = ry - T_world[0, 1, 3]
    d2 = rz - T_world[0, 2, 3]
    # [d]_x^T R_b = -[d]_x R_b: column j is -(d x R_b[:, j]) = R_b[:, j] x d
    for j in range(3):
        b0, b1, b2 = T_world[0, 0, j], T_world[0, 1, j], T_world[0, 2, j]
        out[r0, j] = b1 * d2 - b2 * d1
        out[r0 + 1, j] = b2 * d0 - b0 * d2
        out[r0 + 2, j] = b0 * d1 - b1 * d0
        out[r0, 3 + j] = b0
        out[r0 + 1, 3 + j] = b1
        out[r0 + 2, 3 + j] = b2
    # line 14: A_wheel = (R_c^w)^T A_wheel (columns of joints off the chain stay zero)
    for j in range(nv):
        w0, w1, w2 = out[r0, j], out[r0 + 1, j], out[r0 + 2, j]
        if w0 == 0.0 and w1 == 0.0 and w2 == 0.0:
            continue
        for r in range(3):
            out[r0 + r, j] = (T_contact[k, 0, r] * w0 + T_contact[k, 1, r] * w1
                              + T_contact[k, 2, r] * w2)


@njit
def track_activation(dz, track_act):
    """Contact weight ``w_t`` of a track patch from its contact height error (tracks.py).

    1 for ``dz <= d_on``, 0 for ``dz >= d_off``, a C1 cubic blend in between. The tangential
    rows are scaled by ``w_t``, the normal row by ``w_min + (1 - w_min) w_t``.
    """
    d_on = track_act[0]
    d_off = track_act[1]
    if dz <= d_on:
        return 1.0
    if dz >= d_off:
        return 0.0
    x = (dz - d_on) / (d_off - d_on)
    return 1.0 - x * x * (3.0 - 2.0 * x)


@njit
def _patch_point(track_path, k, u, out):
    """Sub-point data of patch k at fractional coordinate u (linear between sub-points)."""
    M = track_path.shape[1]
    j = int(math.floor(u))
    if j >= M - 1:
        j = M - 2
    if j < 0:
        j = 0
    f = u - j
    for c in range(6):
        out[c] = (1.0 - f) * track_path[k, j, c] + f * track_path[k, j + 1, c]


@njit
def _patch_height_error(tkind, tparams, tgrid, T, pl):
    """World position of the track-frame point ``pl`` and its contact height error Δz (2.8).

    (2.8) measures the point against the tangent plane of the terrain directly below it,
    ``d1 = (r_z - h) n_z``. Just past a convex edge (a stair nosing, a pallet edge) that plane is
    the face below the edge - a near-vertical riser whose extension passes millimetres from a
    point that is centimetres above the edge - so ``d1`` reports a phantom contact with a
    horizontal normal. The terrain is therefore also sampled at the foot of ``d1``,
    ``f = r - d1 n``, and the distance ``d2 = (r - r_f) . n_f`` to the tangent plane there is
    taken when larger: at a convex edge both planes bound the terrain, so the larger is the
    better lower bound of the distance; on a smooth surface ``d2 = d1`` to second order, and at
    a concave corner the foot normally lies on the terrain itself (``d2 = d1``). Returns ``(Δz, r_x,
    r_y, r_z, n_x, n_y, n_z)`` with the normal of the plane used.
    """
    rx = T[0, 0] * pl[0] + T[0, 1] * pl[1] + T[0, 2] * pl[2] + T[0, 3]
    ry = T[1, 0] * pl[0] + T[1, 1] * pl[1] + T[1, 2] * pl[2] + T[1, 3]
    rz = T[2, 0] * pl[0] + T[2, 1] * pl[1] + T[2, 2] * pl[2] + T[2, 3]
    h, nx, ny, nz = terrain_height_normal(tkind, tparams, tgrid, rx, ry)
    d1 = (rz - h) * nz
    # foot of the perpendicular on the tangent plane below the point, and the terrain there
    fx = rx - d1 * nx
    fy = ry - d1 * ny
    h2, mx, my, mz = terrain_height_normal(tkind, tparams, tgrid, fx, fy)
    d2 = (rx - fx) * mx + (ry - fy) * my + (rz - h2) * mz
    if d2 > d1:
        return d2, rx, ry, rz, mx, my, mz
    return d1, rx, ry, rz, nx, ny, nz


@njit
def _belt_adjacent(track_frame, track_path, k):
    """True when patches k and k + 1 follow each other along one belt (same frame, shared end
    sub-point, as :func:`wmr_model.vehicles.tracks.sample_track` lays them out)."""
    M = track_path.shape[1]
    if track_frame[k] != track_frame[k + 1]:
        return False
    for c in range(3):
        if abs(track_path[k, M - 1, c] - track_path[k + 1, 0, c]) > 1e-12:
            return False
    return True


@njit
def _belt_lowest_patch(track_frame, track_path, dz):
    """For every patch (``dz`` (ntp,)), the patch of smallest Δz on the same belt (the run of
    adjacent patches it belongs to, :func:`_belt_adjacent`); (ntp,) int."""
    ntp = track_frame.shape[0]
    low = np.empty(ntp, dtype=np.int64)
    k0 = 0
    while k0 < ntp:
        k1 = k0
        while k1 + 1 < ntp and _belt_adjacent(track_frame, track_path, k1):
            k1 += 1
        best = k0
        for k in range(k0, k1 + 1):
            if dz[k] < dz[best]:
                best = k
        for k in range(k0, k1 + 1):
            low[k] = best
        k0 = k1 + 1
    return low


@njit
def _belt_closest_point(track_frame, track_path, f, k, reach):
    """Belt point closest to the terrain: ``(patch, fractional sub-point coordinate)``.

    Centroid of the sub-points whose Δz (``f`` (ntp, M)) is within :data:`TRACK_PATCH_TOL` of
    the minimum, weighted ``(1 - (Δz_j - Δz_min) / tol)^2``, over patch k alone (``reach``
    False) or over patch k and the patches adjacent to it along the same belt (``reach`` True;
    shared end sub-points counted once).
    """
    M = track_path.shape[1]
    k0 = k
    k1 = k
    if reach:
        if k > 0 and _belt_adjacent(track_frame, track_path, k - 1):
            k0 = k - 1
        if k + 1 < track_frame.shape[0] and _belt_adjacent(track_frame, track_path, k):
            k1 = k + 1
    fbest = np.inf
    for kk in range(k0, k1 + 1):
        for j in range(M):
            if f[kk, j] < fbest:
                fbest = f[kk, j]
    sw = 0.0
    su = 0.0
    for kk in range(k0, k1 + 1):
        for j in range(0 if kk == k0 else 1, M):
            x = (f[kk, j] - fbest) / TRACK_PATCH_TOL
            if x < 1.0:
                w = (1.0 - x) * (1.0 - x)
                sw += w
                su += w * ((kk - k0) * (M - 1) + j)
    X = su / sw
    kk = k0 + min(int(X // (M - 1)), k1 - k0)
    return kk, X - (kk - k0) * (M - 1)


@njit
def track_contact(track_frame, track_path, tkind, tparams, tgrid, T_world, nw, T_contact, dz,
                  contact_angle):
    """Belt-terrain collision detection for every track patch (the track analogue of 2.8-2.9).

    Patch k is the belt between its M sub-points (``track_path[k, :, 0:3]`` in the frame
    ``track_frame[k]``). Its contact height error Δz is the smallest sub-point Δz (2.8), edge
    corrected (:func:`_patch_height_error`); its contact point is the centroid of the
    sub-points near that minimum (:func:`_belt_closest_point`) - the patch centre on flat
    ground (a belt lying on the ground bears along its length), the lowest sub-point on an
    edge, and continuous in the state in between. Its fractional sub-point coordinate goes to
    ``contact_angle[nw + k]``.

    The contact frame has z along the belt's inward normal and x = y_track x n (the belt's
    longitudinal direction), as for a wheel (Figure 2.3), taken at the belt's closest point
    over the patch *and its neighbours along the belt*: where the patch's own closest point is
    its end sub-point and the belt keeps approaching the terrain beyond it (a patch on an end
    arc next to the lower run, hovering above flat ground) the belt touches the terrain in the
    neighbour, and the patch's rows take that contact's directions. The patch's own belt
    normal there is tilted by the arc angle, so a level translation would read as approach
    (front) and separation (rear) in its normal row and demand a pitch rate. Where the patch's
    closest point is its own (an edge under the belt, a lower run on the ground) or the belt
    is straight across the neighbours, the two agree. Writes entries ``nw .. nw + ntp - 1`` of
    ``T_contact``, ``dz``, ``contact_angle``.
    """
    ntp = track_frame.shape[0]
    M = track_path.shape[1]
    f = np.empty((ntp, M))
    pl = np.empty(6)
    for k in range(ntp):
        T = T_world[track_frame[k]]
        for j in range(M):
            f[k, j] = _patch_height_error(tkind, tparams, tgrid, T, track_path[k, j])[0]
    for k in range(ntp):
        T = T_world[track_frame[k]]
        u = _belt_closest_point(track_frame, track_path, f, k, False)[1]
        _patch_point(track_path, k, u, pl)
        rx, ry, rz = _patch_height_error(tkind, tparams, tgrid, T, pl)[1:4]
        # contact normal: the belt's inward normal at the closest point near the patch,
        # (b_z, 0, -b_x) / |b| in the track frame (b the belt velocity per unit rate, tangent
        # to the belt); neighbours along one belt share its frame
        kb, ub = _belt_closest_point(track_frame, track_path, f, k, True)
        _patch_point(track_path, kb, ub, pl)
        bn = math.sqrt(pl[3] * pl[3] + pl[5] * pl[5])
        mx = pl[5] / bn
        mz = -pl[3] / bn
        nx = T[0, 0] * mx + T[0, 2] * mz
        ny = T[1, 0] * mx + T[1, 2] * mz
        nz = T[2, 0] * mx + T[2, 2] * mz
        c = nw + k
        fbest = np.inf
        for j in range(M):
            if f[k, j] < fbest:
                fbest = f[k, j]
        dz[c] = fbest
        contact_angle[c] = u
        # x = y_track x n (along the belt); the fallback (a belt normal along y_track) cannot
        # occur since n lies in the track frame's x-z plane.
        _write_contact_frame(T_contact[c], T[0, 1], T[1, 1], T[2, 1], T[0, 0], T[1, 0],
                             T[2, 0], nx, ny, nz, rx, ry, rz)


@njit
def track_point_jacobian(parent, jtype, axis, track_frame, track_drive, track_path, T_world,
                         T_contact, contact_angle, nw, k, belt, out):
    """Jacobian of track patch k's belt point: ``A_k qdot = v_c`` in contact coordinates.

    The point is fixed in the track frame, so its rigid-body part is Algorithm 2 from that
    frame up to the body (:func:`wheel_jacobian` applied to the track frame). The belt slides
    over the frame along its own surface at the belt speed ``|b| theta_dot_s`` (``b`` the belt
    velocity per unit drive rate, :mod:`wmr_model.vehicles.tracks`), the contact surface motion of
    seed 003; it enters the column of the drive joint ``s`` along the contact's longitudinal axis x
    (the belt direction where the belt meets the terrain, :func:`track_contact`), signed as
    the belt moves there:

    .. math:: A_k[:, s] \\mathrel{+}= \\pm |b| \\, e_x

    The belt speed is the same all round the loop, and the belt moving along its surface
    changes no gap: the normal row has no belt term. (Projecting the patch's own belt direction
    instead gives a patch on an end arc, whose contact axes are those of the neighbouring
    lower-run contact, a speed short by the arc's cosine and a normal term that pumps the body
    in pitch.)

    ``out`` (3, nv) is overwritten; ``belt`` (3,) receives the belt term alone (contact
    coordinates), so callers can separate the rigid part.
    """
    wheel_jacobian(parent, jtype, axis, track_frame, T_world, T_contact[nw:], k, out)
    pl = np.empty(6)
    _patch_point(track_path, k, contact_angle[nw + k], pl)
    T = T_world[track_frame[k]]
    Tc = T_contact[nw + k]
    col = 5 + track_drive[k]
    bx = 0.0
    for r in range(3):
        bx += Tc[r, 0] * (T[r, 0] * pl[3] + T[r, 1] * pl[4] + T[r, 2] * pl[5])
    speed = math.sqrt(track_path[k, 0, 3] ** 2 + track_path[k, 0, 4] ** 2
                      + track_path[k, 0, 5] ** 2)
    belt[0] = speed if bx >= 0.0 else -speed
    belt[1] = 0.0
    belt[2] = 0.0
    out[0, col] += belt[0]


@njit
def joint_constraint_residual(A_joint, joint_offset, q, c):
    """Holonomic joint constraint values c = A_joint[:, 6:] theta - offset, (2.25), (E.1)."""
    nj = q.shape[0] - 7
    for r in range(A_joint.shape[0]):
        s = -joint_offset[r]
        for k in range(nj):
            s += A_joint[r, 6 + k] * q[7 + k]
        c[r] = s


@njit
def _loop_rows_of(kind):
    """Constraint rows of one loop closure: 3 point, 1 distance, 2 point on axis."""
    if kind == LOOP_POINT:
        return 3
    if kind == LOOP_DISTANCE:
        return 1
    return 2


@njit
def loop_closure_rows(loop_closure):
    """Number of constraint rows nlr of the loop closures."""
    n = 0
    for l in range(loop_closure.shape[0]):
        n += _loop_rows_of(int(loop_closure[l, 0]))
    return n


@njit
def _frame_point(T, p, out):
    """World coordinates of point ``p`` (3,) given in the frame with transform ``T``."""
    for r in range(3):
        out[r] = T[r, 0] * p[0] + T[r, 1] * p[1] + T[r, 2] * p[2] + T[r, 3]


@njit
def holonomic_constraints(parent, jtype, axis, A_joint, joint_offset, loop_closure, q, T_world,
                          c, Jc):
    """Holonomic constraint residuals ``c`` (nhc,) and Jacobian ``Jc`` (nhc, nv), (2.25)-(2.26).

    Rows ``0..ncj-1`` are the linear joint constraints (``A_joint``, constant). Then each loop
    closure between point ``a`` of frame ``f_a`` and point ``b`` of frame ``f_b`` (``T_world``
    from Algorithm 1 for ``q``), with ``d = r_a - r_b`` in world coordinates:

    * point: ``c = R_b^T d`` (3 rows, body coordinates so that c depends on theta only);
    * point on axis: ``c_k = e_k . d`` for the two unit normals ``e_k`` of the axis, carried by
      ``f_b`` (2 rows);
    * distance: ``c = |d| - L`` (1 row).

    The Jacobian rows follow from the chain point Jacobians (Algorithm 2) of the two points,
    ``J_d = J_a - J_b`` (joint columns); a normal carried by ``f_b`` adds, for each revolute
    joint j on its chain, ``a_j . (e_k x d)`` (``de_k/dt = w_fb x e_k``). The body columns are
    zero (a rigid motion of the whole tree leaves every row unchanged), so the rows enter (2.36)
    like ``A_joint``: ``Jc qdot = -sigma c``.
    """
    ncj = A_joint.shape[0]
    nv = Jc.shape[1]
    if ncj > 0:
        joint_constraint_residual(A_joint, joint_offset, q, c)
        for r in range(ncj):
            for j in range(nv):
                Jc[r, j] = A_joint[r, j]
    ra = np.empty(3)
    rb = np.empty(3)
    d = np.empty(3)
    e = np.empty(3)
    ax = np.empty(3)
    Jd = np.empty((3, nv))
    row = ncj
    for l in range(loop_closure.shape[0]):
        kind = int(loop_closure[l, 0])
        fa = int(loop_closure[l, 1])
        fb = int(loop_closure[l, 2])
        _frame_point(T_world[fa], loop_closure[l, 3:6], ra)
        _frame_point(T_world[fb], loop_closure[l, 6:9], rb)
        for r in range(3):
            d[r] = ra[r] - rb[r]
        Jd[:, :] = 0.0
        chain_point_jacobian(parent, jtype, axis, T_world, fa, ra, 1.0, Jd)
        chain_point_jacobian(parent, jtype, axis, T_world, fb, rb, -1.0, Jd)
        if kind == LOOP_POINT:
            for k in range(3):
                c[row + k] = (T_world[0, 0, k] * d[0] + T_world[0, 1, k] * d[1]
                              + T_world[0, 2, k] * d[2])
                for j in range(nv):
                    Jc[row + k, j] = (T_world[0, 0, k] * Jd[0, j] + T_world[0, 1, k] * Jd[1, j]
                                      + T_world[0, 2, k] * Jd[2, j])
        elif kind == LOOP_DISTANCE:
            n = math.sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2])
            c[row] = n - loop_closure[l, 15]
            n = max(n, 1e-12)  # coincident points: direction undefined (|d| = L > 0 normally)
            for j in range(nv):
                Jc[row, j] = (d[0] * Jd[0, j] + d[1] * Jd[1, j] + d[2] * Jd[2, j]) / n
        else:
            for k in range(2):
                el = loop_closure[l, 9 + 3 * k:12 + 3 * k]
                for r in range(3):
                    e[r] = (T_world[fb, r, 0] * el[0] + T_world[fb, r, 1] * el[1]
                            + T_world[fb, r, 2] * el[2])
                c[row + k] = e[0] * d[0] + e[1] * d[1] + e[2] * d[2]
                for j in range(nv):
                    Jc[row + k, j] = e[0] * Jd[0, j] + e[1] * Jd[1, j] + e[2] * Jd[2, j]
                x0 = e[1] * d[2] - e[2] * d[1]  # e x d, dotted with f_b's revolute axes
                x1 = e[2] * d[0] - e[0] * d[2]
                x2 = e[0] * d[1] - e[1] * d[0]
                i = fb
                while i > 0:
                    if jtype[i] == REVOLUTE:
                        for r in range(3):
                            ax[r] = (T_world[i, r, 0] * axis[i, 0] + T_world[i, r, 1] * axis[i, 1]
                                     + T_world[i, r, 2] * axis[i, 2])
                        Jc[row + k, 5 + i] += ax[0] * x0 + ax[1] * x1 + ax[2] * x2
                    i = parent[i]
        nrow = _loop_rows_of(kind)
        for r in range(row, row + nrow):
            for j in range(6):
                Jc[r, j] = 0.0
        row += nrow


# Loop-closure projection (:func:`project_loop_closures`): Gauss-Newton iterations and the
# residual [m] at which they stop. Baumgarte stabilization (2.36) alone leaves a residual of the
# order of the O(dt^2) drift per step divided by sigma dt (1e-5 m for a suspension at dt = 0.01 s);
# the projection takes it to round-off in one or two iterations since the drift per step is small.
LOOP_PROJECTION_ITERATIONS = 4
LOOP_PROJECTION_TOL = 1e-12


@njit
def project_loop_closures(parent, jtype, axis, T0, loop_closure, movable, q, T_world):
    """Move the joints of ``q`` (in place) onto the loop-closure manifold c(theta) = 0.

    Minimum-norm Gauss-Newton steps ``dtheta = -J^+ c`` on the loop rows of
    :func:`holonomic_constraints` (SVD pseudoinverse, so redundant rows are harmless) over the
    joints with ``movable[6 + k]`` True (``movable`` (nv,) bool: commanded joints stay where
    the integration put them). Joints that no closure involves (wheel spin, ...) have zero
    columns and do not move either. This
    coordinate projection after each integration step complements the Baumgarte term (2.36);
    ``T_world`` (nf, 4, 4) is overwritten. Returns the final max |c| [m].
    """
    nlr = loop_closure_rows(loop_closure)
    nv = q.shape[0] - 1
    if nlr == 0:
        return 0.0
    empty_A = np.zeros((0, nv))
    empty_b = np.zeros(0)
    c = np.empty(nlr)
    Jc = np.empty((nlr, nv))
    cmax = 0.0
    for it in range(LOOP_PROJECTION_ITERATIONS + 1):
        forward_kinematics(parent, jtype, axis, T0, q, T_world)
        holonomic_constraints(parent, jtype, axis, empty_A, empty_b, loop_closure, q, T_world, c,
                              Jc)
        cmax = 0.0
        for r in range(nlr):
            cmax = max(cmax, abs(c[r]))
        if cmax <= LOOP_PROJECTION_TOL or it == LOOP_PROJECTION_ITERATIONS:
            break
        for j in range(6, nv):
            if not movable[j]:
                for r in range(nlr):
                    Jc[r, j] = 0.0
        dth = np.linalg.lstsq(np.ascontiguousarray(Jc[:, 6:]), -c, rcond=1e-10)[0]
        for k in range(nv - 6):
            q[7 + k] += dth[k]
    return cmax


@njit
def constraint_system(m, d, q, sigma, vc_xy):
    """Stacked constraint system ``A qdot = v`` with Baumgarte stabilization, (2.33)-(2.36).

    Rows ``3k..3k+2`` are wheel k's Jacobian (2.24) with right-hand side ``[vx, vy, -sigma Δz]``
    (2.35) where ``vc_xy`` (nc, 2) holds the commanded contact slip velocities (zero for
    no-slip kinematics; nonzero from enhanced kinematics, 2.52). Track patches follow the
    wheels (rows ``3(nw + k)``, :func:`track_point_jacobian`) with the same right-hand side and
    the activation rule of :mod:`wmr_model.vehicles.tracks`: tangential rows scaled by ``w_t``
    (:func:`track_activation`), the normal row by ``w_n = w_min + (1 - w_min) w_t`` with its
    Δz capped at ``d_off`` (a patch clear of the terrain keeps only a faint pull of its rigid
    point). The normal row holds the rigid motion of the point only (the belt changes no gap),
    along ``w_t n_k + (1 - w_t) n_low`` normalized, ``n_k`` the patch's contact normal and
    ``n_low`` that of the lowest patch of its belt (:func:`_belt_lowest_patch`): a clear
    patch pulls toward the terrain along the normal where its belt meets it, so a level
    translation never reads as approach or separation through a tilted belt. The
    solve then releases track patches in tension (:func:`release_track_adhesion`). The last
    nhc rows are the holonomic constraints
    (:func:`holonomic_constraints`: joint constraints, then loop closures) with ``-sigma c``
    (2.36). Reads the model ``m`` and the contact fields of the workspace ``d``
    (:class:`wmr_model.kinematics.data.KernelData`: ``T_world``, ``T_contact``, ``dz``,
    ``contact_angle``); writes ``d.A`` (3 nc + nhc, nv) and ``d.v``.
    """
    parent, jtype, axis, wheel_frame = m.parent, m.jtype, m.axis, m.wheel_frame
    track_frame, track_drive, track_path, track_act = (m.track_frame, m.track_drive,
                                                       m.track_path, m.track_act)
    T_world, T_contact, dz, contact_angle, A, v = (d.T_world, d.T_contact, d.dz,
                                                   d.contact_angle, d.A, d.v)
    nw = wheel_frame.shape[0]
    ntp = track_frame.shape[0]
    nc = nw + ntp
    nv = A.shape[1]
    for k in range(nw):
        _wheel_jacobian_rows(parent, jtype, axis, wheel_frame[k], T_world, T_contact, k, A, 3 * k)
        v[3 * k] = vc_xy[k, 0]
        v[3 * k + 1] = vc_xy[k, 1]
        v[3 * k + 2] = -sigma * dz[k]
    if ntp > 0:
        blk = np.empty((3, nv))
        belt = np.empty(3)
        low = _belt_lowest_patch(track_frame, track_path, dz[nw:])
    for k in range(ntp):
        c = nw + k
        track_point_jacobian(parent, jtype, axis, track_frame, track_drive, track_path,
                             T_world, T_contact, contact_angle, nw, k, belt, blk)
        wt = track_activation(dz[c], track_act)
        wn = track_act[2] + (1.0 - track_act[2]) * wt
        for j in range(nv):
            A[3 * c, j] = wt * blk[0, j]
            A[3 * c + 1, j] = wt * blk[1, j]
        # normal row: rigid part only (the belt changes no gap), along the patch's own normal
        # in contact, turning to the normal of its belt's closest patch as it clears
        for i in range(3):
            blk[i, 5 + track_drive[k]] -= belt[i]
        Tc = T_contact[c]
        Tl = T_contact[nw + low[k]]
        u = np.empty(3)
        mn = 0.0
        for i in range(3):
            acc = 0.0
            for r in range(3):
                acc += Tc[r, i] * (wt * Tc[r, 2] + (1.0 - wt) * Tl[r, 2])
            u[i] = acc
            mn += acc * acc
        if mn < 1e-18:  # opposite normals half-way: keep the patch's own
            u[:] = 0.0
            u[2] = 1.0
            mn = 1.0
        mn = wn / math.sqrt(mn)
        for j in range(nv):
            A[3 * c + 2, j] = mn * (u[0] * blk[0, j] + u[1] * blk[1, j] + u[2] * blk[2, j])
        v[3 * c] = wt * vc_xy[c, 0]
        v[3 * c + 1] = wt * vc_xy[c, 1]
        v[3 * c + 2] = -wn * sigma * min(dz[c], track_act[1])
    nh = A.shape[0] - 3 * nc
    if nh > 0:
        ch = np.empty(nh)
        holonomic_constraints(parent, jtype, axis, m.A_joint, m.joint_offset, m.loop_closure,
                              q, T_world, ch, A[3 * nc:])
        for r in range(nh):
            v[3 * nc + r] = -sigma * ch[r]


# A track patch in contact is released when the solution moves it away from the terrain faster
# than its normal row asks, by more than TRACK_RELEASE_TOL [m/s]: the row is then holding the
# belt down, which a contact cannot do. 1e-6 m/s is far below any commanded speed and far above
# the round-off of the solve. At most TRACK_RELEASE_PASSES re-solves per state (active set).
TRACK_RELEASE_TOL = 1e-6
TRACK_RELEASE_PASSES = 4


@njit
def release_track_adhesion(nw, dz, track_act, A, v, known, qdot_known, qdot, res, ws=None):
    """One-sided track contacts: release the patches whose normal row pulls the belt down.

    The least-squares solve (2.38) treats every row as an equality, so a patch in contact
    (``w_t > 0``, :func:`track_activation`) also resists lifting off: with the faint pull of the
    clear patches as the only gravity-like load, a body resting on two edges ahead of its
    centre (a flipper tip and a pulley on the floor below a stair, the pallet's edge and the
    ground behind it) would stay there. For each such patch the normal-row residual
    ``(A_n qdot - v_n) / w_n`` is its separation rate beyond its Baumgarte target; where it
    exceeds :data:`TRACK_RELEASE_TOL` the patch's three rows (and right-hand sides) are scaled
    to the clear-patch weight ``w_min`` and the system is solved again, until no patch in
    contact is in tension (at most :data:`TRACK_RELEASE_PASSES` passes). Rows of ``A``, ``v``
    are modified in place (so a later re-solve, e.g. enhanced kinematics, keeps them); writes
    ``qdot``; returns the residual norm. Contacts are rows ``3 (nw + k)`` as in
    :func:`constraint_system`. ``ws``: the scratch of :func:`solve_partitioned` (then holding
    the factor of the last solve).
    """
    nc = dz.shape[0]
    nv = A.shape[1]
    w_min = track_act[2]
    released = np.zeros(nc, dtype=np.bool_)
    for _ in range(TRACK_RELEASE_PASSES):
        changed = False
        for c in range(nw, nc):
            if released[c]:
                continue
            wt = track_activation(dz[c], track_act)
            if wt <= 0.0:
                continue
            wn = w_min + (1.0 - w_min) * wt
            r = 3 * c + 2
            e = -v[r]
            for j in range(nv):
                e += A[r, j] * qdot[j]
            if e > TRACK_RELEASE_TOL * wn:
                s = w_min / wn
                for i in range(3 * c, 3 * c + 3):
                    v[i] *= s
                    for j in range(nv):
                        A[i, j] *= s
                released[c] = True
                changed = True
        if not changed:
            break
        res = solve_partitioned(A, v, known, qdot_known, qdot, ws)
    return res


# Relative pivot below which the normal-equation Cholesky is treated as rank deficient and the
# solve falls back to the SVD pseudoinverse (2.38): 1e-10 relative to the largest diagonal keeps
# the normal equations' squared condition number well inside double precision.
CHOLESKY_PIVOT_RTOL = 1e-10


@njit
def cholesky_factor(H, Lf, rtol):
    """Lower Cholesky factor ``Lf`` (n, n) of the symmetric ``H`` (n, n), ``H = Lf Lf^T``.

    Only the lower triangle of ``Lf`` is written; ``Lf`` may be ``H`` (in place). Returns False
    (``Lf`` incomplete) when a pivot is <= 0 or <= ``rtol`` times the largest diagonal of ``H``
    (``rtol = 0``: not positive definite to round-off).
    """
    n = H.shape[0]
    dmax = 0.0
    for i in range(n):
        if H[i, i] > dmax:
            dmax = H[i, i]
    for j in range(n):
        d = H[j, j]
        for k in range(j):
            d -= Lf[j, k] * Lf[j, k]
        if d <= rtol * dmax or d <= 0.0:
            return False
        d = math.sqrt(d)
        Lf[j, j] = d
        for i in range(j + 1, n):
            acc = H[i, j]
            for k in range(j):
                acc -= Lf[i, k] * Lf[j, k]
            Lf[i, j] = acc / d
    return True


@njit
def cholesky_solve(Lf, b, x):
    """``x = (Lf Lf^T)^{-1} b`` by forward and back substitution; ``x`` may be ``b``."""
    n = Lf.shape[0]
    for i in range(n):  # Lf y = b
        acc = b[i]
        for k in range(i):
            acc -= Lf[i, k] * x[k]
        x[i] = acc / Lf[i, i]
    for i in range(n - 1, -1, -1):  # Lf^T x = y
        acc = x[i]
        for k in range(i + 1, n):
            acc -= Lf[k, i] * x[k]
        x[i] = acc / Lf[i, i]


@njit
def solve_workspace(m, known, residual=True):
    """Scratch of :func:`solve_partitioned` for ``m`` constraint rows and the unknown set of
    ``known`` (nv,) bool: ``(idx, rhs, N, x, info)`` with the unknown indices ``idx`` (nv,),
    the right-hand side ``rhs`` (m,), the normal matrix and then its Cholesky factor ``N``
    (nu, nu), ``x`` (nv,) and ``info`` = [nu, 1 when ``N`` holds the factor else 0, 1 when
    the solves return the residual norm else 0].

    After a solve it keeps the index set and the factor of that solve's ``A``, for
    :func:`resolve_partitioned`. The simulation loops carry one per trajectory, made with
    ``residual=False`` (they do not use it): the solves then return NaN instead of computing
    ``|A qdot - v|``.
    """
    nv = known.shape[0]
    nu = 0
    for j in range(nv):
        if not known[j]:
            nu += 1
    info = np.zeros(3, dtype=np.int64)
    info[2] = 1 if residual else 0
    return (np.empty(nv, dtype=np.int64), np.empty(m), np.empty((nu, nu)), np.empty(nv), info)


@njit
def _known_rhs(A, v, known, qdot_known, qdot, rhs):
    """``rhs = v - A[:, known] qdot[known]`` (2.37), and the known entries of ``qdot``."""
    m, nv = A.shape
    for r in range(m):
        rhs[r] = v[r]
    for j in range(nv):
        if known[j]:
            qdot[j] = qdot_known[j]
            if qdot_known[j] != 0.0:
                for r in range(m):
                    rhs[r] -= A[r, j] * qdot_known[j]


@njit
def _lstsq_unknown(A, idx, nu, rhs, x):
    """Minimum-norm least-squares ``x[:nu]`` of ``A[:, idx[:nu]] x = rhs`` (SVD, (2.38))."""
    m = A.shape[0]
    Au = np.empty((m, nu))
    for a in range(nu):
        for r in range(m):
            Au[r, a] = A[r, idx[a]]
    x[:nu] = np.linalg.lstsq(Au, rhs, rcond=1e-10)[0]


@njit
def _residual_norm(A, v, qdot):
    """``|A qdot - v|``."""
    m, nv = A.shape
    res = 0.0
    for r in range(m):
        s = -v[r]
        for j in range(nv):
            s += A[r, j] * qdot[j]
        res += s * s
    return math.sqrt(res)


@njit
def solve_partitioned(A, v, known, qdot_known, qdot, ws=None):
    """Least-squares solve of the partitioned system, (2.37)-(2.38).

    ``known`` (nv,) bool marks elements of qdot whose values are given in ``qdot_known`` (nv,)
    (other entries ignored). Solves ``A[:, unknown] x = v - A[:, known] qdot[known]`` in the
    least-squares sense and writes the full ``qdot`` (nv,). When ``A[:, unknown]`` has full column
    rank the pseudoinverse solution equals the normal-equation solution, computed by Cholesky;
    otherwise the minimum-norm SVD solution is used. Returns the residual norm ``|A qdot - v|``
    (NaN with a workspace made with ``residual=False``).
    ``ws``: scratch from :func:`solve_workspace` for this ``known`` (allocated when omitted); it
    keeps the factor for :func:`resolve_partitioned`.
    """
    if ws is None:
        return _solve_partitioned(A, v, known, qdot_known, qdot,
                                  solve_workspace(A.shape[0], known))
    return _solve_partitioned(A, v, known, qdot_known, qdot, ws)


@njit
def _solve_partitioned(A, v, known, qdot_known, qdot, ws):
    """:func:`solve_partitioned` with its scratch ``ws`` (no allocation here)."""
    idx, rhs, N, x, info = ws
    m, nv = A.shape
    nu = 0
    for j in range(nv):
        if not known[j]:
            idx[nu] = j
            nu += 1
    if nu != N.shape[0]:
        raise ValueError("solve_partitioned: ws was made for another known set")
    info[0] = nu
    info[1] = 0
    _known_rhs(A, v, known, qdot_known, qdot, rhs)
    if nu > 0:
        # Normal equations N x = Au^T rhs, lower triangle (all the factorization reads): row r
        # of A is added to every sum at once (each sum still runs over r in order), so the sums
        # proceed side by side instead of one long dependency chain each; exact zeros of A (the
        # other contacts' joint columns) add nothing and are skipped.
        for a in range(nu):
            x[a] = 0.0
            for b in range(a + 1):
                N[a, b] = 0.0
        for r in range(m):
            for a in range(nu):
                ara = A[r, idx[a]]
                if ara == 0.0:
                    continue
                x[a] += ara * rhs[r]
                for b in range(a + 1):
                    N[a, b] += ara * A[r, idx[b]]
        if cholesky_factor(N, N, CHOLESKY_PIVOT_RTOL):
            info[1] = 1
            cholesky_solve(N, x, x)
        else:  # rank deficient to CHOLESKY_PIVOT_RTOL: N holds a partial factor
            _lstsq_unknown(A, idx, nu, rhs, x)
        for a in range(nu):
            qdot[idx[a]] = x[a]
    return _residual_norm(A, v, qdot) if info[2] == 1 else np.nan


@njit
def resolve_partitioned(A, v, known, qdot_known, qdot, ws):
    """:func:`solve_partitioned` again with a new right-hand side ``v`` and the same ``A`` and
    ``known`` as the last solve that used ``ws``: the right-hand side is rebuilt (2.37) and the
    kept Cholesky factor back-substituted (2.38), without refactoring. Bit for bit the result of
    a fresh :func:`solve_partitioned` (same sums in the same order). Enhanced kinematics'
    second solve (:mod:`wmr_model.kinematics.enhanced`). Returns the residual norm (NaN with a
    workspace made with ``residual=False``).
    """
    idx, rhs, N, x, info = ws
    m = A.shape[0]
    nu = info[0]
    _known_rhs(A, v, known, qdot_known, qdot, rhs)
    if nu > 0:
        for a in range(nu):
            x[a] = 0.0
        for r in range(m):
            for a in range(nu):
                ara = A[r, idx[a]]
                if ara == 0.0:
                    continue
                x[a] += ara * rhs[r]
        if info[1] == 1:
            cholesky_solve(N, x, x)
        else:
            _lstsq_unknown(A, idx, nu, rhs, x)
        for a in range(nu):
            qdot[idx[a]] = x[a]
    return _residual_norm(A, v, qdot) if info[2] == 1 else np.nan


@njit
def contact_detection(parent, T0, wheel_frame, wheel_radius, track_frame, track_path, tkind,
                      tparams, tgrid, T_world, T_contact, dz, contact_angle, contact_ws=None):
    """Collision detection of every contact: wheels (2.8)-(2.9), then track patches.

    ``contact_ws``: optional warm-start workspace of :func:`wheel_contact`.
    """
    wheel_contact(parent, T0, wheel_frame, wheel_radius, tkind, tparams, tgrid, T_world,
                  T_contact, dz, contact_angle, contact_ws)
    if track_frame.shape[0] > 0:
        track_contact(track_frame, track_path, tkind, tparams, tgrid, T_world,
                      wheel_frame.shape[0], T_contact, dz, contact_angle)


@njit
def joint_space_velocity(m, t, d, q, known, qdot_known, sigma, vc_xy, qdot):
    """Forward position kinematics, collision detection and forward velocity kinematics.

    The three blocks of the simulation flowchart (Figure 2.6) for one state: Algorithm 1,
    (2.8)-(2.9), then (2.33)-(2.38), for the model ``m`` (:class:`~wmr_model.vehicles.model
    .KernelModel`) on the terrain ``t`` (:class:`~wmr_model.terrain.surface.TerrainArrays`).
    Writes the workspace ``d`` (:class:`wmr_model.kinematics.data.KernelData`: frames,
    contacts, ``A``, ``v``; its ``contact_ws`` warm-starts collision detection when it has
    rows, its ``solve_ws`` must be made for ``known`` and keeps the factor of the final solve
    for :func:`resolve_partitioned`) and ``qdot`` (nv,); returns the least-squares residual
    norm (NaN with a ``solve_ws`` made with ``residual=False``).
    """
    forward_kinematics(m.parent, m.jtype, m.axis, m.T0, q, d.T_world)
    contact_detection(m.parent, m.T0, m.wheel_frame, m.wheel_radius, m.track_frame,
                      m.track_path, t.kind, t.params, t.grid, d.T_world, d.T_contact, d.dz,
                      d.contact_angle, d.contact_ws)
    constraint_system(m, d, q, sigma, vc_xy)
    res = solve_partitioned(d.A, d.v, known, qdot_known, qdot, d.solve_ws)
    if m.track_frame.shape[0] > 0:
        res = release_track_adhesion(m.wheel_frame.shape[0], d.dz, m.track_act, d.A, d.v,
                                     known, qdot_known, qdot, res, d.solve_ws)
    return res


@njit
def integrate_euler(q, qdot, dt, q_next):
    """One Euler step of (2.39), ``q + V(q) qdot dt``, with a unit-quaternion orientation.

    The orientation row uses the exact exponential map for constant body angular velocity (no
    gimbal lock, norm preserved); position uses R_b at the start of the step, joints are linear.
    """
    quat_exp_body_into(q, qdot, dt, q_next)
    Rb = quat_rot_entries(q[0], q[1], q[2], q[3])
    v0, v1, v2 = qdot[3], qdot[4], qdot[5]
    for r in range(3):
        q_next[4 + r] = q[4 + r] + (Rb[3 * r] * v0 + Rb[3 * r + 1] * v1 + Rb[3 * r + 2] * v2) * dt
    for k in range(7, q.shape[0]):
        q_next[k] = q[k] + qdot[k - 1] * dt


@njit
def state_derivative(q, qdot, out):
    """Time derivative of the state, ``qdot_state = V(q) qdot`` (2.14), quaternion form.

    Orientation rate is ``0.5 * o * [0, w]``; position rate ``R_b v``; joint rates unchanged.
    """
    w = np.zeros(4)
    w[1:] = qdot[0:3]
    out[0:4] = 0.5 * quat_mul(q[0:4], w)
    out[4:7] = quat_to_rot(q[0:4]) @ qdot[3:6]
    out[7:] = qdot[6:]


@njit
def contact_velocity_norms(A, qdot, nw, out):
    """Magnitude of each contact's velocity |v_c| = |A_k qdot| for the first ``nw`` contacts
    (Table 2.4); track patch rows are activation-weighted, so theirs is weight * |v_c|."""
    for k in range(nw):
        e0 = 0.0  # the three rows side by side (each still summed over j in order)
        e1 = 0.0
        e2 = 0.0
        for j in range(qdot.shape[0]):
            qj = qdot[j]
            e0 += A[3 * k, j] * qj
            e1 += A[3 * k + 1, j] * qj
            e2 += A[3 * k + 2, j] * qj
        out[k] = math.sqrt(0.0 + e0 * e0 + e1 * e1 + e2 * e2)


# ----------------------------------------------------------------------------------------------
# Initialization of terrain contact (§2.2.4)
# ----------------------------------------------------------------------------------------------


@njit
def euler_state(q):
    """Initialization coordinates x (nv,) = [roll, pitch, yaw, x, y, z, theta] of a state q."""
    out = np.empty(q.shape[0] - 1)
    out[0:3] = rot_to_euler(quat_to_rot(q[0:4]))
    out[3:] = q[4:]
    return out


@njit
def state_from_euler(xe):
    """Inverse of :func:`euler_state`."""
    q = np.empty(xe.shape[0] + 1)
    q[0:4] = quat_from_euler(xe[0], xe[1], xe[2])
    q[4:] = xe[3:]
    return q


@njit
def _contact_errors(m, t, d, q, e):
    """Objective vector ``e`` of (2.28) at ``q``: contact height errors (track patches
    weighted), then the holonomic constraints; writes the contact fields of ``d``."""
    T_world, dz = d.T_world, d.dz
    forward_kinematics(m.parent, m.jtype, m.axis, m.T0, q, T_world)
    contact_detection(m.parent, m.T0, m.wheel_frame, m.wheel_radius, m.track_frame,
                      m.track_path, t.kind, t.params, t.grid, T_world, d.T_contact, dz,
                      d.contact_angle)
    nw = m.wheel_frame.shape[0]
    nc = nw + m.track_frame.shape[0]
    e[:nw] = dz[:nw]
    w_min = m.track_act[2]
    for k in range(nw, nc):  # track patches: normal-row weight (Δz not capped, see below)
        wn = w_min + (1.0 - w_min) * track_activation(dz[k], m.track_act)
        e[k] = wn * dz[k]
    nh = e.shape[0] - nc
    if nh > 0:
        c = np.empty(nh)
        Jh = np.empty((nh, T_world.shape[0] + 5))
        holonomic_constraints(m.parent, m.jtype, m.axis, m.A_joint, m.joint_offset,
                              m.loop_closure, q, T_world, c, Jh)
        e[nc:] = c


@njit
def initialize_terrain_contact(m, t, d, q0, free, max_iter, tol, q_out):
    """Initialize terrain contact by Newton's method with a line search, (2.27)-(2.32).

    Minimizes ``L(x) = |e(x)|^2`` with ``e = [Δz_1 .. Δz_nw, c_joint]`` over the free
    initialization coordinates ``x = q(free)`` in Euler form ([roll, pitch, yaw, x, y, z,
    theta], mask ``free`` (nv,) bool; typically z, roll, pitch and passive joints). The
    Jacobian of Δz is the z rows of the wheel Jacobians mapped to the coordinates, (2.29)-(2.32)
    (contact angle and terrain height changes are neglected, as in the thesis); the holonomic
    constraints (joint constraints and loop closures, :func:`holonomic_constraints`) are
    appended to the objective. Track patches enter as ``w_n Δz`` with
    their normal-row weight (:func:`constraint_system`; the weight's own derivative is
    neglected like the contact angle's); Δz is not capped here so that a vehicle placed above
    the terrain still descends onto it. Gauss-Newton steps with a backtracking
    (Armijo) line search. Model ``m``, terrain ``t``; the contact fields of the workspace ``d``
    (:class:`wmr_model.kinematics.data.KernelData`) are written. Writes ``q_out``; returns the
    final ``sqrt(L)``.
    """
    parent, jtype, axis, wheel_frame = m.parent, m.jtype, m.axis, m.wheel_frame
    A_joint, joint_offset, loop_closure = m.A_joint, m.joint_offset, m.loop_closure
    track_frame, track_drive, track_path, track_act = (m.track_frame, m.track_drive,
                                                       m.track_path, m.track_act)
    T_world, T_contact, dz, contact_angle = d.T_world, d.T_contact, d.dz, d.contact_angle
    nw = wheel_frame.shape[0]
    ntp = track_frame.shape[0]
    nc = nw + ntp
    nh = A_joint.shape[0] + loop_closure_rows(loop_closure)
    nv = T_world.shape[0] + 5
    nrow = nc + nh
    nfree = 0
    for j in range(nv):
        if free[j]:
            nfree += 1
    x = euler_state(q0)
    e = np.empty(nrow)
    q = state_from_euler(x)
    _contact_errors(m, t, d, q, e)
    L = np.dot(e, e)
    blk = np.empty((3, nv))
    belt = np.empty(3)
    Aq = np.empty((nrow, nv))
    M = np.zeros((nv, nv))
    J = np.empty((nrow, nfree))
    for _ in range(max_iter):
        if math.sqrt(L) < tol:
            break
        # d(Δz)/d(qdot') rows, then chain rule to Euler coordinates: qdot' = M xdot.
        for k in range(nw):
            wheel_jacobian(parent, jtype, axis, wheel_frame, T_world, T_contact, k, blk)
            Aq[k, :] = blk[2, :]
        for k in range(ntp):
            track_point_jacobian(parent, jtype, axis, track_frame, track_drive, track_path,
                                 T_world, T_contact, contact_angle, nw, k, belt, blk)
            blk[2, 5 + track_drive[k]] -= belt[2]  # geometry only: the belt term moves no point
            wn = track_act[2] + (1.0 - track_act[2]) * track_activation(dz[nw + k], track_act)
            Aq[nw + k, :] = wn * blk[2, :]
        if nh > 0:
            holonomic_constraints(parent, jtype, axis, A_joint, joint_offset, loop_closure,
                                  state_from_euler(x), T_world, e[nc:].copy(), Aq[nc:])
        M[:, :] = 0.0
        M[0:3, 0:3] = omega_euler_rates_inv(x[0], x[1])
        for r in range(3):
            for j in range(3):
                M[3 + r, 3 + j] = T_world[0, j, r]
        for j in range(6, nv):
            M[j, j] = 1.0
        Jfull = Aq @ M
        c = 0
        for j in range(nv):
            if free[j]:
                J[:, c] = Jfull[:, j]
                c += 1
        dx = np.linalg.lstsq(J, -e, rcond=1e-10)[0]
        slope = 2.0 * np.dot(J.T @ e, dx)  # directional derivative of L along dx
        alpha = 1.0
        accepted = False
        xt = x.copy()
        et = np.empty(nrow)
        for _ls in range(30):
            c = 0
            for j in range(nv):
                if free[j]:
                    xt[j] = x[j] + alpha * dx[c]
                    c += 1
            qt = state_from_euler(xt)
            _contact_errors(m, t, d, qt, et)
            Lt = np.dot(et, et)
            if Lt <= L + 1e-4 * alpha * slope or Lt < L * (1.0 - 1e-12):
                accepted = True
                break
            alpha *= 0.5
        if not accepted:
            break
        x[:] = xt
        e[:] = et
        L = Lt
    q = state_from_euler(x)
    q_out[:] = q
    _contact_errors(m, t, d, q, e)
    return math.sqrt(np.dot(e, e))


@njit
def normalize_state(q):
    """Renormalize the quaternion part of ``q`` in place (scalar part made non-negative)."""
    q[0:4] = quat_normalize(q[0:4])


@njit
def rescale_quaternion(q):
    """Scale the quaternion part of ``q`` to unit length in place, keeping its sign.

    For RK4 stage states: the stage derivatives are added to the step's start state, so they
    must be taken on the same sign of the quaternion (``o`` and ``-o`` are one attitude but
    ``0.5 o [0, w]`` flips with them). Flipping a stage state whose scalar part crossed zero
    (a yaw of +-pi about the start) cancels the stage derivatives and the attitude stalls.
    """
    n = math.sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3])
    for i in range(4):
        q[i] = q[i] / n
