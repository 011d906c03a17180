"""Lane constraint system and partitioned velocity solve (float32 lanes, candidate axis last).

* :func:`rows_lanes`: the wheels' rows of the Baumgarte-stabilized system ``A qdot = v``
  (2.33)-(2.36), mirroring :func:`wmr_model.kinematics.constraints.constraint_system` for a
  wheeled vehicle (no track patches, no joint constraints, no loop closures);
* :func:`solve_lanes`: the partitioned least-squares solve (2.37)-(2.38), mirroring
  :func:`wmr_model.kinematics.solve.solve_partitioned` (and so the vehicle's specialized solve
  of :mod:`wmr_model.kinematics.specialized`, which performs the same operations): normal
  equations of the unknown columns, Cholesky factor with the rank test of
  :func:`~wmr_model.kinematics.solve.cholesky_factor` at
  :data:`~wmr_model.kinematics.solve.CHOLESKY_PIVOT_RTOL`, forward and back substitution;
* :func:`resolve_lanes`: the same ``A`` with a new right-hand side and the kept factor,
  mirroring :func:`wmr_model.kinematics.solve.resolve_partitioned`.

Layout (:mod:`wmr_model.kinematics.lanes`): frames ``R`` (nf, 3, 3, W), ``p`` (nf, 3, W);
contacts ``Rc`` (nw, 3, 3, W), ``pc`` (nw, 3, W), ``dz`` (nw, W); ``A`` (3 nw, nv, W), ``v``
(3 nw, W); ``qdot`` (nv, W); all float32.

Precision of the solve: the normal equations square the condition number of the unknown
columns (up to about 500 for Zoe on rough terrain), so float32 normal equations lose up to
1e-3 of the velocity. The solve therefore forms the right-hand side and the normal equations
from the float32 ``A``, ``v`` in float64 lanes (products of float32 numbers are exact in
float64), and factors and substitutes in float64: its result is that of the scalar float64
solve on the float32 inputs to a few float64 ulp times the condition, and the rank test at the
scalar's relative pivot tolerance 1e-10 (meaningless in float32, whose round-off alone is 1e-7
of the largest pivot) takes the scalar's decisions. The float64 scratch lives in the
workspace (:func:`solve_lanes_workspace`). Lanes whose normal equations fail the rank test are
solved by the scalar generic kernel (float64 copies of that lane, minimum-norm SVD solution),
one lane at a time.
"""

from __future__ import annotations

import numpy as np

from wmr_model._jit import njit
from wmr_model.kinematics.solve import CHOLESKY_PIVOT_RTOL, resolve_partitioned, solve_partitioned
from wmr_model.vehicles.model import PRISMATIC, REVOLUTE

__all__ = ["rows_lanes", "solve_lanes_workspace", "solve_lanes", "resolve_lanes"]

_F = np.float32
_D = np.float64
_ZERO32 = _F(0.0)
_ZERO = _D(0.0)
_ONE = _D(1.0)
_RTOL = _D(CHOLESKY_PIVOT_RTOL)


# Alias checks. numba cannot tell LLVM that two arrays never overlap, so each vectorized lane
# loop starts with run-time checks of its accesses' address ranges. LLVM hoists those checks out
# of the enclosing loops when it can express the ranges for the whole loop nest; where a loop
# writes several rows of one array, or reads the array it writes, those whole-nest ranges
# overlap, the hoisted check fails and the scalar loop runs every time (measured: no faster
# than with vectorization off). The lane loops are therefore kept out of counted loop nests:
# in functions of their own (called per wheel and joint), or indexed through indices read
# from memory (the solve's ``seq``, 0, 1, 2, ...), which LLVM cannot extrapolate.


@njit(refcount=False, inline="always", lanes=True)
def _put_column(A, r0, c, l, c00, c01, c02, c10, c11, c12, c20, c21, c22, w0, w1, w2):
    """Column ``c`` of rows r0..r0+2 of ``A``, lane ``l``: the world vector ``w`` rotated into
    contact coordinates, ``Rc^T w`` with ``Rc = [c_sr]`` (Algorithm 2 line 14)."""
    A[r0, c, l] = c00 * w0 + c10 * w1 + c20 * w2
    A[r0 + 1, c, l] = c01 * w0 + c11 * w1 + c21 * w2
    A[r0 + 2, c, l] = c02 * w0 + c12 * w1 + c22 * w2


