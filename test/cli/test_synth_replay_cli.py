"""`wmr synth` and `wmr replay` from the command line: outputs, --json, one-line errors."""

import json

import pytest

from wmr_model.cli import main


@pytest.mark.slow
def test_synth_then_replay_writes_report_and_json(tmp_path, capsys):
    bag = tmp_path / "run"
    assert main(["synth", "--out", str(bag), "--duration", "20", "--seed", "3", "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["counts"]["/joint_states"] == 1000 and s["storage"] == "mcap"
    out = tmp_path / "out"
    assert main(["replay", str(bag), "--out", str(out), "--json", "--quiet",
                 "--out-bag", str(tmp_path / "odom_bag")]) == 0
    d = json.loads(capsys.readouterr().out)
    assert set(d["table"]) == {"1", "2", "4"}
    assert [r["model"] for r in d["table"]["2"]] == [
        "diff drive", "diff drive+ online", "diff drive+ converged", "3D kin.",
        "3D kin.+ online", "3D kin.+ converged"]
    for f in ("odometry.csv", "calibration.csv", "results.json", "report.md", "report.html",
              "path.png", "error_time.png", "parameters.png", "scatter.png"):
        assert (out / f).is_file(), f
    assert "Table 3.3" in (out / "report.md").read_text()
    from wmr_model.io.bags import bag_topics

    topics = bag_topics(tmp_path / "odom_bag")
    assert topics["/wmr/calibration_state"][0] == "wmr_model/msg/CalibrationState"
    assert topics["/wmr/odometry/0"][1] > 0
    # existing --out of synth: refused in one line
    assert main(["synth", "--out", str(bag), "--duration", "2"]) == 2
    assert "exists; remove it or pass overwrite (--force)" in capsys.readouterr().err


def test_replay_missing_topic_is_one_line(tmp_path, capsys):
    bag = tmp_path / "run"
    assert main(["synth", "--out", str(bag), "--duration", "4"]) == 0
    capsys.readouterr()
    assert main(["replay", str(bag), "--pose-topic", "/icp/odom", "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert err.startswith("wmr: error: ") and "'/icp/odom' (pose reference) is not in the bag" \
        in err and "/gps/odom [nav_msgs/msg/Odometry, 40 msgs]" in err
