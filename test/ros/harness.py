"""Test harness for ROS 2 nodes run as separate processes.

:class:`NodeProcess` runs one Python node script as a subprocess with the session's isolated
ROS environment (:func:`ros_environment`), logging its stdout/stderr to files.
:class:`RosHarness` starts such processes for one test, waits (with an rclpy node living in the
test process) until the services and topics they offer are visible, stops them at teardown
(SIGINT, then SIGTERM, then SIGKILL) and hands their output to the failure report (see
``conftest.py``).

Isolation: each test session picks a random ROS domain id that no other session on this machine
holds (a lock file per id) and whose discovery ports are free, and restricts discovery to this
host, so concurrent test runs and other ROS systems do not see each other.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "RMW_IMPLEMENTATION",
    "NodeProcess",
    "NodeProcessError",
    "RosHarness",
    "acquire_domain_id",
    "ros_environment",
]

RMW_IMPLEMENTATION = "rmw_fastrtps_cpp"
REPO_ROOT = Path(__file__).resolve().parents[2]

# Valid ROS_DOMAIN_IDs on Linux for Fast DDS's default port mapping are 0..101 (0..232 in
# theory, but ids > 101 collide with the ephemeral port range). 0 is everybody's default.
_DOMAIN_IDS = range(1, 102)
# Fast DDS well-known ports: PB + DG * domain + offset, PB = 7400, DG = 250; offset 0 is the
# discovery multicast port, 10 the unicast discovery port of participant 0.
_PB, _DG = 7400, 250


class NodeProcessError(RuntimeError):
    """A node process died or did not come up in time; the message carries its output."""


def _udp_port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def acquire_domain_id(rng: random.Random | None = None) -> tuple[int, Any]:
    """Pick a free ROS domain id; return ``(domain_id, lock)``.

    The id stays reserved (against other test sessions on this machine) while ``lock``, an open
    file holding an exclusive ``flock``, is open; close it to release the id.
    """
    rng = rng or random.Random()
    ids = list(_DOMAIN_IDS)
    rng.shuffle(ids)
    lock_dir = Path(tempfile.gettempdir())
    for domain_id in ids:
        lock = open(lock_dir / f"wmr_model-ros-domain-{domain_id}.lock", "w")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            lock.close()
            continue
        unicast = _PB + _DG * domain_id + 10
        if _udp_port_free(unicast) and _udp_port_free(unicast + 2):
            return domain_id, lock
        lock.close()
    raise RuntimeError(f"no free ROS domain id in {_DOMAIN_IDS.start}..{_DOMAIN_IDS.stop - 1}")


def ros_environment(domain_id: int, base: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for node processes (and the test process) of one test session."""
    env = dict(os.environ if base is None else base)
    env.update(
        ROS_DOMAIN_ID=str(domain_id),
        RMW_IMPLEMENTATION=RMW_IMPLEMENTATION,
        # Discovery on this host only (Jazzy); ROS_LOCALHOST_ONLY is deprecated there.
        ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST",
        PYTHONUNBUFFERED="1",
        # Log lines carry the severity and the node name; no colour codes in the report.
        RCUTILS_COLORIZED_OUTPUT="0",
        RCUTILS_CONSOLE_OUTPUT_FORMAT="[{severity}] [{name}]: {message}",
    )
    env.pop("ROS_LOCALHOST_ONLY", None)
    env.pop("ROS_STATIC_PEERS", None)
    # The source checkout first, so nodes import the tree under test.
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p
    )
    return env


