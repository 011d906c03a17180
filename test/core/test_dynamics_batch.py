"""Batched dynamics (issue 10): N command sequences in one compiled call on all cores.

Oracle: each trajectory run alone by simulate_dynamics. The batch must reproduce it bit for bit
(own workspace per trajectory, including the tracked vehicles' track-share scratch), whatever
the number of threads; errors raised in a worker thread must reach the caller as they do from a
single run.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from wmr_model._jit import JIT_ENABLED, num_threads, set_num_threads
from wmr_model.dynamics.simulate import simulate_dynamics, simulate_dynamics_batch
from wmr_model.errors import ParameterError, ShapeError
from wmr_model.experiments import dynamic as sc
from wmr_model.io.vehicles import load_vehicle
from wmr_model.kinematics import initialize_contact
from wmr_model.prediction.controllers import FLIPPERS_FLAT, track_rates
from wmr_model.terrain import surface as tr

DT = 0.04
STEPS = 12


@pytest.fixture(scope="module")
def zoe():
    return load_vehicle("zoe")


@pytest.fixture(scope="module")
def rough():
    return tr.rough(0.15, 0.8, seed=3, x_range=(-3, 4), y_range=(-3, 3))


def _commands(model, n, seed=0):
    """Straight-line wheel rates scaled per trajectory and per wheel (the runs differ)."""
    rng = np.random.default_rng(seed)
    base = sc.straight_wheel_rates(model, 1.0)
    return np.tile(base, (n, STEPS, 1)) * rng.uniform(0.6, 1.4, (n, 1, base.size))


def _assert_same(batch, n, single):
    for name in ("q", "qdot", "iterations", "cost", "f_contact", "dz"):
        np.testing.assert_array_equal(getattr(batch, name)[n], getattr(single, name), name)


@pytest.mark.parametrize("threads", [1, 2])
def test_batch_equals_single_runs(zoe, rough, threads):
    if threads > num_threads() and JIT_ENABLED:
        pytest.skip("needs 2 threads")
    U = _commands(zoe, 5)
    q0, qd0 = sc._moving_start(zoe, rough, 1.0)
    before = num_threads()
    set_num_threads(threads)
    try:
        batch = simulate_dynamics_batch(zoe, rough, q0, qd0, U, DT, contact_model="pacejka")
    finally:
        set_num_threads(before)
    assert batch.q.shape == (5, STEPS + 1, zoe.nq)
    assert batch.f_contact.shape == (5, STEPS, zoe.nc, 3)
    np.testing.assert_array_equal(batch.t, np.arange(STEPS + 1) * DT)
    for n in range(5):
        single = simulate_dynamics(zoe, rough, q0, qd0, U[n], DT, contact_model="pacejka")
        _assert_same(batch, n, single)
    # the commands differ, so do the runs: the comparison above is not trivially true
    assert np.ptp(batch.q[:, -1, 4]) > 1e-3


def test_batch_with_one_start_per_trajectory_and_options(zoe, rough):
    U = _commands(zoe, 4, seed=1)
    starts = [sc._moving_start(zoe, rough, v, yaw) for v, yaw in
              ((0.5, 0.0), (1.0, 0.3), (1.5, -0.2), (0.8, 3.0))]
    q0 = np.array([s[0] for s in starts])
    qd0 = np.array([s[1] for s in starts])
    opts = {"contact_model": "piecewise_linear", "fused_bias": True, "collision": "warm"}
    batch = simulate_dynamics_batch(zoe, rough, q0, qd0, U, DT, **opts)
    for n in range(4):
        _assert_same(batch, n, simulate_dynamics(zoe, rough, q0[n], qd0[n], U[n], DT, **opts))


def test_tracked_batch_has_its_own_track_scratch():
    """Absolem's belt patches use per-step scratch (load shares, patch sinkage) that parallel
    trajectories must not share."""
    absolem = load_vehicle("absolem")
    ground = tr.flat()
    q = absolem.neutral_state()
    q[9:13] = FLIPPERS_FLAT
    q0, _ = initialize_contact(absolem, ground, q)
    rng = np.random.default_rng(2)
    U = np.stack([track_rates(absolem, np.full(20, a), np.full(20, b))
                  for a, b in rng.uniform(-0.5, 1.0, (4, 2))])
    batch = simulate_dynamics_batch(absolem, ground, q0, np.zeros(absolem.nv), U, 0.01)
    for n in range(4):
        _assert_same(batch, n, simulate_dynamics(absolem, ground, q0, np.zeros(absolem.nv),
                                                 U[n], 0.01))


def test_error_in_a_worker_thread_reaches_caller(zoe):
    """A massless vehicle has a singular joint-space inertia: every trajectory raises, in the
    calling thread and the helper, and the caller gets the error of a single run."""
    massless = dataclasses.replace(zoe, mass=np.zeros_like(zoe.mass),
                                   inertia=np.zeros_like(zoe.inertia))
    ground = tr.flat()
    q0, qd0 = sc._moving_start(zoe, ground, 1.0)
    U = np.tile(sc.straight_wheel_rates(zoe, 1.0), (4, 3, 1))
    with pytest.raises(ValueError, match="not positive definite"):
        simulate_dynamics(massless, ground, q0, qd0, U[0], DT)
    with pytest.raises(ValueError, match="not positive definite"):
        simulate_dynamics_batch(massless, ground, q0, qd0, U, DT)


def test_bad_batch_input(zoe, rough):
    q0, qd0 = sc._moving_start(zoe, rough, 1.0)
    U = _commands(zoe, 3)
    with pytest.raises(ShapeError, match="commands"):
        simulate_dynamics_batch(zoe, rough, q0, qd0, U[0], DT)  # (T, na): not a batch
    with pytest.raises(ShapeError, match="q0"):
        simulate_dynamics_batch(zoe, rough, np.tile(q0, (4, 1)), qd0, U, DT)
    with pytest.raises(ShapeError, match="qdot0"):
        simulate_dynamics_batch(zoe, rough, q0, qd0[:-1], U, DT)
    with pytest.raises(ParameterError, match="N >= 1"):
        simulate_dynamics_batch(zoe, rough, q0, qd0, U[:0], DT)
    with pytest.raises(ParameterError, match="dt"):
        simulate_dynamics_batch(zoe, rough, q0, qd0, U, -0.1)
    with pytest.raises(TypeError, match="warp"):
        simulate_dynamics_batch(zoe, rough, q0, qd0, U, DT, warp=True)


def test_batch_throughput_report(zoe, rough):
    """The bench's measurement runs the same candidates both ways and finds them equal."""
    r = sc.dynamics_batch_throughput(zoe, rough, candidates=3, duration=0.2, repeats=1,
                                     contact_model="pacejka")
    assert r["identical"] is True
    assert (r["candidates"], r["steps"]) == (3, 5)
    for key in ("batch_candidate_steps_per_s", "single_candidate_steps_per_s", "speedup"):
        assert np.isfinite(r[key]) and r[key] > 0, key
