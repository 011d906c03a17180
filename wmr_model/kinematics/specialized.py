"""Per-vehicle specialized kernels (issue 22, option b): the partitioned least-squares solve
(2.37)-(2.38) with a vehicle's sizes and known set compiled in.

:func:`wmr_model.kinematics.solve.solve_partitioned` handles any number of rows and any known
set, so its loops run to sizes read at run time through an index list of the unknown columns.
For one vehicle in one context (the simulation context's known set, say) those are constants:
:func:`specialized_solve` writes the same solve as code with the unknown columns, the row
count and the factor size fixed (:func:`solve_source`: the normal equations unrolled over the
unknown columns, the factor and substitutions as loops to constant bounds) and compiles it once
per ``(rows, known)`` (cached on disk, :func:`wmr_model._jit.specialized_kernel`). It
performs the same floating-point operations in the same order as the generic kernel (the
right-hand side (2.37), the normal equations row by row, the Cholesky factor and both
substitutions), so its results are bit-identical; the generic kernel stays the oracle
(``test/core/test_specialized_kernels.py``).

The compiled loops take it by address (:func:`specialized_solve` returns the address of a
``cfunc`` kept for the process, :func:`wmr_model._jit.call_specialized` calls it on the generic
kernel's arrays): one compiled loop serves every vehicle, its options stay plain numbers (fast
to pass), and a vehicle's specialization is one small compiled function, not a recompilation of
the loop: a few seconds once per machine on a background thread (the generic kernel runs
meanwhile; the result is the same), then loaded from the disk cache in tens of milliseconds. It
returns 0 when the generic kernel must run instead: arrays of
other sizes, or normal equations that are not positive definite to the pivot tolerance (the
rank-deficient case, solved by the SVD, :data:`wmr_model.kinematics.solve.CHOLESKY_PIVOT_RTOL`).
:data:`GENERIC` (address 0) runs the generic kernel throughout; so does the plain-Python build.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from wmr_model._jit import JIT_ENABLED, NO_KERNEL, call_specialized, njit, specialized_kernel

__all__ = ["solve_source", "specialized_solve", "model_solve", "try_specialized_solve",
           "GENERIC", "MAX_SPECIALIZED_UNKNOWNS"]

#: The address of "no specialization": the loops run the generic kernel.
GENERIC = NO_KERNEL

#: Largest unknown count specialized: the unrolled normal equations grow as nu^2 / 2
#: statements per row (Zoë: 9 unknowns, 45).
MAX_SPECIALIZED_UNKNOWNS = 16


def solve_source(rows: int, known: np.ndarray, rtol: float) -> str:
    """Python source of ``kernel(A, v, qdot_known, qdot, idx, rhs, N, x, info, m, nv, nN,
    mode)`` for ``rows`` constraint rows and the known mask ``known`` (nv,): with ``mode`` 0
    the operations of :func:`wmr_model.kinematics.solve._solve_partitioned`, with ``mode`` 1
    those of :func:`wmr_model.kinematics.solve.resolve_partitioned` (the kept factor, new
    right-hand side; declined unless the workspace holds this known set's factor), each in its
    order with the normal equations unrolled over the unknowns and the factor and substitutions
    as loops to constant bounds. Arguments are data pointers
    (``carray`` views of the generic kernel's arrays and its workspace); ``m``, ``nv``, ``nN``
    the caller's rows, columns and factor size (checked: other sizes return 0 before any memory
    is touched)."""
    known = np.asarray(known, dtype=bool)
    nv = known.shape[0]
    cols = [int(j) for j in np.flatnonzero(~known)]
    given = [int(j) for j in np.flatnonzero(known)]
    nu = len(cols)
    L = [
        "def kernel(Ap, vp, qkp, qdp, idxp, rhsp, Np, xp, infop, m, nv, nN, mode):",
        f"    if m != {rows} or nv != {nv} or nN != {nu}:",
        "        return 0",
        f"    A = carray(Ap, ({rows}, {nv}), dtype=float64)",
        f"    v = carray(vp, ({rows},), dtype=float64)",
        f"    qk = carray(qkp, ({nv},), dtype=float64)",
        f"    qd = carray(qdp, ({nv},), dtype=float64)",
        f"    idx = carray(idxp, ({nv},), dtype=int64)",
        f"    rhs = carray(rhsp, ({rows},), dtype=float64)",
        f"    N = carray(Np, ({nu}, {nu}), dtype=float64)",
        f"    x = carray(xp, ({nv},), dtype=float64)",
        "    info = carray(infop, (3,), dtype=int64)",
    ]

    def known_rhs(ind: str) -> list[str]:
        """(2.37): rhs = v - A[:, known] qdot[known], and the known entries of qdot."""
        out = [f"{ind}for r in range({rows}):", f"{ind}    rhs[r] = v[r]"]
        for j in given:
            out += [f"{ind}g = qk[{j}]", f"{ind}qd[{j}] = g", f"{ind}if g != 0.0:",
                    f"{ind}    for r in range({rows}):", f"{ind}        rhs[r] -= A[r, {j}] * g"]
        return out

    def substitute(ind: str) -> list[str]:
        """Forward and back substitution with the factor in N (cholesky_solve, b = x), then
        the unknown entries of qdot."""
        out = [f"{ind}for i in range({nu}):", f"{ind}    acc = x[i]",
               f"{ind}    for k in range(i):", f"{ind}        acc -= N[i, k] * x[k]",
               f"{ind}    x[i] = acc / N[i, i]",
               f"{ind}for i in range({nu - 1}, -1, -1):", f"{ind}    acc = x[i]",
               f"{ind}    for k in range(i + 1, {nu}):", f"{ind}        acc -= N[k, i] * x[k]",
               f"{ind}    x[i] = acc / N[i, i]"]
        out += [f"{ind}qd[{c}] = x[{a}]" for a, c in enumerate(cols)]
        return out + [f"{ind}return 1"]

    # mode 1: the re-solve with the kept factor
    L += ["    if mode == 1:", f"        if info[0] != {nu} or info[1] != 1:",
          "            return 0"]
    L += known_rhs("        ")
    L += [f"        x[{a}] = 0.0" for a in range(nu)]
    L += [f"        for r in range({rows}):", "            rr = rhs[r]"]
    for a, c in enumerate(cols):
        L += [f"            ar = A[r, {c}]", "            if ar != 0.0:",
              f"                x[{a}] += ar * rr"]
    L += substitute("        ")
    # mode 0: the solve
    L += [f"    idx[{a}] = {c}" for a, c in enumerate(cols)]
    L += [f"    info[0] = {nu}", "    info[1] = 0"]
    L += known_rhs("    ")
    # normal equations, lower triangle; exact zeros of A skipped as in the generic kernel
    for a in range(nu):
        L.append(f"    x[{a}] = 0.0")
        L += [f"    N[{a}, {b}] = 0.0" for b in range(a + 1)]
    L += [f"    for r in range({rows}):", "        rr = rhs[r]"]
    for a, c in enumerate(cols):
        L += [f"        ar = A[r, {c}]", "        if ar != 0.0:", f"            x[{a}] += ar * rr"]
        L += [f"            N[{a}, {b}] += ar * A[r, {cols[b]}]" for b in range(a + 1)]
    # Cholesky factor in place (cholesky_factor with H = Lf = N)
    L += ["    dmax = 0.0", f"    for i in range({nu}):", "        if N[i, i] > dmax:",
          "            dmax = N[i, i]",
          f"    for j in range({nu}):", "        d = N[j, j]",
          "        for k in range(j):", "            d -= N[j, k] * N[j, k]",
          f"        if d <= {rtol!r} * dmax or d <= 0.0:", "            return 0",
          "        d = sqrt(d)", "        N[j, j] = d",
          f"        for i in range(j + 1, {nu}):", "            acc = N[i, j]",
          "            for k in range(j):", "                acc -= N[i, k] * N[j, k]",
          "            N[i, j] = acc / d"]
    L.append("    info[1] = 1")
    L += substitute("    ")
    return "\n".join(L) + "\n"


def specialized_solve(rows: int, known: np.ndarray, wait: bool = False) -> int:
    """Address of the specialized solve for ``rows`` constraint rows and the known mask
    ``known`` (nv,) bool, compiled on first use and kept for the process
    (:func:`wmr_model._jit.specialized_kernel`); :data:`GENERIC` (0) when every entry is known,
    more than :data:`MAX_SPECIALIZED_UNKNOWNS` are unknown, or without numba; also while it
    is being compiled in the background, unless ``wait``."""
    from wmr_model.kinematics.solve import CHOLESKY_PIVOT_RTOL

    mask = np.ascontiguousarray(known, dtype=bool)
    nu = mask.shape[0] - int(np.count_nonzero(mask))
    if nu == 0 or nu > MAX_SPECIALIZED_UNKNOWNS:
        return GENERIC
    return specialized_kernel(("partitioned solve", int(rows), mask.tobytes()),
                              lambda: solve_source(int(rows), mask, CHOLESKY_PIVOT_RTOL), 9, 4,
                              wait)


@njit(refcount=False)
def try_specialized_solve(address, A, v, qdot_known, qdot, ws, mode=0):
    """The specialized solve (``mode`` 0) or re-solve (1) at ``address`` on a system and its
    :func:`~wmr_model.kinematics.solve.solve_workspace` ``ws``: 1 solved, 0 declined (also
    for ``address`` :data:`GENERIC`)."""
    if address == GENERIC:
        return 0
    idx, rhs, N, x, info = ws
    return call_specialized(address, (A, v, qdot_known, qdot, idx, rhs, N, x, info,
                                      A.shape[0], A.shape[1], N.shape[0], mode))


def model_solve(m: Any, known: np.ndarray, wait: bool = False) -> int:
    """:func:`specialized_solve` for the constraint rows of the model record ``m``
    (:class:`~wmr_model.vehicles.model.KernelModel`, rows ``3 nc + nhc`` as
    :func:`wmr_model.kinematics.data.constraint_rows`) and the known mask ``known``."""
    if not JIT_ENABLED:
        return GENERIC
    from wmr_model.kinematics.constraints import loop_closure_rows

    nc = m.wheel_frame.shape[0] + m.track_frame.shape[0]
    rows = 3 * nc + m.A_joint.shape[0]
    if m.loop_closure.shape[0] > 0:
        rows += int(loop_closure_rows(m.loop_closure))
    mask = np.ascontiguousarray(known, dtype=bool)
    key = (rows, mask.tobytes())
    address = _solves.get(key)  # a kernel once ready stays: no need to ask again
    if address is None:
        address = specialized_solve(rows, mask, wait)
        if address != GENERIC:
            _solves[key] = address
    return address


# model_solve's answers once a kernel is ready: (rows, known mask bytes) -> address
_solves: dict[tuple[int, bytes], int] = {}
