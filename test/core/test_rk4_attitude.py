"""RK4 keeps turning through a yaw of +-pi (stage states keep the quaternion's sign).

On flat ground a skid steer spinning in place at constant wheel rates reaches a constant yaw
rate once the contact has settled (the least-squares solution (2.38) does not depend on the
heading; the first ~1 s is the Baumgarte transient from the initial contact), so every later
step turns by the same angle with either integrator. Before the fix the RK4 stage states were flipped to a
non-negative scalar part as the yaw crossed pi, the stage derivatives cancelled and the spin
stalled at 3.138 rad.
"""

from __future__ import annotations

import numpy as np
import pytest

from wmr_model import kinematics as kin
from wmr_model.io.vehicles import load_vehicle
from wmr_model.kinematics.integrate import rescale_quaternion
from wmr_model.spatial import quat_normalize
from wmr_model.terrain.surface import flat

SETTLED = 50  # steps of the initial contact transient (2.5 s at dt 0.05)


@pytest.fixture(scope="module")
def spin():
    model = load_vehicle("warthog")
    terrain = flat()
    q0, _ = kin.initialize_contact(model, terrain, model.neutral_state())
    side = np.array([-1.0, -1.0, 1.0, 1.0])  # actuated: FL, RL, FR, RR
    T, dt = 200, 0.05
    rates = np.tile(2.0 * side, (T, 1))
    return {name: kin.simulate(model, terrain, q0, rates, dt, integrator=name)
            for name in ("euler", "rk4")}


@pytest.mark.parametrize("integrator", ["euler", "rk4"])
def test_spin_in_place_turns_at_a_constant_rate_through_pi(spin, integrator):
    yaw = np.unwrap(spin[integrator].euler[:, 2])
    step = np.diff(yaw)[SETTLED:]
    assert yaw[SETTLED] < np.pi < yaw[-1]  # the scalar part changes sign after settling
    np.testing.assert_allclose(step, step[0], rtol=1e-8, atol=0)


def test_rk4_and_euler_agree_on_the_spin(spin):
    ye = np.unwrap(spin["euler"].euler[:, 2])
    yr = np.unwrap(spin["rk4"].euler[:, 2])
    # same steady rate; they differ only by the integration error of the transient
    np.testing.assert_allclose(np.diff(yr)[SETTLED:], np.diff(ye)[SETTLED:], rtol=1e-8)
    assert abs(yr[-1] - ye[-1]) < 1e-4


def test_rescale_keeps_the_sign_and_normalize_makes_it_canonical():
    o = np.array([-0.2, 0.1, 0.0, 1.9])
    s = o.copy()
    rescale_quaternion(s)
    np.testing.assert_allclose(s, o / np.linalg.norm(o), rtol=0, atol=1e-15)
    np.testing.assert_allclose(quat_normalize(o), -o / np.linalg.norm(o), rtol=0, atol=1e-15)
