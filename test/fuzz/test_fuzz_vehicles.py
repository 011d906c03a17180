"""Property: any mutation of a shipped URDF/sidecar pair gives a checked model or one error line.

Mutations: a number in the URDF or the sidecar replaced by an absurd value (NaN, inf, negative,
huge, text, a wrong count), a sidecar line deleted, random bytes overwritten. ``wmr check`` runs
in-process; the Python API (``load_vehicle``) must raise a ``WmrError`` or return a model.
"""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st
from wmrcontract import FUZZ, run_wmr

from wmr_model.errors import WmrError

ROOT = Path(__file__).resolve().parents[2]
VEHICLES = ("warthog", "diffdrive", "rocky7", "absolem")
BAD_VALUES = ("nan", "inf", "-inf", "-1", "0", "1e308", "-1e-300", "abc", "", "1 2", "1,2",
              "100", "1e6", "0x10")
NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?:e-?\d+)?")


def _files(name: str) -> tuple[str, str]:
    return ((ROOT / "urdf" / f"{name}.urdf").read_text(),
            (ROOT / "config" / "vehicles" / f"{name}.yaml").read_text())


def _replace_number(text: str, k: int, value: str) -> str:
    found = list(NUMBER.finditer(text))
    if not found:
        return text
    m = found[k % len(found)]
    return text[:m.start()] + value + text[m.end():]


def _check(tmp_path: Path, urdf: str | bytes, sidecar: str | bytes) -> None:
    u, s = tmp_path / "m.urdf", tmp_path / "m.yaml"
    u.write_bytes(urdf.encode() if isinstance(urdf, str) else urdf)
    s.write_bytes(sidecar.encode() if isinstance(sidecar, str) else sidecar)
    run_wmr("check", u, "--sidecar", s)  # asserts the contract
    from wmr_model.io.vehicles import load_vehicle

    try:
        model = load_vehicle(str(u), sidecar=str(s))
    except WmrError:
        return
    assert model.nf >= 1


@FUZZ
@given(name=st.sampled_from(VEHICLES), k=st.integers(0, 10_000),
       value=st.sampled_from(BAD_VALUES), in_urdf=st.booleans())
def test_number_replaced(tmp_path_factory, name, k, value, in_urdf):
    urdf, side = _files(name)
    if in_urdf:
        urdf = _replace_number(urdf, k, value)
    else:
        side = _replace_number(side, k, value)
    _check(tmp_path_factory.mktemp("v"), urdf, side)


@FUZZ
@given(name=st.sampled_from(VEHICLES), k=st.integers(0, 10_000))
def test_sidecar_line_deleted(tmp_path_factory, name, k):
    urdf, side = _files(name)
    lines = side.splitlines(keepends=True)
    del lines[k % len(lines)]
    _check(tmp_path_factory.mktemp("v"), urdf, "".join(lines))


@FUZZ
@given(name=st.sampled_from(VEHICLES), where=st.floats(0, 1), junk=st.binary(min_size=1,
                                                                             max_size=16),
       in_urdf=st.booleans())
def test_bytes_overwritten(tmp_path_factory, name, where, junk, in_urdf):
    urdf, side = (t.encode() for t in _files(name))
    data = bytearray(urdf if in_urdf else side)
    i = int(where * (len(data) - 1))
    data[i:i + len(junk)] = junk
    if in_urdf:
        urdf = bytes(data)
    else:
        side = bytes(data)
    _check(tmp_path_factory.mktemp("v"), urdf, side)
