"""Orientation and spatial algebra (App. A, B) against SciPy's Rotation and textbook identities."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.spatial.transform import Rotation

from wmr_model import spatial as S

angles = st.floats(-3.0, 3.0)
pitches = st.floats(-1.5, 1.5)


@given(angles, pitches, angles)
@settings(max_examples=60, deadline=None)
def test_euler_matrix_matches_elemental_product_and_scipy(r, p, y):
    R = S.euler_to_rot(r, p, y)
    np.testing.assert_allclose(R, S.rot_z(y) @ S.rot_y(p) @ S.rot_x(r), atol=1e-14)
    # intrinsic z-y'-x'' == extrinsic x-y-z in SciPy's lowercase convention
    np.testing.assert_allclose(R, Rotation.from_euler("xyz", [r, p, y]).as_matrix(), atol=1e-13)
    np.testing.assert_allclose(S.rot_to_euler(R), [r, p, y], atol=1e-9)


@given(angles, pitches, angles)
@settings(max_examples=60, deadline=None)
def test_quaternion_roundtrips_and_scipy(r, p, y):
    o = S.quat_from_euler(r, p, y)
    x, yq, z, w = Rotation.from_euler("xyz", [r, p, y]).as_quat()
    ref = np.array([w, x, yq, z])
    ref = ref if ref[0] >= 0 else -ref
    np.testing.assert_allclose(o, ref, atol=1e-13)
    np.testing.assert_allclose(S.quat_to_rot(o), S.euler_to_rot(r, p, y), atol=1e-13)
    np.testing.assert_allclose(S.rot_to_quat(S.quat_to_rot(o)), o, atol=1e-12)
    np.testing.assert_allclose(S.euler_from_quat(o), [r, p, y], atol=1e-9)


def test_rot_axis_angle_equals_elemental_and_scipy():
    rng = np.random.default_rng(1)
    for a in np.linspace(-3, 3, 7):
        np.testing.assert_allclose(S.rot_axis_angle(np.array([1.0, 0, 0]), a), S.rot_x(a), atol=1e-15)
        np.testing.assert_allclose(S.rot_axis_angle(np.array([0, 1.0, 0]), a), S.rot_y(a), atol=1e-15)
        np.testing.assert_allclose(S.rot_axis_angle(np.array([0, 0, 1.0]), a), S.rot_z(a), atol=1e-15)
        u = rng.normal(size=3)
        u /= np.linalg.norm(u)
        np.testing.assert_allclose(S.rot_axis_angle(u, a),
                                   Rotation.from_rotvec(u * a).as_matrix(), atol=1e-13)


def test_omega_matrix_maps_body_rate_to_euler_rates():
    """(A.15) against a finite difference of Euler angles under a body-frame rotation."""
    rng = np.random.default_rng(2)
    for _ in range(20):
        e = rng.uniform([-1, -1.2, -3], [1, 1.2, 3])
        w = rng.normal(size=3)
        o = S.quat_from_euler(*e)
        h = 1e-7
        e2 = S.euler_from_quat(S.quat_exp_body(o, w, h))
        fd = (e2 - e) / h
        fd[2] = (np.angle(np.exp(1j * (e2[2] - e[2])))) / h
        np.testing.assert_allclose(S.omega_euler_rates(e[0], e[1]) @ w, fd, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(
            S.omega_euler_rates_inv(e[0], e[1]) @ S.omega_euler_rates(e[0], e[1]), np.eye(3),
            atol=1e-12)


def test_quat_exp_body_matches_scipy_and_small_angle_branch():
    rng = np.random.default_rng(3)
    for scale in (1.0, 1e-10):
        o = S.quat_normalize(rng.normal(size=4))
        w = rng.normal(size=3) * scale
        dt = 0.3
        got = S.quat_to_rot(S.quat_exp_body(o, w, dt))
        ref = S.quat_to_rot(o) @ Rotation.from_rotvec(w * dt).as_matrix()
        np.testing.assert_allclose(got, ref, atol=1e-14)


def test_plucker_transform_moves_point_velocities():
    """b_v = X a_v: velocity of b's origin from a's spatial velocity (B.11), independently."""
    rng = np.random.default_rng(4)
    R = Rotation.random(random_state=5).as_matrix()
    p = rng.normal(size=3)
    T = np.eye(4)
    T[:3, :3] = R
    T[:3, 3] = p
    va = rng.normal(size=6)  # [w; v] of a point at a's origin, in a coordinates
    X = S.plucker_from_transform(T)
    vb = X @ va
    w_b = R @ va[:3]
    v_at_a_origin_b = R @ va[3:]
    # point at b's origin is at -p relative to a's origin (in b coordinates)
    np.testing.assert_allclose(vb[:3], w_b, atol=1e-14)
    np.testing.assert_allclose(vb[3:], v_at_a_origin_b + np.cross(w_b, -p), atol=1e-13)
    Xf = S.plucker_force_from_transform(T)
    np.testing.assert_allclose(Xf, np.linalg.inv(X).T, atol=1e-12)


def test_spatial_cross_products_and_inertia():
    rng = np.random.default_rng(6)
    v, m, f = rng.normal(size=(3, 6))
    np.testing.assert_allclose(S.crf(v), -S.crm(v).T, atol=0)
    # power of the cross product: (v x_m m) . f = -m . (v x_f f)
    assert np.dot(S.crm(v) @ m, f) == pytest.approx(-np.dot(m, S.crf(v) @ f))
    mass, com = 2.5, rng.normal(size=3)
    A = rng.normal(size=(3, 3))
    Ic = A @ A.T
    Isp = S.spatial_inertia(mass, com, Ic)
    assert np.all(np.linalg.eigvalsh(Isp) > 0)
    # kinetic energy 1/2 v'Iv equals the rigid-body energy about the com
    w, vo = v[:3], v[3:]
    vc = vo + np.cross(w, com)
    ke = 0.5 * mass * vc @ vc + 0.5 * w @ Ic @ w
    assert 0.5 * v @ Isp @ v == pytest.approx(ke, rel=1e-12)


def test_batch_wrappers_equal_scalar_kernels():
    rng = np.random.default_rng(7)
    e = rng.uniform(-1, 1, size=(5, 4, 3))
    o = S.eulers_to_quat(e)
    assert o.shape == (5, 4, 4)
    for i in range(5):
        for j in range(4):
            assert np.array_equal(o[i, j], S.quat_from_euler(*e[i, j]))
    np.testing.assert_allclose(S.quats_to_euler(o), e, atol=1e-12)
