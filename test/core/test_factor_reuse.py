"""Factor reuse in the velocity solve (2.37)-(2.38): the solve workspace and the re-solve.

:func:`solve_partitioned` keeps the index set and Cholesky factor of its solve in its workspace;
:func:`resolve_partitioned` solves the same ``A`` and known set again for a new right-hand side
by back substitution only. The oracle is a fresh solve of the same system: the results must be
identical bit for bit (same sums in the same order), in the full-rank (Cholesky) and the
rank-deficient (SVD fallback) cases, and inside enhanced kinematics (2.44)-(2.52).
"""

from __future__ import annotations

import numpy as np
import pytest

from wmr_model.experiments import kinematic as ex
from wmr_model.io.vehicles import load_vehicle
from wmr_model.kinematics import api as kin
from wmr_model.kinematics import enhanced as E
from wmr_model.kinematics.solve import resolve_partitioned, solve_partitioned, solve_workspace
from wmr_model.kinematics.wheel_collision import contact_workspace
from wmr_model.terrain.surface import rough
from wmr_model.vehicles.inertia import model_frame_inertias


def _system(seed, rank_deficient=False):
    rng = np.random.default_rng(seed)
    m, nv = 12, 13
    A = rng.normal(size=(m, nv))
    A[rng.random((m, nv)) < 0.3] = 0.0  # structural zeros, as in the stacked wheel rows
    known = np.zeros(nv, dtype=bool)
    known[rng.choice(nv, 4, replace=False)] = True
    if rank_deficient:  # two equal unknown columns: A[:, unknown] loses a rank
        u = np.flatnonzero(~known)
        A[:, u[1]] = A[:, u[0]]
    qk = rng.normal(size=nv)
    return A, rng.normal(size=m), known, qk, rng.normal(size=m)


@pytest.mark.parametrize("rank_deficient", [False, True])
@pytest.mark.parametrize("seed", range(4))
def test_resolve_is_a_fresh_solve_exactly(seed, rank_deficient):
    A, v, known, qk, v2 = _system(seed, rank_deficient)
    nv = A.shape[1]
    ws = solve_workspace(A.shape[0], known)
    q_ws, q_fresh, q_re, q_re_fresh = (np.empty(nv) for _ in range(4))
    res_ws = solve_partitioned(A, v, known, qk, q_ws, ws)
    res_fresh = solve_partitioned(A, v, known, qk, q_fresh)
    assert np.array_equal(q_ws, q_fresh) and res_ws == res_fresh
    assert ws[4][1] == (0 if rank_deficient else 1)  # factor kept, or the SVD fallback marked
    res_re = resolve_partitioned(A, v2, known, qk, q_re, ws)
    res_re_fresh = solve_partitioned(A, v2, known, qk, q_re_fresh)
    assert np.array_equal(q_re, q_re_fresh) and res_re == res_re_fresh
    # and it is the least-squares solution of (2.37)-(2.38)
    x = np.linalg.lstsq(A[:, ~known], v2 - A[:, known] @ qk[known], rcond=1e-10)[0]
    np.testing.assert_allclose(q_re[~known], x, rtol=0, atol=1e-9)
    np.testing.assert_array_equal(q_re[known], qk[known])


def test_workspace_for_another_known_set_is_refused():
    A, v, known, qk, _ = _system(0)
    other = known.copy()
    other[np.flatnonzero(~known)[0]] = True
    ws = solve_workspace(A.shape[0], other)
    with pytest.raises(ValueError, match="known set"):
        solve_partitioned(A, v, known, qk, np.empty(A.shape[1]), ws)


@pytest.mark.parametrize("name", ["zoe", "absolem"])
def test_enhanced_second_solve_equals_a_fresh_solve(name):
    """The enhanced step's final qdot is the fresh solve of its final (A, v), bit for bit."""
    m = load_vehicle(name)
    terrain = rough(0.05, 0.2, 3, (-2, 8), (-3, 3))
    q0, _ = kin.initialize_contact(m, terrain)
    tr = kin.simulate(m, terrain, q0, np.tile(np.full(len(m.actuated_joints), 2.0), (20, 1)),
                      0.02)
    known = kin.simulation_known(m)
    d = kin.create_data(m)
    qk = np.zeros(m.nv)
    qk[6 + m.actuated_joints] = 2.0
    gravity = np.array([0.0, 0.0, -9.81])
    for q in tr.q[::5]:
        kd = d.kernel._replace(contact_ws=contact_workspace(m.nw),
                               enhanced_ws=E.enhanced_workspace(),
                               solve_ws=solve_workspace(d.A.shape[0], known))
        E.enhanced_joint_space_velocity(
            m.kinematic_arrays(), terrain.kernel_args(), kd, q, known, qk, 12.5,
            np.zeros((m.nc, 2)), d.qdot,
            E.BodySlip(model_frame_inertias(m), gravity, ex.BATCH_SLIP, E.slip_axes_array(),
                       True))
        fresh = np.empty(m.nv)
        solve_partitioned(d.A, d.v, known, qk, fresh)
        assert np.array_equal(d.qdot, fresh)
