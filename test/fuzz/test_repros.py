"""Every repro of issue 24, one named test each: the input that crashed, hung, allocated without
bound or exited 0 with a wrong answer now gives a finite, plausible result or one error line."""

from __future__ import annotations

import math
import os
import re
import stat
from pathlib import Path

import numpy as np
import pytest
from bagtools import empty, rewrite, set_stamp, stamp_of
from wmrcontract import error_line, run_wmr

ROOT = Path(__file__).resolve().parents[2]
URDF = (ROOT / "urdf" / "warthog.urdf").read_text()
SIDECAR = (ROOT / "config" / "vehicles" / "warthog.yaml").read_text()
ABSOLEM_SIDECAR = (ROOT / "config" / "vehicles" / "absolem.yaml").read_text()


def _pair(tmp_path, urdf=URDF, sidecar=SIDECAR, name="v"):
    u, s = tmp_path / f"{name}.urdf", tmp_path / f"{name}.yaml"
    u.write_text(urdf) if isinstance(urdf, str) else u.write_bytes(urdf)
    s.write_text(sidecar) if isinstance(sidecar, str) else s.write_bytes(sidecar)
    return u, s


def _deep_chain(n: int) -> str:
    links = ['<link name="base_link"/>'] + [f'<link name="l{i}"/>' for i in range(n)]
    joints = [f'<joint name="j{i}" type="revolute"><parent link="{"base_link" if i == 0 else f"l{i - 1}"}"/>'
              f'<child link="l{i}"/><axis xyz="0 0 1"/>'
              '<limit lower="-1" upper="1" effort="1" velocity="1"/></joint>' for i in range(n)]
    return f'<robot name="deep">{"".join(links + joints)}</robot>'


# ---- crashes on valid input ----------------------------------------------------------------
def test_simulate_absolem_speed_runs():
    res = run_wmr("simulate", "absolem", "--speed", "0.5", "--duration", "1", "--json")
    assert res.code == 0 and res.data["final_position"][0] > 0.2  # 0.5 m/s for 1 s


def test_vehicle_without_wheels_refused_by_check_and_simulate(tmp_path):
    u, s = _pair(tmp_path, _deep_chain(3), "version: 1\nvehicle: deep\nbody_link: base_link\n")
    for argv in (["check", u, "--sidecar", s], ["simulate", u, "--sidecar", s, "--duration", "1"]):
        assert "v.urdf: vehicle 'deep' has no wheels and no tracks" in error_line(run_wmr(*argv))


@pytest.mark.parametrize("dt", ["0", "nan", "-0.05", "inf"])
def test_calibrate_bad_dt_is_one_line(synth_bag, dt):
    assert "--dt: must be a finite number > 0" in error_line(run_wmr(
        "calibrate", synth_bag, "--vehicle", "warthog", "--pose-topic", "/gps/odom", "--dt", dt))


# ---- tracebacks ------------------------------------------------------------------------------
def test_axis_with_two_numbers(tmp_path):
    u, s = _pair(tmp_path, re.sub(r'<axis xyz="[^"]*"/>', '<axis xyz="0 1"/>', URDF, count=1))
    assert re.search(r'v\.urdf: line \d+: <axis xyz="0 1">: expected 3 numbers',
                     error_line(run_wmr("check", u, "--sidecar", s)))


def test_non_utf8_sidecar(tmp_path):
    u, s = _pair(tmp_path, sidecar=SIDECAR.encode() + b"# caf\xe9\n")
    assert "v.yaml: not UTF-8 text (byte 0xe9" in error_line(run_wmr("check", u, "--sidecar", s))


def test_non_utf8_frame_table(tmp_path):
    t = tmp_path / "table.yaml"
    t.write_bytes(b"version: 1\nname: x\n# \xff\xfe\nframes: []\n")
    assert "table.yaml: not UTF-8 text (byte 0xff at offset" in error_line(run_wmr("check", t))


def test_non_utf8_synth_sidecar(bag_copy):
    bag = bag_copy()
    side = bag / "wmr_synth.yaml"
    side.write_bytes(side.read_bytes() + b"\n# \xe9\n")
    assert "wmr_synth.yaml: not UTF-8 text" in error_line(run_wmr("replay", bag, "--quiet"))


