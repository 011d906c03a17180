"""The joint-acceleration force balance (issue 22, option c) against independent oracles: NumPy's
solver, finite differences of its own error, and the thesis' formulation (2.75)-(2.88) of the
same equations on Zoë and on vehicles with holonomic spring-dampers and non-ideal actuators."""

from __future__ import annotations

import numpy as np
import pytest

from wmr_model._jit import njit
from wmr_model.dynamics import simulate as S
from wmr_model.dynamics.actuators import IDEAL
from wmr_model.dynamics.data import create_step_data
from wmr_model.dynamics.force_balance import WOLFE_C1
from wmr_model.dynamics.joint_acceleration import (
    STALL_STEP,
    AccelArgs,
    acceleration_error,
    acceleration_jacobian,
    joint_acceleration_balance,
    joint_acceleration_error,
    least_squares_step,
    newton_step,
    solve_in_place,
)
from wmr_model.dynamics.model import DynamicsOptions, compile_dynamics
from wmr_model.errors import ParameterError
from wmr_model.experiments import dynamic as sc
from wmr_model.io.terrain_files import load_wmrde_benchmark_terrains
from wmr_model.io.vehicles import load_vehicle
from wmr_model.terrain import surface as tr

DT = 0.04


def test_solve_in_place_matches_numpy() -> None:
    rng = np.random.default_rng(3)
    for n in (2, 5, 9, 13):
        J = rng.normal(size=(n, n)) + n * np.eye(n) * rng.uniform(0, 1)
        J[0, 0] = 0.0  # forces a row exchange at the first pivot
        b = rng.normal(size=n)
        want = np.linalg.solve(J, b)
        Jw, x = J.copy(), b.copy()
        assert solve_in_place(Jw, x)
        np.testing.assert_allclose(x, want, rtol=1e-10, atol=1e-12)
    J = np.array([[1.0, 2.0], [2.0, 4.0]])  # singular: reported, not a quotient by zero
    assert not solve_in_place(J, np.array([1.0, 1.0]))


def test_singular_newton_step_falls_back_to_least_squares() -> None:
    """A J_FF singular to round-off: Newton's step reports it and leaves ``p`` alone; the
    fallback is NumPy's least-squares step on the free columns, zero on the others."""
    free = np.array([0, 2, 3], dtype=np.int64)
    e = np.array([1.0, 5.0, 2.0, -1.0])
    R = np.array([[1.0, 2.0, 0.0], [2.0, 4.0, 0.0], [0.0, 0.0, 3.0]])  # rank 2
    b, p = np.empty(3), np.full(4, 7.0)
    assert not newton_step(free, e, R.copy(), b, p)
    assert np.all(p == 7.0)
    least_squares_step(free, e, R.copy(), b, p)
    np.testing.assert_allclose(p[free], np.linalg.lstsq(R, -e[free])[0], rtol=1e-12)
    assert p[1] == 0.0
    R = np.array([[2.0, 1.0, 0.0], [1.0, 3.0, 0.0], [0.0, 0.0, 3.0]])  # regular: solved
    assert newton_step(free, e, R.copy(), b, p)
    np.testing.assert_allclose(p[free], np.linalg.solve(R, -e[free]), rtol=1e-12)
    assert p[1] == 0.0


@njit
def _setup(dm, t, d, q, qdot, u):
    S._step_kinematics(dm, t, d, q, qdot, u)
    S._row_flags(dm, d, d.dz.shape[0])
    return d.dz


