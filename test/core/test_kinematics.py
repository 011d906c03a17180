"""Stabilized-DAE kinematics (§2.2) against closed forms and independent computations."""

import math

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from wmr_model import kinematics as kin
from wmr_model.errors import ParameterError, ShapeError
from wmr_model.spatial import euler_to_rot, quat_from_euler
from wmr_model.terrain import surface as tr
from wmr_model.vehicles.generators import diff_drive_caster_spec, random_tree_spec, skid_steer_spec
from wmr_model.vehicles.model import FrameSpec, JointConstraintSpec, VehicleSpec, compile_vehicle


def _random_state(model, rng):
    q = np.zeros(model.nq)
    q[0:4] = quat_from_euler(*rng.uniform(-0.3, 0.3, 3))
    q[4:7] = rng.normal(size=3)
    q[7:] = rng.uniform(-0.5, 0.5, model.nj)
    return q


def test_forward_kinematics_matches_scipy_chain():
    """Algorithm 1 against an independent composition with SciPy rotations."""
    rng = np.random.default_rng(0)
    spec = random_tree_spec(rng, n_links=5, n_wheels=3)
    m = compile_vehicle(spec)
    q = _random_state(m, rng)
    T = kin.forward_kinematics(m, kin.create_data(m), q)
    by_name = {f.name: f for f in spec.frames}
    x, y, z, w = q[1], q[2], q[3], q[0]
    poses = {"body": (Rotation.from_quat([x, y, z, w]), q[4:7])}
    for name in m.frame_names[1:]:
        f = by_name[name]
        Rp, pp = poses[f.parent]
        R0 = Rotation.from_euler("xyz", f.rpy)
        ax = np.asarray(f.axis) / np.linalg.norm(f.axis)
        th = q[7 + m.joint_index(name)]
        if f.joint_type == "revolute":
            Rl, pl = R0 * Rotation.from_rotvec(ax * th), np.asarray(f.xyz)
        else:
            Rl, pl = R0, np.asarray(f.xyz) + R0.apply(ax * th)
        poses[name] = (Rp * Rl, pp + Rp.apply(pl))
        i = m.frame_index(name)
        np.testing.assert_allclose(T[i, :3, :3], poses[name][0].as_matrix(), atol=1e-12)
        np.testing.assert_allclose(T[i, :3, 3], poses[name][1], atol=1e-12)


@pytest.mark.parametrize("seed", range(5))
def test_wheel_jacobian_matches_finite_difference(seed):
    """Algorithm 2: A_wheel qdot is the velocity of the wheel's material contact point."""
    rng = np.random.default_rng(seed)
    m = compile_vehicle(random_tree_spec(rng, n_links=4, n_wheels=3, prismatic_fraction=0.4))
    terrain = tr.inclined_plane(0.2, 0.7)
    q = _random_state(m, rng)
    data = kin.create_data(m)
    kin.forward_kinematics(m, data, q)
    kin.wheel_contact(m, data, terrain)
    A, _ = kin.constraint_system(m, data, q, 0.0)
    qdot = rng.normal(size=m.nv)
    from wmr_model.kinematics.integrate import integrate_euler

    Tw0 = data.T_world.copy()
    Tc0 = data.T_contact.copy()
    h = 1e-7
    qp = np.empty(m.nq)
    integrate_euler(q, qdot, h, qp)
    qm = np.empty(m.nq)
    integrate_euler(q, qdot, -h, qm)
    Tp = kin.forward_kinematics(m, kin.create_data(m), qp).copy()
    Tm = kin.forward_kinematics(m, kin.create_data(m), qm).copy()
    for k, wf in enumerate(m.wheel_frame):
        local = np.linalg.solve(Tw0[wf], np.append(Tc0[k, :3, 3], 1.0))
        vel_world = ((Tp[wf] @ local)[:3] - (Tm[wf] @ local)[:3]) / (2 * h)
        vel_contact = Tc0[k, :3, :3].T @ vel_world
        np.testing.assert_allclose(A[3 * k:3 * k + 3] @ qdot, vel_contact, atol=2e-6)


def test_contact_detection_on_plane_is_exact():
    """On a plane the lowest point of a tilted circle and Δz have a closed form."""
    m = compile_vehicle(skid_steer_spec())
    slope, heading = 0.25, 1.1
    terrain = tr.inclined_plane(slope, heading)
    rng = np.random.default_rng(3)
    q = _random_state(m, rng)
    data = kin.create_data(m)
    kin.forward_kinematics(m, data, q)
    dz = kin.wheel_contact(m, data, terrain)
    n = np.array([-math.tan(slope) * math.cos(heading), -math.tan(slope) * math.sin(heading), 1])
    n /= np.linalg.norm(n)
    for k, wf in enumerate(m.wheel_frame):
        c = data.T_world[wf, :3, 3]
        a = data.T_world[wf, :3, 1]
        down = -(n - (n @ a) * a)
        down /= np.linalg.norm(down)
        r = c + m.wheel_radius[k] * down
        dist = (r[2] - terrain.height(r[0], r[1])) * n[2]
        np.testing.assert_allclose(data.T_contact[k, :3, 3], r, atol=2e-6)
        assert dz[k] == pytest.approx(dist, abs=1e-9)
        np.testing.assert_allclose(data.T_contact[k, :3, 2], n, atol=1e-12)


