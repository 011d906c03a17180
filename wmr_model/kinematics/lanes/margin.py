"""Lane rollover stability margin (float32, candidate axis last), §2.3 after [124].

:func:`stability_margin_lanes` evaluates, for W candidates at once, the signed margin of
:func:`wmr_model.kinematics.enhanced.stability_margin`: the line of action of the cg force meets
the least-squares ground plane through the contact points (:func:`~wmr_model.kinematics.enhanced.
ground_plane_into`); the margin is the distance of that point to the nearest edge of the support
polygon (convex hull of the contacts projected on the plane), positive inside, negative outside,
``-inf`` when the force does not point into the ground.

Three parts of the scalar kernel have data-dependent structure; the lane kernel computes the
same quantities without per-lane branches:

* **ground-plane normal.** The scalar kernel takes the smallest eigenvalue ``l0`` of the
  contact scatter ``S`` from the trigonometric solution of its characteristic cubic and the
  eigenvector as the largest cross product of two rows of ``S - l0 I`` (``_sym3_eigenvalues``,
  ``_sym3_null_vector``). ``acos``/``cos`` do not vectorize here, and in float32 the cubic's
  coefficients fix ``l0`` only to about eps ``l2`` (its error in the eigenvector would be eps
  ``(l2 / (l1 - l0))^2`` for a thin contact set). The lanes find ``l0`` by Newton's method on
  the characteristic polynomial from 0 (it rises monotonically to the smallest root of a
  positive semi-definite matrix), take the same row cross product and refine it twice by the
  Rayleigh quotient (``l0 = n^T S n``, cross product again): the same eigenvector, to the
  float32 accuracy of ``S`` itself (error about eps ``l2 / (l1 - l0)``).
* **support polygon.** Gift wrapping (``support_polygon_into``) is replaced by the edge test
  of the hull of points in general position: the pair ``(i, j)`` is a counter-clockwise hull
  edge when every other contact lies strictly left of ``i -> j`` (clockwise when strictly
  right). The margin is then the same minimum of ``_segment_distance`` over the hull edges
  (compared as squared fractions, one division and square root at the end) and the same
  inside test (no edge has the point on its right). Four contacts (Zoë) take one pass over
  the lanes with everything in registers; other counts one pass per pair and contact.
* **branches.** Where the float32 arithmetic cannot decide what the scalar kernel decides in
  float64 - a contact (nearly) on the line of two others, (nearly) collinear or coincident
  contacts (the scalar kernel's mean-normal branch and one- or two-vertex hulls), a plane whose
  eigenvector is ill-conditioned or not converged, a normal (nearly) perpendicular to the body
  z axis (its orientation) or a force (nearly) parallel to the plane (the ``-inf`` test), fewer
  than three contacts - the lane is recomputed by the scalar float64 kernel
  ``_stability_margin`` (its inputs widened to float64 scratch of the workspace) and counted.

One deliberate difference: the in-plane basis vector ``e1`` is the projection of body x or body
y, whichever is longer (the scalar kernel uses body x unless its projection is shorter than
1e-9). The margin does not depend on that choice (a rotation of the plane coordinates).

Layout (:mod:`wmr_model.kinematics.lanes`): body frame ``R[0]`` (3, 3, W), ``p[0]`` (3, W);
contact frames ``Rc`` (nw, 3, 3, W), ``pc`` (nw, 3, W); cg ``cg`` (3, W) in body coordinates;
cg force ``f_cg`` (6, W) in body coordinates (torque rows 0..2, unused; force rows 3..5).
"""

from __future__ import annotations

import numpy as np

from wmr_model._jit import njit
from wmr_model.kinematics.enhanced import _stability_margin, margin_workspace
from wmr_model.kinematics.lanes import F32, FOUR, HALF, INF, ONE, QUARTER, THREE, TWO, ZERO

__all__ = [
    "NEWTON_STEPS",
    "RAYLEIGH_STEPS",
    "margin_lanes_workspace",
    "stability_margin_lanes",
]


#: Newton steps on the characteristic polynomial from 0 toward the smallest eigenvalue; each
#: removes at least a third of the distance (half near a double root), then quadratically.
NEWTON_STEPS = 6
#: Rayleigh-quotient refinements of the eigenvector after Newton (each squares its error).
RAYLEIGH_STEPS = 2

