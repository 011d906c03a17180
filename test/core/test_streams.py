"""wmr_model.estimation.streams: time-base guard, reorder window and plausibility gates (no ROS)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from wmr_model.errors import ParameterError
from wmr_model.estimation.streams import (
    OrderedInput,
    PlausibilityLimits,
    angular_rate_problem,
    wheel_rate_problem,
)


def _interleaved(rng, T=2.0, enc_dt=0.004, imu_dt=0.002, skew=0.3):
    """Encoder (250 Hz) and IMU (500 Hz) stamps, delivered in bursts: each stream's backlog of
    up to ``skew`` seconds arrives before the other's (an executor serving one queue first)."""
    enc = [("encoders", round(k * enc_dt, 9)) for k in range(1, int(T / enc_dt) + 1)]
    imu = [("imu", round(k * imu_dt, 9)) for k in range(1, int(T / imu_dt) + 1)]
    arrivals, i, j = [], 0, 0
    while i < len(enc) or j < len(imu):
        # the stream served next catches up with the other and runs up to `skew` ahead of it
        front = max(enc[min(i, len(enc) - 1)][1], imu[min(j, len(imu) - 1)][1])
        t_end = min(enc[min(i, len(enc) - 1)][1], imu[min(j, len(imu) - 1)][1]) + rng.uniform(
            0.0, skew)
        t_end = min(t_end, front + skew)
        if rng.random() < 0.5:
            while i < len(enc) and enc[i][1] <= t_end:
                arrivals.append(enc[i])
                i += 1
        else:
            while j < len(imu) and imu[j][1] <= t_end:
                arrivals.append(imu[j])
                j += 1
    return arrivals


def _run(buf, arrivals):
    out = []
    for n, (s, t) in enumerate(arrivals):
        out += buf.push(s, t, n, now=0.0)
    return out + buf.flush()


def test_window_releases_in_stamp_order_and_loses_nothing():
    rng = np.random.default_rng(3)
    arrivals = _interleaved(rng)
    buf = OrderedInput(["imu", "encoders"], window=0.5)
    out = _run(buf, arrivals)
    assert len(out) == len(arrivals)
    keys = [(r.stamp, buf.priority[r.stream]) for r in out]
    assert keys == sorted(keys)  # stamp order, IMU first at equal stamps
    assert buf.stats["late"] == 0 and buf.max_hold <= 0.5 + 1e-12
    # the same bursts without a window: many messages come out behind the release front
    buf0 = OrderedInput(["imu", "encoders"], window=0.0)
    out0 = _run(buf0, arrivals)
    assert [r.item for r in out0] == list(range(len(arrivals)))  # arrival order, untouched
    assert buf0.stats["late"] > 0.2 * len(arrivals)


def test_merge_latency_is_one_period_when_streams_flow():
    buf = OrderedInput(["imu", "encoders"], window=1.0)
    released = []
    for k in range(1, 200):
        released += buf.push("imu", k * 0.002, None)
        if k % 2 == 0:
            released += buf.push("encoders", k * 0.002, None)
    # every message up to the slower stream's newest stamp is out: hold <= one encoder period
    assert buf.pending <= 2
    assert buf.max_hold <= 0.004 + 1e-12


def test_silent_stream_is_waited_for_idle_seconds_and_window_caps_the_hold():
    buf = OrderedInput(["imu", "encoders"], window=0.5, idle=0.1)
    out = buf.push("encoders", 0.9, None, now=0.0)
    out += buf.push("imu", 1.0, None, now=0.0)
    for k in range(1, 6):  # the IMU falls silent at 1.0 s; encoders go on
        out += buf.push("encoders", 1.0 + 0.01 * k, k, now=0.01 * k)
    assert [r.stamp for r in out] == [0.9, 1.0]  # encoders wait: the IMU may still come
    assert buf.poll(now=0.09) == []
    tail = buf.poll(now=0.11)  # IMU silent for more than idle = 0.1 s: no longer waited for
    assert [r.stamp for r in tail] == pytest.approx([1.01, 1.02, 1.03, 1.04, 1.05])
    assert buf.push("encoders", 1.06, 6, now=0.12)[0].stamp == 1.06
    # a live stream that lags is waited for, but never more than window of stamp time
    buf = OrderedInput(["imu", "encoders"], window=0.5, idle=0.1)
    buf.push("imu", 1.0, None, now=0.0)
    out = []
    for k in range(1, 101):
        out += buf.push("encoders", 1.0 + 0.01 * k, k, now=0.0)
    assert max(r.stamp for r in out) == pytest.approx(2.0 - 0.5)
    assert buf.max_hold <= 0.5 + 0.01 + 1e-9  # window, plus one period of rounding


