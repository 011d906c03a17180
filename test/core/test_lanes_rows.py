"""Lane constraint system and partitioned solve (:mod:`wmr_model.kinematics.lanes.rows`)
against the scalar float64 kernels.

States: Zoë along scalar-predicted trajectories (enhanced kinematics) over the batch's rough
terrain, as ``bench/profile_predict.py`` builds them. For each lane the scalar forward
kinematics, wheel contact, :func:`~wmr_model.kinematics.constraints.constraint_system` and
:func:`~wmr_model.kinematics.solve.solve_partitioned` (float64) are the oracle; the lane
kernels get the scalar frames and contacts rounded to float32.

Tolerances (eps = float32 eps = 1.19e-7):

* ``A``: the world positions (up to ~10 m) are rounded to float32 before the lever arms
  ``r_c - r_i`` are formed, so an entry carries ~eps times the largest position, plus a few
  eps of the rotations' rounding times the lever arm; bound ``8 eps (1 + max |p|)`` per lane.
  ``v``: the slip rows are the same float32 numbers; the Baumgarte row carries dz's and the
  product's rounding, ``4 eps |v|``.
* the solve on the lane ``A``, ``v``: the oracle is the scalar solve of the same float32
  numbers in float64; the lane solve is float64 too (same sums in the same order, fused
  multiply-adds aside), so the only differences are float64 round-off amplified by the normal
  equations' condition (< 1e-10 of the solution here) and the float32 rounding of the result
  (half an ulp): bound ``eps |x| + 1e-9 max |x|``.
* end to end (float64 oracle from unrounded frames): first-order least-squares perturbation
  bound (Golub & Van Loan, Thm 5.3.1) with the measured relative perturbation ``e`` of the
  unknown columns and right-hand side, ``|dx| <= 2 e |x| (2 k / cos t + k^2 tan t) + eps |x|``
  (``k`` the condition number of the unknown columns, ``t`` the angle between the right-hand
  side and their range); and the brief's criterion: relative error (to the lane's largest
  velocity) below 1e-4.
"""

from __future__ import annotations

import numpy as np
import pytest

from wmr_model._jit import JIT_ENABLED
from wmr_model.experiments import kinematic as ex
from wmr_model.io.vehicles import load_vehicle
from wmr_model.kinematics import api as kin
from wmr_model.kinematics.constraints import constraint_system
from wmr_model.kinematics.lanes.rows import (
    resolve_lanes,
    rows_lanes,
    solve_lanes,
    solve_lanes_workspace,
)
from wmr_model.kinematics.solve import resolve_partitioned, solve_partitioned, solve_workspace
from wmr_model.kinematics.wheel_collision import CONTACT_WS_WIDTH, wheel_contact
from wmr_model.prediction.predict import predict
from wmr_model.terrain.surface import rough
from wmr_model.vehicles.tree import forward_kinematics

pytestmark = pytest.mark.skipif(not JIT_ENABLED, reason="lane kernels need numba")

EPS = float(np.finfo(np.float32).eps)
DT = 0.04
STEPS = (0, 20, 45, 70, 95, 124)


