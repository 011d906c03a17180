"""Force-balance optimization (Seegmiller 2014, §2.4.3, eqs. 2.75-2.84, 2.87-2.88, App. D).

For the independent constraint rows ``I`` (2.66)-(2.69) and the input rows ``x = v(input)``
(2.75; ``input = I`` minus ideal-actuator rows, §2.4.4), one time step solves

.. math::
    \\boldsymbol\\lambda = C^{-1}(\\mathbf b(I) + \\mathbf d_{const}), \\quad
    C = A_I M^{-1} A_I^T, \\quad \\mathbf d_{const} = -A_I M^{-1}(\\boldsymbol\\tau - \\mathbf c),
    \\quad \\mathbf b = (\\mathbf v - A_I \\dot{\\mathbf q}'[i]) / \\Delta t
    \\qquad (2.79)-(2.81), (2.87)-(2.88), (2.61)

    \\dot{\\mathbf q}'[i+1] = \\dot{\\mathbf q}'[i] + \\Delta t\\, M^{-1}(\\boldsymbol\\tau -
    \\mathbf c + A_I^T \\boldsymbol\\lambda) \\qquad (2.82)-(2.83)

    \\mathbf e(\\mathbf x) = A_I^T \\boldsymbol\\lambda - A^T \\mathbf f_{model}, \\qquad
    L = \\mathbf e^T \\mathbf e \\qquad (2.77)-(2.78)

with the model forces evaluated at the next step's velocities: contact forces (2.71) from
``v_c = A_wheel qdot'[i+1]``, ``R w[i+1]`` and ``Δz[i+1] = Δz + v_z Δt``; actuator forces (2.73)
from the next joint rates; joint-constraint spring-dampers (2.74) from ``c + ċ Δt`` and ``ċ``.

Sign convention: ``λ`` is the generalized constraint force *acting on the vehicle*, so (2.65)
reads ``M qddot' = tau - c + A_I^T λ`` and ``f_model`` holds forces on the vehicle (the ground's
force on the wheel, the actuator's torque on its joint), matching (2.78) term by term. (The
printed (2.65)/(2.82) carry ``-A^T λ``, which would flip the sign of one side of (2.78).)

Everything that does not depend on ``x`` is cached once per step (2.87-2.88), with Cholesky
factors of M and C as the thesis suggests (:func:`wmr_model.dynamics.simulate.constraint_cache`):
``M^{-1} A_I^T``, ``C^{-1}``, ``d_const``, the input maps of :func:`input_maps` and the affine
maps ``qdot'[i+1] = qdot_0 + G v_I``, ``λ = λ_0 + C^{-1} v_I / Δt`` with ``G = M^{-1} A_I^T
C^{-1}``. Newton's method (2.84) uses the Gauss-Newton Hessian
``2 J^T J`` of ``L`` (positive semidefinite; exact where the models are piecewise linear) and the
strong-Wolfe line search of App. D (Nocedal and Wright Alg. 3.5 with bisection zoom, Alg. 3.6).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from wmr_model._jit import njit
from wmr_model.contact.models import contact_force
from wmr_model.dynamics.actuators import IDEAL, actuator_force
from wmr_model.kinematics.solve import cholesky_factor, cholesky_solve

__all__ = ["BalanceArgs", "ModelForces", "StepCache", "WOLFE_C1", "WOLFE_C2", "input_maps",
           "remove_component", "contact_model_force", "contact_terms", "actuator_joint_terms",
           "column_position",
           "force_balance_error", "workspace", "strong_wolfe", "gauss_newton_direction",
           "force_balance"]

#: Strong Wolfe constants (D.2), (D.4), the example values of App. D.
WOLFE_C1 = 1e-4
WOLFE_C2 = 0.9
# Levenberg regularization of the Gauss-Newton Hessian relative to its largest diagonal: keeps
# the Newton system solvable when an input has no effect on the error (e.g. a wheel in the air).
_GN_REG = 1e-12
_MAX_ZOOM = 30
# Kink hops of force_balance when the line search finds no decrease: relative size of the hop
# (far below any physical velocity scale, far above round-off) and how many per time step.
_KINK_HOP = 1e-9
_MAX_KINK_HOPS = 5


class StepCache(NamedTuple):
    """The per-step constants of the force balance, (2.79)-(2.83), (2.87)-(2.88), for nI
    independent rows (written by :func:`wmr_model.dynamics.simulate.constraint_cache`)."""

    AI: np.ndarray  #: (nI, nv) independent constraint rows A_I (2.66)
    Lm: np.ndarray  #: (nv, nv) Cholesky factor of M
    Minv_tc: np.ndarray  #: (nv,) M^{-1}(tau - c), tau = 0
    W: np.ndarray  #: (nv, nI) M^{-1} A_I^T
    Cm: np.ndarray  #: (nI, nI) C = A_I M^{-1} A_I^T, then scratch
    Lc: np.ndarray  #: (nI, nI) Cholesky factor of C
    Cinv: np.ndarray  #: (nI, nI) C^{-1}
    G: np.ndarray  #: (nv, nI) M^{-1} A_I^T C^{-1}
    d_const: np.ndarray  #: (nI,) d_const - A_I qdot / dt
    qd0: np.ndarray  #: (nv,) qdot'[i+1] at zero inputs
    lam0: np.ndarray  #: (nI,) lambda at zero inputs


class ModelForces(NamedTuple):
    """The constants of one step's model forces at the next step's velocities: contacts (2.71),
    non-ideal actuators (2.73), holonomic spring-dampers (2.74) (read by :func:`contact_terms`
    and :func:`actuator_joint_terms`, for either solver); nc rows of A, ncon contacts, na
    actuators, nh holonomic rows, nx unknowns of the solver, whose maps to the next step's
    velocities are ``Gx`` and ``AG``."""

    ctx_f: np.ndarray  #: (nc,) bool: active rows
    A: np.ndarray  #: (nc, nv) constraint matrix (2.55)
    u: np.ndarray  #: prescribed velocities of the forced rows (commands, then Baumgarte)
    dz: np.ndarray  #: (ncon,) contact height errors the contact models see [m]
    cjoint: np.ndarray  #: (nh,) holonomic residuals c
    contact_radius: np.ndarray  #: (ncon,) rolling radii [m]
    contact_joint: np.ndarray  #: (ncon,) int: joint rolling each contact
    share: np.ndarray  #: (ncon,) load share of each contact's model force
    ckinds: np.ndarray  #: (ncon,) contact model kinds
    cparams: np.ndarray  #: contact model parameters
    ctables: np.ndarray  #: contact model tables
    caxes: np.ndarray  #: contact model axes
    akinds: np.ndarray  #: (na,) actuator kinds
    aparams: np.ndarray  #: (na, 4) actuator parameters
    act_joints: np.ndarray  #: (na,) actuated joints
    jK: np.ndarray  #: (nh,) spring stiffness
    jD: np.ndarray  #: (nh,) damping
    dt: float  #: step [s]
    AG: np.ndarray  #: (nc, nx) A Gx: the rows' velocities per unknown
    Gx: np.ndarray  #: (nv, nx) dqdot'[i+1]/dx: the velocities per unknown


class BalanceArgs(NamedTuple):
    """The constants of one step's force balance (``args_cache`` of :func:`force_balance`);
    nI independent rows, nx inputs, nc rows of A."""

    ctx_i: np.ndarray  #: (3, nI) int: row of A, prescribed-velocity index, forced flag
    ctx_m: np.ndarray  #: (nc,) int: row kind (0 wheel, 1 actuator, 2 joint)
    G: np.ndarray  #: (nv, nI) M^{-1} A_I^T C^{-1}
    Cinv: np.ndarray  #: (nI, nI) C^{-1}
    qd0: np.ndarray  #: (nv,) qdot'[i+1] at zero row velocities
    lam0: np.ndarray  #: (nI,) lambda at zero row velocities
    Je_lam: np.ndarray  #: (nv, nx) d(A_I^T lambda)/dx
    Pfix: np.ndarray  #: (nfix, nv) orthonormal rows of the ideal loop closures
    f: ModelForces  #: the model forces, with Gx, AG of :func:`input_maps`


@njit(refcount=False)
def remove_component(p, x):
    """``x -= (p . x) p`` in place for a unit vector ``p`` (n,) and ``x`` (n,): one step of
    modified Gram-Schmidt, or the projection of ``x`` off the direction ``p``."""
    s = 0.0
    for j in range(p.shape[0]):
        s += p[j] * x[j]
    for j in range(p.shape[0]):
        x[j] -= s * p[j]


@njit(refcount=False)
def input_maps(ctx_i, A, G, Cinv, dt, Je_lam, AG, Gx):
    """The linear maps from the inputs ``x`` (nx,) that are constant over a step.

    ``Je_lam`` (nv, nx) = d(A_I^T λ)/dx (λ is affine in x, (2.79)); ``Gx`` (nv, nx) =
    dqdot'[i+1]/dx, the input columns of G; ``AG`` (nc, nx) = A Gx, the rows' velocity changes.
    ``ctx_i`` as in :func:`force_balance_error`.
    """
    nI = ctx_i.shape[1]
    nc, nv = A.shape
    Je_lam[:, :] = 0.0
    ix = 0
    for b in range(nI):
        if ctx_i[2, b] == 1:
            continue
        for a in range(nI):
            if ctx_i[2, a] == 1:
                continue
            r = ctx_i[0, a]
            cab = Cinv[a, b] / dt
            for j in range(nv):
                Je_lam[j, ix] += A[r, j] * cab
        for j in range(nv):
            Gx[j, ix] = G[j, b]
        ix += 1
    nx = ix
    for r in range(nc):
        for i in range(nx):
            AG[r, i] = 0.0
        for j in range(nv):
            arj = A[r, j]
            if arj != 0.0:
                for i in range(nx):
                    AG[r, i] += arj * Gx[j, i]


@njit(refcount=False)
def _affine_state(x, args_cache, vI, lam, e, Je, qdn):
    """The inputs' affine maps (2.79)-(2.83): ``vI`` (nI,) the independent rows' velocities
    (inputs ``x``, then prescribed ones), ``qdn = qd0 + G vI``, ``lam = lam0 + C^{-1} vI / dt``,
    ``e = A_I^T lam`` over the non-prescribed rows and ``Je`` its constant Jacobian."""
    k = args_cache
    ctx_i, A, G, Cinv, qd0, lam0, u = k.ctx_i, k.f.A, k.G, k.Cinv, k.qd0, k.lam0, k.f.u
    dt, Je_lam = k.f.dt, k.Je_lam
    nv = A.shape[1]
    nI = ctx_i.shape[1]
    nx = Je.shape[1]
    ix = 0
    for a in range(nI):
        if ctx_i[2, a] == 1:
            vI[a] = u[ctx_i[1, a]]
        else:
            vI[a] = x[ix]
            ix += 1
    # qdn = qd0 + G vI and lam = lam0 + C^{-1} vI / dt; each sum in ascending order, with the
    # loop over the sums innermost (see constraint_cache)
    for j in range(nv):
        qdn[j] = qd0[j]
    for a in range(nI):
        lam[a] = 0.0
    for b in range(nI):
        vb = vI[b]
        for j in range(nv):
            qdn[j] += G[j, b] * vb
        for a in range(nI):
            lam[a] += Cinv[a, b] * vb
    for a in range(nI):
        lam[a] = lam0[a] + lam[a] / dt
    for j in range(nv):
        e[j] = 0.0
    for a in range(nI):
        if ctx_i[2, a] == 1:
            continue
        r = ctx_i[0, a]
        for j in range(nv):
            e[j] += A[r, j] * lam[a]
    for j in range(nv):  # d(A_I^T lambda)/dx, constant over the step
        for i in range(nx):
            Je[j, i] = Je_lam[j, i]


# Inlined into its callers with the record it reads (see joint_acceleration's evaluations).
@njit(refcount=False, inline="always")
def contact_model_force(b, k, qdn, fc, Jc, y):
    """The model force (2.71) ``fc`` (3,) of contact ``k`` at the next step's joint-space
    velocities ``qdn`` (nv,), scaled by its load share, and its Jacobian ``Jc`` (3, 5) over the
    contact model's inputs ``(v_x, v_y, v_z, R w, dz)`` (``y`` (3,): scratch, left holding the
    row velocities ``A_k qdn``); ``b`` a :class:`ModelForces`. Both solvers' force terms
    (:func:`contact_terms`, the joint-acceleration solver's) evaluate the contacts here."""
    A = b.A
    nv = A.shape[1]
    y0 = y1 = y2 = 0.0  # in registers: y may alias the arrays read (a store per term else)
    for j in range(nv):
        qj = qdn[j]
        y0 += A[3 * k, j] * qj
        y1 += A[3 * k + 1, j] * qj
        y2 += A[3 * k + 2, j] * qj
    y[0] = y0
    y[1] = y1
    y[2] = y2
    Rw = b.contact_radius[k] * qdn[6 + b.contact_joint[k]]
    dzn = b.dz[k] + b.dt * y2
    contact_force(b.ckinds[k], b.cparams[k], b.ctables[k], b.caxes[k], y, Rw, dzn, fc, Jc)
    sk = b.share[k]
    if sk != 1.0:
        for rr in range(3):
            fc[rr] *= sk
            for i in range(5):
                Jc[rr, i] *= sk


@njit(refcount=False)
def contact_terms(b, e, Je, qdn, fmodel, work):
    """Contact forces (2.71) at the next step's velocities into ``fmodel``, and ``-A^T f`` and
    its Jacobian ``-A^T (df/dqdot'[i+1]) Gx`` into ``e``, ``Je``; ``b`` a :class:`ModelForces`
    (the joint-acceleration solver's has ``Gx = I``)."""
    ctx_f, A, contact_radius, contact_joint = b.ctx_f, b.A, b.contact_radius, b.contact_joint
    dt, AG, Gx = b.dt, b.AG, b.Gx
    dfx, fc, Jc, y = work[2], work[3], work[4], work[5]
    nv = A.shape[1]
    nx = Je.shape[1]
    nw = contact_radius.shape[0]  # contacts: wheels, then track patches
    for k in range(nw):
        if not ctx_f[3 * k]:
            continue
        wj = 6 + contact_joint[k]
        contact_model_force(b, k, qdn, fc, Jc, y)
        for rr in range(3):
            fmodel[3 * k + rr] = fc[rr]
        # df/dqdot' = Jc[:, 0:3] A_k + Jc[:, 3] R e_wj + Jc[:, 4] dt A_k[2]
        for rr in range(3):
            row_f = 3 * k + rr
            c0 = Jc[rr, 0]
            c1 = Jc[rr, 1]
            c2 = Jc[rr, 2] + Jc[rr, 4] * dt
            c3 = Jc[rr, 3] * contact_radius[k]
            for i in range(nx):
                dfx[i] = (c0 * AG[3 * k, i] + c1 * AG[3 * k + 1, i] + c2 * AG[3 * k + 2, i]
                          + c3 * Gx[wj, i])
            for j in range(nv):
                arj = A[row_f, j]
                if arj != 0.0:
                    e[j] -= arj * fc[rr]
                    for i in range(nx):
                        Je[j, i] -= arj * dfx[i]


@njit(refcount=False, inline="always")
def column_position(cols, j):
    """Index of ``j`` in ``cols``, or -1."""
    for i in range(cols.shape[0]):
        if cols[i] == j:
            return i
    return -1


# Inlined, as contact_model_force.
@njit(refcount=False, inline="always")
def actuator_joint_terms(b, e, Je, qdn, fmodel, errors=True, jacobian=True, cols=None):
    """Actuator forces (2.73) of the non-ideal actuators and the spring-dampers (2.74) of the
    holonomic rows (from ``c + ċ Δt`` and ``ċ``) into ``fmodel``, ``e`` and ``Je``.
    ``errors=False`` leaves ``e`` and ``fmodel`` alone, ``jacobian=False`` ``Je`` (the
    joint-acceleration solver's error and Jacobian are computed apart). With ``cols`` (nF,)
    ``Je`` is the block of those joint-space rows and columns only (nF, nF; ``Gx`` square):
    the same entries, the others skipped."""
    ctx_f, A, u, cjoint, contact_radius = b.ctx_f, b.A, b.u, b.cjoint, b.contact_radius
    akinds, aparams, act_joints, jK, jD, dt = b.akinds, b.aparams, b.act_joints, b.jK, b.jD, b.dt
    AG, Gx = b.AG, b.Gx
    nv = A.shape[1]
    nx = Je.shape[1]
    nw = contact_radius.shape[0]
    na = act_joints.shape[0]
    for a in range(na):
        r = 3 * nw + a
        if akinds[a] == IDEAL or not ctx_f[r]:
            continue
        j = 6 + act_joints[a]
        f, df = actuator_force(akinds[a], aparams[a], qdn[j], u[a])
        if errors:
            fmodel[r] = f
            e[j] -= f
        if jacobian:
            if cols is None:
                for i in range(nx):
                    Je[j, i] -= df * Gx[j, i]
            else:
                jr = column_position(cols, j)
                if jr >= 0:
                    for i in range(nx):
                        Je[jr, i] -= df * Gx[j, cols[i]]
    for rj in range(cjoint.shape[0]):
        r = 3 * nw + na + rj
        f = 0.0
        if errors:  # the force needs the row's velocity; its derivative g does not
            cd = 0.0
            for j in range(nv):
                cd += A[r, j] * qdn[j]
            f = -jK[rj] * (cjoint[rj] + dt * cd) - jD[rj] * cd
            fmodel[r] = f
        g = -(jK[rj] * dt + jD[rj])
        for j in range(nv):
            arj = A[r, j]
            if arj != 0.0:
                if errors:
                    e[j] -= arj * f
                if jacobian:
                    if cols is None:
                        for i in range(nx):
                            Je[j, i] -= arj * g * AG[r, i]
                    else:
                        jr = column_position(cols, j)
                        if jr >= 0:
                            for i in range(nx):
                                Je[jr, i] -= arj * g * AG[r, cols[i]]


@njit(refcount=False)
def _remove_prescribed(args_cache, e, Je):
    """Drop from ``e`` and ``Je`` what the prescribed rows carry: the joints of ideal
    actuators (§2.4.4) and the span of the ideal loop closures' rows ``Pfix``."""
    akinds, act_joints, Pfix = args_cache.f.akinds, args_cache.f.act_joints, args_cache.Pfix
    nx = Je.shape[1]
    # Ideal actuators supply whatever torque their joint needs: those elements of e are zero
    # (§2.4.4), so actuator torque has no effect on the cost.
    for a in range(act_joints.shape[0]):
        if akinds[a] == IDEAL:
            j = 6 + act_joints[a]
            e[j] = 0.0
            for i in range(nx):
                Je[j, i] = 0.0
    # Likewise ideal loop closures carry whatever force along their rows: only the part of e
    # outside the span of those rows counts (with Pfix orthogonal to the ideal actuators' unit
    # rows this is the projection onto the complement of all prescribed rows).
    for f in range(Pfix.shape[0]):
        remove_component(Pfix[f], e)
        for i in range(nx):
            remove_component(Pfix[f], Je[:, i])


@njit(refcount=False)
def force_balance_error(x0, p, alpha, args_cache, e, Je, qdn, fmodel, work):
    """Error ``e`` (nv,) of (2.78) and its Jacobian ``Je`` (nv, nx) at the inputs ``x = x0 +
    alpha p`` (nx,); returns ``(L, dL)``: ``L = e.e`` and its derivative along ``p``,
    ``2 e^T Je p`` (the line function of :func:`strong_wolfe` and its slope).

    ``args_cache`` (the step's constants: one record per evaluation, so that the arrays cross
    a single call boundary) is a :class:`BalanceArgs`:
    ``ctx_i`` (int rows): ``[I (nI), input position in I (nx), forced flag per I]`` packed as
    (3, nI); ``ctx_m`` (nc,) row kind (0 wheel, 1 act, 2 joint); ``Je_lam`` from
    :func:`input_maps`; ``Pfix`` (nfix, nv) orthonormal rows spanning the prescribed rows other
    than ideal actuators (ideal loop closures): ``e`` and ``Je`` are projected onto their
    orthogonal complement; ``f`` the :class:`ModelForces` (with ``AG``, ``Gx`` of
    :func:`input_maps`): ``ctx_f`` (nc,) active row flags; contacts (wheels, then track
    patches) roll at ``contact_radius`` (nc,) times the rate of joint ``contact_joint`` (nc,);
    ``share`` (nc,) scales each contact's model force (1 for wheels, a patch's load share,
    :func:`wmr_model.dynamics.track_contact.track_shares`). Writes ``qdn``
    (nv,) = qdot'[i+1], ``fmodel`` (nc,) and ``x`` into ``work[6]``.
    ``work`` is the scratch of :func:`workspace` (nothing is allocated per call).
    """
    vI, lam, x, Jp = work[0], work[1], work[6], work[9]
    for i in range(x0.shape[0]):
        x[i] = x0[i] + alpha * p[i]
    nv = qdn.shape[0]
    nx = x0.shape[0]
    _affine_state(x, args_cache, vI, lam, e, Je, qdn)
    # model forces f and -d(A^T f)/dx = -A^T (df/dqdot'[i+1]) Gx
    for r in range(fmodel.shape[0]):
        fmodel[r] = 0.0
    contact_terms(args_cache.f, e, Je, qdn, fmodel, work)
    actuator_joint_terms(args_cache.f, e, Je, qdn, fmodel)
    _remove_prescribed(args_cache, e, Je)
    L = 0.0
    for i in range(nv):
        L += e[i] * e[i]
    for i in range(nv):  # (Je p)_i summed over k in ascending order, rows innermost
        Jp[i] = 0.0
    for k in range(nx):
        pk = p[k]
        for i in range(nv):
            Jp[i] += Je[i, k] * pk
    dphi = 0.0
    for i in range(nv):
        dphi += e[i] * Jp[i]
    return L, 2.0 * dphi


@njit
def workspace(nv, n):
    """Scratch of :func:`force_balance` and :func:`force_balance_error` for up to ``n``
    independent rows and ``nv`` joint-space velocities, allocated once per run: ``(vI,
    lambda, df/dx (n,), f_c (3,), J_c (3, 5), v_c (3,), x trial, g, p (n,), Je p (nv,),
    flat (2 n^2,))``; ``flat`` holds the Gauss-Newton Hessian and its factor. The
    joint-acceleration solver (``n >= nv``) takes ``Je p`` for its velocity change, the head of
    ``flat`` for its Newton system and the tail (3 nv) for a contact's force derivatives."""
    return (np.empty(n), np.empty(n), np.empty(n), np.empty(3), np.empty((3, 5)),
            np.empty(3), np.empty(n), np.empty(n), np.empty(n), np.empty(nv),
            np.empty(2 * n * n))


@njit(refcount=False)
def strong_wolfe(x0, p, L0, dL0, args_cache, e, Je, qdn, fmodel, work):
    """Step length in (0, 1] meeting the strong Wolfe conditions (D.2), (D.4); App. D.

    Nocedal and Wright Alg. 3.5 with the first trial at the full Newton step (the upper bound),
    and the zoom of Alg. 3.6 by bisection. Returns ``(alpha, L(alpha), fresh)``, alpha 0 if no
    decrease is found; ``fresh`` is True when the buffers ``e, Je, qdn, fmodel`` hold the
    evaluation at the returned alpha (the last trial), so the caller need not repeat it.
    """
    a_prev, L_prev = 0.0, L0
    a = 1.0
    L, dL = force_balance_error(x0, p, a, args_cache, e, Je, qdn, fmodel, work)
    lo, hi, L_lo = 0.0, 0.0, L0
    if L > L0 + WOLFE_C1 * a * dL0:
        lo, hi, L_lo = a_prev, a, L_prev
    elif abs(dL) <= -WOLFE_C2 * dL0:
        return a, L, True
    elif dL >= 0.0:
        lo, hi, L_lo = a, a_prev, L
    else:
        return a, L, True  # still descending at the upper bound alpha = 1
    for _ in range(_MAX_ZOOM):
        aj = 0.5 * (lo + hi)
        Lj, dLj = force_balance_error(x0, p, aj, args_cache, e, Je, qdn, fmodel, work)
        if Lj > L0 + WOLFE_C1 * aj * dL0 or Lj >= L_lo:
            hi = aj
        else:
            if abs(dLj) <= -WOLFE_C2 * dL0:
                return aj, Lj, True
            if dLj * (hi - lo) >= 0.0:
                hi = lo
            lo, L_lo = aj, Lj
    return lo, L_lo, False


@njit
def gauss_newton_direction(Je, e, H, Lf, g, p):
    """Newton direction (2.84) with the Gauss-Newton Hessian: ``(Je^T Je + r I) p = -Je^T e``.

    ``r`` is :data:`_GN_REG` times the largest diagonal of ``Je^T Je``. Writes ``H`` (nx, nx),
    ``g`` (nx,) = ``Je^T e`` (half of dL/dx) and ``p`` (nx,); solved by a Cholesky factor ``Lf``
    (nx, nx) of the symmetric positive definite ``H``, without allocation (LU if round-off
    spoils the factorization).
    """
    nv, nx = Je.shape
    for a in range(nx):  # sums over i in ascending order, with the outputs innermost
        g[a] = 0.0
        for b in range(a + 1):
            H[a, b] = 0.0
    for i in range(nv):
        ei = e[i]
        for a in range(nx):
            jia = Je[i, a]
            g[a] += jia * ei
            for b in range(a + 1):
                H[a, b] += jia * Je[i, b]
    dmax = 0.0
    for a in range(nx):
        for b in range(a):
            H[b, a] = H[a, b]
        dmax = max(dmax, H[a, a])
    for a in range(nx):
        H[a, a] += _GN_REG * dmax + 1e-300
    if not cholesky_factor(H, Lf, 0.0):
        p[:] = -np.linalg.solve(H, g)
        return
    cholesky_solve(Lf, g, p)
    for i in range(nx):
        p[i] = -p[i]


@njit(refcount=False)
def force_balance(x, args_cache, max_iter, tol, single_step, e, Je, qdn, fmodel, work):
    """Minimize L(x) (2.76) by Newton steps (2.84) with the strong Wolfe line search.

    ``x`` (nx,) holds the warm start (§2.4.4: the previous step's inputs) and receives the
    solution; ``work`` is the scratch of :func:`workspace` (nothing is allocated per step).
    ``single_step`` performs (2.84) once (the non-iterative mode of §2.4.4). Returns
    ``(iterations, L)``; iterations is 0 when the warm start already meets ``|e| <= tol``.
    """
    nx = x.shape[0]
    g = work[7][:nx]
    p = work[8][:nx]
    H = work[10][:nx * nx].reshape((nx, nx))
    Lf = work[10][nx * nx:2 * nx * nx].reshape((nx, nx))
    p[:] = 0.0
    L, _ = force_balance_error(x, p, 0.0, args_cache, e, Je, qdn, fmodel, work)
    it = 0
    hops = 0
    while it < max_iter and math.sqrt(L) > tol and nx > 0:
        gauss_newton_direction(Je, e, H, Lf, g, p)
        dL0 = 0.0
        for i in range(nx):
            dL0 += 2.0 * g[i] * p[i]
        if dL0 >= 0.0:
            break
        alpha, L_alpha, fresh = strong_wolfe(x, p, L, dL0, args_cache, e, Je, qdn, fmodel,
                                             work)
        it += 1
        if alpha <= 0.0:
            # No decrease along p: x sits on a kink of a piecewise model (saturation, contact
            # onset), where the line search's minimum along the previous direction often lands,
            # and p, built from the Jacobian on one side, ascends on the other. Re-linearize just
            # past the kink along p and continue.
            pmax = 0.0
            xmax = 0.0
            for i in range(nx):
                pmax = max(pmax, abs(p[i]))
                xmax = max(xmax, abs(x[i]))
            if hops >= _MAX_KINK_HOPS or pmax == 0.0 or single_step:
                L, _ = force_balance_error(x, p, 0.0, args_cache, e, Je, qdn, fmodel, work)
                break
            hops += 1
            h = _KINK_HOP * (1.0 + xmax) / pmax
            for i in range(nx):
                x[i] += h * p[i]
            L, _ = force_balance_error(x, p, 0.0, args_cache, e, Je, qdn, fmodel, work)
            continue
        for i in range(nx):
            x[i] += alpha * p[i]  # bit for bit the trial point x0 + alpha p of the search
        if fresh:
            L = L_alpha
        else:
            L, _ = force_balance_error(x, p, 0.0, args_cache, e, Je, qdn, fmodel, work)
        if single_step:
            break
    return it, L