@njit(refcount=False, inline="always", lanes=True)
def _body_pair(R, p, Rc, pc, k, j, A):
    """Body columns ``j`` and ``3 + j`` of wheel k's rows, every lane (Algorithm 2 lines
    12-13): ``b x d`` and ``b`` for the body axis ``b = R_b[:, j]`` and ``d = r_c - r_b``,
    rotated into contact coordinates (:func:`_put_column`)."""
    r0 = 3 * k
    for l in range(A.shape[2]):
        b0 = R[0, 0, j, l]
        b1 = R[0, 1, j, l]
        b2 = R[0, 2, j, l]
        d0 = pc[k, 0, l] - p[0, 0, l]
        d1 = pc[k, 1, l] - p[0, 1, l]
        d2 = pc[k, 2, l] - p[0, 2, l]
        c00 = Rc[k, 0, 0, l]
        c01 = Rc[k, 0, 1, l]
        c02 = Rc[k, 0, 2, l]
        c10 = Rc[k, 1, 0, l]
        c11 = Rc[k, 1, 1, l]
        c12 = Rc[k, 1, 2, l]
        c20 = Rc[k, 2, 0, l]
        c21 = Rc[k, 2, 1, l]
        c22 = Rc[k, 2, 2, l]
        _put_column(A, r0, j, l, c00, c01, c02, c10, c11, c12, c20, c21, c22,
                    b1 * d2 - b2 * d1, b2 * d0 - b0 * d2, b0 * d1 - b1 * d0)
        _put_column(A, r0, 3 + j, l, c00, c01, c02, c10, c11, c12, c20, c21, c22, b0, b1, b2)


@njit(refcount=False, lanes=True)
def _wheel_rows(R, p, Rc, pc, dz, vc_xy, ns, k, A, v):
    """Wheel k's body columns (Algorithm 2 lines 12-14), zero joint columns and right-hand
    side ``[vx, vy, ns dz]`` (2.35) (``ns = -sigma``), every lane: the body part of
    :func:`~wmr_model.kinematics.constraints._wheel_jacobian_rows` and the wheel rows of
    :func:`~wmr_model.kinematics.constraints.constraint_system`; the joint columns on the
    wheel's chain are :func:`_chain_column`'s."""
    nv = A.shape[1]
    W = A.shape[2]
    r0 = 3 * k
    for r in range(r0, r0 + 3):  # stores only: no alias checks
        for j in range(6, nv):
            for l in range(W):
                A[r, j, l] = _ZERO32
    _body_pair(R, p, Rc, pc, k, 0, A)
    _body_pair(R, p, Rc, pc, k, 1, A)
    _body_pair(R, p, Rc, pc, k, 2, A)
    for l in range(W):
        v[r0, l] = vc_xy[k, 0, l]
        v[r0 + 1, l] = vc_xy[k, 1, l]
        v[r0 + 2, l] = ns * dz[k, l]


@njit(refcount=False, lanes=True)
def _chain_column(R, p, Rc, pc, k, i, revolute, a0, a1, a2, A):
    """Joint column ``5 + i`` of wheel k's rows, every lane (Algorithm 2 lines 4-9, 14): frame
    i's world axis ``a = R_i axis_i`` (``axis_i = (a0, a1, a2)``), crossed with ``r_c - r_i``
    for a revolute joint, as is for a prismatic one, rotated into contact coordinates: one
    step of :func:`~wmr_model.kinematics.constraints._chain_point_rows`."""
    r0 = 3 * k
    c = 5 + i
    W = A.shape[2]
    if revolute:
        for l in range(W):
            x = R[i, 0, 0, l] * a0 + R[i, 0, 1, l] * a1 + R[i, 0, 2, l] * a2
            y = R[i, 1, 0, l] * a0 + R[i, 1, 1, l] * a1 + R[i, 1, 2, l] * a2
            z = R[i, 2, 0, l] * a0 + R[i, 2, 1, l] * a1 + R[i, 2, 2, l] * a2
            dx = pc[k, 0, l] - p[i, 0, l]
            dy = pc[k, 1, l] - p[i, 1, l]
            dzl = pc[k, 2, l] - p[i, 2, l]
            _put_column(A, r0, c, l, Rc[k, 0, 0, l], Rc[k, 0, 1, l], Rc[k, 0, 2, l],
                        Rc[k, 1, 0, l], Rc[k, 1, 1, l], Rc[k, 1, 2, l], Rc[k, 2, 0, l],
                        Rc[k, 2, 1, l], Rc[k, 2, 2, l],
                        y * dzl - z * dy, z * dx - x * dzl, x * dy - y * dx)
    else:
        for l in range(W):
            _put_column(A, r0, c, l, Rc[k, 0, 0, l], Rc[k, 0, 1, l], Rc[k, 0, 2, l],
                        Rc[k, 1, 0, l], Rc[k, 1, 1, l], Rc[k, 1, 2, l], Rc[k, 2, 0, l],
                        Rc[k, 2, 1, l], Rc[k, 2, 2, l],
                        R[i, 0, 0, l] * a0 + R[i, 0, 1, l] * a1 + R[i, 0, 2, l] * a2,
                        R[i, 1, 0, l] * a0 + R[i, 1, 1, l] * a1 + R[i, 1, 2, l] * a2,
                        R[i, 2, 0, l] * a0 + R[i, 2, 1, l] * a1 + R[i, 2, 2, l] * a2)


