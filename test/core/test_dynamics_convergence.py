"""Force-balance convergence and the contact-model facts it rests on (thesis §2.4.3, App. C).

* The analytic Pacejka and Ishigami-table Jacobians (used by the force balance) against central
  differences of the force.
* The peak of the force-slip curve implied by Table C.1, from the closed form of (C.13) and of
  the coupling (C.16)-(C.18) at alpha -> 0, against the model.
* The Ishigami lookup table covers every sinkage the model accepts (no clamped f_z).
* Zoë on the wmrde rough terrains (§2.5.4, short runs): the force balance reaches its tolerance
  at every step with Pacejka and piecewise-linear contact at dt 0.04.
"""

import math

import numpy as np
import pytest
from scipy import optimize

from wmr_model.contact import ishigami as ish
from wmr_model.contact import pacejka as pac
from wmr_model.contact.models import _params_vector, default_params
from wmr_model.dynamics.simulate import simulate_dynamics
from wmr_model.experiments import dynamic as sc
from wmr_model.io.terrain_files import load_wmrde_benchmark_terrains
from wmr_model.io.vehicles import load_vehicle
from wmr_model.prediction.controllers import straight_wheel_rates

W, MW, R, B = 500.0, 50.0, 0.325, 0.2
C1 = pac.TABLE_C1


def _pacejka_params(**over):
    return _params_vector("pacejka", default_params("pacejka", W, MW, R, B), over, "test")


def _c13(s):
    """(C.13) with Table C.1, written out independently of the implementation."""
    bk = C1["Bs"] * C1["Ks"]
    return C1["Ds"] * math.sin(C1["Cs"] * math.atan(bk * (1 - C1["Es"]) * s
                                                     + C1["Es"] * math.atan(bk * s)))


def _coupled(s):
    """(C.16)/(C.18) at alpha -> 0: f'_y ~ k tan(alpha) with k the slope of (C.14) at 0."""
    k = C1["Ba"] * C1["Ca"] * C1["Da"] * C1["Ka"] * 2.0 / math.pi
    fx = _c13(s)
    return fx * s * k / math.sqrt((s * k) ** 2 + fx ** 2)


@pytest.mark.parametrize("seed", range(3))
def test_pacejka_analytic_jacobian_matches_finite_difference(seed):
    p = _pacejka_params(Crr=25.0)
    rng = np.random.default_rng(seed)
    fc, J, f_ref, fp, fm = (np.empty(3), np.empty((3, 5)), np.empty(3), np.empty(3),
                            np.empty(3))
    for _ in range(100):
        y = np.concatenate([rng.normal(0, 1, 3) * rng.choice([1e-3, 0.1, 3.0]),
                            rng.uniform(-4, 4, 1), rng.uniform(-0.03, 0.005, 1)])
        pac.pacejka(p, y[:3].copy(), y[3], y[4], fc, J)
        pac.pacejka_force(p, *y, f_ref)
        np.testing.assert_array_equal(fc, f_ref)
        Jfd = np.empty((3, 5))
        for k in range(5):
            h = 1e-7 * (1 + abs(y[k]))
            a, b = y.copy(), y.copy()
            a[k] += h
            b[k] -= h
            pac.pacejka_force(p, *a, fp)
            pac.pacejka_force(p, *b, fm)
            Jfd[:, k] = (fp - fm) / (2 * h)
        np.testing.assert_allclose(J, Jfd, rtol=1e-5, atol=1e-6 * (1 + np.abs(Jfd).max()))


def test_table_c1_force_slip_peak_closed_form():
    """(C.13) peaks where C_s atan(u) = pi/2 (u = sqrt(3) for C_s = 1.5): |s| = 0.300. The
    coupled force at alpha = 0 peaks later, near 0.38 - both are Table C.1's, not 0.2."""
    bk = C1["Bs"] * C1["Ks"]
    u = math.tan(math.pi / (2 * C1["Cs"]))
    s_pure = optimize.brentq(lambda s: bk * (1 - C1["Es"]) * s + C1["Es"] * math.atan(bk * s)
                             - u, 1e-6, 5.0)
    assert s_pure == pytest.approx(0.300, abs=5e-4)
    res = optimize.minimize_scalar(lambda s: -_coupled(s), bounds=(0.05, 2.0), method="bounded",
                                   options={"xatol": 1e-8})
    s_coupled = res.x
    assert 0.35 < s_coupled < 0.42
    # the implementation along alpha = 0 (vy = 0), wheel centre at V = 2 m/s >> Vmin
    p = _pacejka_params(mu=0.6, Vmin=1e-6)
    V, fc = 2.0, np.empty(3)
    grid = np.linspace(0.05, 1.0, 1901)
    ratio = np.empty_like(grid)
    for i, s in enumerate(grid):
        for sign in (1.0, -1.0):  # driving and braking are mirror images
            pac.pacejka_force(p, -sign * s * V, 0.0, 0.0, V * (1 + sign * s), -0.01, fc)
            ratio[i] = sign * fc[0] / (0.6 * fc[2])
            assert ratio[i] == pytest.approx(_coupled(s), rel=1e-9)
    assert grid[np.argmax(ratio)] == pytest.approx(s_coupled, abs=1e-3)
    assert grid[np.argmax([_c13(s) for s in grid])] == pytest.approx(s_pure, abs=1e-3)