def test_deep_chain_describe(tmp_path):
    wheel = ('<link name="wheel"><collision><geometry><cylinder radius="0.1" length="0.05"/>'
             '</geometry></collision></link><joint name="wheel_joint" type="continuous">'
             '<parent link="base_link"/><child link="wheel"/><origin rpy="-1.5708 0 0"/>'
             '<axis xyz="0 0 1"/></joint></robot>')  # a wheel: check needs ground contact
    urdf = _deep_chain(2000).replace("</robot>", wheel)
    u, s = _pair(tmp_path, urdf, "version: 1\nvehicle: deep\nbody_link: base_link\n")
    res = run_wmr("check", u, "--sidecar", s)
    assert res.code == 0 and "j1999 [revolute]" in res.out


def test_rough_negative_seed():
    assert "SEED must be an integer >= 0, got -1" in error_line(
        run_wmr("simulate", "diffdrive", "--terrain", "rough:0.05,0.2,-1", "--duration", "1"))


def test_corrupt_mcap_mid_file(bag_copy):
    bag = bag_copy()
    mcap = next(bag.glob("*.mcap"))
    data = bytearray(mcap.read_bytes())
    rng = np.random.default_rng(0)
    mid = len(data) // 2
    data[mid:mid + 4096] = rng.integers(0, 256, 4096, dtype=np.uint8).tobytes()
    mcap.write_bytes(bytes(data))
    res = run_wmr("replay", bag, "--quiet", "--json")  # contract: finite, or one line
    if res.code == 2:
        assert str(bag) in res.err


def test_wheel_velocities_1e30_on_2_percent(synth_bag, tmp_path):
    rng = np.random.default_rng(1)

    def edit(k, topic, m):
        if topic == "/joint_states" and rng.random() < 0.02:
            m.velocity = np.full(len(m.name), 1e30)

    bag = rewrite(synth_bag, tmp_path / "b", edit)
    res = run_wmr("calibrate", bag, "--vehicle", "warthog", "--pose-topic", "/gps/odom",
                  "--json")
    assert res.code == 0
    assert any("samples dropped (rate not finite, or rim speed above" in n
               for n in res.data["notes"])
    assert all(r["mean_pos_m"] < 1.0 for r in res.data["rows"])


def test_synth_sidecar_with_only_version(bag_copy):
    bag = bag_copy()
    (bag / "wmr_synth.yaml").write_text("version: 1\n")
    assert "wmr_synth.yaml: terrain: expected a mapping" in error_line(
        run_wmr("replay", bag, "--quiet"))


def test_commands_fifo_does_not_hang(tmp_path):
    fifo = tmp_path / "cmd.csv"
    os.mkfifo(fifo)
    assert "is a FIFO; expected a regular file" in error_line(
        run_wmr("simulate", "diffdrive", "--commands", fifo))


# ---- budgets before allocation -----------------------------------------------------------------
def test_track_samples_budget(tmp_path):
    u = (ROOT / "urdf" / "absolem.urdf").read_text()
    s = re.sub(r"samples: \d+", "samples: 100000000", ABSOLEM_SIDECAR, count=1)
    u, s = _pair(tmp_path, u, s)
    assert "samples: 100,000,000 exceeds the budget of 10,000" in error_line(
        run_wmr("check", u, "--sidecar", s))


@pytest.mark.parametrize("args,needle", [
    (["--terrain", "rough:0.05,1e-3"], "grid nodes (80019 x 160019"),
    (["--dt", "1e-7", "--duration", "1"], "steps: 10,000,000 exceeds the budget of 1,000,000"),
    (["--duration", "1e7"], "steps: 250,000,000 exceeds the budget"),
    (["--dt", "1e-300", "--duration", "1"], "steps: 1e+300 exceeds the budget"),
])
def test_simulate_budgets(args, needle):
    assert needle in error_line(run_wmr("simulate", "diffdrive", *args))


def test_commands_csv_spanning_1e9_s(tmp_path):
    c = tmp_path / "c.csv"
    c.write_text("time,left_wheel_joint,right_wheel_joint\n0,1,1\n1e9,1,1\n")
    assert "time span [s]: 1,000,000,000 exceeds the budget" in error_line(
        run_wmr("simulate", "diffdrive", "--commands", c))


# ---- out-of-order stamps ---------------------------------------------------------------------
def _replay(bag, *extra):
    res = run_wmr("replay", bag, "--quiet", "--json", *extra)
    assert res.code == 0, res
    return res.data


