"""Session set-up of the whole suite: the compiled kernels are built before the tests start.

On a cold cache (a fresh clone, CI) every process that runs a product path compiles the same
kernels: both pytest workers at once, and every node process a ROS test starts. ``wmr compile``
(run once here, as a user runs it, in the controller before the workers start) compiles them
once, two groups in parallel; the workers and the nodes then load them from the cache. Tests
that use kernels outside the product paths still compile those themselves.

``WMR_TEST_PRECOMPILE=0`` skips it. A failing warm-up does not stop the session: it is reported
in the header, and the tests of that path fail on their own.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# A run started in the background of a non-interactive shell (`make test &`, nohup) inherits
# SIGINT ignored, and so would every `ros2 launch` and node it starts: the Ctrl-C tests would
# then see launch ignore SIGINT (SigIgn bit 2 in /proc, seen locally). Give this process, and
# so its children, a terminal's disposition.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    if hasattr(session.config, "workerinput"):  # a pytest-xdist worker: the controller did it
        return
    if os.environ.get("WMR_TEST_PRECOMPILE", "1") == "0":
        return
    from wmr_model._jit import JIT_ENABLED

    if not JIT_ENABLED:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "wmr_model", "compile"], cwd=REPO,
                          capture_output=True, text=True)
    took = time.perf_counter() - t0
    if proc.returncode == 0:
        line = f"wmr compile: kernels ready in {took:.0f} s"
    else:
        err = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        line = f"wmr compile FAILED (exit {proc.returncode}, {took:.0f} s): {err}"
    if reporter is not None:
        reporter.write_line(line)


# Test files that take minutes of mostly wall time (a bag played at 1x, node start-ups),
# scheduled first so that they overlap the rest of the suite on the other worker instead of
# ending it alone (pytest-xdist --dist loadfile hands out files in collection order).
LONG_FILES = ("ros/test_field_run.py", "ros/test_prediction_node.py",
              "ros/test_calibrator_node.py", "cli/test_fleet.py", "ros/test_launch_bringup.py")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).resolve().parent

    def rank(item: pytest.Item) -> int:
        try:
            rel = Path(str(item.path)).resolve().relative_to(here).as_posix()
        except ValueError:  # not under test/
            return len(LONG_FILES)
        return LONG_FILES.index(rel) if rel in LONG_FILES else len(LONG_FILES)

    items.sort(key=rank)  # stable: the order within a file and among the rest is kept