# Fallback thresholds (relative; float32 eps = 1.2e-7). A lane leaves the vector path when
# - the middle eigenvalue gap l1 - l0 <= _GAP l2 (contacts nearly collinear: the scalar
#   kernel's collinear branch is at 1e-9 l2, far below float32 resolution);
# - the eigen-residual |S n - l0 n| > _RESIDUAL (l1 - l0): the normal is not known to 1e-4 rad
#   (Davis-Kahan), i.e. not converged or too ill-conditioned for float32;
# - |n . z_body| <= _NORMAL_SIDE (the orientation of the normal is a sign test);
# - |d . n| <= _FORCE_SIDE |d| (the -inf test is a sign test, and the hit point is far away);
# - some contact is within about _COLLINEAR (sqrt(trace S) + |o|) of the line through two
#   others (the hull edge test is a sign test; its float32 error is a few eps times the
#   coordinates' size, and _COLLINEAR is ~80 eps).
_GAP = F32(1e-4)
_RESIDUAL = F32(1e-4)
_NORMAL_SIDE = F32(1e-3)
_FORCE_SIDE = F32(1e-3)
_COLLINEAR = F32(1e-5)

# rows of the per-lane scratch ``lane`` (.., W) of the workspace
(_E10, _E11, _E12, _E20, _E21, _E22, _HX, _HY, _TOL1, _TOL2, _AWAY, _FALLBACK, _NUM, _DEN,
 _INSIDE, _APOS, _ANEG) = range(17)
_LANE_ROWS = 17


@njit
def margin_lanes_workspace(nc, W):
    """Scratch of :func:`stability_margin_lanes` for ``nc`` contacts and ``W`` lanes.

    float32, lane axis last: ``o`` (3, W) contact centroid, ``S`` (6, W) scatter (rows 00, 01,
    02, 11, 12, 22), ``pts`` (nc, 2, W) contacts in plane coordinates, ``lane`` (17, W)
    per-lane values (plane basis, hit point, thresholds, flags; row ``_FALLBACK`` is 1 where
    the lane took the scalar path in the last call). For the per-lane fallback to the scalar
    kernel :func:`wmr_model.kinematics.enhanced._stability_margin`: float64 ``T_world``
    (1, 4, 4), ``T_contact`` (nc, 4, 4), ``c`` (3,), ``f_cg`` (6,) and its own scratch
    (:func:`~wmr_model.kinematics.enhanced.margin_workspace`, a tuple); last ``count`` (1,)
    int64, the number of fallback lanes over all calls (tests read it; reset it by hand).
    """
    f4 = np.float32
    Tw = np.zeros((1, 4, 4))
    Tw[0, 3, 3] = 1.0
    Tc = np.zeros((nc, 4, 4))
    Tc[:, 3, 3] = 1.0
    return (np.zeros((3, W), f4), np.zeros((6, W), f4), np.zeros((nc, 2, W), f4),
            np.zeros((_LANE_ROWS, W), f4), Tw, Tc, np.zeros(3), np.zeros(6),
            margin_workspace(nc), np.zeros(1, dtype=np.int64))


@njit(refcount=False, lanes=True)
def _scatter_lanes(pc, o0, o1, o2, s00, s01, s02, s11, s12, s22):
    """Centroid ``o`` and scatter ``S = sum_k (p_k - o)(p_k - o)^T`` of the contact points, the
    first part of :func:`wmr_model.kinematics.enhanced.ground_plane_into` (any number of
    contacts: one pass over the lanes per contact)."""
    nw = pc.shape[0]
    W = o0.shape[0]
    cnt = F32(max(nw, 1))
    for l in range(W):
        o0[l] = ZERO
        o1[l] = ZERO
        o2[l] = ZERO
        s00[l] = ZERO
        s01[l] = ZERO
        s02[l] = ZERO
        s11[l] = ZERO
        s12[l] = ZERO
        s22[l] = ZERO
    for k in range(nw):
        for l in range(W):
            o0[l] += pc[k, 0, l]
            o1[l] += pc[k, 1, l]
            o2[l] += pc[k, 2, l]
    for l in range(W):
        o0[l] /= cnt
        o1[l] /= cnt
        o2[l] /= cnt
    for k in range(nw):
        for l in range(W):
            d0 = pc[k, 0, l] - o0[l]
            d1 = pc[k, 1, l] - o1[l]
            d2 = pc[k, 2, l] - o2[l]
            s00[l] += d0 * d0
            s01[l] += d0 * d1
            s02[l] += d0 * d2
            s11[l] += d1 * d1
            s12[l] += d1 * d2
            s22[l] += d2 * d2