def test_skid_steer_pseudoinverse_closed_form():
    """Flat ground: the least-squares solution (2.38) of a 4-wheel skid steer.

    Minimizing longitudinal and lateral slip of wheels at (x_i, y_i) gives v = mean(v_i),
    w = -sum(y_i v_i) / sum(x_i^2 + y_i^2), vy = 0.
    """
    L, W, R = 0.8, 1.0, 0.1
    m = compile_vehicle(skid_steer_spec(wheelbase=L, track=W, radius=R))
    q, err = kin.initialize_contact(m, tr.flat())
    assert err < 1e-12
    rng = np.random.default_rng(4)
    for _ in range(5):
        u = rng.uniform(-2, 10, m.nw)
        qk = np.zeros(m.nv)
        qk[6:] = u
        qdot = kin.joint_space_velocity(m, kin.create_data(m), tr.flat(), q,
                                        kin.simulation_known(m), qk)
        xy = np.array([m.T0[f, :2, 3] for f in m.wheel_frame])
        vi = R * u
        assert qdot[3] == pytest.approx(vi.mean(), abs=1e-12)
        assert qdot[2] == pytest.approx(-(xy[:, 1] @ vi) / (xy**2).sum(), abs=1e-12)
        np.testing.assert_allclose(qdot[[0, 1, 4, 5]], 0, atol=1e-12)


def test_differential_drive_closed_form_with_caster_arc():
    """Two driven wheels and a swivel caster follow the exact arc of (3.64)-(3.65)."""
    B, R = 0.5, 0.1
    m = compile_vehicle(diff_drive_caster_spec(track=B, radius=R))
    q0, err = kin.initialize_contact(m, tr.flat())
    assert err < 1e-10
    wl, wr = 4.0, 6.0
    v, w = R * (wl + wr) / 2, R * (wr - wl) / B
    ai = list(m.actuated_joints)
    u = np.zeros((400, len(ai)))
    u[:, ai.index(m.joint_index("left"))] = wl
    u[:, ai.index(m.joint_index("right"))] = wr
    dt = 0.01
    # start the caster aligned with the motion so no transient swivel is needed
    traj = kin.simulate(m, tr.flat(), q0, u, dt, integrator="rk4")
    t = traj.time[-1]
    x = v / w * math.sin(w * t)
    y = v / w * (1 - math.cos(w * t))
    np.testing.assert_allclose(traj.position[-1, :2], [x, y], atol=2e-3)
    assert traj.euler[-1, 2] == pytest.approx(math.atan2(math.sin(w * t), math.cos(w * t)), abs=2e-3)


def test_euler_first_order_and_rk4_fourth_order_on_circle():
    """Convergence orders on the closed-form skid-steer circle."""
    m = compile_vehicle(skid_steer_spec(wheelbase=0.8, track=1.0, radius=0.1))
    q0, _ = kin.initialize_contact(m, tr.flat())
    u1 = np.array([8.0, 12.0, 8.0, 12.0])  # L0 R0 L1 R1
    qk = np.zeros(m.nv)
    qk[6:] = u1
    qd = kin.joint_space_velocity(m, kin.create_data(m), tr.flat(), q0, kin.simulation_known(m), qk)
    v, w = qd[3], qd[2]
    Ttot = 4.0

    def err(dt, integ):
        n = round(Ttot / dt)
        tj = kin.simulate(m, tr.flat(), q0, np.tile(u1, (n, 1)), dt, integrator=integ)
        ex = np.array([v / w * math.sin(w * Ttot), v / w * (1 - math.cos(w * Ttot))])
        return np.linalg.norm(tj.position[-1, :2] - ex)

    e1, e2 = err(0.1, "euler"), err(0.05, "euler")
    assert 1.7 < e1 / e2 < 2.3
    r1, r2 = err(0.2, "rk4"), err(0.1, "rk4")
    assert r1 / r2 > 10
    assert r2 < e2 / 100


