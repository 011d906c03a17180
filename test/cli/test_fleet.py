"""Fleet calibration (issue 27): `wmr calibrate` over many bags on the one runner.

Four 30 s synthetic bags (two robots x two terrains, different seeds) are written once. The
per-bag fits run in-process and on local Ray with 2 workers and must agree bit for bit; the
cache makes a repeated or interrupted run do only the missing work (counted tasks, not time);
a corrupt bag among good ones is reported while the others fit; the grouped overlays load back
as vehicle sidecars; the command line is run as a subprocess (exit 0 / 1 / 2).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from wmr_model.cli import main
from wmr_model.errors import ParameterError
from wmr_model.pipelines.fleet import (
    FitOptions,
    bag_tasks,
    concatenate_logs,
    discover_bags,
    load_manifest,
    prepare_bag,
)
from wmr_model.pipelines.runner import Runner, ray_available

ON_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
WMR = str(Path(sys.executable).parent / "wmr")
#: cheap fits: two slip parameters, no noise terms (about 1 s per bag)
OPTS = FitOptions(pose_topic="/ground_truth/odom", params=("slip.p2", "slip.p6"), noise=())
FLAGS = ["--pose-topic", "/ground_truth/odom", "--params", "slip.p2,slip.p6", "--noise", "",
         "--quiet"]
BAGS = {"a1": ("alpha", "grass", 11), "b1": ("bravo", "grass", 12),
        "a2": ("alpha", "dirt", 13), "b2": ("bravo", "dirt", 14)}


def need_ray() -> None:
    if ray_available():
        return
    reason = "ray not installed (pip install '.[cluster]'; make setup installs it)"
    if ON_CI:
        pytest.fail(f"CI must run the Ray tests: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("fleet")
    for name, (_, terrain, seed) in BAGS.items():
        assert main(["synth", "--out", str(root / name), "--duration", "30", "--seed",
                     str(seed), "--terrain", terrain, "--truth-rate", "10"]) == 0
    doc = {"vehicle": "warthog", "bags": [{"path": n, "robot": r, "terrain": t}
                                          for n, (r, t, _) in BAGS.items()]}
    (root / "manifest.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    return root


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cache")


def test_bags_from_folder_glob_and_manifest(fleet, tmp_path):
    by_dir = discover_bags(str(fleet))  # the folder's manifest.yaml names labels and vehicle
    assert [(Path(b.path).name, b.robot, b.terrain, b.vehicle) for b in by_dir] == [
        (n, r, t, "warthog") for n, (r, t, _) in BAGS.items()]
    by_glob = discover_bags(str(fleet / "a*"), vehicle="warthog")
    assert [(Path(b.path).name, b.robot, b.terrain) for b in by_glob] == [
        ("a1", "warthog", "unknown"), ("a2", "warthog", "unknown")]
    bad = tmp_path / "m.yaml"
    bad.write_text(yaml.safe_dump({"bags": [{"path": "x", "robt": "alpha"}]}))
    with pytest.raises(ParameterError, match=r"m\.yaml: bags\[0\]: unknown key\(s\) \['robt'\]"):
        load_manifest(bad, "warthog")
    bad.write_text(yaml.safe_dump({"bags": [{"path": "x"}]}))
    with pytest.raises(ParameterError, match=r"bags\[0\]: no vehicle for bag"):
        load_manifest(bad)
    with pytest.raises(ParameterError, match="no bags"):
        discover_bags(str(tmp_path / "nothing*"), "warthog")


def test_concatenated_logs_predict_like_the_separate_ones(fleet):
    """Intervals of a concatenated log (clocks shifted, indices offset) give the same errors
    as on each bag's own log: the grouped fit is (3.44) summed over bags."""
    from wmr_model.calibration.evaluate import evaluate
    from wmr_model.calibration.predictors import ModelPredictor
    from wmr_model.io.vehicles import load_vehicle
    from wmr_model.terrain.surface import flat

    model = load_vehicle("warthog")
    prep = [prepare_bag(str(fleet / n), model, OPTS) for n in ("a1", "b2")]
    log, off = concatenate_logs([p.log for p in prep])
    assert list(off) == [0, len(prep[0].log.pose_time)]
    assert np.all(np.diff(log.joint_time) > 0) and np.all(np.diff(log.pose_time) > 0)
    enh = ModelPredictor(model, flat(), fidelity="enhanced", dt=OPTS.dt)
    vals = {"slip.p2": -0.05, "slip.p6": -0.3}
    for p, o in zip(prep, off):
        own = evaluate(enh, p.log, p.intervals, vals)
        cat = evaluate(enh, log, p.intervals + o, vals)
        np.testing.assert_allclose(cat.r, own.r, rtol=0, atol=1e-9)
        np.testing.assert_allclose(cat.pos_error, own.pos_error, rtol=0, atol=1e-9)
        np.testing.assert_allclose(cat.yaw_error, own.yaw_error, rtol=0, atol=1e-9)


def _estimates(results):
    return [(r.name, r.ok, r.value["estimate"], r.value["std"], r.value["pos"])
            for r in results]


