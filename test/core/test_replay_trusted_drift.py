"""Drift on the reference's trusted path (issue 21): ``wmr replay`` re-aligns the odometry at the
start of each stretch the reference check trusts and sums the stretches' end errors and lengths.

Oracles (closed form): a reference equal to the odometry except for a re-localization (the
whole reference moved by 2 m and turned by 0.3 rad from sample k on) has zero drift on its
trusted path and an end error of at least the 2 m offset when the faulty step is trusted; a
reference whose second stretch lags the odometry by a known distance has exactly that end
error over exactly the trusted length.
"""

import math

import numpy as np
import pytest

from wmr_model.pipelines.replay import OdometryTrack, TrackSamples, _align_errors, trusted_segments


def _track(t, xy, yaw):
    s = TrackSamples(len(t))
    for k in range(len(t)):
        q = np.array([math.cos(yaw[k] / 2), 0.0, 0.0, math.sin(yaw[k] / 2),
                      xy[k, 0], xy[k, 1], 0.0])
        s.append(float(t[k]), q, 0.0, 0.0, 0.0)
    return OdometryTrack("odo", s)


@pytest.fixture
def path():
    t = np.linspace(0.0, 60.0, 601)
    yaw = 0.02 * t  # a gentle left arc at 1 m/s
    xy = np.cumsum(np.stack([np.cos(yaw), np.sin(yaw)], 1) * 0.1, axis=0)
    return t, xy, yaw


def test_a_relocalization_costs_nothing_on_the_trusted_path(path):
    t, xy, yaw = path
    k = 300
    ref = np.column_stack([xy, yaw])
    c, s = math.cos(0.3), math.sin(0.3)
    rel = xy[k:] - xy[k]
    ref[k:, :2] = xy[k] + np.array([2.0, 0.0]) + rel @ np.array([[c, s], [-s, c]])
    ref[k:, 2] += 0.3
    trusted = np.ones(len(t) - 1, dtype=bool)
    trusted[k - 1] = False  # the jump step
    tr = _track(t, xy, yaw)
    _align_errors(tr, t, ref, trusted)
    assert tr.segments == 2
    assert tr.end_error == pytest.approx(0.0, abs=1e-9)
    steps = np.linalg.norm(np.diff(ref[:, :2], axis=0), axis=1)
    assert tr.length == pytest.approx(steps[trusted].sum(), rel=1e-12)
    assert np.isnan(tr.err).sum() == 1  # one break between the stretches in the series
    tr_all = _track(t, xy, yaw)
    _align_errors(tr_all, t, ref)  # the jump trusted: the whole run, aligned at its start
    assert tr_all.segments == 1 and tr_all.end_error > 2.0


def test_the_end_errors_and_lengths_of_the_stretches_add_up(path):
    t, xy, yaw = path
    ref = np.column_stack([xy, yaw])
    ref[400:, 0] -= 0.5 * (t[400:] - t[400]) / (t[-1] - t[400])  # lags 0.5 m by the end
    trusted = np.ones(len(t) - 1, dtype=bool)
    trusted[100:120] = False  # an untrusted stretch (no effect: the reference is exact there)
    tr = _track(t, xy, yaw)
    _align_errors(tr, t, ref, trusted)
    assert [(a, b) for a, b in trusted_segments(trusted, np.ones(len(t), bool))] == [
        (0, 100), (120, len(t) - 1)]
    assert tr.segments == 2
    steps = np.linalg.norm(np.diff(ref[:, :2], axis=0), axis=1)
    assert tr.length == pytest.approx(steps[trusted].sum(), rel=1e-12)
    assert tr.end_error == pytest.approx(0.5, abs=1e-9)
    assert tr.drift_pct == pytest.approx(100 * 0.5 / tr.length, rel=1e-12)