@njit(refcount=False, lanes=True)
def _scatter4_lanes(p0, p1, p2, p3, o0, o1, o2, s00, s01, s02, s11, s12, s22):
    """:func:`_scatter_lanes` for four contacts ``p0..p3`` (3, W), in one pass (the sums in
    registers)."""
    for l in range(o0.shape[0]):
        a0 = ((p0[0, l] + p1[0, l]) + p2[0, l]) + p3[0, l]
        a1 = ((p0[1, l] + p1[1, l]) + p2[1, l]) + p3[1, l]
        a2 = ((p0[2, l] + p1[2, l]) + p2[2, l]) + p3[2, l]
        m0 = a0 * QUARTER
        m1 = a1 * QUARTER
        m2 = a2 * QUARTER
        o0[l] = m0
        o1[l] = m1
        o2[l] = m2
        d0, d1, d2 = p0[0, l] - m0, p0[1, l] - m1, p0[2, l] - m2
        t00, t01, t02 = d0 * d0, d0 * d1, d0 * d2
        t11, t12, t22 = d1 * d1, d1 * d2, d2 * d2
        d0, d1, d2 = p1[0, l] - m0, p1[1, l] - m1, p1[2, l] - m2
        t00, t01, t02 = t00 + d0 * d0, t01 + d0 * d1, t02 + d0 * d2
        t11, t12, t22 = t11 + d1 * d1, t12 + d1 * d2, t22 + d2 * d2
        d0, d1, d2 = p2[0, l] - m0, p2[1, l] - m1, p2[2, l] - m2
        t00, t01, t02 = t00 + d0 * d0, t01 + d0 * d1, t02 + d0 * d2
        t11, t12, t22 = t11 + d1 * d1, t12 + d1 * d2, t22 + d2 * d2
        d0, d1, d2 = p3[0, l] - m0, p3[1, l] - m1, p3[2, l] - m2
        s00[l] = t00 + d0 * d0
        s01[l] = t01 + d0 * d1
        s02[l] = t02 + d0 * d2
        s11[l] = t11 + d1 * d1
        s12[l] = t12 + d1 * d2
        s22[l] = t22 + d2 * d2


@njit(refcount=False, inline="always", lanes=True)
def _null_vector(lam, s00, s01, s02, s11, s12, s22):
    """Null vector of ``S - lam I``: the largest cross product of two of its rows, pairs
    (0, 1), (0, 2), (1, 2) in that order, ties to the first, mirroring ``_sym3_null_vector``
    (enhanced.py) with selects. Returns it unnormalized with its squared length."""
    a00 = s00 - lam
    a11 = s11 - lam
    a22 = s22 - lam
    x = s01 * s12 - s02 * a11  # rows 0 x 1
    y = s02 * s01 - a00 * s12
    z = a00 * a11 - s01 * s01
    nn = x * x + y * y + z * z
    x2 = s01 * a22 - s02 * s12  # rows 0 x 2
    y2 = s02 * s02 - a00 * a22
    z2 = a00 * s12 - s01 * s02
    nn2 = x2 * x2 + y2 * y2 + z2 * z2
    take = nn2 > nn
    x = x2 if take else x
    y = y2 if take else y
    z = z2 if take else z
    nn = nn2 if take else nn
    x3 = a11 * a22 - s12 * s12  # rows 1 x 2
    y3 = s12 * s02 - s01 * a22
    z3 = s01 * s12 - a11 * s02
    nn3 = x3 * x3 + y3 * y3 + z3 * z3
    take = nn3 > nn
    x = x3 if take else x
    y = y3 if take else y
    z = z3 if take else z
    nn = nn3 if take else nn
    return x, y, z, nn


@njit(refcount=False, inline="always", lanes=True)
def _rayleigh(n0, n1, n2, s00, s01, s02, s11, s12, s22):
    """``n^T S n`` and ``u = S n`` (the Rayleigh quotient when ``n`` is a unit vector)."""
    u0 = s00 * n0 + s01 * n1 + s02 * n2
    u1 = s01 * n0 + s11 * n1 + s12 * n2
    u2 = s02 * n0 + s12 * n1 + s22 * n2
    return n0 * u0 + n1 * u1 + n2 * u2, u0, u1, u2