@njit(refcount=False, lanes=True)
def rows_lanes(m, R, p, Rc, pc, dz, q, sigma, vc_xy, A, v):
    """Wheel rows of the stacked constraint system ``A qdot = v``, (2.33)-(2.36), for W states.

    Mirrors :func:`wmr_model.kinematics.constraints.constraint_system` (its wheel part,
    :func:`~wmr_model.kinematics.constraints._wheel_jacobian_rows`, Algorithm 2 / (2.24)):
    rows ``3k..3k+2`` are wheel k's Jacobian in its contact coordinates: each joint on the
    chain from the wheel frame up to the body (the wheel's own spin joint first) contributes
    ``axis x (r_c - r_i)`` (revolute) or its axis (prismatic), the body ``R_b[:, j] x (r_c -
    r_b)`` and ``R_b[:, j]``; the world columns are rotated by ``Rc^T``, and joint columns off
    the chain are zero (as are those of joints that are neither revolute nor prismatic).
    Right-hand side ``[vx, vy, -sigma dz]`` (2.35) with the added contact slip ``vc_xy``
    (nw, 2, W) (zero for no-slip kinematics). ``R``, ``p``, ``Rc``, ``pc``, ``dz`` from the lane
    forward kinematics and contact; ``q`` (nq, W) is not read (the holonomic rows that need it
    are out of scope: the model must have no track patches, joint constraints or loop
    closures); ``sigma`` the Baumgarte gain [1/s]. Writes ``A`` (3 nw, nv, W) and ``v``
    (3 nw, W).
    """
    parent, jtype, axis, wheel_frame = m.parent, m.jtype, m.axis, m.wheel_frame
    nw = wheel_frame.shape[0]
    if (A.shape[0] != 3 * nw or m.track_frame.shape[0] > 0 or m.A_joint.shape[0] > 0
            or m.loop_closure.shape[0] > 0):
        raise ValueError("rows_lanes: wheels only (no tracks, joint constraints, loops)")
    ns = _F(-sigma)
    for k in range(nw):
        _wheel_rows(R, p, Rc, pc, dz, vc_xy, ns, k, A, v)
        i = wheel_frame[k]
        while i > 0:
            if jtype[i] == REVOLUTE or jtype[i] == PRISMATIC:
                _chain_column(R, p, Rc, pc, k, i, jtype[i] == REVOLUTE, _F(axis[i, 0]),
                              _F(axis[i, 1]), _F(axis[i, 2]), A)
            i = parent[i]


