"""Lane body slip (enhanced kinematics, 2.44-2.52) and lane pose covariance (3.22-3.24) against
the scalar float64 kernels, on states of a scalar enhanced prediction of Zoe over the batch
terrain."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from wmr_model.experiments.kinematic import BATCH_QPRIME, BATCH_SLIP, random_twist_candidates
from wmr_model.io.vehicles import load_vehicle
from wmr_model.kinematics import api as kin
from wmr_model.kinematics import enhanced as E
from wmr_model.kinematics.lanes.body import (
    body_lanes_workspace,
    body_slip_lanes,
    pose_covariance_lanes,
    pose_covariance_workspace,
)
from wmr_model.kinematics.solve import joint_space_velocity
from wmr_model.kinematics.uncertainty import covariance_workspace, propagate_pose_covariance
from wmr_model.prediction.predict import predict
from wmr_model.spatial import quat_to_rot
from wmr_model.terrain.surface import rough
from wmr_model.vehicles.inertia import (
    body_composite_inertia_into,
    composite_workspace,
    fold_spinning_leaves,
    gravity_of,
    mass_com_into,
    model_frame_inertias,
)

F32_EPS = float(np.finfo(np.float32).eps)
DT = 0.04
N_CAND = 16
# Error bounds are K float32 epsilons times the magnitude of the terms an output sums (not of
# the output, which may cancel): each output is a chain of at most a few dozen roundings of
# such terms (three congruences of the composite inertia, then (2.44)-(2.52)), whose worst
# case stays far below K = 16 eps relative to the terms; a wrong index or sign is O(1).
K = 16.0


@pytest.fixture(scope="module")
def setup():
    model = load_vehicle("zoe")
    terrain = rough(0.15, 0.8, seed=0, x_range=(-10, 10), y_range=(-10, 10))
    q0, commands, _ = random_twist_candidates(model, terrain, N_CAND, DT, 5.0, seed=0)
    pr = predict(model, terrain, q0, commands, DT, fidelity="enhanced", slip_params=BATCH_SLIP,
                 Qprime=BATCH_QPRIME)
    I_frame = model_frame_inertias(model)
    tree = fold_spinning_leaves(model.parent, model.joint_type, model.axis, model.T0, I_frame)
    return SimpleNamespace(model=model, a=model.kinematic_arrays(), tg=terrain.kernel_args(),
                           commands=commands, pr=pr, I_frame=I_frame, tree=tree,
                           gravity=gravity_of(model), axes=E.slip_axes_array(),
                           known=kin.simulation_known(model))


def _qcmd(s, n, t):
    qcmd = np.zeros(s.model.nv)
    qcmd[6 + np.asarray(s.model.actuated_joints)] = s.commands[n, t]
    return qcmd


def _first_solve(s, n, t, vc_xy):
    """The first (no added slip) solve of the enhanced kernel at state (n, t): frames, the
    wheels' constraint rows and the velocity."""
    d = kin.create_data(s.model, s.known, fold=True)
    qdot = np.zeros(s.model.nv)
    joint_space_velocity(s.a, s.tg, d.kernel, s.pr.q[n, t], s.known, _qcmd(s, n, t),
                         kin.DEFAULT_STABILIZATION / DT, vc_xy, qdot)
    nw = s.model.wheel_frame.shape[0]
    return d.T_world.copy(), qdot, d.A[:3 * nw].copy(), d.v[:3 * nw].copy()


