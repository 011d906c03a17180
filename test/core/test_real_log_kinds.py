"""Real logs of every vehicle kind through ``wmr replay`` and ``wmr calibrate`` as a user runs
them (subprocesses from the checkout): a tricycle with a measured steering angle and
free-rolling rear wheels, an Ackermann car whose steering is only commanded on a second topic
and whose motor drives a differential, and skid steers whose reference is a position-only GNSS
fix (precise RTK-grade and coarse SBAS). The slices are in ``data/real_logs/`` (licences and
provenance beside them)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LOGS = REPO / "data" / "real_logs"
HUSKY = LOGS / "husky_rl_test1" / "vehicle" / "husky_2015.urdf"
WMR = str(Path(sys.executable).parent / "wmr")  # the installed command line

#: (slice, vehicle, planar model of its kind, reference measures heading)
KINDS = [
    ("tricycle_circular_140120211415", "tricycle", "bicycle", True),
    ("f1tenth_frictionmaps_DS3", "f1tenth", "bicycle", True),
    ("pathfinder_test17run", "pathfinder", "diff drive", False),
    ("husky_rl_test1", str(HUSKY), "diff drive", False),
]


def _wmr(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([WMR, *args], cwd=REPO,
                          capture_output=True, text=True, timeout=600)


@pytest.mark.slow
@pytest.mark.parametrize("log, vehicle, planar, heading", KINDS,
                         ids=[k[0].split("_")[0] for k in KINDS])
def test_replay_and_calibrate_every_kind(log, vehicle, planar, heading, tmp_path):
    bag = str(LOGS / log / "bag")
    r = _wmr("replay", bag, "--vehicle", vehicle, "--json", "--quiet", "--out",
             str(tmp_path / "out"), "--no-plots")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    rows = d["out_of_sample"]["table"]["2"]
    assert [x["model"] for x in rows] == [planar, f"{planar}+ online", f"{planar}+ calibrated",
                                          "3D kin.", "3D kin.+ online", "3D kin.+ calibrated"]
    assert all(x["mean_pos_m"] is not None and 0 < x["mean_pos_m"] < 1.0 for x in rows)
    # yaw is scored only against a reference that measures it
    assert all((x["mean_yaw_rad"] is not None) == heading for x in rows)
    assert d["planar_plus"]["model"] == f"{planar}+"
    assert (tmp_path / "out" / "results.json").is_file()
    c = _wmr("calibrate", bag, "--vehicle", vehicle, "--json")
    assert c.returncode == 0, c.stderr
    dc = json.loads(c.stdout)
    assert [x["model"] for x in dc["out_of_sample"]["rows"]][:3] == [
        planar, f"{planar}+ online", f"{planar}+ calibrated"]
    if not heading:
        assert any("heading derived from the gyro" in n for n in dc["notes"])
    assert any("reference jitter" in n for n in dc["notes"])


@pytest.mark.slow
def test_the_steering_inputs_are_read_as_their_kind():
    """The tricycle's angle sensor is measured on the encoder topic; the car's command comes
    from the sidecar's topic and follows its lag; the tricycle's rear wheels have no encoder
    and the car's motor is a differential joint."""
    r = _wmr("calibrate", str(LOGS / "f1tenth_frictionmaps_DS3" / "bag"), "--vehicle",
             "f1tenth", "--json")
    assert r.returncode == 0, r.stderr
    notes = " ".join(json.loads(r.stdout)["notes"])
    assert ("/joint_states_cmd_steer: steering angle of front_steer_joint from its JointState "
            "position, commanded (lag 0.1 s") in notes
    assert "steer.front_steer_joint.lag" in notes and "steer.front_steer_joint.gain" in notes
    r = _wmr("calibrate", str(LOGS / "tricycle_circular_140120211415" / "bag"), "--vehicle",
             "tricycle", "--json")
    assert r.returncode == 0, r.stderr
    notes = " ".join(json.loads(r.stdout)["notes"])
    assert "/joint_states: steering angle of front_steer_joint from its JointState position, " \
           "measured" in notes


@pytest.mark.parametrize("args, expect", [
    (["replay", "f1tenth_frictionmaps_DS3", "--vehicle", "f1tenth", "--steer-topic", "/nope"],
     "topic '/nope' (steering angles) is not in the bag"),
    (["calibrate", "f1tenth_frictionmaps_DS3", "--vehicle", "f1tenth", "--steer-topic",
      "/joint_states"],
     "no steering angles of ['front_steer_joint'] (JointState positions) on ['/joint_states']"),
    (["calibrate", "tricycle_circular_140120211415", "--vehicle", "warthog"],
     "none of the encoder joints ['front_wheel_joint', 'front_steer_joint'] is a driven joint "
     "of warthog"),
])
def test_refusals_are_one_line_naming_the_fix(args, expect):
    cmd, log, *rest = args
    r = _wmr(cmd, str(LOGS / log / "bag"), *rest)
    assert r.returncode == 2, r.stderr
    err = r.stderr.strip()
    assert len(err.splitlines()) == 1 and expect in err, err
