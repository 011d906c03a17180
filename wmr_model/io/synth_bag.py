"""Synthetic field runs written as rosbag2: sensor models on top of the simulated truth.

The truth comes from :func:`wmr_model.calibration.synthetic.synthetic_log` (the single source of
synthetic ground truth: enhanced kinematics with known slip coefficients p1..p6, process noise
Q', a mis-set wheel radius and a GPS antenna offset, over rough terrain). This module only adds
what real sensors do to it and writes the messages a real robot records:

====================  ==========================  ===============================================
topic                 type                        sensor model
====================  ==========================  ===============================================
``/joint_states``     sensor_msgs/JointState      actuated wheel joints, each by its own name
                                                  (:func:`encoder_joint_names`, the odometry's
                                                  ``per_wheel`` layout, accepted beside a
                                                  sidecar's ``encoder_map``): position = true
                                                  wheel angle quantized to ``ticks_per_rev``;
                                                  velocity = mean true rate over the period +
                                                  white noise
``/imu/data``         sensor_msgs/Imu             gyro = true body rate (IMU frame) + constant
                                                  bias + white noise; accel = specific force of
                                                  the 0.2 s-smoothed motion + bias + noise;
                                                  orientation = truth with noise; covariances set
``/gps/odom``         nav_msgs/Odometry           RTK GPS/INS: pose of the antenna frame ``gps``
                                                  with noise of the published covariance,
                                                  stamped ``gps_latency`` late
``/cmd_vel``          geometry_msgs/TwistStamped  the route's commanded body twist (held)
``/ground_truth/odom`` nav_msgs/Odometry          exact body pose and twist (for evaluation)
====================  ==========================  ===============================================

All rates must divide the simulation rate (the IMU rate). Stamps start at
:data:`EPOCH_NS` so bags are byte-identical for a seed. A ``wmr_synth.yaml`` beside the bag's
``metadata.yaml`` records the request, the truth and the nominal description that ``wmr replay``
starts from (version :data:`SIDECAR_VERSION`).

Terrain presets (:data:`TERRAIN_PRESETS`) are true slip sets and roughness:

==========  =====  =====  =====  =====  ===  =====  =========  ========  ======================
preset      p1     p2     p3     p4     p5   p6     rms [m]    corr [m]  U diag wz, vx, vy
==========  =====  =====  =====  =====  ===  =====  =========  ========  ======================
asphalt     0.02   -0.01  0.05   0.03   0    -0.10  0.05       6.0       0.02, 0.03, 0.02
dirt        0.06   -0.03  0.15   0.08   0    -0.25  0.15       5.0       0.035, 0.05, 0.035
grass       0.10   -0.05  0.30   0.15   0    -0.40  0.25       4.0       0.045, 0.065, 0.045
==========  =====  =====  =====  =====  ===  =====  =========  ========  ======================

p5 (left/right rolling-resistance asymmetry) is a property of the vehicle, not of the ground,
and is zero in every preset; it is also indistinguishable from the mis-set radius of one wheel,
which the synthetic vehicle has instead. Grass p6 = -0.4 makes the skid steer turn 0.6 times the
no-slip yaw rate, as on the real Warthog grass log.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import yaml

from wmr_model.errors import ParameterError
from wmr_model.spatial import STANDARD_GRAVITY

__all__ = [
    "EPOCH_NS",
    "SIDECAR_NAME",
    "SIDECAR_VERSION",
    "TERRAIN_PRESETS",
    "TerrainPreset",
    "SensorRates",
    "SensorNoise",
    "SynthConfig",
    "SynthSummary",
    "synth_terrain",
    "synth_models",
    "encoder_joint_names",
    "write_synth_bag",
    "read_synth_sidecar",
]

#: First stamp of a synthetic bag: 2024-01-01T00:00:00Z [ns].
EPOCH_NS = 1_704_067_200_000_000_000
#: File beside ``metadata.yaml`` holding the request, the truth and the nominal description.
SIDECAR_NAME = "wmr_synth.yaml"
#: Version of ``wmr_synth.yaml``. History: 1 - first version.
SIDECAR_VERSION = 1

#: Name of the GPS antenna sensor frame added to the vehicle.
GPS_SENSOR = "gps"


@dataclass(frozen=True)
class TerrainPreset:
    """True ground of a synthetic run.

    Attributes:
        slip: true ``slip.p1`` .. ``slip.p6``.
        rms, correlation_length: rough-terrain height RMS and correlation length [m].
        noise_u: true Cholesky diagonal of Q' for ``wz, vx, vy`` [rad/s^0.5, m/s^0.5, m/s^0.5].
    """

    slip: dict[str, float]
    rms: float
    correlation_length: float
    noise_u: tuple[float, float, float]


def _slip(*p: float) -> dict[str, float]:
    return {f"slip.p{i + 1}": float(v) for i, v in enumerate(p)}


#: Terrain presets (table in the module docstring).
TERRAIN_PRESETS: dict[str, TerrainPreset] = {
    "asphalt": TerrainPreset(_slip(0.02, -0.01, 0.05, 0.03, 0.0, -0.10), 0.05, 6.0,
                             (0.02, 0.03, 0.02)),
    "dirt": TerrainPreset(_slip(0.06, -0.03, 0.15, 0.08, 0.0, -0.25), 0.15, 5.0,
                          (0.035, 0.05, 0.035)),
    "grass": TerrainPreset(_slip(0.10, -0.05, 0.30, 0.15, 0.0, -0.40), 0.25, 4.0,
                           (0.045, 0.065, 0.045)),
}


@dataclass(frozen=True)
class SensorRates:
    """Publication rates [Hz]; each must divide ``imu`` (the simulation rate)."""

    encoders: float = 50.0
    imu: float = 100.0
    gps: float = 10.0
    cmd_vel: float = 20.0
    ground_truth: float = 50.0


@dataclass(frozen=True)
class SensorNoise:
    """Sensor error models (SI units).

    Attributes:
        ticks_per_rev: encoder resolution (positions are multiples of 2 pi / ticks_per_rev).
        encoder_rate_std: white noise of published wheel rates [rad/s].
        gyro_std, gyro_bias: white noise [rad/s] and constant bias (3,) [rad/s] (IMU frame).
        accel_std, accel_bias: white noise [m/s^2] and constant bias (3,) [m/s^2].
        orientation_std: roll, pitch, yaw noise of the IMU orientation [rad].
        gps_position_std, gps_rotation_std: RTK position [m] and INS attitude [rad] noise; the
            published covariance is exactly this.
        gps_latency: GPS/INS stamps are this late [s] (calibrated as ``time_offset.pose``).
    """

    ticks_per_rev: int = 4096
    encoder_rate_std: float = 0.02
    gyro_std: float = 0.003
    gyro_bias: tuple[float, float, float] = (0.0005, -0.0005, 0.001)
    accel_std: float = 0.05
    accel_bias: tuple[float, float, float] = (0.02, -0.01, 0.03)
    orientation_std: tuple[float, float, float] = (0.005, 0.005, 0.02)
    gps_position_std: float = 0.02
    gps_rotation_std: float = 0.01
    gps_latency: float = 0.1


@dataclass(frozen=True)
class SynthConfig:
    """One synthetic field run.

    Attributes:
        vehicle: shipped vehicle name (differential or skid steering: every actuated joint a
            wheel).
        terrain: preset name of :data:`TERRAIN_PRESETS`.
        duration: length [s]; seed: RNG seed (terrain, route, noise).
        radius_error: true/nominal radius of the first wheel (the "mis-set" radius).
        gps_nominal: antenna position in the body frame the vehicle description believes [m].
        gps_true: true antenna position [m].
        speed, yaw_rate: route command ranges [m/s], [rad/s]; box: half-size of the area [m].
    """

    vehicle: str = "warthog"
    terrain: str = "grass"
    duration: float = 120.0
    seed: int = 0
    rates: SensorRates = field(default_factory=SensorRates)
    noise: SensorNoise = field(default_factory=SensorNoise)
    radius_error: float = 1.03
    gps_nominal: tuple[float, float, float] = (0.0, 0.0, 0.8)
    gps_true: tuple[float, float, float] = (0.3, -0.2, 0.8)
    speed: tuple[float, float] = (0.4, 1.5)
    yaw_rate: float = 0.5
    box: float = 20.0


@dataclass(frozen=True)
class SynthSummary:
    """What :func:`write_synth_bag` wrote.

    Attributes:
        path: bag folder; storage: ``mcap`` or ``sqlite3``.
        counts: topic -> message count; rates: topic -> requested rate [Hz].
        truth: true named values; nominal: named values the vehicle description believes.
        duration: covered time [s].
    """

    path: str
    storage: str
    counts: dict[str, int]
    rates: dict[str, float]
    truth: dict[str, float]
    nominal: dict[str, float]
    duration: float


def _preset(name: str) -> TerrainPreset:
    if name not in TERRAIN_PRESETS:
        raise ParameterError(f"terrain preset {name!r}: expected one of {list(TERRAIN_PRESETS)}")
    return TERRAIN_PRESETS[name]


def synth_terrain(preset: str, seed: int, box: float = 20.0):
    """Rough terrain of ``preset`` around the origin (covers the route's ``box`` [m])."""
    from wmr_model.terrain import surface as tr

    p = _preset(preset)
    half = box + 15.0
    return tr.rough(p.rms, p.correlation_length, seed=seed, x_range=(-half, half),
                    y_range=(-half, half), resolution=0.2)


def _first_wheel_radius_name(model) -> str:
    return f"wheel.{model.wheel_names[0]}.radius"


def synth_models(vehicle: str, gps_nominal: tuple[float, float, float],
                 gps_true: tuple[float, float, float] | None = None,
                 radius_error: float = 1.0):
    """``(nominal, true, truth_dims)``: the vehicle with a ``gps`` antenna sensor as the
    description believes it and as it is (first wheel radius times ``radius_error``)."""
    from wmr_model.io.vehicles import load_vehicle_spec
    from wmr_model.vehicles.model import SensorSpec, compile_vehicle
    from wmr_model.vehicles.parameters import with_parameters

    spec = load_vehicle_spec(vehicle)
    if GPS_SENSOR not in {s.name for s in spec.sensors}:
        x, y, z = gps_nominal
        spec.sensors.append(SensorSpec(GPS_SENSOR, spec.body_name, (float(x), float(y), float(z))))
    nominal = compile_vehicle(spec)
    rname = _first_wheel_radius_name(nominal)
    g = gps_nominal if gps_true is None else gps_true
    dims = {rname: float(nominal.wheel_radius[0]) * float(radius_error),
            f"sensor.{GPS_SENSOR}.x": float(g[0]), f"sensor.{GPS_SENSOR}.y": float(g[1]),
            f"sensor.{GPS_SENSOR}.z": float(g[2])}
    return nominal, with_parameters(nominal, dims), dims


def encoder_joint_names(model) -> list[str]:
    """Joint names of the synthetic ``/joint_states``: every actuated joint by its own name (the
    ``per_wheel`` layout of :func:`wmr_model.estimation.odometry.encoder_layouts`)."""
    from wmr_model.estimation.odometry import encoder_layouts

    return list(encoder_layouts(model, {})["per_wheel"])


def _stride(rate: float, sim_rate: float, what: str) -> int:
    if not (math.isfinite(rate) and rate > 0):
        raise ParameterError(f"{what} rate: must be > 0 Hz, got {rate}")
    n = sim_rate / rate
    if abs(n - round(n)) > 1e-9 or round(n) < 1:
        raise ParameterError(f"{what} rate: {rate} Hz must divide the IMU (simulation) rate "
                             f"{sim_rate} Hz")
    return int(round(n))


def _rotvec_quat(q: np.ndarray):
    from scipy.spatial.transform import Rotation

    return Rotation.from_quat(np.asarray(q), scalar_first=True)


def _simulate(cfg: SynthConfig) -> dict:
    """Truth and sensor arrays of ``cfg`` (no bag I/O)."""
    from wmr_model.calibration.synthetic import synthetic_log

    if not (math.isfinite(cfg.duration) and cfg.duration > 0):
        raise ParameterError(f"duration: must be > 0 s, got {cfg.duration}")
    pre = _preset(cfg.terrain)
    rates = cfg.rates
    sim_rate = float(rates.imu)
    if not (math.isfinite(sim_rate) and sim_rate > 0):
        raise ParameterError(f"imu rate: must be > 0 Hz, got {sim_rate}")
    n_enc = _stride(rates.encoders, sim_rate, "encoder")
    _stride(rates.gps, sim_rate, "gps")  # validated; synthetic_log samples at pose_rate
    n_cmd = _stride(rates.cmd_vel, sim_rate, "cmd_vel")
    n_gt = _stride(rates.ground_truth, sim_rate, "ground_truth")
    dt = 1.0 / sim_rate
    nominal, true, dims = synth_models(cfg.vehicle, cfg.gps_nominal, cfg.gps_true,
                                       cfg.radius_error)
    act = [int(k) for k in true.actuated_joints]
    if not all(k in set(int(w) for w in true.wheel_joints) for k in act):
        raise ParameterError(f"vehicle {cfg.vehicle!r}: synthetic routes need differential or "
                             "skid steering (every actuated joint a wheel)")
    terrain = synth_terrain(cfg.terrain, cfg.seed, cfg.box)
    U = np.diag([0.0, 0.0, pre.noise_u[0], pre.noise_u[1], pre.noise_u[2], 0.0])
    nz = cfg.noise
    run = synthetic_log(true, terrain, duration=cfg.duration + 1.0, dt=dt, slip=pre.slip,
                        Qprime=U.T @ U, pose_sensor=GPS_SENSOR,
                        pose_std=(nz.gps_rotation_std, nz.gps_position_std),
                        pose_rate=rates.gps, encoder_std=0.0, time_offset=nz.gps_latency,
                        speed=cfg.speed, yaw_rate=cfg.yaw_rate, box=cfg.box, truth=dims,
                        seed=cfg.seed)
    rng = np.random.default_rng([cfg.seed, 1])  # sensor noise, independent of the route
    K = int(round(cfg.duration * sim_rate))  # steps kept
    q = run.q[:K + 1]
    rate = run.log.joint_rate[:K]  # (K, na) true joint rates of each step (encoder_std 0)
    imu = _imu_samples(true, q, sim_rate, nz, rng)
    ke = np.arange(n_enc, K + 1, n_enc)
    enc_pos, enc_vel = _encoder_samples(rate, ke, n_enc, dt, nz, rng)
    cmd = _commanded_twist(true, act, rate)
    kc = np.arange(0, K, n_cmd)
    kg = np.arange(0, K, n_gt)
    gsel = run.log.pose_time <= cfg.duration
    return dict(
        cfg=cfg, nominal=nominal, true=true, run=run, dt=dt, K=K, dims=dims, preset=pre,
        imu_t=np.arange(1, K + 1) * dt, gyro=imu["gyro"], accel=imu["accel"], ori=imu["ori"],
        enc_t=ke * dt, enc_pos=enc_pos, enc_vel=enc_vel,
        enc_names=encoder_joint_names(true),
        cmd_t=kc * dt, cmd=cmd[kc], gt_t=kg * dt, gt_q=q[kg], gt_v=imu["v_body"][kg],
        gt_w=imu["w_body"][kg],
        gps_t=run.log.pose_time[gsel], gps=run.log.pose[gsel],
        gps_cov=run.log.pose_covariance[gsel], gps_sensor_T=true.sensor_frame[GPS_SENSOR][1])


def _imu_samples(true, q: np.ndarray, sim_rate: float, nz, rng: np.random.Generator) -> dict:
    """Body twist of each step (``w_body``, ``v_body`` (K, 3)) from consecutive true poses
    ``q`` (K + 1, nq) at ``sim_rate`` [Hz], and the IMU's ``gyro``, ``accel`` (K, 3) and
    ``ori`` (K, 4) ``[w, x, y, z]`` in the IMU frame the odometry assumes, with noise from
    ``rng`` (gyro, accel, attitude in that order)."""
    from scipy.spatial.transform import Rotation

    from wmr_model.estimation.odometry import Odometry3D

    K = len(q) - 1
    dt = 1.0 / sim_rate
    rot = _rotvec_quat(q[:, 0:4])
    w_body = (rot[:-1].inv() * rot[1:]).as_rotvec() / dt  # (K, 3)
    v_world = np.diff(q[:, 4:7], axis=0) / dt  # (K, 3)
    v_body = rot[:-1].inv().apply(v_world)
    # IMU: rotate into the IMU frame the odometry assumes (same computation as Odometry3D)
    R_body_imu = Odometry3D(true).R_body_imu
    gyro = (w_body @ R_body_imu + np.asarray(nz.gyro_bias)
            + nz.gyro_std * rng.standard_normal((K, 3)))
    win = max(1, int(round(0.2 * sim_rate)))
    kern = np.ones(win) / win
    v_s = np.stack([np.convolve(v_world[:, i], kern, mode="same") for i in range(3)], axis=1)
    a_world = np.gradient(v_s, dt, axis=0) + np.array([0.0, 0.0, STANDARD_GRAVITY])
    accel = (rot[1:].inv().apply(a_world) @ R_body_imu + np.asarray(nz.accel_bias)
             + nz.accel_std * rng.standard_normal((K, 3)))
    R_imu = rot[1:] * _rotvec_quat(_matrix_quat(R_body_imu))
    dori = np.asarray(nz.orientation_std) * rng.standard_normal((K, 3))
    ori = (Rotation.from_rotvec(dori) * R_imu).as_quat(scalar_first=True)
    return {"w_body": w_body, "v_body": v_body, "gyro": gyro, "accel": accel, "ori": ori}


def _encoder_samples(rate: np.ndarray, ke: np.ndarray, n_enc: int, dt: float, nz,
                     rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Encoder positions and rates at steps ``ke`` from the true joint rates (K, na): the
    angle quantized to ticks, the rate averaged over the period plus noise from ``rng``."""
    tick = 2.0 * math.pi / nz.ticks_per_rev
    angle = np.vstack([np.zeros((1, rate.shape[1])), np.cumsum(rate * dt, axis=0)])
    enc_pos = np.round(angle[ke] / tick) * tick
    enc_vel = (angle[ke] - angle[ke - n_enc]) / (n_enc * dt)
    return enc_pos, enc_vel + nz.encoder_rate_std * rng.standard_normal(enc_vel.shape)


def _commanded_twist(true, act: list[int], rate: np.ndarray) -> np.ndarray:
    """(K, 2) ``vx, wz`` of the route recovered from the actuated wheels' true rates (K, na)
    (least squares over the wheels at the neutral state)."""
    from wmr_model.kinematics import api as kapi

    data = kapi.create_data(true)
    Tw = kapi.forward_kinematics(true, data, true.neutral_state())
    wi = [list(true.wheel_joints).index(k) for k in act]
    y_w = np.array([Tw[true.wheel_frame[i], 1, 3] for i in wi])
    r_w = np.array([true.wheel_radius[i] for i in wi])
    A = np.stack([1.0 / r_w, -y_w / r_w], axis=1)
    return np.linalg.lstsq(A, rate.T, rcond=None)[0].T


def _matrix_quat(R: np.ndarray) -> np.ndarray:
    from scipy.spatial.transform import Rotation

    return Rotation.from_matrix(R).as_quat(scalar_first=True)


def _time(typestore, t: float):
    ns = EPOCH_NS + int(round(t * 1e9))
    return typestore.types["builtin_interfaces/msg/Time"](sec=ns // 1_000_000_000,
                                                           nanosec=ns % 1_000_000_000), ns


def _messages(sim: dict, typestore):
    """Yield ``(topic, type, bag time [ns], message)`` in time order (per topic in order)."""
    from wmr_model.kinematics.uncertainty import to_ros_pose_covariance

    T = typestore.types
    Header = T["std_msgs/msg/Header"]
    Quat = T["geometry_msgs/msg/Quaternion"]
    Vec = T["geometry_msgs/msg/Vector3"]
    Point = T["geometry_msgs/msg/Point"]
    Pose = T["geometry_msgs/msg/Pose"]
    PoseCov = T["geometry_msgs/msg/PoseWithCovariance"]
    Twist = T["geometry_msgs/msg/Twist"]
    TwistCov = T["geometry_msgs/msg/TwistWithCovariance"]
    Odom = T["nav_msgs/msg/Odometry"]
    nz: SensorNoise = sim["cfg"].noise
    body = sim["true"].frame_names[0]
    imu_frame = _imu_frame(sim["true"])

    def quat(q):
        return Quat(x=float(q[1]), y=float(q[2]), z=float(q[3]), w=float(q[0]))

    def vec(v):
        return Vec(x=float(v[0]), y=float(v[1]), z=float(v[2]))

    out = []
    names = list(sim["enc_names"])
    for t, p, v in zip(sim["enc_t"], sim["enc_pos"], sim["enc_vel"]):
        st, ns = _time(typestore, t)
        out.append((ns, 0, "/joint_states", "sensor_msgs/msg/JointState", T[
            "sensor_msgs/msg/JointState"](header=Header(stamp=st, frame_id=""), name=names,
                                          position=np.asarray(p, float),
                                          velocity=np.asarray(v, float),
                                          effort=np.zeros(0))))
    gcov = np.diag([nz.gyro_std ** 2] * 3).reshape(9)
    acov = np.diag([nz.accel_std ** 2] * 3).reshape(9)
    ocov = np.diag(np.square(nz.orientation_std)).reshape(9)
    for t, w, a, o in zip(sim["imu_t"], sim["gyro"], sim["accel"], sim["ori"]):
        st, ns = _time(typestore, t)
        out.append((ns, 1, "/imu/data", "sensor_msgs/msg/Imu", T["sensor_msgs/msg/Imu"](
            header=Header(stamp=st, frame_id=imu_frame), orientation=quat(o),
            orientation_covariance=ocov, angular_velocity=vec(w),
            angular_velocity_covariance=gcov, linear_acceleration=vec(a),
            linear_acceleration_covariance=acov)))
    unknown_twist = np.diag([1e6] * 6).reshape(36)
    for t, pz, c in zip(sim["gps_t"], sim["gps"], sim["gps_cov"]):
        st, ns = _time(typestore, t)
        pose = Pose(position=Point(x=float(pz[4]), y=float(pz[5]), z=float(pz[6])),
                    orientation=quat(pz[:4]))
        out.append((ns, 2, "/gps/odom", "nav_msgs/msg/Odometry", Odom(
            header=Header(stamp=st, frame_id="map"), child_frame_id=GPS_SENSOR,
            pose=PoseCov(pose=pose, covariance=to_ros_pose_covariance(c)),
            twist=TwistCov(twist=Twist(linear=vec([0, 0, 0]), angular=vec([0, 0, 0])),
                           covariance=unknown_twist))))
    for t, (vx, wz) in zip(sim["cmd_t"], sim["cmd"]):
        st, ns = _time(typestore, t)
        out.append((ns, 3, "/cmd_vel", "geometry_msgs/msg/TwistStamped",
                    T["geometry_msgs/msg/TwistStamped"](
                        header=Header(stamp=st, frame_id=body),
                        twist=Twist(linear=vec([vx, 0, 0]), angular=vec([0, 0, wz])))))
    zero = np.zeros(36)
    for t, qq, v, w in zip(sim["gt_t"], sim["gt_q"], sim["gt_v"], sim["gt_w"]):
        st, ns = _time(typestore, t)
        pose = Pose(position=Point(x=float(qq[4]), y=float(qq[5]), z=float(qq[6])),
                    orientation=quat(qq[:4]))
        out.append((ns, 4, "/ground_truth/odom", "nav_msgs/msg/Odometry", Odom(
            header=Header(stamp=st, frame_id="world"), child_frame_id=body,
            pose=PoseCov(pose=pose, covariance=zero),
            twist=TwistCov(twist=Twist(linear=vec(v), angular=vec(w)), covariance=zero))))
    out.sort(key=lambda m: (m[0], m[1]))
    return out


def _imu_frame(model) -> str:
    """Frame id of the IMU messages: the link of the model's ``imu`` sensor."""
    if "imu" in model.sensor_frame and model.sensor_frame["imu"][0] != 0:
        return str(model.frame_names[model.sensor_frame["imu"][0]])
    return "imu_link"


def write_synth_bag(path: str | Path, config: SynthConfig | None = None, *,
                    storage: str = "mcap", overwrite: bool = False) -> SynthSummary:
    """Simulate ``config`` and write a rosbag2 folder at ``path`` (module docstring).

    Args:
        storage: ``"mcap"`` (default) or ``"sqlite3"``.
        overwrite: replace an existing folder (else :class:`~wmr_model.errors.ParameterError`).
    """
    import shutil

    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore

    cfg = SynthConfig() if config is None else config
    plugins = {"mcap": StoragePlugin.MCAP, "sqlite3": StoragePlugin.SQLITE3}
    if storage not in plugins:
        raise ParameterError(f"storage: expected one of {list(plugins)}, got {storage!r}")
    p = Path(path)
    if p.exists():
        if not overwrite:
            raise ParameterError(f"{p}: exists; remove it or pass overwrite (--force)")
        shutil.rmtree(p) if p.is_dir() else p.unlink()
    sim = _simulate(cfg)
    ts = get_typestore(Stores.ROS2_JAZZY)
    msgs = _messages(sim, ts)
    counts: dict[str, int] = {}
    p.parent.mkdir(parents=True, exist_ok=True)
    with Writer(p, version=8, storage_plugin=plugins[storage]) as w:
        conns = {}
        for ns, _, topic, mtype, msg in msgs:
            if topic not in conns:
                conns[topic] = w.add_connection(topic, mtype, typestore=ts)
            w.write(conns[topic], ns, ts.serialize_cdr(msg, mtype))
            counts[topic] = counts.get(topic, 0) + 1
    r = cfg.rates
    rates = {"/joint_states": r.encoders, "/imu/data": r.imu, "/gps/odom": r.gps,
             "/cmd_vel": r.cmd_vel, "/ground_truth/odom": r.ground_truth}
    truth = dict(sim["run"].truth)
    truth.update({n: float(v) for n, v in zip(
        ("noise.U.wz_wz", "noise.U.vx_vx", "noise.U.vy_vy"), sim["preset"].noise_u)})
    nom = sim["nominal"]
    rname = _first_wheel_radius_name(nom)
    nominal = {rname: float(nom.wheel_radius[0])}
    nominal.update({f"sensor.{GPS_SENSOR}.{c}": float(v) for c, v in zip("xyz", cfg.gps_nominal)})
    summary = SynthSummary(path=str(p), storage=storage, counts=counts, rates=rates,
                           truth=truth, nominal=nominal, duration=float(cfg.duration))
    side = {
        "version": SIDECAR_VERSION,
        "generator": "wmr synth",
        "config": _plain(asdict(cfg)),
        "storage": storage,
        "vehicle": cfg.vehicle,
        "terrain": {"preset": cfg.terrain, "seed": int(cfg.seed), "box": float(cfg.box)},
        "pose_sensor": {"name": GPS_SENSOR, "topic": "/gps/odom",
                        "nominal_xyz": [float(v) for v in cfg.gps_nominal]},
        "truth": truth,
        "nominal": nominal,
        "calibrate": ["slip.p1", "slip.p2", "slip.p3", "slip.p4", "slip.p6", rname,
                      f"sensor.{GPS_SENSOR}.x", f"sensor.{GPS_SENSOR}.y", "time_offset.pose"],
        "topics": {t: {"count": counts.get(t, 0), "rate_hz": rates[t]} for t in rates},
    }
    from wmr_model.io.files import write_text_atomically

    write_text_atomically(p / SIDECAR_NAME, yaml.safe_dump(side, sort_keys=False))
    return summary


def _plain(x):
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    return x


def read_synth_sidecar(bag: str | Path) -> dict | None:
    """The ``wmr_synth.yaml`` of a bag folder written by :func:`write_synth_bag`, or None."""
    p = Path(bag)
    f = (p if p.is_dir() else p.parent) / SIDECAR_NAME
    if not f.is_file():
        return None
    from wmr_model.io.files import read_text

    try:
        doc = yaml.safe_load(read_text(f, "synthetic-bag sidecar"))
    except yaml.YAMLError as exc:
        raise ParameterError(f"{f}: not valid YAML ({' '.join(str(exc).split())})") from None
    if not isinstance(doc, dict) or doc.get("version") != SIDECAR_VERSION:
        got = doc.get("version") if isinstance(doc, dict) else None
        raise ParameterError(f"{f}: unsupported version {got!r}; expected {SIDECAR_VERSION}")
    _check_synth_sidecar(f, doc)
    return doc


def _check_synth_sidecar(f: Path, doc: dict) -> None:
    """Raise ParameterError naming the first key of ``doc`` that ``wmr replay`` reads and that
    is missing or of the wrong type."""
    def bad(key: str, want: str) -> ParameterError:
        return ParameterError(f"{f}: {key}: expected {want}")

    terrain = doc.get("terrain")
    if not isinstance(terrain, dict):
        raise bad("terrain", "a mapping with preset and seed")
    if not isinstance(terrain.get("preset"), str):
        raise bad("terrain.preset", "a terrain preset name")
    if not isinstance(terrain.get("seed"), int) or isinstance(terrain.get("seed"), bool):
        raise bad("terrain.seed", "an integer")
    if not isinstance(terrain.get("box", 20.0), (int, float)):
        raise bad("terrain.box", "a number [m]")
    if not isinstance(doc.get("vehicle", ""), str):
        raise bad("vehicle", "a vehicle name")
    ps = doc.get("pose_sensor", {})
    if not isinstance(ps, dict):
        raise bad("pose_sensor", "a mapping")
    xyz = ps.get("nominal_xyz", [0.0, 0.0, 0.0])
    if not (isinstance(xyz, list) and len(xyz) == 3
            and all(isinstance(v, (int, float)) for v in xyz)):
        raise bad("pose_sensor.nominal_xyz", "3 numbers [m]")
    for key in ("name", "topic"):
        if not isinstance(ps.get(key, ""), str):
            raise bad(f"pose_sensor.{key}", "a string")
    cal = doc.get("calibrate", [])
    if not (isinstance(cal, list) and all(isinstance(n, str) for n in cal)):
        raise bad("calibrate", "a list of parameter names")
    truth = doc.get("truth", {})
    if not (isinstance(truth, dict) and all(isinstance(v, (int, float))
                                            for v in truth.values())):
        raise bad("truth", "a mapping of parameter names to numbers")
