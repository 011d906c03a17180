"""Vehicle-level multipass: rocky7 on deformable soil, later wheels in the earlier wheels' ruts.

Oracles: the quasi-static single wheel (:func:`sinkage_for_load`, an independent root solve of
the Bekker-Wong load integral) at each wheel's measured load, slip and multipass state; the
same run without imprinting (virgin soil throughout); a plain unsegmented simulation; soil
mass conservation.
"""

import numpy as np
import pytest

from wmr_model.dynamics.simulate import simulate_dynamics
from wmr_model.errors import ParameterError
from wmr_model.experiments.soft_soil import drive_straight_on_soil, simulate_on_soil, wheel_rows
from wmr_model.experiments.soil import sinkage_for_load, start_state, wheel_params
from wmr_model.io.vehicles import load_vehicle
from wmr_model.prediction.controllers import straight_wheel_rates
from wmr_model.terrain.soil import bekker_params

SOIL = "sandy_loam"
# Soft (constant-voltage DC motor like) wheel drives: torque = Kp (u - w). With stiff rate
# control every wheel turns at the commanded rate and, the chassis being rigid, all wheels
# share one slip; a drive with speed droop lets each wheel's rate follow its own traction.
DRIVE = {"actuator": "p", "actuator_params": {"Kp": 0.3}}
RUN = {"duration": 6.0, **DRIVE}


@pytest.fixture(scope="module")
def rocky7():
    return load_vehicle("rocky7")


@pytest.fixture(scope="module")
def first(rocky7):
    return drive_straight_on_soil(rocky7, SOIL, **RUN)


def _window(run, a, b):
    """Step range (i0, i1) over which the body travelled from a to b [m] along x."""
    x = run.trajectory.q[:, 4] - run.trajectory.q[0, 4]
    i0, i1 = (int(i) for i in np.searchsorted(x, [a, b]))
    assert i1 < x.size, "run too short for the window"
    return i0, i1


def _wheel_means(run, i0, i1, k):
    segs = slice(np.searchsorted(run.segment_start, i0), np.searchsorted(run.segment_start, i1))
    return (run.sinkage[i0:i1, k].mean(), run.slip_ratio[i0:i1, k].mean(),
            run.trajectory.f_contact[i0:i1, k, 2].mean(), run.zc[segs, k].mean(),
            run.j0[segs, k].mean())


def test_wheel_in_rut_sinks_and_slips_less_than_wheel_of_equal_load_on_virgin_soil(rocky7,
                                                                                    first):
    """Travel 0.16-0.30 m: the middle wheels (24 N) are still ahead of the front wheels' ruts
    (which start 0.34 m ahead of them), the rear wheels (24 N) follow the middle wheels' ruts."""
    front, middle, rear = (row[0] for row in wheel_rows(rocky7))
    i0, i1 = _window(first, 0.16, 0.30)
    R, b = float(rocky7.wheel_radius[0]), float(rocky7.wheel_width[0])
    h, s, W, zc, j0 = zip(*(_wheel_means(first, i0, i1, k) for k in (front, middle, rear)))
    assert zc[0] == 0.0 and zc[1] == 0.0 and zc[2] > 0.5 * h[1]  # premise: who is in a rut
    assert W[2] == pytest.approx(W[1], rel=0.02)  # premise: middle and rear carry equal loads
    for k in range(3):  # dynamics vs quasi-static wheel at the same load, slip and soil state
        p = wheel_params(SOIL, R, b, zc=zc[k], j0=j0[k])
        assert h[k] == pytest.approx(sinkage_for_load(p, s[k], W[k]), rel=0.02)
    virgin_rear = sinkage_for_load(wheel_params(SOIL, R, b), s[2], W[2])
    assert h[2] < 0.75 * virgin_rear and h[2] < 0.75 * h[1]
    slip = first.wheel_slip(i0, i1)
    assert slip[rear] < slip[middle] - 0.01
    # slip from wheel-centre travel and wheel rotation vs the contact model's slip ratio
    np.testing.assert_allclose(slip, first.slip_ratio[i0:i1].mean(0), atol=2e-3)


def test_ruts_lower_sinkage_against_virgin_control_run(rocky7, first):
    control = drive_straight_on_soil(rocky7, SOIL, imprint=False, **RUN)
    assert control.mass == control.mass0 and np.all(control.zc == 0.0)
    rows = wheel_rows(rocky7)
    for a, b in ((0.16, 0.30), (0.37, 0.42)):  # later: the middle wheels enter the front ruts
        i0, i1 = _window(first, a, b)
        c0, c1 = _window(control, a, b)
        h = first.sinkage[i0:i1].mean(0)
        hc = control.sinkage[c0:c1].mean(0)
        front = rows[0]
        np.testing.assert_allclose(h[front], hc[front], rtol=0.02)  # always on virgin soil
        assert np.all(h[rows[2]] < 0.75 * hc[rows[2]])
    assert np.all(h[rows[1]] < 0.85 * hc[rows[1]])


