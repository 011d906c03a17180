"""Calibration files (one format, save/load pair), GNSS fixes in a local ENU frame, and the
pose-sensor lever arm without editing the URDF."""

from __future__ import annotations

import math

import numpy as np
import pytest
import yaml

from wmr_model.errors import ParameterError

RADIUS = "wheel.front_left_wheel.radius"


# ---- calibration files --------------------------------------------------------------------------
def test_save_then_load_round_trips_values_and_sigma(tmp_path):
    from wmr_model.io.calibration_file import load_calibration, save_calibration

    values = {"slip.p2": -0.041, RADIUS: 0.3054, "noise.U.vx_vx": 0.067}
    std = {"slip.p2": 0.0069, RADIUS: 0.0058, "noise.U.vx_vx": math.nan}
    path = save_calibration(tmp_path / "d" / "w.yaml", "warthog", values, std, note="test")
    cal = load_calibration(path, vehicle="warthog")
    assert cal.vehicle == "warthog" and cal.values == values
    assert cal.std == {"slip.p2": 0.0069, RADIUS: 0.0058}  # non-finite sigma not written
    assert "test" in cal.description
    assert [p.name for p in path.parent.iterdir()] == ["w.yaml"]  # no temporary left


def test_the_cli_overlay_is_the_same_format(tmp_path):
    """``wmr calibrate --overlay`` writes overlay_yaml: the loader reads it, and the sidecar
    loader still accepts the file's keys."""
    from wmr_model.io.calibration_file import load_calibration, overlay_yaml
    from wmr_model.io.sidecar import SIDECAR_KEYS

    p = tmp_path / "o.yaml"
    p.write_text(overlay_yaml("warthog", {"slip.p6": -0.3}, {"slip.p6": 0.02}))
    assert load_calibration(p).std == {"slip.p6": 0.02}
    assert set(yaml.safe_load(p.read_text())) <= set(SIDECAR_KEYS)


@pytest.mark.parametrize("doc, match", [
    ("- 1\n", "expected a mapping"),
    ("version: 2\nparameters: {slip.p2: 0.1}\n", r"version: expected 1, got 2"),
    ("parameters: {}\n", "parameters: expected a non-empty mapping"),
    ("parameters: {slip.p9: 0.1}\n", r"parameters\.slip\.p9: unknown parameter"),
    ("parameters: {wheel.a.radius: -1}\n", r"wheel\.a\.radius: must be in"),
    ("parameters: {slip.p2: 0.1}\nstd: {slip.p3: 0.1}\n", r"std\.slip\.p3: not one of"),
    ("parameters: {slip.p2: 0.1}\nstd: {slip.p2: -1}\n", r"std\.slip\.p2: must be a finite"),
    ("parameters: {slip.p2: 0.1}\nwheels: {}\n", r"unknown key\(s\) \['wheels'\]"),
    ("vehicle: rocky7\nparameters: {slip.p2: 0.1}\n", "calibrated for 'rocky7', not for"),
    ("parameters: [\n", "not valid YAML"),
])
def test_bad_calibration_files_name_the_file_and_the_key(tmp_path, doc, match):
    from wmr_model.io.calibration_file import load_calibration

    p = tmp_path / "bad.yaml"
    p.write_text(doc)
    with pytest.raises(ParameterError, match=match) as exc:
        load_calibration(p, vehicle="warthog")
    assert str(p) in str(exc.value)


def test_missing_calibration_file():
    from wmr_model.io.calibration_file import load_calibration

    with pytest.raises(ParameterError, match=r"/nonexistent/c\.yaml: cannot read"):
        load_calibration("/nonexistent/c.yaml")


# ---- GNSS ---------------------------------------------------------------------------------------
def test_geodetic_to_enu_inverts_pymap3d_and_matches_a_local_closed_form():
    import pymap3d

    from wmr_model.calibration.gnss import geodetic_to_enu

    datum = (45.5017, -73.5673, 50.0)
    enu = np.array([[12.0, -7.5, 0.3], [-250.0, 400.0, -2.0]])
    lat, lon, alt = pymap3d.enu2geodetic(enu[:, 0], enu[:, 1], enu[:, 2], *datum)
    for k in range(2):
        np.testing.assert_allclose(geodetic_to_enu(lat[k], lon[k], alt[k], datum), enu[k],
                                   atol=1e-6)
    # independent small-offset closed form on the WGS-84 ellipsoid: north = M dlat,
    # east = N cos(lat) dlon with the meridian (M) and prime-vertical (N) radii of curvature
    a, e2 = 6378137.0, 6.69437999014e-3
    phi = math.radians(datum[0])
    w = 1 - e2 * math.sin(phi) ** 2
    M, N = a * (1 - e2) / w ** 1.5, a / math.sqrt(w)
    d = 1e-5  # deg
    got = geodetic_to_enu(datum[0] + d, datum[1] + d, datum[2], datum)
    np.testing.assert_allclose(got[:2], [N * math.cos(phi) * math.radians(d),
                                         M * math.radians(d)], rtol=1e-4)


