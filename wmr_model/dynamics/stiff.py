"""The conventional "stiff ODE" baseline of Seegmiller (2014) §2.5.2 (and §2.4.1).

No constraints: contact, actuator and joint spring-damper forces are evaluated from the state and
added to the unconstrained equations of motion (2.54),

.. math::
    M(\\mathbf q)\\, \\ddot{\\mathbf q}' = \\boldsymbol\\tau - \\mathbf c(\\mathbf q,
    \\dot{\\mathbf q}') + \\sum_k A_{wheel,k}^T \\mathbf f_{c,k}(A_{wheel,k} \\dot{\\mathbf q}',
    R_k\\omega_k, \\Delta z_k) + \\sum_a \\mathbf e_a f_{act,a} + A_{joint}^T \\mathbf f_{joint},
    \\qquad \\dot{\\mathbf q} = V(\\mathbf q)\\, \\dot{\\mathbf q}' \\quad (2.14)

with the same contact models (2.71), actuator models (2.73) and joint spring-dampers (2.74) as the
constrained formulation (:mod:`wmr_model.dynamics.simulate`), so the two differ only in how forces
enter. The ODE is integrated by an adaptive implicit solver of SciPy (the ``solve_ivp``
classes: ``BDF``, the variable-order multistep family of MATLAB's ode15s, ``Radau`` or
``LSODA``); the thesis used MATLAB's
ode15s/ode23s/ode23tb with ``RelTol = 1e-2`` and ``MaxStep = 0.04 s``, the defaults here.

Loop closures (closed kinematic chains) enter like the joint constraints, as the stiff
spring-dampers of :func:`~wmr_model.dynamics.model.joint_spring_dampers` on the rows of
:func:`~wmr_model.kinematics.constraints.holonomic_constraints` (``jK``, ``jD`` have nhc entries);
there is no projection here, so they stay a penalty.

Ideal actuators have no force law, so they cannot be used here (§2.5.2 uses a P controller).
Commands are a zero-order hold of the same ``(T, na)`` array as :func:`simulate_dynamics`; the
solver is restarted wherever a command changes so that it never steps across a discontinuity.
The Jacobian of the right-hand side is by compiled central differences.
"""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
from scipy.integrate import BDF, LSODA, Radau

from wmr_model._jit import njit
from wmr_model.contact.models import contact_force
from wmr_model.dynamics.actuators import IDEAL, actuator_force
from wmr_model.dynamics.constraints import assemble_constraints
from wmr_model.dynamics.crba import crba
from wmr_model.dynamics.model import (
    DynamicsOptions,
    actuator_setup,
    compile_dynamics,
)
from wmr_model.dynamics.rnea import bias_force
from wmr_model.dynamics.simulate import check_dynamics_inputs
from wmr_model.errors import ParameterError
from wmr_model.kinematics.constraints import holonomic_constraints
from wmr_model.kinematics.integrate import state_derivative
from wmr_model.kinematics.wheel_collision import wheel_contact
from wmr_model.terrain.surface import Terrain
from wmr_model.vehicles.model import VehicleModel

__all__ = ["STIFF_METHODS", "StiffData", "StiffTrajectory", "create_stiff_data",
           "stiff_derivative", "stiff_jacobian", "simulate_stiff"]

_SOLVERS = {"BDF": BDF, "Radau": Radau, "LSODA": LSODA}
STIFF_METHODS = tuple(_SOLVERS)

# Central-difference step of the right-hand-side Jacobian, relative to 1 + |x_i|: about the
# cube root of machine epsilon (truncation vs rounding error of a central difference).
_FD_REL_STEP = 6e-6


class StiffData(NamedTuple):
    """Workspace of :func:`stiff_derivative` (nf frames, nw wheels, nrow = 3 nw + na + nhc)."""

    T_world: np.ndarray  #: (nf, 4, 4) frame-to-world transforms
    T_contact: np.ndarray  #: (nw, 4, 4) contact frames
    dz: np.ndarray  #: (nw,) contact height errors [m]
    contact_angle: np.ndarray  #: (nw,) contact angles [rad]
    Ic: np.ndarray  #: (nf, 6, 6) composite inertias
    M: np.ndarray  #: (nv, nv) joint-space inertia
    c: np.ndarray  #: (nv,) joint-space bias force
    A: np.ndarray  #: (nrow, nv) constraint rows (2.55)
    f_contact: np.ndarray  #: (nw, 3) contact forces on the wheels, contact coordinates [N]


def create_stiff_data(model: VehicleModel) -> StiffData:
    """The :class:`StiffData` of ``model``."""
    nf, nw, nv = model.nf, model.nw, model.nv
    return StiffData(np.empty((nf, 4, 4)), np.empty((nw, 4, 4)), np.empty(nw), np.empty(nw),
                     np.empty((nf, 6, 6)), np.empty((nv, nv)), np.empty(nv),
                     np.empty((3 * nw + len(model.actuated_joints) + model.nhc, nv)),
                     np.empty((nw, 3)))


