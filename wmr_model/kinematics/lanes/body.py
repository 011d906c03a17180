"""Lane body slip of enhanced kinematics and the lane pose-covariance step (float32).

* :func:`body_composite_lanes`: the body composite inertia on the reduced (wheels folded) tree,
  mirroring :func:`wmr_model.vehicles.inertia.body_composite_inertia_into` (Algorithm 3
  backward pass with :func:`wmr_model.vehicles.inertia.add_child_inertia`);
* :func:`body_slip_lanes`: steps 2-3 of
  :func:`wmr_model.kinematics.enhanced.enhanced_joint_space_velocity` before its re-solve:
  cg, body force (2.44), cg force (2.45)-(2.47), cg slip (2.48)-(2.49), body slip (2.50) and
  wheel slip (2.52) written into the slip rows of ``v``;
* :func:`pose_covariance_lanes`: one step (3.22)-(3.24), mirroring
  :func:`wmr_model.kinematics.uncertainty.propagate_pose_covariance`.

Layout (:mod:`wmr_model.kinematics.lanes`): every per-candidate array is float32 with the lane
axis last. A spatial inertia ``[[A, [h]x], [[h]x^T, m 1]]`` (B.13) is kept in lanes as its six
distinct entries of ``A`` (order 00, 01, 02, 11, 12, 22) and its first moment ``h`` (3,); its
mass does not depend on the configuration and is a float64 constant of the workspace. These
are exactly the entries :func:`~wmr_model.vehicles.inertia.add_child_inertia` reads and
writes, so the sums are the scalar kernel's.
"""

from __future__ import annotations

import numpy as np

from wmr_model._jit import njit
from wmr_model.kinematics.enhanced import MIN_NORMAL_LOAD_FRACTION, TURN_RATIO_LENGTH
from wmr_model.kinematics.lanes import F32, HALF, ONE, TWO, ZERO

__all__ = [
    "body_lanes_workspace",
    "body_composite_lanes",
    "body_slip_lanes",
    "pose_covariance_workspace",
    "pose_covariance_lanes",
]

_TURN_B = F32(TURN_RATIO_LENGTH)

# positions of the symmetric 3x3 entries in the packed (6,) order 00, 01, 02, 11, 12, 22
_SYM = np.array([[0, 1, 2], [1, 3, 4], [2, 4, 5]], dtype=np.int64)


def body_lanes_workspace(keep: np.ndarray, parent_k: np.ndarray, I_k: np.ndarray,
                         W: int) -> tuple:
    """Constants and scratch of :func:`body_slip_lanes` for ``W`` lanes.

    ``(keep, parent_k, I_k)``: the reduced tree of
    :func:`wmr_model.vehicles.inertia.fold_spinning_leaves` (the batch folds its model once;
    ``(arange(nf), parent, I_frame)`` is the whole tree, the unfolded scalar path). Returns
    ``(keep, parent_k, A0, h0, mc, As, hs)``: the tree (int64), the kept frames' own inertias
    packed as float32 constants ``A0`` (nk, 6) and ``h0`` (nk, 3) (B.13), the composite masses
    ``mc`` (nk,) float64 (the subtree sums in the scalar backward pass's order), and the lane
    scratch ``As`` (nk, 6, W), ``hs`` (nk, 3, W) of the composite inertias.
    """
    keep = np.ascontiguousarray(keep, dtype=np.int64)
    parent_k = np.ascontiguousarray(parent_k, dtype=np.int64)
    I_k = np.asarray(I_k, dtype=float)
    nk = keep.shape[0]
    A0 = np.empty((nk, 6), dtype=np.float32)
    h0 = np.empty((nk, 3), dtype=np.float32)
    for j in range(nk):
        for r in range(3):
            for c in range(r, 3):
                A0[j, _SYM[r, c]] = I_k[j, r, c]
        h0[j] = (I_k[j, 2, 4], I_k[j, 0, 5], I_k[j, 1, 3])
    mc = np.ascontiguousarray(I_k[:, 3, 3], dtype=float).copy()
    for i in range(nk - 1, 0, -1):
        mc[parent_k[i]] += mc[i]
    return (keep, parent_k, A0, h0, mc, np.zeros((nk, 6, W), dtype=np.float32),
            np.zeros((nk, 3, W), dtype=np.float32))


