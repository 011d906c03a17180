"""Pose uncertainty propagation (3.13), (3.22)-(3.24), (3.40)-(3.41), (3.60)-(3.63).

Checked against finite differences of the integration step, the continuous-time closed form of a
straight line, and Monte Carlo simulation injecting white body-twist noise in the same compiled
loop (NEES chi-square test and a whitened sample-covariance comparison).
"""

import math

import numpy as np
import pytest
from scipy import stats

from wmr_model import kinematics as kin
from wmr_model import parameters
from wmr_model.errors import ParameterError, ShapeError
from wmr_model.kinematics.integrate import integrate_euler
from wmr_model.kinematics.uncertainty import (
    cholesky_from_qprime,
    error_dynamics,
    from_ros_pose_covariance,
    pose_error,
    propagate_covariance,
    qprime_from_cholesky,
    qprime_from_parameters,
    qprime_names,
    to_ros_pose_covariance,
)
from wmr_model.prediction.predict import predict
from wmr_model.spatial import quat_from_euler, quat_mul, quat_to_rot, rot_axis_angle, rot_to_quat
from wmr_model.terrain import surface as tr
from wmr_model.vehicles.generators import skid_steer_spec
from wmr_model.vehicles.model import compile_vehicle


def _perturb(q, d):
    """Apply a pose error d = [dtheta (world axes); dp] to state q (left perturbation)."""
    out = q.copy()
    ang = np.linalg.norm(d[:3])
    Rd = rot_axis_angle(d[:3] / ang, ang) if ang > 0 else np.eye(3)
    out[0:4] = rot_to_quat(Rd @ quat_to_rot(q[0:4]))
    out[4:7] = q[4:7] + d[3:6]
    return out


def test_pose_error_inverts_perturbation():
    rng = np.random.default_rng(0)
    q = np.zeros(7)
    q[0:4] = quat_from_euler(0.3, -0.2, 1.0)
    q[4:7] = rng.normal(size=3)
    d = rng.normal(size=6) * 0.3
    np.testing.assert_allclose(pose_error(q, _perturb(q, d)), d, atol=1e-12)


def test_F_is_the_exact_linearization_of_the_euler_step():
    """Phi = I + F dt (3.23) equals the finite-difference Jacobian of integrate_euler."""
    rng = np.random.default_rng(1)
    q = np.zeros(7)
    q[0:4] = quat_from_euler(0.2, 0.1, -0.7)
    qdot = rng.normal(size=6)
    dt = 0.05
    F = np.empty((6, 6))
    G = np.empty((6, 6))
    error_dynamics(quat_to_rot(q[0:4]), qdot[3:6], F, G)
    nxt = np.empty(7)
    integrate_euler(q, qdot, dt, nxt)
    h = 1e-6
    Phi = np.empty((6, 6))
    for j in range(6):
        e = np.zeros(6)
        e[j] = h
        p, mm = np.empty(7), np.empty(7)
        integrate_euler(_perturb(q, e), qdot, dt, p)
        integrate_euler(_perturb(q, -e), qdot, dt, mm)
        Phi[:, j] = (pose_error(nxt, p) - pose_error(nxt, mm)) / (2 * h)
    np.testing.assert_allclose(Phi, np.eye(6) + F * dt, atol=1e-8)
    # G: body-twist noise w moves the pose by G w dt (first order; exact at zero body rate)
    qdot[:3] = 0.0
    integrate_euler(q, qdot, dt, nxt)
    Gn = np.empty((6, 6))
    for j in range(6):
        w = np.zeros(6)
        w[j] = h
        p, mm = np.empty(7), np.empty(7)
        integrate_euler(q, qdot + w, dt, p)
        integrate_euler(q, qdot - w, dt, mm)
        Gn[:, j] = (pose_error(nxt, p) - pose_error(nxt, mm)) / (2 * h * dt)
    np.testing.assert_allclose(Gn, G, atol=1e-8)


