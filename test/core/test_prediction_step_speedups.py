"""Per-step shortcuts of the prediction loop keep the general kernels' results (issue 10).

* :func:`propagate_pose_covariance` uses the sparsity of F and G from :func:`error_dynamics`
  (3.60)-(3.63); it gives the general kernel's result, error_dynamics then
  :func:`propagate_covariance` (3.22)-(3.24), exactly, for any attitude, velocity, full
  (non-diagonal) spectral density and covariance, over repeated steps and in place.
* A solve workspace made with ``residual=False`` (the loops' own) gives the same velocity and
  factor, and NaN in place of the residual norm it skips.
"""

import numpy as np
import pytest

from wmr_model.kinematics.solve import resolve_partitioned, solve_partitioned, solve_workspace
from wmr_model.kinematics.uncertainty import (
    covariance_workspace,
    error_dynamics,
    propagate_covariance,
    propagate_pose_covariance,
)
from wmr_model.spatial import quat_to_rot


def _spd(rng, n, scale):
    A = rng.normal(0, scale, (n, n))
    return A @ A.T


@pytest.mark.parametrize("seed", range(5))
def test_structured_step_equals_general_step(seed):
    rng = np.random.default_rng(seed)
    Q = _spd(rng, 6, 0.05)
    P_general = _spd(rng, 6, 0.1)
    P_struct = P_general.copy()
    F, G = np.zeros((6, 6)), np.zeros((6, 6))
    ws1, ws2 = covariance_workspace(), covariance_workspace()
    for _ in range(50):
        o = rng.normal(size=4)
        Rb = quat_to_rot(o / np.linalg.norm(o))
        v = rng.normal(0, 2.0, 3)
        dt = rng.uniform(0.001, 0.2)
        error_dynamics(Rb, v, F, G)
        propagate_covariance(P_general, F, G, Q, dt, P_general, ws1)
        propagate_pose_covariance(P_struct, Rb, v, Q, dt, P_struct, ws2)
        assert np.array_equal(P_general, P_struct)


def test_structured_step_from_zero_and_separate_output():
    Q = np.diag([1e-4, 1e-4, 4e-3, 1e-2, 2e-3, 1e-4])
    Rb = quat_to_rot(np.array([0.9, 0.1, -0.3, 0.2]) / np.linalg.norm([0.9, 0.1, -0.3, 0.2]))
    v = np.array([1.0, -0.2, 0.05])
    F, G = np.zeros((6, 6)), np.zeros((6, 6))
    error_dynamics(Rb, v, F, G)
    P = np.zeros((6, 6))
    a, b = np.empty((6, 6)), np.empty((6, 6))
    propagate_covariance(P, F, G, Q, 0.04, a)
    propagate_pose_covariance(P, Rb, v, Q, 0.04, b, covariance_workspace())
    assert np.array_equal(a, b) and np.array_equal(P, np.zeros((6, 6)))
    assert np.array_equal(b, b.T)


@pytest.mark.parametrize("seed", range(3))
def test_solve_without_residual_gives_the_same_velocity(seed):
    rng = np.random.default_rng(seed)
    m, nv = 12, 13
    A = rng.normal(size=(m, nv))
    A[rng.random((m, nv)) < 0.3] = 0.0
    known = np.zeros(nv, dtype=bool)
    known[[7, 8, 11, 12]] = True
    qk = rng.normal(size=nv)
    v1, v2 = rng.normal(size=m), rng.normal(size=m)
    out = []
    for residual in (True, False):
        ws = solve_workspace(m, known, residual)
        qdot = np.zeros(nv)
        r1 = solve_partitioned(A, v1, known, qk, qdot, ws)
        q1 = qdot.copy()
        r2 = resolve_partitioned(A, v2, known, qk, qdot, ws)
        out.append((r1, q1, r2, qdot.copy(), np.tril(ws[2])))  # the factor: lower triangle
    (r1, q1, r2, q2, N), (s1, p1, s2, p2, M) = out
    assert np.array_equal(q1, p1) and np.array_equal(q2, p2) and np.array_equal(N, M)
    assert np.isnan(s1) and np.isnan(s2)
    assert r1 >= 0.0 and r2 >= 0.0