def _reference(s, T_world, qdot, A, v, vc_xy, p, enhanced):
    """Steps 2-3 of the scalar ``enhanced_joint_space_velocity`` before its re-solve, by its
    own float64 kernels in its order (checked against the whole kernel below); also the
    intermediate magnitudes the error bounds use."""
    keep, parent_k, I_k = s.tree
    nk = keep.shape[0]
    T_k = np.empty((nk, 4, 4))
    Ic_k = np.empty((nk, 6, 6))
    body_composite_inertia_into(keep, parent_k, I_k, T_world, T_k, Ic_k, composite_workspace())
    Ib = Ic_k[0].copy()
    c = np.empty(3)
    mass = mass_com_into(Ib, c)
    g = s.gravity
    g_b = np.zeros(6)
    for r in range(3):
        g_b[3 + r] = T_world[0, 0, r] * g[0] + T_world[0, 1, r] * g[1] + T_world[0, 2, r] * g[2]
    v_b = np.ascontiguousarray(qdot[0:6])
    f_b = np.empty(6)
    E.body_force_into(Ib, g_b, v_b, f_b)
    f_cg = np.empty(6)
    E.cg_force_into(c, f_b, f_cg)
    nw = vc_xy.shape[0]
    out = SimpleNamespace(Ib=Ib, mass=mass, cg=c, f_cg=f_cg, v=v.copy())
    if not enhanced:
        out.v_b_slip = np.zeros(6)
        out.vc_slip = vc_xy.copy()
        return out
    min_load = E.MIN_NORMAL_LOAD_FRACTION * mass * np.linalg.norm(g)
    v_cg = np.empty(6)
    E._shift_motion(v_b, c, 1.0, v_cg)
    s_cg = np.empty(6)
    E.cg_slip_velocity_into(v_cg, f_cg, p, s.axes, min_load, s_cg)
    out.v_b_slip = np.empty(6)
    E._shift_motion(s_cg, c, -1.0, out.v_b_slip)
    out.vc_slip = np.empty((nw, 2))
    E.wheel_slip_velocity(A, out.v_b_slip, nw, out.vc_slip)
    out.vc_slip += vc_xy
    for k in range(nw):
        out.v[3 * k] = out.vc_slip[k, 0]
        out.v[3 * k + 1] = out.vc_slip[k, 1]
    f_z = -(f_cg[3:6] @ s.axes[3])
    out.loaded = f_z > min_load
    out.ratio = np.abs(f_cg[3:6]).max() / f_z if out.loaded else 0.0  # |f| / f_z
    out.V = abs(v_cg[3:6] @ s.axes[0]) + abs(v_cg[0:3] @ s.axes[2])  # |V_lon| + |V_ang|
    return out


def _rotate_world(T_world, Q):
    """Every frame of a configuration turned by the world rotation ``Q`` (relative transforms,
    hence the composite inertia, unchanged)."""
    T = T_world.copy()
    T[:, :3, :3] = Q @ T_world[:, :3, :3]
    T[:, :3, 3] = (Q @ T_world[:, :3, 3].T).T
    return T


def _rotation_between(a, b):
    """Rotation taking unit vector ``a`` to unit vector ``b`` (not antiparallel), Rodrigues."""
    k = np.cross(a, b)
    sn, cs = np.linalg.norm(k), float(a @ b)
    K_ = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]]) / sn
    return np.eye(3) + sn * K_ + (1 - cs) * K_ @ K_


def _lane_case(s, W, seed):
    """W lanes of recorded states with per-lane slip parameters and commanded slip; lane 0 lies
    on its side without rotation (normal load ~0: the load-floor branch), lane 1 upside down
    (negative load), lane 2 tilted to a normal load of 3x the floor (large force ratios, the
    loaded branch near the floor)."""
    rng = np.random.default_rng(seed)
    nw = s.model.wheel_frame.shape[0]
    lanes = []
    for l in range(W):
        n, t = l % N_CAND, (7 * l + 3) % 125
        vc_xy = rng.normal(0.0, 0.05, (nw, 2))
        T_world, qdot, A, v = _first_solve(s, n, t, vc_xy)
        p = np.zeros(8)
        p[:6] = np.asarray(BATCH_SLIP) * (rng.uniform(0.5, 2.0, 6) if l >= 3 else 1.0)
        if l % 2:
            p[6:] = rng.uniform(-0.5, 0.5, 2)  # the turn-ratio terms p7, p8
        z_b = T_world[0, :3, 2]
        if l == 0 or l == 2:
            qdot[0:3] = 0.0  # no angular rate: the force is gravity alone
            g_dir = s.gravity / np.linalg.norm(s.gravity)
            # body z at 90 deg (load 0) or at acos(3e-3 / fraction) from -g (load 3x the floor)
            cos_t = 0.0 if l == 0 else 3.0 * E.MIN_NORMAL_LOAD_FRACTION
            target = cos_t * -g_dir + np.sqrt(1 - cos_t ** 2) * np.array([1.0, 0.0, 0.0])
            T_world = _rotate_world(T_world, _rotation_between(z_b, target))
        elif l == 1:
            T_world = _rotate_world(T_world, np.diag([1.0, -1.0, -1.0]))  # 180 deg about x
        lanes.append((T_world, qdot, A, v, vc_xy, p))
    # the kernel's float32 inputs; the oracle takes the same (rounded) numbers in float64
    def f32(x):
        return np.ascontiguousarray(np.moveaxis(np.array(x), 0, -1), dtype=np.float32)

    T = f32([x[0] for x in lanes])
    inputs = SimpleNamespace(R=np.ascontiguousarray(T[:, :3, :3]),
                             p=np.ascontiguousarray(T[:, :3, 3]),
                             qdot=f32([x[1] for x in lanes]), A=f32([x[2] for x in lanes]),
                             v=f32([x[3] for x in lanes]), vc_xy=f32([x[4] for x in lanes]),
                             slip_p=f32([x[5] for x in lanes]))
    rounded = [tuple(np.asarray(y, dtype=np.float32).astype(np.float64) for y in x)
               for x in lanes]
    return inputs, rounded