@njit(refcount=False, lanes=True)
def body_composite_lanes(R, p, ws):
    """Body composite inertia :math:`I_b^c` of W configurations on the reduced tree, Algorithm 3
    lines 1-4, mirroring :func:`wmr_model.vehicles.inertia.body_composite_inertia_into`.

    ``R`` (nf, 3, 3, W), ``p`` (nf, 3, W) world frames; ``ws`` from
    :func:`body_lanes_workspace`. For each kept frame from the last to the second, its
    transform in its parent's coordinates (B.3, as
    :func:`~wmr_model.vehicles.inertia.relative_transform`) and the structured congruence
    :func:`~wmr_model.vehicles.inertia.add_child_inertia` (B.12). Writes the packed composites
    ``ws[5]`` (nk, 6, W) and ``ws[6]`` (nk, 3, W); position 0 is the body's.
    """
    keep, parent_k, A0, h0, mc, As, hs = ws
    W = R.shape[3]
    nk = keep.shape[0]
    for j in range(nk):
        for e in range(6):
            a = A0[j, e]
            for l in range(W):
                As[j, e, l] = a
        for e in range(3):
            a = h0[j, e]
            for l in range(W):
                hs[j, e, l] = a
    for i in range(nk - 1, 0, -1):
        # the child's and the parent's rows as separate (non-overlapping) views, so that LLVM
        # knows the writes to the parent do not touch what the lane loop reads
        k = parent_k[i]
        fi = keep[i]
        fp = keep[k]
        _add_child_lanes(F32(mc[i]), R[fp], p[fp], R[fi], p[fi], As[i], hs[i], As[k], hs[k])