@njit(refcount=False, lanes=True)
def _frame_lanes(Rb, pb, cg, f, o, S, few, e10, e11, e12, e20, e21, e22, hx, hy, tol1, tol2,
                 away, fb, num, den, inside, apos, aneg):
    """Per lane: the ground-plane normal (``ground_plane_into``, enhanced.py: the eigenvector
    of the smallest eigenvalue of the scatter ``S`` (6, W), oriented along body +z), the force
    line's hit point on the plane and the plane basis of ``_stability_margin``, the thresholds
    of the hull tests and the fallback flag ``fb`` (module constants); resets the hull
    accumulators ``num``, ``den``, ``inside``, ``apos``, ``aneg``.

    The smallest eigenvalue replaces the trigonometric root of ``_sym3_eigenvalues``: Newton's
    method on ``det(S - lam I) = -lam^3 + t lam^2 - c1 lam + det`` from ``lam = 0``
    (``NEWTON_STEPS``; the iterates rise monotonically to the smallest root of a positive
    semi-definite matrix), then the row cross product of ``_sym3_null_vector`` refined twice
    by the Rayleigh quotient."""
    W = fb.shape[0]
    for l in range(W):
        s00, s01, s02, s11, s12, s22 = S[0, l], S[1, l], S[2, l], S[3, l], S[4, l], S[5, l]
        t = s00 + s11 + s22
        c1 = (s00 * s11 - s01 * s01) + (s00 * s22 - s02 * s02) + (s11 * s22 - s12 * s12)
        det = (s00 * (s11 * s22 - s12 * s12) - s01 * (s01 * s22 - s12 * s02)
               + s02 * (s01 * s12 - s11 * s02))
        lm = ZERO
        for _ in range(NEWTON_STEPS):  # constant trip count: unrolled, the lanes vectorize
            fl = ((t - lm) * lm - c1) * lm + det
            fp = (TWO * t - THREE * lm) * lm - c1
            lm = lm - fl / fp
        n0, n1, n2, nn = _null_vector(lm, s00, s01, s02, s11, s12, s22)
        for _ in range(RAYLEIGH_STEPS):
            lm = _rayleigh(n0, n1, n2, s00, s01, s02, s11, s12, s22)[0] / nn
            n0, n1, n2, nn = _null_vector(lm, s00, s01, s02, s11, s12, s22)
        inv = ONE / np.sqrt(nn)
        n0 *= inv
        n1 *= inv
        n2 *= inv
        lm, u0, u1, u2 = _rayleigh(n0, n1, n2, s00, s01, s02, s11, s12, s22)
        r0 = u0 - lm * n0
        r1 = u1 - lm * n1
        r2 = u2 - lm * n2
        res2 = r0 * r0 + r1 * r1 + r2 * r2
        # the other eigenvalues from the invariants: l1 + l2 = t - l0, l1 l2 = c1 - l0 (t - l0)
        sm = t - lm
        pr = c1 - lm * sm
        disc = max(sm * sm - FOUR * pr, ZERO)
        l2 = (sm + np.sqrt(disc)) * HALF
        gap = (sm - l2) - lm
        rg = _RESIDUAL * gap
        ok = (l2 > ZERO) & (gap > _GAP * l2) & (res2 <= rg * rg) & (not few)
        # orientation along body +z
        nb = n0 * Rb[0, 2, l] + n1 * Rb[1, 2, l] + n2 * Rb[2, 2, l]
        sg = -ONE if nb < ZERO else ONE
        n0 *= sg
        n1 *= sg
        n2 *= sg
        ok = ok & (abs(nb) > _NORMAL_SIDE)
        # force line through the cg (world): d = Rb f, hit = r_cg + s d
        f3, f4, f5 = f[3, l], f[4, l], f[5, l]
        d0 = Rb[0, 0, l] * f3 + Rb[0, 1, l] * f4 + Rb[0, 2, l] * f5
        d1 = Rb[1, 0, l] * f3 + Rb[1, 1, l] * f4 + Rb[1, 2, l] * f5
        d2 = Rb[2, 0, l] * f3 + Rb[2, 1, l] * f4 + Rb[2, 2, l] * f5
        dn = d0 * n0 + d1 * n1 + d2 * n2
        ok = ok & (dn * dn > _FORCE_SIDE * _FORCE_SIDE * (d0 * d0 + d1 * d1 + d2 * d2))
        c0, c1_, c2 = cg[0, l], cg[1, l], cg[2, l]
        oo0, oo1, oo2 = o[0, l], o[1, l], o[2, l]
        g0 = Rb[0, 0, l] * c0 + Rb[0, 1, l] * c1_ + Rb[0, 2, l] * c2 + pb[0, l] - oo0
        g1 = Rb[1, 0, l] * c0 + Rb[1, 1, l] * c1_ + Rb[1, 2, l] * c2 + pb[1, l] - oo1
        g2 = Rb[2, 0, l] * c0 + Rb[2, 1, l] * c1_ + Rb[2, 2, l] * c2 + pb[2, l] - oo2
        s = -(g0 * n0 + g1 * n1 + g2 * n2) / dn
        h0 = g0 + s * d0  # hit point relative to the centroid
        h1 = g1 + s * d1
        h2 = g2 + s * d2
        # plane basis: body x or body y projected on the plane, whichever is longer
        bx0, bx1, bx2 = Rb[0, 0, l], Rb[1, 0, l], Rb[2, 0, l]
        by0, by1, by2 = Rb[0, 1, l], Rb[1, 1, l], Rb[2, 1, l]
        bn = bx0 * n0 + bx1 * n1 + bx2 * n2
        ax0, ax1, ax2 = bx0 - bn * n0, bx1 - bn * n1, bx2 - bn * n2
        bn = by0 * n0 + by1 * n1 + by2 * n2
        ay0, ay1, ay2 = by0 - bn * n0, by1 - bn * n1, by2 - bn * n2
        nx = ax0 * ax0 + ax1 * ax1 + ax2 * ax2
        ny = ay0 * ay0 + ay1 * ay1 + ay2 * ay2
        usey = ny > nx
        inv = ONE / np.sqrt(ny if usey else nx)
        a0 = (ay0 if usey else ax0) * inv
        a1 = (ay1 if usey else ax1) * inv
        a2 = (ay2 if usey else ax2) * inv
        b0 = n1 * a2 - n2 * a1
        b1 = n2 * a0 - n0 * a2
        b2 = n0 * a1 - n1 * a0
        e10[l] = a0
        e11[l] = a1
        e12[l] = a2
        e20[l] = b0
        e21[l] = b1
        e22[l] = b2
        hx[l] = h0 * a0 + h1 * a1 + h2 * a2
        hy[l] = h0 * b0 + h1 * b1 + h2 * b2
        # hull-test thresholds (squared): a contact's distance from the line through two
        # others, C (sqrt(t) + X) with X = |o|_inf, bounded by 2 C^2 (t + X^2) squared
        xo = max(abs(oo0), max(abs(oo1), abs(oo2)))
        q = TWO * _COLLINEAR * _COLLINEAR * (t + xo * xo)
        tol1[l] = q
        tol2[l] = FOUR * q * t
        away[l] = ZERO if dn < ZERO else ONE
        fb[l] = ZERO if ok else ONE
        num[l] = INF  # the running minimum squared distance num / den
        den[l] = ONE
        inside[l] = ONE
        apos[l] = ONE
        aneg[l] = ONE