def _run_lanes(s, inputs, enhanced):
    W = inputs.qdot.shape[1]
    nw = s.model.wheel_frame.shape[0]
    out = SimpleNamespace(cg=np.full((3, W), np.nan, np.float32),
                          f_cg=np.full((6, W), np.nan, np.float32),
                          v_b_slip=np.full((6, W), np.nan, np.float32),
                          vc_slip=np.full((nw, 2, W), np.nan, np.float32),
                          v=inputs.v.copy())
    ws = body_lanes_workspace(*s.tree, W)
    body_slip_lanes(inputs.R, inputs.p, inputs.qdot, inputs.A, out.v, inputs.vc_xy,
                    inputs.slip_p, s.axes, s.gravity, enhanced, out.cg, out.f_cg, out.v_b_slip,
                    out.vc_slip, ws)
    return out


def test_reference_reproduces_the_scalar_enhanced_kernel(setup):
    """The oracle (scalar pieces in the kernel's order) equals the whole scalar
    ``enhanced_joint_space_velocity`` before its re-solve, on unmodified states."""
    s = setup
    nw = s.model.wheel_frame.shape[0]
    rng = np.random.default_rng(3)
    for n, t in ((0, 0), (5, 40), (11, 124)):
        vc_xy = rng.normal(0.0, 0.05, (nw, 2))
        p = np.concatenate([BATCH_SLIP, [0.3, -0.2]])
        T_world, qdot, A, v = _first_solve(s, n, t, vc_xy)
        d = kin.create_data(s.model, s.known, fold=True)
        q2 = np.zeros(s.model.nv)
        E.enhanced_joint_space_velocity(s.a, s.tg, d.kernel, s.pr.q[n, t], s.known,
                                        _qcmd(s, n, t), kin.DEFAULT_STABILIZATION / DT, vc_xy,
                                        q2, E.BodySlip(s.I_frame, s.gravity, p, s.axes, True))
        ref = _reference(s, T_world, qdot, A, v, vc_xy, p, True)
        np.testing.assert_array_equal(d.A[:3 * nw], A)
        np.testing.assert_allclose(ref.cg, d.cg, rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(ref.f_cg, d.f_cg, rtol=1e-12, atol=1e-9)
        np.testing.assert_allclose(ref.v_b_slip, d.v_b_slip, rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(ref.vc_slip, d.vc_slip[:nw], rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(ref.v, d.v[:3 * nw], rtol=1e-12, atol=1e-15)
        assert np.abs(ref.v_b_slip).max() > 1e-3  # slip exercised


@pytest.mark.parametrize("W", [16, 5])
def test_body_slip_lanes_matches_scalar(setup, W):
    s = setup
    inputs, rounded = _lane_case(s, W, seed=W)
    out = _run_lanes(s, inputs, True)
    nw = s.model.wheel_frame.shape[0]
    branches = set()
    for l in range(W):
        T_world, qdot, A, v, vc_xy, p = rounded[l]
        ref = _reference(s, T_world, qdot, A, v, vc_xy, p, True)
        branches.add(bool(ref.loaded))
        L = np.abs(T_world[:, :3, 3] - T_world[0, :3, 3]).max() + 1.0  # lever arms [m]
        w = np.abs(qdot[0:3]).max()
        u = np.abs(qdot[3:6]).max()
        # cg = h / m, h a sum of m_i r_i with |r_i| <= L
        assert np.abs(out.cg[:, l] - ref.cg).max() <= K * F32_EPS * L
        # (2.44)-(2.47): gravity m g, d'Alembert m w (u + w L); torques add lever arms and A w^2
        S_f = ref.mass * (np.linalg.norm(s.gravity) + w * (u + w * L))
        S_tau = S_f * L + np.abs(ref.Ib[:3, :3]).max() * w * w
        assert np.abs(out.f_cg[3:, l] - ref.f_cg[3:]).max() <= K * F32_EPS * S_f
        assert np.abs(out.f_cg[:3, l] - ref.f_cg[:3]).max() <= K * F32_EPS * S_tau
        # (2.48)-(2.50): sum |p_i| times the forces ratio (relative error |f| / f_z) times speed
        S_s = np.abs(p).sum() * (1.0 + ref.ratio) ** 2 * ref.V * L
        assert np.abs(out.v_b_slip[:, l] - ref.v_b_slip).max() <= K * F32_EPS * S_s
        # (2.52) plus vc_xy: the row sums of |A| times the body slip's bound and size
        S_v = (np.abs(A[:, :6]).sum(axis=1).max() * (S_s + np.abs(ref.v_b_slip).max())
               + np.abs(vc_xy).max())
        assert np.abs(out.vc_slip[..., l] - ref.vc_slip).max() <= K * F32_EPS * S_v
        assert np.abs(out.v[:, l] - ref.v).max() <= K * F32_EPS * S_v
        for k in range(nw):  # the z rows are the first solve's
            assert out.v[3 * k + 2, l] == inputs.v[3 * k + 2, l]
        if l < 3:  # the constructed loads: floor (0, negative) and 3x the floor
            assert ref.loaded == (l == 2)
            assert ref.ratio < 1e3 if l == 2 else ref.ratio == 0.0
        else:  # realistic states: the slip is not negligible
            assert np.abs(ref.v_b_slip).max() > 1e-3
    assert branches == {True, False}


@pytest.mark.parametrize("W", [16, 5])
def test_body_slip_lanes_without_enhancement(setup, W):
    """``enhanced`` False: the cg force still (for the stability margin), no slip, ``vc_slip``
    the commanded slip, ``v`` untouched."""
    s = setup
    inputs, rounded = _lane_case(s, W, seed=100 + W)
    out = _run_lanes(s, inputs, False)
    for l in range(W):
        T_world, qdot, A, v, vc_xy, p = rounded[l]
        ref = _reference(s, T_world, qdot, A, v, vc_xy, p, False)
        L = np.abs(T_world[:, :3, 3] - T_world[0, :3, 3]).max() + 1.0
        w, u = np.abs(qdot[0:3]).max(), np.abs(qdot[3:6]).max()
        S_f = ref.mass * (np.linalg.norm(s.gravity) + w * (u + w * L))
        assert np.abs(out.cg[:, l] - ref.cg).max() <= K * F32_EPS * L
        assert np.abs(out.f_cg[:, l] - ref.f_cg).max() <= K * F32_EPS * (
            S_f * L + np.abs(ref.Ib[:3, :3]).max() * w * w)
    np.testing.assert_array_equal(out.v_b_slip, 0.0)
    np.testing.assert_array_equal(out.vc_slip, inputs.vc_xy)
    np.testing.assert_array_equal(out.v, inputs.v)


def _full_qprime():
    """A full (not block-diagonal) spectral density: every block of ``G Q' G^T`` used."""
    U = np.triu(np.random.default_rng(5).normal(0.0, 0.05, (6, 6)))
    return U.T @ U + np.diag([1e-4, 1e-4, 4e-3, 1e-2, 2e-3, 1e-4])


@pytest.mark.parametrize("W", [16, 5])
@pytest.mark.parametrize("qprime", ["batch", "full"])
def test_pose_covariance_lanes_matches_scalar_over_125_steps(setup, W, qprime):
    s = setup
    Qp = np.asarray(BATCH_QPRIME, dtype=float) if qprime == "batch" else _full_qprime()
    steps = s.pr.qdot.shape[1]
    assert steps == 125
    rng = np.random.default_rng(W)
    B = rng.normal(0.0, 0.03, (6, 6))
    P0 = B @ B.T + np.diag([1e-4, 1e-4, 1e-3, 1e-2, 1e-2, 1e-3])
    P64 = np.repeat(P0[None], W, axis=0)
    P32 = np.ascontiguousarray(np.repeat(P0[..., None], W, axis=-1), dtype=np.float32)
    P64[:] = P32.transpose(2, 0, 1)  # the same (rounded) start
    ws = pose_covariance_workspace(W)
    cws = covariance_workspace()
    cand = np.arange(W) % N_CAND
    R = np.empty((1, 3, 3, W), np.float32)
    qd = np.zeros((6, W), np.float32)
    worst = 0.0
    for t in range(steps):
        for l in range(W):
            R[0, :, :, l] = quat_to_rot(s.pr.q[cand[l], t, 0:4])
            qd[3:6, l] = s.pr.qdot[cand[l], t, 3:6]
        for l in range(W):  # the scalar on the same rounded inputs
            Rb = R[0, :, :, l].astype(np.float64)
            v_b = qd[3:6, l].astype(np.float64)
            propagate_pose_covariance(P64[l], Rb, v_b, Qp, DT, P64[l], cws)
        pose_covariance_lanes(P32, R, qd, Qp, DT, ws)
        for l in range(W):
            assert np.array_equal(P32[..., l], P32[..., l].T)  # symmetrized
            err = np.abs(P32[..., l] - P64[l]).max() / np.abs(P64[l]).max()
            # each step rounds a dozen terms per entry and adds to the carried error: the
            # relative error grows at most by a few eps per step
            assert err <= 4.0 * F32_EPS * (t + 2)
            worst = max(worst, err)
    assert np.abs(P64[:, 3:, 3:]).max() > 10 * np.abs(P0).max()  # the covariance grew
    assert worst > 0.0
