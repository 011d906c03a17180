"""The ``wmr`` contract of the reliability suite: run in-process, check exit code and output."""

from __future__ import annotations

import contextlib
import io
import json
import math
import os

from hypothesis import HealthCheck, settings

#: Settings of every property test here (applied per test, so the repository's other
#: hypothesis tests keep theirs): bounded and derandomized for CI (a few minutes in all, the
#: same examples each run); ``WMR_FUZZ_EXAMPLES=500`` runs more, random, examples locally.
_N = int(os.environ.get("WMR_FUZZ_EXAMPLES", "0"))
FUZZ = settings(max_examples=_N or 12, derandomize=not _N, deadline=None, print_blob=True,
                suppress_health_check=[HealthCheck.too_slow,
                                       HealthCheck.function_scoped_fixture])


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
