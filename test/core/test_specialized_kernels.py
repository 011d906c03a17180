"""Per-vehicle specialized kernels (issue 22, option b): the generated least-squares solve of
kinematics and the generated elimination of the dynamics' Newton step.

:mod:`wmr_model.kinematics.specialized` compiles the partitioned solve (2.37)-(2.38) with a
vehicle's row count and known set fixed. The oracle is the generic kernel
(:func:`wmr_model.kinematics.solve.solve_partitioned`): same operations in the same order, so
the solutions, the kept factor (reused by :func:`resolve_partitioned`) and whole simulated
trajectories must be identical bit for bit. Where the specialization cannot solve (rank
deficient, other sizes) it must decline and leave the generic kernel's result. Likewise the
Gaussian elimination of :func:`wmr_model.dynamics.joint_acceleration.solve_in_place`.
"""

from __future__ import annotations

import numpy as np
import pytest

from wmr_model._jit import JIT_ENABLED, NO_KERNEL, njit, wait_for_kernels
from wmr_model.dynamics.joint_acceleration import (
    eliminate,
    solve_in_place,
    specialized_elimination,
)
from wmr_model.dynamics.model import DynamicsOptions
from wmr_model.experiments import kinematic as ex
from wmr_model.io.vehicles import load_vehicle
from wmr_model.kinematics import api as kin
from wmr_model.kinematics import specialized as SP
from wmr_model.kinematics.solve import (
    resolve_partitioned,
    resolve_partitioned_with,
    solve_partitioned,
    solve_partitioned_with,
    solve_workspace,
)
from wmr_model.prediction.predict import predict
from wmr_model.terrain.surface import rough

pytestmark = pytest.mark.skipif(not JIT_ENABLED, reason="specialized kernels need numba "
                                "(the plain-Python build runs the generic kernels only)")


def _system(seed: int, m: int = 12, nv: int = 13, n_known: int = 4, rank_deficient=False):
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(m, nv))
    A[rng.random((m, nv)) < 0.3] = 0.0  # exact zeros, skipped by both kernels
    known = np.zeros(nv, dtype=bool)
    known[rng.choice(nv, n_known, replace=False)] = True
    qk = rng.normal(size=nv)
    qk[rng.random(nv) < 0.3] = 0.0  # zero commands skip their column in (2.37)
    if rank_deficient:
        u = np.flatnonzero(~known)
        A[:, u[1]] = 2.0 * A[:, u[0]]
    return A, rng.normal(size=m), known, qk


@pytest.mark.parametrize("residual", [False, True])
@pytest.mark.parametrize("shape", [(12, 13, 4), (6, 8, 2), (21, 15, 3), (9, 7, 0)])
@pytest.mark.parametrize("seed", range(3))
def test_specialized_solve_is_the_generic_solve_bit_for_bit(seed, shape, residual):
    m, nv, nk = shape
    A, v, known, qk = _system(seed, m, nv, nk)
    address = SP.specialized_solve(m, known, wait=True)
    assert address != SP.GENERIC
    ws_g, ws_s = solve_workspace(m, known, residual), solve_workspace(m, known, residual)
    q_g, q_s = np.full(nv, np.nan), np.full(nv, np.nan)
    r_g = solve_partitioned(A, v, known, qk, q_g, ws_g)
    r_s = solve_partitioned_with(address, A, v, known, qk, q_s, ws_s)
    assert np.array_equal(q_g, q_s)
    assert (np.isnan(r_g) and np.isnan(r_s)) if not residual else r_g == r_s
    (idx_g, rhs_g, N_g, _, info_g), (idx_s, rhs_s, N_s, _, info_s) = ws_g, ws_s
    nu = nv - nk  # what the re-solve reads: index set, right-hand side, factor, flags
    assert np.array_equal(idx_g[:nu], idx_s[:nu]) and np.array_equal(rhs_g, rhs_s)
    assert np.array_equal(np.tril(N_g), np.tril(N_s)) and np.array_equal(info_g, info_s)
    # the kept factor re-solves as the generic one does (enhanced kinematics' second solve)
    v2 = np.random.default_rng(seed + 10).normal(size=m)
    q2_g, q2_s = np.empty(nv), np.empty(nv)
    resolve_partitioned(A, v2, known, qk, q2_g, ws_g)
    resolve_partitioned(A, v2, known, qk, q2_s, ws_s)
    assert np.array_equal(q2_g, q2_s)
    # the specialized re-solve too, on the factor either kernel kept
    q3_s = np.full(nv, np.nan)
    assert SP.try_specialized_solve(address, A, v2, qk, q3_s, ws_g, 1) == 1
    assert np.array_equal(q2_g, q3_s)
    r3_g = resolve_partitioned(A, v2, known, qk, q2_g, ws_g)
    r3_s = resolve_partitioned_with(address, A, v2, known, qk, q3_s, ws_s)
    assert np.array_equal(q2_g, q3_s) and (r3_g == r3_s or (np.isnan(r3_g) and np.isnan(r3_s)))
    # and the least-squares solution it is
    x = np.linalg.lstsq(A[:, ~known], v - A[:, known] @ qk[known], rcond=None)[0]
    np.testing.assert_allclose(q_s[~known], x, rtol=0, atol=1e-9)


