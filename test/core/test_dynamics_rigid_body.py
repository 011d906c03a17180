"""Joint-space inertia (Alg. 3) and bias force (Alg. 4, 2.89) against independent computations."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wmr_model import dynamics as dyn
from wmr_model.errors import ShapeError
from wmr_model.io.vehicles import load_vehicle, vehicle_files
from wmr_model.kinematics import integrate as K
from wmr_model.spatial import quat_from_euler
from wmr_model.vehicles.generators import random_tree_spec
from wmr_model.vehicles.model import compile_vehicle
from wmr_model.vehicles.tree import forward_kinematics


def _random_state(model, rng, spread=0.5):
    q = np.zeros(model.nq)
    q[0:4] = quat_from_euler(*rng.uniform(-spread, spread, 3))
    q[4:7] = rng.normal(size=3)
    q[7:] = rng.uniform(-spread, spread, model.nj)
    return q


def _random_model(seed, **kw):
    rng = np.random.default_rng(seed)
    return compile_vehicle(random_tree_spec(rng, **kw)), rng


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), n_links=st.integers(0, 6), n_wheels=st.integers(1, 5))
def test_mass_matrix_symmetric_positive_definite(seed, n_links, n_wheels):
    m, rng = _random_model(seed, n_links=n_links, n_wheels=n_wheels, prismatic_fraction=0.4)
    d = dyn.create_data(m)
    M = dyn.crba(m, d, _random_state(m, rng))
    np.testing.assert_allclose(M, M.T, rtol=0, atol=1e-12 * np.abs(M).max())
    assert np.linalg.eigvalsh(M).min() > 0.0


@pytest.mark.parametrize("seed", range(4))
def test_crba_columns_equal_rnea_unit_accelerations(seed):
    """M[:, k] = rnea(q, 0, e_k) - rnea(q, 0, 0): Alg. 3 against Alg. 4."""
    m, rng = _random_model(seed, n_links=5, n_wheels=3, prismatic_fraction=0.4)
    d = dyn.create_data(m)
    q = _random_state(m, rng)
    M = dyn.crba(m, d, q).copy()
    zero = np.zeros(m.nv)
    g = dyn.rnea(m, d, q, zero, zero).copy()
    for k in range(m.nv):
        e = np.zeros(m.nv)
        e[k] = 1.0
        col = dyn.rnea(m, d, q, zero, e) - g
        np.testing.assert_allclose(col, M[:, k], rtol=0, atol=1e-11 * np.abs(M).max())


def _frame_velocities_fd(m, q, qdot, h=1e-6):
    """World angular velocity and com velocity of every frame by central differences of FK."""
    qs = np.empty(m.nq)
    K.state_derivative(q, qdot, qs)
    Tp, Tm = np.empty((m.nf, 4, 4)), np.empty((m.nf, 4, 4))
    forward_kinematics(m.parent, m.joint_type, m.axis, m.T0, q + h * qs, Tp)
    forward_kinematics(m.parent, m.joint_type, m.axis, m.T0, q - h * qs, Tm)
    T = np.empty((m.nf, 4, 4))
    forward_kinematics(m.parent, m.joint_type, m.axis, m.T0, q, T)
    dT = (Tp - Tm) / (2 * h)
    w = np.empty((m.nf, 3))
    vcom = np.empty((m.nf, 3))
    for i in range(m.nf):
        W = dT[i, :3, :3] @ T[i, :3, :3].T
        w[i] = [W[2, 1], W[0, 2], W[1, 0]]
        vcom[i] = dT[i, :3, :3] @ m.com[i] + dT[i, :3, 3]
    return T, w, vcom


@pytest.mark.parametrize("seed", range(4))
def test_kinetic_energy_matches_sum_over_bodies(seed):
    """1/2 qdot' M qdot' equals sum_i 1/2 (m_i |v_com|^2 + w^T R I_com R^T w) from FK differences."""
    m, rng = _random_model(seed, n_links=4, n_wheels=3, prismatic_fraction=0.4)
    d = dyn.create_data(m)
    q = _random_state(m, rng)
    qdot = rng.normal(size=m.nv)
    M = dyn.crba(m, d, q)
    T, w, vcom = _frame_velocities_fd(m, q, qdot)
    ke = 0.0
    for i in range(m.nf):
        R = T[i, :3, :3]
        ke += 0.5 * m.mass[i] * vcom[i] @ vcom[i] + 0.5 * w[i] @ R @ m.inertia[i] @ R.T @ w[i]
    assert 0.5 * qdot @ M @ qdot == pytest.approx(ke, rel=1e-7)


@pytest.mark.parametrize("seed", range(3))
def test_fused_bias_force_exact_for_rigid_motion(seed):
    """With zero joint rates the vehicle moves as one body: (2.89) equals Alg. 4's body rows."""
    m, rng = _random_model(seed, n_links=4, n_wheels=3)
    d = dyn.create_data(m)
    q = _random_state(m, rng)
    qdot = np.zeros(m.nv)
    qdot[:6] = rng.normal(size=6)
    exact = dyn.bias_force(m, d, q, qdot).copy()
    fused = dyn.bias_force(m, d, q, qdot, fused=True)
    np.testing.assert_allclose(fused[:6], exact[:6], rtol=1e-10, atol=1e-10)
    assert np.all(fused[6:] == 0.0)