@pytest.fixture(scope="module")
def clean_replay(synth_bag):
    return _replay(synth_bag)


def _converged(d, L="2"):
    return {r["model"]: r["mean_pos_m"] for r in d["table"][L]}["3D kin.+ converged"]


def test_jittered_stamps_replay(synth_bag, tmp_path, clean_replay):
    rng = np.random.default_rng(2)

    def edit(k, topic, m):
        t = stamp_of(m)
        if t is not None and rng.random() < 0.1:
            set_stamp(m, t + rng.uniform(-0.5, 0.5))

    bag = rewrite(synth_bag, tmp_path / "b", edit)
    # three GPS fixes 0.5-2.3 s apart get stamps off by up to 0.5 s: the reference check finds
    # them, and with the default 5 s settling time nothing of this 12 s run is trusted - one
    # line saying so and how to keep the intervals, exit 2
    res = run_wmr("replay", bag, "--quiet", "--json")
    assert res.code == 2
    assert "reference check excluded all" in error_line(res)
    assert "--reference-settle 0" in error_line(res)
    # the faulty steps only: the rest calibrates
    d = _replay(bag, "--reference-settle", "0")
    assert _converged(d) < 2 * _converged(clean_replay) + 0.1
    assert any("reference faults" in n for n in d["notes"])


def test_reversed_stretch_replay(synth_bag, tmp_path, clean_replay):
    held: list = []

    def edit(k, topic, m):  # messages 100..119 of /joint_states written in reverse order
        if topic != "/joint_states" or not 100 <= k < 120:
            return None
        held.append(m)
        return held[::-1] if k == 119 else []

    d = _replay(rewrite(synth_bag, tmp_path / "b", edit))
    assert _converged(d) == pytest.approx(_converged(clean_replay), rel=1e-9)


def test_backward_jump_600_s_replay_and_calibrate(synth_bag, tmp_path, clean_replay):
    t0 = _first_stamp(synth_bag)

    def edit(k, topic, m):  # the recording clock steps back 600 s, 6 s into the run
        t = stamp_of(m)
        if t is not None and t > t0 + 6.0:
            set_stamp(m, t - 600.0)

    bag = rewrite(synth_bag, tmp_path / "b", edit)
    d = _replay(bag)
    assert any("jumped back by 600.0" in n for n in d["notes"])
    assert _converged(d) == pytest.approx(_converged(clean_replay), rel=1e-3)
    res = run_wmr("calibrate", bag, "--vehicle", "warthog", "--pose-topic", "/gps/odom", "--json")
    assert res.code == 0 and max(r["mean_pos_m"] for r in res.data["rows"]) < 1.0


def _first_stamp(bag) -> float:
    from wmr_model.io.bags import read_streams

    return float(read_streams(bag, {"e": "/joint_states"}, {"e": "joint_states"})["e"].stamp[0])


# ---- silently wrong -------------------------------------------------------------------------
def test_self_mimic_refused(tmp_path):
    u = URDF.replace('<joint name="rear_left_wheel" type="continuous">',
                     '<joint name="rear_left_wheel" type="continuous">\n'
                     '    <mimic joint="rear_left_wheel"/>')
    u, s = _pair(tmp_path, u)
    assert "<mimic joint='rear_left_wheel'> refers to itself" in error_line(
        run_wmr("simulate", u, "--sidecar", s, "--duration", "2"))


def test_contradictory_constraints_refused(tmp_path):
    s = SIDECAR.replace(
        "sensors:", "  - {name: c2, terms: {left_diff_unit_joint: 1, right_diff_unit_joint: 1}, "
        "offset: 0.7}\nsensors:")
    u, s = _pair(tmp_path, sidecar=s)
    res = run_wmr("simulate", u, "--sidecar", s, "--duration", "1", "--json")
    assert res.code == 2  # never exit 0 with the contact off by 0.7 m


def test_wheel_radius_in_mm_refused(tmp_path):
    u, s = _pair(tmp_path, sidecar=SIDECAR.replace("front_left_wheel: {radius: 0.3",
                                                  "front_left_wheel: {radius: 100"))
    assert "radius 100 m is 333 x the collision radius 0.3 m" in error_line(
        run_wmr("simulate", u, "--sidecar", s, "--duration", "1"))