def test_rank_deficient_and_foreign_sizes_fall_back_to_the_generic_kernel():
    A, v, known, qk = _system(1, rank_deficient=True)
    nv = A.shape[1]
    address = SP.specialized_solve(A.shape[0], known, wait=True)
    ws_g, ws_s = solve_workspace(A.shape[0], known), solve_workspace(A.shape[0], known)
    q_g, q_s = np.empty(nv), np.empty(nv)
    solve_partitioned(A, v, known, qk, q_g, ws_g)
    # the specialized kernel declines (no positive-definite factor) ...
    assert SP.try_specialized_solve(address, A, v, qk, q_s, ws_s) == 0
    # ... and the dispatching solve then gives the generic (SVD) result
    solve_partitioned_with(address, A, v, known, qk, q_s, ws_s)
    assert np.array_equal(q_g, q_s) and ws_s[4][1] == 0
    # no factor kept: the specialized re-solve declines, the generic (SVD) one answers
    assert SP.try_specialized_solve(address, A, v, qk, q_s, ws_s, 1) == 0
    q_r, q_rg = np.empty(nv), np.empty(nv)
    resolve_partitioned_with(address, A, v, known, qk, q_r, ws_s)
    resolve_partitioned(A, v, known, qk, q_rg, ws_g)
    assert np.array_equal(q_r, q_rg)
    # a specialization for 12 rows refuses a 15-row system instead of reading past it
    A15, v15, _, _ = _system(2, m=15)
    assert SP.try_specialized_solve(address, A15, v15, qk, q_s,
                                    solve_workspace(15, known)) == 0
    # and a workspace made for another unknown count (its factor is another size)
    other = known.copy()
    other[np.flatnonzero(~known)[0]] = True
    assert SP.try_specialized_solve(address, A, v, qk, q_s, solve_workspace(12, other)) == 0


def test_specializations_are_cached_and_bounded():
    known = np.zeros(13, dtype=bool)
    known[[7, 8, 11, 12]] = True
    assert (SP.specialized_solve(12, known, wait=True)
            == SP.specialized_solve(12, known.copy(), wait=True))
    assert SP.specialized_solve(12, known, wait=True) != SP.specialized_solve(15, known, wait=True)
    assert SP.specialized_solve(12, np.ones(13, dtype=bool)) == SP.GENERIC  # nothing to solve
    big = np.zeros(SP.MAX_SPECIALIZED_UNKNOWNS + 7, dtype=bool)
    big[:6] = True
    assert SP.specialized_solve(40, big) == SP.GENERIC


@pytest.mark.parametrize("vehicle", ["zoe", "rocky7", "warthog", "crusher"])
def test_simulation_and_prediction_are_unchanged_by_the_specialization(vehicle, monkeypatch):
    """Whole runs through the compiled loops, with the vehicle's specialized solve and with the
    generic kernel only (GENERIC): identical states, covariances and margins."""
    model = load_vehicle(vehicle)
    terrain = rough(0.08, 0.8, seed=3, x_range=(-4, 8), y_range=(-6, 6))
    q0, _ = kin.initialize_contact(model, terrain)
    u = np.tile(ex.straight_wheel_rates(model, 1.0), (60, 1))
    U = np.stack([u * s for s in (0.6, 1.0, 1.4)])
    kw = dict(fidelity="enhanced", slip_params=ex.BATCH_SLIP, Qprime=ex.BATCH_QPRIME)
    m = model.kinematic_arrays()
    assert SP.model_solve(m, kin.simulation_known(model), wait=True) != SP.GENERIC
    predict(model, terrain, q0, U[:, :2], 0.04, **kw)  # its known set's kernel too
    wait_for_kernels()
    runs = []
    for generic in (False, True):
        if generic:
            monkeypatch.setattr(kin, "model_solve", lambda m, known: SP.GENERIC)
            monkeypatch.setattr("wmr_model.prediction.predict.model_solve",
                                lambda m, known: SP.GENERIC)
        tr = kin.simulate(model, terrain, q0, u, 0.04)
        pr = predict(model, terrain, q0, U, 0.04, **kw)
        runs.append((tr.q, tr.qdot, pr.q, pr.covariance, pr.stability_margin))
    for a, b in zip(*runs):
        assert np.array_equal(a, b, equal_nan=True)
    assert np.isfinite(runs[0][0]).all()


@njit
def _eliminate(J, b, address):
    return eliminate(J, b, address)