@njit
def solve_lanes_workspace(nv, rows, known, W):
    """Scratch of :func:`solve_lanes` / :func:`resolve_lanes` for ``rows`` constraint rows,
    ``nv`` columns, the known mask ``known`` (nv,) bool and W lanes; the lane counterpart of
    :func:`wmr_model.kinematics.solve.solve_workspace` (2.37)-(2.38).

    Returns ``(idx, seq, info, rhs, N, x, dmax, bad, fb, A64, v64, qk64, qd64, srhs, sN, sx,
    sinfo)``:

    * ``idx`` (nv,) int64: the unknown indices (first nu entries); ``seq`` (max(nv, rows),)
      int64: 0, 1, 2, ... (indices read from memory, see the alias-check note of the module);
      ``info`` (4,) int64 = [nu, 1 when ``N`` holds the factor of the last solve, fallback
      lanes of the last solve, fallback lanes of all solves so far];
    * float64 lanes: ``rhs`` (rows, W), ``N`` (nu, nu, W) the normal matrix then its Cholesky
      factor (lower triangle, kept for the re-solve), ``x`` (nu, W), ``dmax`` (W,) the largest
      diagonal, ``bad`` (W,) 1 where the rank test failed;
    * ``fb`` (W,) int64: 1 for a lane the last solve handed to the scalar kernel;
    * one lane's float64 copies for the scalar kernel, ``A64`` (rows, nv), ``v64`` (rows,),
      ``qk64`` (nv,), ``qd64`` (nv,), and the pieces of a scalar
      :func:`~wmr_model.kinematics.solve.solve_workspace` per lane: ``srhs`` (rows,), ``sN``
      (W, nu, nu), ``sx`` (nv,), ``sinfo`` (W, 3) int64 (each lane keeps its own factor and
      flags for the scalar re-solve; residual norm off).
    """
    if known.shape[0] != nv:
        raise ValueError("solve_lanes_workspace: known must have nv entries")
    idx = np.zeros(nv, dtype=np.int64)
    nu = 0
    for j in range(nv):
        if not known[j]:
            idx[nu] = j
            nu += 1
    info = np.zeros(4, dtype=np.int64)
    info[0] = nu
    return (idx, np.arange(max(nv, rows), dtype=np.int64), info, np.zeros((rows, W)),
            np.zeros((nu, nu, W)), np.zeros((nu, W)), np.zeros(W), np.zeros(W),
            np.zeros(W, dtype=np.int64), np.zeros((rows, nv)), np.zeros(rows), np.zeros(nv),
            np.zeros(nv), np.zeros(rows), np.zeros((W, nu, nu)), np.zeros(nv),
            np.zeros((W, 3), dtype=np.int64))


@njit(refcount=False, lanes=True)
def _known_rhs_lanes(A, v, known, qdot_known, qdot, seq, rhs):
    """``rhs = v - A[:, known] qdot[known]`` (2.37) in float64 lanes, and the known entries of
    ``qdot``; mirrors :func:`wmr_model.kinematics.solve._known_rhs` (the same sums in the same
    order; a zero known rate subtracts exact zeros, which the scalar kernel skips)."""
    m, nv, W = A.shape
    for r0 in range(m):
        r = seq[r0]
        for l in range(W):
            rhs[r, l] = _D(v[r, l])
    for j in range(nv):
        if known[j]:
            for l in range(W):
                qdot[j, l] = qdot_known[j, l]
            for r0 in range(m):
                r = seq[r0]
                for l in range(W):
                    rhs[r, l] = rhs[r, l] - _D(A[r, j, l]) * _D(qdot_known[j, l])


@njit(refcount=False, lanes=True)
def _accumulate_rhs(A, idx, seq, nu, rhs, x):
    """``x = Au^T rhs`` (the right-hand side of the normal equations, (2.38)) in float64 lanes,
    each entry summed over the rows in order (six, then three, then one row per lane loop)."""
    m, _, W = A.shape
    for a0 in range(nu):
        a = seq[a0]
        ja = idx[a]
        for l in range(W):
            x[a, l] = _ZERO
        r = 0
        while r + 6 <= m:
            for l in range(W):
                x[a, l] = ((((((x[a, l] + _D(A[r, ja, l]) * rhs[r, l])
                               + _D(A[r + 1, ja, l]) * rhs[r + 1, l])
                              + _D(A[r + 2, ja, l]) * rhs[r + 2, l])
                             + _D(A[r + 3, ja, l]) * rhs[r + 3, l])
                            + _D(A[r + 4, ja, l]) * rhs[r + 4, l])
                           + _D(A[r + 5, ja, l]) * rhs[r + 5, l])
            r += 6
        while r + 3 <= m:
            for l in range(W):
                x[a, l] = (((x[a, l] + _D(A[r, ja, l]) * rhs[r, l])
                            + _D(A[r + 1, ja, l]) * rhs[r + 1, l])
                           + _D(A[r + 2, ja, l]) * rhs[r + 2, l])
            r += 3
        while r < m:
            for l in range(W):
                x[a, l] = x[a, l] + _D(A[r, ja, l]) * rhs[r, l]
            r += 1


