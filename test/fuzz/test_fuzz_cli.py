"""Property: ``wmr simulate`` options and terrain specs give finite output or one error line."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st
from wmrcontract import FUZZ, run_wmr

from wmr_model.errors import WmrError

NUMBERS = ("0", "-1", "0.3", "1", "2.5", "1e-300", "1e9", "1e308", "nan", "inf", "-inf", "x", "")
KINDS = ("flat", "plane", "rough", "ramp", "step", "zoe-ramp", "wmrde", "file", "bogus", "")


@st.composite
def terrain_specs(draw) -> str:
    kind = draw(st.sampled_from(KINDS))
    nums = draw(st.lists(st.sampled_from(NUMBERS), max_size=6))
    return kind + (":" + ",".join(nums) if nums or draw(st.booleans()) else "")


@FUZZ
@given(spec=terrain_specs())
def test_terrain_spec_api(spec):
    from wmr_model.io.terrain_spec import parse_terrain_spec

    try:
        t = parse_terrain_spec(spec)
    except WmrError:
        return
    z = float(t.height(0.3, -0.2))
    assert math.isfinite(z)


@FUZZ
@given(dt=st.sampled_from(["0.04", "0.1", "0", "-0.04", "nan", "1e-300", "1e-7", "5"]),
       duration=st.sampled_from(["1", "0.5", "0", "-1", "inf", "1e7"]),
       speed=st.sampled_from(["0.5", "0", "-1", "30", "1e308", "nan"]),
       terrain=st.sampled_from(["flat", "plane:10", "rough:0.02,0.5", "step:0.05,0.3",
                                "step:100,1", "ramp:0.2,1,1,1,0.5", "plane:89"]))
def test_simulate_options(dt, duration, speed, terrain):
    res = run_wmr("simulate", "diffdrive", "--dt", dt, "--duration", duration, "--speed", speed,
                  "--terrain", terrain, "--json")
    if res.code == 0:
        d = res.data
        assert d["final_position"] is not None and all(
            v is not None for v in d["final_position"])
        # plausible: never farther than the commanded speed allows (plus a wheel's slip)
        assert math.hypot(*d["final_position"][:2]) <= abs(float(speed)) * d["duration"] + 0.2
