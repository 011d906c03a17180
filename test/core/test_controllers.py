"""Vehicle controllers (wmr_model.prediction.controllers): closed forms, closed-loop properties, plumbing."""

import dataclasses
import math

import numpy as np
import pytest

from wmr_model import kinematics as kin
from wmr_model.errors import ModelError
from wmr_model.io.vehicles import load_vehicle
from wmr_model.prediction.controllers import (
    controller_rates,
    differential_rates,
    passive_steer_rates,
    predict_controlled,
    simulate_dynamics_controlled,
    twist_profile,
    vehicle_controller,
)
from wmr_model.prediction.predict import predict, predict_twist, twist_commands
from wmr_model.terrain import surface as tr

# Zoe in the thesis' C++ library (and urdf/zoe.urdf): axle pivots at +-L/2, wheels at +-B/2.
ZOE_L, ZOE_B, ZOE_R = 1.91, 1.64, 0.325


@pytest.fixture(scope="module")
def zoe():
    return load_vehicle("zoe")


def test_sidecars_name_their_controllers(zoe):
    kinds = {n: vehicle_controller(load_vehicle(n)).kind
             for n in ("zoe", "recbot", "diffdrive", "landtamer", "husky", "rocky7")}
    assert kinds == {"zoe": "passive_steer", "recbot": "ackermann", "diffdrive": "differential",
                     "landtamer": "differential", "husky": "differential", "rocky7": "naive"}
    c = vehicle_controller(zoe)
    assert [zoe.joint_names[k] for k in c.steer_joints] == ["s1", "s2"]
    assert (c.gain, c.max_speed_difference, c.min_turn_radius) == (1.0, 1.5, 3.0)
    np.testing.assert_allclose(c.pivot_xy, [[ZOE_L / 2, 0.0], [-ZOE_L / 2, 0.0]])


def test_diff_drive_rates_are_v_pm_w_b_half_over_r():
    m = load_vehicle("diffdrive")  # urdf/diffdrive.urdf: wheels at y = +-0.2 m, r = 0.1 m
    c = vehicle_controller(m)
    v, w = np.array([0.4, -0.3, 0.0]), np.array([0.5, 0.2, 1.0])
    u = differential_rates(c, v, w)
    b, r = 0.4, 0.1
    np.testing.assert_allclose(u, np.column_stack([(v - w * b / 2) / r, (v + w * b / 2) / r]),
                               rtol=1e-12)
    # the naive controller's least-squares solve (2.37) agrees on flat ground
    for k in range(3):
        ref = twist_commands(m, np.array([[v[k], w[k], 0.1]]), 0.1)[0, 0]
        np.testing.assert_allclose(u[k], ref, atol=1e-9)


def test_ackermann_steer_angles_and_wheel_rates_equal_the_closed_form():
    """RecBot (urdf/recbot.urdf): steer pivots at (1.77, +-0.635), rear wheels at y = +-0.61,
    r 0.3048, turn centre on the rear axle x = 0. After the first step the steer joints hold
    atan(w x / (v -+ w y)); the rear wheels turn at (v -+ w y) / r; the kinematics then realize
    the commanded yaw rate without slip."""
    m = load_vehicle("recbot")
    ter = tr.flat()
    q0, _ = kin.initialize_contact(m, ter)
    v, w, dt = 1.0, 0.3, 0.05
    pr = predict_controlled(m, ter, q0, np.array([[v, w, 2.0]]), dt)
    q = pr.q[0]
    dL = math.atan(w * 1.77 / (v - w * 0.635))
    dR = math.atan(w * 1.77 / (v + w * 0.635))
    for name, d in (("steerL", dL), ("steerR", dR)):
        np.testing.assert_allclose(q[1:, 7 + m.joint_index(name)], d, atol=1e-12)
    rates = pr.qdot[0][1:]  # every step after the first
    np.testing.assert_allclose(rates[:, 6 + m.joint_index("BL")], (v - w * 0.61) / 0.3048,
                               rtol=1e-12)
    np.testing.assert_allclose(rates[:, 6 + m.joint_index("BR")], (v + w * 0.61) / 0.3048,
                               rtol=1e-12)
    np.testing.assert_allclose(rates[:, 2], w, atol=2e-3)  # body yaw rate
    np.testing.assert_allclose(rates[:, 3], v, atol=2e-3)
    assert np.abs(pr.contact_speed[0, 1:]).max() < 5e-3  # no-slip: contacts do not slide


