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


def _dyn_row(model: str, dt: float, rtf: float, **extra) -> dict:
    return {"contact_model": model, "dt": dt, "real_time_factor": rtf, "options": {},
            "thesis_real_time_factor": None, **extra}


def test_like_for_like_rows_hold_the_dynamic_targets():
    """Where the library's contact parameters were run (LIKE_FOR_LIKE), that row holds the
    model's C++ target; Ishigami (no library parameters) keeps our row; a step size without a
    C++ figure holds none."""
    from wmr_model.cli import bench

    lib = {"contact_params": {"pacejka": {"mu": 1.0}}}
    result = {"dynamic": {
        "rows": [_dyn_row("piecewise_linear", 0.04, 100.0), _dyn_row("pacejka", 0.04, 200.0),
                 _dyn_row("pacejka", 0.10, 250.0), _dyn_row("ishigami", 0.04, 300.0)],
        "library_rows": [_dyn_row("piecewise_linear", 0.04, 110.0, options=lib),
                         _dyn_row("pacejka", 0.04, 210.0, options=lib)]}}
    assert set(bench.LIKE_FOR_LIKE) == {"piecewise_linear", "pacejka"}
    bench._versus_cpp(result)
    targets = bench._targets(result)
    assert {k: t["measured"] for k, t in targets.items()} == {
        "piecewise_linear_zoe_dt0.04": 110.0, "pacejka_zoe_dt0.04": 210.0,
        "ishigami_zoe_dt0.04": 300.0}
    # every row with a C++ figure carries its ratio, the reference rows too
    for r in (*result["dynamic"]["rows"], *result["dynamic"]["library_rows"]):
        if r["dt"] == 0.04:
            assert math.isclose(r["ratio_vs_cpp"], r["cpp_us_per_step"] / r["us_per_step"])
    table = bench._table({**result, "targets": targets, "quick": True, "cpus": 2,
                          "python": "3", "jit": True, "wall_s": 1.0})
    lines = {line.split("[")[0].strip(): line for line in table.splitlines() if "[x real" in line}
    assert lines["dynamic pacejka Zoe dt 0.04, C++ library's contact parameters"].endswith("NO")
    plain = result["dynamic"]["rows"][1]
    # the reference row ends with its ratio: no target columns
    assert lines["dynamic pacejka Zoe dt 0.04"].endswith(f"{plain['ratio_vs_cpp']:.2f}")
    assert lines["dynamic ishigami Zoe dt 0.04"].endswith("NO")


def test_bench_vs_cpp_compares_the_library_rows():
    """bench/bench_vs_cpp.py reads the like-for-like rows where a tree has them and keeps the
    rows with our parameters beside them; an older tree's plain rows are its figures."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "bench" / "bench_vs_cpp.py"
    spec = importlib.util.spec_from_file_location("bench_vs_cpp", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    kin = {"rows": [{"dt": 0.04, "real_time_factor": 1.0}, {"dt": 0.1, "real_time_factor": 2.0}]}
    plain = [_dyn_row(m, 0.04, f) for m, f in (("piecewise_linear", 3.0), ("pacejka", 4.0),
                                                ("ishigami", 5.0))]
    old = mod.figures({"kinematic": kin, "dynamic": {"rows": plain}})
    assert old == {("kinematic", 0.04): 1.0, ("kinematic", 0.1): 2.0,
                   ("piecewise_linear", 0.04): 3.0, ("pacejka", 0.04): 4.0,
                   ("ishigami", 0.04): 5.0}
    lib = [_dyn_row("piecewise_linear", 0.04, 6.0, options={"contact_params": {}}),
           _dyn_row("pacejka", 0.04, 7.0, options={"contact_params": {}})]
    new = mod.figures({"kinematic": kin, "dynamic": {"rows": plain, "library_rows": lib}})
    assert new == {**old, ("piecewise_linear", 0.04): 6.0, ("pacejka", 0.04): 7.0,
                   ("piecewise_linear", 0.04, "ours"): 3.0, ("pacejka", 0.04, "ours"): 4.0}


@pytest.mark.slow
def test_quick_dynamic_runs_the_library_parameters(capsys):
    """``wmr bench --quick --only dynamic``: the like-for-like row ran with the C++ library's
    contact parameters and holds the Pacejka target."""
    from wmr_model.experiments.dynamic import zoe_library_contact_params
    from wmr_model.io.vehicles import load_vehicle

    assert main(["bench", "--quick", "--only", "dynamic", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    (lib,) = result["dynamic"]["library_rows"]
    assert lib["contact_model"] == "pacejka" and lib["dt"] == 0.04
    assert lib["options"]["contact_params"] == zoe_library_contact_params(load_vehicle("zoe"))
    (plain,) = [r for r in result["dynamic"]["rows"] if r["contact_model"] == "pacejka"]
    assert not plain["options"]
    # the parameters change the run: not the same Newton iterations as with ours
    assert lib["mean_iterations"] != plain["mean_iterations"]
    t = result["targets"]["pacejka_zoe_dt0.04"]
    assert t["measured"] == lib["real_time_factor"]
    assert math.isclose(lib["ratio_vs_cpp"], lib["cpp_us_per_step"] / lib["us_per_step"])