@njit(refcount=False, lanes=True)
def _project_lanes(pk, o, e10, e11, e12, e20, e21, e22, x, y):
    """Contact ``pk`` (3, W) in plane coordinates ``(x, y)``: ``pts[k]`` of
    ``_stability_margin`` (enhanced.py)."""
    for l in range(x.shape[0]):
        r0 = pk[0, l] - o[0, l]
        r1 = pk[1, l] - o[1, l]
        r2 = pk[2, l] - o[2, l]
        x[l] = r0 * e10[l] + r1 * e11[l] + r2 * e12[l]
        y[l] = r0 * e20[l] + r1 * e21[l] + r2 * e22[l]


@njit(refcount=False, inline="always", lanes=True)
def _near_line(cr, l2, tl1, tl2):
    """Whether the cross product ``cr`` of the line ``i -> j`` (squared length ``l2``) with a
    contact ``k`` is within the float32 resolution: ``|cr| <= D (|p_j - p_i| + 2 sqrt(t))``
    with ``D`` the distance threshold, ``tl1 >= D^2``, ``tl2 >= 4 D^2 t``; tested in the
    sufficient squared form ``cr^2 <= 2 (tl1 l2 + tl2)`` (no square root). The float32 error
    of ``cr`` is a few eps times the coordinates' size times ``|p_j - p_i| + |p_k - p_i|``."""
    return cr * cr <= TWO * (tl1 * l2 + tl2)