def test_soil_mass_conserved_over_the_run(rocky7, first):
    assert abs(first.mass - first.mass0) <= 1e-9 * first.mass0
    run = drive_straight_on_soil(rocky7, SOIL, duration=2.0, xi=0.5)  # berms and avalanching
    assert abs(run.soil_map.soil_mass() - run.mass0) <= 1e-9 * run.mass0
    assert run.soil_map.h.max() > 0.3  # berms beside the ruts
    run.soil_map.relax()  # the vehicle gone: the soil its wheels held slides too
    assert run.soil_map.max_slope() <= np.tan(run.soil_map.repose) + 1e-6
    assert abs(run.soil_map.soil_mass() - run.mass0) <= 1e-9 * run.mass0


def test_later_run_sees_the_ruts(rocky7, first):
    dtm = first.soil_map
    ter = first.terrain
    X, Y = dtm.node_xy()
    np.testing.assert_allclose(ter.height(X, Y), dtm.h, atol=1e-12)
    x_mid = 0.5
    assert ter.height(x_mid, 0.0) == 0.3  # untouched between the wheel tracks
    for y in (-0.2, 0.2):  # the three wheels' ruts on each track
        assert ter.height(x_mid - 0.2, y) < 0.3 - 0.005
    second = drive_straight_on_soil(rocky7, SOIL, soil_map=dtm, **RUN)
    i0, i1 = _window(first, 0.05, 0.25)
    j0, j1 = _window(second, 0.05, 0.25)
    h1 = first.sinkage[i0:i1].mean(0)
    h2 = second.sinkage[j0:j1].mean(0)
    assert np.all(h2 < 0.85 * h1)
    assert abs(dtm.soil_mass() - first.mass0) <= 1e-9 * first.mass0


def test_without_imprint_segments_reproduce_one_simulation(rocky7):
    """Segmenting carries (q, qdot) over unchanged: only the force balance's warm start at each
    segment start differs from one uninterrupted simulation."""
    run = drive_straight_on_soil(rocky7, SOIL, duration=1.0, imprint=False)
    ter = run.terrain
    q0, qd0 = start_state(rocky7, ter, 0.0, 0.1)
    U = np.tile(straight_wheel_rates(rocky7, 0.1), (100, 1))
    tr = simulate_dynamics(rocky7, ter, q0, qd0, U, 0.01, contact_model="bekker",
                           contact_params=bekker_params(SOIL))
    assert run.segment_start.size > 5
    np.testing.assert_allclose(run.trajectory.q, tr.q, atol=1e-6)
    np.testing.assert_allclose(run.sinkage[:-1], np.maximum(-tr.dz, 0.0), atol=1e-6)


def test_bad_input(rocky7, first):
    q0, qd0 = first.trajectory.q[0], first.trajectory.qdot[0]
    U = np.zeros((3, len(rocky7.actuated_joints)))
    with pytest.raises(ParameterError, match=r"contact_params\.zc is set from the soil map"):
        simulate_on_soil(rocky7, first.soil_map, q0, qd0, U, 0.01, contact_params={"zc": 0.01})
    with pytest.raises(ParameterError, match="margin must exceed the node spacing"):
        simulate_on_soil(rocky7, first.soil_map, q0, qd0, U, 0.01, margin=0.005)


def test_held_soil_does_not_avalanche():
    from wmr_model.terrain.deformable import DeformableTerrain

    dtm = DeformableTerrain.flat((0.0, 0.4), (-0.1, 0.1), 0.01, 1500.0, np.radians(30.0),
                                 z=0.3)
    m0 = dtm.soil_mass()
    step = dtm.footprint((0.0, 0.0), (0.2, 0.0), 0.05)
    dtm.press(step, 0.02, relax=False)  # a rut 2 cm deep ending in a step at x = 0.2
    held = dtm.footprint((0.2 + 1e-9, 0.0), (0.3, 0.0), 0.05)
    before = dtm.h.copy()
    dtm.relax(fixed=held)
    np.testing.assert_array_equal(dtm.h[held], before[held])
    X, _ = dtm.node_xy()
    rut = step & (X < 0.15)
    assert dtm.h[rut].sum() > before[rut].sum() + 0.01  # the free walls slid in
    assert abs(dtm.soil_mass() - m0) <= 1e-12 * m0
    free = ~held
    free[:, 1:] &= ~held[:, :-1]  # pairs with a held node are exempt from the slope limit
    assert np.abs(np.diff(dtm.h, axis=1))[free[:, 1:] & free[:, :-1]].max() <= (
        0.01 * np.tan(np.radians(30.0)) + 1e-9)