@pytest.fixture(scope="module")
def zoe_states():
    """Zoë, the batch terrain, 6 candidates predicted by the scalar loop; per state the scalar
    frames, contacts, constraint system and solution (float64 oracle)."""
    model = load_vehicle("zoe")
    terrain = rough(0.15, 0.8, seed=0, x_range=(-10, 10), y_range=(-10, 10))
    q0, commands, _ = ex.random_twist_candidates(model, terrain, 6, DT, 5.0, seed=0)
    pr = predict(model, terrain, q0, commands, DT, fidelity="enhanced",
                 slip_params=ex.BATCH_SLIP, Qprime=ex.BATCH_QPRIME)
    m = model.kinematic_arrays()
    tg = terrain.kernel_args()
    known = kin.simulation_known(model)
    sigma = kin.DEFAULT_STABILIZATION / DT
    d = kin.create_data(model, known).kernel
    nw, nv = m.wheel_frame.shape[0], model.nv
    rng = np.random.default_rng(7)
    states = []
    for c in range(commands.shape[0]):
        for t in STEPS:
            q = pr.q[c, t]
            # float32 inputs shared by oracle and lanes: added slip and the known rates
            vc = rng.uniform(-0.05, 0.05, (nw, 2)).astype(np.float32).astype(float)
            qk = np.zeros(nv)
            qk[6 + model.actuated_joints] = commands[c, min(t, commands.shape[1] - 1)]
            qk = qk.astype(np.float32).astype(float)
            forward_kinematics(m.parent, m.jtype, m.axis, m.T0, q, d.T_world)
            wheel_contact(m, tg, d.T_world, d.T_contact, d.dz, d.contact_angle,
                          np.zeros((0, CONTACT_WS_WIDTH)))
            constraint_system(m, d, q, sigma, vc)
            qd = np.zeros(nv)
            solve_partitioned(d.A, d.v, known, qk, qd, solve_workspace(d.A.shape[0], known))
            states.append(dict(q=q.copy(), T_world=d.T_world.copy(),
                               T_contact=d.T_contact[:nw].copy(), dz=d.dz[:nw].copy(), vc=vc,
                               qk=qk, A=d.A.copy(), v=d.v.copy(), qdot=qd))
    return dict(model=model, m=m, known=known, sigma=sigma, states=states)


def _lanes(states):
    """Scalar per-state arrays stacked on a last lane axis, float32 where the lane kernels
    read them."""
    def stack(key, dtype=np.float32):
        return np.ascontiguousarray(np.stack([s[key] for s in states], axis=-1), dtype=dtype)

    T, Tc = stack("T_world", float), stack("T_contact", float)
    return dict(
        R=np.ascontiguousarray(T[:, :3, :3], dtype=np.float32),
        p=np.ascontiguousarray(T[:, :3, 3], dtype=np.float32),
        Rc=np.ascontiguousarray(Tc[:, :3, :3], dtype=np.float32),
        pc=np.ascontiguousarray(Tc[:, :3, 3], dtype=np.float32),
        dz=stack("dz"), q=stack("q"), vc=stack("vc"), qk=stack("qk"),
        A=stack("A", float), v=stack("v", float), qdot=stack("qdot", float))


def _pick(zoe_states, W, offset):
    """W distinct states (7 is prime to the 36 states), starting at ``offset``."""
    states = zoe_states["states"]
    return [states[(offset + 7 * i) % len(states)] for i in range(W)]


def _run_rows(zoe_states, L):
    m = zoe_states["m"]
    W = L["q"].shape[-1]
    nw = m.wheel_frame.shape[0]
    A = np.full((3 * nw, zoe_states["model"].nv, W), np.nan, dtype=np.float32)
    v = np.full((3 * nw, W), np.nan, dtype=np.float32)
    rows_lanes(m, L["R"], L["p"], L["Rc"], L["pc"], L["dz"], L["q"], zoe_states["sigma"], L["vc"],
               A, v)
    return A, v


def _scalar_solves(A, v, known, qk, v2=None):
    """Per lane: the scalar solve of the float32 system in float64 (and its re-solve with the
    right-hand side ``v2``): qdot (nv, W), qdot2, and the scalar workspaces."""
    rows, nv, W = A.shape
    qd = np.zeros((nv, W))
    qd2 = np.zeros((nv, W))
    wss = []
    for l in range(W):
        ws = solve_workspace(rows, known)
        x = np.zeros(nv)
        Al = np.ascontiguousarray(A[:, :, l], dtype=float)
        qkl = np.ascontiguousarray(qk[:, l], dtype=float)
        solve_partitioned(Al, np.ascontiguousarray(v[:, l], dtype=float), known, qkl, x, ws)
        qd[:, l] = x
        if v2 is not None:
            resolve_partitioned(Al, np.ascontiguousarray(v2[:, l], dtype=float), known, qkl, x,
                                ws)
            qd2[:, l] = x
        wss.append(ws)
    return qd, qd2, wss


