"""``wmr bench``: JSON shape of a quick run, section selection, bad input (no timing checks)."""

import json
import math

import pytest

from wmr_model.cli import main


def _positive(value) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value) and value > 0


@pytest.mark.slow
def test_quick_kinematic_odometry_json(tmp_path, capsys):
    out_file = tmp_path / "bench.json"
    code = main(["bench", "--quick", "--only", "kinematic,odometry", "--json",
                 "--out", str(out_file)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    result = json.loads(captured.out)
    assert json.loads(out_file.read_text()) == result
    assert result["quick"] is True
    assert result["sections"] == ["kinematic", "odometry"]
    for absent in ("dynamic", "batch", "calibration"):
        assert absent not in result
    assert _positive(result["wall_s"])

    rows = result["kinematic"]["rows"]
    assert [r["dt"] for r in rows] == [0.01, 0.04, 0.10]
    for r in rows:
        assert _positive(r["real_time_factor"])
        assert _positive(r["normalized_time_e3"])
        assert _positive(r["thesis_real_time_factor"])
        assert math.isclose(r["us_per_step"], r["dt"] / r["real_time_factor"] * 1e6)
        if r["dt"] == 0.01:  # no C++ figure at this step size
            assert r["cpp_us_per_step"] is None and r["ratio_vs_cpp"] is None
        else:
            assert math.isclose(r["ratio_vs_cpp"], r["cpp_us_per_step"] / r["us_per_step"])

    odo = result["odometry"]
    for key in ("encoder_us_median", "encoder_us_p99", "imu_us_median",
                "cpu_percent_of_one_core"):
        assert _positive(odo[key]), key
    assert odo["encoder_rate_hz"] == 1000.0

    targets = result["targets"]
    assert set(targets) == {"kinematic_zoe_dt0.04", "kinematic_zoe_dt0.10", "odometry_update"}
    for t in targets.values():
        assert _positive(t["measured"]) and _positive(t["target"])
        assert isinstance(t["met"], bool)
        assert t["met"] == (t["measured"] >= t["target"] if t["comparison"] == ">="
                            else t["measured"] <= t["target"])


def test_cpp_figures_are_the_shipped_provenance_table():
    """The C++ library's figures the bench compares with are those of the benchmark terrains'
    PROVENANCE.md (x real time and µs per step, read from the file)."""
    import re
    from importlib import resources

    from wmr_model.cli.bench import CPP_REAL_TIME, CPP_US_PER_STEP

    text = (resources.files("wmr_model") / "data" / "wmrde_terrains" / "PROVENANCE.md"
            ).read_text(encoding="utf-8")
    names = {"kinematic": "kinematic", "pacejka": "Pacejka contact", "ishigami": "Ishigami",
             "piecewise_linear": "linear spring-damper"}
    for (what, dt), factor in CPP_REAL_TIME.items():
        row = next(line for line in text.splitlines()
                   if line.startswith("|") and names[what] in line and f"dt {dt:.2f}" in line)
        rt, us = re.findall(r"\|\s*([\d,.]+)\s*", row)[-2:]
        assert factor == float(rt.replace(",", "")), row
        decimals = len(us.split(".")[1])  # the file's µs to its printed precision
        assert abs(CPP_US_PER_STEP[(what, dt)] - float(us)) <= 0.5 * 10.0 ** -decimals, row


def test_text_table_lists_targets(capsys):
    assert main(["bench", "--quick", "--only", "odometry"]) == 0
    out = capsys.readouterr().out
    assert "odometry 1 kHz median" in out
    assert "<= 1,000" in out


def test_unknown_section_is_an_error(capsys):
    assert main(["bench", "--only", "kinematic,warp"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("wmr: error:") and "warp" in err
