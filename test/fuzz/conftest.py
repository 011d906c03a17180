"""Fixtures of the reliability suite (issue 24): the ``wmr`` contract and small real inputs.

The contract checked for every case: exit 0 with finite output, or exit 2 with exactly one
stderr line ``wmr: error: ...``. Hypothesis runs under the ``wmr-ci`` profile (bounded examples,
derandomized so CI is reproducible, no per-example deadline: a first call compiles numba
kernels); ``HYPOTHESIS_PROFILE=wmr-deep`` runs more examples locally.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import shutil
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

settings.register_profile(
    "wmr-ci", max_examples=12, deadline=None, derandomize=True, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
settings.register_profile(
    "wmr-deep", max_examples=200, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "wmr-ci"))


class Outcome:
    """Result of one in-process ``wmr`` run: ``code``, ``out``, ``err`` and ``data`` (the
    parsed ``--json`` document, or None)."""

    def __init__(self, code: int, out: str, err: str) -> None:
        self.code, self.out, self.err = code, out, err
        self.data = None
        if code == 0 and out.lstrip().startswith("{"):
            self.data = json.loads(out)

    def __repr__(self) -> str:
        return f"Outcome(code={self.code}, err={self.err[-500:]!r})"


def run_wmr(*argv: str) -> Outcome:
    """Run ``wmr ARGV`` in-process (``wmr_model.cli.main``) and check the contract."""
    from wmr_model.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in argv])
    res = Outcome(code, out.getvalue(), err.getvalue())
    assert_contract(res)
    return res


def assert_contract(res: Outcome) -> None:
    """Exit 0 with finite JSON numbers, or exit 2 with one ``wmr: error:`` line."""
    assert res.code in (0, 2), res
    if res.code == 2:
        lines = res.err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("wmr: error: "), res
        assert len(lines[0]) > len("wmr: error: ") + 10, res
    elif res.data is not None:
        assert_finite(res.data)


def assert_finite(data, where: str = "") -> None:
    """Every number in a JSON document is finite (``to_jsonable`` writes NaN as null: a null
    where a number belongs is also refused by the callers that know the schema)."""
    if isinstance(data, dict):
        for k, v in data.items():
            assert_finite(v, f"{where}.{k}")
    elif isinstance(data, list):
        for i, v in enumerate(data):
            assert_finite(v, f"{where}[{i}]")
    elif isinstance(data, float):
        assert math.isfinite(data), where


def error_line(res: Outcome) -> str:
    assert res.code == 2, res
    return res.err.strip()


@pytest.fixture(scope="session")
def synth_bag(tmp_path_factory) -> Path:
    """A 12 s synthetic Warthog run (``wmr synth``), shared read-only by the suite."""
    d = tmp_path_factory.mktemp("fuzz") / "run"
    res = run_wmr("synth", "--out", d, "--duration", "12", "--seed", "5")
    assert res.code == 0, res
    return d


@pytest.fixture
def bag_copy(synth_bag, tmp_path):
    """A function copying the synthetic bag folder to a fresh path (for mutations)."""
    def copy(name: str = "bag") -> Path:
        dst = tmp_path / name
        shutil.copytree(synth_bag, dst)
        return dst
    return copy
