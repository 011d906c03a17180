"""Wheel-terrain collision detection, (2.8)-(2.9) (Seegmiller 2014, §2.2.3).

For each wheel, the contact angle δ on the lower arc of the wheel circle minimizing the contact
height error Δz (2.8), and the contact frame at that point (Figure 2.3, (2.9)): a coarse fan
search with a parabolic fit (:func:`_wheel_fan`), warm-started from the previous step's angle
when the wheel has moved little (:func:`wheel_contact`, workspace :func:`contact_workspace`).

Arguments: ``m`` the :class:`~wmr_model.vehicles.model.KernelModel` (``parent``, ``T0``,
``wheel_frame``, ``wheel_radius`` are read); ``t`` the
:class:`~wmr_model.terrain.surface.TerrainArrays` (:func:`terrain_height_normal`);
``T_world`` (nf, 4, 4) from Algorithm 1; outputs ``T_contact`` (nc, 4, 4), ``dz`` (nc,),
``contact_angle`` (nc,), wheels first.
"""

from __future__ import annotations

import math

import numpy as np

from wmr_model._jit import njit
from wmr_model.terrain.surface import GRID, grid_reciprocal_spacing, terrain_height_normal
from wmr_model.vehicles.tree import compose_column

__all__ = [
    "CONTACT_FAN_POINTS", "CONTACT_FAN_HALF_SPAN", "WARM_CONTACT_BRACKET",
    "WARM_CONTACT_MAX_TRAVEL", "WARM_CONTACT_MAX_WALK", "CONTACT_WS_WIDTH", "FAN_BOUND_RTOL",
    "FAN_BOUND_MAX_NODES",
    "contact_workspace", "wheel_contact", "wheel_contact_into",
]


# Collision detection samples the lower wheel arc at CONTACT_FAN_POINTS contact angles spread
# +-CONTACT_FAN_HALF_SPAN about the direction opposite the terrain normal, then refines the
# minimum by two parabolic fits. 10 degree spacing resolves bumps of a tenth of the wheel radius;
# +-80 degrees reaches a step face in front of the wheel.
CONTACT_FAN_POINTS = 17
CONTACT_FAN_HALF_SPAN = math.radians(80.0)


# Fan offsets (j - half) * step as cosines/sines: each fan point's angle is the reference angle
# plus a constant offset, so its sine/cosine follow from the angle-sum identities without
# evaluating trigonometric functions per point.
_FAN_HALF = CONTACT_FAN_POINTS // 2
_FAN_STEP = CONTACT_FAN_HALF_SPAN / _FAN_HALF
_FAN_COS = np.cos((np.arange(CONTACT_FAN_POINTS) - _FAN_HALF) * _FAN_STEP)
_FAN_SIN = np.sin((np.arange(CONTACT_FAN_POINTS) - _FAN_HALF) * _FAN_STEP)


@njit(refcount=False, inline="always")
def _wheel_point(p, xw, zw, R, s, c):
    """Point ``(x, y, z)`` (world) on the wheel circle at the contact angle with sine ``s``,
    cosine ``c`` (2.9); ``p``, ``xw``, ``zw``: wheel centre and x, z axes (world, 3-tuples) of
    the wheel frame without its spin rotation. The one formula of the search: the fan's bound
    compares its coordinates with the grid's nodes, so they must be the lookups' own."""
    return (p[0] - R * (s * xw[0] + c * zw[0]), p[1] - R * (s * xw[1] + c * zw[1]),
            p[2] - R * (s * xw[2] + c * zw[2]))