@njit(refcount=False, lanes=True)
def _add_child_lanes(m, Rp, pp, Ri, pi, Ai, hi, Ap, hp):
    """One step of the backward pass for W lanes: the child's frame in its parent's
    coordinates (:func:`~wmr_model.vehicles.inertia.relative_transform`, B.3) and
    :func:`~wmr_model.vehicles.inertia.add_child_inertia` (B.12) of the child's packed composite
    ``Ai`` (6, W), ``hi`` (3, W) (mass ``m``) into the parent's ``Ap``, ``hp``; ``Rp``, ``Ri``
    (3, 3, W), ``pp``, ``pi`` (3, W) the parent's and child's world frames."""
    m = F32(m)
    for l in range(Ri.shape[2]):
        # T_i^p = (T_p^w)^-1 T_i^w (B.3): R_rc = sum_k Rp[k, r] Ri[k, c]
        a00 = Rp[0, 0, l]
        a01 = Rp[0, 1, l]
        a02 = Rp[0, 2, l]
        a10 = Rp[1, 0, l]
        a11 = Rp[1, 1, l]
        a12 = Rp[1, 2, l]
        a20 = Rp[2, 0, l]
        a21 = Rp[2, 1, l]
        a22 = Rp[2, 2, l]
        b00 = Ri[0, 0, l]
        b01 = Ri[0, 1, l]
        b02 = Ri[0, 2, l]
        b10 = Ri[1, 0, l]
        b11 = Ri[1, 1, l]
        b12 = Ri[1, 2, l]
        b20 = Ri[2, 0, l]
        b21 = Ri[2, 1, l]
        b22 = Ri[2, 2, l]
        d0 = pi[0, l] - pp[0, l]
        d1 = pi[1, l] - pp[1, l]
        d2 = pi[2, l] - pp[2, l]
        t0 = a00 * d0 + a10 * d1 + a20 * d2
        t1 = a01 * d0 + a11 * d1 + a21 * d2
        t2 = a02 * d0 + a12 * d1 + a22 * d2
        r00 = a00 * b00 + a10 * b10 + a20 * b20
        r01 = a00 * b01 + a10 * b11 + a20 * b21
        r02 = a00 * b02 + a10 * b12 + a20 * b22
        r10 = a01 * b00 + a11 * b10 + a21 * b20
        r11 = a01 * b01 + a11 * b11 + a21 * b21
        r12 = a01 * b02 + a11 * b12 + a21 * b22
        r20 = a02 * b00 + a12 * b10 + a22 * b20
        r21 = a02 * b01 + a12 * b11 + a22 * b21
        r22 = a02 * b02 + a12 * b12 + a22 * b22
        # child composite: A (packed symmetric), h
        s00 = Ai[0, l]
        s01 = Ai[1, l]
        s02 = Ai[2, l]
        s11 = Ai[3, l]
        s12 = Ai[4, l]
        s22 = Ai[5, l]
        h0_ = hi[0, l]
        h1_ = hi[1, l]
        h2_ = hi[2, l]
        # g = R h, RA = R A
        g0 = r00 * h0_ + r01 * h1_ + r02 * h2_
        g1 = r10 * h0_ + r11 * h1_ + r12 * h2_
        g2 = r20 * h0_ + r21 * h1_ + r22 * h2_
        q00 = r00 * s00 + r01 * s01 + r02 * s02
        q01 = r00 * s01 + r01 * s11 + r02 * s12
        q02 = r00 * s02 + r01 * s12 + r02 * s22
        q10 = r10 * s00 + r11 * s01 + r12 * s02
        q11 = r10 * s01 + r11 * s11 + r12 * s12
        q12 = r10 * s02 + r11 * s12 + r12 * s22
        q20 = r20 * s00 + r21 * s01 + r22 * s02
        q21 = r20 * s01 + r21 * s11 + r22 * s12
        q22 = r20 * s02 + r21 * s12 + r22 * s22
        diag = TWO * (t0 * g0 + t1 * g1 + t2 * g2) + m * (t0 * t0 + t1 * t1 + t2 * t2)
        # A' = R A R^T - (R h) t^T - t (R h)^T - m t t^T + diag 1
        e00 = q00 * r00 + q01 * r01 + q02 * r02 - (g0 * t0 + t0 * g0) - m * t0 * t0
        e01 = q00 * r10 + q01 * r11 + q02 * r12 - (g0 * t1 + t0 * g1) - m * t0 * t1
        e02 = q00 * r20 + q01 * r21 + q02 * r22 - (g0 * t2 + t0 * g2) - m * t0 * t2
        e11 = q10 * r10 + q11 * r11 + q12 * r12 - (g1 * t1 + t1 * g1) - m * t1 * t1
        e12 = q10 * r20 + q11 * r21 + q12 * r22 - (g1 * t2 + t1 * g2) - m * t1 * t2
        e22 = q20 * r20 + q21 * r21 + q22 * r22 - (g2 * t2 + t2 * g2) - m * t2 * t2
        Ap[0, l] += e00 + diag
        Ap[1, l] += e01
        Ap[2, l] += e02
        Ap[3, l] += e11 + diag
        Ap[4, l] += e12
        Ap[5, l] += e22 + diag
        # first moment about the parent's origin: R h + m t
        hp[0, l] += g0 + m * t0
        hp[1, l] += g1 + m * t1
        hp[2, l] += g2 + m * t2