def test_passive_steer_rates_equal_the_thesis_library_formula(zoe):
    """Feed-forward v/cos(d*) -+ B/2 w, feedback clip(K (d* - d), 1.5) on left (-) / right (+)."""
    c = vehicle_controller(zoe)
    q = np.repeat(zoe.neutral_state()[None], 3, axis=0)
    s1, s2 = 7 + zoe.joint_index("s1"), 7 + zoe.joint_index("s2")
    q[:, s1], q[:, s2] = [0.0, -1.0, 2.5], [0.0, 0.2, -0.1]
    v = np.array([1.0, 0.8, 1.2])
    w = np.array([0.3, -0.2, 0.9])  # the last one is tighter than 3 m: w limited to v / 3
    u = passive_steer_rates(c, q, v, w)
    for n in range(3):
        wn = float(np.clip(w[n], -v[n] / 3.0, v[n] / 3.0))
        front = math.atan(ZOE_L / 2 * wn / v[n])
        ff = v[n] / math.cos(front)
        dvf = float(np.clip(front - q[n, s1], -1.5, 1.5))
        dvr = float(np.clip(-front - q[n, s2], -1.5, 1.5))
        want = np.array([ff - ZOE_B / 2 * wn - dvf, ff + ZOE_B / 2 * wn + dvf,
                         ff - ZOE_B / 2 * wn - dvr, ff + ZOE_B / 2 * wn + dvr]) / ZOE_R
        order = [zoe.joint_names[k] for k in zoe.actuated_joints]
        assert order == ["FL", "FR", "BL", "BR"]
        np.testing.assert_allclose(u[n], want, rtol=1e-12)


def test_passive_steer_keeps_zoe_steer_angles_within_limits_on_rough_terrain(zoe):
    """Turning candidates (1 m/s, |w| <= 0.3 rad/s, 5 s) on rough terrain (RMS 0.15 m, corr.
    0.8 m): with the feedback every steer angle stays inside the joint limits (+-0.6 rad) and
    ends near its target; the open-loop naive commands swing the axles past them."""
    ter = tr.rough(0.15, 0.8, seed=3, x_range=(-8, 8), y_range=(-8, 8))
    q0, _ = kin.initialize_contact(zoe, ter)
    w = np.array([-0.3, -0.1, 0.15, 0.3])
    seg = np.stack([np.ones(4), w, np.full(4, 5.0)], axis=1)[:, None, :]
    steer = 7 + np.array([zoe.joint_index("s1"), zoe.joint_index("s2")])
    lim = np.array([zoe.upper[k - 6] for k in steer])
    closed = predict_controlled(zoe, ter, q0, seg, 0.04)
    s = closed.q[:, :, steer]
    assert np.all(np.abs(s) <= lim), np.abs(s).max()
    target = np.arctan(ZOE_L / 2 * w)
    np.testing.assert_allclose(s[:, -1, 0], target, atol=0.1)
    np.testing.assert_allclose(s[:, -1, 1], -target, atol=0.1)
    naive = predict_controlled(zoe, ter, q0, seg, 0.04, controller="naive")
    assert np.any(np.abs(naive.q[:, :, steer]) > lim)


def test_naive_stays_selectable_and_unchanged(zoe):
    ter = tr.rough(0.05, 0.5, seed=1)
    q0, _ = kin.initialize_contact(zoe, ter)
    seg = np.array([[[1.0, 0.2, 1.0]], [[0.5, -0.1, 1.0]]])
    a = predict_controlled(zoe, ter, q0, seg, 0.05, controller="naive")
    b = predict_twist(zoe, ter, q0, seg, 0.05)
    np.testing.assert_array_equal(a.q, b.q)
    assert vehicle_controller(zoe, "naive").kind == "naive"


