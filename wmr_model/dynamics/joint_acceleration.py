"""Joint-acceleration force balance: the default solver of a dynamics step (issue 22, option c).

The physics is that of the thesis' force balance (Seegmiller 2014, §2.4.3): the equation of
motion (2.65) with the model forces of the contacts (2.71), the non-ideal actuators (2.73) and
the holonomic spring-dampers (2.74) evaluated at the next step's velocities, and ideal actuators
prescribing their joints' rates (§2.4.4). Only the unknowns differ. Here they are the next
step's joint-space velocities ``qdot'[i+1]`` (the joint accelerations ``(qdot'[i+1] -
qdot'[i]) / dt`` up to the known shift and scale), and the error is the equation of motion
itself, with the model forces in place of the multipliers:

.. math::
    \\mathbf e(\\dot{\\mathbf q}'[i+1]) = M \\frac{\\dot{\\mathbf q}'[i+1] - \\dot{\\mathbf q}'[i]}
    {\\Delta t} + \\mathbf c - A^T \\mathbf f_{model}(\\dot{\\mathbf q}'[i+1]),
    \\qquad J = \\frac{M}{\\Delta t} - A^T \\frac{\\partial \\mathbf f_{model}}
    {\\partial \\dot{\\mathbf q}'[i+1]}

over the joint-space rows not set by an ideal actuator (an ideal actuator's torque is whatever
its joint needs, so its row of (2.65) carries no error and its rate is the command). ``J`` is
square, so Newton's step is ``p = -J^{-1} e`` (Gaussian elimination with partial pivoting),
with a backtracking (Armijo) line search on ``L = e^T e`` [N^2], nonmonotone once it stalls
(:func:`joint_acceleration_balance`); the tolerance is the thesis' one on ``|e|`` [N].

Against the thesis' formulation ((2.75)-(2.88), :mod:`wmr_model.dynamics.force_balance`) this
needs no independent rows (2.66), no ``C = A_I M^{-1} A_I^T`` and no factor of M per step. Where
the thesis' cost reaches zero, ``A_I^T λ = A^T f`` and both solve the same equation, so they
agree to the tolerance; where it cannot (model forces outside the span of the independent rows)
this solver still satisfies (2.65) with the model forces. Ideal loop closures have no model
force (their multiplier is free), so vehicles with them keep the thesis' solver
(:func:`wmr_model.dynamics.model.compile_dynamics` picks it), as does the non-iterative
``single_step`` mode; a step this solver leaves above the tolerance (a kink of a piecewise
model, a tumbling state), even after its one restart (:func:`joint_acceleration_balance`), is
redone by the thesis' solver (:func:`wmr_model.dynamics.simulate.dynamics_step`).

The contact and actuator terms are those of the thesis' solver
(:func:`~wmr_model.dynamics.force_balance.contact_terms`,
:func:`~wmr_model.dynamics.force_balance.actuator_joint_terms`, one
:class:`~wmr_model.dynamics.force_balance.ModelForces` record) with the identity for its input
maps (``Gx = I``, ``AG = A``): :func:`joint_acceleration_error` evaluates the error and its
Jacobian with them, the reference. Newton's method runs the same numbers split in two
(issue 22): :func:`acceleration_error` (the error, each contact's model force from the same
:func:`~wmr_model.dynamics.force_balance.contact_model_force`) and
:func:`acceleration_jacobian` (the Jacobian's block over the free rows and columns, those of
Newton's step, from the contacts' force derivatives it kept), the latter only where another
Newton step follows: not at the converged point, where one of the
~4 evaluations per step ends, nor at rejected trials. The tests hold both to the reference,
bit for bit.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from wmr_model._jit import NO_KERNEL, call_specialized, njit, specialized_kernel
from wmr_model.dynamics.actuators import IDEAL
from wmr_model.dynamics.force_balance import (
    WOLFE_C1,
    ModelForces,
    actuator_joint_terms,
    column_position,
    contact_model_force,
    contact_terms,
)

__all__ = ["AccelArgs", "solve_in_place", "elimination_source", "specialized_elimination",
           "eliminate", "MAX_SPECIALIZED_ELIMINATION", "joint_acceleration_error",
           "acceleration_error", "acceleration_jacobian", "newton_step", "least_squares_step",
           "joint_acceleration_balance", "STALL_STEP"]

#: Halvings of the step length before the line search gives up (2^-30 of the Newton step).
_MAX_HALVINGS = 30

#: An accepted step shorter than this fraction of Newton's step marks the monotone line search
#: as stalled: from then on, within the time step, a trial is also accepted against the largest
#: of the last four costs (:func:`joint_acceleration_balance`). 2^-8: eight halvings.
STALL_STEP = 2.0 ** -8


class AccelArgs(NamedTuple):
    """The constants of one step's joint-acceleration balance (nv joint-space velocities)."""

    M: np.ndarray  #: (nv, nv) joint-space inertia (Alg. 3)
    c: np.ndarray  #: (nv,) bias force (Alg. 4 or 2.89)
    qdot: np.ndarray  #: (nv,) joint-space velocity at the start of the step
    f: ModelForces  #: the model forces, with ``Gx`` the identity and ``AG`` = A
    #: (ncon, 3, 5) per contact, its model-force Jacobian at the last :func:`acceleration_error`
    jc: np.ndarray