def test_fix_covariance_by_type():
    from wmr_model.calibration.gnss import (
        COVARIANCE_APPROXIMATED,
        COVARIANCE_DIAGONAL_KNOWN,
        COVARIANCE_KNOWN,
        COVARIANCE_UNKNOWN,
        fix_position_covariance,
    )

    C = np.array([[4.0, 1.0, 0.0], [1.0, 9.0, 0.0], [0.0, 0.0, 16.0]])
    assert fix_position_covariance(C.ravel(), COVARIANCE_UNKNOWN) is None  # rejected
    np.testing.assert_array_equal(fix_position_covariance(C.ravel(), COVARIANCE_UNKNOWN, 2.0),
                                  4.0 * np.eye(3))
    np.testing.assert_array_equal(fix_position_covariance(C.ravel(), COVARIANCE_KNOWN), C)
    np.testing.assert_array_equal(fix_position_covariance(C.ravel(), COVARIANCE_APPROXIMATED), C)
    np.testing.assert_array_equal(fix_position_covariance(C.ravel(), COVARIANCE_DIAGONAL_KNOWN),
                                  np.diag([4.0, 9.0, 16.0]))
    assert fix_position_covariance(np.zeros(9), COVARIANCE_KNOWN) is None
    assert fix_position_covariance(-C.ravel(), COVARIANCE_KNOWN) is None
    assert fix_position_covariance([math.nan] * 9, COVARIANCE_KNOWN) is None
    assert fix_position_covariance(C.ravel(), 7) is None


def test_body_attitude_removes_the_imu_mounting_rotation():
    from scipy.spatial.transform import Rotation

    from wmr_model.calibration.gnss import body_attitude

    R_world_body = Rotation.from_euler("xyz", [0.1, -0.2, 2.5])
    R_body_imu = Rotation.from_euler("xyz", [np.pi, 0.0, np.pi / 2])  # upside down, turned
    q_imu = (R_world_body * R_body_imu).as_quat(scalar_first=True)
    got = body_attitude(q_imu, R_body_imu.as_matrix())
    want = R_world_body.as_quat(scalar_first=True)
    assert min(np.abs(got - want).max(), np.abs(got + want).max()) < 1e-12
    np.testing.assert_allclose(body_attitude(q_imu, np.eye(3)), q_imu, atol=1e-15)


def test_bad_geodetic_input_names_the_problem():
    from wmr_model.calibration.gnss import geodetic_to_enu

    with pytest.raises(ParameterError, match="latitude: must be in"):
        geodetic_to_enu(91.0, 0.0, 0.0, (0.0, 0.0, 0.0))
    with pytest.raises(ParameterError, match="finite"):
        geodetic_to_enu(math.nan, 0.0, 0.0, (0.0, 0.0, 0.0))


# ---- lever arm ----------------------------------------------------------------------------------
def test_a_lever_arm_adds_the_sensor_like_the_vehicle_spec_does():
    """The sensor added to a compiled model equals one compiled from the spec (an independent
    construction: wmr synth's), and is then an ordinary model parameter."""
    from wmr_model.calibration.lever_arm import lever_arm, with_lever_arm
    from wmr_model.io.synth_bag import synth_models
    from wmr_model.io.vehicles import load_vehicle
    from wmr_model.vehicles.parameters import get_parameter, with_parameters

    xyz = (0.4, -0.25, 0.8)
    base = load_vehicle("warthog")
    assert lever_arm(base, "gps") is None
    with pytest.raises(ParameterError, match="has no sensor 'gps'"):
        with_parameters(base, {"sensor.gps.x": 0.1})
    mine = with_lever_arm(base, "gps", xyz)
    spec_built, _, _ = synth_models("warthog", xyz)
    fi, T = mine.sensor_frame["gps"]
    fj, T2 = spec_built.sensor_frame["gps"]
    assert fi == fj == 0
    np.testing.assert_allclose(T, T2, atol=1e-12)
    assert get_parameter(mine, "sensor.gps.y") == -0.25
    moved = with_lever_arm(mine, "gps", (0.1, 0.0, 0.8))
    np.testing.assert_allclose(lever_arm(moved, "gps"), [0.1, 0.0, 0.8])
    assert "gps" not in base.sensor_frame  # the input is untouched
    with pytest.raises(ParameterError, match=r"sensor\.gps\.x: must be in"):
        with_lever_arm(base, "gps", (50.0, 0.0, 0.0))