@njit(refcount=False, lanes=True)
def _substitute_lanes(N, x, nu, seq):
    """``x = (L L^T)^{-1} x`` with the lower factor ``L`` in ``N`` (nu, nu, W): forward and
    back substitution per lane, as :func:`wmr_model.kinematics.solve.cholesky_solve` (the
    same subtractions in the same order, four per lane loop)."""
    W = N.shape[2]
    for i0 in range(nu):  # L y = b
        i = seq[i0]
        k0 = 0
        while k0 + 4 <= i0:
            k, k1, k2, k3 = seq[k0], seq[k0 + 1], seq[k0 + 2], seq[k0 + 3]
            for l in range(W):
                x[i, l] = ((((x[i, l] - N[i, k, l] * x[k, l]) - N[i, k1, l] * x[k1, l])
                            - N[i, k2, l] * x[k2, l]) - N[i, k3, l] * x[k3, l])
            k0 += 4
        while k0 < i0:
            k = seq[k0]
            for l in range(W):
                x[i, l] = x[i, l] - N[i, k, l] * x[k, l]
            k0 += 1
        for l in range(W):
            x[i, l] = x[i, l] / N[i, i, l]
    for i0 in range(nu - 1, -1, -1):  # L^T x = y
        i = seq[i0]
        k0 = i0 + 1
        while k0 + 4 <= nu:
            k, k1, k2, k3 = seq[k0], seq[k0 + 1], seq[k0 + 2], seq[k0 + 3]
            for l in range(W):
                x[i, l] = ((((x[i, l] - N[k, i, l] * x[k, l]) - N[k1, i, l] * x[k1, l])
                            - N[k2, i, l] * x[k2, l]) - N[k3, i, l] * x[k3, l])
            k0 += 4
        while k0 < nu:
            k = seq[k0]
            for l in range(W):
                x[i, l] = x[i, l] - N[k, i, l] * x[k, l]
            k0 += 1
        for l in range(W):
            x[i, l] = x[i, l] / N[i, i, l]


@njit(refcount=False)
def _lane_to_scalar(A, v, qdot_known, l, A64, v64, qk64):
    """Float64 copies of lane ``l`` of ``A``, ``v`` and ``qdot_known`` for the scalar kernel."""
    m, nv, _ = A.shape
    for r in range(m):
        v64[r] = v[r, l]
        for j in range(nv):
            A64[r, j] = A[r, j, l]
    for j in range(nv):
        qk64[j] = qdot_known[j, l]