@dataclass
class NodeProcess:
    """One node script running as a subprocess."""

    name: str
    argv: list[str]
    log_dir: Path
    env: dict[str, str]
    popen: subprocess.Popen[bytes] | None = None
    returncode: int | None = None
    stop_signals: list[str] = field(default_factory=list)

    @property
    def stdout_path(self) -> Path:
        return self.log_dir / f"{self.name}.stdout.log"

    @property
    def stderr_path(self) -> Path:
        return self.log_dir / f"{self.name}.stderr.log"

    def start(self) -> NodeProcess:
        with open(self.stdout_path, "wb") as out, open(self.stderr_path, "wb") as err:
            self.popen = subprocess.Popen(
                self.argv,
                stdout=out,
                stderr=err,
                stdin=subprocess.DEVNULL,
                env=self.env,
                cwd=REPO_ROOT,
                start_new_session=True,  # our SIGINT goes to the node only
            )
        return self

    @property
    def pid(self) -> int:
        assert self.popen is not None
        return self.popen.pid

    def poll(self) -> int | None:
        """Exit code if the process has ended, else ``None``."""
        if self.popen is None:
            return self.returncode
        self.returncode = self.popen.poll()
        return self.returncode

    def running(self) -> bool:
        return self.popen is not None and self.poll() is None

    def stop(self, timeouts: Sequence[float] = (15.0, 5.0)) -> int | None:
        """Stop gracefully: SIGINT, then SIGTERM, then SIGKILL; return the exit code."""
        if self.popen is None:
            return self.returncode
        for sig, timeout in zip((signal.SIGINT, signal.SIGTERM), timeouts):
            if self.poll() is not None:
                break
            self.stop_signals.append(sig.name)
            with contextlib.suppress(ProcessLookupError):
                self.popen.send_signal(sig)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(timeout)
        if self.poll() is None:
            self.stop_signals.append(signal.SIGKILL.name)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait()
        self.returncode = self.popen.returncode
        return self.returncode

    def output(self, limit: int = 20000) -> tuple[str, str]:
        """``(stdout, stderr)`` so far, each cut to its last ``limit`` characters."""

        def read(path: Path) -> str:
            try:
                text = path.read_text(encoding="utf-8", errors="replace")
            except FileNotFoundError:
                return ""
            return text if len(text) <= limit else "...\n" + text[-limit:]

        return read(self.stdout_path), read(self.stderr_path)

    def describe(self) -> str:
        state = "running" if self.running() else f"exit code {self.returncode}"
        stops = f", stopped with {'/'.join(self.stop_signals)}" if self.stop_signals else ""
        return f"{self.name} (pid {self.popen.pid if self.popen else '-'}, {state}{stops})"


