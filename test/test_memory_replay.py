"""Bounded containers of the replay (issue 24): what grows with the log stays on disk or is
thinned; nothing here measures memory or time (bench/bench_replay_memory.py does)."""

from __future__ import annotations

import numpy as np
import pytest

from wmr_model.calibration.residuals import yaw_of
from wmr_model.errors import ParameterError
from wmr_model.pipelines.replay import PLOT_POINTS, TrackSamples, _thin


def _rows(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    q = rng.normal(size=(n, 4))
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    return np.hstack([np.arange(n)[:, None] * 0.02, q, rng.normal(size=(n, 3)),
                      rng.uniform(size=(n, 3))])


def test_track_samples_spool_round_trip_with_a_fixed_block():
    n, block = 10_007, 512
    rows = _rows(n)
    ts = TrackSamples(n, block=block)
    held = ts._block.nbytes
    for r in rows:
        ts.append(r[0], r[1:8], r[8], r[9], r[10])
        assert ts._block.nbytes == held  # the in-memory buffer never grows
    assert len(ts) == n
    # full rows come back bit for bit, in blocks of at most the requested size
    parts = list(ts.blocks(rows=3000))
    assert [len(p) for p in parts] == [3000, 3000, 3000, 1007]
    np.testing.assert_array_equal(np.concatenate(parts), rows)
    np.testing.assert_array_equal(ts.array(), rows)
    # the planar columns in memory: t, x, y and the yaw of the quaternion
    pl = ts.planar
    assert pl.shape == (n, 4)
    np.testing.assert_array_equal(pl[:, :3], rows[:, [0, 5, 6]])
    np.testing.assert_allclose(pl[:, 3], yaw_of(rows[:, 1:5]), rtol=0, atol=1e-15)
    ts.close()


def test_track_samples_refuse_more_than_their_capacity():
    ts = TrackSamples(3, block=2)
    for r in _rows(3):
        ts.append(r[0], r[1:8], r[8], r[9], r[10])
    with pytest.raises(ParameterError, match="more than its capacity of 3 samples"):
        ts.append(1.0, np.zeros(7), 0.0, 0.0, 0.0)


@pytest.mark.parametrize("n", [0, 1, PLOT_POINTS, PLOT_POINTS + 1, 180_001])
def test_plot_series_thinned_to_the_budget_keeping_the_ends(n):
    idx = np.arange(n)[_thin(n)]
    assert len(idx) <= PLOT_POINTS
    if n:
        assert idx[0] == 0 and idx[-1] == n - 1
        assert np.all(np.diff(idx) > 0)
    if n <= PLOT_POINTS:
        assert len(idx) == n
