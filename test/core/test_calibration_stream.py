"""Streaming IPEM driver (:mod:`wmr_model.calibration.stream`) against the batch calibrator.

Independent computations: a stream fed message by message must close the intervals of
:func:`select_intervals` over the whole log and reproduce :meth:`OnlineCalibrator.run` on it
(same inputs, same EKF), whatever the arrival order of the streams. Plus the robustness rules:
non-finite/duplicate/out-of-order samples, time jumps, encoder gaps, position-only encoders.
"""

import math

import numpy as np
import pytest

from wmr_model.calibration import (
    IntervalPolicy,
    ModelPredictor,
    OnlineCalibrator,
    select_intervals,
    synthetic_log,
)
from wmr_model.calibration.stream import StreamCalibrator
from wmr_model.errors import ParameterError
from wmr_model.io.vehicles import load_vehicle
from wmr_model.terrain import surface as tr
from wmr_model.vehicles.parameters import with_parameters

RADIUS = "wheel.front_left_wheel.radius"
NAMES = ["slip.p6", RADIUS, "noise.U.wz_wz", "noise.U.vx_vx"]
STD0 = {"slip.p6": 0.5, RADIUS: 0.02, "noise.U.wz_wz": 0.05, "noise.U.vx_vx": 0.05}


@pytest.fixture(scope="module")
def setup():
    nominal = load_vehicle("warthog")
    dims = {RADIUS: 0.315}
    run = synthetic_log(with_parameters(nominal, dims), tr.flat(), duration=40.0, dt=0.02,
                        slip={"slip.p6": -0.3}, Qprime=np.diag([0, 0, 2e-3, 4e-3, 2e-3, 0]),
                        truth=dims, seed=4)
    pred = ModelPredictor(nominal, tr.flat(), dt=0.05)

    def make():
        return OnlineCalibrator(pred, NAMES, x0={"noise.U.wz_wz": 0.1, "noise.U.vx_vx": 0.1},
                                std0=STD0)

    return run.log, make


def _events(log, pose_delay=0.0):
    """(arrival key, kind, index): poses arrive ``pose_delay`` s (stamp time) early/late."""
    ev = [(t, 0, k) for k, t in enumerate(log.joint_time)]
    ev += [(t + pose_delay, 1, k) for k, t in enumerate(log.pose_time)]
    return sorted(ev)


def _feed(sc, log, events):
    out = []
    for _, kind, k in events:
        if kind == 0:
            out += sc.add_encoders(log.joint_time[k], log.joint_names,
                                   velocities=log.joint_rate[k])
        else:
            out += sc.add_pose(log.pose_time[k], log.pose[k], log.pose_covariance[k])
    return out


@pytest.mark.parametrize("pose_delay", [0.0, -1.5, 0.7])
def test_stream_equals_batch_whatever_the_arrival_order(setup, pose_delay):
    log, make = setup
    policy = IntervalPolicy("time", 2.0)
    iv = select_intervals(log.pose_time, policy)
    batch = make()
    batch.run(log, iv)
    sc = StreamCalibrator(make, log.joint_names, policy)
    out = _feed(sc, log, _events(log, pose_delay))
    assert [(o.t0, o.t1) for o in out] == [tuple(log.pose_time[i]) for i in iv]
    assert all(o.record is not None for o in out)
    X = np.array([o.record.x for o in out])
    np.testing.assert_allclose(X, [h.x for h in batch.history], rtol=0, atol=1e-10)
    np.testing.assert_allclose(sc.calibrator.P, batch.P, rtol=1e-9, atol=1e-15)
    assert sc.diagnostics.intervals == len(iv) and sc.diagnostics.rejected_total == 0


@pytest.mark.parametrize("policy", [IntervalPolicy("time", 1.0, overlap="sliding"),
                                    IntervalPolicy("distance", 3.0),
                                    IntervalPolicy("distance", 3.0, overlap="sliding"),
                                    IntervalPolicy("time", 2.0, min_distance=2.5)])
def test_stream_closes_the_intervals_of_select_intervals(setup, policy):
    log, make = setup
    iv = select_intervals(log.pose_time, policy, log.pose[:, 4:7])
    sc = StreamCalibrator(make, log.joint_names, policy)
    sc.calibrator.update = lambda lg, i0, i1: None  # interval bookkeeping only
    seen = []
    sc._run = lambda p, lo, hi: seen.append((p.t0, p.t1)) or []
    _feed(sc, log, _events(log))
    assert seen == [tuple(log.pose_time[i]) for i in iv]


