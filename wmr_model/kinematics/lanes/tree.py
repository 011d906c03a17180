"""Lane forward kinematics and the Euler step (float32, candidate axis last).

* :func:`sincos_lanes`: sine and cosine of W angles by range reduction and polynomials, so the
  joint rotations vectorize (no vector math library here: ``math.sin`` runs one lane at a
  time);
* :func:`fk_lanes`: Algorithm 1 / (2.11), mirroring
  :func:`wmr_model.vehicles.tree.forward_kinematics`;
* :func:`euler_lanes`: (2.39) with the exact quaternion exponential, mirroring
  :func:`wmr_model.kinematics.integrate.integrate_euler`.

Layout (:mod:`wmr_model.kinematics.lanes`): state ``q`` (nq, W), velocity ``qdot`` (nv, W),
frame rotations ``R`` (nf, 3, 3, W) and origins ``p`` (nf, 3, W), all float32.
"""

from __future__ import annotations

import numpy as np

from wmr_model._jit import njit
from wmr_model.kinematics.lanes import F32, FOUR, HALF, ONE, QUARTER, THREE, TWO, ZERO
from wmr_model.vehicles.model import REVOLUTE

__all__ = ["sincos_lanes", "fk_lanes", "euler_lanes"]

# pi/2 in three float32 parts (Cody-Waite): k * _P1 is exact for |k| < 2**12, so the reduced
# argument keeps float32 accuracy for angles up to about 6000 rad (wheel spin over hours).
_TWO_OVER_PI = F32(0.6366197723675814)
_P1 = F32(1.5703125)
_P2 = F32(4.837512969970703125e-4)
_P3 = F32(7.549789948768648e-8)
# sin and cos on [-pi/4, pi/4]: Taylor coefficients to x^9 / x^8, truncation below 4e-9
# (under float32 rounding of the result).
_S3 = F32(-1.0 / 6.0)
_S5 = F32(1.0 / 120.0)
_S7 = F32(-1.0 / 5040.0)
_S9 = F32(1.0 / 362880.0)
_C2 = F32(-0.5)
_C4 = F32(1.0 / 24.0)
_C6 = F32(-1.0 / 720.0)
_C8 = F32(1.0 / 40320.0)
_EIGHTH = F32(0.125)
_FORTY_EIGHTH = F32(1.0 / 48.0)
_SMALL = F32(1e-4)  # below: half-angle series (error < a^4 / 3840, under float32 rounding)


@njit(refcount=False, inline="always", lanes=True)
def sincos_lanes(x):
    """``(sin x, cos x)`` of a float32 angle, vectorizable: ``x = k pi/2 + r`` with |r| <= pi/4,
    the series of ``sin r`` and ``cos r``, the quadrant ``k mod 4`` applied by selects. Within
    a few float32 ulp of ``math.sin``/``math.cos`` for |x| < 6000
    (``test/core/test_lanes_tree.py``)."""
    k = np.floor(x * _TWO_OVER_PI + HALF)
    r = ((x - k * _P1) - k * _P2) - k * _P3
    r2 = r * r
    s = r + r * r2 * (_S3 + r2 * (_S5 + r2 * (_S7 + r2 * _S9)))
    c = ONE + r2 * (_C2 + r2 * (_C4 + r2 * (_C6 + r2 * _C8)))
    m = k - FOUR * np.floor(k * QUARTER)  # 0, 1, 2, 3
    odd = (m == ONE) | (m == THREE)
    sn = c if odd else s
    cs = s if odd else c
    sn = -sn if m >= TWO else sn
    cs = -cs if (m == ONE) | (m == TWO) else cs
    return sn, cs


