"""Track (belt) geometry and contact sampling for tracked vehicles (thesis §4.2, seed 003).

A track is a belt wrapped around a sprocket, an idler and optional road wheels, all circles in
the x-z plane of the frame that carries the belt (the *track frame*), at the same lateral
offset y. The belt follows the convex hull of those circles. Its material moves around the loop
at the *belt speed* ``r_s * theta_dot_s`` (``r_s`` the sprocket radius, ``theta_dot_s`` the rate
of the drive joint). Contact surface motion (Pecka et al., seed 003) is expressed in the
kinematics as the belt velocity of each contact point, added to the drive joint's column of
that point's Jacobian (:func:`wmr_model.kinematics.constraints.track_point_jacobian`).

Sign convention: a positive drive rate moves the *lower* run toward -x of the track frame, i.e.
drives the vehicle toward +x (forward), whatever the drive joint's axis.

Contact sampling
----------------
Only the ground-facing part of the loop can touch the terrain: the points whose outward belt
normal has a z component <= :data:`TRACK_MAX_NORMAL_Z` (the lower run, both end arcs and the
front/rear faces up to 30 deg above horizontal). That open path of length S is split into
``samples`` equal patches; patch k is represented by :data:`TRACK_PATCH_POINTS` sub-points
spread evenly over it (neighbouring patches share their end points). Collision detection picks,
per patch, the sub-point closest to the terrain and refines it with a parabola (the analogue of
the wheel's contact-angle search, 2.8-2.9), so an edge passing from one patch to the next is
seen by both at the boundary: the contact height error of every patch varies continuously.

Arrays produced for the compiled model (np = total number of patches):

``track_path`` (np, M, 6)
    per sub-point: position in the track frame (3) [m] and the belt surface velocity per unit
    drive rate in the track frame (3) [m/rad].

Activation rule
---------------
A patch's three constraint rows (2.16) are weighted by its contact height error dz. With the
C1 blend ``w_t = 1 - 3 s^2 + 2 s^3``, ``s = (dz - d_on) / (d_off - d_on)`` clipped to [0, 1]:

* tangential rows (no slip relative to the moving belt): weight ``w_t`` - 1 in contact
  (``dz <= d_on``), 0 once clear (``dz >= d_off``);
* normal row: weight ``w_n = w_min + (1 - w_min) w_t`` and Baumgarte target
  ``-sigma min(dz, d_off)``.

The contact normal of a patch is the belt's (inward) normal, not the terrain's: a flat belt
touching an edge (a stair nosing, a pallet edge) is pressed along the belt normal, and on smooth
ground the lowest point of the belt is where the two agree. It is taken where the belt comes
closest to the terrain over the patch *and its two neighbours along the belt*. A patch on an
end arc next to the lower run has its own closest point at its end sub-point, hovering (here
0.9 mm) over flat ground, where the belt is tilted by the arc angle (8.8 deg); its own normal
would read a level translation as approach at the front and separation at the rear (v sin 8.8
deg) and its tangential row would ask the point to follow the tilted belt, both demanding a
pitch rate (issue 9: -0.04 rad/s driving straight at 0.3 m/s, and, through the one-sided
release below, the front half of the belt released and the ICR 0.17 m behind the centre in arc
turns). The belt contact is in the neighbour, and the patch takes its axes.

The belt moves along its surface at the same speed all round the loop, so the belt term is the
full belt speed along the contact's longitudinal axis, in the tangential rows only: a belt
resting on nosings carries the body along the belt at belt speed (no-slip at the edges), and no
belt motion pumps the body through a normal row. A normal row carries only the rigid motion of
its point; as the patch clears the terrain (weight ``w_t`` falling to 0) it turns from the
patch's own normal to that of the lowest patch of its belt, so the faint pull of a clear patch
acts along the normal where its belt meets the terrain (the plane's normal on smooth ground)
rather than along a tilted flipper or end-arc belt, which would again read a level translation
as approach or separation.

Contacts are one-sided: a patch in contact whose normal row would hold the belt down (the
solution separates it faster than its Baumgarte target) is released to the clear-patch weight
and the system re-solved (:func:`wmr_model.kinematics.solve.release_track_adhesion`). Without
that, the equality rows of the least-squares solve (2.38) let a body rest on two edges ahead of
its centre (tilted nose-down on the floor after a staircase) or stand up a pallet face at 80 deg.

A patch is in contact only when it touches or penetrates the terrain (``d_on = 0``), and it is
clear a few millimetres above it (``d_off``). The band must be narrow: a belt resting on a
stair nosing or a pallet edge meets the terrain only at the edge, and the belt next to it rises
from the edge at the belt's angle to the tread, i.e. millimetres per sub-point. A wide band
(5 mm fully on, 20 mm off was tried) treats those patches as contacts and pulls them down onto
the tread with the full Baumgarte gain while the patch over the edge pushes the belt out of it:
the two fight, the body rocks on the nosing and the tangential rows of the phantom contacts
stall the belt. A patch clear of the terrain keeps only a faint pull of its rigid point toward
the terrain (the belt motion of a patch in the air constrains nothing). That pull is what lets
the vehicle settle over an edge or a stair nosing (the kinematics have no gravity) without
holding it down: least-squares weights enter squared, so a clear patch at ``w_min = 0.02``
weighs 1/2500 of a contact and shifts the supporting contacts by micrometres. At rest the least
squares solution is zero exactly when these pulls and the pushes of the penetrating patches
balance (``A^T v = 0``), a static equilibrium of one-sided springs under a gravity-like load.
The weights depend on the current state only (no hysteresis state to carry between steps) and
are C1 in dz, so activation cannot chatter or stall the solve at an edge.

Near an edge the contact height error of a sub-point is measured against the right face
(:func:`wmr_model.kinematics.track_collision.track_contact`): the terrain plane directly below
a point just past a nosing is the riser's, whose extension passes millimetres from the point
although the riser itself ends below it; the kernel also measures the distance to the terrain
plane at the foot of that first estimate and keeps the larger (both planes support the convex
edge, so the larger is the better lower bound of the true distance).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

__all__ = [
    "TRACK_PATCH_POINTS",
    "TRACK_MAX_NORMAL_Z",
    "TRACK_CONTACT_ON",
    "TRACK_CONTACT_OFF",
    "TRACK_MIN_WEIGHT",
    "TrackGeometry",
    "belt_loop",
    "contact_path",
    "sample_track",
]

#: Sub-points per contact patch (odd, so a patch has a centre point).
TRACK_PATCH_POINTS = 7
#: Part of the belt loop that can touch the ground: outward normal z <= sin(30 deg).
TRACK_MAX_NORMAL_Z = 0.5
#: dz [m] at or below which a patch is fully in contact: touching or penetrating.
TRACK_CONTACT_ON = 0.0
#: dz [m] at or above which a patch is clear of the terrain (weight ``TRACK_MIN_WEIGHT``). A belt
#: resting on a stair nosing rises ~3 mm per sub-point (7 mm apart on the main tracks) beside it,
#: so only the patches at the edge stay inside the band (see the module docstring).
TRACK_CONTACT_OFF = 0.005
#: Weight of a patch clear of the terrain (see the module docstring).
TRACK_MIN_WEIGHT = 0.02

# Points per full circle when tracing the belt hull (0.5 deg): the hull is then resampled by
# arc length, so this only bounds the chord error (r * (1 - cos(0.25 deg)) < 1e-5 r).
_CIRCLE_POINTS = 720


@dataclass(frozen=True)
class TrackGeometry:
    """Belt geometry of one track in its track frame (x forward, z up, belt in the x-z plane).

    Attributes:
        sprocket_xyz, idler_xyz: pulley centres (3,) [m], same y (the belt's lateral offset).
        sprocket_radius, idler_radius: [m] > 0; the belt speed is ``sprocket_radius`` times
            the drive joint rate.
        road_wheels: tuple of ``((x, y, z), radius)`` extra circles the belt wraps (same y).
        width: belt width [m] (documentation and checks; contacts lie on the centreline).
        samples: number of contact patches along the ground-facing path.
        drive_radius: belt speed per unit drive rate [m/rad]; None: ``sprocket_radius`` (the
            sprocket pulley drives the belt). Set it for a belt driven through a ratio, e.g. a
            flipper belt driven by the main track's shaft at the main belt's speed.
    """

    sprocket_xyz: tuple[float, float, float]
    sprocket_radius: float
    idler_xyz: tuple[float, float, float]
    idler_radius: float
    road_wheels: tuple[tuple[tuple[float, float, float], float], ...] = field(default=())
    width: float = 0.0
    samples: int = 16
    drive_radius: float | None = None


def _circles(g: TrackGeometry) -> list[tuple[float, float, float]]:
    """(x, z, r) of every circle the belt wraps."""
    out = [(g.sprocket_xyz[0], g.sprocket_xyz[2], g.sprocket_radius),
           (g.idler_xyz[0], g.idler_xyz[2], g.idler_radius)]
    out += [(c[0], c[2], r) for c, r in g.road_wheels]
    return out


def _hull(points: np.ndarray) -> np.ndarray:
    """Convex hull (counter-clockwise in the x-z plane, Andrew's monotone chain), (k, 2)."""
    pts = np.unique(np.round(points, 12), axis=0)

    def half(seq: np.ndarray) -> list[np.ndarray]:
        h: list[np.ndarray] = []
        for p in seq:
            while len(h) >= 2:
                a, b = h[-2], h[-1]
                if (b[0] - a[0]) * (p[1] - a[1]) - (b[1] - a[1]) * (p[0] - a[0]) <= 0.0:
                    h.pop()
                else:
                    break
            h.append(p)
        return h

    lower = half(pts)
    upper = half(pts[::-1])
    return np.array(lower[:-1] + upper[:-1])


def belt_loop(g: TrackGeometry) -> tuple[np.ndarray, np.ndarray]:
    """The closed belt path: hull vertices (k, 2) as (x, z), counter-clockwise, and their
    outward unit normals (k, 2) (exact circle normals where the vertex lies on a pulley)."""
    pts = []
    ang = np.linspace(0.0, 2.0 * math.pi, _CIRCLE_POINTS, endpoint=False)
    circles = _circles(g)
    for x, z, r in circles:
        pts.append(np.column_stack([x + r * np.cos(ang), z + r * np.sin(ang)]))
    hull = _hull(np.concatenate(pts))
    normals = np.empty_like(hull)
    for i, p in enumerate(hull):
        # the circle this hull vertex lies on (smallest |distance - r|)
        best = min(circles, key=lambda c: abs(math.hypot(p[0] - c[0], p[1] - c[1]) - c[2]))
        d = p - np.array(best[:2])
        normals[i] = d / np.linalg.norm(d)
    return hull, normals


def contact_path(g: TrackGeometry, n: int) -> tuple[np.ndarray, np.ndarray, float]:
    """Ground-facing open part of the belt loop, resampled at ``n`` points by arc length.

    Returns ``(xz (n, 2), normal (n, 2), length [m])``, ordered from the rear end of the path
    to its front end (counter-clockwise along the loop, i.e. along +x on the lower run).
    """
    hull, normals = belt_loop(g)
    low = normals[:, 1] <= TRACK_MAX_NORMAL_Z
    if low.all():
        raise ValueError("the whole belt loop faces the ground; check the pulley layout")
    # rotate so the loop starts at the first ground-facing vertex after an upper one
    k = len(hull)
    start = next(i for i in range(k) if low[i] and not low[i - 1])
    order = [(start + i) % k for i in range(k)]
    run = []
    for i in order:
        if not low[i]:
            break
        run.append(i)
    xz = hull[run]
    nz = normals[run]
    seg = np.linalg.norm(np.diff(xz, axis=0), axis=1)
    s = np.concatenate([[0.0], np.cumsum(seg)])
    length = float(s[-1])
    t = np.linspace(0.0, length, n)
    out = np.column_stack([np.interp(t, s, xz[:, 0]), np.interp(t, s, xz[:, 1])])
    nrm = np.column_stack([np.interp(t, s, nz[:, 0]), np.interp(t, s, nz[:, 1])])
    nrm /= np.linalg.norm(nrm, axis=1)[:, None]
    return out, nrm, length


def sample_track(g: TrackGeometry, M: int = TRACK_PATCH_POINTS) -> np.ndarray:
    """Contact patches of one track: ``(samples, M, 6)`` sub-point positions and belt velocity
    per unit drive rate, in the track frame (see the module docstring).

    The belt velocity at a point with outward normal ``m = (m_x, 0, m_z)`` is
    ``r_d * (y x m) = r_d * (m_z, 0, -m_x)`` (``r_d`` the drive radius): toward -x on the
    lower run for a positive rate.
    """
    n = int(g.samples)
    rd = g.sprocket_radius if g.drive_radius is None else g.drive_radius
    xz, nrm, _ = contact_path(g, n * (M - 1) + 1)
    y = float(g.sprocket_xyz[1])
    out = np.empty((n, M, 6))
    for k in range(n):
        sl = slice(k * (M - 1), k * (M - 1) + M)
        out[k, :, 0] = xz[sl, 0]
        out[k, :, 1] = y
        out[k, :, 2] = xz[sl, 1]
        out[k, :, 3] = rd * nrm[sl, 1]
        out[k, :, 4] = 0.0
        out[k, :, 5] = -rd * nrm[sl, 0]
    return out
