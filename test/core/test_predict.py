"""Batched prediction API: same loop as kin.simulate, batch == loop, flags, twist commands."""

import math

import numpy as np
import pytest

from wmr_model import kinematics as kin
from wmr_model.errors import ParameterError, ShapeError
from wmr_model.prediction.predict import (
    TIPOVER_RISK,
    TRACTION_LIMIT,
    WHEEL_LIFTOFF,
    predict,
    predict_twist,
    twist_commands,
)
from wmr_model.terrain import surface as tr
from wmr_model.vehicles.generators import diff_drive_caster_spec, random_tree_spec, skid_steer_spec
from wmr_model.vehicles.model import FrameSpec, VehicleSpec, compile_vehicle


@pytest.fixture(scope="module")
def tree():
    m = compile_vehicle(random_tree_spec(np.random.default_rng(11), n_links=3, n_wheels=4))
    terrain = tr.rough(0.05, 0.4, seed=2)
    q0, _ = kin.initialize_contact(m, terrain)
    return m, terrain, q0


@pytest.mark.parametrize("integrator", ["euler", "rk4"])
def test_kinematic_prediction_is_kin_simulate(tree, integrator):
    m, terrain, q0 = tree
    rng = np.random.default_rng(1)
    U = rng.uniform(-1, 3, size=(3, 40, len(m.actuated_joints)))
    ref = kin.simulate(m, terrain, np.repeat(q0[None], 3, 0), U, 0.04, integrator=integrator)
    pr = predict(m, terrain, q0, U, 0.04, integrator=integrator)
    # Same loop and operations; predict also evaluates the stability margin (extra workspace),
    # which shifts heap alignment seen by BLAS/LAPACK and so the last bits (~1e-15 per step).
    for field in ("q", "qdot", "dz", "contact_speed"):
        np.testing.assert_allclose(getattr(pr, field), getattr(ref, field), atol=1e-12, rtol=0,
                                   err_msg=field)
    single = kin.simulate(m, terrain, q0, U[0], 0.04, integrator=integrator)
    np.testing.assert_allclose(predict(m, terrain, q0, U[0], 0.04, integrator=integrator).q[0],
                               single.q, atol=1e-12, rtol=0)


@pytest.mark.parametrize("integrator", ["euler", "rk4"])
def test_enhanced_batch_equals_loop(tree, integrator):
    """N candidates with their own q0, commands and slip parameters vs N single calls."""
    m, terrain, q0 = tree
    rng = np.random.default_rng(2)
    N, T = 6, 50
    na = len(m.actuated_joints)
    U = rng.uniform(-1, 3, size=(N, T, na))
    Q0 = np.repeat(q0[None], N, axis=0)
    Q0[:, 4] += np.arange(N) * 0.3
    p = rng.uniform(-0.3, 0.3, size=(N, 6))
    Qp = np.diag([1e-4, 1e-4, 1e-3, 1e-2, 1e-3, 1e-4])
    kw = dict(fidelity="enhanced", Qprime=Qp, integrator=integrator)
    batch = predict(m, terrain, Q0, U, 0.04, slip_params=p, **kw)
    assert batch.q.shape == (N, T + 1, m.nq)
    assert batch.covariance.shape == (N, T + 1, 6, 6)
    assert batch.stability_margin.shape == batch.flags.shape == (N, T + 1)
    assert batch.slip.shape == (N, T, 6) and batch.wheel_slip.shape == (N, T, m.nw, 2)
    assert batch.body_twist.shape == (N, T, 6)
    assert np.abs(batch.slip).max() > 1e-3  # slip is active
    for n in range(N):
        one = predict(m, terrain, Q0[n], U[n], 0.04, slip_params=p[n], **kw)
        for field in ("q", "qdot", "slip", "wheel_slip", "dz", "stability_margin",
                      "covariance", "flags"):
            np.testing.assert_allclose(getattr(batch, field)[n], getattr(one, field)[0],
                                       atol=1e-12, rtol=0, err_msg=field)