# Inlined where it is called, with the terrain lookup (wmr_model.terrain.surface._grid), as are
# the fan and the bracket fit: the collision search is a chain of these evaluations, about half
# of a kinematic step, and in line it costs 25-30 % less (both forms compiled in one process and
# timed alternately; README, "Inlined terrain lookups").
@njit(refcount=False, inline="always")
def _contact_height_error_sc(tkind, tparams, tgrid, p, xw, zw, R, s, c):
    """Point on the wheel circle at the contact angle with sine ``s``, cosine ``c`` (2.9) and its
    Δz (2.8).

    ``p``, ``xw``, ``zw``: wheel centre and x, z axes (world, 3-tuples) of the wheel frame
    without its spin rotation. Returns ``(Δz, r_x, r_y, r_z, n_x, n_y, n_z)``.
    """
    rx, ry, rz = _wheel_point(p, xw, zw, R, s, c)
    h, nx, ny, nz = terrain_height_normal(tkind, tparams, tgrid, rx, ry)
    # (2.8): (r_contact - r_terrain) . n with r_terrain directly below the contact point.
    return (rz - h) * nz, rx, ry, rz, nx, ny, nz


@njit(refcount=False)
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


@njit(refcount=False)
def _rotate_angle(s, c, sd, cd):
    """Sine and cosine of ``delta + e`` from those of ``delta`` (s, c) and ``e`` (sd, cd)."""
    return s * cd + c * sd, c * cd - s * sd


@njit(refcount=False)
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


@njit(refcount=False)
def _write_contact_frame(Tc, a, f, n, r):
    """Contact frame (Figure 2.3): z = n, x = unit(a x n), y = z x x, origin r.

    ``a`` is the spin (wheel) or lateral (track) axis; when it is parallel to the normal, x falls
    back to ``f`` projected onto the tangent plane (the frame's own forward axis). All four are
    world 3-tuples; ``Tc`` (4, 4) is overwritten.
    """
    ax, ay, az = a
    fx, fy, fz = f
    nx, ny, nz = n
    rx, ry, rz = r
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


# Fan points left out (issue 22). Once the middle point of the fan is at or below the terrain
# (its contact height error is <= 0), a fan point above every terrain node under the fan has a
# positive error (2.8) and cannot be the lowest: on a GRID its lookup is skipped. A bilinear
# height is a convex combination of its cell's four nodes, so it exceeds their largest by
# round-off only (a few ulps of the largest |node|); FAN_BOUND_RTOL of that is added as margin.
# The box of nodes under the fan is read only up to FAN_BOUND_MAX_NODES nodes (wheels spanning
# many cells search without the bound). The search returns the same angle, bit for bit: the
# points left out are never the minimum, and the two beside the minimum that the parabolic fit
# needs are looked up if they were left out. On the Zoë benchmark about half of the fan's 16
# other points are left out.
FAN_BOUND_RTOL = 1e-12
FAN_BOUND_MAX_NODES = 64


@njit(refcount=False, inline="always")
def _fan_start(tkind, tparams, tgrid, p, xw, yw, zw):
    """Angle, sine and cosine of the fan's middle point: the terrain normal below the wheel
    centre ``p`` projected onto the wheel plane (``xw``, ``yw``, ``zw``: the wheel's axes)."""
    _, n0x, n0y, n0z = terrain_height_normal(tkind, tparams, tgrid, p[0], p[1])
    dot = n0x * yw[0] + n0y * yw[1] + n0z * yw[2]
    ux = n0x - dot * yw[0]
    uy = n0y - dot * yw[1]
    uz = n0z - dot * yw[2]
    delta0 = math.atan2(ux * xw[0] + uy * xw[1] + uz * xw[2],
                        ux * zw[0] + uy * zw[1] + uz * zw[2])
    return delta0, math.sin(delta0), math.cos(delta0)