@pytest.mark.parametrize("stray", [0.0, 95.0, 200.0])  # stamp 0, 5 s old, 100 s ahead
def test_one_stray_stamp_is_dropped_and_counted(stray):
    buf = OrderedInput(["imu", "encoders"], window=0.05, jump_threshold=1.0)
    out = []
    for k in range(100):
        out += buf.push("encoders", 100.0 + 0.02 * k, k)
        if k == 50:
            out += buf.push("encoders", stray, "stray")
    out += buf.flush()
    assert "stray" not in [r.item for r in out] and len(out) == 100
    assert buf.stats["stray_stamp"] == 1 and buf.stats["time_base_changes"] == 0
    assert f"{stray:.9f}" in buf.last_stray
    assert not any(r.new_time_base for r in out)


def test_bag_loop_confirmed_by_consecutive_messages_loses_nothing():
    buf = OrderedInput(["imu", "encoders"], window=0.05, jump_threshold=1.0, confirm_count=3)
    out = []
    stamps = [100.0 + 0.02 * k for k in range(50)] + [10.0 + 0.02 * k for k in range(50)]
    for k, t in enumerate(stamps):
        out += buf.push("encoders", t, k)
    out += buf.flush()
    assert [r.item for r in out] == list(range(100))
    assert [r.item for r in out if r.new_time_base] == [50]
    assert buf.stats["time_base_changes"] == 1 and buf.stats["stray_stamp"] == 0


def test_clock_confirms_a_jump_at_once():
    buf = OrderedInput(["encoders"], window=0.0, confirm_count=3)
    buf.push("encoders", 100.0, 0, clock=100.0)
    out = buf.push("encoders", 10.0, 1, clock=10.01)  # /clock went back too
    assert [(r.item, r.new_time_base) for r in out] == [(1, True)]
    assert buf.push("encoders", 50.0, 2, clock=10.03) == []  # the clock disagrees: held


def test_confirm_count_one_follows_every_jump():
    buf = OrderedInput(["encoders"], confirm_count=1)
    buf.push("encoders", 100.0, 0)
    assert [r.new_time_base for r in buf.push("encoders", 0.0, 1)] == [True]


def test_non_finite_stamp_passes_through_counted():
    buf = OrderedInput(["encoders"], window=0.1)
    buf.push("encoders", 1.0, 0)
    out = buf.push("encoders", math.nan, 1)
    assert len(out) == 1 and math.isnan(out[0].stamp)
    assert buf.stats["non_finite_stamp"] == 1


def test_bad_arguments_name_the_argument():
    with pytest.raises(ParameterError, match="window: must be a finite number >= 0, got -1"):
        OrderedInput(["a"], window=-1)
    with pytest.raises(ParameterError, match="confirm_count: must be >= 1"):
        OrderedInput(["a"], confirm_count=0)
    with pytest.raises(ParameterError, match=r"stream: expected one of \['a'\], got 'b'"):
        OrderedInput(["a"]).push("b", 0.0)
    with pytest.raises(ParameterError, match="max_angular_rate: must be a number > 0"):
        PlausibilityLimits(max_angular_rate=0.0)


def test_plausibility_gates():
    lim = PlausibilityLimits(max_wheel_speed=10.0, max_wheel_acceleration=20.0,
                             max_angular_rate=5.0)
    radii = {"l": 0.5, "r": 0.5}
    assert wheel_rate_problem({"l": 19.9, "r": -19.9}, radii, lim) == ""
    assert "rim speed 10.5 m/s" in wheel_rate_problem({"l": 1.0, "r": 21.0}, radii, lim)
    # 2 rad/s in 0.02 s at r = 0.5: 50 m/s^2 > 20
    msg = wheel_rate_problem({"l": 3.0}, radii, lim, previous={"l": 1.0}, dt=0.02)
    assert "rim acceleration 50 m/s^2" in msg and "'l'" in msg
    assert wheel_rate_problem({"l": 3.0}, radii, lim, previous={"l": 1.0}, dt=0.2) == ""
    assert wheel_rate_problem({"x": 1e9}, radii, lim) == ""  # no radius: not a wheel
    assert angular_rate_problem([0.0, 0.0, 4.9], lim) == ""
    assert angular_rate_problem([0.0, 0.0, 1e6], lim).startswith(
        "angular_velocity.z = 1e+06 rad/s > max_angular_rate 5 rad/s")