@pytest.mark.parametrize("contact", ["pacejka", "piecewise_linear", "ishigami"])
def test_error_jacobian_matches_finite_differences(contact: str) -> None:
    """Je of the error (2.65) at recorded states of a Zoë run, against central differences of
    the error itself, over the unknowns (the columns not set by ideal actuators)."""
    zoe = load_vehicle("zoe")
    ter = load_wmrde_benchmark_terrains()[0]
    q0, qd0 = sc._moving_start(zoe, ter, 1.0)
    U = np.tile(sc.straight_wheel_rates(zoe, 1.0), (40, 1))
    run = S.simulate_dynamics(zoe, ter, q0, qd0, U, DT, contact_model=contact)
    dm, _ = compile_dynamics(zoe, DT, DynamicsOptions(contact_model=contact))
    d = create_step_data(dm, zoe.nv)
    ta = ter.kernel_args()
    nv, nc = zoe.nv, d.A.shape[0]
    checked = 0
    for i in (10, 25, 39):
        dz = _setup(dm, ta, d, run.q[i], run.qdot[i], U[i])
        a = AccelArgs(d.M, d.c, run.qdot[i], S._model_forces(dm, d, U[i], dz, d.A, d.eye),
                      d.contact_jac)
        x = run.qdot[i + 1].copy()
        e, Je = np.empty(nv), np.empty((nv, nv))
        joint_acceleration_error(x, a, e, Je, np.empty(nc), d.fb)
        e_p, e_m, scratch = np.empty(nv), np.empty(nv), np.empty((nv, nv))
        for j in d.free:
            h = 1e-6 * max(1.0, abs(x[j]))
            xp, xm = x.copy(), x.copy()
            xp[j] += h
            xm[j] -= h
            joint_acceleration_error(xp, a, e_p, scratch, np.empty(nc), d.fb)
            joint_acceleration_error(xm, a, e_m, scratch, np.empty(nc), d.fb)
            fd = (e_p - e_m) / (2 * h)
            rows = d.free  # ideal-actuator rows carry no error
            scale = np.abs(Je[np.ix_(rows, d.free)]).max()
            # piecewise models have kinks: a difference across one is not a derivative
            kink = np.abs(fd[rows] - Je[rows, j]).max() > 1e-4 * scale
            if contact == "piecewise_linear" and kink:
                continue
            np.testing.assert_allclose(fd[rows], Je[rows, j], atol=1e-5 * scale)
            checked += 1
    assert checked >= 2 * len(d.free)


def test_zoe_benchmark_agrees_with_the_thesis_solver() -> None:
    """Pacejka, dt 0.04, 10 s over two benchmark terrains: both solvers converge every step to
    the same tolerance on the same equations, so they end at the same place."""
    zoe = load_vehicle("zoe")
    terrains = load_wmrde_benchmark_terrains()[:2]
    u = sc.straight_wheel_rates(zoe, 1.0)
    mg = zoe.total_mass * 9.80665
    for ter in terrains:
        q0, qd0 = sc._moving_start(zoe, ter, 1.0)
        runs = {s: S.simulate_dynamics(zoe, ter, q0, qd0, np.tile(u, (250, 1)), DT,
                                       contact_model="pacejka", solver=s)
                for s in ("thesis", "joint_acceleration")}
        for r in runs.values():
            assert np.sqrt(r.cost.max()) <= 1e-6 * mg
        a, b = runs["thesis"], runs["joint_acceleration"]
        assert b.q[-1, 4] > 8.0  # drove ~10 m
        assert np.linalg.norm(a.q[-1, 4:7] - b.q[-1, 4:7]) < 1e-3
        np.testing.assert_allclose(a.f_contact, b.f_contact, atol=2e-3 * mg)


@pytest.mark.parametrize("name, options", [
    ("rocky7", {}),  # holonomic rocker-bogie spring-damper (2.74)
    ("crusher", {}),  # six suspension spring-dampers
    ("landtamer", {"actuator": "p"}),  # non-ideal actuators (2.73): torques from the model
])
def test_other_vehicles_agree_with_the_thesis_solver(name: str, options: dict) -> None:
    model = load_vehicle(name)
    ter = tr.rough(0.05, 1.0, seed=4, x_range=(-10, 10), y_range=(-10, 10))
    q0, qd0 = sc._moving_start(model, ter, 1.0)
    U = np.tile(sc.straight_wheel_rates(model, 1.0), (100, 1))
    mg = model.total_mass * 9.80665
    runs = {s: S.simulate_dynamics(model, ter, q0, qd0, U, DT, solver=s, **options)
            for s in ("thesis", "joint_acceleration")}
    a, b = runs["thesis"], runs["joint_acceleration"]
    assert np.sqrt(b.cost.max()) <= 1e-6 * mg
    assert np.linalg.norm(b.q[-1, 4:7] - q0[4:7]) > 2.0  # it drove
    assert np.linalg.norm(a.q[-1, 4:7] - b.q[-1, 4:7]) < 1e-3
    np.testing.assert_allclose(a.qdot[-1], b.qdot[-1], atol=1e-3)


