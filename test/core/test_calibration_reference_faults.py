"""Reference faults (wmr_model.calibration.reference) on synthetic logs with known faults.

Oracles: the faults are injected at known samples of a synthetic Warthog run with known slip
(ICP-like jumps: single poses displaced by 1 m; a diverged stretch: the reference wanders off at
2 m/s for 4 s; logger stamp jitter: stamps moved by up to +-40 ms, so some consecutive poses are
20 ms apart); the detector must flag exactly the injected steps/stretch and nothing on the clean
or jittered log (where a stamp-difference speed test fires); calibration on the trusted
intervals recovers the true slip within 3 sigma despite the faults.
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
    # nothing far from the faults is flagged
    far = np.ones(len(f.untrusted), dtype=bool)
    for k in spikes:
        far[k - 25:k + 25] = False
    far[d[0] - 25:d[-1] + 25] = False
    assert not f.untrusted[far].any()
    # intervals over the faults go; calibration on the rest recovers the truth
    iv = select_intervals(bad.pose_time, IntervalPolicy("time", 2.0))
    ok = trusted_intervals(iv, f)
    assert 0 < len(iv) - len(ok) <= 8  # 2 per spike, the stretch and the window before it
    pred = ModelPredictor(model, dt=0.05)
    cal = OnlineCalibrator(pred, ["slip.p6", "time_offset.pose"], std0={"slip.p6": 0.5,
                           "time_offset.pose": 0.1}, iterations=3)
    cal.run(bad, ok)
    assert abs(cal.estimate["slip.p6"] - TRUE_P6) < 3 * cal.std["slip.p6"]
    assert abs(cal.estimate["time_offset.pose"] - LATENCY) < 3 * cal.std["time_offset.pose"]


def test_bad_policy_is_refused():
    with pytest.raises(ParameterError, match="jump_distance"):
        ReferencePolicy(jump_distance=0.0)


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
    assert sc.diagnostics.intervals == len(iv) - len(hit)