def test_in_process_and_ray_agree_and_the_cache_resumes(fleet, cache):
    bags = discover_bags(str(fleet))
    tasks = bag_tasks(bags, OPTS)
    # an "interrupted" run: only the first two tasks reached the cache
    first = Runner(cache_dir=cache, quiet=True)
    first.run(tasks[:2])
    assert (first.stats.executed, first.stats.cached) == (2, 0)
    local = Runner(cache_dir=cache, quiet=True)
    res_local = local.run(tasks)
    assert (local.stats.executed, local.stats.cached, local.stats.failed) == (2, 2, 0)
    again = Runner(cache_dir=cache, quiet=True)
    res_again = again.run(tasks)
    assert (again.stats.executed, again.stats.cached) == (0, 4)
    assert _estimates(res_again) == _estimates(res_local)
    # the fits differ between bags (different seeds and terrains): equality below means something
    assert len({tuple(r.value["estimate"].values()) for r in res_local}) == 4
    # ... and find each bag's simulated terrain: slip.p6 (yaw-rate scaling) near the preset the
    # bag was generated with (grass -0.4, dirt -0.25; wmr_synth.yaml), grass below dirt
    p6 = {}
    for b, r in zip(bags, res_local):
        truth = yaml.safe_load((Path(b.path) / "wmr_synth.yaml").read_text())["truth"]
        assert abs(r.value["estimate"]["slip.p6"] - truth["slip.p6"]) < 0.1, (b, r.value)
        p6.setdefault(b.terrain, []).append(r.value["estimate"]["slip.p6"])
    assert max(p6["grass"]) < min(p6["dirt"])
    need_ray()
    with Runner(workers=2, quiet=True) as ray_runner:  # no cache: every task runs on Ray
        res_ray = ray_runner.run(tasks)
        assert ray_runner.stats.executed == 4 and ray_runner.mode == "ray (2 workers)"
    assert _estimates(res_ray) == _estimates(res_local)  # bitwise: float == float


def test_cli_fleet_with_a_corrupt_bag_writes_a_loadable_library(fleet, cache, tmp_path):
    from wmr_model.io.calibration_file import load_calibration
    from wmr_model.io.vehicles import load_vehicle, load_vehicle_spec

    broken = tmp_path / "broken"
    shutil.copytree(fleet / "a1", broken)
    mcap = next(broken.glob("*.mcap"))
    mcap.write_bytes(mcap.read_bytes()[: mcap.stat().st_size // 2])
    doc = yaml.safe_load((fleet / "manifest.yaml").read_text())
    for e in doc["bags"]:
        e["path"] = str(fleet / e["path"])
    doc["bags"].append({"path": str(broken), "robot": "alpha", "terrain": "grass"})
    manifest = tmp_path / "fleet.yaml"
    manifest.write_text(yaml.safe_dump(doc))
    lib = tmp_path / "lib"
    cmd = [WMR, "calibrate", str(manifest), "--group-by", "robot", "--library", str(lib),
           "--cache-dir", str(cache), *FLAGS]
    p = subprocess.run([*cmd, "--json"], capture_output=True, text=True, timeout=600)
    assert p.returncode == 1, p.stderr  # one fit failed: reported, not fatal
    d = json.loads(p.stdout)
    ok = {Path(r["bag"]).name: r["ok"] for r in d["bags"]}
    assert ok == {"a1": True, "b1": True, "a2": True, "b2": True, "broken": False}
    err = next(r["error"] for r in d["bags"] if not r["ok"])
    assert "broken" in err and "cannot open bag" in err, err
    assert d["failed"] == 1 and d["runner"]["failed"] == 1
    groups = {g["group"]: g for g in d["groups"]}
    assert set(groups) == {"alpha", "bravo"} and all(g["ok"] for g in groups.values())
    assert [Path(b).name for b in groups["alpha"]["bags"]] == ["a1", "a2"]
    assert [Path(b).name for b in groups["alpha"]["excluded"]] == ["broken"]
    cv = d["cross_validation"]
    assert len(cv) == 4 and all(r["ok"] for r in cv)
    assert sorted(Path(r["test"][0]).name for r in cv) == ["a1", "a2", "b1", "b2"]
    assert all(r["pos"] > 0 and r["nominal_pos"] > 0 for r in cv)
    # the library: one overlay per group, loadable as the vehicle's sidecar
    for name, g in groups.items():
        path = lib / f"{name}.yaml"
        assert g["overlay"] == str(path)
        cal = load_calibration(path, vehicle="warthog")
        assert cal.values == g["estimate"] and cal.std == g["std"]
        assert load_vehicle_spec("warthog", sidecar=path).options["parameters"] == g["estimate"]
        assert load_vehicle("warthog", sidecar=path).nw == 4
    assert groups["alpha"]["estimate"] != groups["bravo"]["estimate"]
    # the same fleet without the broken bag: everything cached, exit 0, the text table
    doc["bags"].pop()
    manifest.write_text(yaml.safe_dump(doc))
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    assert "CROSS-VALIDATED" in p.stdout and "0 run, 10 cached, 0 failed" in p.stdout, p.stdout
    assert p.stderr == ""  # --quiet, and no TTY anyway: no progress bar


def test_cli_fleet_bad_input_is_one_line_exit_2(fleet, tmp_path, monkeypatch, capsys):
    p = subprocess.run([WMR, "calibrate", str(fleet), "--group-by", "wheel", *FLAGS],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 2 and "--group-by" in p.stderr
    for extra, needle in ((["--overlay", str(tmp_path / "o.yaml")], "--overlay: single-bag"),
                          (["--folds", "1"], "--folds: must be >= 2")):
        assert main(["calibrate", str(fleet), *FLAGS, "--no-cache", *extra]) == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and err.startswith("wmr: error: ") and needle in err, err
    # without Ray (an import of it fails): --workers 2 says what to install
    monkeypatch.setitem(sys.modules, "ray", None)
    assert main(["calibrate", str(fleet), *FLAGS, "--no-cache", "--workers", "2"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--workers 2 needs Ray" in err and ".[cluster]" in err, err
