"""Steady-state skid steering with Janosi-Hanamoto track shear (wmr_model.kinematics.skid_steer).

Oracles: the Coulomb limit in closed form (derived here from the Coulomb integrals, not from the
module), mirror symmetry, straight motion, the balance residuals, and a direct check that the
yaw efficiency depends on the turn radius once the shear modulus K is finite.
"""

import math

import numpy as np
import pytest
from scipy.optimize import brentq

from wmr_model.errors import ParameterError
from wmr_model.kinematics.skid_steer import (
    SkidSteerVehicle,
    balance_residual,
    steady_state_motion,
    track_forces,
    yaw_efficiency,
)

L, B = 0.5, 0.4


def coulomb_offset(length, gauge, ratio=1.0):
    """Lateral distance a of each track's instantaneous centre outboard of its centre line, for
    Coulomb friction with uniform pressure and no external force.

    With x0 = 0 (ICRs level with the cg) and the ICRs at +-(B/2 + a), each track's slip
    direction at x is (a, x)/sqrt(a^2 + x^2) (times the yaw sign). Longitudinal force per unit
    load: 2 a asinh(L / 2a) (int of a / sqrt(a^2 + x^2)); resisting moment from the lateral
    stress: ratio * int x^2 / sqrt(a^2 + x^2) dx = ratio [(L/2) sqrt(a^2 + L^2/4)
    - a^2 asinh(L / 2a)]; driving moment of the two tracks' opposite longitudinal forces: B times
    one track's force. Moment balance in a.
    """
    def g(a):
        s = math.asinh(length / (2.0 * a))
        resist = ratio * (0.5 * length * math.sqrt(a * a + 0.25 * length ** 2) - a * a * s)
        return resist - gauge * a * s

    return brentq(g, 1e-9, 10.0 * length, xtol=1e-15)


def test_coulomb_limit_matches_closed_form_at_every_radius():
    a = coulomb_offset(L, B)
    chi = 1.0 + 2.0 * a / B
    assert chi == pytest.approx(1.346, abs=1e-3)  # the number of the analysis
    for K in (0.0, 1e-7):
        veh = SkidSteerVehicle(length=L, gauge=B, shear_k=K, n_points=4000)
        for V_l, V_r in ((-0.3, 0.3), (0.1, 0.3), (0.25, 0.3), (0.3, -0.05)):
            m = steady_state_motion(veh, V_l, V_r)
            # closed form: v = (V_l + V_r)/2, no lateral slip, omega = (V_r - V_l)/(B + 2a)
            assert m.v_lon == pytest.approx(0.5 * (V_l + V_r), abs=2e-5)
            assert m.v_lat == pytest.approx(0.0, abs=2e-5)
            assert m.yaw_rate == pytest.approx((V_r - V_l) / (B + 2.0 * a), rel=2e-4)
            np.testing.assert_allclose(m.icr_y, [0.5 * B + a, -0.5 * B - a], atol=3e-4)


def test_coulomb_yaw_efficiency_does_not_depend_on_radius():
    veh = SkidSteerVehicle(length=L, gauge=B, shear_k=0.0)
    chis = [yaw_efficiency(veh, R) for R in (0.0, 0.3, 1.0, 3.0)]
    np.testing.assert_allclose(chis, chis[0], rtol=1e-4)


def test_anisotropic_coulomb_matches_closed_form():
    veh = SkidSteerVehicle(length=L, gauge=B, shear_k=0.0, mu_lat=1.5 * 0.8, n_points=4000)
    a = coulomb_offset(L, B, ratio=1.5)
    assert yaw_efficiency(veh, 0.0) == pytest.approx(1.0 + 2.0 * a / B, rel=2e-4)
    assert yaw_efficiency(veh, 2.0) == pytest.approx(1.0 + 2.0 * a / B, rel=2e-4)