def test_named_slip_parameters(tree):
    m, terrain, q0 = tree
    U = np.ones((5, len(m.actuated_joints)))
    a = predict(m, terrain, q0, U, 0.04, fidelity="enhanced",
                slip_params={"slip.p2": -0.1, "slip.p3": 0.4})
    b = predict(m, terrain, q0, U, 0.04, fidelity="enhanced", slip_params=[0, -0.1, 0.4, 0, 0, 0])
    np.testing.assert_array_equal(a.q, b.q)
    with pytest.raises(ParameterError, match=r"slip.p9: not a slip coefficient"):
        predict(m, terrain, q0, U, 0.04, fidelity="enhanced", slip_params={"slip.p9": 1.0})


def test_wheel_liftoff_flag_off_a_ledge():
    m = compile_vehicle(skid_steer_spec())
    terrain = tr.step(-0.3, 1.0)
    q0, _ = kin.initialize_contact(m, terrain)
    pr = predict(m, terrain, q0, np.full((80, 4), 10.0), 0.02)
    lift = (pr.flags & WHEEL_LIFTOFF) > 0
    assert not lift[0, :10].any()
    assert lift[0].any()
    np.testing.assert_array_equal(lift[0], (pr.dz[0] > 0.02).any(axis=1))
    assert not (pr.flags & TRACTION_LIMIT).any()


def test_tipover_flag_matches_margin():
    spec = skid_steer_spec(wheelbase=1.6, track=1.0)
    spec.body_com = (0, 0, 0.8)
    m = compile_vehicle(spec)
    q0, _ = kin.initialize_contact(m, tr.flat())
    U = np.stack([np.tile([s, 3 * s, s, 3 * s], (10, 1)) for s in (5.0, 30.0)])
    pr = predict(m, tr.flat(), q0, U, 0.02)
    np.testing.assert_array_equal((pr.flags & TIPOVER_RISK) > 0, pr.stability_margin < 0)
    assert not (pr.flags[0] & TIPOVER_RISK).any()
    assert (pr.flags[1] & TIPOVER_RISK).all()


def test_twist_commands_skid_steer_and_diff_drive_arc():
    m = compile_vehicle(skid_steer_spec(wheelbase=0.8, track=1.0, radius=0.1))
    rates = twist_commands(m, np.array([[1.0, 0.0, 0.5], [0.5, 0.0, 0.3]]), 0.1)
    assert rates.shape == (1, 8, 4)
    np.testing.assert_allclose(rates[0, :5], 10.0, atol=1e-9)
    np.testing.assert_allclose(rates[0, 5:], 5.0, atol=1e-9)
    # diff drive with caster: commanded arc is followed (3.64)-(3.65)
    d = compile_vehicle(diff_drive_caster_spec(track=0.5, radius=0.1))
    q0, _ = kin.initialize_contact(d, tr.flat())
    v, w = 0.8, 0.4
    pr = predict_twist(d, tr.flat(), q0, np.array([[v, w, 2.0]]), 0.01, integrator="rk4")
    t = pr.time[-1]
    np.testing.assert_allclose(pr.position[0, -1, :2],
                               [v / w * math.sin(w * t), v / w * (1 - math.cos(w * t))],
                               atol=2e-3)
    # padding: shorter candidates stop
    r2 = twist_commands(d, np.array([[[v, w, 1.0]], [[v, w, 2.0]]]), 0.1)
    assert r2.shape[1] == 20
    np.testing.assert_array_equal(r2[0, 10:], 0.0)