def test_straight_line_matches_continuous_closed_form():
    """v along x with white noise on wz, vx, vy: the Lyapunov solution of (3.13)."""
    v, dt, n = 1.0, 1e-3, 2000
    qwz, qvx, qvy = 0.02, 0.01, 0.004
    Q = np.diag([0, 0, qwz, qvx, qvy, 0])
    P = np.zeros((6, 6))
    F = np.empty((6, 6))
    G = np.empty((6, 6))
    for _ in range(n):
        error_dynamics(np.eye(3), np.array([v, 0, 0]), F, G)
        propagate_covariance(P, F, G, Q, dt, P)
    t = n * dt
    assert P[2, 2] == pytest.approx(qwz * t, rel=1e-12)
    assert P[3, 3] == pytest.approx(qvx * t, rel=1e-12)
    assert P[4, 2] == pytest.approx(v * qwz * t**2 / 2, rel=2e-3)
    assert P[4, 4] == pytest.approx(qvy * t + v**2 * qwz * t**3 / 3, rel=2e-3)


def _qprime():
    U = np.zeros((6, 6))
    U[2, 2], U[2, 3], U[2, 4] = 0.05, 0.01, -0.01
    U[3, 3], U[3, 4] = 0.08, 0.02
    U[4, 4] = 0.05
    return qprime_from_cholesky(U), U


@pytest.mark.parametrize("case", ["straight", "turn", "slope"])
def test_monte_carlo_matches_propagated_covariance(case):
    """>= 500 noisy runs in the batch loop vs the propagated P of the nominal run."""
    m = compile_vehicle(skid_steer_spec())
    terrain = tr.inclined_plane(0.2, 0.5) if case == "slope" else tr.flat()
    q0, _ = kin.initialize_contact(m, terrain)
    rates = {"straight": [10, 10, 10, 10], "turn": [8, 12, 8, 12], "slope": [9, 12, 9, 12]}
    dt, T, N = 0.02, 100, 800
    u = np.tile(rates[case], (T, 1)).astype(float)
    Q, U = _qprime()
    nominal = predict(m, terrain, q0, u, dt, Qprime=Q)
    P = nominal.covariance[0, -1]
    rng = np.random.default_rng({"straight": 10, "turn": 11, "slope": 12}[case])
    noise = rng.standard_normal((N, T, 6)) @ U / math.sqrt(dt)  # covariance Q'/dt per step
    runs = predict(m, terrain, q0, u, dt, process_noise=noise)
    e = pose_error(nominal.q[0, -1], runs.q[:, -1])
    lam, V = np.linalg.eigh(P)
    keep = lam > 1e-10 * lam.max()
    assert keep.sum() == 3  # noise in (wz, vx, vy) spans a 3-D tangent subspace
    # the other directions (off the terrain manifold) stay unexcited in both
    assert np.abs(e @ V[:, ~keep]).max() < 1e-3 * math.sqrt(lam.max())
    z = (e @ V[:, keep]) / np.sqrt(lam[keep])
    nees = float(np.sum(z * z))
    dof = 3 * N
    assert stats.chi2.ppf(0.005, dof) < nees < stats.chi2.ppf(0.995, dof), nees / N
    S = np.cov(z.T, bias=True)
    np.testing.assert_allclose(S, np.eye(3), atol=4 * math.sqrt(2 / N))


def test_covariance_is_in_the_loop_for_rk4_and_batches():
    m = compile_vehicle(skid_steer_spec())
    q0, _ = kin.initialize_contact(m, tr.flat())
    Q, _ = _qprime()
    P0 = np.diag([1e-4, 1e-4, 1e-3, 1e-2, 1e-2, 1e-4])
    U = np.stack([np.tile([8, 12, 8, 12], (30, 1)), np.tile([12, 8, 12, 8], (30, 1))])
    batch = predict(m, tr.flat(), q0, U, 0.05, Qprime=Q, P0=P0, integrator="rk4")
    assert batch.covariance.shape == (2, 31, 6, 6)
    np.testing.assert_array_equal(batch.covariance[:, 0], np.broadcast_to(P0, (2, 6, 6)))
    for n in range(2):
        single = predict(m, tr.flat(), q0, U[n], 0.05, Qprime=Q, P0=P0, integrator="rk4")
        np.testing.assert_allclose(batch.covariance[n], single.covariance[0], atol=1e-14)
        assert np.all(np.linalg.eigvalsh(batch.covariance[n]) > -1e-15)