@pytest.mark.parametrize("W, offset", [(16, 0), (5, 1)])
def test_rows_match_constraint_system(zoe_states, W, offset):
    """rows_lanes vs the scalar constraint_system (A and v), per lane."""
    L = _lanes(_pick(zoe_states, W, offset))
    A, v = _run_rows(zoe_states, L)
    assert np.all(np.isfinite(A)) and np.all(np.isfinite(v))
    pmax = np.abs(L["p"]).max(axis=(0, 1))  # (W,)
    errA = np.abs(A - L["A"]).max(axis=(0, 1))
    assert np.all(errA <= 8 * EPS * (1.0 + pmax)), (errA, pmax)
    errv = np.abs(v - L["v"])
    assert np.all(errv <= 4 * EPS * np.abs(L["v"]) + 1e-12), errv.max()
    # the slip rows are the same float32 numbers
    np.testing.assert_array_equal(v[0::3], L["vc"][:, 0])
    np.testing.assert_array_equal(v[1::3], L["vc"][:, 1])


@pytest.mark.parametrize("W, offset", [(16, 0), (5, 1)])
def test_solve_and_resolve_match_scalar(zoe_states, W, offset):
    """solve_lanes / resolve_lanes on the lane system vs the scalar solve_partitioned /
    resolve_partitioned of the same float32 numbers; and end to end vs the float64 oracle."""
    known = zoe_states["known"]
    L = _lanes(_pick(zoe_states, W, offset))
    A, v = _run_rows(zoe_states, L)
    rows, nv, _ = A.shape
    ws = solve_lanes_workspace(nv, rows, known, W)
    qdot = np.full((nv, W), np.nan, dtype=np.float32)
    assert solve_lanes(A, v, known, L["qk"], qdot, ws) == 0
    assert ws[2][1] == 1 and ws[2][2] == 0
    # a new right-hand side: enhanced kinematics' slip added to the tangential rows
    rng = np.random.default_rng(W)
    v2 = v.copy()
    v2[0::3] += rng.uniform(-0.2, 0.2, v2[0::3].shape).astype(np.float32)
    v2[1::3] += rng.uniform(-0.2, 0.2, v2[1::3].shape).astype(np.float32)
    qd, qd2, _ = _scalar_solves(A, v, known, L["qk"], v2)
    xmax = np.abs(qd).max(axis=0)
    np.testing.assert_array_equal(qdot[known], L["qk"][known])
    assert np.all(np.abs(qdot - qd) <= EPS * np.abs(qd) + 1e-9 * xmax), np.abs(qdot - qd).max()

    qdot2 = np.full((nv, W), np.nan, dtype=np.float32)
    assert resolve_lanes(A, v2, known, L["qk"], qdot2, ws) == 0
    xmax2 = np.abs(qd2).max(axis=0)
    assert np.all(np.abs(qdot2 - qd2) <= EPS * np.abs(qd2) + 1e-9 * xmax2), \
        np.abs(qdot2 - qd2).max()
    # the re-solve is the solve with the new right-hand side (the factor is that of A)
    qdot3 = np.empty_like(qdot)
    solve_lanes(A, v2, known, L["qk"], qdot3, solve_lanes_workspace(nv, rows, known, W))
    assert np.all(np.abs(qdot2 - qdot3) <= 2 * EPS * np.abs(qd2) + 1e-9 * xmax2)

    # end to end: float32 frames -> rows -> solve vs the float64 oracle
    u = ~known
    for l in range(W):
        Au, x = L["A"][:, u, l], L["qdot"][u, l]
        b = L["v"][:, l] - L["A"][:, known, l] @ L["qdot"][known, l]
        dAu = A[:, u, l].astype(float) - Au
        db = (v[:, l].astype(float) - A[:, known, l].astype(float) @ L["qk"][known, l]) - b
        s = np.linalg.svd(Au, compute_uv=False)
        k = s[0] / s[-1]
        fit = np.linalg.norm(Au @ x)
        res = np.linalg.norm(b - Au @ x)
        e = max(np.linalg.norm(dAu, 2) / s[0], np.linalg.norm(db) / np.linalg.norm(b))
        bound = 2 * e * np.linalg.norm(x) * (2 * k * np.hypot(fit, res) / fit
                                             + k * k * res / fit)
        err = np.linalg.norm(qdot[u, l] - x)
        assert err <= bound + EPS * np.linalg.norm(x), (l, err, bound)
        assert np.abs(qdot[:, l] - L["qdot"][:, l]).max() <= 1e-4 * np.abs(x).max()


