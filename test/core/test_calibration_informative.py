"""Informative intervals (moves >= d or turns >= theta) and the out-of-sample split (issue 21).

Oracles: a hand-built ground truth with one 2 s segment of each motion (straight, arc, spin in
place across +-pi, standing still) whose distances and turns are known in closed form; the
streaming driver must close the same intervals as the batch selection; the split is checked
against its definition (interval end/start stamps vs the split stamp).
"""

import numpy as np
import pytest

from wmr_model.calibration import IntervalPolicy, ModelPredictor, OnlineCalibrator
from wmr_model.calibration.intervals import (
    MOVING_MIN_DISTANCE,
    MOVING_MIN_TURN,
    classify_intervals,
    interval_class_counts,
    select_intervals,
    split_intervals,
    split_time,
    unwrapped_yaw,
)
from wmr_model.calibration.stream import StreamCalibrator
from wmr_model.errors import ParameterError
from wmr_model.io.vehicles import load_vehicle

RATE = 10.0  # ground-truth poses per second
# (forward speed [m/s], yaw rate [rad/s]) of each 2 s segment
SEGMENTS = [(1.0, 0.0), (0.6, 0.3), (0.0, 0.5), (0.0, 0.0), (0.0, -0.5), (0.05, 0.0)]
LABELS = ["straight", "arc", "spin", "still", "spin", "still"]


def _ground_truth(yaw0=2.8):
    """Unicycle poses at RATE over SEGMENTS starting at yaw0 (the first spin crosses +pi)."""
    t, x, y, th = [0.0], [0.0], [0.0], [yaw0]
    h = 1.0 / RATE
    for v, w in SEGMENTS:
        for _ in range(int(2.0 * RATE)):
            x.append(x[-1] + v * np.cos(th[-1] + 0.5 * w * h) * h)
            y.append(y[-1] + v * np.sin(th[-1] + 0.5 * w * h) * h)
            th.append(th[-1] + w * h)
            t.append(t[-1] + h)
    th = np.array(th)
    wrapped = np.arctan2(np.sin(th), np.cos(th))
    quat = np.stack([np.cos(wrapped / 2), 0 * th, 0 * th, np.sin(wrapped / 2)], axis=1)
    pos = np.stack([x, y, np.zeros(len(x))], axis=1)
    return np.array(t), quat, pos, th


def test_spins_are_informative_and_classified():
    t, quat, pos, th = _ground_truth()
    yaw = unwrapped_yaw(quat)
    assert np.allclose(yaw - yaw[0], th - th[0], atol=1e-9)  # unwrapped across +-pi
    every = select_intervals(t, IntervalPolicy("time", 2.0))
    assert len(every) == len(SEGMENTS)
    # the distance-only filter of before: the spins count as standing still
    dist_only = select_intervals(t, IntervalPolicy("time", 2.0, min_distance=0.5), pos)
    assert len(dist_only) == 2
    pol = IntervalPolicy("time", 2.0, min_distance=MOVING_MIN_DISTANCE,
                         min_turn=MOVING_MIN_TURN)
    kept = select_intervals(t, pol, pos, yaw)
    assert [LABELS[k] for k in range(len(SEGMENTS)) if tuple(every[k]) in
            {tuple(r) for r in kept}] == ["straight", "arc", "spin", "spin"]
    labels = classify_intervals(every, pos, yaw, pol)
    assert list(labels) == LABELS
    assert interval_class_counts(classify_intervals(kept, pos, yaw, pol)) == {
        "straight": 1, "arc": 1, "spin": 2, "still": 0}
    # min_turn alone: the straight segment goes, the arc (0.6 rad) and spins (1 rad) stay
    turn_only = select_intervals(t, IntervalPolicy("time", 2.0, min_turn=0.2), pos, yaw)
    assert len(turn_only) == 3
    with pytest.raises(ParameterError, match="min_turn"):
        IntervalPolicy("time", 2.0, min_turn=-0.1)
    with pytest.raises(ParameterError, match="yaw"):
        select_intervals(t, pol, pos)


def test_stream_calibrator_closes_the_same_informative_intervals():
    t, quat, pos, _ = _ground_truth()
    pol = IntervalPolicy("time", 2.0, min_distance=0.5, min_turn=0.2)
    kept = select_intervals(t, pol, pos, unwrapped_yaw(quat))
    model = load_vehicle("warthog")
    pred = ModelPredictor(model, dt=0.05)
    names = [model.joint_names[int(k)] for k in model.actuated_joints]
    sc = StreamCalibrator(lambda: OnlineCalibrator(pred, ["slip.p6"]), names, pol)
    seen = []
    sc._run = lambda p, lo, hi: seen.append((p.t0, p.t1)) or []
    zeros = np.zeros(len(names))
    for k in range(len(t)):
        sc.add_encoders(t[k], names, velocities=zeros)
        sc.add_pose(t[k], np.concatenate([quat[k], pos[k]]), np.eye(6) * 1e-4)
    # one more still pose: the driver closes an interval once a pose reaches past its end
    sc.add_pose(t[-1] + 0.1, np.concatenate([quat[-1], pos[-1]]), np.eye(6) * 1e-4)
    sc.add_encoders(t[-1] + 1.0, names, velocities=zeros)
    assert seen == [tuple(t[list(iv)]) for iv in kept]
    assert sc.diagnostics.skipped["uninformative"] == len(SEGMENTS) - len(kept)


def test_split_is_by_stamp_and_drops_straddling_intervals():
    t = np.arange(0.0, 100.5, 0.5)
    assert split_time(t, 0.6) == pytest.approx(60.0)
    iv = select_intervals(t, IntervalPolicy("time", 3.0))  # 0-3, 3-6, ..., 57-60, 60-63, ...
    before, after = split_intervals(t, iv, 59.0)
    assert np.all(t[before[:, 1]] <= 59.0) and np.all(t[after[:, 0]] >= 59.0)
    assert len(before) + len(after) == len(iv) - 1  # 57-60 straddles 59 s
    for bad in (0.0, 1.0, float("nan")):
        with pytest.raises(ParameterError, match="split"):
            split_time(t, bad)