@njit(refcount=False, inline="always")
def _fan_height_bound(tkind, tparams, tgrid, p, xw, zw, R, s0, c0):
    """Upper bound [m] of the terrain height at every fan point about the angle with sine
    ``s0``, cosine ``c0``: on a GRID the largest node of the cells under the fan's points
    (clamped to the grid as the lookup clamps) plus FAN_BOUND_RTOL of the largest |node|;
    +inf for the analytic kinds, a non-finite point or more than FAN_BOUND_MAX_NODES nodes."""
    if tkind != GRID:
        return np.inf
    xmin = ymin = np.inf
    xmax = ymax = -np.inf
    for j in range(CONTACT_FAN_POINTS):
        sj, cj = _rotate_angle(s0, c0, _FAN_SIN[j], _FAN_COS[j])
        rx, ry, _ = _wheel_point(p, xw, zw, R, sj, cj)
        if not (abs(rx) < np.inf and abs(ry) < np.inf):
            return np.inf
        xmin = min(xmin, rx)
        xmax = max(xmax, rx)
        ymin = min(ymin, ry)
        ymax = max(ymax, ry)
    # (x - x0) * (1/dx), the lookup's grid coordinate, rounds monotonically and 1/dx, 1/dy > 0:
    # every point's cell lies within these node ranges, clamped as the lookup clamps; a point
    # snapped onto the node after them sits on it exactly (fraction 0: the node beyond gets
    # weight 0)
    nyg, nxg = tgrid.shape
    rdx, rdy = grid_reciprocal_spacing(tparams)
    i0 = min(max(float(np.floor((xmin - tparams[0]) * rdx)), 0.0), nxg - 1.0)
    i1 = min(max(float(np.floor((xmax - tparams[0]) * rdx)) + 1.0, 0.0), nxg - 1.0)
    j0 = min(max(float(np.floor((ymin - tparams[1]) * rdy)), 0.0), nyg - 1.0)
    j1 = min(max(float(np.floor((ymax - tparams[1]) * rdy)) + 1.0, 0.0), nyg - 1.0)
    if (i1 - i0 + 1.0) * (j1 - j0 + 1.0) > FAN_BOUND_MAX_NODES:
        return np.inf
    hmax = -np.inf
    amax = 0.0
    for jj in range(int(j0), int(j1) + 1):
        for ii in range(int(i0), int(i1) + 1):
            h = tgrid[jj, ii]
            hmax = max(hmax, h)
            amax = max(amax, abs(h))
    return hmax + FAN_BOUND_RTOL * amax


@njit(refcount=False, inline="always")  # one caller; inlined with the lookups it makes
def _wheel_fan(tkind, tparams, tgrid, p, xw, yw, zw, R):
    """Coarse fan search of (2.8) over the lower arc plus one parabolic fit: contact angle.

    The middle point is evaluated first; points that cannot be the lowest are left out (see
    FAN_BOUND_RTOL), with the same result as evaluating all of them."""
    K = CONTACT_FAN_POINTS
    half = K // 2
    step = CONTACT_FAN_HALF_SPAN / half
    delta0, s0, c0 = _fan_start(tkind, tparams, tgrid, p, xw, yw, zw)
    sj, cj = _rotate_angle(s0, c0, _FAN_SIN[half], _FAN_COS[half])
    f_half = _contact_height_error_sc(tkind, tparams, tgrid, p, xw, zw, R, sj, cj)[0]
    bound = np.inf
    if f_half <= 0.0:
        bound = _fan_height_bound(tkind, tparams, tgrid, p, xw, zw, R, s0, c0)
    best = 0
    fbest = np.inf
    f_prev = np.inf  # fan values at best - 1, j - 1 and best + 1
    f_before = np.inf
    f_after = np.inf
    left_prev = False  # whether the point at j - 1, best - 1, best + 1 was left out
    left_before = False
    left_after = False
    for j in range(K):
        sj, cj = _rotate_angle(s0, c0, _FAN_SIN[j], _FAN_COS[j])
        left = False
        if j == half:
            f = f_half
        elif _wheel_point(p, xw, zw, R, sj, cj)[2] > bound:  # above every node
            left = True
            f = np.inf  # its error is > 0 >= f_half: never below fbest at the end
        else:
            f = _contact_height_error_sc(tkind, tparams, tgrid, p, xw, zw, R, sj, cj)[0]
        if f < fbest:
            fbest = f
            best = j
            f_before = f_prev
            left_before = left_prev
        elif j == best + 1:
            f_after = f
            left_after = left
        f_prev = f
        left_prev = left
    d = delta0 + (best - half) * step
    if 0 < best < K - 1:
        if left_before:
            sj, cj = _rotate_angle(s0, c0, _FAN_SIN[best - 1], _FAN_COS[best - 1])
            f_before = _contact_height_error_sc(tkind, tparams, tgrid, p, xw, zw, R, sj, cj)[0]
        if left_after:
            sj, cj = _rotate_angle(s0, c0, _FAN_SIN[best + 1], _FAN_COS[best + 1])
            f_after = _contact_height_error_sc(tkind, tparams, tgrid, p, xw, zw, R, sj, cj)[0]
        d += _parabola_offset(f_before, fbest, f_after, step)
    return d


