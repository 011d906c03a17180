"""Position-only references (a GNSS fix, a GNSS-only Odometry) in the offline tools: read as
positions, their heading derived from the gyro aligned to the track, never an identity
quaternion taken as truth; and the encoder stream's standstill zeros kept."""

from __future__ import annotations

import math

import numpy as np
import pytest

from wmr_model.calibration.heading import heading_offsets
from wmr_model.calibration.reference import ReferencePolicy, reference_faults
from wmr_model.errors import ParameterError
from wmr_model.io.bags import log_from_bag, read_streams
from wmr_model.io.vehicles import load_vehicle
from wmr_model.pipelines.replay import held_values, stale_mask

DATUM = (39.6465, -79.9712, 290.0)  # WGS-84 lat [deg], lon [deg], h [m]
R_CIRCLE, SPEED, DURATION = 8.0, 1.0, 60.0
YAW0 = 0.7  # [rad] initial heading, east = 0


def _truth(t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """x, y [m] (ENU) and yaw [rad] of a counter-clockwise circle at SPEED."""
    w = SPEED / R_CIRCLE
    yaw = YAW0 + w * t
    x = R_CIRCLE * (np.sin(yaw) - math.sin(YAW0))
    y = -R_CIRCLE * (np.cos(yaw) - math.cos(YAW0))
    return x, y, yaw


def _write_bag(path, sigma: float, fix_type: int = 2, odom: bool = True):
    """A Pathfinder drive on a circle: wheel rates (left joints mirrored: negative forward),
    a gyro (z up in body axes as the URDF's imu_link is z down: published negated), GNSS fixes
    at 5 Hz with ``sigma`` [m] noise (covariance type ``fix_type``) and the same positions as
    a GNSS-only nav_msgs/Odometry (identity orientation, rotation variance 1e6)."""
    import pymap3d
    from rosbags.rosbag2 import Writer
    from rosbags.typesys import Stores, get_typestore

    ts = get_typestore(Stores.ROS2_JAZZY)
    T = ts.types
    rng = np.random.default_rng(7)
    w = SPEED / R_CIRCLE
    B_eff = 0.685 * 1.6  # any track: only the speed of the wheels is used for the heading
    r = 0.11

    def hdr(t, frame):
        ns = int(round((1.7e9 + t) * 1e9))
        return T["std_msgs/msg/Header"](stamp=T["builtin_interfaces/msg/Time"](
            sec=ns // 10**9, nanosec=ns % 10**9), frame_id=frame), ns

    msgs = []
    for t in np.arange(0.0, DURATION, 0.1):
        vl, vr = SPEED - w * B_eff / 2, SPEED + w * B_eff / 2
        h, ns = hdr(t, "")
        m = T["sensor_msgs/msg/JointState"](
            header=h, name=["front_left_wheel", "rear_left_wheel", "front_right_wheel",
                            "rear_right_wheel"], position=np.zeros(4),
            velocity=np.array([-vl / r, -vl / r, vr / r, vr / r]), effort=np.zeros(0))
        msgs.append((ns, "/joint_states", "sensor_msgs/msg/JointState", m))
    V3 = T["geometry_msgs/msg/Vector3"]
    for t in np.arange(0.0, DURATION, 0.02):
        h, ns = hdr(t, "imu_link")
        m = T["sensor_msgs/msg/Imu"](
            header=h, orientation=T["geometry_msgs/msg/Quaternion"](x=0.0, y=0.0, z=0.0, w=0.0),
            orientation_covariance=np.array([-1.0] + [0.0] * 8),
            angular_velocity=V3(x=0.0, y=0.0, z=-w), angular_velocity_covariance=np.zeros(9),
            linear_acceleration=V3(x=0.0, y=0.0, z=-9.81),
            linear_acceleration_covariance=np.zeros(9))
        msgs.append((ns, "/imu/data", "sensor_msgs/msg/Imu", m))
    tg = np.arange(0.0, DURATION, 0.2)
    x, y, _ = _truth(tg)
    x, y = x + rng.normal(0, sigma, len(tg)), y + rng.normal(0, sigma, len(tg))
    for k, t in enumerate(tg):
        h, ns = hdr(t, "gps")
        lat, lon, alt = pymap3d.enu2geodetic(x[k], y[k], 0.0, *DATUM)
        cov = np.diag([sigma ** 2, sigma ** 2, (2 * sigma) ** 2]).reshape(9)
        m = T["sensor_msgs/msg/NavSatFix"](
            header=h, status=T["sensor_msgs/msg/NavSatStatus"](status=0, service=1),
            latitude=float(lat), longitude=float(lon), altitude=float(alt),
            position_covariance=cov, position_covariance_type=fix_type)
        msgs.append((ns, "/gps/fix", "sensor_msgs/msg/NavSatFix", m))
        if odom:
            pc = np.zeros((6, 6))
            pc[:3, :3] = np.diag([sigma ** 2, sigma ** 2, (2 * sigma) ** 2])
            pc[3:, 3:] = np.eye(3) * 1e6
            h2, _ = hdr(t, "gps_enu")
            o = T["nav_msgs/msg/Odometry"](
                header=h2, child_frame_id="gps",
                pose=T["geometry_msgs/msg/PoseWithCovariance"](
                    pose=T["geometry_msgs/msg/Pose"](
                        position=T["geometry_msgs/msg/Point"](x=x[k], y=y[k], z=0.0),
                        orientation=T["geometry_msgs/msg/Quaternion"](x=0.0, y=0.0, z=0.0,
                                                                      w=1.0)),
                    covariance=pc.reshape(36)),
                twist=T["geometry_msgs/msg/TwistWithCovariance"](
                    twist=T["geometry_msgs/msg/Twist"](linear=V3(x=0.0, y=0.0, z=0.0),
                                                       angular=V3(x=0.0, y=0.0, z=0.0)),
                    covariance=np.zeros(36)))
            msgs.append((ns, "/gps/odom", "nav_msgs/msg/Odometry", o))
    msgs.sort(key=lambda r: r[0])
    with Writer(path, version=8) as wr:
        conns = {}
        for ns, topic, mt, m in msgs:
            if topic not in conns:
                conns[topic] = wr.add_connection(topic, mt, typestore=ts)
            wr.write(conns[topic], ns, ts.serialize_cdr(m, mt))
    return path


@pytest.fixture(scope="module")
def gnss_bag(tmp_path_factory):
    return _write_bag(tmp_path_factory.mktemp("gnss") / "bag", sigma=0.05)


def test_navsatfix_is_read_as_enu_positions_about_the_first_fix(gnss_bag):
    import pymap3d

    s = read_streams(gnss_bag, {"p": "/gps/fix"}, {"p": "pose"})["p"]
    assert (s.frame_id, s.child_frame_id) == ("gps_enu", "gps")
    assert np.all(np.isnan(s.orientation))  # not measured, never an identity
    assert np.allclose(s.position[0], 0.0)
    # an independent conversion of a later fix about the first one
    r = read_streams(gnss_bag, {"p": "/gps/odom"}, {"p": "pose"})["p"]
    lat0, lon0, h0 = pymap3d.enu2geodetic(r.position[0, 0], r.position[0, 1], 0.0, *DATUM)
    lat, lon, h = pymap3d.enu2geodetic(r.position[40, 0], r.position[40, 1], 0.0, *DATUM)
    want = pymap3d.geodetic2enu(lat, lon, h, lat0, lon0, h0)
    np.testing.assert_allclose(s.position[40], want, atol=1e-6)
    np.testing.assert_allclose(s.covariance[0, :3, :3], np.diag([0.05 ** 2, 0.05 ** 2, 0.01]))


@pytest.mark.parametrize("topic", ["/gps/fix", "/gps/odom"])
def test_position_only_reference_gets_a_derived_heading(gnss_bag, topic):
    """The heading of the calibration log is the gyro's aligned to the GNSS track, within a
    few of its own stated sigmas of the truth; the gyro of an IMU mounted z-down is turned
    into body axes first (else the derived heading would turn the wrong way)."""
    model = load_vehicle("pathfinder")
    log = log_from_bag(gnss_bag, model, pose_topic=topic)
    assert not log.heading_measured
    assert any("heading derived from the gyro" in n for n in log.notes)
    from wmr_model.calibration.residuals import yaw_of

    _, _, yaw = _truth(log.pose_time)
    err = np.angle(np.exp(1j * (yaw_of(log.pose[:, :4]) - yaw)))
    sig = np.sqrt(log.pose_covariance[:, 2, 2])
    assert np.all(np.abs(err) < 4 * sig + 2e-3), float(np.max(np.abs(err) / sig))
    assert float(np.median(sig)) < 0.01  # a 5 cm fix over several metres: well pinned
    np.testing.assert_allclose(log.gyro[:, 2], SPEED / R_CIRCLE)  # body z up


def test_position_only_yaw_is_not_scored(gnss_bag):
    from wmr_model.calibration.evaluate import evaluate
    from wmr_model.calibration.predictors import planar_predictor

    model = load_vehicle("pathfinder")
    log = log_from_bag(gnss_bag, model, pose_topic="/gps/fix")
    e = evaluate(planar_predictor(model), log, np.array([[0, 10], [10, 20]]), {})
    assert np.all(np.isnan(e.yaw_error)) and np.all(np.isfinite(e.pos_error))


def test_unknown_fix_covariance_takes_the_default_and_a_standing_vehicle_is_refused(tmp_path):
    from wmr_model.calibration.heading import derive_heading
    from wmr_model.calibration.logs import DEFAULT_POSE_STD

    bag = _write_bag(tmp_path / "bag", sigma=0.05, fix_type=0, odom=False)
    model = load_vehicle("pathfinder")
    log = log_from_bag(bag, model, pose_topic="/gps/fix")
    assert np.allclose(np.sqrt(log.pose_covariance[:, 3, 3]), DEFAULT_POSE_STD[1])
    still = type(log)(**{**log.__dict__, "joint_rate": np.zeros_like(log.joint_rate),
                         "pose": np.tile(log.pose[:1], (len(log.pose), 1)), "gyro": None,
                         "gyro_time": None, "heading_measured": True})
    cov = still.pose_covariance.copy()
    cov[:, :3, :3] = np.nan
    still = type(still)(**{**still.__dict__, "pose_covariance": cov})
    with pytest.raises(ParameterError, match=r"gives positions only and the vehicle never "
                       r"moves far enough") as e:
        derive_heading(still, model, topic="/gps/fix")
    assert "\n" not in str(e.value)


def test_heading_offsets_closed_form():
    """A track rotated by a known angle is rotated back: theta is that angle exactly."""
    t = np.linspace(0, 20, 201)
    odo = np.stack([np.cos(0.3 * t) * t, np.sin(0.3 * t)], axis=1)
    th = 0.4
    ref = odo @ np.array([[math.cos(th), math.sin(th)], [-math.sin(th), math.cos(th)]]) + 5.0
    theta, std, good = heading_offsets(t, ref, odo, 4.0, 0.01)
    assert good[5:-5].all()
    np.testing.assert_allclose(theta, th, atol=1e-12)
    assert np.all(std > 0)


def test_a_noisy_reference_is_not_faulty_for_its_own_noise(tmp_path):
    """A 1.5 m-sigma fix (SBAS quality) moving with the wheels: the jump and divergence tests
    allow 3 sigma of the reference's own noise, so they do not flag most of the log; a real
    10 m jump is still found."""
    from wmr_model.calibration.predictors import planar_predictor

    bag = _write_bag(tmp_path / "bag", sigma=1.5, odom=False)
    model = load_vehicle("pathfinder")
    log = log_from_bag(bag, model, pose_topic="/gps/fix")
    dd = planar_predictor(model)
    f = reference_faults(log, dd, ReferencePolicy(settle=0.0))
    assert f.untrusted.mean() < 0.05
    pose = log.pose.copy()
    pose[150:, 4] += 10.0
    f2 = reference_faults(type(log)(**{**log.__dict__, "pose": pose}), dd,
                          ReferencePolicy(settle=0.0))
    assert f2.jump[149] and f2.jump.sum() <= 3


# ---- standstill zeros and sample-and-hold ------------------------------------------------------


def test_standstill_zeros_are_measurements_not_stale_repeats():
    t = np.arange(10) * 0.05
    v = np.array([[1.0], [1.0], [1.0], [0.0], [0.0], [0.0], [0.0], [2.0], [2.0], [2.0]])
    keep = stale_mask(t, v, hold=0.3)
    assert keep.tolist() == [True, False, False, True, True, True, True, True, False, False]


def test_held_values_tells_sample_and_hold_from_quantized_fresh_values():
    rng = np.random.default_rng(1)
    ticks = np.round(rng.normal(37, 2.5, 2000))[:, None] * (2 * np.pi / 1600 / 0.05)
    assert not held_values(ticks)  # fresh tick counts: repeats by chance, as often as +-1
    fresh = rng.normal(1.0, 0.1, (500, 2))
    held = np.repeat(fresh, 4, axis=0)  # republished four times
    assert held_values(held) and not held_values(fresh)


def test_heading_track_derives_the_heading_causally():
    """The live form: gyro, planar speed and fixes fed in stamp order; once a trailing window
    has moved enough the heading is the true one within a few of its own sigmas, and it holds
    through a stop (the gyro carries it)."""
    from wmr_model.calibration.heading import HeadingTrack

    rng = np.random.default_rng(11)
    trk = HeadingTrack()
    sigma = 0.05
    w = SPEED / R_CIRCLE
    got = []
    for k in range(int(DURATION / 0.02)):
        t = k * 0.02
        moving = not (30.0 <= t < 36.0)  # a stop in the middle
        trk.add_gyro(t, w if moving else 0.0)
        if k % 5 == 0:
            trk.add_speed(t, SPEED if moving else 0.0)
        if k % 10 == 0 and t > 0:
            x, y, yaw = _truth(np.array([min(t, 30.0) + max(t - 36.0, 0.0)]))
            h = trk.heading(t, np.array([x[0], y[0]]) + rng.normal(0, sigma, 2), sigma)
            if h is not None:
                got.append((t, yaw[0], *h))
    g = np.array(got)
    assert g[0, 0] < 15.0  # determined within the first window of travel
    err = np.angle(np.exp(1j * (g[:, 2] - g[:, 1])))
    assert np.all(np.abs(err) < 4 * g[:, 3] + 0.01), float(np.max(np.abs(err)))