@njit(refcount=False, lanes=True)
def _side_lanes(xi, yi, xj, yj, xk, yk, tol1, tol2, apos, aneg, fb):
    """Which side of the line ``i -> j`` contact ``k`` lies on (``_cross2`` of
    ``support_polygon_into``, enhanced.py): ``apos`` / ``aneg`` stay 1 while every contact so
    far is strictly left / right; ``fb`` set where ``k`` is within the threshold of the line
    (the sign is then not decided in float32)."""
    for l in range(xi.shape[0]):
        ax = xj[l] - xi[l]
        ay = yj[l] - yi[l]
        cr = ax * (yk[l] - yi[l]) - ay * (xk[l] - xi[l])
        near = _near_line(cr, ax * ax + ay * ay, tol1[l], tol2[l])
        apos[l] = apos[l] if cr > ZERO else ZERO
        aneg[l] = aneg[l] if cr < ZERO else ZERO
        fb[l] = ONE if near else fb[l]


@njit(refcount=False, inline="always", lanes=True)
def _edge(xi, yi, xj, yj, hx, hy, ccw, cw, num, den, inside):
    """One candidate hull edge ``{i, j}``, an edge where ``ccw`` (every other contact strictly
    left of ``i -> j``) or ``cw`` (strictly right): the loop body of ``_stability_margin``
    (enhanced.py). The squared ``_segment_distance`` of the hit point ``(hx, hy)`` is the
    fraction ``n / d``: the squared distance to the nearer end (``d = 1``) where the
    projection parameter ``(p - a) . (b - a) / |b - a|^2`` leaves [0, 1], else
    ``cross^2 / |b - a|^2``; the running minimum ``num / den`` is lowered by comparing
    cross-multiplied fractions (no division per edge; the square root and the division are
    taken once at the end, both monotonic, so the minimum is the same number). Returns
    ``num``, ``den`` and ``inside`` cleared when the point is on the outer side."""
    dx = xj - xi
    dy = yj - yi
    px = hx - xi
    py = hy - yi
    L2 = dx * dx + dy * dy
    pd = px * dx + py * dy
    cp = dx * py - dy * px
    qx = px - dx
    qy = py - dy
    n = px * px + py * py if pd <= ZERO else (qx * qx + qy * qy if pd >= L2 else cp * cp)
    d = L2 if (pd > ZERO) & (pd < L2) else ONE
    lower = (ccw | cw) & (n * den < num * d)
    num = n if lower else num
    den = d if lower else den
    out = (ccw & (cp < ZERO)) | (cw & (cp > ZERO))
    return num, den, inside & (not out)


@njit(refcount=False, lanes=True)
def _edge_lanes(xi, yi, xj, yj, hx, hy, apos, aneg, num, den, inside):
    """:func:`_edge` for the pair ``{i, j}`` with the side flags ``apos``, ``aneg`` of
    :func:`_side_lanes`, which are reset to 1 for the next pair; ``num / den`` the running
    minimum squared distance."""
    for l in range(xi.shape[0]):
        n, d, ins = _edge(xi[l], yi[l], xj[l], yj[l], hx[l], hy[l], apos[l] > ZERO,
                          aneg[l] > ZERO, num[l], den[l], inside[l] > ZERO)
        num[l] = n
        den[l] = d
        inside[l] = ONE if ins else ZERO
        apos[l] = ONE
        aneg[l] = ONE


@njit(refcount=False, lanes=True)
def _finish_lanes(num, den, inside, away, out):
    """Signed margin: the distance inside, minus it outside, ``-inf`` where the force does not
    point into the ground (end of ``_stability_margin``, enhanced.py); the squared distance is
    ``num / den``."""
    for l in range(out.shape[0]):
        d = np.sqrt(num[l] / den[l])
        m = d if inside[l] > ZERO else -d
        out[l] = -INF if away[l] > ZERO else m