def test_zero_gain_feedback_equals_its_feed_forward_rates(zoe):
    """The compiled closed loop (law evaluated per step inside the loop, state and covariance
    carried, ``every`` subsampling) equals one open-loop call when the law's output does not
    depend on the state: Zoe's controller with zero gain on flat ground only feeds forward."""
    c = dataclasses.replace(vehicle_controller(zoe), gain=0.0)
    ter = tr.flat()
    q0, _ = kin.initialize_contact(zoe, ter)
    seg = np.array([[[1.0, 0.2, 0.6]], [[0.7, -0.2, 0.6]]])
    vx, wz = twist_profile(seg, 0.04)
    u = np.stack([controller_rates(c, np.repeat(q0[None], 2, 0), vx[:, t], wz[:, t], 0.04)
                  for t in range(vx.shape[1])], axis=1)
    kw = {"fidelity": "enhanced", "slip_params": {"slip.p2": -0.1}, "Qprime": np.eye(6) * 1e-3,
          "warm_start": False}
    for every in (1, 4):
        a = predict_controlled(zoe, ter, q0, seg, 0.04, controller=c, every=every, **kw)
        b = predict(zoe, ter, q0, u, 0.04, every=every, **kw)
        for f in ("q", "qdot", "dz", "flags", "covariance", "stability_margin"):
            np.testing.assert_allclose(getattr(a, f), getattr(b, f), rtol=0, atol=1e-12,
                                       err_msg=f)
        assert (a.steps is None) == (b.steps is None)


def _stepped(model, ter, q0, ctrl, vx, wz, dt, **kw):
    """Oracle: the controller stepped from Python, one predict call per step (its rates at the
    state the previous call ended in), state and covariance carried from call to call."""
    q, P = np.repeat(q0[None], vx.shape[0], axis=0), None
    Q, QD, DZ, COV = [q], [], [], []
    for t in range(vx.shape[1]):
        u = controller_rates(ctrl, q, vx[:, t], wz[:, t], dt)[:, None, :]
        pr = predict(model, ter, q, u, dt, P0=P, **kw)
        if t == 0:
            DZ.append(pr.dz[:, 0])
            COV.append(None if pr.covariance is None else pr.covariance[:, 0])
        q = pr.q[:, 1]
        P = None if pr.covariance is None else pr.covariance[:, 1]
        Q.append(q)
        QD.append(pr.qdot[:, 0])
        DZ.append(pr.dz[:, 1])
        COV.append(P)
    cov = None if P is None else np.stack(COV, axis=1)
    return np.stack(Q, axis=1), np.stack(QD, axis=1), np.stack(DZ, axis=1), cov


@pytest.mark.parametrize("vehicle,fidelity,integrator", [
    ("zoe", "kinematic", "euler"), ("zoe", "enhanced", "rk4"), ("recbot", "enhanced", "euler")])
def test_closed_loop_in_the_compiled_loop_equals_stepping_it(vehicle, fidelity, integrator):
    """Zoe (passive steer) and RecBot (Ackermann) turning over rough terrain: predicting with
    the law inside the compiled loop gives, to the last bit, the states, velocities, contact
    errors and covariances of stepping the controller from Python one predict call per step
    (cold collision search in both: a warm start carries over steps only inside one call)."""
    m = load_vehicle(vehicle)
    ctrl = vehicle_controller(m)
    assert ctrl.feedback
    ter = tr.rough(0.1, 0.8, seed=5, x_range=(-6, 6), y_range=(-6, 6))
    q0, _ = kin.initialize_contact(m, ter)
    seg = np.stack([np.array([1.0, 0.8, -0.6]), np.array([0.3, -0.25, 0.1]), np.full(3, 1.2)],
                   axis=1)[:, None, :]
    dt = 0.04
    vx, wz = twist_profile(seg, dt)
    kw = {"fidelity": fidelity, "integrator": integrator, "warm_start": False}
    if fidelity == "enhanced":
        kw |= {"slip_params": {"slip.p2": -0.1}, "Qprime": np.eye(6) * 1e-3}
    got = predict_controlled(m, ter, q0, seg, dt, **kw)
    q, qdot, dz, cov = _stepped(m, ter, q0, ctrl, vx, wz, dt, **kw)
    np.testing.assert_array_equal(got.q, q)
    np.testing.assert_array_equal(got.qdot, qdot)
    np.testing.assert_array_equal(got.dz, dz)
    if cov is not None:
        np.testing.assert_array_equal(got.covariance, cov)
    steer = 7 + ctrl.steer_joints
    assert np.abs(np.diff(got.q[:, :, steer], axis=1)).max() > 1e-3  # the axles did move


