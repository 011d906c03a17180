"""Chunked planner rollouts (:mod:`wmr_model.prediction.rollouts`) against the unchunked core.

Chunked runs equal one :func:`wmr_model.prediction.predict.predict` call bit for bit; flags OR the states
between samples like predict does; a candidate leaving a height map or blowing up is flagged
INVALID from its exact step; the memory estimate is the documented sum of array sizes; a
deadline returns the first candidates; a 2D pose is placed on the terrain.
"""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

from wmr_model.errors import ParameterError
from wmr_model.io.vehicles import load_vehicle
from wmr_model.prediction.predict import predict
from wmr_model.prediction.rollouts import (
    INVALID,
    LIFTOFF_FORCE_FRACTION,
    LIFTOFF_HEIGHT_TOL,
    WHEEL_LIFTOFF,
    dynamic_flags,
    invalid_states,
    or_since_previous,
    place_on_terrain,
    rollout,
    rollout_bytes,
    sample_steps,
    terrain_extent,
)
from wmr_model.terrain import surface as tr


@pytest.fixture(scope="module")
def diffdrive():
    return load_vehicle("diffdrive")


def _commands(C, T, seed=0):
    return np.random.default_rng(seed).uniform(0.0, 5.0, (C, T, 2))


def test_sample_steps_and_or_since_previous():
    np.testing.assert_array_equal(sample_steps(20, 7), [0, 7, 14, 20])
    np.testing.assert_array_equal(sample_steps(20, 100), [0, 20])
    np.testing.assert_array_equal(sample_steps(3, 1), [0, 1, 2, 3])
    with pytest.raises(ParameterError, match="every and T must be integers >= 1"):
        sample_steps(10, 0)
    rng = np.random.default_rng(1)
    flags = rng.integers(0, 16, (3, 21)).astype(np.uint8)
    steps = sample_steps(20, 7)
    got = or_since_previous(flags, steps)
    for n in range(3):  # loop oracle
        prev = -1
        for s, t in enumerate(steps):
            want = np.bitwise_or.reduce(flags[n, prev + 1:t + 1])
            assert got[n, s] == want
            prev = t


@pytest.mark.parametrize("fidelity", ["kinematic", "enhanced"])
def test_chunked_rollout_equals_one_predict_call(diffdrive, fidelity):
    m = diffdrive
    q0 = place_on_terrain(m, tr.flat(), m.neutral_state())
    u = _commands(37, 30)
    Q = np.diag([1e-3, 1e-3, 4e-3, 2e-3, 1e-3, 1e-3])
    r = rollout(m, tr.flat(), q0, u, 0.05, fidelity=fidelity, every=4, Qprime=Q,
                slip_params={"slip.p2": -0.1}, max_chunk=5)
    p = predict(m, tr.flat(), q0, u, 0.05, fidelity=fidelity, every=4, Qprime=Q,
                slip_params={"slip.p2": -0.1})
    assert r.done == 37 and not r.partial
    np.testing.assert_array_equal(r.steps, p.steps)
    np.testing.assert_array_equal(r.q, p.q)
    np.testing.assert_array_equal(r.flags, p.flags)
    np.testing.assert_array_equal(r.ros_covariance, p.ros_covariance)
    np.testing.assert_array_equal(r.stability_margin, p.stability_margin)
    rows = np.minimum(np.arange(len(p.steps)), p.qdot.shape[1] - 1)
    np.testing.assert_array_equal(r.qdot, p.qdot[:, rows])
    assert np.all(r.invalid_step == -1)


def test_leaving_a_height_map_is_invalid_from_the_exact_step(diffdrive):
    m = diffdrive
    grid = tr.height_map(np.zeros((41, 41)), 0.1, origin=(-2.0, -2.0))
    assert terrain_extent(grid) == pytest.approx((-2.0, 2.0, -2.0, 2.0))
    q0 = place_on_terrain(m, grid, m.neutral_state())
    u = np.zeros((2, 60, 2))
    u[0] = 10.0  # 1 m/s straight ahead: leaves x = 2 m after about 2 s
    r = rollout(m, grid, q0, u, 0.05, every=20)
    full = predict(m, grid, q0, u, 0.05)
    off = invalid_states(grid, full.q)
    first = int(np.argmax(off[0]))
    assert 0 < first < 60 and full.q[0, first, 4] > 2.0 >= full.q[0, first - 1, 4]
    assert r.invalid_step.tolist() == [first, -1]  # exact, although sampled every 20 steps
    np.testing.assert_array_equal((r.flags[0] & INVALID) != 0, r.steps >= first)
    assert not np.any(r.flags[1] & INVALID)


