"""A calibration log: the plain arrays IPEM reads (thesis §3.2.1, §3.4.1).

Inputs (encoder joint rates, optionally gyro and roll/pitch) are sampled densely; ground-truth
poses only need to exist at interval ends. :class:`CalibrationLog` holds them with their own
time stamps; it is built from bag streams (:func:`log_from_streams`;
:func:`wmr_model.io.bags.log_from_bag` reads one from a bag) or by
:mod:`wmr_model.calibration.synthetic`.

Poses are ``(M, 7)`` rows ``[qw, qx, qy, qz, x, y, z]`` of the pose sensor frame in the world
(``pose_sensor``, or the body frame when None), with covariances ``(M, 6, 6)`` in the package's
``[dtheta; dp]`` world-axes convention (:mod:`wmr_model.kinematics.uncertainty`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from wmr_model.errors import BagError, ParameterError, ShapeError
from wmr_model.kinematics.uncertainty import from_ros_pose_covariance
from wmr_model.spatial import quats_to_euler
from wmr_model.vehicles.model import VehicleModel

__all__ = [
    "DEFAULT_POSE_STD",
    "CalibrationLog",
    "log_from_streams",
    "with_pose_std",
]

#: Pose standard deviations (rotation [rad], position [m]) used when a stream has no usable
#: covariance (all zero, NaN or -1): 0.01 rad, 0.02 m.
DEFAULT_POSE_STD = (0.01, 0.02)


@dataclass(frozen=True)
class CalibrationLog:
    """Arrays of one calibration run; times in seconds on one clock.

    Attributes:
        joint_names: (ne,) model joint names of the ``joint_rate`` columns.
        joint_time: (Ne,) stamps of the encoder samples, increasing.
        joint_rate: (Ne, ne) joint rates [rad/s or m/s].
        pose_time: (M,) stamps of the ground-truth poses, increasing.
        pose: (M, 7) ``[qw, qx, qy, qz, x, y, z]`` of ``pose_sensor`` in the world.
        pose_covariance: (M, 6, 6) ``[dtheta; dp]`` world axes.
        pose_sensor: sensor frame name the poses are of (None: the body frame).
        gyro_time, gyro: (Ng,), (Ng, 3) body angular velocity [rad/s], or None.
        attitude_time, roll_pitch: (Na,), (Na, 2) measured roll and pitch [rad], or None.
        pot_names: (np,) actuated steering joints with potentiometer readings (may be empty);
        pot_time, pot_reading: (Np,), (Np, np) raw readings (steer angle = gain * reading +
            offset, ``steer.<joint>.gain/offset``), or None.
        source: where the log came from (for messages).
    """

    joint_names: tuple[str, ...]
    joint_time: np.ndarray
    joint_rate: np.ndarray
    pose_time: np.ndarray
    pose: np.ndarray
    pose_covariance: np.ndarray
    pose_sensor: str | None = None
    gyro_time: np.ndarray | None = None
    gyro: np.ndarray | None = None
    attitude_time: np.ndarray | None = None
    roll_pitch: np.ndarray | None = None
    pot_names: tuple[str, ...] = ()
    pot_time: np.ndarray | None = None
    pot_reading: np.ndarray | None = None
    source: str = "<log>"
    #: what building the log dropped or derived (one line each)
    notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        ne, Ne, M = len(self.joint_names), len(self.joint_time), len(self.pose_time)
        if np.shape(self.joint_rate) != (Ne, ne):
            raise ShapeError(f"{self.source}: joint_rate: expected ({Ne}, {ne}), got "
                             f"{np.shape(self.joint_rate)}")
        if np.shape(self.pose) != (M, 7):
            raise ShapeError(f"{self.source}: pose: expected ({M}, 7), got {np.shape(self.pose)}")
        if np.shape(self.pose_covariance) != (M, 6, 6):
            raise ShapeError(f"{self.source}: pose_covariance: expected ({M}, 6, 6), got "
                             f"{np.shape(self.pose_covariance)}")
        if self.pot_names:
            Np = 0 if self.pot_time is None else len(self.pot_time)
            got = () if self.pot_reading is None else np.shape(self.pot_reading)
            if Np < 2 or got != (Np, len(self.pot_names)):
                raise ShapeError(f"{self.source}: pot_reading: expected ({Np}, "
                                 f"{len(self.pot_names)}) with >= 2 samples for pot_names "
                                 f"{list(self.pot_names)}, got {got}")
        for name in ("joint_time", "pose_time"):
            t = getattr(self, name)
            if len(t) > 1 and np.any(np.diff(t) <= 0):
                k = int(np.argmax(np.diff(t) <= 0))
                raise ParameterError(f"{self.source}: {name} must increase; sample {k + 1} "
                                     f"({t[k + 1]}) follows {t[k]}")

    @property
    def duration(self) -> float:
        """Time spanned by the ground-truth poses [s]."""
        return float(self.pose_time[-1] - self.pose_time[0]) if len(self.pose_time) else 0.0

    def rates_at(self, times: np.ndarray) -> np.ndarray:
        """Joint rates (..., ne) at ``times`` (...,), linear interpolation, held at the ends."""
        t = np.asarray(times, dtype=float)
        out = np.empty(t.shape + (len(self.joint_names),))
        for j in range(len(self.joint_names)):
            out[..., j] = np.interp(t, self.joint_time, self.joint_rate[:, j])
        return out

    def actuated_rates(self, model: VehicleModel, times: np.ndarray) -> np.ndarray:
        """Rates (..., na) of ``model.actuated_joints`` at ``times`` (missing joints raise;
        joints known only through pot readings get 0, the predictor fills them)."""
        cols = self.actuated_columns(model)
        r = self.rates_at(times)
        out = np.zeros(r.shape[:-1] + (len(cols),))
        out[..., cols >= 0] = r[..., cols[cols >= 0]]
        return out

    def actuated_columns(self, model: VehicleModel) -> np.ndarray:
        """Column of ``joint_rate`` for each actuated joint of ``model`` (na,); -1 for a joint
        that has only pot readings."""
        cols = []
        for k in model.actuated_joints:
            jn = model.joint_names[int(k)]
            if jn not in self.joint_names and jn in self.pot_names:
                cols.append(-1)
                continue
            if jn not in self.joint_names:
                raise ParameterError(f"{self.source}: no rates for actuated joint {jn!r} of "
                                     f"{model.name}; the log has {list(self.joint_names)}")
            cols.append(self.joint_names.index(jn))
        return np.array(cols, dtype=int)


def _default_covariance(n: int) -> np.ndarray:
    a, p = DEFAULT_POSE_STD
    return np.repeat(np.diag([a * a] * 3 + [p * p] * 3)[None], n, axis=0)


def log_from_streams(model: VehicleModel, streams: Mapping[str, object], *,
                     encoders: str = "enc", pose: str = "pose", imu: str | None = None,
                     pose_sensor: str | None = None, source: str = "<streams>") -> CalibrationLog:
    """Build a log from :func:`wmr_model.io.bags.read_streams` results.

    Encoder joints are matched to model joints by name, or through the vehicle sidecar's
    ``encoder_map`` (``options["encoder_map"]``: robot joint -> model joints it drives). Pose
    covariances come from the message (ROS order converted); rows without a usable covariance
    get :data:`DEFAULT_POSE_STD`. Quaternions are normalized.

    Args:
        streams: role -> stream (``BagStreams.streams`` or the ``BagStreams`` itself).
        encoders, pose, imu: roles of the joint-state, pose and (optional) IMU streams.
        pose_sensor: sensor frame of ``model`` the poses are of (None: the body).
    """
    notes: list[str] = []
    names, t_enc, rate = _joint_rates(model, streams[encoders], source, notes)
    t_pose, pose_rows, cov = _pose_samples(streams[pose], notes)
    gyro_t = gyro = att_t = rp = None
    if imu is not None and imu in streams:
        gyro_t, gyro, att_t, rp = _imu_samples(streams[imu], notes)
    t0 = float(t_enc[0])
    return CalibrationLog(
        joint_names=tuple(names), joint_time=t_enc - t0,
        joint_rate=rate, pose_time=t_pose - t0,
        pose=pose_rows, pose_covariance=cov, pose_sensor=pose_sensor,
        gyro_time=None if gyro_t is None else gyro_t - t0, gyro=gyro,
        attitude_time=None if att_t is None else att_t - t0, roll_pitch=rp, source=source,
        notes=tuple(notes))


def _joint_rates(model: VehicleModel, enc, source: str,
                 notes: list[str]) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Model joint names, stamps (M,) [s] and rates (M, n) of a joint-state stream: rates from
    the velocities (else differentiated positions) mapped to model joints by name or the
    ``encoder_map``; repeated stamps, non-finite rates and implausible rim speeds dropped."""
    from wmr_model.estimation.streams import PlausibilityLimits, differentiate_positions

    emap = dict(model.options.get("encoder_map", {}) or {})
    t_enc = np.asarray(enc.stamp, dtype=float)
    keep = np.concatenate([[True], np.diff(t_enc) > 0])
    rates_all = differentiate_positions(t_enc[keep], enc.position[keep], enc.velocity[keep])
    wheel_r = {model.joint_names[int(k)]: float(r)
               for k, r in zip(model.wheel_joints, model.wheel_radius)}
    names: list[str] = []
    cols: list[np.ndarray] = []
    radius: list[float] = []
    derived: list[str] = []
    for j, n in enumerate(enc.names):
        targets = emap.get(n, [n] if n in model.joint_names else [])
        for tname in targets:
            if tname not in names:
                names.append(tname)
                cols.append(rates_all[:, j])
                radius.append(max([wheel_r[t] for t in targets if t in wheel_r], default=0.0))
                if not np.all(np.isfinite(enc.velocity[keep, j])) and n not in derived:
                    derived.append(n)
    if not names:
        raise BagError(f"{source}: none of the encoder joints {list(enc.names)} is a joint of "
                       f"{model.name} or in its encoder_map")
    if derived:
        notes.append(f"{enc.topic}: velocity not provided (empty or NaN) for {derived} in some "
                     "messages; rates differentiated from the positions")
    rate = np.stack(cols, axis=1)
    # a sample with a non-finite rate (neither velocity nor position) or a rim speed beyond the
    # odometry's plausibility gate is dropped, not turned into a number
    rim = np.abs(rate) * np.asarray(radius)[None, :]
    ok_rate = np.all(np.isfinite(rate), axis=1) & np.all(
        rim <= PlausibilityLimits().max_wheel_speed, axis=1)
    if not ok_rate.all():
        notes.append(f"{enc.topic}: {int((~ok_rate).sum())} of {len(ok_rate)} samples dropped "
                     "(rate not finite, or rim speed above "
                     f"{PlausibilityLimits().max_wheel_speed:g} m/s)")
    if ok_rate.sum() < 2:
        raise BagError(f"{source}: {enc.topic}: {int(ok_rate.sum())} usable encoder samples "
                       "(finite rate from velocity or positions, plausible rim speed); need 2")
    return names, t_enc[keep][ok_rate], rate[ok_rate]