def test_ros_layout_is_position_first_fixed_axes():
    rng = np.random.default_rng(4)
    A = rng.normal(size=(6, 6))
    P = A @ A.T
    c = to_ros_pose_covariance(P)
    assert c.shape == (36,)
    M = c.reshape(6, 6)
    np.testing.assert_array_equal(M[:3, :3], P[3:, 3:])  # x, y, z
    np.testing.assert_array_equal(M[3:, 3:], P[:3, :3])  # rot_x, rot_y, rot_z
    np.testing.assert_array_equal(M[:3, 3:], P[3:, :3])
    np.testing.assert_array_equal(from_ros_pose_covariance(c), P)
    batch = to_ros_pose_covariance(np.stack([P, 2 * P]))
    assert batch.shape == (2, 36)
    with pytest.raises(ShapeError, match=r"P: expected shape \(\.\.\., 6, 6\), got \(3, 3\)"):
        to_ros_pose_covariance(np.eye(3))


def test_qprime_cholesky_parametrization_and_names():
    Q, U = _qprime()
    np.testing.assert_allclose(cholesky_from_qprime(Q), U, atol=1e-15)
    names = qprime_names()
    assert len(names) == 21 and names[0] == "noise.U.wx_wx" and names[-1] == "noise.U.vz_vz"
    assert set(names) <= set(parameters.schema())
    vals = {"noise.U.wz_wz": 0.05, "noise.U.wz_vx": 0.01, "noise.U.wz_vy": -0.01,
            "noise.U.vx_vx": 0.08, "noise.U.vx_vy": 0.02, "noise.U.vy_vy": 0.05}
    np.testing.assert_allclose(qprime_from_parameters(vals), Q, atol=1e-15)
    with pytest.raises(ParameterError, match=r"noise.U.vx_wz: not a Q' Cholesky parameter"):
        qprime_from_parameters({"noise.U.vx_wz": 1.0})
    bad = U.copy()
    bad[4, 2] = 0.1
    with pytest.raises(ParameterError, match=r"U: must be upper triangular \(3.40\); U\[4, 2\]"):
        qprime_from_cholesky(bad)


def test_bad_covariance_inputs_are_named():
    m = compile_vehicle(skid_steer_spec())
    q0 = m.neutral_state()
    u = np.ones((3, 4))
    with pytest.raises(ParameterError, match="Qprime: must be symmetric"):
        predict(m, tr.flat(), q0, u, 0.1, Qprime=np.triu(np.ones((6, 6))))
    with pytest.raises(ParameterError, match="Qprime: must be positive semidefinite"):
        predict(m, tr.flat(), q0, u, 0.1, Qprime=-np.eye(6))
    with pytest.raises(ParameterError, match="P0: given without Qprime"):
        predict(m, tr.flat(), q0, u, 0.1, P0=np.eye(6))
    with pytest.raises(ShapeError, match=r"P0: expected shape \(6, 6\) or \(N, 6, 6\)"):
        predict(m, tr.flat(), q0, u, 0.1, Qprime=np.eye(6), P0=np.eye(3))


def test_quaternion_helpers_agree():
    # guards _perturb: a world-axis rotation composes on the left of the orientation
    o = quat_from_euler(0.1, 0.2, 0.3)
    d = quat_from_euler(0.0, 0.0, 0.2)
    np.testing.assert_allclose(quat_to_rot(quat_mul(d, o)), quat_to_rot(d) @ quat_to_rot(o),
                               atol=1e-14)