@njit(refcount=False, lanes=True)
def fk_lanes(m, q, R, p):
    """Algorithm 1 / (2.11) for W states: ``R`` (nf, 3, 3, W), ``p`` (nf, 3, W) written from
    ``q`` (nq, W); mirrors :func:`wmr_model.vehicles.tree.forward_kinematics`
    (``T_world[i] = T_world[parent[i]] @ T0[i] @ Joint(axis[i], q[6 + i])``)."""
    parent, jtype = m.parent, m.jtype
    W = q.shape[1]
    for l in range(W):  # body: quaternion to rotation (quat_rot_entries)
        w, x, y, z = q[0, l], q[1, l], q[2, l], q[3, l]
        R[0, 0, 0, l] = ONE - TWO * (y * y + z * z)
        R[0, 0, 1, l] = TWO * (x * y - w * z)
        R[0, 0, 2, l] = TWO * (x * z + w * y)
        R[0, 1, 0, l] = TWO * (x * y + w * z)
        R[0, 1, 1, l] = ONE - TWO * (x * x + z * z)
        R[0, 1, 2, l] = TWO * (y * z - w * x)
        R[0, 2, 0, l] = TWO * (x * z - w * y)
        R[0, 2, 1, l] = TWO * (y * z + w * x)
        R[0, 2, 2, l] = ONE - TWO * (x * x + y * y)
    for r in range(3):
        for l in range(W):
            p[0, r, l] = q[4 + r, l]
    for i in range(1, parent.shape[0]):
        # the parent's and the child's frame as separate (non-overlapping) views: LLVM cannot
        # tell rows of one array apart, and would not vectorize
        j = parent[i]
        if jtype[i] == REVOLUTE:
            _revolute_lanes(m.axis[i], m.T0[i], q[6 + i], R[j], p[j], R[i], p[i])
        else:
            _prismatic_lanes(m.axis[i], m.T0[i], q[6 + i], R[j], p[j], R[i], p[i])


@njit(refcount=False, lanes=True)
def _revolute_lanes(axis, T0, th, Rj, pj, Ri, pi):
    """Frame of a revolute joint: ``Ri, pi = (Rj, pj) @ T0 @ Rot(axis, th)`` per lane
    (Rodrigues, :func:`wmr_model.vehicles.tree.joint_motion`)."""
    ax, ay, az = F32(axis[0]), F32(axis[1]), F32(axis[2])
    a00, a01, a02 = F32(T0[0, 0]), F32(T0[0, 1]), F32(T0[0, 2])
    a10, a11, a12 = F32(T0[1, 0]), F32(T0[1, 1]), F32(T0[1, 2])
    a20, a21, a22 = F32(T0[2, 0]), F32(T0[2, 1]), F32(T0[2, 2])
    t0, t1, t2 = F32(T0[0, 3]), F32(T0[1, 3]), F32(T0[2, 3])
    for r in range(3):  # the joint leaves the origin where T0 puts it
        for l in range(th.shape[0]):
            pi[r, l] = Rj[r, 0, l] * t0 + Rj[r, 1, l] * t1 + Rj[r, 2, l] * t2 + pj[r, l]
    for l in range(th.shape[0]):
        s, c = sincos_lanes(th[l])
        t = ONE - c
        j00, j01, j02 = c + t * ax * ax, t * ax * ay - s * az, t * ax * az + s * ay
        j10, j11, j12 = t * ax * ay + s * az, c + t * ay * ay, t * ay * az - s * ax
        j20, j21, j22 = t * ax * az - s * ay, t * ay * az + s * ax, c + t * az * az
        l00 = a00 * j00 + a01 * j10 + a02 * j20
        l01 = a00 * j01 + a01 * j11 + a02 * j21
        l02 = a00 * j02 + a01 * j12 + a02 * j22
        l10 = a10 * j00 + a11 * j10 + a12 * j20
        l11 = a10 * j01 + a11 * j11 + a12 * j21
        l12 = a10 * j02 + a11 * j12 + a12 * j22
        l20 = a20 * j00 + a21 * j10 + a22 * j20
        l21 = a20 * j01 + a21 * j11 + a22 * j21
        l22 = a20 * j02 + a21 * j12 + a22 * j22
        for r in range(3):
            b0, b1, b2 = Rj[r, 0, l], Rj[r, 1, l], Rj[r, 2, l]
            Ri[r, 0, l] = b0 * l00 + b1 * l10 + b2 * l20
            Ri[r, 1, l] = b0 * l01 + b1 * l11 + b2 * l21
            Ri[r, 2, l] = b0 * l02 + b1 * l12 + b2 * l22


