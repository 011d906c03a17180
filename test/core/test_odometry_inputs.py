"""Odometry3D input handling (issue 19): encoder layouts per message, empty arrays, gates."""

from __future__ import annotations

import numpy as np
import pytest

from wmr_model.errors import BagError
from wmr_model.estimation.odometry import Odometry3D, encoder_layouts, match_encoder_layout
from wmr_model.io.vehicles import load_vehicle

SIDES = ["left_wheel_joint", "right_wheel_joint"]
PER_WHEEL = ["front_left_wheel", "rear_left_wheel", "front_right_wheel", "rear_right_wheel"]


@pytest.fixture(scope="module")
def warthog():
    return load_vehicle("warthog")


def test_layouts_and_their_match(warthog):
    lay = encoder_layouts(warthog)
    assert list(lay) == ["encoder_map", "per_wheel"]
    assert lay["encoder_map"] == {"left_wheel_joint": [1, 2], "right_wheel_joint": [4, 5]}
    assert list(lay["per_wheel"]) == PER_WHEEL
    assert match_encoder_layout(lay, SIDES + ["x"]) == ("encoder_map", [])
    assert match_encoder_layout(lay, PER_WHEEL) == ("per_wheel", [])
    assert match_encoder_layout(lay, ["left_wheel_joint"]) == (None, ["right_wheel_joint"])
    assert list(encoder_layouts(load_vehicle("diffdrive"))) == ["per_wheel"]


def test_replay_uses_the_same_layouts(warthog):
    from wmr_model.pipelines.replay import _encoder_map

    assert _encoder_map(warthog, SIDES) is None
    assert _encoder_map(warthog, PER_WHEEL) == {}
    with pytest.raises(BagError, match=r"neither the encoder_map joints \['left_wheel_joint'"):
        _encoder_map(warthog, ["front_left_wheel"])


def _straight(odo, names, w, n=100, dt=0.02, positions=False):
    for k in range(n + 1):
        t = 10.0 + k * dt
        if positions:
            res = odo.update_encoders(t, names, positions=[w * k * dt] * len(names))
        else:
            res = odo.update_encoders(t, names, velocities=[w] * len(names))
        assert res.accepted, odo.diagnostics.last_rejection
    return odo.pose[0]


def test_per_wheel_and_encoder_map_messages_give_the_same_straight_line(warthog):
    r = float(warthog.wheel_radius[0])
    x_map = _straight(Odometry3D(warthog, use_gyro=False), SIDES, 2.0)
    x_wheel = _straight(Odometry3D(warthog, use_gyro=False), PER_WHEEL, 2.0)
    # closed form: v = w r over 2 s
    np.testing.assert_allclose(x_map[:2], [2.0 * r * 2.0, 0.0], atol=1e-9)
    np.testing.assert_allclose(x_wheel, x_map, atol=1e-12)
    # layouts may alternate message by message
    odo = Odometry3D(warthog, use_gyro=False)
    for k in range(101):
        names = SIDES if k % 2 else PER_WHEEL
        assert odo.update_encoders(10.0 + 0.02 * k, names, velocities=[2.0] * len(names)).accepted
    np.testing.assert_allclose(odo.pose[0], x_map, atol=1e-12)
    assert odo.diagnostics.steps == 100


def test_empty_velocity_differentiates_positions_and_both_empty_is_rejected(warthog):
    x_vel = _straight(Odometry3D(warthog, use_gyro=False), PER_WHEEL, 2.0)
    x_pos = _straight(Odometry3D(warthog, use_gyro=False), PER_WHEEL, 2.0, positions=True)
    np.testing.assert_allclose(x_pos, x_vel, atol=1e-9)
    odo = Odometry3D(warthog, use_gyro=False)
    res = odo.update_encoders(1.0, SIDES, positions=[], velocities=[])
    assert not res.accepted and res.reason == "no_values"
    assert "both position and velocity are empty" in odo.diagnostics.last_rejection


def test_absurd_gyro_sample_is_rejected_and_changes_nothing(warthog):
    def run(spike):
        odo = Odometry3D(warthog, use_gyro=True)
        for k in range(51):
            t = 10.0 + 0.02 * k
            odo.update_imu(t - 0.01, [0.0, 0.0, 0.2])
            if spike and k == 25:
                res = odo.update_imu(t - 0.005, [0.0, 0.0, 1e6])
                assert res.reason == "implausible"
            odo.update_encoders(t, SIDES, velocities=[2.0, 2.0])
        return odo

    clean, spiked = run(False), run(True)
    np.testing.assert_array_equal(spiked.q, clean.q)
    assert spiked.diagnostics.rejected["implausible"] == 1
    assert "angular_velocity.z = 1e+06 rad/s > max_angular_rate 35" in \
        spiked.diagnostics.last_rejection


def test_wheel_rate_spike_is_rejected_by_the_acceleration_gate(warthog):
    odo = Odometry3D(warthog, use_gyro=False)
    ref = Odometry3D(warthog, use_gyro=False)
    for k in range(51):
        t = 10.0 + 0.02 * k
        w = 40.0 if k == 20 else 2.0  # 12 m/s at the rim: under the speed gate, 500 m/s^2
        res = odo.update_encoders(t, SIDES, velocities=[w, w])
        if k != 20:
            ref.update_encoders(t, SIDES, velocities=[2.0, 2.0])
        assert res.accepted == (k != 20)
    assert odo.diagnostics.rejected["implausible"] == 1
    assert "max_wheel_acceleration" in odo.diagnostics.last_rejection
    np.testing.assert_allclose(odo.q, ref.q, atol=1e-12)
    fast = Odometry3D(warthog, use_gyro=False, max_wheel_speed=5.0)
    fast.update_encoders(0.0, SIDES, velocities=[20.0, 20.0])
    res = fast.update_encoders(0.02, SIDES, velocities=[20.0, 20.0])
    assert res.reason == "implausible" and "rim speed 6 m/s" in fast.diagnostics.last_rejection