def test_memory_estimate_is_the_sum_of_the_arrays(diffdrive):
    m = diffdrive
    C, T, every = 1000, 100, 10
    S = 11
    parts = rollout_bytes(m, "enhanced", C, T, every, covariance=True,
                          response_values_per_sample=43, chunk=64)
    assert parts["commands"] == 8 * C * T * 2
    assert parts["results"] == C * (8 * S * (m.nq + m.nv + 1 + 36) + S + 4)
    assert parts["response"] == C * 2 * S * 43 * 8
    assert parts["total"] == sum(v for k, v in parts.items() if k != "total")
    # the working arrays scale with the chunk, not with C
    big = rollout_bytes(m, "enhanced", C, T, every, covariance=True,
                        response_values_per_sample=43, chunk=128)
    assert big["scratch"] == 2 * parts["scratch"]
    with pytest.raises(ParameterError, match="fidelity: must be one of"):
        rollout_bytes(m, "magic", C, T, every, covariance=True, response_values_per_sample=1)


def test_deadline_returns_the_first_candidates(diffdrive):
    m = diffdrive
    q0 = place_on_terrain(m, tr.flat(), m.neutral_state())
    u = _commands(3000, 200)
    r = rollout(m, tr.flat(), q0, u, 0.05, every=200, deadline=time.perf_counter() + 0.05)
    assert r.partial and 0 < r.done < 3000 and r.q.shape[0] == r.done
    p = predict(m, tr.flat(), q0, u[:r.done], 0.05, every=200)
    np.testing.assert_array_equal(r.q, p.q)


def test_two_d_pose_is_placed_on_a_slope(diffdrive):
    m = diffdrive
    slope = tr.inclined_plane(math.radians(10.0), math.radians(30.0))
    q = m.neutral_state()
    q[0:4] = [math.cos(0.2), 0.0, 0.0, math.sin(0.2)]
    q[4:7] = [1.0, 2.0, 0.0]
    q0 = place_on_terrain(m, slope, q)
    np.testing.assert_array_equal(q0[4:6], [1.0, 2.0])
    # yaw kept, wheels on the plane: kinematic run standing still raises no flag
    w, x, y, z = q0[0:4]
    assert math.atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z)) == pytest.approx(0.4)
    p = predict(m, slope, q0, np.zeros((1, 20, 2)), 0.05)
    assert np.max(np.abs(p.dz)) < 1e-6
    assert not np.any(p.flags)


def test_dynamic_liftoff_flag_ignores_round_off_of_a_placed_wheel(diffdrive):
    """A wheel on the terrain to round-off (dz = +5e-17 m, as contact initialization leaves
    it on some CPUs) carrying its static load is not lifted; one clear of the terrain by more
    than the tolerance, or carrying no load, is. Point t takes step t's values."""
    m = diffdrive
    load = m.total_mass * 9.80665 / m.nw
    f = np.zeros((3, m.nw, 3))
    f[:, :, 2] = load
    dz = np.zeros((3, m.nw))
    dz[0, 0] = 5.5e-17  # placed: round-off above the terrain
    dz[1, 1] = 10 * LIFTOFF_HEIGHT_TOL  # clear of it
    f[2, 2, 2] = 0.5 * LIFTOFF_FORCE_FRACTION * load  # touching but unloaded
    flags = dynamic_flags(m, f, dz)
    assert [int(v) & WHEEL_LIFTOFF for v in flags] == [0, WHEEL_LIFTOFF, WHEEL_LIFTOFF,
                                                       WHEEL_LIFTOFF]