@njit(refcount=False)
def solve_in_place(J, b):
    """``b <- J^{-1} b`` by Gaussian elimination with partial pivoting, for ``J`` (n, n) (its
    contents are destroyed) and ``b`` (n,). Returns False, leaving both partly eliminated, if a
    pivot is zero or not finite (J singular to working precision)."""
    n = J.shape[0]
    for k in range(n):
        piv = k
        amax = abs(J[k, k])
        for i in range(k + 1, n):
            if abs(J[i, k]) > amax:
                amax = abs(J[i, k])
                piv = i
        if not (amax > 0.0 and amax < math.inf):
            return False
        if piv != k:
            for j in range(k, n):
                J[k, j], J[piv, j] = J[piv, j], J[k, j]
            b[k], b[piv] = b[piv], b[k]
        jkk = J[k, k]
        for i in range(k + 1, n):
            f = J[i, k] / jkk
            if f != 0.0:
                for j in range(k + 1, n):
                    J[i, j] -= f * J[k, j]
                b[i] -= f * b[k]
    for i in range(n - 1, -1, -1):
        s = b[i]
        for j in range(i + 1, n):
            s -= J[i, j] * b[j]
        b[i] = s / J[i, i]
    return True


#: Largest system the Gaussian elimination is specialized for.
MAX_SPECIALIZED_ELIMINATION = 16


def elimination_source(n: int) -> str:
    """Python source of ``kernel(J, b, n)``: :func:`solve_in_place` for an ``n`` x ``n``
    system with every loop bound a constant (issue 22, option b): the pivot column loop is
    unrolled, the inner loops run to literal bounds (the compiler unrolls and vectorizes what
    pays; full unrolling compiled 4x slower for the same speed). The same operations in the
    same order. Returns 1 solved, -1 singular (where :func:`solve_in_place` returns False,
    leaving the same partly eliminated ``J``, ``b``), 0 for another size (nothing touched)."""
    L = ["def kernel(Jp, bp, n):", f"    if n != {n}:", "        return 0",
         f"    J = carray(Jp, ({n}, {n}), dtype=float64)",
         f"    b = carray(bp, ({n},), dtype=float64)"]
    for k in range(n):
        L += [f"    piv = {k}", f"    amax = abs(J[{k}, {k}])",
              f"    for i in range({k + 1}, {n}):",
              f"        if abs(J[i, {k}]) > amax:",
              f"            amax = abs(J[i, {k}])",
              "            piv = i",
              "    if not (amax > 0.0 and amax < inf):", "        return -1",
              f"    if piv != {k}:",
              f"        for j in range({k}, {n}):",
              f"            t = J[{k}, j]", f"            J[{k}, j] = J[piv, j]",
              "            J[piv, j] = t",
              f"        t = b[{k}]", f"        b[{k}] = b[piv]", "        b[piv] = t",
              f"    jkk = J[{k}, {k}]",
              f"    for i in range({k + 1}, {n}):",
              f"        f = J[i, {k}] / jkk",
              "        if f != 0.0:",
              f"            for j in range({k + 1}, {n}):",
              f"                J[i, j] -= f * J[{k}, j]",
              f"            b[i] -= f * b[{k}]"]
    L += [f"    for i in range({n - 1}, -1, -1):", "        s = b[i]",
          f"        for j in range(i + 1, {n}):", "            s -= J[i, j] * b[j]",
          "        b[i] = s / J[i, i]", "    return 1"]
    return "\n".join(L) + "\n"