def test_solver_defaults_and_bad_choices() -> None:
    zoe = load_vehicle("zoe")
    hmmwv = load_vehicle("hmmwv")  # ideal loop closures (the steering linkages)
    assert compile_dynamics(zoe, DT)[0].opt.acceleration
    assert not compile_dynamics(zoe, DT, DynamicsOptions(single_step=True))[0].opt.acceleration
    assert not compile_dynamics(zoe, DT, DynamicsOptions(solver="thesis"))[0].opt.acceleration
    assert not compile_dynamics(hmmwv, DT)[0].opt.acceleration
    assert compile_dynamics(hmmwv, DT, DynamicsOptions(loop_model="penalty"))[0].opt.acceleration
    with pytest.raises(ParameterError, match="solver 'joint_acceleration' cannot carry"):
        compile_dynamics(hmmwv, DT, DynamicsOptions(solver="joint_acceleration"))
    with pytest.raises(ParameterError, match="solver must be one of"):
        DynamicsOptions(solver="newton")


@njit
def _reference_newton(x, a, free, max_iter, tol, e, Je, fmodel, work, rules, stalled):
    """One Newton run of :func:`_reference_balance` from ``x``; ``stalled`` starts it with the
    nonmonotone rule on. Returns ``(iterations, L, stalled)``."""
    nF = free.shape[0]
    L = joint_acceleration_error(x, a, e, Je, fmodel, work)
    costs = [L, L, L, L]  # the last four iterates', newest last
    it = 0
    while it < max_iter and np.sqrt(L) > tol:
        R, b = np.empty((nF, nF)), np.empty(nF)
        for i in range(nF):
            b[i] = -e[free[i]]
            for j in range(nF):
                R[i, j] = Je[free[i], free[j]]
        R0 = R.copy()
        if not solve_in_place(R, b):
            b = np.linalg.lstsq(R0, -e[free])[0]
        p = np.zeros_like(x)
        p[free] = b
        x0, L0 = x.copy(), L
        alpha, accepted = 1.0, False
        for _ in range(30):
            x[:] = x0 + alpha * p
            L = joint_acceleration_error(x, a, e, Je, fmodel, work)
            if L <= (1.0 - 2.0 * WOLFE_C1 * alpha) * L0:
                accepted = True
                break
            if rules and stalled and L <= max(costs[-4:]) - 2.0 * WOLFE_C1 * alpha * L0:
                accepted = True
                break
            alpha *= 0.5
        it += 1
        costs.append(L)
        if accepted and alpha < STALL_STEP:
            stalled = True
        if not accepted:
            x[:] = x0
            L = joint_acceleration_error(x, a, e, Je, fmodel, work)
            break
    return it, L, stalled


@njit
def _reference_balance(x, a, free, max_iter, tol, e, Je, fmodel, work, rules):
    """Newton's method with the halving line search of :func:`joint_acceleration_balance`,
    written plainly on the reference evaluation (error and full Jacobian at every trial) and
    the generic elimination: the oracle of the split evaluation. ``rules``: the product's
    departures from Armijo's rule (after a stalled search also accept against the largest of
    the last four costs; a run that ends above the tolerance starts once more from the start
    with that rule from the first iteration); without them, Armijo alone. Returns
    ``(iterations, L, departed)``, ``departed`` when a stall or the restart happened."""
    start = x.copy()
    it, L, stalled = _reference_newton(x, a, free, max_iter, tol, e, Je, fmodel, work, rules,
                                       False)
    if rules and np.sqrt(L) > tol:
        x[:] = start
        it2, L, _ = _reference_newton(x, a, free, max_iter, tol, e, Je, fmodel, work, True, True)
        return it + it2, L, True
    return it, L, stalled


