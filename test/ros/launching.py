"""``ros2 launch`` and ``launch_test`` as a user runs them, for the tests in this directory.

The commands are the venv's own (installed by ``make setup`` from ../shared/ros-extra); the
launched nodes are the installed executables in ``lib/wmr_model`` reading
``share/wmr_model/{launch,config}`` — exactly what a user starts. Where those tools are not
installed the tests skip with the reason (and fail under ``CI=true``, where they must run).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent
_ON_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def launch_tools_missing() -> str | None:
    """Why ``ros2 launch``/``launch_test`` cannot run here, or None."""
    try:
        import launch  # noqa: F401
        import launch_ros  # noqa: F401
        import launch_testing  # noqa: F401
    except ImportError as exc:
        return (f"launch/launch_ros/launch_testing not installed ({exc}); `make setup` installs "
                "them from ../shared/ros-extra (or WMR_ROS_EXTRA=DIR)")
    if shutil.which("ros2", path=str(BIN)) is None:
        return f"no ros2 command in {BIN}"
    return None


def require_launch_tools() -> None:
    reason = launch_tools_missing()
    if reason is None:
        return
    if _ON_CI:
        pytest.fail(f"CI must run the launch tests: {reason}")
    pytest.skip(reason)


def launch_test_results(launch_file: Path, env: dict[str, str], cwd: Path, timeout: float,
                        label: str) -> dict:
    """Run ``launch_test LAUNCH_FILE`` (a launch_testing description that writes its numbers to
    ``cwd/results.json``), print those numbers under ``label`` (``-s``), fail with them and the
    output's tail when it fails, else return them."""
    import json

    res = subprocess.run([sys.executable, "-m", "launch_testing.launch_test", str(launch_file)],
                         capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout)
    results = cwd / "results.json"
    summary = results.read_text() if results.is_file() else "(no results.json)"
    print(f"{label}:\n{summary}")
    assert res.returncode == 0, (summary + "\n--- launch_test stdout ---\n" + res.stdout[-15000:]
                                 + "\n--- stderr ---\n" + res.stderr[-8000:])
    return json.loads(summary)


def ros2(*args: str) -> list[str]:
    return [str(BIN / "ros2"), *args]


def _signal_state(pid: int) -> str:
    """The signal lines of /proc/PID/status and the states of the process' threads."""
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
        sig = [ln for ln in lines if ln.startswith(("SigBlk", "SigIgn", "SigCgt", "State"))]
        return "after SIGINT: " + "; ".join(" ".join(ln.split()) for ln in sig)
    except OSError as exc:
        return f"after SIGINT (no /proc status: {exc})"


class Launched:
    """A ``ros2 launch ...`` process in its own process group; output to a log file."""

    def __init__(self, argv: list[str], log: Path, env: dict[str, str] | None = None) -> None:
        self.argv = argv
        self.log = log
        self.signal_state = ""
        self._file = open(log, "wb")
        self.popen = subprocess.Popen(argv, stdout=self._file, stderr=subprocess.STDOUT,
                                      stdin=subprocess.DEVNULL, env=env or dict(os.environ),
                                      start_new_session=True)

    def output(self, limit: int = 12000) -> str:
        text = self.log.read_text(encoding="utf-8", errors="replace")
        text = text if len(text) <= limit else "...\n" + text[-limit:]
        if self.signal_state:
            text += f"\n[test] no exit {self.signal_state}"
        return text

    def alive(self) -> bool:
        return self.popen.poll() is None

    def stop(self, timeout: float = 30.0) -> int:
        """SIGINT (what Ctrl-C sends; launch forwards it to its nodes), then SIGKILL the group."""
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.popen.send_signal(signal.SIGINT)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                # why it did not stop: its signal masks (blocked / ignored / caught, hex)
                self.signal_state = _signal_state(self.popen.pid)
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait()
        self._file.close()
        return self.popen.returncode
