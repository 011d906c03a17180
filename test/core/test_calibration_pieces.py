"""IPEM building blocks: covariance map vs predict, (3.36) vs Monte Carlo, sensor offsets,
interval policies, named model parameters, overlay roundtrip."""

import numpy as np
import pytest
import yaml

from wmr_model import kinematics as kin
from wmr_model.calibration.intervals import IntervalPolicy, select_intervals
from wmr_model.calibration.residuals import (
    body_pose_from_sensor,
    component_indices,
    covariance_map,
    pose_residual,
    quat_to_matrix,
    sensor_pose,
)
from wmr_model.calibration.stochastic import stochastic_covariance, stochastic_measurement, vec
from wmr_model.errors import ParameterError
from wmr_model.io.calibration_file import overlay_yaml
from wmr_model.io.sidecar import parse_parameters
from wmr_model.parameters import get_spec
from wmr_model.prediction.predict import predict
from wmr_model.terrain import surface as tr
from wmr_model.vehicles.generators import skid_steer_spec
from wmr_model.vehicles.model import compile_vehicle
from wmr_model.vehicles.parameters import get_parameter, with_parameters


@pytest.fixture(scope="module")
def skid():
    return compile_vehicle(skid_steer_spec(radius=0.2))


def test_covariance_map_matches_predict_propagation(skid):
    """Closed form P = Psi P0 Psi^T + dt sum A Q A^T vs the compiled recursion (3.22)."""
    terrain = tr.rough(0.05, 1.0, seed=4)
    q0, _ = kin.initialize_contact(skid, terrain)
    rng = np.random.default_rng(0)
    U = rng.uniform(2, 8, size=(60, len(skid.actuated_joints)))
    Qp = np.diag([1e-4, 2e-4, 3e-3, 1e-2, 2e-3, 1e-4])
    Qp[2, 3] = Qp[3, 2] = 1e-3
    P0 = np.diag([1e-4, 1e-4, 4e-4, 1e-3, 1e-3, 1e-3])
    pr = predict(skid, terrain, q0, U, 0.03, fidelity="enhanced", slip_params=[0, 0, .2, .1, 0,
                                                                              -.2],
                 Qprime=Qp, P0=P0)
    cm = covariance_map(quat_to_matrix(pr.q[0, :-1, :4]), pr.qdot[0, :, 3:6], 0.03)
    P = cm.Psi @ P0 @ cm.Psi.T + cm.process(Qp)
    np.testing.assert_allclose(P, pr.covariance[0, -1], rtol=1e-9, atol=1e-14)


def test_stochastic_covariance_is_bohrnstedt_goldberger():
    """(3.36) vs the sample covariance of vec(r r^T) for Gaussian r."""
    rng = np.random.default_rng(1)
    A = rng.standard_normal((3, 3))
    R = A @ A.T + 0.5 * np.eye(3)
    r = rng.multivariate_normal(np.zeros(3), R, size=400000)
    z = np.stack([stochastic_measurement(x) for x in r[:20000]])
    Z = np.einsum("ki,kj->kij", r, r)
    z = vec(Z)
    np.testing.assert_allclose(z.mean(0), vec(R), rtol=0.02, atol=0.02)
    np.testing.assert_allclose(np.cov(z.T), stochastic_covariance(R), rtol=0.05, atol=0.05)
    assert stochastic_measurement(np.array([1.0, 2.0, 3.0])).tolist() == [1, 2, 3, 4, 6, 9]


def test_sensor_offset_roundtrip_and_residual():
    rng = np.random.default_rng(2)
    q = rng.standard_normal(4)
    q /= np.linalg.norm(q)
    body = np.concatenate([q, [1.0, 2.0, 0.3]])
    T = np.eye(4)
    T[:3, 3] = [0.3, -0.2, 0.8]
    s = sensor_pose(body, T)
    np.testing.assert_allclose(s[4:7], body[4:7] + quat_to_matrix(q) @ T[:3, 3])
    back = body_pose_from_sensor(s, T)
    np.testing.assert_allclose(pose_residual(back, body), 0.0, atol=1e-12)
    idx = component_indices(("x", "y", "yaw"))
    assert idx.tolist() == [3, 4, 2]
    with pytest.raises(ParameterError, match="residual component 'heading'"):
        component_indices(("x", "heading"))


def test_interval_policies():
    t = np.arange(0, 20.01, 0.25)
    pos = np.stack([t, 0 * t, 0 * t], axis=1)  # 1 m/s
    iv = select_intervals(t, IntervalPolicy("time", 2.0))
    assert len(iv) == 10 and np.allclose(t[iv[:, 1]] - t[iv[:, 0]], 2.0)
    assert np.all(iv[1:, 0] == iv[:-1, 1])
    sl = select_intervals(t, IntervalPolicy("time", 2.0, overlap="sliding", tolerance=0.05))
    assert len(sl) == len(t) - 8 and np.all(np.diff(sl[:, 1]) == 1)
    d = select_intervals(t, IntervalPolicy("distance", 5.0), positions=pos)
    assert np.allclose(pos[d[:, 1], 0] - pos[d[:, 0], 0], 5.0)
    with pytest.raises(ParameterError, match="interval kind"):
        IntervalPolicy("steps", 2.0)


def test_with_parameters(skid):
    m2 = with_parameters(skid, {"wheel.L0.radius": 0.25, "vehicle.track_scale": 1.1})
    assert m2.wheel_radius[0] == 0.25 and skid.wheel_radius[0] == 0.2
    assert get_parameter(m2, "wheel.L0.radius") == 0.25
    np.testing.assert_allclose(m2.T0[1:, 1, 3], 1.1 * skid.T0[1:, 1, 3])
    assert get_spec("wheel.L0.radius").unit == "m"
    with pytest.raises(ParameterError, match="no wheel 'XX'"):
        with_parameters(skid, {"wheel.XX.radius": 0.2})
    with pytest.raises(ParameterError, match=r"wheel.L0.radius: must be in \[0.001"):
        with_parameters(skid, {"wheel.L0.radius": -0.1})


def test_overlay_loads_as_sidecar_parameters():
    text = overlay_yaml("warthog", {"slip.p6": -0.1, "time_offset.pose": 0.25},
                        {"slip.p6": 0.01})
    doc = yaml.safe_load(text)
    assert doc["version"] == 1 and doc["vehicle"] == "warthog"
    assert parse_parameters(doc["parameters"], "overlay") == {"slip.p6": -0.1,
                                                             "time_offset.pose": 0.25}