@njit(refcount=False, lanes=True)
def body_slip_lanes(R, p, qdot, A, v, vc_xy, slip_p, slip_axes, gravity, enhanced, cg, f_cg,
                    v_b_slip, vc_slip, ws):
    """Steps 2-3 of :func:`wmr_model.kinematics.enhanced.enhanced_joint_space_velocity` for W
    lanes, without the final re-solve (2.38): (2.44)-(2.52).

    Inputs: ``R`` (nf, 3, 3, W), ``p`` (nf, 3, W) world frames; ``qdot`` (nv, W) the first
    solve's velocity (``v_b = qdot[0:6]``); ``A`` (3 nw, nv, W) the wheels' constraint rows;
    ``vc_xy`` (nw, 2, W) the commanded contact slip; ``slip_p`` (8, W) p1..p8 per lane (a
    6-parameter set padded with zeros gives the 6-parameter result); ``slip_axes`` (4, 3) and
    ``gravity`` (3,) float64 as in :class:`~wmr_model.kinematics.enhanced.BodySlip`;
    ``enhanced`` bool; ``ws`` from :func:`body_lanes_workspace`.

    Writes ``cg`` (3, W) (mirrors ``mass_com_into``), ``f_cg`` (6, W) (``body_force_into``
    (2.44), ``cg_force_into`` (2.45)-(2.47)), and with ``enhanced`` ``v_b_slip`` (6, W)
    (``_shift_motion``, ``cg_slip_velocity_into`` (2.48)-(2.49) with the normal-load floor
    ``MIN_NORMAL_LOAD_FRACTION m |g|``, (2.50)), ``vc_slip`` (nw, 2, W) = wheel slip (2.52)
    + ``vc_xy`` and the slip rows ``v[3k]``, ``v[3k + 1]`` (nw wheels = ``vc_slip.shape[0]``).
    Without ``enhanced``: ``v_b_slip = 0``, ``vc_slip = vc_xy``, ``v`` untouched. The scalar
    kernel's branches (load floor, turn ratio) are selects here. A lane kernel: no two
    arguments may share memory.
    """
    body_composite_lanes(R, p, ws)
    As, hs, mc = ws[5], ws[6], ws[4]
    W = R.shape[3]
    mass = mc[0]
    m = F32(mass)
    # c = h / m by the reciprocal (within an ulp of the quotient); c = 0 for a massless model
    inv_m = F32(1.0 / mass) if mass > 0.0 else ZERO
    gx = F32(gravity[0])
    gy = F32(gravity[1])
    gz = F32(gravity[2])
    for l in range(W):
        s00 = As[0, 0, l]
        s01 = As[0, 1, l]
        s02 = As[0, 2, l]
        s11 = As[0, 3, l]
        s12 = As[0, 4, l]
        s22 = As[0, 5, l]
        h0 = hs[0, 0, l]
        h1 = hs[0, 1, l]
        h2 = hs[0, 2, l]
        c0 = h0 * inv_m
        c1 = h1 * inv_m
        c2 = h2 * inv_m
        # g_b = [0; R_b^T g]
        gl0 = R[0, 0, 0, l] * gx + R[0, 1, 0, l] * gy + R[0, 2, 0, l] * gz
        gl1 = R[0, 0, 1, l] * gx + R[0, 1, 1, l] * gy + R[0, 2, 1, l] * gz
        gl2 = R[0, 0, 2, l] * gx + R[0, 1, 2, l] * gy + R[0, 2, 2, l] * gz
        w0 = qdot[0, l]
        w1 = qdot[1, l]
        w2 = qdot[2, l]
        u0 = qdot[3, l]
        u1 = qdot[4, l]
        u2 = qdot[5, l]
        # I_b^c g_b: [h x g; m g]
        fb0 = -h2 * gl1 + h1 * gl2
        fb1 = h2 * gl0 - h0 * gl2
        fb2 = -h1 * gl0 + h0 * gl1
        fb3 = m * gl0
        fb4 = m * gl1
        fb5 = m * gl2
        # I_b^c v_b: [A w + h x u; w x h + m u]
        k0 = s00 * w0 + s01 * w1 + s02 * w2 - h2 * u1 + h1 * u2
        k1 = s01 * w0 + s11 * w1 + s12 * w2 + h2 * u0 - h0 * u2
        k2 = s02 * w0 + s12 * w1 + s22 * w2 - h1 * u0 + h0 * u1
        k3 = h2 * w1 - h1 * w2 + m * u0
        k4 = -h2 * w0 + h0 * w2 + m * u1
        k5 = h1 * w0 - h0 * w1 + m * u2
        # - v x_f (I v) (2.44)
        fb0 -= w1 * k2 - w2 * k1 + u1 * k5 - u2 * k4
        fb1 -= w2 * k0 - w0 * k2 + u2 * k3 - u0 * k5
        fb2 -= w0 * k1 - w1 * k0 + u0 * k4 - u1 * k3
        fb3 -= w1 * k5 - w2 * k4
        fb4 -= w2 * k3 - w0 * k5
        fb5 -= w0 * k4 - w1 * k3
        # at the cg (2.46)-(2.47)
        f_cg[0, l] = fb0 - (c1 * fb5 - c2 * fb4)
        f_cg[1, l] = fb1 - (c2 * fb3 - c0 * fb5)
        f_cg[2, l] = fb2 - (c0 * fb4 - c1 * fb3)
        f_cg[3, l] = fb3
        f_cg[4, l] = fb4
        f_cg[5, l] = fb5
        cg[0, l] = c0
        cg[1, l] = c1
        cg[2, l] = c2
    nw = vc_slip.shape[0]
    if not enhanced:
        for j in range(6):
            for l in range(W):
                v_b_slip[j, l] = ZERO
        for k in range(nw):
            for r in range(2):
                for l in range(W):
                    vc_slip[k, r, l] = vc_xy[k, r, l]
        return
    gnorm = np.sqrt(gravity[0] ** 2 + gravity[1] ** 2 + gravity[2] ** 2)
    min_load = F32(MIN_NORMAL_LOAD_FRACTION * mass * gnorm)
    lon0 = F32(slip_axes[0, 0])
    lon1 = F32(slip_axes[0, 1])
    lon2 = F32(slip_axes[0, 2])
    lat0 = F32(slip_axes[1, 0])
    lat1 = F32(slip_axes[1, 1])
    lat2 = F32(slip_axes[1, 2])
    ang0 = F32(slip_axes[2, 0])
    ang1 = F32(slip_axes[2, 1])
    ang2 = F32(slip_axes[2, 2])
    zn0 = F32(slip_axes[3, 0])
    zn1 = F32(slip_axes[3, 1])
    zn2 = F32(slip_axes[3, 2])
    for l in range(W):
        c0 = cg[0, l]
        c1 = cg[1, l]
        c2 = cg[2, l]
        w0 = qdot[0, l]
        w1 = qdot[1, l]
        w2 = qdot[2, l]
        # v_cg (2.45)
        vc3 = qdot[3, l] + w1 * c2 - w2 * c1
        vc4 = qdot[4, l] + w2 * c0 - w0 * c2
        vc5 = qdot[5, l] + w0 * c1 - w1 * c0
        f3 = f_cg[3, l]
        f4 = f_cg[4, l]
        f5 = f_cg[5, l]
        f_lon = f3 * lon0 + f4 * lon1 + f5 * lon2
        f_lat = f3 * lat0 + f4 * lat1 + f5 * lat2
        f_z = -(f3 * zn0 + f4 * zn1 + f5 * zn2)
        V_lon = vc3 * lon0 + vc4 * lon1 + vc5 * lon2
        V_ang = w0 * ang0 + w1 * ang1 + w2 * ang2
        # (2.48)-(2.49); force ratios zero at or below the load floor
        loaded = f_z > min_load
        den = f_z if loaded else ONE
        r_lon = f_lon / den if loaded else ZERO
        r_lat = f_lat / den if loaded else ZERO
        s_lon = slip_p[0, l] * r_lon * V_lon + slip_p[1, l] * V_lon
        s_lat = slip_p[2, l] * r_lat * V_lon
        s_ang = slip_p[3, l] * r_lat * V_lon + slip_p[4, l] * V_lon + slip_p[5, l] * V_ang
        # turn ratio rho = |V_ang| b / (|V_lon| + |V_ang| b), 0 when V_ang = 0
        w_b = abs(V_ang) * _TURN_B
        turning = w_b > ZERO
        rho = w_b / ((abs(V_lon) + w_b) if turning else ONE)
        s_ang += (slip_p[6, l] * rho + slip_p[7, l] * rho * rho) * V_ang
        sa0 = s_ang * ang0
        sa1 = s_ang * ang1
        sa2 = s_ang * ang2
        sv0 = s_lon * lon0 + s_lat * lat0
        sv1 = s_lon * lon1 + s_lat * lat1
        sv2 = s_lon * lon2 + s_lat * lat2
        # back to the body frame (2.50): [w; v - w x c]
        v_b_slip[0, l] = sa0
        v_b_slip[1, l] = sa1
        v_b_slip[2, l] = sa2
        v_b_slip[3, l] = sv0 + sa1 * (-c2) - sa2 * (-c1)
        v_b_slip[4, l] = sv1 + sa2 * (-c0) - sa0 * (-c2)
        v_b_slip[5, l] = sv2 + sa0 * (-c1) - sa1 * (-c0)
    # wheel slip (2.52) plus the commanded slip, into the slip rows of v
    for k in range(nw):
        for r in range(2):
            row = 3 * k + r
            for l in range(W):
                s = ZERO
                s += A[row, 0, l] * v_b_slip[0, l]
                s += A[row, 1, l] * v_b_slip[1, l]
                s += A[row, 2, l] * v_b_slip[2, l]
                s += A[row, 3, l] * v_b_slip[3, l]
                s += A[row, 4, l] * v_b_slip[4, l]
                s += A[row, 5, l] * v_b_slip[5, l]
                s += vc_xy[k, r, l]
                vc_slip[k, r, l] = s
                v[row, l] = s