def test_dynamics_with_zoe_controller_hold_the_axles(zoe):
    """Dynamics (Pacejka contact) on rough terrain driving straight: the feedback keeps the
    passive axles near zero steer; constant naive wheel rates let them swing further."""
    from wmr_model.experiments import dynamic as sc

    ter = tr.rough(0.15, 0.8, seed=2, x_range=(-3, 6), y_range=(-3, 3))
    q0, qd0 = sc._moving_start(zoe, ter, 1.0)
    T = 75
    run = simulate_dynamics_controlled(zoe, ter, q0, qd0, np.ones(T), np.zeros(T), 0.04,
                                       contact_model="pacejka")
    naive = simulate_dynamics_controlled(zoe, ter, q0, qd0, np.ones(T), np.zeros(T), 0.04,
                                         controller="naive", contact_model="pacejka")
    steer = 7 + np.array([zoe.joint_index("s1"), zoe.joint_index("s2")])
    held = np.abs(run.q[:, steer]).max()
    assert held < 0.1 and held < np.abs(naive.q[:, steer]).max()
    assert run.q.shape == (T + 1, zoe.nq) and np.all(run.iterations >= 1)


def test_dynamics_closed_loop_in_the_compiled_loop_agrees_with_stepping_it(zoe):
    """Zoe's controller inside the compiled dynamics loop against stepping it from Python (one
    simulate_dynamics call per step, rates from the state the previous call ended in). The
    only difference is the force balance's warm start, which a one-step call restarts from
    the current constraint velocities: both converge to the tolerance (1e-6 m g), so the
    turning runs agree to 1e-6 m and rad (about 1e-7 measured). A batch of two equals each
    run alone, bit for bit."""
    from wmr_model.dynamics.simulate import simulate_dynamics
    from wmr_model.experiments import dynamic as sc

    ctrl = vehicle_controller(zoe)
    ter = tr.rough(0.15, 0.8, seed=2, x_range=(-3, 6), y_range=(-3, 3))
    q0, qd0 = sc._moving_start(zoe, ter, 1.0)
    T, dt = 60, 0.04
    vx, wz = np.ones((2, T)), np.stack([np.full(T, 0.2), np.full(T, -0.1)])
    batch = simulate_dynamics_controlled(zoe, ter, q0, qd0, vx, wz, dt, contact_model="pacejka")
    for n in range(2):
        one = simulate_dynamics_controlled(zoe, ter, q0, qd0, vx[n], wz[n], dt,
                                           contact_model="pacejka")
        np.testing.assert_array_equal(batch.q[n], one.q)
        np.testing.assert_array_equal(batch.qdot[n], one.qdot)
        q, qd = q0, qd0
        stepped = [q0]
        for t in range(T):
            u = controller_rates(ctrl, q[None], vx[n, t:t + 1], wz[n, t:t + 1], dt)
            r = simulate_dynamics(zoe, ter, q, qd, u, dt, contact_model="pacejka")
            q, qd = r.q[1], r.qdot[1]
            stepped.append(q)
        np.testing.assert_allclose(one.q, np.array(stepped), rtol=0, atol=1e-6)
    steer = 7 + ctrl.steer_joints
    assert np.abs(batch.q[:, -1, steer]).min() > 0.05  # the axles turned


def test_feedback_of_the_wrong_shape_is_refused_before_the_loops(zoe):
    """The compiled loops do not check indices: a law or inputs that do not fit the batch are
    refused with the field named, by predict and by the dynamics batch alike."""
    from wmr_model.dynamics.simulate import simulate_dynamics_batch
    from wmr_model.errors import ShapeError
    from wmr_model.experiments import dynamic as sc
    from wmr_model.kinematics.feedback import Feedback, FeedbackInputs
    from wmr_model.prediction.controllers import feedback_law, feedback_parts

    ctrl = vehicle_controller(zoe)
    ter = tr.flat()
    q0, qd0 = sc._moving_start(zoe, ter, 1.0)
    target, a, b = feedback_parts(ctrl, np.ones(5), np.zeros(5))
    law = feedback_law(ctrl, 0.04, 6 + zoe.actuated_joints)
    short = Feedback(law, FeedbackInputs(target[None, :4], a[None, :4], b[None, :4]))
    U = np.zeros((1, 5, ctrl.na))
    with pytest.raises(ShapeError, match=r"feedback\.target: expected \(1 or 1, 5, 2\)"):
        simulate_dynamics_batch(zoe, ter, q0, qd0, U, 0.04, feedback=short)
    with pytest.raises(ShapeError, match=r"feedback\.target: expected \(N, 5, 2\)"):
        predict(zoe, ter, q0, U, 0.04, feedback=short)
    wide = Feedback(law._replace(actuated_v=law.actuated_v[:2]),
                    FeedbackInputs(target[None], a[None], b[None]))
    with pytest.raises(ShapeError, match="feedback: the law has 2 actuated joints, the model 4"):
        simulate_dynamics_batch(zoe, ter, q0, qd0, U, 0.04, feedback=wide)