def test_settles_to_inclined_plane_attitude():
    m = compile_vehicle(skid_steer_spec())
    for slope, heading, yaw in [(0.2, 0.0, 0.0), (0.3, 1.0, -0.4), (0.15, -2.0, 2.5)]:
        q = m.neutral_state()
        q[0:4] = quat_from_euler(0, 0, yaw)
        q[6] = 1.0  # start above the plane
        qf, err = kin.initialize_contact(m, tr.inclined_plane(slope, heading), q)
        assert err < 1e-9
        n = np.array([-math.tan(slope) * math.cos(heading), -math.tan(slope) * math.sin(heading), 1])
        n /= np.linalg.norm(n)
        R = Rotation.from_quat([*qf[1:4], qf[0]]).as_matrix()
        np.testing.assert_allclose(R[:, 2], n, atol=1e-9)
        assert math.atan2(R[1, 0], R[0, 0]) == pytest.approx(yaw, abs=1e-9)


def _rocker_vehicle():
    """Four wheels on two rockers coupled by a differential (2.25): conforms to rough ground."""
    frames = [
        FrameSpec("D1", "body", axis=(0, 1, 0), xyz=(0, 0.3, 0)),
        FrameSpec("D2", "body", axis=(0, 1, 0), xyz=(0, -0.3, 0)),
        FrameSpec("FL", "D1", xyz=(0.3, 0, -0.1), actuated=True, wheel_radius=0.1),
        FrameSpec("BL", "D1", xyz=(-0.3, 0, -0.1), actuated=True, wheel_radius=0.1),
        FrameSpec("FR", "D2", xyz=(0.3, 0, -0.1), actuated=True, wheel_radius=0.1),
        FrameSpec("BR", "D2", xyz=(-0.3, 0, -0.1), actuated=True, wheel_radius=0.1),
    ]
    return compile_vehicle(VehicleSpec("rocker", frames, joint_constraints=[
        JointConstraintSpec("diff", {"D1": 1, "D2": 1})]))


def test_stabilization_keeps_contact_error_bounded():
    """Δz stays bounded with Baumgarte stabilization and drifts without it (2.35)."""
    m = _rocker_vehicle()
    terrain = tr.rough(0.04, 0.3, seed=1, x_range=(-2, 14), y_range=(-3, 3))
    q0, _ = kin.initialize_contact(m, terrain)
    u = np.full((500, m.nw), 5.0)
    with_stab = kin.simulate(m, terrain, q0, u, 0.02, stabilization=0.5)
    without = kin.simulate(m, terrain, q0, u, 0.02, stabilization=0.0)
    rms_with = np.sqrt(np.mean(with_stab.dz ** 2))
    drift_without = np.abs(without.dz[-100:]).mean()
    assert rms_with < 2e-3
    assert drift_without > 5 * rms_with
    # without stabilization the error keeps growing: late error exceeds early error
    assert np.abs(without.dz[-100:]).mean() > 2 * np.abs(without.dz[:100]).mean()


def test_holonomic_joint_constraint_is_maintained():
    """A rocker differential (2.25) on a random articulated vehicle stays satisfied."""
    m = _rocker_vehicle()
    terrain = tr.rough(0.04, 0.3, seed=5, x_range=(-2, 10), y_range=(-3, 3))
    q0, _ = kin.initialize_contact(m, terrain)
    traj = kin.simulate(m, terrain, q0, np.full((300, 4), 5.0), 0.02)
    c = traj.joints[:, m.joint_index("D1")] + traj.joints[:, m.joint_index("D2")]
    assert np.abs(c).max() < 1e-6
    assert np.abs(traj.joints[:, m.joint_index("D1")]).max() > 0.01  # the rockers did move


def test_batch_equals_loop():
    m = compile_vehicle(random_tree_spec(np.random.default_rng(11), n_links=3, n_wheels=4))
    terrain = tr.rough(0.05, 0.4, seed=2)
    q0, _ = kin.initialize_contact(m, terrain)
    rng = np.random.default_rng(12)
    na = len(m.actuated_joints)
    U = rng.uniform(-1, 3, size=(6, 50, na))
    Q0 = np.repeat(q0[None], 6, axis=0)
    Q0[:, 4] += np.arange(6) * 0.3
    batch = kin.simulate(m, terrain, Q0, U, 0.04)
    for n in range(6):
        single = kin.simulate(m, terrain, Q0[n], U[n], 0.04)
        np.testing.assert_allclose(batch.q[n], single.q, atol=1e-12, rtol=0)
        np.testing.assert_allclose(batch.contact_speed[n], single.contact_speed, atol=1e-12)