def specialized_elimination(n: int, wait: bool = False) -> int:
    """Address of :func:`elimination_source` ``(n)`` compiled (cached on disk, kept for the
    process, :func:`wmr_model._jit.specialized_kernel`); :data:`wmr_model._jit.NO_KERNEL` (0)
    for ``n`` outside 1..:data:`MAX_SPECIALIZED_ELIMINATION`, without numba, or while it is
    being compiled in the background, unless ``wait``."""
    if not 1 <= n <= MAX_SPECIALIZED_ELIMINATION:
        return NO_KERNEL
    return specialized_kernel(("gaussian elimination", int(n)),
                              lambda: elimination_source(int(n)), 2, 1, wait)


@njit(refcount=False)
def eliminate(J, b, elimination):
    """:func:`solve_in_place` through the specialized kernel at ``elimination`` (made for this
    size; bit-identical), or the generic one where it is 0 or declines; same return."""
    if elimination != 0:
        status = call_specialized(elimination, (J, b, J.shape[0]))
        if status != 0:
            return status == 1
    return solve_in_place(J, b)


# The error, its Jacobian and the helpers they call with the step's ModelForces record are
# inlined where they are called (numba inline="always"). An out-of-line call passes every array
# of the record as its 7-9 scalars - some 150 arguments for the 20 arrays of ModelForces, more
# with AccelArgs - at each of the ~4 evaluations and ~3 Jacobians of a step; in line they cost
# 10-20 % less per dynamics step (README, "Inlined force-balance evaluations"). The same
# operations in the same order: bit-identical.
@njit(refcount=False, inline="always")
def _ideal_rows_cost(f, e):
    """Zero the rows of ``e`` that ideal actuators set (their torque is whatever the joint
    needs) and return ``L = e^T e``."""
    for k in range(f.act_joints.shape[0]):
        if f.akinds[k] == IDEAL:
            e[6 + f.act_joints[k]] = 0.0
    L = 0.0
    for i in range(e.shape[0]):
        L += e[i] * e[i]
    return L


@njit(refcount=False)
def joint_acceleration_error(x, a, e, Je, fmodel, work):
    """Error ``e`` (nv,) of the equation of motion (2.65) with the model forces at the next
    step's velocities ``x`` (nv,) and its Jacobian ``Je`` (nv, nv) (see the module docstring);
    returns ``L = e^T e`` [N^2].

    ``a`` is an :class:`AccelArgs`; writes the model forces of the rows into ``fmodel`` (nc,);
    ``work`` is the scratch of :func:`wmr_model.dynamics.force_balance.workspace` (nothing is
    allocated). The rows of ideal-actuator joints carry no error (``e = 0``); their rows of
    ``Je`` are left as computed and not used.
    """
    M, c, qdot = a.M, a.c, a.qdot
    nv = x.shape[0]
    idt = 1.0 / a.f.dt
    for i in range(nv):
        s = 0.0
        for j in range(nv):
            mij = M[i, j]
            s += mij * (x[j] - qdot[j])
            Je[i, j] = mij * idt
        e[i] = s * idt + c[i]
    for r in range(fmodel.shape[0]):
        fmodel[r] = 0.0
    f = a.f
    contact_terms(f, e, Je, x, fmodel, work)
    actuator_joint_terms(f, e, Je, x, fmodel)
    return _ideal_rows_cost(f, e)