def test_rank_deficient_lanes_fall_back_to_scalar(zoe_states):
    """Lanes whose normal equations fail the scalar rank test (a zero unknown column, two
    equal unknown columns) are solved and re-solved by the scalar kernels (SVD branch), the
    others by the lanes."""
    known = zoe_states["known"]
    W = 5
    L = _lanes(_pick(zoe_states, W, 2))
    A, v = _run_rows(zoe_states, L)
    rows, nv, _ = A.shape
    u = np.flatnonzero(~known)
    A[:, u[6], 1] = 0.0  # a joint column that no row sees
    A[:, u[7], 3] = A[:, u[8], 3]  # two joints that move the contacts alike
    ws = solve_lanes_workspace(nv, rows, known, W)
    qdot = np.full((nv, W), np.nan, dtype=np.float32)
    assert solve_lanes(A, v, known, L["qk"], qdot, ws) == 2
    np.testing.assert_array_equal(ws[8], [0, 1, 0, 1, 0])
    assert ws[2][2] == 2 and ws[2][3] == 2
    v2 = v.copy()
    v2[0::3] += np.float32(0.1)
    qd, qd2, wss = _scalar_solves(A, v, known, L["qk"], v2)
    for l in (1, 3):
        assert wss[l][4][1] == 0  # the scalar kernel took its SVD branch too
        # the fallback is the scalar kernel: the same numbers, rounded to float32
        np.testing.assert_array_equal(qdot[:, l], qd[:, l].astype(np.float32))
    assert np.all(np.isfinite(qdot))
    for l in (0, 2, 4):
        assert np.all(np.abs(qdot[:, l] - qd[:, l])
                      <= EPS * np.abs(qd[:, l]) + 1e-9 * np.abs(qd[:, l]).max())
    qdot2 = np.full((nv, W), np.nan, dtype=np.float32)
    assert resolve_lanes(A, v2, known, L["qk"], qdot2, ws) == 2
    for l in (1, 3):
        np.testing.assert_array_equal(qdot2[:, l], qd2[:, l].astype(np.float32))
    for l in (0, 2, 4):
        assert np.all(np.abs(qdot2[:, l] - qd2[:, l])
                      <= EPS * np.abs(qd2[:, l]) + 1e-9 * np.abs(qd2[:, l]).max())
    # a following full-rank solve clears the fallback flags; the running total stays
    L2 = _lanes(_pick(zoe_states, W, 2))
    A2, v3 = _run_rows(zoe_states, L2)
    assert solve_lanes(A2, v3, known, L2["qk"], qdot, ws) == 0
    assert ws[8].sum() == 0 and ws[2][2] == 0 and ws[2][3] == 2


def test_workspace_checks(zoe_states):
    """A workspace made for another known set or width is refused."""
    known = zoe_states["known"]
    L = _lanes(_pick(zoe_states, 5, 0))
    A, v = _run_rows(zoe_states, L)
    rows, nv, W = A.shape
    qdot = np.empty((nv, W), dtype=np.float32)
    other = known.copy()
    other[0] = True
    with pytest.raises(ValueError):
        solve_lanes(A, v, known, L["qk"], qdot, solve_lanes_workspace(nv, rows, other, W))
    with pytest.raises(ValueError):
        solve_lanes(A, v, known, L["qk"], qdot, solve_lanes_workspace(nv, rows, known, W + 1))
    with pytest.raises(ValueError):
        resolve_lanes(A, v, known, L["qk"], qdot, solve_lanes_workspace(nv, rows, known, W))