def test_finite_shear_modulus_makes_yaw_efficiency_depend_on_radius():
    veh = SkidSteerVehicle(length=L, gauge=B, shear_k=0.01)
    chi = np.array([yaw_efficiency(veh, R) for R in (0.0, 1.0, 5.0)])
    # spinning: belts long in contact relative to their sliding, friction fully built up,
    # close to Coulomb; wide arcs: slip builds little shear, the vehicle turns more easily
    assert abs(chi[0] - (1.0 + 2.0 * coulomb_offset(L, B) / B)) < 0.03
    assert chi[0] - chi[2] > 0.05
    assert chi[0] > chi[1] > chi[2]


def test_efficiency_does_not_depend_on_speed_without_inertia():
    # without the centripetal term the balance is homogeneous in the speeds (j depends on the
    # slip-to-belt-speed ratios only)
    veh = SkidSteerVehicle(length=L, gauge=B, shear_k=0.01)
    assert yaw_efficiency(veh, 1.0, speed=0.1) == pytest.approx(yaw_efficiency(veh, 1.0, 1.0),
                                                                rel=1e-8)


@pytest.mark.parametrize("centripetal", [False, True])
def test_mirror_commands_mirror_the_motion(centripetal):
    veh = SkidSteerVehicle(length=L, gauge=B, shear_k=0.01, centripetal=centripetal,
                           cg_height=0.2)
    a = steady_state_motion(veh, 0.1, 0.4)
    b = steady_state_motion(veh, 0.4, 0.1)
    assert b.v_lon == pytest.approx(a.v_lon, rel=1e-9)
    assert b.v_lat == pytest.approx(-a.v_lat, abs=1e-12)
    assert b.yaw_rate == pytest.approx(-a.yaw_rate, rel=1e-9)
    # reversing both belts reverses the motion (the belts enter at the other end)
    c = steady_state_motion(veh, -0.1, -0.4)
    assert c.v_lon == pytest.approx(-a.v_lon, rel=1e-9)
    assert c.yaw_rate == pytest.approx(-a.yaw_rate, rel=1e-9)


def test_straight_command_drives_straight():
    for K in (0.0, 0.01):
        m = steady_state_motion(SkidSteerVehicle(shear_k=K), 0.3, 0.3)
        assert (m.v_lon, m.v_lat, m.yaw_rate) == (0.3, 0.0, 0.0)
        np.testing.assert_array_equal(track_forces(SkidSteerVehicle(shear_k=K), 0.3, 0.0, 0.0,
                                                   0.3, 0.3), 0.0)


def test_balance_residuals_vanish_and_centripetal_term_shifts_the_icr():
    veh = SkidSteerVehicle(length=L, gauge=B, shear_k=0.005, centripetal=True, cg_height=0.3,
                           mass=22.0)
    m = steady_state_motion(veh, 0.6, 1.5)
    r = balance_residual(veh, m.v_lon, m.v_lat, m.yaw_rate, 0.6, 1.5)
    assert np.max(np.abs(r)) < 1e-8
    # the ground must supply the centripetal force m omega v: net track force points inward
    F = track_forces(veh, m.v_lon, m.v_lat, m.yaw_rate, 0.6, 1.5)
    assert F[1] == pytest.approx(veh.mass * m.yaw_rate * m.v_lon, rel=1e-6)
    assert F[1] > 0.0
    still = steady_state_motion(SkidSteerVehicle(length=L, gauge=B, shear_k=0.005), 0.6, 1.5)
    assert m.icr_x != pytest.approx(still.icr_x, abs=1e-3)


def test_bad_input_is_named():
    with pytest.raises(ParameterError, match=r"SkidSteerVehicle.gauge: must be finite and > 0"):
        SkidSteerVehicle(gauge=0.0)
    with pytest.raises(ParameterError, match=r"SkidSteerVehicle.shear_k: must be finite and >= 0"):
        SkidSteerVehicle(shear_k=-1.0)
    with pytest.raises(ParameterError, match=r"belt speeds must be finite"):
        steady_state_motion(SkidSteerVehicle(), math.nan, 0.1)
    with pytest.raises(ParameterError, match=r"radius: must be finite and >= 0 m"):
        yaw_efficiency(SkidSteerVehicle(), -1.0)