@njit(refcount=False, inline="always")
def acceleration_error(x, a, e, fmodel, work):
    """The error ``e`` (nv,) and ``L = e^T e`` of :func:`joint_acceleration_error`, the same
    numbers by the same operations, without the Jacobian: each active contact's model-force
    Jacobian is kept in ``a.jc`` for :func:`acceleration_jacobian` at the same ``x``, which
    Newton's method asks for only where it takes another step (not at the converged point,
    nor at a rejected trial of the line search)."""
    M, c, qdot, f, jc = a.M, a.c, a.qdot, a.f, a.jc
    A, ctx_f = f.A, f.ctx_f
    fc, Jc, y, dx = work[3], work[4], work[5], work[9]
    nv = x.shape[0]
    idt = 1.0 / f.dt
    for j in range(nv):
        dx[j] = x[j] - qdot[j]
    # M dx four rows at a time: each row's sum in the same order, four chains of additions in
    # flight instead of one (the same numbers, ~20 % less time for Zoe's 13 x 13)
    i = 0
    while i + 4 <= nv:
        s0 = s1 = s2 = s3 = 0.0
        for j in range(nv):
            dj = dx[j]
            s0 += M[i, j] * dj
            s1 += M[i + 1, j] * dj
            s2 += M[i + 2, j] * dj
            s3 += M[i + 3, j] * dj
        e[i] = s0 * idt + c[i]
        e[i + 1] = s1 * idt + c[i + 1]
        e[i + 2] = s2 * idt + c[i + 2]
        e[i + 3] = s3 * idt + c[i + 3]
        i += 4
    while i < nv:
        s = 0.0
        for j in range(nv):
            s += M[i, j] * dx[j]
        e[i] = s * idt + c[i]
        i += 1
    for r in range(fmodel.shape[0]):
        fmodel[r] = 0.0
    for k in range(f.contact_radius.shape[0]):  # contacts: wheels, then track patches
        if not ctx_f[3 * k]:
            continue
        contact_model_force(f, k, x, fc, Jc, y)
        f0, f1, f2 = fc[0], fc[1], fc[2]
        for rr in range(3):
            fmodel[3 * k + rr] = fc[rr]
            for i in range(5):
                jc[k, rr, i] = Jc[rr, i]
        # e -= A_k^T f_k: each e[j] takes the three rows' terms in row order, as row by row
        for j in range(nv):
            a0 = A[3 * k, j]
            a1 = A[3 * k + 1, j]
            a2 = A[3 * k + 2, j]
            ej = e[j]
            if a0 != 0.0:
                ej -= a0 * f0
            if a1 != 0.0:
                ej -= a1 * f1
            if a2 != 0.0:
                ej -= a2 * f2
            e[j] = ej
    actuator_joint_terms(f, e, M, x, fmodel, True, False)  # errors only: M is not written
    return _ideal_rows_cost(f, e)


@njit(refcount=False, inline="always")
def acceleration_jacobian(x, a, free, R, work):
    """The block ``R = J_FF`` (nF, nF) of the Jacobian of :func:`joint_acceleration_error` over
    the free rows and columns ``free`` (nF,) (those of Newton's step), at the ``x`` of the last
    :func:`acceleration_error` (its contacts' Jacobians ``a.jc``): the same values as those
    entries of the full ``Je``. A contact's three rows update ``R`` in one pass (``J[j] - a0 d0
    - a1 d1 - a2 d2``, the full Jacobian's order of subtraction; a zero ``a_r`` subtracts a zero
    where the full one skips the row, so only the sign of a zero can differ). The rows and
    columns of the ideal actuators' joints, which Newton's step does not use, are not
    computed."""
    M, f, jc = a.M, a.f, a.jc
    A, ctx_f, contact_radius, contact_joint = f.A, f.ctx_f, f.contact_radius, f.contact_joint
    dt = f.dt
    nF = free.shape[0]
    flat = work[10]  # its tail: R (nF x nF) is its head
    D = flat[flat.shape[0] - 3 * nF:]  # (3 nF,) d f_k / d qdot'_F of the three rows (dfx)
    idt = 1.0 / dt
    for i in range(nF):
        fi = free[i]
        for j in range(nF):
            R[i, j] = M[fi, free[j]] * idt
    for k in range(f.contact_radius.shape[0]):  # contacts: wheels, then track patches
        if not ctx_f[3 * k]:
            continue
        wj = column_position(free, 6 + contact_joint[k])
        for rr in range(3):
            c0 = jc[k, rr, 0]
            c1 = jc[k, rr, 1]
            c2 = jc[k, rr, 2] + jc[k, rr, 4] * dt
            c3 = jc[k, rr, 3] * contact_radius[k]
            for i in range(nF):
                fi = free[i]
                D[rr * nF + i] = (c0 * A[3 * k, fi] + c1 * A[3 * k + 1, fi]
                                  + c2 * A[3 * k + 2, fi])
            if wj >= 0:
                D[rr * nF + wj] += c3
        for jj in range(nF):
            j = free[jj]
            a0 = A[3 * k, j]
            a1 = A[3 * k + 1, j]
            a2 = A[3 * k + 2, j]
            if a0 != 0.0 or a1 != 0.0 or a2 != 0.0:
                for i in range(nF):
                    R[jj, i] = R[jj, i] - a0 * D[i] - a1 * D[nF + i] - a2 * D[2 * nF + i]
    # the actuators' and spring-dampers' part only (the error scratch and the model forces
    # are not written)
    actuator_joint_terms(f, work[9], R, x, work[9], False, True, free)


