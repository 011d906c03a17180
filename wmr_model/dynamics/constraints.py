"""Velocity constraints of the dynamics and their independent subset (Seegmiller 2014, §2.4.2-3).

Rows of the stacked constraint matrix (2.55), always in this order (fixed size so that warm
starts and records index rows stably):

=================  ==========================================================================
``3k .. 3k+2``     contact k (Algorithm 2, 2.24), contact coordinates: wheels (k < nw), then
                   track patches (:mod:`wmr_model.dynamics.track_contact`); nc = nw + ntp
``3nc + a``        actuated joint a (2.56): a unit row at the joint's rate
``3nc + na + r``   holonomic constraint r (2.26): joint constraints (r < ncj, spring-dampers
                   (2.74)), then loop-closure rows (penalty spring-dampers, or ideal:
                   velocity prescribed by Baumgarte (2.36), force free)
=================  ==========================================================================

``active`` (nc,) marks rows that take part this step (wheel rows drop out when the wheel is far
above the terrain, §2.4.3 "the size of A will change as wheels break/reestablish contact").
"""

from __future__ import annotations

import math

import numpy as np

from wmr_model._jit import njit
from wmr_model.kinematics.constraints import wheel_jacobian

__all__ = ["assemble_constraints", "qr_column_pivoting", "qr_priority_pivoting",
           "independent_rows", "independent_rows_into", "rows_workspace"]

# |R(i, i)| below this fraction of |R(0, 0)| marks a dependent constraint row, (2.68). Rows of A
# mix metres and radians; 1e-9 is far above round-off (1e-16 * condition of well-posed A) and far
# below any geometric near-alignment that matters physically.
INDEPENDENCE_RTOL = 1e-9


@njit(refcount=False)
def assemble_constraints(parent, jtype, axis, wheel_frame, J_hol, act_joints, T_world,
                         T_contact, A):
    """Stacked constraint matrix ``A`` (3 nc + na + nhc, nv), (2.55).

    ``J_hol`` (nhc, nv): holonomic constraint rows of
    :func:`wmr_model.kinematics.constraints.holonomic_constraints` at the same state. The number of
    contacts nc follows from the size of ``A``; the wheel rows are written here, the rows of
    track patches (nc > nw) are left zero for
    :func:`wmr_model.dynamics.track_contact.assemble_track_rows`.
    """
    nw = wheel_frame.shape[0]
    na = act_joints.shape[0]
    nc = (A.shape[0] - na - J_hol.shape[0]) // 3
    A[:, :] = 0.0
    for k in range(nw):  # written in place: wheel_jacobian overwrites its three rows
        wheel_jacobian(parent, jtype, axis, wheel_frame, T_world, T_contact, k,
                       A[3 * k:3 * k + 3])
    for a in range(na):
        A[3 * nc + a, 6 + act_joints[a]] = 1.0
    for r in range(J_hol.shape[0]):
        for j in range(A.shape[1]):
            A[3 * nc + na + r, j] = J_hol[r, j]


@njit
def qr_column_pivoting(B, piv):
    """Householder QR with column pivoting, ``Q R = B E`` (2.66); returns diag(R) in pivot order.

    ``B`` (m, n) is overwritten; ``piv`` (n,) receives the permutation ``e`` of (2.67).
    """
    return qr_priority_pivoting(B, piv, 0, 0.0)


@njit
def qr_priority_pivoting(B, piv, npri, rtol):
    """:func:`qr_column_pivoting` that pivots among the first ``npri`` columns first.

    While a leading column's remaining norm exceeds ``rtol`` times the largest initial column
    norm, the pivot is the largest of the leading columns; then ordinary pivoting resumes. The
    leading columns thus span as much as they can before any other column is chosen, so a
    prescribed (ideal) constraint row is never dropped in favour of a row that depends on it.
    """
    m, n = B.shape
    return _qr_priority_pivoting(B, piv, npri, rtol, np.empty(n), np.zeros(min(m, n)))


