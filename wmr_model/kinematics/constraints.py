"""Contact Jacobians, holonomic constraints and the stacked constraint system (Seegmiller 2014,
§2.2.2-2.2.5).

Wheel Jacobians by Algorithm 2 (2.24) (:func:`wheel_jacobian`), the track patch Jacobian with
its belt term (:func:`track_point_jacobian`), joint constraints (2.25)-(2.26) and loop closures
(:func:`holonomic_constraints`, :func:`project_loop_closures`), and the Baumgarte-stabilized
system ``A qdot = v`` (2.33)-(2.36) (:func:`constraint_system`).

Arguments: ``parent, jtype, axis`` (nf,), (nf,), (nf, 3) model tree arrays; ``A_joint,
joint_offset`` (ncj, nv), (ncj,): joint constraints c = A_joint[:, 6:] theta - offset;
``loop_closure`` (nlc, LOOP_WIDTH) (:class:`wmr_model.vehicles.model.LoopClosureSpec`); ``q``
(nq,) = [quaternion w x y z, position (3), joints (nj)]; ``qdot`` (nv,) = [body angular
velocity (3), body linear velocity (3), joint rates (nj)] in body coordinates (2.14); rows
3k..3k+2 of ``A`` for contact k. Kernels taking ``m`` read the model record
(:class:`wmr_model.vehicles.model.KernelModel`), ``d`` the workspace
(:class:`wmr_model.kinematics.data.KernelData`).
"""

from __future__ import annotations

import math

import numpy as np

from wmr_model._jit import njit
from wmr_model.kinematics.track_collision import _belt_lowest_patch, _patch_point, track_activation
from wmr_model.vehicles.model import LOOP_DISTANCE, LOOP_POINT, PRISMATIC, REVOLUTE
from wmr_model.vehicles.tree import forward_kinematics

__all__ = [
    "chain_point_jacobian", "wheel_jacobian", "track_point_jacobian",
    "joint_constraint_residual", "loop_closure_rows", "holonomic_constraints",
    "LOOP_PROJECTION_ITERATIONS", "LOOP_PROJECTION_TOL", "project_loop_closures",
    "constraint_system", "contact_velocity_norms",
]


@njit(refcount=False)
def chain_point_jacobian(parent, jtype, axis, T_world, i, p, sign, W):
    """Add ``sign`` times the joint columns of the world velocity of point ``p`` (3,).

    ``p`` (world coordinates) moves with frame ``i``; the loop runs from frame ``i`` up the
    chain to the body (2.19): a revolute joint contributes ``axis x (p - r_j)`` (Algorithm 2
    line 6), a prismatic joint its axis (line 8). Body columns are not touched. ``W`` (3, nv).
    """
    _chain_point_rows(parent, jtype, axis, T_world, i, (p[0], p[1], p[2]), sign, W, 0)


@njit(refcount=False)
def _chain_point_rows(parent, jtype, axis, T_world, i, p, sign, W, r0):
    """:func:`chain_point_jacobian` of the point ``p`` (3-tuple) into rows r0..r0+2 of ``W``."""
    px, py, pz = p
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


@njit(refcount=False)
def _compose_axis(T_world, i, axis):
    """Joint axis of frame ``i`` in world coordinates, ``R_i axis[i]`` (3-tuple)."""
    return ((T_world[i, 0, 0] * axis[i, 0] + T_world[i, 0, 1] * axis[i, 1]
             + T_world[i, 0, 2] * axis[i, 2]),
            (T_world[i, 1, 0] * axis[i, 0] + T_world[i, 1, 1] * axis[i, 1]
             + T_world[i, 1, 2] * axis[i, 2]),
            (T_world[i, 2, 0] * axis[i, 0] + T_world[i, 2, 1] * axis[i, 1]
             + T_world[i, 2, 2] * axis[i, 2]))


@njit(refcount=False)
def wheel_jacobian(parent, jtype, axis, wheel_frame, T_world, T_contact, k, out):
    """Wheel Jacobian of wheel ``k``: ``A_wheel qdot = v_c`` in contact coordinates, Algorithm 2.

    Loops from the wheel frame up the chain to the body (2.19), adding each joint's contribution
    to the contact point velocity (2.23): a revolute joint contributes ``axis x (r_c - r_i)``
    (Alg. 2 line 6), a prismatic joint its axis (line 8), the body ``[r_c - r_b]^T_x R_b`` and
    ``R_b`` (lines 12-13); the result is rotated into contact coordinates (line 14).
    ``out`` (3, nv) is overwritten.
    """
    _wheel_jacobian_rows(parent, jtype, axis, wheel_frame[k], T_world, T_contact, k, out, 0)


