"""Tracked kinematics on smooth ground against closed forms (issue 9; seed 003 §III).

A rigid tracked body resting on a plane with a front/rear symmetric set of contact patches and
driven by belt speeds s_L, s_R has, from the stacked no-slip rows (2.16) of its patches solved
in the least-squares sense (2.38), the skid-steer solution of

    v_x - omega y_i = s_i,    v_y + omega x_i = 0        (one pair per active patch i)

(x_i, y_i the patch's contact point in the body frame, s_i its belt's speed), and no motion out
of the plane: the normal rows ask nothing of a level translation or a yaw. The oracle below
builds those rows from the contact positions the kernel reports and solves them with
``numpy.linalg.lstsq``, independently of the kernel's partitioned solve.
"""

from __future__ import annotations

import numpy as np
import pytest

from wmr_model import kinematics as kin
from wmr_model.experiments import tracks as ext
from wmr_model.io.vehicles import load_vehicle
from wmr_model.kinematics.api import DEFAULT_STABILIZATION
from wmr_model.kinematics.constraints import track_point_jacobian
from wmr_model.spatial import quat_to_rot
from wmr_model.terrain.surface import flat, inclined_plane

SIGMA = DEFAULT_STABILIZATION / ext.DT
# Rates that vanish by symmetry are checked to 1e-6 [rad/s, m/s]: the raised flippers' faint
# pulls act along the belt normal at each flipper's lowest sampled point, 1.2e-4 rad off the
# plane normal with 12 patches per flipper, which leaves a pitch rate of 5e-7 rad/s at 0.3 m/s
# (zero to round-off without those rows).
SYM = 1e-6


@pytest.fixture(scope="module")
def absolem():
    return load_vehicle("absolem")


def _settled(m, terrain):
    q = m.neutral_state()
    q[6] = 0.3
    q[9:13] = ext.FLIPPERS_FLAT  # raised: only the main tracks reach the ground
    q, _ = kin.initialize_contact(m, terrain, q)
    return ext.settle(m, terrain, q, duration=0.5)


@pytest.fixture(scope="module")
def on_flat(absolem):
    return _settled(absolem, flat())


def _solve(m, terrain, q, s_left, s_right):
    d = kin.create_data(m)
    r = m.track_path[0, 0, 3:6]
    qk = np.zeros(m.nv)
    # qdot column of a drive joint: 5 + its frame (as in the track rows)
    qk[5 + m.frame_index("left_sprocket")] = s_left / np.linalg.norm(r)
    qk[5 + m.frame_index("right_sprocket")] = s_right / np.linalg.norm(r)
    qd = kin.joint_space_velocity(m, d, terrain, q, kin.simulation_known(m), qk, SIGMA).copy()
    return qd, d


def _skid_steer_oracle(m, d, q, s_left, s_right):
    """Least-squares (v_x, v_y, omega) of the rows above over the patches touching the
    terrain (Δz <= the activation's d_on; the hovering end-arc patches are released at rest,
    weight w_min^2 ~ 4e-4, which the tolerance covers)."""
    R = quat_to_rot(q[0:4])
    rows, rhs = [], []
    for c in range(m.nc):
        if d.dz[c] > m.track_act[0]:
            continue
        x, y, _ = R.T @ (d.T_contact[c, :3, 3] - q[4:7])
        s = s_left if m.track_names[m.track_of[c]] == "left" else s_right
        assert m.track_names[m.track_of[c]] in ("left", "right")
        rows += [[1.0, 0.0, -y], [0.0, 1.0, x]]
        rhs += [s, 0.0]
    assert len(rows) >= 8
    return np.linalg.lstsq(np.array(rows), np.array(rhs), rcond=None)[0]


def test_settled_patch_set_is_symmetric(absolem, on_flat):
    d = kin.create_data(absolem)
    kin.forward_kinematics(absolem, d, on_flat)
    kin.wheel_contact(absolem, d, flat())
    touching = d.dz <= absolem.track_act[0]
    x = d.T_contact[touching, 0, 3] - on_flat[4]
    assert touching.sum() >= 8
    np.testing.assert_allclose(np.sort(x), -np.sort(x)[::-1], atol=1e-9)


def test_straight_has_no_pitch_and_moves_at_belt_speed(absolem, on_flat):
    qd, _ = _solve(absolem, flat(), on_flat, 0.3, 0.3)
    np.testing.assert_allclose(qd[0:3], 0.0, atol=SYM)  # roll, pitch, yaw rates
    np.testing.assert_allclose(qd[3:6], [0.3, 0.0, 0.0], atol=SYM)


@pytest.mark.parametrize(("s_left", "s_right"), [(0.1, 0.3), (0.3, 0.1), (-0.25, 0.25),
                                                 (0.2, -0.05)])
def test_turns_match_the_least_squares_skid_steer_solution(absolem, on_flat, s_left, s_right):
    qd, d = _solve(absolem, flat(), on_flat, s_left, s_right)
    vx, vy, omega = _skid_steer_oracle(absolem, d, on_flat, s_left, s_right)
    np.testing.assert_allclose(qd[[3, 4, 2]], [vx, vy, omega], rtol=0, atol=1e-4)
    # symmetric patch set: the ICR lies on the track centre line (x = 0), v_y = -omega x_bar
    assert abs(qd[4]) <= 1e-6 * abs(qd[2])
    np.testing.assert_allclose(qd[[0, 1, 5]], 0.0, atol=SYM)  # no roll, pitch or heave


def test_arc_patch_takes_the_lower_run_contact_axes(absolem, on_flat):
    """The end-arc patch next to the lower run hovers (0 < Δz) with its own closest point at
    its end sub-point; its rows use the belt's axes where the belt meets the ground (the
    neighbour's), and the belt term is the full belt speed along them."""
    d = kin.create_data(absolem)
    kin.forward_kinematics(absolem, d, on_flat)
    kin.wheel_contact(absolem, d, flat())
    left = np.flatnonzero(absolem.track_of == 0)
    hover = [c for c in left if 0.0 < d.dz[c] < absolem.track_act[1]]
    assert len(hover) == 2
    blk = np.empty((3, absolem.nv))
    belt = np.empty(3)
    for c in hover:
        np.testing.assert_allclose(d.T_contact[c, :3, 2], [0.0, 0.0, 1.0], atol=1e-9)
        track_point_jacobian(absolem.kinematic_arrays(),
                             (absolem.track_frame, absolem.track_drive, absolem.track_path),
                             d.T_world, d.T_contact, d.contact_angle, 0, c, belt, blk)
        np.testing.assert_allclose(belt, [-0.09, 0.0, 0.0], atol=1e-12)


def test_straight_up_an_incline_has_no_pitch_rate(absolem):
    """Not a flat-ground special case: on a 10 deg plane the body moves along the slope at
    the belt speed without pitching."""
    t = inclined_plane(np.radians(10.0))
    q = _settled(absolem, t)
    qd, _ = _solve(absolem, t, q, 0.3, 0.3)
    np.testing.assert_allclose(qd[0:3], 0.0, atol=SYM)
    np.testing.assert_allclose(qd[3:6], [0.3, 0.0, 0.0], atol=SYM)