@njit
def _qr_priority_pivoting(B, piv, npri, rtol, norms, diag):
    """:func:`qr_priority_pivoting` with scratch ``norms`` (n,) and the output ``diag``
    (min(m, n),) zeroed by the caller."""
    m, n = B.shape
    big = 0.0
    for j in range(n):
        piv[j] = j
        s = 0.0
        for i in range(m):
            s += B[i, j] * B[i, j]
        norms[j] = s
        big = max(big, s)
    floor = rtol * rtol * big
    kmax = min(m, n)
    for k in range(kmax):
        best = k
        if k < npri:
            for j in range(k + 1, npri):
                if norms[j] > norms[best]:
                    best = j
            if norms[best] <= floor:
                npri = k  # the leading columns left depend on those chosen
        if k >= npri:
            best = k
            for j in range(k + 1, n):
                if norms[j] > norms[best]:
                    best = j
        if best != k:
            for i in range(m):
                t = B[i, k]
                B[i, k] = B[i, best]
                B[i, best] = t
            t2 = norms[k]
            norms[k] = norms[best]
            norms[best] = t2
            t3 = piv[k]
            piv[k] = piv[best]
            piv[best] = t3
        s = 0.0
        for i in range(k, m):
            s += B[i, k] * B[i, k]
        alpha = math.sqrt(s)
        if alpha == 0.0:
            break
        if B[k, k] > 0.0:
            alpha = -alpha
        v0 = B[k, k] - alpha
        # Householder vector v = [v0, B[k+1:, k]]; H = I - 2 v v^T / (v^T v)
        vtv = v0 * v0 + s - B[k, k] * B[k, k]
        B[k, k] = alpha
        diag[k] = alpha
        if vtv > 0.0:
            for j in range(k + 1, n):
                dot = v0 * B[k, j]
                for i in range(k + 1, m):
                    dot += B[i, k] * B[i, j]
                f = 2.0 * dot / vtv
                B[k, j] -= f * v0
                for i in range(k + 1, m):
                    B[i, j] -= f * B[i, k]
        for j in range(k + 1, n):
            norms[j] -= B[k, j] * B[k, j]
            if norms[j] < 0.0:
                norms[j] = 0.0
        for i in range(k + 1, m):
            B[i, k] = 0.0
    return diag


@njit
def rows_workspace(nc, nv):
    """Scratch of :func:`independent_rows_into` for ``A`` (nc, nv): ``(rows, piv (nc,) int,
    B (nv nc,), norms (nc,), diag (nv,))``, allocated once per run."""
    return (np.empty(nc, dtype=np.int64), np.empty(nc, dtype=np.int64), np.empty(nv * nc),
            np.empty(nc), np.empty(nv))


@njit
def independent_rows(A, active, cols, forced, indep):
    """Linearly independent subset of the active rows of ``A``, (2.66)-(2.68):
    :func:`independent_rows_into` with fresh scratch."""
    return independent_rows_into(A, active, cols, forced, indep, rows_workspace(*A.shape))


@njit
def independent_rows_into(A, active, cols, forced, indep, ws):
    """Linearly independent subset of the active rows of ``A``, (2.66)-(2.68).

    QR with column pivoting of ``A[rows, cols]^T``; a row is independent when its pivot's
    ``|R(i, i)| > INDEPENDENCE_RTOL |R(0, 0)|``. Rows with ``forced`` True are prescribed
    (ideal). A forced unit row on a column that ``cols`` leaves out (an ideal actuator, §2.4.4)
    is always included and left out of the decomposition with its column. Other forced rows
    (ideal loop closures) enter the decomposition first (:func:`qr_priority_pivoting`): they are
    kept unless they depend on each other and the ideal actuators. Writes ``indep`` (nc,) bool;
    returns the number of independent rows. ``ws``: :func:`rows_workspace` (nothing is
    allocated).
    """
    nc, nv = A.shape
    rows, piv_buf, B_buf, norms, diag_buf = ws
    nr = 0
    for r in range(nc):
        indep[r] = False
        if active[r] and forced[r]:
            nz = 0  # a unit row on a column left out: an ideal actuator
            pinned = False
            for j in range(nv):
                if A[r, j] != 0.0:
                    nz += 1
                    pinned = A[r, j] == 1.0 and not cols[j]
            pinned = pinned and nz == 1
            if pinned:
                indep[r] = True
            else:
                rows[nr] = r
                nr += 1
    npri = nr
    for r in range(nc):
        if active[r] and not forced[r]:
            rows[nr] = r
            nr += 1
    ncol = 0
    for j in range(nv):
        if cols[j]:
            ncol += 1
    count = 0
    for r in range(nc):
        if indep[r]:
            count += 1
    if nr == 0:
        return count
    B = B_buf[:ncol * nr].reshape((ncol, nr))
    c = 0
    for j in range(nv):
        if cols[j]:
            for a in range(nr):
                B[c, a] = A[rows[a], j]
            c += 1
    piv = piv_buf[:nr]
    diag = diag_buf[:min(ncol, nr)]
    diag[:] = 0.0
    _qr_priority_pivoting(B, piv, npri, INDEPENDENCE_RTOL, norms[:nr], diag)
    ref = 0.0
    for k in range(diag.shape[0]):
        ref = max(ref, abs(diag[k]))
    if ref == 0.0:
        return count
    for k in range(diag.shape[0]):
        if abs(diag[k]) > INDEPENDENCE_RTOL * ref:
            indep[rows[piv[k]]] = True
            count += 1
    return count
