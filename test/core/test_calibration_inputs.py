"""Measured roll/pitch and gyro yaw rate as prediction inputs (thesis §3.2: "roll and pitch
measurements can optionally be treated as inputs in the simulation").

Ground truth: a vehicle with a GPS antenna 0.8 m above the body driving over rough terrain with
known slip; the predictor does not know the terrain (flat). The measured attitude tilts the
antenna lever arm (3.58) and the body velocity the way the terrain did, so the predicted end
poses at the *true* parameters must get closer to the measured ones than without the inputs.
"""

import numpy as np
import pytest

from wmr_model.calibration import (
    IntervalPolicy,
    ModelPredictor,
    evaluate,
    select_intervals,
    synthetic_log,
)
from wmr_model.errors import ParameterError
from wmr_model.io.vehicles import load_vehicle_spec
from wmr_model.terrain import surface as tr
from wmr_model.vehicles.model import SensorSpec, compile_vehicle


@pytest.fixture(scope="module")
def setup():
    spec = load_vehicle_spec("warthog")
    spec.sensors.append(SensorSpec("gps", "base_link", (0.0, 0.0, 0.8)))
    model = compile_vehicle(spec)
    ground = tr.rough(0.3, 4.0, seed=3, x_range=(-30, 30), y_range=(-30, 30), resolution=0.2)
    run = synthetic_log(model, ground, duration=30.0, slip={"slip.p6": -0.3},
                        pose_sensor="gps", seed=1)
    iv = select_intervals(run.log.pose_time, IntervalPolicy("time", 2.0))[:10]
    return model, run, iv


def test_attitude_and_gyro_inputs_explain_unknown_terrain(setup):
    model, run, iv = setup
    truth = {"slip.p6": -0.3}
    blind = evaluate(ModelPredictor(model, tr.flat(), dt=0.02), run.log, iv, truth)
    rp = evaluate(ModelPredictor(model, tr.flat(), dt=0.02, inputs=("roll_pitch",)),
                  run.log, iv, truth)
    both = evaluate(ModelPredictor(model, tr.flat(), dt=0.02,
                                   inputs=("roll_pitch", "gyro_yaw")), run.log, iv, truth)
    assert rp.mean_pos < 0.7 * blind.mean_pos, (rp.mean_pos, blind.mean_pos)
    assert both.mean_pos < 0.7 * blind.mean_pos, (both.mean_pos, blind.mean_pos)
    # the gyro measures yaw directly; the floor is the ground truth's own 0.005 rad noise
    assert both.mean_yaw < 0.7 * blind.mean_yaw, (both.mean_yaw, blind.mean_yaw)


def test_inputs_need_their_data_and_known_names(setup):
    model, run, iv = setup
    from dataclasses import replace

    no_att = replace(run.log, attitude_time=None, roll_pitch=None)
    pred = ModelPredictor(model, tr.flat(), inputs=("roll_pitch",))
    with pytest.raises(ParameterError, match="roll_pitch"):
        pred.simulate(no_att, int(iv[0, 0]), int(iv[0, 1]), [], np.zeros((1, 0)))
    with pytest.raises(ParameterError, match="prediction inputs"):
        ModelPredictor(model, tr.flat(), inputs=("compass",))
