"""Fixtures for tests that talk to node processes over ROS 2 (see ``harness.py``).

All tests in this directory are marked ``ros``. They are skipped, with the reason, only when
rclpy cannot be imported (a plain ``pip install`` without ROS); under CI (``CI=true``) rclpy is
required and its absence fails the tests.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness import RosHarness, acquire_domain_id, ros_environment

HERE = Path(__file__).resolve().parent

try:
    import rclpy  # noqa: F401

    RCLPY_ERROR: str | None = None
except ImportError as exc:  # pragma: no cover - depends on the environment
    RCLPY_ERROR = f"{type(exc).__name__}: {exc}"

_ON_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.ros)
            if RCLPY_ERROR is not None and not _ON_CI:
                item.add_marker(
                    pytest.mark.skip(reason=f"rclpy is not importable ({RCLPY_ERROR}); "
                                     "run `make setup` for the ROS 2 wheels")
                )


@pytest.fixture(scope="session")
def ros_domain() -> Iterator[int]:
    """A ROS domain id reserved for this test session (set in this process's environment)."""
    domain_id, lock = acquire_domain_id()
    saved = {k: os.environ.get(k) for k in ("ROS_DOMAIN_ID", "RMW_IMPLEMENTATION",
                                             "ROS_AUTOMATIC_DISCOVERY_RANGE", "ROS_LOCALHOST_ONLY")}
    env = ros_environment(domain_id)
    for key in saved:
        if key in env:
            os.environ[key] = env[key]
        else:
            os.environ.pop(key, None)
    try:
        yield domain_id
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        lock.close()


@pytest.fixture(scope="session")
def rclpy_context(ros_domain: int) -> Iterator[object]:
    """An rclpy context on the session's isolated domain."""
    if RCLPY_ERROR is not None:
        pytest.fail(f"rclpy is required on CI but cannot be imported: {RCLPY_ERROR}")
    import rclpy
    from rclpy.context import Context

    context = Context()
    rclpy.init(context=context, domain_id=ros_domain)
    try:
        yield context
    finally:
        context.try_shutdown()


@pytest.fixture
def ros(request: pytest.FixtureRequest, rclpy_context: object, ros_domain: int,
        tmp_path: Path) -> Iterator[RosHarness]:
    """A :class:`RosHarness` whose processes are stopped after the test.

    Their stdout/stderr are added to the report of a failed test (see the hook below).
    """
    harness = RosHarness(rclpy_context, ros_environment(ros_domain), tmp_path / "nodes")
    request.node._ros_harness = harness
    try:
        yield harness
    finally:
        harness.close()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    report = yield
    harness = getattr(item, "_ros_harness", None)
    if harness is not None and report.failed:
        for title, text in harness.report_sections():
            report.sections.append((f"{title} ({report.when})", text))
    return report