class RosHarness:
    """Node processes of one test plus an rclpy node in the test process to observe them.

    Parameters
    ----------
    rclpy_context
        The session's initialized ``rclpy.Context`` (its domain is the isolated one).
    env
        Environment for the node processes, from :func:`ros_environment`.
    log_dir
        Where the processes' stdout/stderr files go.
    """

    def __init__(self, rclpy_context: Any, env: dict[str, str], log_dir: Path) -> None:
        import rclpy
        from rclpy.executors import SingleThreadedExecutor

        self.env = env
        self.log_dir = Path(log_dir)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.processes: list[NodeProcess] = []
        self.context = rclpy_context
        self.node = rclpy.create_node(
            f"wmr_test_probe_{os.getpid()}_{random.randrange(1 << 30)}", context=rclpy_context
        )
        self.executor = SingleThreadedExecutor(context=rclpy_context)
        self.executor.add_node(self.node)

    # -- processes -----------------------------------------------------------------------
    def start(
        self, script: str | os.PathLike[str], *args: str, name: str | None = None
    ) -> NodeProcess:
        """Start ``python script args...`` with the isolated ROS environment."""
        script = Path(script)
        name = name or script.stem
        if any(p.name == name for p in self.processes):
            name = f"{name}-{len(self.processes)}"
        proc = NodeProcess(
            name=name,
            argv=[sys.executable, str(script), *args],
            log_dir=self.log_dir,
            env=self.env,
        )
        self.processes.append(proc.start())
        return proc

    def stop_all(self) -> None:
        for proc in reversed(self.processes):
            proc.stop()

    def close(self) -> None:
        """Stop the processes and destroy the probe node."""
        try:
            self.stop_all()
        finally:
            self.executor.remove_node(self.node)
            self.executor.shutdown()
            self.node.destroy_node()

    def check_alive(self) -> None:
        """Raise :class:`NodeProcessError` if a started process has ended."""
        for proc in self.processes:
            if proc.poll() is not None:
                out, err = proc.output()
                raise NodeProcessError(
                    f"{proc.describe()} ended early\n--- stdout ---\n{out}\n--- stderr ---\n{err}"
                )

    # -- graph -----------------------------------------------------------------------------
    def spin_once(self, timeout: float = 0.05) -> None:
        self.executor.spin_once(timeout_sec=timeout)

    def wait_for(
        self,
        services: Iterable[str] = (),
        topics: Iterable[str] = (),
        timeout: float = 20.0,
    ) -> float:
        """Wait until the services and topics (fully qualified names) are in the ROS graph.

        A topic counts once a publisher of it is visible. Returns the time waited [s]; raises
        :class:`NodeProcessError` if a process dies meanwhile and :class:`TimeoutError` (listing
        what is missing and what is there) after ``timeout`` seconds.
        """
        services, topics = set(services), set(topics)
        start = time.monotonic()
        while True:
            self.check_alive()
            have_services = {n for n, _ in self.node.get_service_names_and_types()}
            have_topics = {
                n
                for n, _ in self.node.get_topic_names_and_types()
                if self.node.count_publishers(n) > 0
            }
            missing = sorted(services - have_services) + sorted(topics - have_topics)
            if not missing:
                return time.monotonic() - start
            if time.monotonic() - start > timeout:
                raise TimeoutError(
                    f"after {timeout:.0f} s still missing {missing}; services seen: "
                    f"{sorted(have_services)}; topics seen: {sorted(have_topics)}; "
                    f"processes: {[p.describe() for p in self.processes]}"
                )
            self.spin_once(0.05)

    def call(self, client: Any, request: Any, timeout: float = 10.0) -> Any:
        """Call a service through ``client`` and return the response (or raise TimeoutError)."""
        from wmr_model.ros.runner import call_service

        try:
            return call_service(client, request, timeout=timeout, spin=self.spin_once)
        except TimeoutError:
            self.check_alive()
            raise

    def receive(
        self, msg_type: Any, topic: str, timeout: float = 10.0, count: int = 1
    ) -> list[Any]:
        """Subscribe to ``topic`` and return the first ``count`` messages received."""
        received: list[Any] = []
        sub = self.node.create_subscription(msg_type, topic, received.append, 10)
        try:
            deadline = time.monotonic() + timeout
            while len(received) < count:
                if time.monotonic() > deadline:
                    self.check_alive()
                    raise TimeoutError(
                        f"received {len(received)} of {count} messages on {topic} in {timeout} s"
                    )
                self.spin_once(0.05)
        finally:
            self.node.destroy_subscription(sub)
        return received[:count]

    def report_sections(self) -> list[tuple[str, str]]:
        """``(title, text)`` sections with every process's state and output, for reports."""
        sections = []
        for proc in self.processes:
            out, err = proc.output()
            sections.append((f"node {proc.describe()} stdout", out or "(empty)"))
            sections.append((f"node {proc.describe()} stderr", err or "(empty)"))
        return sections


class DiagnosticsRecorder:
    """Records the ``/diagnostics`` statuses of one node (status name prefix, e.g.
    ``/ns/odometry_node``) as ``(status, {key: value})`` pairs, oldest first."""

    def __init__(self, ros: RosHarness, name_prefix: str, qos: Any) -> None:
        from diagnostic_msgs.msg import DiagnosticArray

        self.ros, self.prefix = ros, name_prefix
        self.records: list = []
        ros.node.create_subscription(DiagnosticArray, "/diagnostics", self._on_msg, qos)

    def _on_msg(self, msg: Any) -> None:
        for st in msg.status:
            if st.name.startswith(self.prefix):
                self.records.append((st, {kv.key: kv.value for kv in st.values}))

    def wait(self, predicate: Any, timeout: float = 20.0) -> tuple[Any, dict[str, str]]:
        """The newest recorded status for which ``predicate(status, values)`` holds, spinning
        until one arrives; AssertionError with the last status after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            for st, kv in reversed(self.records):
                if predicate(st, kv):
                    return st, kv
            self.ros.check_alive()
            assert time.monotonic() < deadline, (
                f"no matching diagnostics; last: {self.records[-1] if self.records else None}")
            self.ros.spin_once(0.05)