@njit(refcount=False, lanes=True)
def solve_lanes(A, v, known, qdot_known, qdot, ws):
    """Partitioned least-squares solve (2.37)-(2.38) of W systems ``A qdot = v``.

    Mirrors :func:`wmr_model.kinematics.solve.solve_partitioned` (``_solve_partitioned``; the
    specialized solve of :func:`wmr_model.kinematics.specialized.model_solve` does the same
    operations): ``rhs = v - A[:, known] qdot_known[known]``, the normal equations ``N =
    Au^T Au``, ``Au^T rhs`` of the unknown columns ``Au``, each entry summed over the rows in
    order (products with exact zeros of ``A``, which the scalar kernel skips, add nothing),
    the Cholesky factor of ``N`` in place
    with the scalar's rank test (a pivot <= 0 or <=
    :data:`~wmr_model.kinematics.solve.CHOLESKY_PIVOT_RTOL` times the largest diagonal fails,
    :func:`~wmr_model.kinematics.solve.cholesky_factor`), then the two substitutions. All of it
    in float64 lanes from the float32 ``A`` (rows, nv, W), ``v`` (rows, W), ``qdot_known``
    (nv, W) (module docstring). A lane failing the rank test is solved by the scalar generic
    kernel on float64 copies of that lane (the minimum-norm SVD solution, or its Cholesky
    solution where its own test passes: the two sums differ by round-off, so a pivot within
    round-off of the tolerance may be decided either way), its scalar factor or flag kept for
    :func:`resolve_lanes`.

    ``known`` (nv,) bool, the same for every lane; ``qdot`` (nv, W) written: the known entries
    copied from ``qdot_known``, the unknown ones the least-squares solution rounded to float32.
    ``ws`` from :func:`solve_lanes_workspace` for this ``known``, row count and W; it keeps
    the factor for :func:`resolve_lanes`. Returns the number of fallback lanes (also
    ``ws[2][2]``; the running total in ``ws[2][3]``). No residual norm is computed.
    """
    (idx, seq, info, rhs, N, x, dmax, bad, fb, A64, v64, qk64, qd64, srhs, sN, sx,
     sinfo) = ws
    m, nv, W = A.shape
    nu = 0
    for j in range(nv):
        if not known[j]:
            idx[nu] = j
            nu += 1
    if nu != N.shape[0] or W != N.shape[2] or m != rhs.shape[0]:
        raise ValueError("solve_lanes: ws was made for another known set, size or width")
    info[0] = nu
    info[1] = 0
    info[2] = 0
    _known_rhs_lanes(A, v, known, qdot_known, qdot, seq, rhs)
    for l in range(W):
        fb[l] = 0
    if nu == 0:
        return 0
    # normal equations, lower triangle, each entry summed over the rows in order (six,
    # then three, then one row per lane loop; the first six rows assign)
    for a0 in range(nu):
        a = seq[a0]
        ja = idx[a]
        for b0 in range(a0 + 1):
            b = seq[b0]
            jb = idx[b]
            r = 0
            if m >= 6:
                for l in range(W):
                    N[a, b, l] = (((((_D(A[0, ja, l]) * _D(A[0, jb, l])
                                      + _D(A[1, ja, l]) * _D(A[1, jb, l]))
                                     + _D(A[2, ja, l]) * _D(A[2, jb, l]))
                                    + _D(A[3, ja, l]) * _D(A[3, jb, l]))
                                   + _D(A[4, ja, l]) * _D(A[4, jb, l]))
                                  + _D(A[5, ja, l]) * _D(A[5, jb, l]))
                r = 6
            else:
                for l in range(W):
                    N[a, b, l] = _ZERO
            while r + 6 <= m:
                for l in range(W):
                    N[a, b, l] = ((((((N[a, b, l] + _D(A[r, ja, l]) * _D(A[r, jb, l]))
                                      + _D(A[r + 1, ja, l]) * _D(A[r + 1, jb, l]))
                                     + _D(A[r + 2, ja, l]) * _D(A[r + 2, jb, l]))
                                    + _D(A[r + 3, ja, l]) * _D(A[r + 3, jb, l]))
                                   + _D(A[r + 4, ja, l]) * _D(A[r + 4, jb, l]))
                                  + _D(A[r + 5, ja, l]) * _D(A[r + 5, jb, l]))
                r += 6
            while r + 3 <= m:
                for l in range(W):
                    N[a, b, l] = (((N[a, b, l] + _D(A[r, ja, l]) * _D(A[r, jb, l]))
                                   + _D(A[r + 1, ja, l]) * _D(A[r + 1, jb, l]))
                                  + _D(A[r + 2, ja, l]) * _D(A[r + 2, jb, l]))
                r += 3
            while r < m:
                for l in range(W):
                    N[a, b, l] = N[a, b, l] + _D(A[r, ja, l]) * _D(A[r, jb, l])
                r += 1
    _accumulate_rhs(A, idx, seq, nu, rhs, x)
    # Cholesky in place (cholesky_factor with H = Lf = N, the same subtractions in the same
    # order, four per lane loop); a lane failing the rank test continues with a unit pivot
    # (no NaN) and is marked for the fallback
    for l in range(W):
        dmax[l] = _ZERO
        bad[l] = _ZERO
    for i0 in range(nu):
        i = seq[i0]
        for l in range(W):
            h = N[i, i, l]
            dmax[l] = h if h > dmax[l] else dmax[l]
    for j0 in range(nu):
        j = seq[j0]
        k0 = 0
        while k0 + 4 <= j0:
            k, k1, k2, k3 = seq[k0], seq[k0 + 1], seq[k0 + 2], seq[k0 + 3]
            for l in range(W):
                N[j, j, l] = ((((N[j, j, l] - N[j, k, l] * N[j, k, l])
                                - N[j, k1, l] * N[j, k1, l]) - N[j, k2, l] * N[j, k2, l])
                              - N[j, k3, l] * N[j, k3, l])
            k0 += 4
        while k0 < j0:
            k = seq[k0]
            for l in range(W):
                N[j, j, l] = N[j, j, l] - N[j, k, l] * N[j, k, l]
            k0 += 1
        for l in range(W):
            d = N[j, j, l]
            fail = (d <= _RTOL * dmax[l]) | (d <= _ZERO)
            bad[l] = _ONE if fail else bad[l]
            N[j, j, l] = np.sqrt(_ONE if fail else d)
        for i0 in range(j0 + 1, nu):
            i = seq[i0]
            k0 = 0
            while k0 + 4 <= j0:
                k, k1, k2, k3 = seq[k0], seq[k0 + 1], seq[k0 + 2], seq[k0 + 3]
                for l in range(W):
                    N[i, j, l] = ((((N[i, j, l] - N[i, k, l] * N[j, k, l])
                                    - N[i, k1, l] * N[j, k1, l]) - N[i, k2, l] * N[j, k2, l])
                                  - N[i, k3, l] * N[j, k3, l])
                k0 += 4
            while k0 < j0:
                k = seq[k0]
                for l in range(W):
                    N[i, j, l] = N[i, j, l] - N[i, k, l] * N[j, k, l]
                k0 += 1
            for l in range(W):
                N[i, j, l] = N[i, j, l] / N[j, j, l]
    info[1] = 1
    _substitute_lanes(N, x, nu, seq)
    for a in range(nu):
        ja = idx[a]
        for l in range(W):
            qdot[ja, l] = _F(x[a, l])
    # lanes rank deficient to the pivot tolerance: the scalar generic kernel, lane by lane
    nfb = 0
    for l in range(W):
        if bad[l] == _ZERO:
            continue
        fb[l] = 1
        nfb += 1
        _lane_to_scalar(A, v, qdot_known, l, A64, v64, qk64)
        sinfo[l, 2] = 0
        # the scalar kernel rewrites idx with the same unknown indices
        solve_partitioned(A64, v64, known, qk64, qd64, (idx, srhs, sN[l], sx, sinfo[l]))
        for j in range(nv):
            qdot[j, l] = _F(qd64[j])
    info[2] = nfb
    info[3] += nfb
    return nfb