@njit(refcount=False, inline="always", lanes=True)
def _pair4(xi, yi, xj, yj, xk, yk, xm, ym, hx, hy, tl1, tl2, num, den, inside, near):
    """Pair ``{i, j}`` of four contacts (the others ``k``, ``m``): the side tests of
    :func:`_side_lanes` and the edge of :func:`_edge`, in registers."""
    ax = xj - xi
    ay = yj - yi
    l2 = ax * ax + ay * ay
    ck = ax * (yk - yi) - ay * (xk - xi)
    cm = ax * (ym - yi) - ay * (xm - xi)
    near = near | _near_line(ck, l2, tl1, tl2) | _near_line(cm, l2, tl1, tl2)
    ccw = (ck > ZERO) & (cm > ZERO)
    cw = (ck < ZERO) & (cm < ZERO)
    num, den, inside = _edge(xi, yi, xj, yj, hx, hy, ccw, cw, num, den, inside)
    return num, den, inside, near


@njit(refcount=False, lanes=True)
def _hull4_lanes(p0, p1, p2, p3, o, e10, e11, e12, e20, e21, e22, hx, hy, tol1, tol2, away,
                 fb, out):
    """Support polygon and signed margin for four contacts ``p0..p3`` (3, W) in one pass:
    :func:`_project_lanes`, the six pairs' side tests and edges, :func:`_finish_lanes`; ``fb``
    set where a side test is not decided in float32."""
    for l in range(out.shape[0]):
        a0, a1, a2 = e10[l], e11[l], e12[l]
        b0, b1, b2 = e20[l], e21[l], e22[l]
        c0, c1, c2 = o[0, l], o[1, l], o[2, l]
        r0, r1, r2 = p0[0, l] - c0, p0[1, l] - c1, p0[2, l] - c2
        x0, y0 = r0 * a0 + r1 * a1 + r2 * a2, r0 * b0 + r1 * b1 + r2 * b2
        r0, r1, r2 = p1[0, l] - c0, p1[1, l] - c1, p1[2, l] - c2
        x1, y1 = r0 * a0 + r1 * a1 + r2 * a2, r0 * b0 + r1 * b1 + r2 * b2
        r0, r1, r2 = p2[0, l] - c0, p2[1, l] - c1, p2[2, l] - c2
        x2, y2 = r0 * a0 + r1 * a1 + r2 * a2, r0 * b0 + r1 * b1 + r2 * b2
        r0, r1, r2 = p3[0, l] - c0, p3[1, l] - c1, p3[2, l] - c2
        x3, y3 = r0 * a0 + r1 * a1 + r2 * a2, r0 * b0 + r1 * b1 + r2 * b2
        px, py, tl1, tl2 = hx[l], hy[l], tol1[l], tol2[l]
        nm = INF
        dn = ONE
        ins = True
        near = False
        nm, dn, ins, near = _pair4(x0, y0, x1, y1, x2, y2, x3, y3, px, py, tl1, tl2, nm, dn, ins,
                                   near)
        nm, dn, ins, near = _pair4(x0, y0, x2, y2, x1, y1, x3, y3, px, py, tl1, tl2, nm, dn, ins,
                                   near)
        nm, dn, ins, near = _pair4(x0, y0, x3, y3, x1, y1, x2, y2, px, py, tl1, tl2, nm, dn, ins,
                                   near)
        nm, dn, ins, near = _pair4(x1, y1, x2, y2, x0, y0, x3, y3, px, py, tl1, tl2, nm, dn, ins,
                                   near)
        nm, dn, ins, near = _pair4(x1, y1, x3, y3, x0, y0, x2, y2, px, py, tl1, tl2, nm, dn, ins,
                                   near)
        nm, dn, ins, near = _pair4(x2, y2, x3, y3, x0, y0, x1, y1, px, py, tl1, tl2, nm, dn, ins,
                                   near)
        fb[l] = ONE if near else fb[l]
        d = np.sqrt(nm / dn)
        m = d if ins else -d
        out[l] = -INF if away[l] > ZERO else m