@njit(refcount=False)
def _wheel_jacobian_rows(parent, jtype, axis, i, T_world, T_contact, k, out, r0):
    """:func:`wheel_jacobian` of contact ``k`` carried by frame ``i``, into rows r0..r0+2 of
    ``out`` (the world-frame Jacobian is built there, then rotated in place column by column)."""
    nv = out.shape[1]
    for r in range(r0, r0 + 3):
        for j in range(nv):
            out[r, j] = 0.0
    rx, ry, rz = T_contact[k, 0, 3], T_contact[k, 1, 3], T_contact[k, 2, 3]
    _chain_point_rows(parent, jtype, axis, T_world, i, (rx, ry, rz), 1.0, out, r0)
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
def track_point_jacobian(m, tracks, T_world, T_contact, contact_angle, nw, k, belt, out):
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

    ``m``: the :class:`~wmr_model.vehicles.model.KernelModel` (its tree); ``tracks``: the
    patches as ``(frame, drive, path)`` (``m.track_frame, m.track_drive, m.track_path`` or the
    dynamics' :class:`~wmr_model.dynamics.model.TrackData` arrays). ``out`` (3, nv) is
    overwritten; ``belt`` (3,) receives the belt term alone (contact coordinates), so callers
    can separate the rigid part.
    """
    track_frame, track_drive, track_path = tracks
    wheel_jacobian(m.parent, m.jtype, m.axis, track_frame, T_world, T_contact[nw:], k, out)
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


@njit(refcount=False)
def joint_constraint_residual(A_joint, joint_offset, q, c):
    """Holonomic joint constraint values c = A_joint[:, 6:] theta - offset, (2.25), (E.1)."""
    nj = q.shape[0] - 7
    for r in range(A_joint.shape[0]):
        s = -joint_offset[r]
        for k in range(nj):
            s += A_joint[r, 6 + k] * q[7 + k]
        c[r] = s


@njit(refcount=False)
def _loop_rows_of(kind):
    """Constraint rows of one loop closure: 3 point, 1 distance, 2 point on axis."""
    if kind == LOOP_POINT:
        return 3
    if kind == LOOP_DISTANCE:
        return 1
    return 2


@njit(refcount=False)
def loop_closure_rows(loop_closure):
    """Number of constraint rows nlr of the loop closures."""
    n = 0
    for l in range(loop_closure.shape[0]):
        n += _loop_rows_of(int(loop_closure[l, 0]))
    return n


@njit(refcount=False)
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
    if loop_closure.shape[0] == 0:  # no scratch to allocate (most vehicles, every step)
        return
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


@njit(refcount=False)
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
    T_world, T_contact, dz, A, v = d.T_world, d.T_contact, d.dz, d.A, d.v
    nw = wheel_frame.shape[0]
    ntp = m.track_frame.shape[0]
    nc = nw + ntp
    for k in range(nw):
        _wheel_jacobian_rows(parent, jtype, axis, wheel_frame[k], T_world, T_contact, k, A, 3 * k)
        v[3 * k] = vc_xy[k, 0]
        v[3 * k + 1] = vc_xy[k, 1]
        v[3 * k + 2] = -sigma * dz[k]
    if ntp > 0:
        _track_rows(m, d, sigma, vc_xy)
    nh = A.shape[0] - 3 * nc
    if nh > 0:
        _holonomic_rows(m, T_world, q, sigma, nc, A, v)


@njit
def _track_rows(m, d, sigma, vc_xy):
    """The track patches' rows of :func:`constraint_system` (rows ``3(nw + k)``), with their
    scratch."""
    track_frame, track_drive, track_path, track_act = (m.track_frame, m.track_drive,
                                                       m.track_path, m.track_act)
    T_world, T_contact, dz, contact_angle, A, v = (d.T_world, d.T_contact, d.dz,
                                                   d.contact_angle, d.A, d.v)
    nw = m.wheel_frame.shape[0]
    ntp = track_frame.shape[0]
    nv = A.shape[1]
    blk = np.empty((3, nv))
    belt = np.empty(3)
    low = _belt_lowest_patch(track_frame, track_path, dz[nw:])
    for k in range(ntp):
        c = nw + k
        track_point_jacobian(m, (track_frame, track_drive, track_path), T_world, T_contact,
                             contact_angle, nw, k, belt, blk)
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


@njit
def _holonomic_rows(m, T_world, q, sigma, nc, A, v):
    """The last nhc rows of :func:`constraint_system`: the holonomic constraints with
    ``-sigma c`` (2.36)."""
    nh = A.shape[0] - 3 * nc
    ch = np.empty(nh)
    holonomic_constraints(m.parent, m.jtype, m.axis, m.A_joint, m.joint_offset, m.loop_closure,
                          q, T_world, ch, A[3 * nc:])
    for r in range(nh):
        v[3 * nc + r] = -sigma * ch[r]


@njit(refcount=False)
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