def _pose_samples(ps, notes: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Stamps (P,) [s], poses (P, 7) ``[q, p]`` (unit quaternions) and covariances (P, 6, 6)
    of a pose stream: unusable poses and repeated stamps dropped, unusable covariances replaced
    by :data:`DEFAULT_POSE_STD`."""
    from wmr_model.estimation.streams import usable_poses

    good = usable_poses(ps)
    if not good.all():
        notes.append(f"{ps.topic}: {int((~good).sum())} of {len(good)} poses dropped "
                     "(non-finite position or orientation)")
        ps = _pose_rows(ps, good)
    q = np.asarray(ps.orientation, dtype=float)
    q = q / np.linalg.norm(q, axis=1, keepdims=True)
    pose_rows = np.hstack([q, np.asarray(ps.position, dtype=float)])
    cov = from_ros_pose_covariance(np.asarray(ps.covariance, dtype=float).reshape(-1, 36))
    bad = ~np.all(np.isfinite(cov), axis=(1, 2)) | np.any(np.diagonal(cov, axis1=1, axis2=2)
                                                          <= 0, axis=1)
    cov = np.where(bad[:, None, None], _default_covariance(len(cov)), cov)
    t_pose = np.asarray(ps.stamp, dtype=float)
    pkeep = np.concatenate([[True], np.diff(t_pose) > 0])
    return t_pose[pkeep], pose_rows[pkeep], cov[pkeep]


def _imu_samples(im, notes: list[str]):
    """``(gyro_t, gyro, att_t, roll_pitch)`` of an IMU stream: gyro stamps (G,) [s] and rates
    (G, 3) [rad/s] (repeated stamps and non-finite samples dropped) and, when the IMU provides
    its attitude (REP-145), the stamps (A,) and roll/pitch (A, 2) [rad] as prediction inputs
    (else None, None)."""
    att_t = rp = None
    gyro_t = np.asarray(im.stamp, dtype=float)
    gk = np.concatenate([[True], np.diff(gyro_t) > 0])
    ori = np.asarray(im.orientation, dtype=float)[gk]
    gyro_t, gyro = gyro_t[gk], np.asarray(im.angular_velocity, dtype=float)[gk]
    ok = np.all(np.isfinite(ori), axis=1) & (np.sum(ori * ori, axis=1) > 0.5)
    if ok.sum() >= 2:
        qo = ori[ok] / np.linalg.norm(ori[ok], axis=1, keepdims=True)
        att_t, rp = gyro_t[ok], quats_to_euler(qo)[:, :2]
    gok = np.all(np.isfinite(gyro), axis=1) & np.isfinite(gyro_t)
    if not gok.all():
        notes.append(f"{im.topic}: {int((~gok).sum())} non-finite gyro samples dropped")
        gyro_t, gyro = gyro_t[gok], gyro[gok]
    return gyro_t, gyro, att_t, rp


def _pose_rows(ps, mask: np.ndarray):
    """Copy of pose stream ``ps`` with the rows of ``mask`` only."""
    from dataclasses import replace

    return replace(ps, stamp=ps.stamp[mask], receive_time=ps.receive_time[mask],
                   position=ps.position[mask], orientation=ps.orientation[mask],
                   covariance=ps.covariance[mask], twist=ps.twist[mask])


def with_pose_std(log: CalibrationLog, rotation: float, position: float) -> CalibrationLog:
    """Copy of ``log`` whose pose covariances are ``diag(rotation^2 x3, position^2 x3)``.

    For ground truth whose published covariance is a guess (the Warthog ICP poses carry a
    guessed 0.01 rad / 0.02 m); ``Sigma_meas`` enters every residual covariance (3.21).
    """
    from dataclasses import replace

    if not (rotation > 0 and position > 0):
        raise ParameterError(f"pose std: must be > 0, got {rotation} rad, {position} m")
    cov = np.diag([rotation ** 2] * 3 + [position ** 2] * 3)
    return replace(log, pose_covariance=np.repeat(cov[None], len(log.pose_time), axis=0))