@njit(refcount=False)
def _hull_lanes(pc, o, pts, lane, out):
    """Support polygon and signed margin for any number of contacts: the contacts in plane
    coordinates (:func:`_project_lanes`), per pair ``{i, j}`` the side tests of every other
    contact (:func:`_side_lanes`) and the edge (:func:`_edge_lanes`), then
    :func:`_finish_lanes`. One pass over the lanes per step (the generic form of
    :func:`_hull4_lanes`)."""
    nw = pc.shape[0]
    for k in range(nw):
        _project_lanes(pc[k], o, lane[_E10], lane[_E11], lane[_E12], lane[_E20], lane[_E21],
                       lane[_E22], pts[k, 0], pts[k, 1])
    for i in range(nw):
        for j in range(i + 1, nw):
            for k in range(nw):
                if k != i and k != j:
                    _side_lanes(pts[i, 0], pts[i, 1], pts[j, 0], pts[j, 1], pts[k, 0],
                                pts[k, 1], lane[_TOL1], lane[_TOL2], lane[_APOS], lane[_ANEG],
                                lane[_FALLBACK])
            _edge_lanes(pts[i, 0], pts[i, 1], pts[j, 0], pts[j, 1], lane[_HX], lane[_HY],
                        lane[_APOS], lane[_ANEG], lane[_NUM], lane[_DEN], lane[_INSIDE])
    _finish_lanes(lane[_NUM], lane[_DEN], lane[_INSIDE], lane[_AWAY], out)


@njit(refcount=False, lanes=True)
def stability_margin_lanes(R, p, Rc, pc, cg, f_cg, out, ws):
    """Signed rollover stability margin [m] (§2.3) of W candidates, mirroring
    :func:`wmr_model.kinematics.enhanced.stability_margin` per lane.

    ``R`` (nf, 3, 3, W), ``p`` (nf, 3, W) world frames (frame 0, the body, is read);
    ``Rc`` (nw, 3, 3, W), ``pc`` (nw, 3, W) contact frames (``Rc`` only on the fallback path);
    ``cg`` (3, W) the cg and ``f_cg`` (6, W) the cg force (2.46), both in body coordinates
    (``c``, ``f_cg`` of the scalar kernel); ``out`` (W,) float32 margin; ``ws`` from
    :func:`margin_lanes_workspace`. Lanes the float32 path cannot decide (module docstring)
    are computed by the scalar float64 kernel; their number is added to ``ws[-1][0]``.
    """
    o, S, pts, lane, Tw, Tc, c64, f64, mws, count = ws
    nw = pc.shape[0]
    W = out.shape[0]
    if nw == 4:
        _scatter4_lanes(pc[0], pc[1], pc[2], pc[3], o[0], o[1], o[2], S[0], S[1], S[2], S[3],
                        S[4], S[5])
    else:
        _scatter_lanes(pc, o[0], o[1], o[2], S[0], S[1], S[2], S[3], S[4], S[5])
    _frame_lanes(R[0], p[0], cg, f_cg, o, S, nw < 3, lane[_E10], lane[_E11], lane[_E12],
                 lane[_E20], lane[_E21], lane[_E22], lane[_HX], lane[_HY], lane[_TOL1],
                 lane[_TOL2], lane[_AWAY], lane[_FALLBACK], lane[_NUM], lane[_DEN],
                 lane[_INSIDE], lane[_APOS], lane[_ANEG])
    if nw == 4:
        _hull4_lanes(pc[0], pc[1], pc[2], pc[3], o, lane[_E10], lane[_E11], lane[_E12],
                     lane[_E20], lane[_E21], lane[_E22], lane[_HX], lane[_HY], lane[_TOL1],
                     lane[_TOL2], lane[_AWAY], lane[_FALLBACK], out)
    else:
        _hull_lanes(pc, o, pts, lane, out)
    fb = lane[_FALLBACK]
    nfb = 0
    for l in range(W):
        if fb[l] != ZERO:
            for i in range(3):
                for j in range(3):
                    Tw[0, i, j] = R[0, i, j, l]
                Tw[0, i, 3] = p[0, i, l]
                c64[i] = cg[i, l]
            for i in range(6):
                f64[i] = f_cg[i, l]
            for k in range(nw):
                for i in range(3):
                    for j in range(3):
                        Tc[k, i, j] = Rc[k, i, j, l]
                    Tc[k, i, 3] = pc[k, i, l]
            out[l] = _stability_margin(Tw, Tc, c64, f64, mws)
            nfb += 1
    count[0] += nfb
