"""wmr_model.pipelines.runner: task order, one failure not fatal, content-hash cache, progress bar, and
the slip-vs-slope sweep through it (issue 27). In-process only here; the Ray path is compared
with it on real fits in test/cli/test_fleet.py."""

from __future__ import annotations

import io
import math
import os
import select
import shutil

import numpy as np
import pytest

from wmr_model.errors import ParameterError
from wmr_model.pipelines.runner import Progress, Runner, Task, TaskResult, content_id, task_key

CALLS: list[float] = []


def _sqrt(x: float) -> float:
    CALLS.append(x)
    return math.sqrt(x)


def test_results_in_task_order_and_a_failure_is_reported_not_fatal(tmp_path):
    tasks = [Task(f"x={x}", _sqrt, {"x": x}) for x in (4.0, -1.0, 9.0)]
    r = Runner(cache_dir=tmp_path, quiet=True)
    res = r.run(tasks)
    assert [(t.name, t.ok, t.value) for t in res] == [("x=4.0", True, 2.0),
                                                     ("x=-1.0", False, None),
                                                     ("x=9.0", True, 3.0)]
    assert res[1].error == "ValueError: math domain error"
    assert (r.stats.executed, r.stats.cached, r.stats.failed) == (3, 0, 1)
    # successes are cached, the failure is not: a rerun runs only that one again
    CALLS.clear()
    again = Runner(cache_dir=tmp_path, quiet=True)
    assert [t.value for t in again.run(tasks)] == [2.0, None, 3.0]
    assert CALLS == [-1.0] and (again.stats.executed, again.stats.cached) == (1, 2)


def test_cache_key_follows_content_not_path(tmp_path):
    a = tmp_path / "bag"
    a.mkdir()
    (a / "metadata.yaml").write_text("x: 1\n")
    (a / "data.mcap").write_bytes(bytes(range(256)) * 10)
    b = tmp_path / "copy"
    shutil.copytree(a, b)
    assert content_id(a) == content_id(b)
    raw = bytearray((b / "data.mcap").read_bytes())
    raw[100] ^= 1
    (b / "data.mcap").write_bytes(bytes(raw))
    assert content_id(a) != content_id(b)
    with pytest.raises(ParameterError, match="no such file"):
        content_id(tmp_path / "missing")
    t = Task("t", _sqrt, {"x": 1.0}, key={"bag": content_id(a)})
    assert task_key(t) == task_key(Task("other name", _sqrt, {"x": 2.0}, key={"bag":
                                                                           content_id(a)}))
    assert task_key(t) != task_key(Task("t", _sqrt, {"x": 1.0}, key={"bag": content_id(b)}))
    assert task_key(t) != task_key(Task("t", math.sqrt, {"x": 1.0}, key={"bag": content_id(a)}))


def test_progress_bar_only_on_a_terminal():
    master, slave = os.openpty()
    try:
        with os.fdopen(slave, "w", closefd=False) as tty:
            bar = Progress(2, "fit ", stream=tty, width=4)
            assert bar.on and not Progress(2, stream=tty, enabled=False).on  # --quiet
            bar.update(TaskResult("a", True, cached=True))
            bar.update(TaskResult("b", False, error="x"))
            bar.close()
        out = b""
        while select.select([master], [], [], 1.0)[0]:  # the tty hands it over in pieces
            out += os.read(master, 4096)
            if out.endswith(b"\n"):
                break
        out = out.decode()
    finally:
        os.close(master)
        os.close(slave)
    assert "fit [##  ] 1/2 done, 1 cached, 0 failed" in out
    assert "fit [####] 2/2 done, 1 cached, 1 failed" in out
    buf = io.StringIO()  # not a terminal (a pipe, a file, CI): silent
    bar = Progress(2, stream=buf)
    bar.update(TaskResult("a", True))
    bar.close()
    assert not bar.on and buf.getvalue() == ""


def test_bad_worker_count_is_refused():
    with pytest.raises(ParameterError, match="--workers: must be >= 1, got 0"):
        Runner(workers=0)


def test_slip_vs_slope_cells_through_the_runner_equal_the_plain_loop(tmp_path):
    from wmr_model.experiments.soil import slip_vs_slope
    from wmr_model.io.vehicles import load_vehicle
    from wmr_model.terrain.soil import bekker_params

    model = load_vehicle("rocky7")
    kw = dict(contact_params=bekker_params("sandy_loam"), duration=2.0, settle=1.0, window=0.5)
    plain = slip_vs_slope(model, (0.0, 5.0), ("uphill",), **kw)
    runner = Runner(cache_dir=tmp_path, quiet=True)
    run = slip_vs_slope(model, (0.0, 5.0), ("uphill",), runner=runner, **kw)
    assert runner.stats.executed == 2
    for a, b in zip(plain, run):
        assert (a.direction, a.slope_deg, a.slip_mean, a.slip_std) == (
            b.direction, b.slope_deg, b.slip_mean, b.slip_std)
        np.testing.assert_array_equal(a.slips, b.slips)
    assert plain[1].slip_mean > plain[0].slip_mean  # the two cells differ
    slip_vs_slope(model, (0.0, 5.0), ("uphill",), runner=runner, **kw)
    assert (runner.stats.executed, runner.stats.cached) == (0, 2)
