"""Interval filters (moving filter, ground-truth jump filter) in batch and streaming form, and
the bounded update history of the online calibrator.

Oracles: the filters are recomputed here from their definitions (cumulative ground-truth path,
step speeds) on a synthetic log with a stop and injected jumps; the capped history must equal
the tail of an uncapped run.
"""

import numpy as np
import pytest

from wmr_model.calibration import (
    IntervalPolicy,
    ModelPredictor,
    OnlineCalibrator,
    inject_outliers,
    select_intervals,
    synthetic_log,
)
from wmr_model.calibration.stream import StreamCalibrator
from wmr_model.errors import ParameterError
from wmr_model.io.vehicles import load_vehicle
from wmr_model.terrain import surface as tr

NAMES = ["slip.p6", "noise.U.wz_wz"]


@pytest.fixture(scope="module")
def setup():
    model = load_vehicle("warthog")
    run = synthetic_log(model, tr.flat(), duration=40.0, dt=0.02, slip={"slip.p6": -0.3},
                        Qprime=np.diag([0, 0, 2e-3, 4e-3, 2e-3, 0]), seed=5)
    log = run.log
    # a stop: hold the ground truth still for 10 s in the middle (the filters only read poses)
    pose = log.pose.copy()
    still = (log.pose_time > 15.0) & (log.pose_time < 25.0)
    k0 = int(np.argmax(still))
    pose[still] = pose[k0]
    from dataclasses import replace
    log = replace(log, pose=pose)
    pred = ModelPredictor(model, tr.flat(), dt=0.05)
    return log, pred


def _path(log):
    d = np.linalg.norm(np.diff(log.pose[:, 4:6], axis=0), axis=1)
    return np.concatenate([[0.0], np.cumsum(d)])


def test_moving_filter_drops_exactly_the_short_intervals(setup):
    log, _ = setup
    every = select_intervals(log.pose_time, IntervalPolicy("time", 2.0))
    moving = select_intervals(log.pose_time, IntervalPolicy("time", 2.0, min_distance=0.5),
                              log.pose[:, 4:7])
    s = _path(log)
    expect = every[s[every[:, 1]] - s[every[:, 0]] >= 0.5]
    assert np.array_equal(moving, expect)
    assert 0 < len(moving) < len(every)  # the stop's intervals are gone, the others stay


def test_jump_filter_drops_intervals_containing_a_jump(setup):
    log, pred = setup
    bad = np.array([20, 120])  # ground-truth samples moved by 3 m (re-localization jumps)
    jumped = inject_outliers(log, bad, offset=3.0)
    pol = IntervalPolicy("time", 2.0, max_speed=5.0)
    kept = select_intervals(jumped.pose_time, pol, jumped.pose[:, 4:7])
    every = select_intervals(jumped.pose_time, IntervalPolicy("time", 2.0))
    step_v = (np.linalg.norm(np.diff(jumped.pose[:, 4:6], axis=0), axis=1)
              / np.diff(jumped.pose_time))
    expect = [tuple(iv) for iv in every if np.all(step_v[iv[0]:iv[1]] <= 5.0)]
    assert [tuple(iv) for iv in kept] == expect
    touched = [iv for iv in every if iv[0] <= bad[0] <= iv[1] or iv[0] <= bad[1] <= iv[1]]
    assert len(kept) == len(every) - len(touched)
    # the streaming driver closes the same intervals
    sc = StreamCalibrator(lambda: OnlineCalibrator(pred, NAMES), jumped.joint_names, pol)
    seen = []
    sc._run = lambda p, lo, hi: seen.append((p.t0, p.t1)) or []
    for k in range(len(jumped.pose_time)):
        sc.add_encoders(jumped.pose_time[k], jumped.joint_names,
                        velocities=jumped.rates_at(jumped.pose_time[k]))
        sc.add_pose(jumped.pose_time[k], jumped.pose[k], jumped.pose_covariance[k])
    sc.add_encoders(jumped.pose_time[-1] + 1.0, jumped.joint_names,
                    velocities=jumped.rates_at(jumped.pose_time[-1]))
    assert seen == [tuple(jumped.pose_time[list(iv)]) for iv in kept]
    assert sc.diagnostics.skipped["ground_truth_jump"] == len(touched)


def test_bad_filter_values_are_refused():
    with pytest.raises(ParameterError, match="min_distance"):
        IntervalPolicy("time", 2.0, min_distance=-1.0)
    with pytest.raises(ParameterError, match="max_speed"):
        IntervalPolicy("time", 2.0, max_speed=0.0)
    with pytest.raises(ParameterError, match="positions"):
        select_intervals(np.arange(10.0), IntervalPolicy("time", 2.0, max_speed=3.0))


def test_history_cap_keeps_the_tail_and_counts_everything(setup):
    log, pred = setup
    iv = select_intervals(log.pose_time, IntervalPolicy("time", 2.0))[:8]
    kw = dict(std0={"slip.p6": 0.5, "noise.U.wz_wz": 0.05}, x0={"noise.U.wz_wz": 0.05},
              outlier_threshold=1e-9)  # a tiny gate rejects some: the counters must see them
    full = OnlineCalibrator(pred, NAMES, **kw)
    capped = OnlineCalibrator(pred, NAMES, max_history=3, **kw)
    full.run(log, iv)
    capped.run(log, iv)
    assert len(full.history) == 8 and len(capped.history) == 3
    assert capped.n_updates == 8
    assert capped.n_rejected == sum(not h.accepted for h in full.history)
    for a, b in zip(full.history[-3:], capped.history):
        assert a.interval == b.interval and np.array_equal(a.x, b.x)
    with pytest.raises(ParameterError, match="max_history"):
        OnlineCalibrator(pred, NAMES, max_history=0)