@njit(refcount=False, lanes=True)
def resolve_lanes(A, v, known, qdot_known, qdot, ws):
    """:func:`solve_lanes` again with a new right-hand side ``v`` (rows, W) and the same ``A``
    and ``known`` as the last solve that used ``ws``: the right-hand side rebuilt (2.37), ``Au^T
    rhs`` formed and the kept Cholesky factor back-substituted (2.38), without refactoring.
    Mirrors :func:`wmr_model.kinematics.solve.resolve_partitioned` (enhanced kinematics'
    second solve); the lanes the last solve handed to the scalar kernel are re-solved by the
    scalar :func:`~wmr_model.kinematics.solve.resolve_partitioned` with their own kept factor
    or SVD. ``qdot_known`` (nv, W), ``qdot`` (nv, W) written as in :func:`solve_lanes`. Returns
    the number of fallback lanes.
    """
    (idx, seq, info, rhs, N, x, _dmax, _bad, fb, A64, v64, qk64, qd64, srhs, sN, sx,
     sinfo) = ws
    m, nv, W = A.shape
    nu = info[0]
    if nu > 0 and info[1] != 1:
        raise ValueError("resolve_lanes: ws holds no factor (solve_lanes first)")
    if W != N.shape[2] or m != rhs.shape[0]:
        raise ValueError("resolve_lanes: ws was made for another size or width")
    _known_rhs_lanes(A, v, known, qdot_known, qdot, seq, rhs)
    if nu == 0:
        return 0
    _accumulate_rhs(A, idx, seq, nu, rhs, x)
    _substitute_lanes(N, x, nu, seq)
    for a in range(nu):
        ja = idx[a]
        for l in range(W):
            qdot[ja, l] = _F(x[a, l])
    nfb = 0
    for l in range(W):
        if fb[l] == 0:
            continue
        nfb += 1
        _lane_to_scalar(A, v, qdot_known, l, A64, v64, qk64)
        resolve_partitioned(A64, v64, known, qk64, qd64, (idx, srhs, sN[l], sx, sinfo[l]))
        for j in range(nv):
            qdot[j, l] = _F(qd64[j])
    return nfb