def test_position_only_encoders_are_differenced(setup):
    log, make = setup
    # positions whose differences reproduce the logged rates at the logged (mid) stamps
    dt = float(log.joint_time[1] - log.joint_time[0])
    t_pos = np.concatenate([[log.joint_time[0] - dt / 2], log.joint_time + dt / 2])
    pos = np.vstack([np.zeros(len(log.joint_names)), np.cumsum(log.joint_rate * dt, axis=0)])
    policy = IntervalPolicy("time", 2.0)
    batch = make()
    batch.run(log, select_intervals(log.pose_time, policy)[:5])
    sc = StreamCalibrator(make, log.joint_names, policy)
    ev = sorted([(t, 0, k) for k, t in enumerate(t_pos)]
                + [(t, 1, k) for k, t in enumerate(log.pose_time)])
    out = []
    for _, kind, k in ev:
        if kind == 0:
            out += sc.add_encoders(t_pos[k], log.joint_names, positions=pos[k])
        else:
            out += sc.add_pose(log.pose_time[k], log.pose[k], log.pose_covariance[k])
        if len(out) == 5:
            break
    np.testing.assert_allclose(out[-1].record.x, batch.history[-1].x, atol=1e-8)


def test_bad_samples_are_rejected_and_counted(setup):
    log, make = setup
    sc = StreamCalibrator(make, log.joint_names, IntervalPolicy("time", 2.0))
    n = log.joint_names
    r = log.joint_rate[0]
    assert sc.add_encoders(1.0, n, velocities=r) == []
    sc.add_encoders(1.0, n, velocities=r)  # duplicate
    sc.add_encoders(0.9, n, velocities=r)  # out of order (within the jump threshold)
    sc.add_encoders(1.1, n, velocities=np.full(len(n), math.nan))
    sc.add_encoders(1.2, n[:1], velocities=r[:1])  # missing joints
    sc.add_encoders(1.3, n, velocities=r[:1])  # length mismatch
    sc.add_encoders(1.4, n)  # neither positions nor velocities
    sc.add_pose(1.0, [0.0] * 7)  # not a quaternion
    sc.add_pose(1.0, [1.0, 0, 0, 0, math.inf, 0, 0])
    sc.add_pose(1.0, [2.0, 0, 0, 0, 0, 0, 0], np.full((6, 6), math.nan))  # normalized, default
    sc.add_imu(1.0, [math.nan, 0, 0])
    d = sc.diagnostics
    assert dict(d.rejected) == {"duplicate": 1, "out_of_order": 1, "non_finite": 3,
                                "missing_joints": 1, "length_mismatch": 1, "empty": 1,
                                "bad_quaternion": 1}
    assert d.default_covariances == 1 and d.accepted["pose"] == 1
    np.testing.assert_allclose(sc._pose[0][:4], [1, 0, 0, 0])
    assert d.last_rejection.startswith("non_finite: imu angular velocity at 1.0")


def test_time_jump_clears_buffers_and_keeps_the_estimate(setup):
    log, make = setup
    policy = IntervalPolicy("time", 2.0)
    sc = StreamCalibrator(make, log.joint_names, policy)
    ev = [e for e in _events(log) if e[0] <= 20.0]
    out = _feed(sc, log, ev)
    x = sc.calibrator.x.copy()
    assert len(out) >= 9
    # bag loop: the log again from the start
    out2 = _feed(sc, log, [e for e in _events(log) if e[0] <= 10.0])
    d = sc.diagnostics
    assert d.resets == 1 and "time jump" in d.last_reset_reason
    assert len(out2) >= 4 and all(o.record is not None for o in out2)
    # the filter went on from its estimate (not restarted)
    assert len(sc.calibrator.history) == len(out) + len(out2)
    assert not np.array_equal(x, make().x)
    sc.reset()
    np.testing.assert_array_equal(sc.calibrator.x, make().x)
    assert sc.diagnostics.resets == 2 and sc._enc_t == []


def test_encoder_gap_and_missing_encoders_skip_the_interval(setup):
    log, make = setup
    policy = IntervalPolicy("time", 2.0)
    sc = StreamCalibrator(make, log.joint_names, policy, max_encoder_gap=0.2, max_wait=3.0)
    gap = (log.joint_time > 2.5) & (log.joint_time < 3.0)
    dead = log.joint_time > 30.0
    ev = [e for e in _events(log) if not (e[1] == 0 and (gap[e[2]] or dead[e[2]]))]
    out = _feed(sc, log, ev)
    skipped = {(o.t0, o.t1): o.skipped for o in out if o.record is None}
    assert skipped[(2.0, 4.0)] == "encoder_gap"
    assert "encoders_do_not_cover_interval" in skipped.values()
    assert sc.diagnostics.skipped["encoder_gap"] == 1
    assert sc.diagnostics.intervals == len(out) - len(skipped)


def test_bad_arguments_name_the_argument(setup):
    log, make = setup
    with pytest.raises(ParameterError, match="joint_names: at least one"):
        StreamCalibrator(make, [], IntervalPolicy())
    with pytest.raises(ParameterError, match="margin: must be finite and >= 0 s, got -1"):
        StreamCalibrator(make, log.joint_names, IntervalPolicy(), margin=-1)
