"""``replay`` out of sample (issue 21): models calibrated on the first part of a synthetic bag
(known slip) predict the rest better than the uncalibrated ones; the frozen estimate is the
filter's state at the split; every scored interval starts after it."""

import numpy as np
import pytest

from wmr_model.io.synth_bag import SynthConfig, write_synth_bag
from wmr_model.pipelines.replay import ReplayOptions, replay

MODELS = ["diff drive", "diff drive+ online", "diff drive+ calibrated", "3D kin.",
          "3D kin.+ online", "3D kin.+ calibrated"]


@pytest.fixture(scope="module")
def res(tmp_path_factory):
    bag = tmp_path_factory.mktemp("synth_oos") / "run"
    write_synth_bag(bag, SynthConfig(duration=80.0, seed=3))
    return replay(bag, ReplayOptions(split=0.5, eval_intervals=(2.0,)))


def test_out_of_sample_table_is_scored_after_the_split_with_the_frozen_estimate(res):
    sp = res.split
    t = res.history["t"]
    n = int(np.sum(t <= sp["t_split"]))
    assert sp["calibration_intervals"] == n and 0 < n < len(t)
    assert sp["estimate"] == dict(zip(res.history["names"], res.history["x"][n - 1]))
    assert sp["estimate"] != res.estimate  # the filter kept learning after the split
    rows = res.table_oos[2.0]
    assert [r[0] for r in rows] == MODELS
    k_in = res.table[2.0][0][3]
    assert 0 < rows[0][3] < k_in and rows[0][3] <= k_in * 0.5 + 1  # only the second half
    r = {m: (p, y) for m, p, y, _ in rows}
    # the synthetic vehicle slips: calibration on the first half helps on the second
    assert r["3D kin.+ calibrated"][1] < r["3D kin."][1]
    assert r["diff drive+ calibrated"][1] < r["diff drive"][1]
    assert any(c in n_ for n_ in res.notes for c in ("straight", "arc"))


def test_bad_split_is_refused(tmp_path):
    from wmr_model.errors import ParameterError

    bag = tmp_path / "run"
    write_synth_bag(bag, SynthConfig(duration=10.0, seed=1))
    with pytest.raises(ParameterError, match="split"):
        replay(bag, ReplayOptions(split=1.2))
