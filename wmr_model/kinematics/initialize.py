"""Initialization of terrain contact, (2.27)-(2.32) (Seegmiller 2014, §2.2.4).

Gauss-Newton with a backtracking line search on the squared contact height errors and
holonomic constraints over the free initialization coordinates, in Euler form
(:func:`euler_state`, :func:`state_from_euler`).
"""

from __future__ import annotations

import math

import numpy as np

from wmr_model._jit import njit
from wmr_model.kinematics.constraints import (
    holonomic_constraints,
    loop_closure_rows,
    track_point_jacobian,
    wheel_jacobian,
)
from wmr_model.kinematics.track_collision import contact_detection, track_activation
from wmr_model.spatial import omega_euler_rates_inv, quat_from_euler, quat_to_rot, rot_to_euler
from wmr_model.vehicles.tree import forward_kinematics

__all__ = [
    "euler_state", "state_from_euler", "initialize_terrain_contact",
]


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
    contact_detection(m, t, (m.track_frame, m.track_drive, m.track_path), T_world,
                      d.T_contact, dz, d.contact_angle)
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
            track_point_jacobian(m, (track_frame, track_drive, track_path), T_world,
                                 T_contact, contact_angle, nw, k, belt, blk)
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