def test_a_stream_lagging_another_by_seconds_is_not_a_time_jump():
    # a backlogged replay: the executor served 3 s of encoders before the IMU queue
    buf = OrderedInput(["imu", "encoders"], window=5.0, jump_threshold=1.0)
    out = []
    for k in range(150):
        out += buf.push("encoders", 100.0 + 0.02 * k, ("e", k))
    for k in range(300):
        out += buf.push("imu", 100.0 + 0.01 * k + 0.005, ("i", k))
    out += buf.flush()
    assert buf.stats["stray_stamp"] == 0 and buf.stats["time_base_changes"] == 0
    assert len(out) == 450 and [r.stamp for r in out] == sorted(r.stamp for r in out)


def _polls(buf, t0, t1, period=0.05):
    """The node's poll timer: ``poll`` every ``period`` s of receive time in (t0, t1]."""
    out = []
    k = 1
    while t0 + k * period <= t1 + 1e-12:
        out += buf.poll(now=t0 + k * period)
        k += 1
    return out


def test_a_pause_of_every_stream_releases_nothing_early_and_the_tail_leaves_at_last():
    buf = OrderedInput(["imu", "encoders"], window=0.5, idle=0.1)
    buf.push("imu", 1.0, None, now=0.0)
    buf.push("encoders", 1.0, None, now=0.0)
    out = buf.push("encoders", 1.02, "e", now=0.0)  # waits for the IMU's 1.01 .. 1.02
    assert _polls(buf, 0.0, 0.3) == [] and buf.pending == 1  # everyone silent: a pause
    out += buf.push("encoders", 1.04, "e2", now=0.35)  # after the pause the encoders come first
    assert buf.poll(now=0.36) == [] and buf.pending == 2
    out += buf.push("imu", 1.01, "i", now=0.37)
    assert [r.item for r in out if r.item] == ["i"]
    tail = _polls(buf, 0.37, 0.37 + 5 * 0.1 + 0.06)  # the end of the bag: all silent for 5 idle
    assert [r.item for r in tail] == ["e", "e2"] and buf.stats["late"] == 0
    assert buf.stats["stalls"] == 0


def test_a_stall_of_the_consumer_is_not_silence_of_its_streams():
    # 4x replay on a loaded machine: the IMU queue lags the encoders by seconds of stamp time,
    # both flow, the merge holds the encoders; then the node itself gets no CPU for 0.8 s
    buf = OrderedInput(["imu", "encoders"], window=600.0, idle=0.1)
    now, out = 0.0, []
    for k in range(200):  # encoders 0..4 s of stamps, the IMU only 0..1 s: 3 s held
        now += 0.002
        out += buf.push("encoders", 100.0 + 0.02 * k, ("e", k), now=now)
        out += buf.push("imu", 100.0 + 0.005 * k, ("i", k), now=now)
        if k % 25 == 0:
            out += buf.poll(now=now)
    held = buf.pending
    assert held > 140
    now += 0.8  # stalled: no call at all; then the poll timer is served first
    assert buf.poll(now=now) == [] and buf.pending == held and buf.stats["stalls"] == 1
    now += 0.01  # the queued encoder message, then the rest of the IMU backlog
    out += buf.push("encoders", 104.0, ("e", 200), now=now)
    for k in range(200, 800):
        now += 0.0005
        out += buf.push("imu", 100.0 + 0.005 * k, ("i", k), now=now)
        if k % 100 == 0:
            out += buf.poll(now=now)
    out += buf.flush()
    assert buf.stats["late"] == 0 and buf.stats["released_idle"] == 0
    assert [r.stamp for r in out] == sorted(r.stamp for r in out) and len(out) == 1001
    # a stream that really stops is still given up after idle while the other flows
    for k in range(20):
        now += 0.02
        out = buf.push("encoders", 104.02 + 0.02 * k, ("e", 201 + k), now=now)
        out += buf.poll(now=now)
    assert buf.stats["released_idle"] > 0 and buf.pending <= 1
