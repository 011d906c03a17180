"""Composite rigid-body inertia (Alg. 3 backward pass) against a direct sum over frames."""

import numpy as np
import pytest

from wmr_model import kinematics as kin
from wmr_model.errors import ShapeError
from wmr_model.spatial import (
    plucker_force_from_transform,
    quat_from_euler,
    quat_to_rot,
    skew,
    spatial_inertia,
)
from wmr_model.vehicles.generators import random_tree_spec, skid_steer_spec
from wmr_model.vehicles.inertia import (
    add_child_inertia,
    composite_inertia,
    inertia_mass_com,
    model_frame_inertias,
)
from wmr_model.vehicles.model import compile_vehicle


def _random_state(model, rng):
    q = np.zeros(model.nq)
    q[0:4] = quat_from_euler(*rng.uniform(-0.5, 0.5, 3))
    q[4:7] = rng.normal(size=3)
    q[7:] = rng.uniform(-0.8, 0.8, model.nj)
    return q


def _direct_sum(model, q):
    """Whole-vehicle inertia about the body origin by the parallel-axis theorem, no recursion."""
    T = kin.forward_kinematics(model, kin.create_data(model), q)
    Tb_inv = np.linalg.inv(T[0])
    M = 0.0
    first = np.zeros(3)
    I_o = np.zeros((3, 3))
    for i in range(model.nf):
        Tib = Tb_inv @ T[i]
        R, p = Tib[:3, :3], Tib[:3, 3]
        r = p + R @ model.com[i]
        m = model.mass[i]
        M += m
        first += m * r
        I_o += R @ model.inertia[i] @ R.T + m * ((r @ r) * np.eye(3) - np.outer(r, r))
    c = first / M
    out = np.zeros((6, 6))
    out[:3, :3] = I_o
    out[:3, 3:] = M * skew(c)
    out[3:, :3] = M * skew(c).T
    out[3:, 3:] = M * np.eye(3)
    return out, M, c


@pytest.mark.parametrize("seed", range(6))
def test_composite_inertia_equals_direct_sum(seed):
    rng = np.random.default_rng(seed)
    m = compile_vehicle(random_tree_spec(rng, n_links=5, n_wheels=3, prismatic_fraction=0.4))
    q = _random_state(m, rng)
    Ic = composite_inertia(m, q)
    expected, M, c = _direct_sum(m, q)
    np.testing.assert_allclose(Ic, expected, atol=1e-11 * np.abs(expected).max())
    mass, com = inertia_mass_com(Ic)
    assert mass == pytest.approx(M, rel=1e-14)
    np.testing.assert_allclose(com, c, atol=1e-12)


@pytest.mark.parametrize("seed", range(4))
def test_child_inertia_in_structured_form_is_the_6x6_product(seed):
    """Alg. 3 line 3 as evaluated (``add_child_inertia``: the structure of a spatial inertia)
    against the 6 x 6 product with the force transform (B.12) of ``[R, t; 0, 1]``: the same
    to round-off (the bound the README states), for children of any mass, centre of mass,
    inertia and placement, added to a parent that already holds an inertia."""
    rng = np.random.default_rng(seed)
    Ic = np.empty((2, 6, 6))
    RA, g = np.empty((3, 3)), np.empty(3)
    worst = 0.0
    for _ in range(200):
        L = rng.normal(size=(3, 3))
        child = spatial_inertia(rng.uniform(0.1, 200.0), rng.normal(scale=0.5, size=3),
                                L @ L.T + 0.01 * np.eye(3))
        L = rng.normal(size=(3, 3))
        parent = spatial_inertia(rng.uniform(0.1, 200.0), rng.normal(scale=0.5, size=3),
                                 L @ L.T + 0.01 * np.eye(3))
        quat = rng.normal(size=4)
        R = quat_to_rot(quat / np.linalg.norm(quat))
        t = rng.normal(scale=1.5, size=3)
        T = np.eye(4)
        T[:3, :3] = R
        T[:3, 3] = t
        Xf = plucker_force_from_transform(T)
        expected = parent + Xf @ child @ Xf.T
        Ic[0], Ic[1] = parent, child
        add_child_inertia(Ic, 1, 0, R, t, RA, g)
        worst = max(worst, np.abs(Ic[0] - expected).max() / np.abs(expected).max())
        np.testing.assert_array_equal(Ic[0], Ic[0].T)  # symmetric by construction
        np.testing.assert_array_equal(Ic[1], child)  # the child is only read
    assert worst < 1e-14


def test_composite_inertia_is_symmetric_psd_and_independent_of_body_pose():
    rng = np.random.default_rng(7)
    m = compile_vehicle(random_tree_spec(rng, n_links=4, n_wheels=4))
    q = _random_state(m, rng)
    Ic = composite_inertia(m, q)
    np.testing.assert_allclose(Ic, Ic.T, atol=1e-12)
    assert np.linalg.eigvalsh(Ic).min() > 0
    q2 = q.copy()
    q2[0:4] = quat_from_euler(1.0, -0.4, 2.0)
    q2[4:7] = [5.0, -3.0, 1.0]
    np.testing.assert_allclose(composite_inertia(m, q2), Ic, atol=1e-12)


def test_every_subtree_composite_and_leaves():
    """Each I_i^c is its subtree's direct sum, expressed in frame i; leaves are their own."""
    rng = np.random.default_rng(3)
    m = compile_vehicle(random_tree_spec(rng, n_links=4, n_wheels=3))
    q = _random_state(m, rng)
    out = np.empty((m.nf, 6, 6))
    composite_inertia(m, q, out=out)
    I_frame = model_frame_inertias(m)
    children = {i: [j for j in range(m.nf) if m.parent[j] == i] for i in range(m.nf)}
    T = kin.forward_kinematics(m, kin.create_data(m), q)
    for i in range(m.nf):
        if not children[i]:
            np.testing.assert_allclose(out[i], I_frame[i], atol=1e-14)
        # mass of the subtree
        sub, stack = [], [i]
        while stack:
            k = stack.pop()
            sub.append(k)
            stack += children[k]
        assert out[i][5, 5] == pytest.approx(m.mass[sub].sum(), rel=1e-13)
        mass, com = inertia_mass_com(out[i])
        world_com = sum(m.mass[k] * (T[k, :3, :3] @ m.com[k] + T[k, :3, 3]) for k in sub) / mass
        np.testing.assert_allclose(T[i, :3, :3] @ com + T[i, :3, 3], world_com, atol=1e-12)


def test_rigid_skid_steer_closed_form():
    m = compile_vehicle(skid_steer_spec(wheelbase=0.8, track=1.0, mass=20.0, wheel_mass=1.0))
    Ic = composite_inertia(m, m.neutral_state())
    assert Ic[5, 5] == pytest.approx(24.0)
    # wheels at (+-0.4, +-0.5, 0): Izz gains sum m (x^2 + y^2) = 4 * 0.41
    box_zz = 20.0 / 12.0 * (0.8**2 + 1.0**2)
    wheel_zz = 1.0 * (3 * 0.1**2 + 0.1**2) / 12.0
    assert Ic[2, 2] == pytest.approx(box_zz + 4 * (wheel_zz + 0.41), rel=1e-12)
    np.testing.assert_allclose(Ic[:3, 3:], 0, atol=1e-14)


def test_shape_error_is_named():
    m = compile_vehicle(skid_steer_spec())
    with pytest.raises(ShapeError, match=r"q: expected shape \(11,\) for skid, got \(3,\)"):
        composite_inertia(m, np.zeros(3))