@njit(refcount=False)
def _scatter(free, b, p):
    """``p_F = b``, 0 elsewhere."""
    for i in range(p.shape[0]):
        p[i] = 0.0
    for i in range(free.shape[0]):
        p[free[i]] = b[i]


@njit
def _least_squares(R, b):
    """``b <- R^+ b`` (allocates: the round-off fallback of :func:`newton_step` only)."""
    b[:] = np.linalg.lstsq(R, b)[0]


@njit(refcount=False)
def newton_step(free, e, R, b, p, elimination=0):
    """Newton's step ``p`` (nv,) for the error ``e`` (nv,) with ``R = J_FF`` (nF, nF, from
    :func:`acceleration_jacobian`; overwritten): ``J_FF p_F = -e_F`` over the free columns
    ``free`` (nF,) (those not set by an ideal actuator), 0 elsewhere. ``b`` (nF,) is scratch;
    ``elimination``: a specialized elimination for nF (:func:`eliminate`), or 0. Returns False,
    leaving ``p`` alone, when ``J_FF`` is singular to round-off: the caller computes ``R``
    again for :func:`least_squares_step`."""
    for i in range(free.shape[0]):
        b[i] = -e[free[i]]
    if not eliminate(R, b, elimination):
        return False
    _scatter(free, b, p)
    return True


@njit
def least_squares_step(free, e, R, b, p):
    """:func:`newton_step` for a singular ``J_FF`` ``R``: its least-squares step (allocates;
    the round-off fallback only)."""
    for i in range(free.shape[0]):
        b[i] = -e[free[i]]
    _least_squares(R, b)
    _scatter(free, b, p)


# The phases of _newton's evaluation: the start, a trial of the line search, the iterate
# restored after a search that found no decrease.
_START = 0
_TRIAL = 1
_RESTORED = 2