def test_controller_section_errors_name_the_file_and_key(zoe, tmp_path):
    bad = dataclasses.replace(zoe, options={"controller": {"type": "pid", "source": "zoe.yaml"}})
    with pytest.raises(ModelError, match=r"zoe.yaml: controller.type must be one of"):
        vehicle_controller(bad)
    bad = dataclasses.replace(zoe, options={"controller": {"type": "passive_steer",
                                                           "gain": -1, "source": "zoe.yaml"}})
    with pytest.raises(ModelError, match=r"zoe.yaml: controller.gain must be a number >= 0"):
        vehicle_controller(bad)
    bad = dataclasses.replace(zoe, options={"controller": {"type": "passive_steer",
                                                           "speed": 1, "source": "zoe.yaml"}})
    with pytest.raises(ModelError, match=r"unknown key\(s\) \['speed'\]"):
        vehicle_controller(bad)
    with pytest.raises(ModelError, match=r"ackermann needs actuated steer joints"):
        vehicle_controller(dataclasses.replace(zoe, options={"controller": {
            "type": "ackermann", "steer_joints": ["s1"]}}))
    with pytest.raises(ModelError, match=r"unknown joint 'x1'"):
        vehicle_controller(dataclasses.replace(zoe, options={"controller": {
            "type": "passive_steer", "steer_joints": ["x1"]}}))


def test_rollout_with_a_controller_equals_predict_controlled(zoe):
    """The prediction service's path (rollouts.rollout with twists and a controller, chunked,
    sampled) gives predict_controlled's states."""
    from wmr_model.prediction.rollouts import rollout

    ter = tr.rough(0.1, 0.8, seed=1, x_range=(-10, 10), y_range=(-10, 10))
    q0, _ = kin.initialize_contact(zoe, ter)
    tw = np.zeros((3, 40, 2))
    tw[..., 0] = 1.0
    tw[..., 1] = np.array([-0.3, 0.0, 0.3])[:, None]
    r = rollout(zoe, ter, q0, tw, 0.04, every=5, controller="vehicle", max_chunk=2)
    seg = np.concatenate([tw[:, :1], np.full((3, 1, 1), 1.6)], axis=2)
    p = predict_controlled(zoe, ter, q0, seg, 0.04, every=5)
    np.testing.assert_array_equal(r.q, p.q)
    np.testing.assert_array_equal(r.flags, p.flags)


def test_wmr_simulate_uses_the_vehicle_controller(capsys):
    """``wmr simulate zoe --yaw-rate``: Zoe's controller turns the body (yaw ~ w t less the
    axles' settling lag of ~B / (2 K) = 0.82 s); ``--controller naive`` leaves the yaw at zero
    (the open-loop rates swing both axles and the body crabs)."""
    import json

    from wmr_model.cli import main

    yaw = {}
    for ctrl in ("vehicle", "naive"):
        assert main(["simulate", "zoe", "--speed", "1", "--yaw-rate", "0.3", "--duration", "4",
                     "--controller", ctrl, "--json"]) == 0
        s = json.loads(capsys.readouterr().out)
        yaw[s["controller"]] = math.radians(s["final_rpy_deg"][2])
    assert set(yaw) == {"passive_steer", "naive"}
    assert 0.3 * (4 - 1.0) < yaw["passive_steer"] < 0.3 * 4
    assert abs(yaw["naive"]) < 1e-6