def test_free_body_gravity_is_weight():
    """Bias force at rest is the weight wrench: c[3:6] = -m R^T g at the body origin."""
    m, rng = _random_model(7, n_links=3, n_wheels=2)
    d = dyn.create_data(m)
    q = _random_state(m, rng)
    Ic = np.empty((m.nf, 6, 6))
    dyn.crba(m, d, q)
    Ic[:] = d.Ic
    c = dyn.bias_force(m, d, q, np.zeros(m.nv))
    R = d.T_world[0, :3, :3]
    np.testing.assert_allclose(c[3:6], -m.total_mass * (R.T @ d.gravity), rtol=1e-12)


def test_shape_errors_name_the_argument():
    m, _ = _random_model(1, n_links=2, n_wheels=2)
    d = dyn.create_data(m)
    with pytest.raises(ShapeError, match=rf"q: expected shape \({m.nq},\), got \(3,\)"):
        dyn.crba(m, d, np.zeros(3))
    with pytest.raises(ShapeError, match=r"qdot: expected shape"):
        dyn.rnea(m, d, m.neutral_state(), np.zeros(2), np.zeros(m.nv))
    with pytest.raises(ShapeError, match=r"f_ext: expected shape"):
        dyn.rnea(m, d, m.neutral_state(), np.zeros(m.nv), np.zeros(m.nv), np.zeros((1, 6)))


# ---- Pinocchio oracle --------------------------------------------------------------------------
# Vehicles whose URDF wheel joints already spin about +y, so the loader keeps the URDF frames and
# joint signs (diffdrive's wheels are re-expressed and are left out).
PIN_VEHICLES = ("rocky7", "zoe", "landtamer", "crusher", "recbot", "warthog", "hmmwv",
                "hmmwv_embedded")


def _pinocchio_maps(pin, pm, m, q, qdot):
    """Pinocchio q, v for our (q, qdot') and the permutation of our nv indices to its order."""
    pq = np.zeros(pm.nq)
    pv = np.zeros(pm.nv)
    pq[0:3] = q[4:7]
    pq[3:6] = q[1:4]  # Pinocchio quaternion x, y, z, w
    pq[6] = q[0]
    pv[0:3] = qdot[3:6]  # free-flyer velocity is [v; w] in the local frame; ours [w; v]
    pv[3:6] = qdot[0:3]
    perm = [3, 4, 5, 0, 1, 2]
    for jid in range(2, pm.njoints):
        j = pm.joints[jid]
        k = m.joint_index(pm.names[jid])
        if j.nq == 2:  # continuous joint stored as (cos, sin)
            pq[j.idx_q] = np.cos(q[7 + k])
            pq[j.idx_q + 1] = np.sin(q[7 + k])
        else:
            pq[j.idx_q] = q[7 + k]
        pv[j.idx_v] = qdot[6 + k]
        perm.append(6 + k)
    return pq, pv, np.array(perm)


@pytest.mark.parametrize("name", PIN_VEHICLES)
def test_mass_matrix_and_bias_match_pinocchio(name):
    pin = pytest.importorskip("pinocchio")
    m = load_vehicle(name)
    pm = pin.buildModelFromUrdf(str(vehicle_files(name)[0]), pin.JointModelFreeFlyer())
    assert pm.nv == m.nv
    pd = pm.createData()
    d = dyn.create_data(m)
    d.gravity = np.asarray(pm.gravity.linear).copy()
    rng = np.random.default_rng(42)
    for _ in range(3):
        q = _random_state(m, rng)
        qdot = rng.normal(size=m.nv)
        pq, pv, P = _pinocchio_maps(pin, pm, m, q, qdot)
        M = dyn.crba(m, d, q)[np.ix_(P, P)]
        c = dyn.bias_force(m, d, q, qdot)[P]
        Mp = pin.crba(pm, pd, pq)
        Mp = np.triu(Mp) + np.triu(Mp, 1).T
        cp = pin.nonLinearEffects(pm, pd, pq, pv)
        np.testing.assert_allclose(M, Mp, rtol=0, atol=1e-9 * np.abs(Mp).max())
        np.testing.assert_allclose(c, cp, rtol=0, atol=1e-9 * np.abs(cp).max())


def test_one_workspace_serves_kinematics_and_dynamics():
    """One ``create_data`` for every algorithm: the kinematics' forward pass and the CRBA write
    the same ``T_world`` for a state, the model's inertias and gravity are in it, and its bias
    force is the RNEA at zero acceleration."""
    from wmr_model import kinematics as kin
    from wmr_model.vehicles.inertia import model_frame_inertias

    assert dyn.create_data is kin.create_data
    m, rng = _random_model(11, n_links=4, n_wheels=4, prismatic_fraction=0.3)
    d = kin.create_data(m)
    np.testing.assert_array_equal(d.I_frame, model_frame_inertias(m))
    np.testing.assert_array_equal(d.gravity, dyn.gravity_of(m))
    q = _random_state(m, rng)
    T_kin = kin.forward_kinematics(m, d, q).copy()
    d.T_world[:] = np.nan
    dyn.crba(m, d, q)
    np.testing.assert_allclose(d.T_world, T_kin, rtol=0, atol=1e-12)
    # the bias force of the same workspace is rnea at zero acceleration (Alg. 4 both ways)
    qd = rng.normal(size=m.nv)
    c = dyn.bias_force(m, d, q, qd).copy()
    np.testing.assert_allclose(dyn.rnea(m, d, q, qd, np.zeros(m.nv)), c, rtol=0,
                               atol=1e-9 * max(1.0, np.abs(c).max()))
