"""Constrained dynamics with force balance (§2.4) against closed forms and conservation laws."""

import math

import numpy as np
import pytest

from wmr_model import dynamics as dyn
from wmr_model.dynamics.constraints import independent_rows, qr_column_pivoting
from wmr_model.dynamics.simulate import simulate_dynamics
from wmr_model.errors import ParameterError, ShapeError
from wmr_model.io.vehicles import load_vehicle
from wmr_model.kinematics import initialize_contact
from wmr_model.spatial import quat_from_euler, quat_to_rot
from wmr_model.terrain import surface as tr
from wmr_model.vehicles.generators import random_tree_spec
from wmr_model.vehicles.model import compile_vehicle


def _with_options(m, **opts):
    o = dict(m.options)
    o.update(opts)
    object.__setattr__(m, "options", o)
    return m


def test_qr_pivoting_finds_rank_and_reconstructs():
    rng = np.random.default_rng(0)
    B0 = rng.normal(size=(7, 4)) @ rng.normal(size=(4, 9))  # rank 4
    B = B0.copy()
    piv = np.empty(9, dtype=np.int64)
    d = qr_column_pivoting(B, piv)
    assert np.sum(np.abs(d) > 1e-9 * abs(d[0])) == 4
    # |R_ii| equal those of numpy's QR of the pivoted matrix
    r = np.abs(np.diag(np.linalg.qr(B0[:, piv], mode="r")))
    np.testing.assert_allclose(np.abs(d)[:4], r[:4], rtol=1e-10)
    A = np.vstack([B0.T, B0.T[:2]])  # duplicate rows are dependent
    indep = np.zeros(11, dtype=bool)
    n = independent_rows(A, np.ones(11, bool), np.ones(7, bool), np.zeros(11, bool), indep)
    assert n == 4 and np.linalg.matrix_rank(A[indep]) == 4


@pytest.fixture(scope="module")
def landtamer():
    return load_vehicle("landtamer")


def _parked(m, slope, mu, seconds=10.0, dt=0.04):
    """Braked (wheel rates commanded to 0) on a slope; drift measured after 1 s of settling
    (the vehicle first sinks to its static contact compression, ~1 cm along the normal)."""
    ter = tr.inclined_plane(slope)
    q0, _ = initialize_contact(m, ter)
    U = np.zeros((int(round((seconds + 1.0) / dt)), len(m.actuated_joints)))
    W = m.total_mass * 9.80665 / m.nw
    traj = simulate_dynamics(m, ter, q0, np.zeros(m.nv), U, dt, contact_model="coulomb_cone",
                             contact_params={"mu_x": mu, "Cx": mu * W / 1e-4,
                                             "Cy": mu * W / 1e-4})
    settled = int(round(1.0 / dt))
    return traj, np.linalg.norm(traj.q[-1, 4:7] - traj.q[settled, 4:7])


def test_parked_on_slope_below_friction_limit_holds(landtamer):
    traj, drift = _parked(landtamer, math.radians(15), 0.8)
    assert drift < 0.01
    assert np.all(np.sqrt(traj.cost) <= 1e-6 * landtamer.total_mass * 9.80665)
    # static balance along the slope: sum f_x = m g sin(slope), sum f_z = m g cos(slope)
    mg = landtamer.total_mass * 9.80665
    assert traj.f_contact[-1, :, 2].sum() == pytest.approx(mg * math.cos(math.radians(15)),
                                                           rel=1e-3)
    assert abs(traj.f_contact[-1, :, 0].sum()) == pytest.approx(
        mg * math.sin(math.radians(15)), rel=1e-3)


def test_parked_on_slope_above_friction_limit_slides(landtamer):
    traj, _ = _parked(landtamer, math.radians(35), 0.5, seconds=1.0)
    # after settling it slides at a = g (sin - mu cos): speed along the slope grows linearly
    a = 9.80665 * (math.sin(math.radians(35)) - 0.5 * math.cos(math.radians(35)))
    speed = np.linalg.norm(traj.qdot[:, 3:6], axis=1)
    t = traj.t
    k0, k1 = int(round(1.0 / 0.04)), len(t) - 1
    assert (speed[k1] - speed[k0]) / (t[k1] - t[k0]) == pytest.approx(a, rel=0.02)


@pytest.mark.parametrize("model_name", ["piecewise_linear", "pacejka", "roams", "ishigami"])
def test_force_balance_cost_zero_every_step(landtamer, model_name):
    ter = tr.flat()
    q0, _ = initialize_contact(landtamer, ter)
    R = landtamer.wheel_radius[0]
    U = np.full((75, 6), 1.0 / R)
    U[25:, [0, 2, 4]] *= 0.5  # skid-steer turn
    traj = simulate_dynamics(landtamer, ter, q0, np.zeros(landtamer.nv), U, 0.04,
                             contact_model=model_name)
    tol = 1e-6 * landtamer.total_mass * 9.80665
    assert np.all(np.sqrt(traj.cost) <= tol)
    assert traj.iterations.mean() < 3.0
    w = traj.qdot[-1, 2]
    assert w > 0.05  # left wheels slower: turns left


