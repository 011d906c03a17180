"""Track-terrain collision detection (the track analogue of (2.8)-(2.9)) and the collision step
of every contact (Seegmiller 2014, §2.2.3; tracks: :mod:`wmr_model.vehicles.tracks`).

A track patch is the belt between its M sub-points; its contact height error is the smallest
sub-point Δz (2.8), its contact point the centroid of the sub-points near that minimum, its
frame taken from the belt's inward normal (:func:`track_contact`). The activation weight
(:func:`track_activation`) scales its rows in the constraint system. :func:`contact_detection`
runs the wheels (:mod:`wmr_model.kinematics.wheel_collision`), then the track patches.

Arguments: ``track_frame, track_drive, track_path, track_act`` (ntp,) carrying frame, (ntp,)
drive joint frame, (ntp, M, 6) sub-point positions and belt velocity per unit drive rate in
the carrying frame, (3,) activation rule; contacts are the nw wheels then the ntp patches
(nc = nw + ntp).
"""

from __future__ import annotations

import math

import numpy as np

from wmr_model._jit import njit
from wmr_model.kinematics.wheel_collision import (
    _write_contact_frame,
    wheel_contact,
    wheel_contact_into,
)
from wmr_model.terrain.surface import terrain_height_normal

__all__ = [
    "TRACK_PATCH_TOL", "track_activation", "track_contact", "contact_detection",
]


# A track patch's contact point averages its sub-points whose Δz is within this of the patch's
# minimum [m]: 2 mm is below the activation band (tracks.TRACK_CONTACT_ON) and well above the
# Δz differences rounding or a slight pitch make along a flat patch (micrometres).
TRACK_PATCH_TOL = 0.002


@njit(refcount=False)
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


@njit(refcount=False)
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


@njit(refcount=False)
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


@njit(refcount=False)
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


@njit(refcount=False)
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
        _write_contact_frame(T_contact[c], (T[0, 1], T[1, 1], T[2, 1]),
                             (T[0, 0], T[1, 0], T[2, 0]), (nx, ny, nz), (rx, ry, rz))


@njit(refcount=False)
def contact_detection(m, t, tracks, T_world, T_contact, dz, contact_angle, contact_ws=None):
    """Collision detection of every contact: wheels (2.8)-(2.9), then track patches.

    ``m``: the :class:`~wmr_model.vehicles.model.KernelModel` (its wheels); ``t``: the
    :class:`~wmr_model.terrain.surface.TerrainArrays`; ``tracks``: the track patches as
    ``(frame, drive, path)`` (``m.track_frame, m.track_drive, m.track_path``, or the dynamics'
    :class:`~wmr_model.dynamics.model.TrackData` arrays); ``contact_ws``: optional warm-start
    workspace of :func:`wheel_contact`.
    """
    track_frame, _, track_path = tracks
    if contact_ws is None:
        wheel_contact(m, t, T_world, T_contact, dz, contact_angle)
    else:
        wheel_contact_into(m, t, T_world, T_contact, dz, contact_angle, contact_ws)
    if track_frame.shape[0] > 0:
        track_contact(track_frame, track_path, t.kind, t.params, t.grid, T_world,
                      m.wheel_frame.shape[0], T_contact, dz, contact_angle)