def test_ackermann_steer_angles_from_control_solve():
    """Control context: RecBot-like front steering gives the Ackermann angles exactly."""
    l, w1, w2 = 1.77, 0.635, 0.61
    rf, rr = 11 * 0.0254, 12 * 0.0254
    frames = [
        FrameSpec("steerL", "body", axis=(0, 0, 1), xyz=(l, w1, 0), actuated=True),
        FrameSpec("steerR", "body", axis=(0, 0, 1), xyz=(l, -w1, 0), actuated=True),
        FrameSpec("FL", "steerL", xyz=(0, 0, rf - rr), wheel_radius=rf),
        FrameSpec("FR", "steerR", xyz=(0, 0, rf - rr), wheel_radius=rf),
        FrameSpec("BL", "body", xyz=(0, w2, 0), actuated=True, wheel_radius=rr),
        FrameSpec("BR", "body", xyz=(0, -w2, 0), actuated=True, wheel_radius=rr),
    ]
    m = compile_vehicle(VehicleSpec("ack", frames))
    q0, _ = kin.initialize_contact(m, tr.flat())
    for v, w in [(1.0, 0.5), (2.0, -0.3)]:
        sol = kin.solve_control(m, tr.flat(), q0, np.array([0, 0, w, v, 0, 0]))
        radius = v / w
        dl = math.atan(l / (radius - w1))
        dr = math.atan(l / (radius + w1))
        assert sol.q[7 + m.joint_index("steerL")] == pytest.approx(dl, abs=1e-6)
        assert sol.q[7 + m.joint_index("steerR")] == pytest.approx(dr, abs=1e-6)
        assert sol.residual < 1e-8
        # rear wheel rates: v -+ w w2 over the radius
        assert sol.qdot[6 + m.joint_index("BL")] == pytest.approx((v - w * w2) / rr, rel=1e-8)
        assert sol.qdot[6 + m.joint_index("BR")] == pytest.approx((v + w * w2) / rr, rel=1e-8)


def test_estimation_with_gyro_known():
    """Estimation context: with the gyro known, a skid steer's yaw rate is the gyro's."""
    m = compile_vehicle(skid_steer_spec())
    q0, _ = kin.initialize_contact(m, tr.flat())
    known = kin.estimation_known(m, ["L0", "R0", "L1", "R1"], gyro=True)
    qk = np.zeros(m.nv)
    qk[2] = 0.3
    qk[6:] = [10, 12, 10, 12]
    qd = kin.joint_space_velocity(m, kin.create_data(m), tr.flat(), q0, known, qk)
    assert qd[2] == 0.3
    assert qd[3] == pytest.approx(0.1 * 11, abs=1e-12)


def test_bad_inputs_are_named():
    m = compile_vehicle(skid_steer_spec())
    q0 = m.neutral_state()
    with pytest.raises(ShapeError, match=r"joint_rates: expected shape \(T, 4\) or \(N, T, 4\)"):
        kin.simulate(m, tr.flat(), q0, np.zeros((10, 3)), 0.1)
    with pytest.raises(ParameterError, match=r"dt: must be a finite step size > 0 s, got -0.1"):
        kin.simulate(m, tr.flat(), q0, np.zeros((10, 4)), -0.1)
    bad = q0.copy()
    bad[5] = np.nan
    with pytest.raises(ParameterError, match=r"q0\[0\]: must be finite"):
        kin.simulate(m, tr.flat(), bad, np.zeros((10, 4)), 0.1)
    with pytest.raises(ShapeError, match=r"q: expected shape \(11,\)"):
        kin.forward_kinematics(m, kin.create_data(m), np.zeros(5))
    u = np.zeros((10, 4))
    u[3, 1] = np.inf
    with pytest.raises(ParameterError, match="joint_rates: must be finite"):
        kin.simulate(m, tr.flat(), q0, u, 0.1)
    with pytest.raises(ParameterError, match="integrator: must be one of"):
        kin.simulate(m, tr.flat(), q0, np.zeros((10, 4)), 0.1, integrator="midpoint")


def test_rotation_matrix_helper_consistency():
    # guards the Euler convention shared by generators and loaders
    np.testing.assert_allclose(euler_to_rot(0.1, 0.2, 0.3),
                               Rotation.from_euler("xyz", [0.1, 0.2, 0.3]).as_matrix(), atol=1e-14)


def test_impose_roll_pitch_keeps_yaw_position_joints():
    rng = np.random.default_rng(21)
    m = compile_vehicle(skid_steer_spec())
    q = _random_state(m, rng)
    e0 = Rotation.from_quat([*q[1:4], q[0]]).as_euler("xyz")
    out = kin.impose_roll_pitch(q, 0.1, -0.05)
    e1 = Rotation.from_quat([*out[1:4], out[0]]).as_euler("xyz")
    np.testing.assert_allclose(e1, [0.1, -0.05, e0[2]], atol=1e-12)
    np.testing.assert_array_equal(out[4:], q[4:])
    with pytest.raises(ParameterError, match="roll/pitch: must be finite"):
        kin.impose_roll_pitch(q, np.nan, 0.0)