def test_joint_rates_1e308_refused():
    assert "rim speed" in error_line(run_wmr("simulate", "diffdrive", "--joint-rates",
                                             "1e308,1e308", "--duration", "1"))


@pytest.mark.parametrize("terrain", ["step:100,0.5", "step:100,1.5"])
def test_step_100_m_loses_contact_loudly(terrain):
    err = error_line(run_wmr("simulate", "warthog", "--terrain", terrain, "--duration", "4"))
    assert "initial contact error" in err or "lost the terrain by" in err


@pytest.mark.parametrize("mode", ["empty", "nan"])
def test_missing_velocities_use_positions(synth_bag, tmp_path, clean_replay, mode):
    def edit(k, topic, m):
        if topic == "/joint_states":
            m.velocity = empty() if mode == "empty" else np.full(len(m.name), np.nan)

    bag = rewrite(synth_bag, tmp_path / "b", edit)
    d = _replay(bag)
    assert any("rates differentiated from the positions" in n for n in d["notes"])
    # calibrated, not the nominal model: close to the clean bag's error
    assert _converged(d) < _converged(clean_replay) + 0.1
    res = run_wmr("calibrate", bag, "--vehicle", "warthog", "--pose-topic", "/gps/odom",
                  "--json")
    pos = [r["mean_pos_m"] for r in res.data["rows"]]
    assert len(set(pos)) == len(pos) and max(pos) < 1.0  # six different models, not one


def test_nan_in_10_percent_of_truth_poses(synth_bag, tmp_path):
    rng = np.random.default_rng(3)

    def edit(k, topic, m):
        if topic == "/ground_truth/odom" and rng.random() < 0.1:
            m.pose.pose.position.x = math.nan

    d = _replay(rewrite(synth_bag, tmp_path / "b", edit))
    assert all(v["drift_pct"] is not None for v in d["drift"].values())
    assert any("/ground_truth/odom: " in n and "poses dropped" in n for n in d["notes"])


# ---- writes ---------------------------------------------------------------------------------
def test_overlay_is_replaced_atomically_0644(synth_bag, tmp_path):
    ov = tmp_path / "overlay.yaml"
    ov.write_text("old\n")
    os.chmod(ov, 0o600)
    ino = ov.stat().st_ino
    res = run_wmr("calibrate", synth_bag, "--vehicle", "warthog", "--pose-topic", "/gps/odom",
                  "--overlay", ov, "--json")
    assert res.code == 0
    st = ov.stat()
    assert st.st_ino != ino  # a new file renamed over the old one, not rewritten in place
    assert stat.S_IMODE(st.st_mode) == 0o644 & ~_umask()
    assert "warthog" in ov.read_text() and [p.name for p in tmp_path.iterdir()] == ["overlay.yaml"]


def _umask() -> int:
    m = os.umask(0)
    os.umask(m)
    return m


def test_out_bag_missing_parents(synth_bag, tmp_path):
    target = tmp_path / "nonexistent" / "dir" / "x"
    assert "does not exist (only the bag itself is created)" in error_line(
        run_wmr("replay", synth_bag, "--quiet", "--out-bag", target))
    assert not (tmp_path / "nonexistent").exists()


def test_out_folder_last_component_created(synth_bag, tmp_path, clean_replay):
    out = tmp_path / "new"
    res = run_wmr("replay", synth_bag, "--quiet", "--json", "--no-plots", "--out", out)
    assert res.code == 0 and (out / "results.json").is_file()
    assert stat.S_IMODE((out / "odometry.csv").stat().st_mode) == 0o644 & ~_umask()
    assert "its parent folder" in error_line(
        run_wmr("replay", synth_bag, "--quiet", "--out", tmp_path / "a" / "b"))


@pytest.mark.parametrize("command,steps", [("calibrate", "2e+300"), ("replay", "4e+300")])
def test_dt_1e_300_is_a_budget_error(synth_bag, command, steps):
    extra = ["--vehicle", "warthog", "--pose-topic", "/gps/odom"] if command == "calibrate" \
        else ["--quiet"]
    assert f"steps per interval: {steps} exceeds the budget of 100,000" in error_line(
        run_wmr(command, synth_bag, "--dt", "1e-300", *extra))