def test_free_fall_accelerates_at_g(landtamer):
    ter = tr.flat(-10.0)
    q0 = landtamer.neutral_state()
    q0[0:4] = quat_from_euler(0.3, -0.2, 0.5)
    n, dt = 25, 0.02
    traj = simulate_dynamics(landtamer, ter, q0, np.zeros(landtamer.nv),
                             np.zeros((n, 6)), dt)
    k = np.arange(n + 1)
    z_closed = -9.80665 * dt * dt * k * (k + 1) / 2  # symplectic Euler of z'' = -g
    np.testing.assert_allclose(traj.q[:, 6], z_closed, atol=1e-9)
    # the joint-acceleration solver's error is linear without contact: one Newton step from
    # its start at zero acceleration solves it
    assert np.all(traj.iterations == 1)
    np.testing.assert_allclose(traj.q[:, 4:6], 0.0, atol=1e-9)
    # the thesis' solver has no inputs without contact: no iteration at all, same fall
    thesis = simulate_dynamics(landtamer, ter, q0, np.zeros(landtamer.nv), np.zeros((n, 6)),
                               dt, solver="thesis")
    assert np.all(thesis.iterations == 0)
    np.testing.assert_allclose(thesis.q[:, 6], z_closed, atol=1e-9)


def _spatial_momentum_world(m, data, q, qdot):
    M = dyn.crba(m, data, q)
    h = M[:6] @ qdot  # whole-system momentum, body coordinates about the body origin
    R = quat_to_rot(q[0:4])
    p = q[4:7]
    lin = R @ h[3:]
    return np.concatenate([R @ h[:3] + np.cross(p, lin), lin])


@pytest.mark.parametrize("seed", range(2))
def test_momentum_and_energy_conserved_without_forces(seed):
    """Contact off, gravity off, zero-gain actuators: spatial momentum is conserved to O(dt)."""
    rng = np.random.default_rng(seed)
    m = _with_options(compile_vehicle(random_tree_spec(rng, n_links=3, n_wheels=2,
                                                       with_constraint=False)),
                      gravity=[0.0, 0.0, 0.0])
    ter = tr.flat(-100.0)
    q0 = m.neutral_state()
    qd0 = rng.normal(0, 0.5, m.nv)
    data = dyn.create_data(m)
    h0 = _spatial_momentum_world(m, data, q0, qd0)
    ke0 = 0.5 * qd0 @ dyn.crba(m, data, q0) @ qd0
    errs = []
    for dt in (2e-3, 1e-3):
        n = int(round(0.5 / dt))
        na = len(m.actuated_joints)
        traj = simulate_dynamics(m, ter, q0, qd0, np.zeros((n, na)), dt, actuator="p",
                                 actuator_params={"Kp": 0.0})
        h1 = _spatial_momentum_world(m, data, traj.q[-1], traj.qdot[-1])
        ke1 = 0.5 * traj.qdot[-1] @ dyn.crba(m, data, traj.q[-1]) @ traj.qdot[-1]
        errs.append(np.abs(h1 - h0).max() / np.abs(h0).max())
        assert ke1 == pytest.approx(ke0, rel=0.05)
    assert errs[1] < 0.05
    assert errs[1] < 0.7 * errs[0]  # first-order convergence of the drift


def test_single_step_and_fused_modes_track_full_solution(landtamer):
    ter = tr.flat()
    q0, _ = initialize_contact(landtamer, ter)
    U = np.full((50, 6), 1.0 / landtamer.wheel_radius[0])
    full = simulate_dynamics(landtamer, ter, q0, np.zeros(landtamer.nv), U, 0.04,
                             contact_model="pacejka")
    one = simulate_dynamics(landtamer, ter, q0, np.zeros(landtamer.nv), U, 0.04,
                            contact_model="pacejka", single_step=True)
    fused = simulate_dynamics(landtamer, ter, q0, np.zeros(landtamer.nv), U, 0.04,
                              contact_model="pacejka", fused_bias=True)
    assert one.iterations.max() <= 1
    assert np.linalg.norm(one.q[-1, 4:7] - full.q[-1, 4:7]) < 0.05
    assert np.linalg.norm(fused.q[-1, 4:7] - full.q[-1, 4:7]) < 1e-3  # wheels only spin


def test_actuator_torque_limit_slows_acceleration(landtamer):
    ter = tr.flat()
    q0, _ = initialize_contact(landtamer, ter)
    U = np.full((25, 6), 2.0 / landtamer.wheel_radius[0])
    ideal = simulate_dynamics(landtamer, ter, q0, np.zeros(landtamer.nv), U, 0.04)
    lim = simulate_dynamics(landtamer, ter, q0, np.zeros(landtamer.nv), U, 0.04, actuator="p",
                            actuator_params={"Kp": 1e4, "f_max": 100.0})
    motor = simulate_dynamics(landtamer, ter, q0, np.zeros(landtamer.nv), U, 0.04,
                              actuator="dc_motor",
                              actuator_params={"Kp": 1e5, "tau_stall": 200.0, "w_noload": 8.0})
    # 6 wheels x 100 N m / R limit the body's acceleration: v(1 s) <= 600 / (R m) * 1 s
    R, mtot = landtamer.wheel_radius[0], landtamer.total_mass
    assert lim.qdot[-1, 3] <= 600.0 / R / mtot * 1.0 * 1.05
    assert ideal.qdot[-1, 3] > lim.qdot[-1, 3]
    assert 0 < motor.qdot[-1, 3] < ideal.qdot[-1, 3]


def test_bad_arguments_are_named(landtamer):
    q0 = landtamer.neutral_state()
    with pytest.raises(ShapeError, match=r"commands: expected shape \(N, 6\), got \(3, 2\)"):
        simulate_dynamics(landtamer, tr.flat(), q0, np.zeros(landtamer.nv), np.zeros((3, 2)),
                          0.1)
    with pytest.raises(ParameterError, match=r"dt must be > 0 s, got -1"):
        simulate_dynamics(landtamer, tr.flat(), q0, np.zeros(landtamer.nv), np.zeros((3, 6)),
                          -1)
    with pytest.raises(ParameterError, match=r"actuator for joint 'FL' must be one of"):
        simulate_dynamics(landtamer, tr.flat(), q0, np.zeros(landtamer.nv), np.zeros((3, 6)),
                          0.1, actuator="magic")
