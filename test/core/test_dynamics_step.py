"""Per-step algebra of the constrained dynamics (Seegmiller 2014, (2.65), (2.79)-(2.88)).

Oracles: the saddle-point system (2.65) itself, solved densely by NumPy; NumPy's Cholesky; and
the definition of linear independence for the prioritized QR of (2.66)-(2.68).
"""

from __future__ import annotations

import numpy as np
import pytest

from wmr_model.dynamics.constraints import (
    independent_rows,
    qr_column_pivoting,
    qr_priority_pivoting,
)
from wmr_model.dynamics.force_balance import StepCache
from wmr_model.dynamics.simulate import constraint_cache
from wmr_model.kinematics.solve import cholesky_factor, cholesky_solve


def _spd(rng: np.random.Generator, n: int) -> np.ndarray:
    X = rng.standard_normal((n, n))
    return X @ X.T + n * np.eye(n)


def test_cholesky_helpers_match_numpy() -> None:
    rng = np.random.default_rng(1)
    H = _spd(rng, 7)
    L = np.zeros((7, 7))
    assert cholesky_factor(H, L, 0.0)
    np.testing.assert_allclose(np.tril(L), np.linalg.cholesky(H), rtol=1e-12, atol=1e-12)
    b = rng.standard_normal(7)
    x = np.empty(7)
    cholesky_solve(L, b, x)
    np.testing.assert_allclose(x, np.linalg.solve(H, b), rtol=1e-10)
    assert not cholesky_factor(-H, L, 0.0)


@pytest.mark.parametrize("nv, nI", [(9, 5), (13, 13), (6, 0)])
def test_constraint_cache_solves_the_saddle_point_system(nv: int, nI: int) -> None:
    rng = np.random.default_rng(nv + nI)
    M = _spd(rng, nv)
    AI = rng.standard_normal((nI, nv))
    c = rng.standard_normal(nv)
    qdot = rng.standard_normal(nv)
    dt = 0.04
    out = dict(Lm=np.empty((nv, nv)), Minv_tc=np.empty(nv), W=np.empty((nv, nI)),
               Cm=np.empty((nI, nI)), Lc=np.empty((nI, nI)), Cinv=np.empty((nI, nI)),
               G=np.empty((nv, nI)), d=np.empty(nI), qd0=np.empty(nv), lam0=np.empty(nI))
    constraint_cache(M, c, AI, qdot, dt, StepCache(AI, *out.values()))
    G, Cinv, qd0, lam0 = out["G"], out["Cinv"], out["qd0"], out["lam0"]
    for _ in range(3):  # any prescribed row velocities v_I
        v = rng.standard_normal(nI)
        qdn = qd0 + G @ v
        lam = lam0 + Cinv @ v / dt
        # (2.65) with (2.61): [M A^T; A 0] [qdd; -lam] = [tau - c; b], tau = 0
        K = np.block([[M, AI.T], [AI, np.zeros((nI, nI))]])
        rhs = np.concatenate([-c, (v - AI @ qdot) / dt])
        sol = np.linalg.solve(K, rhs)
        np.testing.assert_allclose(qdn, qdot + dt * sol[:nv], rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(lam, -sol[nv:], rtol=1e-9, atol=1e-9)
    if nI:
        np.testing.assert_allclose(Cinv @ (AI @ np.linalg.solve(M, AI.T)), np.eye(nI),
                                   atol=1e-9)


def test_priority_pivoting_keeps_leading_columns() -> None:
    rng = np.random.default_rng(3)
    B = rng.standard_normal((4, 6))
    B[:, 0] *= 1e-3  # small leading column: plain pivoting would take it last
    B[:, 1] = 2.0 * B[:, 0]  # dependent on the first
    piv0, piv1 = np.empty(6, np.int64), np.empty(6, np.int64)
    d_plain = qr_column_pivoting(B.copy(), piv0)
    d_plain0 = qr_priority_pivoting(B.copy(), piv1, 0, 0.0)
    np.testing.assert_array_equal(d_plain, d_plain0)
    np.testing.assert_array_equal(piv0, piv1)
    assert 0 not in piv0[:4] and 1 not in piv0[:4]
    d = qr_priority_pivoting(B.copy(), piv1, 2, 1e-9)
    assert piv1[0] in (0, 1) and piv1[1] not in (0, 1)  # one of the pair, then the rest
    # four independent pivots: the dependent twin of the leading column was not taken
    assert np.sum(np.abs(d) > 1e-9 * np.abs(d).max()) == 4


def test_independent_rows_prefers_forced_general_rows() -> None:
    # nv 3; rows: two "wheel" rows, one forced closure row equal to the first wheel row, one
    # ideal actuator unit row on column 2 (left out with its column).
    A = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [2.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    active = np.ones(4, bool)
    cols = np.array([True, True, False])
    forced = np.array([False, False, True, True])
    indep = np.zeros(4, bool)
    n = independent_rows(A, active, cols, forced, indep)
    assert n == 3
    np.testing.assert_array_equal(indep, [False, True, True, True])
    # unforced, plain pivoting keeps one of the dependent pair
    n = independent_rows(A, active, cols, np.array([False, False, False, True]), indep)
    assert n == 3 and indep[1] and indep[3] and indep[0] != indep[2]
    # a forced row with only round-off off the left-out column is dependent, not an actuator
    A2 = np.vstack([A, [0.0, 0.0, 1e-17]])
    indep = np.zeros(5, bool)
    n = independent_rows(A2, np.ones(5, bool), cols, np.array([0, 0, 0, 1, 1], bool), indep)
    assert n == 3 and not indep[4]
