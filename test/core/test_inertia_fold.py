"""Folding spinning wheels into their parents keeps the body composite inertia (issue 10).

* :func:`fold_spinning_leaves` folds exactly the leaf frames on revolute joints whose spatial
  inertia a rotation about the joint axis leaves unchanged (Zoë's four wheels), and none whose
  inertia the rotation changes (centre of mass off the axis, unequal transverse moments) or that
  carry children; the reduced tree keeps the others with their parents.
* :func:`body_composite_inertia` on the reduced tree equals the full backward pass
  (:func:`composite_inertias`) and an independent NumPy sum over every frame (B.12) to
  round-off, at random joint angles including large wheel spins.
* The enhanced-kinematics kernel with the folded scratch gives the unfolded kernel's results to
  round-off.
"""

import numpy as np
import pytest

from wmr_model.io.vehicles import load_vehicle
from wmr_model.kinematics import api as kin
from wmr_model.kinematics import enhanced as E
from wmr_model.terrain import surface as tr
from wmr_model.vehicles.inertia import (
    body_composite_inertia,
    composite_inertias,
    composite_workspace,
    fold_spinning_leaves,
    model_frame_inertias,
)
from wmr_model.vehicles.tree import forward_kinematics


@pytest.fixture(scope="module")
def zoe():
    return load_vehicle("zoe")


def _fold(m, I_frame):
    """Number of folded frames, folded mask (nf,), and the reduced tree."""
    keep, parent_k, I_k = fold_spinning_leaves(m.parent, m.joint_type, m.axis, m.T0, I_frame)
    folded = np.ones(m.nf, dtype=bool)
    folded[keep] = False
    return m.nf - keep.size, folded, (keep, parent_k, I_k)


def _random_state(m, rng):
    q = m.neutral_state()
    q[0:4] = rng.normal(size=4)
    q[0:4] /= np.linalg.norm(q[0:4])
    q[4:7] = rng.normal(0, 3, 3)
    q[7:] = rng.uniform(-0.4, 0.4, m.nf - 1)
    q[7 + m.wheel_joints] = rng.uniform(-300.0, 300.0, m.wheel_joints.size)  # long runs
    return q


def _numpy_body_composite(T_world, I_frame):
    """Sum over frames of X^T I X (B.12) with NumPy, from the world transforms."""
    out = np.zeros((6, 6))
    for i in range(T_world.shape[0]):
        Tib = np.linalg.inv(T_world[0]) @ T_world[i]
        R, t = Tib[:3, :3], Tib[:3, 3]
        tx = np.array([[0, -t[2], t[1]], [t[2], 0, -t[0]], [-t[1], t[0], 0]])
        Xf = np.block([[R, tx @ R], [np.zeros((3, 3)), R]])
        out += Xf @ I_frame[i] @ Xf.T
    return out


def test_zoe_folds_its_four_wheels(zoe):
    n, folded, (keep, parent_k, _) = _fold(zoe, model_frame_inertias(zoe))
    assert n == 4
    assert sorted(np.flatnonzero(folded)) == sorted(zoe.wheel_frame.tolist())
    # the reduced tree: kept frames in order, each with its own parent
    assert keep[0] == 0 and parent_k[0] == -1 and np.all(np.diff(keep) > 0)
    for j in range(1, keep.size):
        assert keep[parent_k[j]] == zoe.parent[keep[j]]


def test_frames_a_rotation_changes_are_not_folded(zoe):
    m = zoe
    w = int(m.wheel_frame[0])
    I_frame = model_frame_inertias(m)
    off_axis = I_frame.copy()
    # centre of mass 1 cm off the spin axis (B.13 with c = 0.01 m along x)
    mass = off_axis[w, 5, 5]
    cx = np.array([[0, 0, 0], [0, 0, -0.01], [0, 0.01, 0]])
    off_axis[w, :3, 3:] = mass * cx
    off_axis[w, 3:, :3] = mass * cx.T
    off_axis[w, :3, :3] += mass * cx @ cx.T
    unequal = I_frame.copy()
    unequal[w, 0, 0] *= 1.5  # transverse moments no longer equal
    for I_bad in (off_axis, unequal):
        n, folded, _ = _fold(m, I_bad)
        assert not folded[w] and n == 3
    # a frame with children (Zoë's rear roll frame, massless) is never folded
    _, folded, _ = _fold(m, I_frame)
    inner = [i for i in range(1, m.nf) if i in m.parent[1:]]
    assert inner and not folded[inner].any()


@pytest.mark.parametrize("seed", range(4))
def test_body_composite_equals_full_pass_and_numpy_sum(zoe, seed):
    m = zoe
    rng = np.random.default_rng(seed)
    I_frame = model_frame_inertias(m)
    _, _, (keep, parent_k, I_k) = _fold(m, I_frame)
    nk = keep.size
    T_world = np.empty((m.nf, 4, 4))
    for _ in range(5):
        q = _random_state(m, rng)
        forward_kinematics(m.parent, m.joint_type, m.axis, m.T0, q, T_world)
        full = composite_inertias(m.parent, I_frame, T_world, np.empty((m.nf, 6, 6))).copy()
        fast = body_composite_inertia(keep, parent_k, I_k, T_world, np.empty((nk, 4, 4)),
                                      np.empty((nk, 6, 6)), composite_workspace()).copy()
        scale = np.abs(full).max()
        np.testing.assert_allclose(fast, full, rtol=0, atol=1e-13 * scale)
        np.testing.assert_allclose(fast, _numpy_body_composite(T_world, I_frame), rtol=0,
                                   atol=1e-12 * scale)


def test_enhanced_kernel_with_folded_scratch_matches_unfolded(zoe):
    m = zoe
    terrain = tr.rough(0.15, 0.8, seed=1, x_range=(-4, 4), y_range=(-4, 4))
    q0, _ = kin.initialize_contact(m, terrain)
    I_frame = model_frame_inertias(m)
    known = kin.simulation_known(m)
    qcmd = np.zeros(m.nv)
    qcmd[6 + m.actuated_joints] = 3.0
    slip = np.array([0.05, -0.03, 0.4, 0.2, 0.0, -0.1])
    s = E.BodySlip(I_frame, np.array([0.0, 0.0, -9.80665]), slip, E.DEFAULT_SLIP_AXES, True)
    rng = np.random.default_rng(5)
    for _ in range(6):
        q = q0.copy()
        q[7:] += rng.uniform(-0.05, 0.05, m.nf - 1)
        q[7 + m.wheel_joints] = rng.uniform(-50.0, 50.0, m.wheel_joints.size)
        outs = []
        for fold in (False, True):  # plain, then folded enhanced scratch
            d = kin.create_data(m, known, inertias=I_frame, fold=fold, warm_contact=False).kernel
            E.enhanced_joint_space_velocity(
                m.kinematic_arrays(), terrain.kernel_args(), d, q, known, qcmd, 12.5,
                np.zeros((m.nc, 2)), d.qdot, s)
            outs.append(d._asdict())
        for key in ("qdot", "f_cg", "cg", "v_b_slip", "vc_slip"):
            a, b = outs[0][key], outs[1][key]
            np.testing.assert_allclose(b, a, rtol=0, atol=1e-12 * max(np.abs(a).max(), 1.0),
                                       err_msg=key)