def test_ishigami_lookup_analytic_jacobian_matches_finite_difference():
    """The interpolant's exact cell derivative chained through (C.19)-(C.20), against central
    differences of the force (steps far below the cell size, so both stay in one cell)."""
    p = _params_vector("ishigami", default_params("ishigami", W, MW, R, B), {}, "t")
    table, axes = ish.build_table(p)
    rng = np.random.default_rng(3)
    fc, J, f_ref, fp, fm = (np.empty(3), np.empty((3, 5)), np.empty(3), np.empty(3),
                            np.empty(3))
    for _ in range(300):
        y = np.array([rng.normal(0, 0.3), rng.normal(0, 0.2), rng.normal(0, 0.1),
                      rng.uniform(-2, 2), rng.uniform(-0.2, 0.005)])
        ish.lookup(p, table, axes, y[:3].copy(), y[3], y[4], fc, J)
        ish.lookup_force(p, table, axes, *y, f_ref)
        np.testing.assert_array_equal(fc, f_ref)
        Jfd = np.empty((3, 5))
        for k in range(5):
            h = 1e-8 * (1 + abs(y[k]))
            a, b = y.copy(), y.copy()
            a[k] += h
            b[k] -= h
            ish.lookup_force(p, table, axes, *a, fp)
            ish.lookup_force(p, table, axes, *b, fm)
            Jfd[:, k] = (fp - fm) / (2 * h)
        np.testing.assert_allclose(J, Jfd, rtol=1e-5, atol=1e-6 * (1 + np.abs(Jfd).max()))
    fc_nan = np.empty(3)
    ish.lookup(p, table, axes, np.array([np.nan, 0.0, 0.0]), 1.0, -0.01, fc_nan, J)
    assert np.all(np.isnan(fc_nan))


def test_ishigami_table_covers_full_sinkage():
    """No clamping below the static sinkage: the table reaches h = R and matches the direct
    integration there (a clamped table capped f_z and left the force balance without a root)."""
    p = _params_vector("ishigami", default_params("ishigami", W, MW, R, B), {}, "t")
    table, axes = ish.build_table(p)
    assert axes[4] == pytest.approx(-R)
    out, ref = np.empty(3), np.empty(3)
    for h in (0.3 * R, 0.45 * R, 0.9 * R):
        ish.table_force(table, axes, 0.1, 0.05, -h, out)
        ish.ishigami_direct(p, 0.1, 0.05, h, ish.N_THETA, ref)
        assert out[2] == pytest.approx(ref[2], rel=0.01)
    fz = [table[20, 0, k, 2] for k in range(table.shape[2])]
    assert np.all(np.diff(fz) < 0)  # f_z grows with depth all the way (Δz axis ascending)


@pytest.fixture(scope="module")
def zoe():
    return load_vehicle("zoe"), load_wmrde_benchmark_terrains()[:2]


# mean Newton iterations per step at most: the thesis' Gauss-Newton on the row velocities, warm
# started from the previous step's; Newton on the joint accelerations from zero acceleration
# (quadratic convergence: ~500 N -> ~20 N -> ~0.03 N -> 1e-7 N for Pacejka), with the thesis'
# solver's iterations added on the steps it rescues
_MEAN_ITERATIONS = {"thesis": 3.0, "joint_acceleration": 4.5}


@pytest.mark.parametrize("solver", ["thesis", "joint_acceleration"])
@pytest.mark.parametrize("contact", ["pacejka", "piecewise_linear"])
def test_zoe_rough_terrain_force_balance_converges(zoe, contact, solver):
    model, terrains = zoe
    mg = model.total_mass * 9.80665
    u = straight_wheel_rates(model, 1.0)
    dt = 0.04
    for ter in terrains:
        q0, qd0 = sc._moving_start(model, ter, 1.0)
        tr = simulate_dynamics(model, ter, q0, qd0, np.tile(u, (100, 1)), dt,
                               contact_model=contact, solver=solver)
        assert np.sqrt(tr.cost.max()) <= 1e-6 * mg
        assert tr.iterations.mean() < _MEAN_ITERATIONS[solver]
        assert tr.q[-1, 4] > 3.0  # drove ~4 m