def _step_args(dm, d, ta, run, U, i: int) -> AccelArgs:
    """Step ``i`` of ``run``: its kinematics and row flags in ``d``, and its balance's
    :class:`AccelArgs`."""
    dz = _setup(dm, ta, d, run.q[i], run.qdot[i], U[i])
    return AccelArgs(d.M, d.c, run.qdot[i], S._model_forces(dm, d, U[i], dz, d.A, d.eye),
                     d.contact_jac)


def _balances(dm, d, a, u):
    """The step's balance from its start (the velocities of ``a``, ideal actuators at their
    commands ``u``, as the product starts it) by the product, held equal bit for bit to the
    reference loop with the product's rules, and by Armijo's rule alone. Returns
    ``(iterations, L, departed, x, (iterations, L, x) of Armijo alone)``."""
    nv, nc = a.qdot.shape[0], d.A.shape[0]
    start = a.qdot.copy()
    for k in range(dm.act_joints.shape[0]):
        if dm.akinds[k] == IDEAL:
            start[6 + dm.act_joints[k]] = u[k]
    want, got, monotone = start.copy(), start.copy(), start.copy()
    scratch = (np.empty(nv), np.empty((nv, nv)), np.empty(nc), d.fb)
    it1, L1, departed = _reference_balance(want, a, d.free, dm.opt.max_iter, dm.opt.tol,
                                           *scratch, True)
    it2, L2 = joint_acceleration_balance(got, a, d.free, dm.opt.max_iter, dm.opt.tol, False,
                                         scratch[0], scratch[2], scratch[3],
                                         dm.opt.elimination)
    assert (it1, L1) == (it2, L2) and np.array_equal(want, got)
    it3, L3, _ = _reference_balance(monotone, a, d.free, dm.opt.max_iter, dm.opt.tol, *scratch,
                                    False)
    return it2, L2, departed, got, (it3, L3, monotone)


@pytest.mark.parametrize("name, options", [
    ("zoe", {"contact_model": "pacejka"}),
    ("zoe", {"contact_model": "ishigami"}),
    ("zoe", {"contact_model": "piecewise_linear"}),
    ("rocky7", {}),  # holonomic spring-damper rows (2.74)
    ("absolem", {}),  # track patches: contacts after the wheels, with load shares
    ("landtamer", {"actuator": "p"}),  # non-ideal actuators (2.73)
    ("landtamer", {"actuator": "dc_motor",  # a torque-speed limit that binds
                   "actuator_params": {"tau_stall": 400.0, "w_noload": 8.0}}),
])
def test_split_evaluation_is_the_reference_bit_for_bit(name: str, options: dict) -> None:
    """What Newton's method runs (the error alone, the Jacobian from the kept contact
    derivatives, only where a step follows) against the reference evaluation of the error and
    full Jacobian: equal values of e, L, the model forces and every entry of the free block of
    Je (what Newton's step uses) at recorded states and at points off the solution; and the product's balance against a plain Newton
    loop on the reference from the same start: the same iterations, cost and velocities."""
    model = load_vehicle(name)
    ter = tr.rough(0.05, 1.0, seed=4, x_range=(-10, 10), y_range=(-10, 10))
    q0, qd0 = sc._moving_start(model, ter, 1.0)
    U = np.tile(sc.straight_wheel_rates(model, 1.0), (40, 1))
    run = S.simulate_dynamics(model, ter, q0, qd0, U, DT, **options)
    dm, _ = compile_dynamics(model, DT, DynamicsOptions(**options))
    assert dm.opt.acceleration
    d = create_step_data(dm, model.nv)
    ta = ter.kernel_args()
    nv, nc = model.nv, d.A.shape[0]
    rng = np.random.default_rng(7)
    iterated = 0
    for i in (5, 20, 39):
        a = _step_args(dm, d, ta, run, U, i)
        for x in (run.qdot[i + 1], run.qdot[i + 1] + rng.normal(scale=0.05, size=nv)):
            e1, Je1, f1 = np.empty(nv), np.empty((nv, nv)), np.empty(nc)
            e2, f2 = np.empty(nv), np.empty(nc)
            R = np.full((len(d.free), len(d.free)), np.nan)
            L1 = joint_acceleration_error(x.copy(), a, e1, Je1, f1, d.fb)
            L2 = acceleration_error(x.copy(), a, e2, f2, d.fb)
            acceleration_jacobian(x.copy(), a, d.free, R, d.fb)
            assert L1 == L2
            assert np.array_equal(e1, e2) and np.array_equal(f1, f2)
            assert np.array_equal(Je1[np.ix_(d.free, d.free)], R)
        it, L, departed, x, (it3, L3, x3) = _balances(dm, d, a, U[i])
        if not departed:  # the product's rules never applied: Armijo alone, the same steps
            assert (it3, L3) == (it, L) and np.array_equal(x3, x)
        iterated += it
    assert iterated >= 3  # the balances took Newton steps (the Jacobian was used)


