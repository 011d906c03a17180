"""Fixtures of the reliability suite (issue 24): the ``wmr`` contract and small real inputs.

The contract checked for every case: exit 0 with finite output, or exit 2 with exactly one
stderr line ``wmr: error: ...``. The hypothesis settings are :data:`wmrcontract.FUZZ`.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from wmrcontract import run_wmr


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