@pytest.mark.parametrize("n", [1, 4, 9, 13])
@pytest.mark.parametrize("seed", range(3))
def test_specialized_elimination_is_the_generic_one_bit_for_bit(n, seed):
    """The Newton step's Gaussian elimination (joint-acceleration force balance), generated
    for n free columns: the same partial pivoting and row operations, so the same solution;
    on a singular system the same failure, with the same partly eliminated arrays."""
    rng = np.random.default_rng(seed)
    address = specialized_elimination(n, wait=True)
    assert address != NO_KERNEL
    for singular in (False, True):
        J = rng.normal(size=(n, n))
        J[rng.random((n, n)) < 0.2] = 0.0  # exact zeros: multipliers of 0 are skipped
        if singular:
            J[:, -1] = 0.0
        b = rng.normal(size=n)
        Jg, bg, Js, bs = J.copy(), b.copy(), J.copy(), b.copy()
        ok_g = solve_in_place(Jg, bg)
        ok_s = _eliminate(Js, bs, address)
        assert ok_g == ok_s == (not singular)
        assert np.array_equal(Jg, Js) and np.array_equal(bg, bs)
        if not singular:
            np.testing.assert_allclose(J @ bs, b, atol=1e-9 * max(1.0, np.abs(J).max()))
    # a kernel for n refuses another size; the generic elimination then runs
    m = n + 1
    J = rng.normal(size=(m, m)) + m * np.eye(m)
    b = rng.normal(size=m)
    Jg, bg, Js, bs = J.copy(), b.copy(), J.copy(), b.copy()
    solve_in_place(Jg, bg)
    assert _eliminate(Js, bs, address)
    assert np.array_equal(bg, bs)


def test_zoe_uses_its_specialized_elimination():
    from wmr_model.dynamics.model import compile_dynamics

    zoe = load_vehicle("zoe")
    specialized_elimination(9, wait=True)
    dm, _ = compile_dynamics(zoe, 0.04)
    assert dm.opt.acceleration and dm.opt.elimination == specialized_elimination(9)
    dm, _ = compile_dynamics(zoe, 0.04, DynamicsOptions(solver="thesis"))
    assert dm.opt.elimination == NO_KERNEL


_FIRST_USE = """
import json
from wmr_model.dynamics.joint_acceleration import specialized_elimination
from wmr_model._jit import wait_for_kernels
first = specialized_elimination(3)
wait_for_kernels()
print(json.dumps({"first": first, "ready": specialized_elimination(3)}))
"""


def test_a_specialized_kernel_compiles_in_the_background_once_then_loads_from_disk(tmp_path):
    """As a node meets it: in a process with an empty cache the first request returns the
    generic kernel (0) at once while the kernel compiles on a thread; after that the kernel is
    there. A second process finds it in the disk cache and gets it on the first request."""
    import json
    import os
    import subprocess
    import sys

    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path))
    env.pop("NUMBA_CACHE_DIR", None)
    runs = []
    for _ in range(2):
        res = subprocess.run([sys.executable, "-c", _FIRST_USE], env=env, capture_output=True,
                             text=True, timeout=600)
        assert res.returncode == 0, res.stderr[-3000:]
        runs.append(json.loads(res.stdout.strip().splitlines()[-1]))
    cold, warm = runs
    assert cold["first"] == NO_KERNEL and cold["ready"] != NO_KERNEL
    assert warm["first"] != NO_KERNEL
    generated = list((tmp_path / "wmr_model" / "specialized").glob("wmr_specialized_*.py"))
    assert len(generated) == 1
    assert list((tmp_path / "wmr_model" / "specialized" / "__pycache__").glob("*.nbi"))


_PURE_PYTHON = """
import json
import numpy as np
from wmr_model.dynamics.joint_acceleration import specialized_elimination
from wmr_model.io.vehicles import load_vehicle
from wmr_model.kinematics import api as kin
from wmr_model.kinematics.specialized import model_solve
from wmr_model.prediction.controllers import straight_wheel_rates
from wmr_model.terrain.surface import rough
m = load_vehicle("zoe")
t = rough(0.1, 0.5, seed=2, x_range=(-2, 3), y_range=(-2, 2))
q0 = kin.initialize_contact(m, t)[0]
tr = kin.simulate(m, t, q0, np.tile(straight_wheel_rates(m, 1.0), (3, 1)), 0.04)
print(json.dumps({"solve": model_solve(m.kinematic_arrays(), kin.simulation_known(m)),
                  "elimination": specialized_elimination(9), "q": tr.q[-1].tolist()}))
"""


def test_numbas_own_disable_jit_runs_the_generic_kernels():
    """With numba's NUMBA_DISABLE_JIT the kernels run as Python: no specialized kernel can be
    called there, so none is handed out, and a simulation gives the compiled one's states."""
    import json
    import os
    import subprocess
    import sys

    res = subprocess.run([sys.executable, "-c", _PURE_PYTHON],
                         env=dict(os.environ, NUMBA_DISABLE_JIT="1"), capture_output=True,
                         text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["solve"] == SP.GENERIC and out["elimination"] == NO_KERNEL
    m = load_vehicle("zoe")
    t = rough(0.1, 0.5, seed=2, x_range=(-2, 3), y_range=(-2, 2))
    q0 = kin.initialize_contact(m, t)[0]
    from wmr_model.prediction.controllers import straight_wheel_rates

    tr = kin.simulate(m, t, q0, np.tile(straight_wheel_rates(m, 1.0), (3, 1)), 0.04)
    np.testing.assert_allclose(out["q"], tr.q[-1], rtol=0, atol=1e-9)