@njit(refcount=False)
def _newton(x, a, free, max_iter, tol, single_step, e, fmodel, work, elimination,
            nonmonotone):
    """Newton's method of :func:`joint_acceleration_balance` from ``x``: Armijo's rule until
    the search stalls, then the nonmonotone rule (from the first iteration if
    ``nonmonotone``). Returns ``(iterations, L)``.

    Written as one loop around the only evaluation of the error (the start, each trial of the
    line search and the restored iterate after a failed search are its phases), so that the
    inlined evaluation is compiled once: the same steps as three call sites."""
    nv = x.shape[0]
    nF = free.shape[0]
    x0 = work[6][:nv]
    p = work[8][:nv]
    b = work[7][:nF]
    R = work[10][:nF * nF].reshape((nF, nF))
    it = 0
    h0 = h1 = h2 = h3 = 0.0  # the costs of the last four iterates (h0 the current one)
    stalled = nonmonotone
    phase = _START
    L0 = L_ref = 0.0
    alpha = 1.0
    trials = 0
    while True:
        L = acceleration_error(x, a, e, fmodel, work)
        if phase == _RESTORED:
            break
        if phase == _START:
            h0 = h1 = h2 = h3 = L
        else:  # a trial of the line search along p from x0
            if not (L <= (1.0 - 2.0 * WOLFE_C1 * alpha) * L0  # Armijo: dL/dalpha(0) = -2 L0
                    or (stalled and L <= L_ref - 2.0 * WOLFE_C1 * alpha * L0)):  # nonmonotone
                trials += 1
                if trials < _MAX_HALVINGS:
                    alpha *= 0.5
                    for i in range(nv):
                        x[i] = x0[i] + alpha * p[i]
                    continue
                it += 1  # no decrease along p: back to x0, and stop
                for i in range(nv):
                    x[i] = x0[i]
                phase = _RESTORED
                continue
            it += 1
            h0, h1, h2, h3 = L, h0, h1, h2
            if alpha < STALL_STEP:
                stalled = True
            if single_step:
                break
        if not (it < max_iter and math.sqrt(L) > tol):
            break
        for attempt in range(2):  # one call site of the inlined Jacobian
            acceleration_jacobian(x, a, free, R, work)  # at x: its last evaluation
            if attempt == 1:
                least_squares_step(free, e, R, b, p)
            elif newton_step(free, e, R, b, p, elimination):
                break
        for i in range(nv):
            x0[i] = x[i]
        L0 = L
        L_ref = max(max(h0, h1), max(h2, h3))
        alpha = 1.0
        trials = 0
        for i in range(nv):
            x[i] = x0[i] + alpha * p[i]
        phase = _TRIAL
    return it, L


@njit(refcount=False)
def joint_acceleration_balance(x, a, free, max_iter, tol, single_step, e, fmodel, work,
                               elimination=0):
    """Solve ``e(x) = 0`` (:func:`joint_acceleration_error`) by Newton's method with a
    backtracking line search on ``L = e^T e``.

    ``x`` (nv,) holds the start (the ideal actuators' entries set to their commands, which stay)
    and receives the solution; ``free`` (nF,) lists the other columns, the unknowns;
    ``single_step`` takes one Newton step (the non-iterative mode of §2.4.4); ``elimination``
    the address of a specialized elimination for nF (:func:`specialized_elimination`) or 0.
    Returns ``(iterations, L)``, iterations 0 when the start already meets ``|e| <= tol``.

    Line search: Armijo's condition on ``L`` against the current cost, until the search stalls
    (it accepts a step shorter than :data:`STALL_STEP` of Newton's). From then on a trial is
    also accepted when ``L <= max(L_k, ..., L_k-3) - 2 c1 alpha L_k`` over the costs of the
    last four iterates, the nonmonotone rule of Grippo, Lampariello and Lucidi (SIAM J. Numer.
    Anal. 23(4), 1986). On a kink of a piecewise model (the corners of the piecewise-linear
    friction pyramid, C.7-C.8) the monotone search takes ever shorter steps toward the same
    Newton target, ~17 halvings each; the nonmonotone rule lets the iterate cross the kink.

    A balance that ends above the tolerance (a step along which ``L`` does not decrease, or
    ``max_iter`` iterations) starts once more from ``x``'s start with the nonmonotone rule from
    the first iteration, its reference the start's cost (up to ``max_iter`` more iterations,
    counted in the total): in a tumbling state the monotone path can settle in a valley of
    ``L`` that Newton's full steps, allowed to raise ``L`` for a while, leave (Zoë on Ishigami
    soil, benchmark terrain 9, step 202: 24 iterations and 356 evaluations without converging,
    then 10 iterations and 11 evaluations). Only what still fails is left to the thesis'
    solver (:func:`wmr_model.dynamics.simulate.dynamics_step`). A balance that neither stalls
    nor fails (Pacejka on the Zoë benchmark) takes the same steps as with Armijo alone.
    """
    nv = x.shape[0]
    x_start = work[0][:nv]  # the thesis' solver's scratch (its vI), free here
    for i in range(nv):
        x_start[i] = x[i]
    it, L = _newton(x, a, free, max_iter, tol, single_step, e, fmodel, work, elimination,
                    False)
    if math.sqrt(L) > tol and not single_step:
        for i in range(nv):
            x[i] = x_start[i]
        it2, L = _newton(x, a, free, max_iter, tol, single_step, e, fmodel, work,
                         elimination, True)
        it += it2
    return it, L