@njit
def pose_covariance_workspace(W):
    """Scratch of :func:`pose_covariance_lanes` for ``W`` lanes: ``Fdt`` (6, W) the six nonzeros
    of ``F dt``, ``Q32`` (6, 6) ``Q'`` in float32 and ``Pn`` (6, 6, W) the unsymmetrized
    result, float32."""
    return (np.zeros((6, W), dtype=np.float32), np.zeros((6, 6), dtype=np.float32),
            np.zeros((6, 6, W), dtype=np.float32))


@njit(refcount=False, inline="always", lanes=True)
def _covariance_row(Pn, i, l, R, Q32, Fdt, fdt, x0, x1, x2, x3, x4, x5):
    """Row ``i`` of ``Pn = Phi P + Phi P (F dt)^T + G Q' G^T dt`` in lane ``l`` from row ``i``
    of ``Phi P`` (``x0..x5``): ``G Q'`` row ``i`` (G block-diagonal ``R_b``), then the two
    nonzeros of each row 3..5 of ``F dt`` and ``G^T``."""
    b = 0 if i < 3 else 3
    ib = i - b
    c0 = R[0, ib, 0, l]
    c1 = R[0, ib, 1, l]
    c2 = R[0, ib, 2, l]
    q0 = c0 * Q32[b, 0] + c1 * Q32[b + 1, 0] + c2 * Q32[b + 2, 0]
    q1 = c0 * Q32[b, 1] + c1 * Q32[b + 1, 1] + c2 * Q32[b + 2, 1]
    q2 = c0 * Q32[b, 2] + c1 * Q32[b + 1, 2] + c2 * Q32[b + 2, 2]
    q3 = c0 * Q32[b, 3] + c1 * Q32[b + 1, 3] + c2 * Q32[b + 2, 3]
    q4 = c0 * Q32[b, 4] + c1 * Q32[b + 1, 4] + c2 * Q32[b + 2, 4]
    q5 = c0 * Q32[b, 5] + c1 * Q32[b + 1, 5] + c2 * Q32[b + 2, 5]
    b00 = R[0, 0, 0, l]
    b01 = R[0, 0, 1, l]
    b02 = R[0, 0, 2, l]
    b10 = R[0, 1, 0, l]
    b11 = R[0, 1, 1, l]
    b12 = R[0, 1, 2, l]
    b20 = R[0, 2, 0, l]
    b21 = R[0, 2, 1, l]
    b22 = R[0, 2, 2, l]
    Pn[i, 0, l] = x0 + (q0 * b00 + q1 * b01 + q2 * b02) * fdt
    Pn[i, 1, l] = x1 + (q0 * b10 + q1 * b11 + q2 * b12) * fdt
    Pn[i, 2, l] = x2 + (q0 * b20 + q1 * b21 + q2 * b22) * fdt
    Pn[i, 3, l] = x3 + x1 * Fdt[0, l] + x2 * Fdt[1, l] + (q3 * b00 + q4 * b01 + q5 * b02) * fdt
    Pn[i, 4, l] = x4 + x0 * Fdt[2, l] + x2 * Fdt[3, l] + (q3 * b10 + q4 * b11 + q5 * b12) * fdt
    Pn[i, 5, l] = x5 + x0 * Fdt[4, l] + x1 * Fdt[5, l] + (q3 * b20 + q4 * b21 + q5 * b22) * fdt