@njit
def stiff_derivative(dm, t, x, u, w, xdot):
    """Right-hand side ``xdot`` (nq + nv,) of the stiff ODE at ``x = [q; qdot']``, commands u.

    ``dm``: :class:`~wmr_model.dynamics.model.DynamicsModel`, ``t``: the terrain record,
    ``w``: :class:`StiffData`, whose ``f_contact`` (nw, 3) receives the contact forces on the
    wheels (contact coordinates). The quaternion is normalized for the kinematics; its rate is
    that of the stored (unnormalized) quaternion, so the solver's drift of its norm stays a
    pure scale.
    """
    m = dm.kin
    A, c, dz = w.A, w.c, w.dz
    nw = m.wheel_frame.shape[0]
    na = dm.act_joints.shape[0]
    nv = c.shape[0]
    nq = nv + 1
    q = x[:nq].copy()
    qd = x[nq:]
    nrm = math.sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3])
    for i in range(4):
        q[i] /= nrm
    crba(m.parent, m.jtype, m.axis, m.T0, dm.I_frame, q, w.T_world, w.Ic, w.M)
    wheel_contact(m, t, w.T_world, w.T_contact, dz, w.contact_angle)
    bias_force(m, dm.I_frame, dm.gravity, q, qd, w.T_world, c)
    nh = dm.jK.shape[0]
    c_hol = np.empty(nh)
    J_hol = np.empty((nh, nv))
    holonomic_constraints(m.parent, m.jtype, m.axis, m.A_joint, m.joint_offset, m.loop_closure,
                          q, w.T_world, c_hol, J_hol)
    assemble_constraints(m.parent, m.jtype, m.axis, m.wheel_frame, J_hol, dm.act_joints,
                         w.T_world, w.T_contact, A)
    tau = -c
    vc = np.empty(3)
    fc = np.empty(3)
    Jc = np.empty((3, 5))
    for k in range(nw):
        for r in range(3):
            s = 0.0
            for j in range(nv):
                s += A[3 * k + r, j] * qd[j]
            vc[r] = s
        Rw = m.wheel_radius[k] * qd[5 + m.wheel_frame[k]]
        contact_force(dm.ckinds[k], dm.cparams[k], dm.ctables[k], dm.caxes[k], vc, Rw, dz[k], fc,
                      Jc)
        for r in range(3):
            w.f_contact[k, r] = fc[r]
            for j in range(nv):
                tau[j] += A[3 * k + r, j] * fc[r]
    for a in range(na):
        j = 6 + dm.act_joints[a]
        f, _ = actuator_force(dm.akinds[a], dm.aparams[a], qd[j], u[a])
        tau[j] += f
    for r in range(nh):
        cd = 0.0
        for j in range(nv):
            cd += J_hol[r, j] * qd[j]
        f = -dm.jK[r] * c_hol[r] - dm.jD[r] * cd
        for j in range(nv):
            tau[j] += J_hol[r, j] * f
    qdd = np.linalg.solve(w.M, tau)
    state_derivative(x[:nq], qd, xdot[:nq])
    xdot[nq:] = qdd


@njit
def stiff_jacobian(dm, t, x, u, w, Jx):
    """Central-difference Jacobian ``Jx`` (nx, nx) of :func:`stiff_derivative` at ``x``."""
    nx = x.shape[0]
    xp = x.copy()
    fp = np.empty(nx)
    fm = np.empty(nx)
    for i in range(nx):
        h = _FD_REL_STEP * (1.0 + abs(x[i]))
        xp[i] = x[i] + h
        stiff_derivative(dm, t, xp, u, w, fp)
        xp[i] = x[i] - h
        stiff_derivative(dm, t, xp, u, w, fm)
        xp[i] = x[i]
        for r in range(nx):
            Jx[r, i] = (fp[r] - fm[r]) / (2.0 * h)


@dataclass
class StiffTrajectory:
    """Result of :func:`simulate_stiff`, sampled on the command grid.

    Attributes:
        t: (T+1,) times [s]; q: (T+1, nq) states (unit quaternions); qdot: (T+1, nv).
        f_contact: (T+1, nw, 3) contact forces on the wheels, contact coordinates [N].
        dz: (T+1, nw) contact height errors [m].
        method: SciPy solver name; n_steps: accepted solver steps; nfev, njev: right-hand side
            and Jacobian evaluations; mean_step: duration / n_steps [s].
        wall_time: computation time [s].
        contact_models: (nw,) contact model name per wheel.
    """

    t: np.ndarray
    q: np.ndarray
    qdot: np.ndarray
    f_contact: np.ndarray
    dz: np.ndarray
    method: str
    n_steps: int
    nfev: int
    njev: int
    mean_step: float
    wall_time: float
    contact_models: tuple[str, ...]