# ---- predict: candidate and output budgets -------------------------------------------------
def test_predict_candidate_budget_names_the_number():
    from wmr_model.budgets import MAX_CANDIDATES
    from wmr_model.errors import ParameterError
    from wmr_model.io.vehicles import load_vehicle
    from wmr_model.prediction.predict import predict
    from wmr_model.terrain.surface import flat

    m = load_vehicle("diffdrive")
    q0 = np.broadcast_to(m.neutral_state(), (MAX_CANDIDATES + 1, m.nq))
    with pytest.raises(ParameterError, match=r"predict: candidates: 100,001 exceeds the budget "
                                             r"of 100,000; split the batch"):
        predict(m, flat(), q0, np.zeros((1, len(m.actuated_joints))), 0.05)


def test_predict_output_budget_before_allocating():
    """20,000 candidates x 2,000 steps with covariance would allocate ~10 GB: refused at once,
    naming the bytes and the way out (every=k)."""
    from wmr_model.errors import ParameterError
    from wmr_model.io.vehicles import load_vehicle
    from wmr_model.prediction.predict import predict, prediction_bytes
    from wmr_model.terrain.surface import flat

    m = load_vehicle("diffdrive")
    q0 = np.broadcast_to(m.neutral_state(), (20_000, m.nq))
    need = prediction_bytes(m, 20_000, 2000, 2001, covariance=True)
    with pytest.raises(ParameterError, match=rf"predict: bytes for 20000 candidates x 2001 stored "
                                             rf"states: {need:,} exceeds the budget of "
                                             r"2,147,483,648; keep fewer states \(every=k"):
        predict(m, flat(), q0, np.zeros((2000, len(m.actuated_joints))), 0.01,
                Qprime=np.eye(6) * 1e-4)
    # keeping the end state only drops the stored states (the command scratch remains)
    assert prediction_bytes(m, 20_000, 2000, 2, covariance=True) < need / 5


@pytest.mark.parametrize("every,cov", [(1, True), (3, False)])
def test_prediction_bytes_is_what_predict_allocates(every, cov):
    """prediction_bytes = the returned arrays + the (N, T, nv) command scratch and (N, T, na)
    rate copy, counted from the arrays themselves."""
    from wmr_model.io.vehicles import load_vehicle
    from wmr_model.prediction.predict import predict, prediction_bytes
    from wmr_model.terrain.surface import flat

    m = load_vehicle("diffdrive")
    N, T, na = 3, 7, len(m.actuated_joints)
    pr = predict(m, flat(), np.broadcast_to(m.neutral_state(), (N, m.nq)),
                 np.full((N, T, na), 0.5), 0.05, fidelity="enhanced",
                 Qprime=np.eye(6) * 1e-4 if cov else None, every=every)
    kept = sum(a.nbytes for a in (pr.q, pr.qdot, pr.contact_speed, pr.dz, pr.slip,
                                  pr.wheel_slip, pr.stability_margin, pr.flags,
                                  *(() if pr.covariance is None else (pr.covariance,))))
    S = pr.q.shape[1]
    assert kept + N * 8 * T * (m.nv + na) == prediction_bytes(m, N, T, S, covariance=cov)


def test_odometry_and_recorded_streams_share_the_position_rule():
    """Odometry3D (per message) and differentiate_positions (whole stream) give the same joint
    rates for an encoder stream with velocities missing (NaN) in some messages: one rule,
    streams.rate_or_difference."""
    from wmr_model.estimation.odometry import Odometry3D
    from wmr_model.estimation.streams import differentiate_positions
    from wmr_model.io.vehicles import load_vehicle

    m = load_vehicle("diffdrive")
    names = [m.joint_names[int(k)] for k in m.actuated_joints]
    rng = np.random.default_rng(4)
    t = np.cumsum(rng.uniform(0.01, 0.03, 60))
    vel = rng.uniform(-3, 3, (60, len(names)))
    pos = np.cumsum(vel * 0.02, axis=0)
    vel[rng.uniform(size=vel.shape) < 0.4] = np.nan  # "not provided" in 40 % of the entries
    expected = differentiate_positions(t, pos, vel)
    odo = Odometry3D(m, use_gyro=False)
    cols = [6 + int(k) for k in m.actuated_joints]
    for i in range(len(t)):
        r = odo.update_encoders(t[i], names, pos[i], vel[i])
        if i == 0:
            continue  # the first message only starts the time base
        assert r.stepped
        np.testing.assert_array_equal(odo.qdot[cols], expected[i])
