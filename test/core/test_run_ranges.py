"""wmr_model._jit.run_ranges: the batch runner behind predict() and simulate_dynamics_batch().

Oracle: every index visited exactly once, whatever the thread and chunk counts; a kernel's
exception reaches the caller as itself.
"""

from __future__ import annotations

import numpy as np
import pytest

from wmr_model._jit import njit, num_threads, run_ranges, set_num_threads


@njit(nogil=True, cache=False)
def _count(lo, hi, out, fail_at):
    for i in range(lo, hi):
        if i == fail_at:
            raise ValueError("item failed")
        out[i] += i + 1


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("n, chunks", [(1, 1), (7, 3), (10, 10), (10, 50), (1000, 8), (5, 0)])
def test_every_index_once(threads, n, chunks):
    before = num_threads()
    set_num_threads(min(threads, before) if before > 1 else 1)
    try:
        out = np.zeros(n)
        run_ranges(_count, n, chunks, out, -1)
    finally:
        set_num_threads(before)
    np.testing.assert_array_equal(out, np.arange(1, n + 1))


def test_nothing_to_do():
    out = np.zeros(0)
    run_ranges(_count, 0, 4, out, -1)


def test_error_reaches_caller():
    out = np.zeros(100)
    with pytest.raises(ValueError, match="item failed"):
        run_ranges(_count, 100, 10, out, 55)
