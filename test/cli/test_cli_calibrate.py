"""`wmr calibrate` from the command line: Table 3.3 rows, --json, overlay, one-line errors."""

import json

import pytest
import yaml

from wmr_model.cli import main


@pytest.fixture(scope="module")
def bag(tmp_path_factory):
    path = tmp_path_factory.mktemp("cal") / "run"
    assert main(["synth", "--out", str(path), "--duration", "30", "--seed", "2",
                 "--truth-rate", "10"]) == 0
    return path


def test_calibrate_prints_rows_and_writes_an_overlay(bag, tmp_path, capsys):
    capsys.readouterr()
    overlay = tmp_path / "overlay.yaml"
    args = ["calibrate", str(bag), "--vehicle", "warthog", "--pose-topic",
            "/ground_truth/odom", "--params", "slip.p2,slip.p6", "--min-distance", "0.5",
            "--max-speed", "5", "--iterations", "2", "--overlay", str(overlay), "--json"]
    assert main(args) == 0
    d = json.loads(capsys.readouterr().out)
    assert [r["model"] for r in d["rows"]] == [
        "diff drive", "diff drive+ online", "diff drive+ converged", "3D kin.",
        "3D kin.+ online", "3D kin.+ converged"]
    assert 0 < d["calibration_intervals"] <= d["intervals"]
    # the headline: out of sample over the last 40 % (default --split 0.6)
    o = d["out_of_sample"]
    assert o["fraction"] == 0.6 and 0 < o["evaluation_intervals"] < d["intervals"]
    assert [r["model"] for r in o["rows"]] == [
        "diff drive", "diff drive+ online", "diff drive+ calibrated", "3D kin.",
        "3D kin.+ online", "3D kin.+ calibrated"]
    assert sum(d["interval_classes"].values()) == d["calibration_intervals"]
    assert all(r["mean_pos_m"] >= 0 and r["mean_yaw_rad"] >= 0 for r in d["rows"])
    est = d["details"]["3D kin.+"]["estimate"]
    assert set(est) == {"slip.p2", "slip.p6", "noise.U.wz_wz", "noise.U.vx_vx",
                        "noise.U.vy_vy"}
    text = yaml.safe_load(overlay.read_text())
    assert "slip.p6" in json.dumps(text)
    # the text table: one line per row
    assert main(args[:-3]) == 0
    out = capsys.readouterr().out
    assert "3D kin.+ converged" in out and "informative ones calibrate" in out
    assert out.index("OUT OF SAMPLE") < out.index("IN SAMPLE")


@pytest.mark.parametrize("extra, needle", [
    (["--pose-std", "0.01"], "--pose-std: expected ROT,POS"),
    (["--iterations", "0"], "--iterations: must be >= 1"),
    (["--min-distance", "1e6", "--min-turn", "1e6"], "nothing to calibrate"),
    (["--split", "1.5"], "--split: must be a fraction"),
    (["--reference-settle", "-1"], "--reference-settle: must be a number in [0, 600] s"),
    (["--params", "slip.p9"], "slip.p9"),
    (["--inputs", "compass"], "prediction inputs"),
])
def test_bad_input_is_one_line(bag, capsys, extra, needle):
    capsys.readouterr()
    assert main(["calibrate", str(bag), "--vehicle", "warthog", "--pose-topic",
                 "/ground_truth/odom", *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("wmr: error: ") and needle in err, err


def test_missing_topic_names_it(bag, capsys):
    capsys.readouterr()
    assert main(["calibrate", str(bag), "--vehicle", "warthog", "--pose-topic",
                 "/icp/odom"]) == 2
    err = capsys.readouterr().err.strip()
    assert "'/icp/odom'" in err and "/ground_truth/odom" in err


def test_default_pose_topic_is_found_or_named(bag):
    """Without --pose-topic the first reference topic of the bag is used (a synth bag's
    /gps/odom, as replay does); a bag with none gets one line naming the candidates."""
    from wmr_model.errors import BagError
    from wmr_model.io.bags import POSE_TOPIC_CANDIDATES, find_pose_topic

    assert find_pose_topic(bag) == "/gps/odom"
    with pytest.raises(BagError, match=r"no pose reference topic \(tried /gps/odom, .*"
                       r"/gps/fix; set --pose-topic\); its topics are: /joint_states") as e:
        find_pose_topic(bag, {"/joint_states": ("sensor_msgs/msg/JointState", 10)})
    assert "\n" not in str(e.value) and POSE_TOPIC_CANDIDATES[-1] == "/gps/fix"