@njit
def wheel_contact(m, t, T_world, T_contact, dz, contact_angle, contact_ws=None):
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

    Reads ``m.parent``, ``m.T0``, ``m.wheel_frame``, ``m.wheel_radius`` (``m`` the
    :class:`~wmr_model.vehicles.model.KernelModel`) and the terrain ``t``
    (:class:`~wmr_model.terrain.surface.TerrainArrays`). Writes ``T_contact`` (nw, 4, 4),
    ``dz`` (nw,), ``contact_angle`` (nw,) (and ``contact_ws``).
    """
    if contact_ws is None:
        wheel_contact_into(m, t, T_world, T_contact, dz, contact_angle,
                       np.zeros((0, CONTACT_WS_WIDTH)))
    else:
        wheel_contact_into(m, t, T_world, T_contact, dz, contact_angle, contact_ws)


@njit(refcount=False, inline="always")  # two call sites; inlined with its lookup
def _bracket_fit(t, p, xw, zw, R, centre, fm, e0, fp):
    """Fine parabolic fit through the bracket (d - h, d, d + h), h = WARM_CONTACT_BRACKET.

    ``t``: the terrain (:class:`~wmr_model.terrain.surface.TerrainArrays`); ``p``, ``xw``,
    ``zw``, ``R``: the wheel as in :func:`_contact_height_error_sc`; ``centre``: the bracket
    centre ``(d, s0, c0)``, its angle with that angle's sine and cosine; ``fm``, ``fp``: Δz at
    the ends; ``e0``: :func:`_contact_height_error_sc` at the centre. Returns the refined
    angle, its sine and cosine and the contact there, or the centre's when the parabola
    overshot (a kink in the terrain: the vertex is higher).
    """
    d, s0, c0 = centre
    off = _parabola_offset(fm, e0[0], fp, WARM_CONTACT_BRACKET)
    so, co = _sin_cos_small(off)
    s1, c1 = _rotate_angle(s0, c0, so, co)
    e1 = _contact_height_error_sc(t.kind, t.params, t.grid, p, xw, zw, R, s1, c1)
    if e0[0] < e1[0]:
        return d, s0, c0, e0
    return d + off, s1, c1, e1


@njit(refcount=False)
def wheel_contact_into(m, t, T_world, T_contact, dz, contact_angle, contact_ws):
    """:func:`wheel_contact` with a workspace ``contact_ws`` (zero rows: cold search); a
    refcount-free kernel (:mod:`wmr_model._jit`)."""
    parent, T0, wheel_frame, wheel_radius = m.parent, m.T0, m.wheel_frame, m.wheel_radius
    tkind, tparams, tgrid = t.kind, t.params, t.grid
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
                    d, s0, c0, e1 = _bracket_fit(t, p, xw, zw, R, (d, s0, c0), em[0], e0,
                                                 ep[0])
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
            d, s0, c0, e1 = _bracket_fit(t, p, xw, zw, R, (d, s0, c0), fm, e0, fp)
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
        _write_contact_frame(T_contact[k], yw, xw, (nx, ny, nz), (rx, ry, rz))