def _benchmark_run(contact: str, terrain: int):
    """Zoë at 1 m/s over benchmark terrain index ``terrain``, dt 0.04, 10 s, with ``contact``:
    the run, its compiled model, a step workspace, the terrain's arrays and the commands."""
    zoe = load_vehicle("zoe")
    ter = load_wmrde_benchmark_terrains()[terrain]
    q0, qd0 = sc._moving_start(zoe, ter, 1.0)
    U = np.tile(sc.straight_wheel_rates(zoe, 1.0), (250, 1))
    run = S.simulate_dynamics(zoe, ter, q0, qd0, U, DT, contact_model=contact)
    dm, _ = compile_dynamics(zoe, DT, DynamicsOptions(contact_model=contact))
    return run, dm, create_step_data(dm, zoe.nv), ter.kernel_args(), U


def test_piecewise_linear_pyramid_corner_converges() -> None:
    """Zoë with the piecewise-linear pyramid, dt 0.04, 10 s over benchmark terrain 8. With
    Armijo's rule alone the balance stalls on a corner of the friction pyramid (C.7-C.8) near
    step 134 (~17 halvings per iteration, then no decrease at all) and the thesis' solver, which
    redoes the step, left steps 134-136 at up to 0.34 m g of residual. With the nonmonotone
    rule after a stall every step of the run meets the tolerance; over steps 125-144 the
    product is the plain reference loop bit for bit, and at least one stalled step converges
    in the balance itself where Armijo alone from the same start ends above the tolerance."""
    run, dm, d, ta, U = _benchmark_run("piecewise_linear", 7)
    tol = dm.opt.tol
    assert np.sqrt(run.cost.max()) <= tol
    crossed = []  # steps the product's rules converged and Armijo alone did not
    for i in range(125, 145):
        _, L, departed, _, (_, L_armijo, _) = _balances(dm, d, _step_args(dm, d, ta, run, U, i),
                                                        U[i])
        if departed and np.sqrt(L) <= tol < np.sqrt(L_armijo):
            crossed.append(i)
    assert crossed


def test_tumbling_ishigami_step_converges_after_the_restart() -> None:
    """Zoë on Ishigami soil at constant wheel rates, dt 0.04, 10 s over benchmark terrain 9,
    where the rover tumbles: with Armijo's rule (and the nonmonotone rule after its stall) the
    balance of step 202 settles at L ~ 9e4 N^2 after 24 iterations, 356 evaluations, and the
    thesis' solver could not finish it either (steps 202 and 242 stayed out of balance). The
    restart from the step's start with the nonmonotone rule from the first iteration converges
    (10 iterations): every step of the run meets the tolerance; over steps 198-206 the product
    is the plain reference loop bit for bit, and at step 202 Armijo alone ends above it."""
    run, dm, d, ta, U = _benchmark_run("ishigami", 8)
    tol = dm.opt.tol
    assert np.sqrt(run.cost.max()) <= tol
    for i in range(198, 207):
        _, L, departed, _, (_, L_armijo, _) = _balances(dm, d, _step_args(dm, d, ta, run, U, i),
                                                        U[i])
        assert np.sqrt(L) <= tol
        if i == 202:
            assert departed and np.sqrt(L_armijo) > tol
