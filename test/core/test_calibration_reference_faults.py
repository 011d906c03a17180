"""Reference faults (wmr_model.calibration.reference) on synthetic logs with known faults.

Oracles: the faults are injected at known samples of a synthetic Warthog run with known slip
(ICP-like jumps: single poses displaced by 1 m; a diverged stretch: the reference wanders off at
2 m/s for 4 s; logger stamp jitter: stamps moved by up to +-40 ms, so some consecutive poses are
20 ms apart; recurring re-localizations); the detector must flag exactly the injected
steps/stretch plus the settling time before and after them, and nothing on the clean or
jittered log (where a stamp-difference speed test fires); calibration on the trusted intervals
recovers the true slip within 3 sigma despite the faults.
"""

from dataclasses import replace

import numpy as np
import pytest

from wmr_model.calibration import (
    IntervalPolicy,
    ModelPredictor,
    OnlineCalibrator,
    inject_outliers,
    select_intervals,
    synthetic_log,
)
from wmr_model.calibration.intervals import ground_truth_jumps
from wmr_model.calibration.predictors import DiffDrivePredictor
from wmr_model.calibration.reference import (
    ReferencePolicy,
    estimate_latency,
    fault_stretches,
    reference_faults,
    trusted_intervals,
)
from wmr_model.errors import ParameterError
from wmr_model.io.vehicles import load_vehicle
from wmr_model.terrain import surface as tr

TRUE_P6 = -0.3
LATENCY = 0.2


@pytest.fixture(scope="module")
def clean():
    model = load_vehicle("warthog")
    run = synthetic_log(model, tr.flat(), duration=60.0, dt=0.02, slip={"slip.p6": TRUE_P6},
                        pose_rate=10.0, time_offset=LATENCY, seed=11)
    return model, run.log, DiffDrivePredictor.from_model(model)


def test_clean_log_has_no_faults_and_the_latency_is_found(clean):
    _model, log, dd = clean
    assert estimate_latency(log, dd) == pytest.approx(LATENCY, abs=0.051)
    f = reference_faults(log, dd, latency=estimate_latency(log, dd))
    assert not f.untrusted.any()


def test_stamp_jitter_is_not_a_jump(clean):
    _model, log, dd = clean
    rng = np.random.default_rng(3)
    t = log.pose_time + rng.uniform(-0.04, 0.04, len(log.pose_time))
    t = np.maximum.accumulate(t + 1e-6 * np.arange(len(t)))
    jit = replace(log, pose_time=t)
    # the stamp-difference speed test misfires (poses 20 ms apart read as fast steps) ...
    assert ground_truth_jumps(t, jit.pose[:, 4:7], 2.0).sum() > 0
    # ... the latency-corrected comparison with the wheels and gyro does not
    assert not reference_faults(jit, dd, latency=LATENCY).untrusted.any()


def test_icp_jumps_and_a_diverged_stretch_are_found_and_excluded(clean):
    model, log, dd = clean
    spikes = np.array([100, 350])  # single poses displaced by 1 m (re-localization jumps)
    bad = inject_outliers(log, spikes, offset=1.0, seed=2)
    pose = np.array(bad.pose)
    div = (bad.pose_time > 30.0) & (bad.pose_time < 34.0)  # wanders off at 2 m/s, 4 s
    pose[div, 4] += 2.0 * (bad.pose_time[div] - 30.0)
    bad = replace(bad, pose=pose)
    f = reference_faults(bad, dd, latency=LATENCY)
    for k in spikes:  # the step into and out of each spike
        assert f.jump[k - 1] and f.jump[k]
    d = np.flatnonzero(div)
    assert f.untrusted[d[0]:d[-1]].all()  # the whole diverged stretch
    stretches = fault_stretches(bad.pose_time, f)
    assert any(a <= 30.1 and b >= 33.9 for a, b in stretches), stretches
    # nothing far from the faults is found faulty
    faulty = f.jump | f.diverged
    far = np.ones(len(f.untrusted), dtype=bool)
    for k in spikes:
        far[k - 25:k + 25] = False
    far[d[0] - 25:d[-1] + 25] = False
    assert not faulty[far].any()
    # unsettled: exactly the other steps starting within `settle` after a faulty step's end
    # or ending within `settle` before a faulty step's start
    t, settle = bad.pose_time, ReferencePolicy().settle
    ends, starts = t[1:][faulty], t[:-1][faulty]
    for j in range(len(faulty)):
        prev, nxt = ends[ends <= t[j]], starts[starts >= t[j + 1]]
        want = not faulty[j] and ((len(prev) > 0 and t[j] - prev.max() < settle)
                                  or (len(nxt) > 0 and nxt.min() - t[j + 1] < settle))
        assert f.unsettled[j] == want, j
    assert f.unsettled[spikes[0] + 1:spikes[0] + 45].all()  # 4.5 s after the first spike
    assert f.unsettled[spikes[0] - 46:spikes[0] - 1].all()  # and 4.5 s before it
    assert np.array_equal(f.untrusted, faulty | f.unsettled)
    # intervals over the faults and their settling time go
    iv = select_intervals(bad.pose_time, IntervalPolicy("time", 2.0))
    ok = trusted_intervals(iv, f)
    span = [(t[spikes[0] - 1] - settle, t[spikes[0] + 1] + settle),
            (30.0 - settle, t[spikes[1] + 1] + settle)]
    expect = [r for r in iv if not any(t[r[1]] > a - 0.2 and t[r[0]] < b for a, b in span)]
    assert 0 < len(ok) and abs(len(ok) - len(expect)) <= 2, (len(ok), len(expect))

    def fit(lg, ivs):
        pred = ModelPredictor(model, dt=0.05)
        cal = OnlineCalibrator(pred, ["slip.p6", "time_offset.pose"], std0={
            "slip.p6": 0.5, "time_offset.pose": 0.1}, iterations=3)
        cal.run(lg, ivs)
        return cal

    # nothing of the faults leaks into the calibration: the same as on the clean log
    cal = fit(bad, ok)
    assert cal.estimate == fit(log, ok).estimate
    assert abs(cal.estimate["slip.p6"] - TRUE_P6) < 3 * cal.std["slip.p6"]
    # on the intervals the fault tests alone keep (no settling time) both parameters are
    # recovered (on the settled subset the online time offset stops at 0.11 +- 0.008 s: the
    # intervals it needs are the ones after the first spike - see issue 21's note)
    ok0 = trusted_intervals(iv, reference_faults(bad, dd, ReferencePolicy(settle=0.0),
                                                 latency=LATENCY))
    cal = fit(bad, ok0)
    assert abs(cal.estimate["slip.p6"] - TRUE_P6) < 3 * cal.std["slip.p6"]
    assert abs(cal.estimate["time_offset.pose"] - LATENCY) < 3 * cal.std["time_offset.pose"]


