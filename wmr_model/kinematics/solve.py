"""Forward velocity kinematics: the partitioned least-squares solve (2.37)-(2.38) and the
simulation flowchart's velocity step (Seegmiller 2014, §2.2.5, Figure 2.6).

The normal equations of the unknown columns are factored by Cholesky (:func:`cholesky_factor`,
:func:`cholesky_solve`), with the minimum-norm SVD solution when rank deficient
(:func:`solve_partitioned`); the factor is kept for a second right-hand side
(:func:`resolve_partitioned`, enhanced kinematics). Track patches in tension are released and
the system re-solved (:func:`release_track_adhesion`). :func:`joint_space_velocity` chains
Algorithm 1, collision detection (2.8)-(2.9), the constraint system (2.33)-(2.36) and the
solve, reading ``f(m, t, d, ...)``: model record ``m``, terrain ``t``, workspace ``d``
(:class:`wmr_model.kinematics.data.KernelData`).
"""

from __future__ import annotations

import math

import numpy as np

from wmr_model._jit import njit
from wmr_model.kinematics.constraints import constraint_system
from wmr_model.kinematics.specialized import try_specialized_solve
from wmr_model.kinematics.track_collision import contact_detection, track_activation
from wmr_model.vehicles.tree import forward_kinematics

__all__ = [
    "TRACK_RELEASE_TOL", "TRACK_RELEASE_PASSES", "release_track_adhesion",
    "CHOLESKY_PIVOT_RTOL", "cholesky_factor", "cholesky_solve", "solve_workspace",
    "solve_partitioned", "solve_partitioned_with", "resolve_partitioned",
    "resolve_partitioned_with", "joint_space_velocity",
]


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


@njit(refcount=False)
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


@njit(refcount=False)
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


@njit(refcount=False)
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


@njit(refcount=False)
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


@njit(refcount=False)
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


@njit(refcount=False)
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


@njit(refcount=False)
def solve_partitioned_with(solver, A, v, known, qdot_known, qdot, ws):
    """:func:`solve_partitioned` through ``solver``, the address of a vehicle's specialized
    solve made for this ``known`` set (:mod:`wmr_model.kinematics.specialized`;
    bit-identical), or the generic kernel where it declines (other sizes, rank deficient) or
    ``solver`` is 0 (:data:`~wmr_model.kinematics.specialized.GENERIC`) or None. ``A``, ``v``,
    ``qdot_known``, ``qdot`` and ``ws`` (from :func:`solve_workspace`) as there, C-contiguous."""
    if solver is None:
        return _solve_partitioned(A, v, known, qdot_known, qdot, ws)
    if try_specialized_solve(solver, A, v, qdot_known, qdot, ws, 0) == 1:
        return _residual_norm(A, v, qdot) if ws[4][2] == 1 else np.nan
    return _solve_partitioned(A, v, known, qdot_known, qdot, ws)


@njit(refcount=False)
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


@njit(refcount=False)
def resolve_partitioned_with(solver, A, v, known, qdot_known, qdot, ws):
    """:func:`resolve_partitioned` through ``solver`` (as :func:`solve_partitioned_with`; the
    specialized re-solve declines unless ``ws`` holds its known set's Cholesky factor)."""
    if solver is None:
        return resolve_partitioned(A, v, known, qdot_known, qdot, ws)
    if try_specialized_solve(solver, A, v, qdot_known, qdot, ws, 1) == 1:
        return _residual_norm(A, v, qdot) if ws[4][2] == 1 else np.nan
    return resolve_partitioned(A, v, known, qdot_known, qdot, ws)


@njit(refcount=False)
def joint_space_velocity(m, t, d, q, known, qdot_known, sigma, vc_xy, qdot, solver=None):
    """Forward position kinematics, collision detection and forward velocity kinematics.

    The three blocks of the simulation flowchart (Figure 2.6) for one state: Algorithm 1,
    (2.8)-(2.9), then (2.33)-(2.38), for the model ``m`` (:class:`~wmr_model.vehicles.model
    .KernelModel`) on the terrain ``t`` (:class:`~wmr_model.terrain.surface.TerrainArrays`).
    Writes the workspace ``d`` (:class:`wmr_model.kinematics.data.KernelData`: frames,
    contacts, ``A``, ``v``; its ``contact_ws`` warm-starts collision detection when it has
    rows, its ``solve_ws`` must be made for ``known`` and keeps the factor of the final solve
    for :func:`resolve_partitioned`) and ``qdot`` (nv,); returns the least-squares residual
    norm (NaN with a ``solve_ws`` made with ``residual=False``). ``solver``: a specialized solve
    for ``known`` (:func:`solve_partitioned_with`); None: the generic kernel.
    """
    forward_kinematics(m.parent, m.jtype, m.axis, m.T0, q, d.T_world)
    contact_detection(m, t, (m.track_frame, m.track_drive, m.track_path), d.T_world,
                      d.T_contact, d.dz, d.contact_angle, d.contact_ws)
    constraint_system(m, d, q, sigma, vc_xy)
    res = solve_partitioned_with(solver, d.A, d.v, known, qdot_known, qdot, d.solve_ws)
    if m.track_frame.shape[0] > 0:
        res = release_track_adhesion(m.wheel_frame.shape[0], d.dz, m.track_act, d.A, d.v,
                                     known, qdot_known, qdot, res, d.solve_ws)
    return res