@njit(refcount=False, lanes=True)
def _prismatic_lanes(axis, T0, d, Rj, pj, Ri, pi):
    """Frame of a prismatic joint: ``Ri = Rj T0_R``, ``pi = Rj (T0_R axis d + T0_p) + pj`` per
    lane (:func:`wmr_model.vehicles.tree.joint_motion`)."""
    for r in range(3):
        for c in range(3):
            a0, a1, a2 = F32(T0[0, c]), F32(T0[1, c]), F32(T0[2, c])
            for l in range(d.shape[0]):
                Ri[r, c, l] = Rj[r, 0, l] * a0 + Rj[r, 1, l] * a1 + Rj[r, 2, l] * a2
    u0 = F32(T0[0, 0] * axis[0] + T0[0, 1] * axis[1] + T0[0, 2] * axis[2])
    u1 = F32(T0[1, 0] * axis[0] + T0[1, 1] * axis[1] + T0[1, 2] * axis[2])
    u2 = F32(T0[2, 0] * axis[0] + T0[2, 1] * axis[1] + T0[2, 2] * axis[2])
    t0, t1, t2 = F32(T0[0, 3]), F32(T0[1, 3]), F32(T0[2, 3])
    for r in range(3):
        for l in range(d.shape[0]):
            o0, o1, o2 = u0 * d[l] + t0, u1 * d[l] + t1, u2 * d[l] + t2
            pi[r, l] = Rj[r, 0, l] * o0 + Rj[r, 1, l] * o1 + Rj[r, 2, l] * o2 + pj[r, l]


@njit(refcount=False, lanes=True)
def euler_lanes(q, qdot, dt, qn):
    """One Euler step (2.39) for W states, mirroring
    :func:`wmr_model.kinematics.integrate.integrate_euler`: the orientation by the exact
    quaternion exponential of the body rate over ``dt`` (``quat_exp_body_into``: product, then
    unit length with non-negative scalar part), the position with the rotation at the start of
    the step, joints linearly. ``q``, ``qn`` (nq, W), ``qdot`` (nv, W); ``qn`` must not be
    ``q``."""
    W = q.shape[1]
    h = F32(dt)
    for l in range(W):
        ax, ay, az = qdot[0, l] * h, qdot[1, l] * h, qdot[2, l] * h
        a2 = ax * ax + ay * ay + az * az
        a = np.sqrt(a2)
        sh, ch = sincos_lanes(HALF * a)
        small = a < _SMALL
        ew = ONE - a2 * _EIGHTH if small else ch
        k = HALF - a2 * _FORTY_EIGHTH if small else sh / a
        ex, ey, ez = k * ax, k * ay, k * az
        w, x, y, z = q[0, l], q[1, l], q[2, l], q[3, l]
        nw = w * ew - x * ex - y * ey - z * ez
        nx = w * ex + x * ew + y * ez - z * ey
        ny = w * ey - x * ez + y * ew + z * ex
        nz = w * ez + x * ey - y * ex + z * ew
        n = np.sqrt(nw * nw + nx * nx + ny * ny + nz * nz)
        inv = -ONE / n if nw < ZERO else ONE / n
        qn[0, l] = nw * inv
        qn[1, l] = nx * inv
        qn[2, l] = ny * inv
        qn[3, l] = nz * inv
        v0, v1, v2 = qdot[3, l], qdot[4, l], qdot[5, l]
        qn[4, l] = q[4, l] + ((ONE - TWO * (y * y + z * z)) * v0 + TWO * (x * y - w * z) * v1
                              + TWO * (x * z + w * y) * v2) * h
        qn[5, l] = q[5, l] + (TWO * (x * y + w * z) * v0 + (ONE - TWO * (x * x + z * z)) * v1
                              + TWO * (y * z - w * x) * v2) * h
        qn[6, l] = q[6, l] + (TWO * (x * z - w * y) * v0 + TWO * (y * z + w * x) * v1
                              + (ONE - TWO * (x * x + y * y)) * v2) * h
    for i in range(7, q.shape[0]):
        for l in range(W):
            qn[i, l] = q[i, l] + qdot[i - 1, l] * h