def simulate_stiff(model: VehicleModel, terrain: Terrain, q0: np.ndarray, qdot0: np.ndarray,
                   commands: np.ndarray, dt: float, options: DynamicsOptions | None = None, *,
                   method: str = "BDF", rtol: float = 1e-2, atol: float = 1e-6,
                   max_step: float = 0.04, **keywords: Any
                   ) -> StiffTrajectory:
    """Simulate the unconstrained ("stiff ODE") dynamics with an adaptive implicit solver.

    Arguments as :func:`~wmr_model.dynamics.simulate.simulate_dynamics` (of its options the
    contact, actuator and joint spring-damper ones apply; the actuator defaults to ``"p"``
    here, and loop closures are always penalty spring-dampers); ``commands`` (T, na) are held
    over ``[i dt, (i+1) dt)`` and the output is sampled at ``i dt``. ``method``: one of
    :data:`STIFF_METHODS`; ``rtol``, ``atol``, ``max_step`` [s] go to the SciPy solver. Every
    actuator must have a force law (``"p"`` or ``"dc_motor"``).
    """
    if method not in STIFF_METHODS:
        raise ParameterError(f"method must be one of {list(STIFF_METHODS)}, got {method!r}")
    if model.ntp > 0:
        raise ParameterError(f"{model.source}: the stiff ODE handles wheel contacts only; "
                             f"{model.name} has {model.ntp} track patches (use "
                             "simulate_dynamics)")
    q0, qdot0, U = check_dynamics_inputs(model, q0, qdot0, commands, dt)
    if options is None:
        keywords.setdefault("actuator", "p")
    # loop closures stay penalty spring-dampers here (no projection, no multipliers)
    opts = DynamicsOptions.of(options, {**keywords, "loop_model": "penalty"})
    akinds, _ = actuator_setup(model, opts.actuator, opts.actuator_params)
    if np.any(akinds == IDEAL):
        bad = [model.joint_names[model.actuated_joints[i]]
               for i in np.flatnonzero(akinds == IDEAL)]
        raise ParameterError(f"actuator: the stiff ODE needs a force law for every actuated "
                             f"joint ('p' or 'dc_motor'); ideal for {bad}")
    dm, names = compile_dynamics(model, dt, opts)
    t = terrain.kernel_args()
    ws = create_stiff_data(model)
    nq, nv, nw = model.nq, model.nv, model.nw
    T = U.shape[0]
    X = np.empty((T + 1, nq + nv))
    FC = np.empty((T + 1, nw, 3))
    DZ = np.empty((T + 1, nw))
    X[0, :nq] = q0
    X[0, nq:] = qdot0
    n_steps = nfev = njev = 0
    t_start = time.perf_counter()
    # runs of equal commands: [i0, i1) share U[i0]
    change = np.flatnonzero(np.any(U[1:] != U[:-1], axis=1)) + 1
    bounds = [0, *change.tolist(), T]
    for i0, i1 in itertools.pairwise(bounds):
        u = U[i0].copy()

        def fun(_t: float, x: np.ndarray, u: np.ndarray = u) -> np.ndarray:
            out = np.empty(nq + nv)
            stiff_derivative(dm, t, np.ascontiguousarray(x), u, ws, out)
            return out

        def jac(_t: float, x: np.ndarray, u: np.ndarray = u) -> np.ndarray:
            out = np.empty((nq + nv, nq + nv))
            stiff_jacobian(dm, t, np.ascontiguousarray(x), u, ws, out)
            return out

        t_eval = np.arange(i0, i1 + 1) * dt
        solver = _SOLVERS[method](fun, t_eval[0], X[i0], t_eval[-1], rtol=rtol, atol=atol,
                                  max_step=max_step, jac=jac)
        k = i0 + 1
        while solver.status == "running":
            msg = solver.step()
            if solver.status == "failed":
                raise RuntimeError(f"simulate_stiff: {method} failed at t = {solver.t:g} s: "
                                   f"{msg}")
            n_steps += 1
            if k <= i1 and t_eval[k - i0] <= solver.t:
                sol = solver.dense_output()
                while k <= i1 and t_eval[k - i0] <= solver.t:
                    X[k] = sol(t_eval[k - i0])
                    k += 1
        X[i1] = solver.y
        X[i1, :4] /= np.linalg.norm(X[i1, :4])
        nfev += int(solver.nfev)
        njev += int(solver.njev)
    wall = time.perf_counter() - t_start
    X[:, :4] /= np.linalg.norm(X[:, :4], axis=1, keepdims=True)
    xd = np.empty(nq + nv)
    for i in range(T + 1):
        stiff_derivative(dm, t, np.ascontiguousarray(X[i]), U[min(i, T - 1)], ws, xd)
        FC[i] = ws.f_contact
        DZ[i] = ws.dz
    return StiffTrajectory(np.arange(T + 1) * dt, X[:, :nq].copy(), X[:, nq:].copy(), FC, DZ,
                           method, n_steps, nfev, njev, T * dt / max(n_steps, 1), wall,
                           names)