@njit(refcount=False, lanes=True)
def pose_covariance_lanes(P, R, qdot, Qprime, dt, ws):
    """One discrete pose-covariance step (3.22)-(3.24) for W lanes, mirroring
    :func:`wmr_model.kinematics.uncertainty.propagate_pose_covariance` (F and G of
    :func:`~wmr_model.kinematics.uncertainty.error_dynamics` used through their structure).

    .. math:: P_k = \\Phi P_{k-1} \\Phi^T + G Q' G^T \\Delta t, \\quad \\Phi = I + F \\Delta t

    ``P`` (6, 6, W) float32, updated in place (symmetrized as the scalar kernel); ``R``
    (nf, 3, 3, W) world frames (``R[0]`` = :math:`R_b^w`); ``qdot`` (nv, W) (``v_b =
    qdot[3:6]``); ``Qprime`` (6, 6) float64 spectral density; ``dt`` [s]; ``ws`` from
    :func:`pose_covariance_workspace`. A lane kernel: no two arguments may share memory.
    """
    Fdt, Q32, Pn = ws
    W = P.shape[2]
    fdt = F32(dt)
    for i in range(6):
        for j in range(6):
            Q32[i, j] = F32(Qprime[i, j])
    for l in range(W):
        v0 = qdot[3, l]
        v1 = qdot[4, l]
        v2 = qdot[5, l]
        u0 = R[0, 0, 0, l] * v0 + R[0, 0, 1, l] * v1 + R[0, 0, 2, l] * v2
        u1 = R[0, 1, 0, l] * v0 + R[0, 1, 1, l] * v1 + R[0, 1, 2, l] * v2
        u2 = R[0, 2, 0, l] * v0 + R[0, 2, 1, l] * v1 + R[0, 2, 2, l] * v2
        # F rows 3..5 = -[u]x: (0, u2, -u1), (-u2, 0, u0), (u1, -u0, 0), times dt
        Fdt[0, l] = u2 * fdt
        Fdt[1, l] = -u1 * fdt
        Fdt[2, l] = -u2 * fdt
        Fdt[3, l] = u0 * fdt
        Fdt[4, l] = u1 * fdt
        Fdt[5, l] = -u0 * fdt
    # rows 0..2 of Phi = I + F dt are the identity's
    for i in range(3):
        for l in range(W):
            _covariance_row(Pn, i, l, R, Q32, Fdt, fdt, P[i, 0, l], P[i, 1, l], P[i, 2, l],
                            P[i, 3, l], P[i, 4, l], P[i, 5, l])
    # rows 3..5: P[i] + (F dt)[i, ka] P[ka] + (F dt)[i, kb] P[kb]
    for i in range(3, 6):
        ka = 1 if i == 3 else 0
        kb = 1 if i == 5 else 2
        fa = 2 * (i - 3)
        fb = fa + 1
        for l in range(W):
            f_a = Fdt[fa, l]
            f_b = Fdt[fb, l]
            _covariance_row(Pn, i, l, R, Q32, Fdt, fdt,
                            P[i, 0, l] + f_a * P[ka, 0, l] + f_b * P[kb, 0, l],
                            P[i, 1, l] + f_a * P[ka, 1, l] + f_b * P[kb, 1, l],
                            P[i, 2, l] + f_a * P[ka, 2, l] + f_b * P[kb, 2, l],
                            P[i, 3, l] + f_a * P[ka, 3, l] + f_b * P[kb, 3, l],
                            P[i, 4, l] + f_a * P[ka, 4, l] + f_b * P[kb, 4, l],
                            P[i, 5, l] + f_a * P[ka, 5, l] + f_b * P[kb, 5, l])
    for i in range(6):
        for j in range(i, 6):
            for l in range(W):
                s = HALF * (Pn[i, j, l] + Pn[j, i, l])
                P[i, j, l] = s
                P[j, i, l] = s
