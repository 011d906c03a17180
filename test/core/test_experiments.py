"""The thesis' kinematic experiments on the shipped vehicles (§2.5.1 Table 2.4, Table 2.2, E.4)."""

import math

import numpy as np
import pytest

from wmr_model import kinematics as kin
from wmr_model.experiments import kinematic as ex
from wmr_model.io.vehicles import load_vehicle
from wmr_model.terrain import surface as tr


@pytest.fixture(scope="module")
def rocky7():
    return load_vehicle("rocky7")


@pytest.fixture(scope="module")
def rocky7_rows(rocky7):
    runs = ex.rocky7_rough_terrain(rocky7, seeds=(0, 1, 2), step_sizes=(0.01, 0.02, 0.04, 0.10),
                                   unconstrained_steps=(0.04,))
    return {(r["method"], r["dt"]): r for r in ex.summarize_rocky7(runs)}, runs


def test_dae_contact_speed_below_unconstrained(rocky7_rows):
    rows, _ = rocky7_rows
    assert rows[("dae", 0.04)]["mean_contact_speed"] < 0.8 * rows[("unconstrained", 0.04)][
        "mean_contact_speed"]


def test_dae_errors_grow_with_step_size(rocky7_rows):
    rows, _ = rocky7_rows
    e = [rows[("dae", dt)]["position_error"] for dt in (0.02, 0.04, 0.10)]
    y = [rows[("dae", dt)]["yaw_error"] for dt in (0.02, 0.04, 0.10)]
    assert e[0] < e[1] < e[2]
    assert y[0] < y[2]
    # and the DAE at 0.04 s is far closer to the reference than the unconstrained method
    assert rows[("dae", 0.04)]["position_error"] < 0.5 * rows[("unconstrained", 0.04)][
        "position_error"]


def test_unconstrained_wrongly_predicts_straight_path(rocky7_rows):
    rows, runs = rocky7_rows
    assert rows[("unconstrained", 0.04)]["lateral_deviation"] < 1e-6
    assert rows[("dae", 0.01)]["lateral_deviation"] > 0.05
    for r in runs:  # the vehicle advanced about 5 m in every run
        assert 4.0 < r.final_position[0] < 5.1


def test_rocky7_rockers_stay_symmetric_on_rough_terrain(rocky7):
    terrain = ex.rocky7_terrain(7)
    _, traj = ex.run_straight(rocky7, terrain, 0.5, 10.0, 0.04)
    d1 = traj.joints[:, rocky7.joint_index("D1")]
    d2 = traj.joints[:, rocky7.joint_index("D2")]
    assert np.abs(d1 + d2).max() < 1e-6
    assert np.abs(d1).max() > 0.02  # the rockers articulated
    assert np.abs(traj.dz).max() < 0.05


def test_recbot_ackermann_turning_radius():
    """RecBot (E.4): steer angles from the control solve drive a circle of radius v / w.

    RecBot rests slightly nose-up (11 in front wheels 0.075 m below the steer frames, 12 in rear
    wheels), so the level-chassis Ackermann angles atan(l / (R -+ w1)) hold to within a fraction
    of a degree; the exact level-chassis closed form is tested in test_kinematics.py.
    """
    m = load_vehicle("recbot")
    q0, err = kin.initialize_contact(m, tr.flat())
    assert err < 1e-9
    l, w1 = 1.770, 0.635
    v, w = 2.0, 0.4
    radius = v / w
    sol = kin.solve_control(m, tr.flat(), q0, np.array([0, 0, w, v, 0, 0]))
    assert sol.residual < 1e-8
    sl = sol.q[7 + m.joint_index("steerL")]
    sr = sol.q[7 + m.joint_index("steerR")]
    assert sl == pytest.approx(math.atan(l / (radius - w1)), abs=math.radians(0.5))
    assert sr == pytest.approx(math.atan(l / (radius + w1)), abs=math.radians(0.5))
    assert sl > sr > 0  # inner wheel steers more
    # driving the solved rear wheel rates traces a circle of radius v / w (world frame)
    rates = sol.qdot[6 + m.actuated_joints]
    n = 400
    traj = kin.simulate(m, tr.flat(), sol.q, np.tile(rates, (n, 1)), 0.01, integrator="rk4")
    xy = traj.position[:, :2]
    # fit a circle: |p - c| = r, linear least squares in (cx, cy, r^2 - |c|^2)
    M = np.column_stack([2 * xy, np.ones(len(xy))])
    sol_c = np.linalg.lstsq(M, (xy**2).sum(axis=1), rcond=None)[0]
    r_fit = math.sqrt(sol_c[2] + sol_c[0] ** 2 + sol_c[1] ** 2)
    assert r_fit == pytest.approx(radius, rel=1e-3)
    # no wheel slips once Baumgarte has absorbed the small height change the steering caused
    assert np.abs(traj.contact_speed[n // 2:]).max() < 1e-6
