"""Planar reference models (3.64)-(3.66) against closed forms and the 3D kinematics."""

import math

import numpy as np
import pytest

from wmr_model import kinematics as kin
from wmr_model.errors import ParameterError, ShapeError
from wmr_model.prediction.predict import predict
from wmr_model.terrain import surface as tr
from wmr_model.vehicles.generators import diff_drive_caster_spec
from wmr_model.vehicles.model import compile_vehicle
from wmr_model.vehicles.reference_models import (
    diff_drive_plus_twist,
    diff_drive_twist,
    integrate_planar,
    predict_diff_drive,
)


def test_twist_closed_forms():
    vx, wz = diff_drive_twist(0.8, 1.2, 0.5)
    assert vx == pytest.approx(1.0) and wz == pytest.approx(0.8)
    vx, wz = diff_drive_plus_twist(0.8, 1.2, 0.5, 0.6)
    assert vx == pytest.approx(1.0) and wz == pytest.approx(0.48)
    vx, wz = diff_drive_twist(np.array([-1.0, 2.0]), np.array([1.0, 2.0]), 1.0)
    np.testing.assert_allclose(vx, [0.0, 2.0])
    np.testing.assert_allclose(wz, [2.0, 0.0])


def test_straight_spin_and_arc():
    dt, T = 0.1, 30
    t = dt * T
    # straight line at yaw 0.3
    p = predict_diff_drive([1.0, 2.0, 0.3], np.full(T, 0.5), np.full(T, 0.5), 0.4, dt)
    np.testing.assert_allclose(p[-1], [1 + 0.5 * t * math.cos(0.3), 2 + 0.5 * t * math.sin(0.3),
                                       0.3], atol=1e-12)
    # spin in place
    p = predict_diff_drive([0, 0, 0], np.full(T, -0.2), np.full(T, 0.2), 0.4, dt)
    np.testing.assert_allclose(p[-1], [0, 0, 1.0 * t], atol=1e-12)
    # exact arc regardless of step size
    v, w = 1.0, 0.5
    for dt_ in (0.5, 0.01):
        n = round(t / dt_)
        p = integrate_planar([0, 0, 0], np.full(n, v), np.full(n, w), dt_)
        np.testing.assert_allclose(p[-1], [v / w * math.sin(w * t),
                                           v / w * (1 - math.cos(w * t)), w * t], atol=1e-12)


def test_alpha_scales_heading_change():
    T, dt = 20, 0.1
    vl, vr = np.full(T, 0.9), np.full(T, 1.1)
    base = predict_diff_drive([0, 0, 0], vl, vr, 0.5, dt)
    plus = predict_diff_drive([0, 0, 0], vl, vr, 0.5, dt, alpha=0.5)
    assert plus[-1, 2] == pytest.approx(0.5 * base[-1, 2], rel=1e-14)


def test_batch_equals_loop():
    rng = np.random.default_rng(0)
    vl, vr = rng.uniform(-1, 1, (5, 40)), rng.uniform(-1, 1, (5, 40))
    p0 = rng.normal(size=(5, 3))
    batch = predict_diff_drive(p0, vl, vr, 0.6, 0.05, alpha=0.8)
    for n in range(5):
        np.testing.assert_array_equal(batch[n], predict_diff_drive(p0[n], vl[n], vr[n], 0.6,
                                                                   0.05, alpha=0.8))


def test_matches_3d_kinematics_of_diff_drive_on_flat_ground():
    """The 3D model of a two-wheel + caster vehicle reduces to (3.64)-(3.65) on flat ground."""
    B, R = 0.5, 0.1
    m = compile_vehicle(diff_drive_caster_spec(track=B, radius=R))
    q0, _ = kin.initialize_contact(m, tr.flat())
    rng = np.random.default_rng(1)
    T, dt = 200, 0.01
    wl = np.repeat(rng.uniform(2, 8, 4), T // 4)
    wr = np.repeat(rng.uniform(2, 8, 4), T // 4)
    ai = list(m.actuated_joints)
    u = np.zeros((T, len(ai)))
    u[:, ai.index(m.joint_index("left"))] = wl
    u[:, ai.index(m.joint_index("right"))] = wr
    pr = predict(m, tr.flat(), q0, u, dt, integrator="rk4")
    ref = predict_diff_drive([q0[4], q0[5], 0.0], R * wl, R * wr, B, dt)
    np.testing.assert_allclose(pr.position[0, :, :2], ref[:, :2], atol=2e-3)
    np.testing.assert_allclose(pr.euler[0, :, 2], ref[:, 2], atol=2e-3)


def test_bad_inputs_are_named():
    with pytest.raises(ParameterError, match=r"track: must be > 0 m, got 0"):
        diff_drive_twist(1.0, 1.0, 0.0)
    with pytest.raises(ShapeError, match=r"vx, wz: expected equal shapes"):
        integrate_planar([0, 0, 0], np.zeros(3), np.zeros(4), 0.1)
    with pytest.raises(ShapeError, match=r"pose0: expected shape \(3,\) or \(N, 3\)"):
        integrate_planar([0, 0], np.zeros(3), np.zeros(3), 0.1)