def test_twist_commands_drive_steering_joints():
    """Ackermann vehicle: the first step of a segment turns the steer joints to their angle."""
    l, w1, w2, r = 1.5, 0.6, 0.6, 0.3
    frames = [
        FrameSpec("steerL", "body", axis=(0, 0, 1), xyz=(l, w1, 0), actuated=True),
        FrameSpec("steerR", "body", axis=(0, 0, 1), xyz=(l, -w1, 0), actuated=True),
        FrameSpec("FL", "steerL", wheel_radius=r),
        FrameSpec("FR", "steerR", wheel_radius=r),
        FrameSpec("BL", "body", xyz=(0, w2, 0), actuated=True, wheel_radius=r),
        FrameSpec("BR", "body", xyz=(0, -w2, 0), actuated=True, wheel_radius=r),
    ]
    m = compile_vehicle(VehicleSpec("ack", frames, body_mass=100.0))
    v, w, dt = 1.0, 0.4, 0.05
    rates = twist_commands(m, np.array([[v, w, 1.0]]), dt)
    act = list(m.actuated_joints)
    sL = act.index(m.joint_index("steerL"))
    assert rates[0, 0, sL] * dt == pytest.approx(math.atan(l / (v / w - w1)), abs=1e-6)
    np.testing.assert_allclose(rates[0, 1:, sL], 0.0)
    q0, _ = kin.initialize_contact(m, tr.flat())
    pr = predict(m, tr.flat(), q0, rates, dt)
    np.testing.assert_allclose(pr.qdot[0, 5:, 2], w, rtol=1e-6)
    np.testing.assert_allclose(pr.qdot[0, 5:, 3], v, rtol=1e-6)


def test_bad_inputs_are_named(tree):
    m, terrain, q0 = tree
    na = len(m.actuated_joints)
    U = np.zeros((4, na))
    with pytest.raises(ParameterError, match=r"fidelity: must be one of \['kinematic', 'enhanced'\]"):
        predict(m, terrain, q0, U, 0.1, fidelity="dynamic")
    with pytest.raises(ShapeError, match=rf"commands: expected shape \(T, {na}\) or \(N, T, {na}\)"):
        predict(m, terrain, q0, np.zeros((4, na + 1)), 0.1)
    with pytest.raises(ShapeError, match=r"q0: batch size 2 does not match N = 3"):
        predict(m, terrain, np.stack([q0, q0]), np.zeros((3, 4, na)), 0.1)
    with pytest.raises(ShapeError, match=r"slip_params: expected shape \(6,\) or \(N, 6\)"):
        predict(m, terrain, q0, U, 0.1, slip_params=np.zeros(5))
    with pytest.raises(ShapeError, match=r"process_noise: expected shape \(4, 6\) or \(N, 4, 6\)"):
        predict(m, terrain, q0, U, 0.1, process_noise=np.zeros((3, 6)))
    with pytest.raises(ParameterError, match=r"dt: must be a finite step size > 0 s, got 0"):
        predict(m, terrain, q0, U, 0)
    with pytest.raises(ShapeError, match=r"segments: expected shape \(S, 3\) or \(N, S, 3\)"):
        twist_commands(m, np.zeros((2, 2)), 0.1)


@pytest.mark.parametrize("vehicle", ["warthog", "diffdrive", "absolem"])
def test_twist_commands_equal_a_control_solve_per_twist(vehicle):
    """Vehicles without steer joints or tracks take the linear path (three solves per joint
    state); each row still equals its own solve_control to round-off (tracks: exactly)."""
    from wmr_model.io.vehicles import load_vehicle

    m = load_vehicle(vehicle)
    rng = np.random.default_rng(4)
    seg = np.stack([rng.uniform(-1, 1, (20, 2)), rng.uniform(-0.5, 0.5, (20, 2)),
                    np.full((20, 2), 0.5)], -1)
    rates = twist_commands(m, seg, 0.1)
    q = m.neutral_state()
    if m.ntp:
        q, _ = kin.initialize_contact(m, tr.flat(), q)
    for n in range(20):
        for s in range(2):
            sol = kin.solve_control(m, tr.flat(), q, np.array([0, 0, seg[n, s, 1],
                                                               seg[n, s, 0], 0, 0]),
                                    hold_passive=True)
            np.testing.assert_allclose(rates[n, 5 * s + 1], sol.qdot[6 + m.actuated_joints],
                                       rtol=0, atol=1e-12)