def test_bad_policy_is_refused():
    with pytest.raises(ParameterError, match="jump_distance"):
        ReferencePolicy(jump_distance=0.0)
    with pytest.raises(ParameterError, match="settle"):
        ReferencePolicy(settle=-1.0)


def test_recurring_faults_exclude_the_whole_stretch(clean):
    """A localizer re-localizing every 4.5 s (the Warthog log's ICP faults every 1-7 s between
    85 and 128 s of the bag): with the settling time the stretch from 5 s before the first fault to
    5 s after the last is untrusted as one, the poses between the faults included; without it
    (``settle=0``) intervals between the faults stay."""
    _model, log, dd = clean
    spikes = np.arange(200, 380, 45)  # 20 s to 33.5 s, every 4.5 s
    bad = inject_outliers(log, spikes, offset=1.0, seed=4)
    t = bad.pose_time
    iv = select_intervals(t, IntervalPolicy("time", 2.0))
    f = reference_faults(bad, dd, latency=LATENCY)
    stretches = fault_stretches(t, f)
    hit = [(a, b) for a, b in stretches if a < t[spikes[-1]] and b > t[spikes[0]]]
    assert len(hit) == 1, stretches
    a, b = hit[0]
    settle = ReferencePolicy().settle
    assert a <= t[spikes[0] - 1] - settle + 0.2 and b >= t[spikes[-1] + 1] + settle - 0.2
    inside = [r for r in trusted_intervals(iv, f) if t[r[1]] > t[spikes[0]] and t[r[0]] < b]
    assert inside == []
    f0 = reference_faults(bad, dd, ReferencePolicy(settle=0.0), latency=LATENCY)
    assert not f0.unsettled.any()
    between = [r for r in trusted_intervals(iv, f0)
               if t[r[0]] > t[spikes[0]] and t[r[1]] < t[spikes[-1]]]
    assert len(between) >= 2  # what the settling time removes


def test_stream_calibrator_skips_the_same_faults(clean):
    """The calibrator node's driver applies the same test per interval (its own poses only)."""
    from wmr_model.calibration.stream import StreamCalibrator

    model, log, dd = clean
    spikes = np.array([100, 350])
    bad = inject_outliers(log, spikes, offset=1.0, seed=2)
    iv = select_intervals(bad.pose_time, IntervalPolicy("time", 2.0))
    pred = ModelPredictor(model, dt=0.05)
    sc = StreamCalibrator(lambda: OnlineCalibrator(pred, ["slip.p6"]), bad.joint_names,
                          IntervalPolicy("time", 2.0), reference=(dd, ReferencePolicy()))
    seen = []
    for k in range(len(bad.pose_time)):
        t = bad.pose_time[k]
        sc.add_encoders(t, bad.joint_names, velocities=bad.rates_at(t))
        seen += sc.add_pose(t, bad.pose[k], bad.pose_covariance[k])
    seen += sc.add_encoders(bad.pose_time[-1] + 1.0, bad.joint_names,
                            velocities=bad.rates_at(bad.pose_time[-1]))
    skipped = {(o.t0, o.t1) for o in seen if o.skipped == "reference_fault"}
    hit = {tuple(bad.pose_time[list(r)]) for r in iv
           if any(r[0] <= k <= r[1] for k in spikes)}
    assert skipped == hit and len(hit) >= 2
    assert sc.diagnostics.skipped["reference_fault"] == len(hit)
    # the intervals starting within `settle` after a spike's last faulty step (k -> k + 1)
    settle = ReferencePolicy().settle
    t = bad.pose_time
    unsettled = {tuple(t[list(r)]) for r in iv if tuple(t[list(r)]) not in hit
                 and any(t[k + 1] <= t[r[0]] < t[k + 1] + settle for k in spikes)}
    assert {(o.t0, o.t1) for o in seen if o.skipped == "reference_unsettled"} == unsettled
    assert len(unsettled) >= 2
    assert sc.diagnostics.intervals == len(iv) - len(hit) - len(unsettled)
