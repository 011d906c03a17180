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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from wmr_model.errors import BagError, ParameterError, ShapeError
from wmr_model.kinematics.uncertainty import from_ros_pose_covariance
from wmr_model.spatial import quats_to_euler
from wmr_model.vehicles.model import VehicleModel

__all__ = [
    "DEFAULT_POSE_STD",
    "POSITION_ONLY_VARIANCE",
    "CalibrationLog",
    "log_from_streams",
    "with_pose_std",
]

#: Pose standard deviations (rotation [rad], position [m]) used when a stream has no usable
#: covariance (all zero, NaN or -1): 0.01 rad, 0.02 m.
DEFAULT_POSE_STD = (0.01, 0.02)

#: [rad^2] a reference whose yaw variance is this large or larger does not measure heading
#: (a 1-rad sigma spans the whole circle within 3 sigma): GNSS-only ``nav_msgs/Odometry``
#: publish an identity quaternion with a variance of 1e3..1e6 (robot_localization's
#: convention for "not measured").
POSITION_ONLY_VARIANCE = 1.0


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
        pot_names: (np,) actuated steering joints with angle readings (may be empty): the
            JointState positions of the vehicle's steering joints
            (:func:`wmr_model.estimation.steering.steer_joints`) or raw potentiometer readings;
        pot_time, pot_reading: (Np,), (Np, np) readings (steer angle = gain * reading +
            offset, ``steer.<joint>.gain/offset``; angles: gain 1, offset 0), or None.
        steer_commanded: the ``pot_names`` whose readings are commands, not measurements: held
            between samples and followed with the lag ``steer.<joint>.lag`` (:meth:`steer_at`).
        heading_measured: False when the reference gives positions only (a GNSS fix): its
            orientation rows are then derived from the log's own gyro / wheels aligned to the
            reference track (:func:`wmr_model.calibration.heading.derive_heading`), and its
            yaw is not a measurement to score models against.
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
    steer_commanded: tuple[str, ...] = ()
    heading_measured: bool = True
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

    def steer_at(self, joint: str, times: np.ndarray, lag: float = 0.0) -> np.ndarray:
        """Reading of steering joint ``joint`` (one of ``pot_names``) at ``times`` (...,):
        measured readings interpolated linearly (held at the ends), commanded ones held and
        followed with a first-order lag of ``lag`` [s]
        (:func:`wmr_model.estimation.steering.lagged_command`)."""
        from wmr_model.estimation.steering import lagged_command

        if self.pot_time is None or self.pot_reading is None or joint not in self.pot_names:
            raise ParameterError(f"{self.source}: no steering readings of {joint!r} (the log "
                                 f"has {list(self.pot_names)})")
        col = self.pot_reading[:, self.pot_names.index(joint)]
        t = np.asarray(times, dtype=float)
        if joint in self.steer_commanded:
            return lagged_command(self.pot_time, col, lag, t.reshape(-1)).reshape(t.shape)
        return np.interp(t, self.pot_time, col)

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
                     steer: str | None = None, pose_sensor: str | None = None,
                     source: str = "<streams>") -> CalibrationLog:
    """Build a log from :func:`wmr_model.io.bags.read_streams` results.

    Encoder joints are matched to model joints by name, or through the vehicle sidecar's
    ``encoder_map`` (``options["encoder_map"]``: robot joint -> model joints it drives); wheels
    without an encoder are simply absent (the kinematics solves for them). The steering joints'
    angles (:func:`wmr_model.estimation.steering.steer_joints`) are read from the JointState
    positions of the ``steer`` stream, else of the encoder stream, as steering readings
    (``pot_names``; commanded ones per the sidecar's ``steering``). Pose covariances come from
    the message (ROS order converted); rows without a usable covariance get
    :data:`DEFAULT_POSE_STD`. Quaternions are normalized. A reference that measures positions
    only (no orientation, or a rotation variance of :data:`POSITION_ONLY_VARIANCE` or more:
    a GNSS fix) gets its heading derived (:func:`wmr_model.calibration.heading.derive_heading`)
    and ``heading_measured`` False.

    Args:
        streams: role -> stream (``BagStreams.streams`` or the ``BagStreams`` itself).
        encoders, pose, imu, steer: roles of the joint-state, pose and (optional) IMU and
            steering-angle streams.
        pose_sensor: sensor frame of ``model`` the poses are of (None: the body).
    """
    from wmr_model.estimation.odometry import imu_rotation
    from wmr_model.estimation.steering import steer_inputs

    notes: list[str] = []
    steering = steer_inputs(model)
    sources = [streams[r] for r in (steer, encoders) if r is not None and r in streams]
    pots = _steer_readings(steering, sources, source, notes)
    names, t_enc, rate = _joint_rates(model, streams[encoders], source, notes,
                                      exclude=tuple(pots[0]))
    t_pose, pose_rows, cov, position_only = _pose_samples(streams[pose], notes)
    gyro_t = gyro = att_t = rp = None
    if imu is not None and imu in streams:
        gyro_t, gyro, att_t, rp = _imu_samples(streams[imu], notes, imu_rotation(model))
    t0 = float(t_enc[0])
    log = CalibrationLog(
        joint_names=tuple(names), joint_time=t_enc - t0,
        joint_rate=rate, pose_time=t_pose - t0,
        pose=pose_rows, pose_covariance=cov, pose_sensor=pose_sensor,
        gyro_time=None if gyro_t is None else gyro_t - t0, gyro=gyro,
        attitude_time=None if att_t is None else att_t - t0, roll_pitch=rp,
        pot_names=pots[0], pot_time=None if pots[1] is None else pots[1] - t0,
        pot_reading=pots[2], steer_commanded=pots[3], source=source,
        notes=tuple(notes))
    if position_only:
        from wmr_model.calibration.heading import derive_heading

        log = derive_heading(log, model, topic=getattr(streams[pose], "topic", pose))
    return log


def _steer_readings(steering: Mapping[str, Any], sources: Sequence[Any], source: str,
                    notes: list[str]):
    """``(names, stamps (P,), readings (P, ns), commanded names)`` of the steering joints
    whose JointState positions one of the ``sources`` streams carries (the first that does);
    every joint on the stamps of the first one's stream (commanded ones held, measured ones
    interpolated). ``((), None, None, ())`` when there are none."""
    cols: dict[str, tuple[np.ndarray, np.ndarray, str]] = {}
    for j in steering:
        for s in sources:
            if j not in s.names:
                continue
            p = np.asarray(s.position, dtype=float)[:, list(s.names).index(j)]
            t = np.asarray(s.stamp, dtype=float)
            ok = np.isfinite(p) & np.isfinite(t)
            if ok.sum() >= 2:
                tk, pk = t[ok], p[ok]
                keep = np.concatenate([[True], np.diff(tk) > 0])
                cols[j] = (tk[keep], pk[keep], s.topic)
                break
    missing = [j for j in steering if j not in cols]
    if missing:
        have = sorted({n for s in sources for n in s.names})
        raise BagError(f"{source}: no steering angles of {missing} (JointState positions) on "
                       f"{[s.topic for s in sources]} (joints {have}); give the topic that "
                       "carries them (--steer-topic, or the sidecar's steering.<joint>.topic)")
    if not cols:
        return (), None, None, ()
    names = tuple(cols)
    t_ref = cols[names[0]][0]
    reading = np.empty((len(t_ref), len(names)))
    commanded = tuple(j for j in names if steering[j].source == "commanded")
    for k, j in enumerate(names):
        tj, pj, topic = cols[j]
        if j in commanded:
            reading[:, k] = pj[np.clip(np.searchsorted(tj, t_ref, side="right") - 1, 0,
                                       len(tj) - 1)]
        else:
            reading[:, k] = np.interp(t_ref, tj, pj)
        kind = (f"commanded (lag {steering[j].lag:g} s, steer.{j}.lag)" if j in commanded
                else "measured")
        notes.append(f"{topic}: steering angle of {j} from its JointState position, {kind}, "
                     f"{len(tj)} samples")
    return names, t_ref, reading, commanded


def _joint_rates(model: VehicleModel, enc, source: str, notes: list[str],
                 exclude: tuple[str, ...] = ()) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Model joint names, stamps (M,) [s] and rates (M, n) of a joint-state stream: rates from
    the velocities (else differentiated positions) mapped to model joints by name or the
    ``encoder_map``, except the ``exclude`` joints (steering angles, read as angles);
    repeated stamps, non-finite rates and implausible rim speeds dropped."""
    from wmr_model.estimation.streams import PlausibilityLimits, differentiate_positions

    emap = dict(model.options.get("encoder_map", {}) or {})
    t_enc = np.asarray(enc.stamp, dtype=float)
    keep = np.concatenate([[True], np.diff(t_enc) > 0])
    rates_all = differentiate_positions(t_enc[keep], enc.position[keep], enc.velocity[keep])
    wheels = {model.joint_names[int(k)] for k in model.wheel_joints}
    wheel_r = {model.joint_names[int(k)]: float(r)
               for k, r in zip(model.wheel_joints, model.wheel_radius)}
    names: list[str] = []
    cols: list[np.ndarray] = []
    radius: list[float] = []
    derived: list[str] = []
    for j, n in enumerate(enc.names):
        targets = emap.get(n, [n] if n in model.joint_names else [])
        for tname in (t for t in targets if t not in exclude):
            if tname not in names:
                names.append(tname)
                cols.append(rates_all[:, j])
                radius.append(max([wheel_r[t] for t in targets if t in wheel_r], default=0.0))
                if not np.all(np.isfinite(enc.velocity[keep, j])) and n not in derived:
                    derived.append(n)
    if not names:
        raise BagError(f"{source}: none of the encoder joints {list(enc.names)} is a driven "
                       f"joint of {model.name} or in its encoder_map; its wheels are "
                       f"{sorted(wheels)}")
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


def _pose_samples(ps, notes: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
    """Stamps (P,) [s], poses (P, 7) ``[q, p]`` (unit quaternions) and covariances (P, 6, 6)
    of a pose stream and whether it is position-only (no orientation rows, or yaw variances
    of :data:`POSITION_ONLY_VARIANCE` or more: the orientation columns are then a placeholder
    identity with NaN rotation covariance, for :func:`~wmr_model.calibration.heading.
    derive_heading`): unusable poses and repeated stamps dropped, unusable covariances replaced
    by :data:`DEFAULT_POSE_STD`."""
    from dataclasses import replace

    from wmr_model.estimation.streams import usable_poses

    q_in = np.asarray(ps.orientation, dtype=float)
    yaw_var = np.asarray(ps.covariance, dtype=float).reshape(-1, 36)[:, 35]
    no_q = ~np.all(np.isfinite(q_in), axis=1) | (np.sum(q_in * q_in, axis=1) < 0.25)
    position_only = bool(len(q_in)) and bool(np.all(no_q | (yaw_var >= POSITION_ONLY_VARIANCE)))
    if position_only:
        ident = np.tile([1.0, 0.0, 0.0, 0.0], (len(q_in), 1))
        ps = replace(ps, orientation=ident)
        notes.append(f"{ps.topic}: position-only reference (no orientation, or yaw variance >= "
                     f"{POSITION_ONLY_VARIANCE:g} rad^2): its heading is not used")
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
    if position_only:  # rotation block: not measured (derive_heading fills it)
        pc = np.asarray(ps.covariance, dtype=float).reshape(-1, 36)[:, [0, 1, 2, 6, 7, 8, 12,
                                                                        13, 14]]
        pos_cov = from_ros_pose_covariance(np.asarray(ps.covariance, dtype=float)
                                           .reshape(-1, 36))[:, 3:, 3:]
        ok = np.all(np.isfinite(pc), axis=1) & np.all(np.diagonal(pos_cov, axis1=1, axis2=2)
                                                       > 0, axis=1)
        p = DEFAULT_POSE_STD[1]
        cov = np.zeros((len(pose_rows), 6, 6))
        cov[:, 3:, 3:] = np.where(ok[:, None, None], pos_cov, np.eye(3) * p * p)
        cov[:, :3, :3] = np.nan
    t_pose = np.asarray(ps.stamp, dtype=float)
    pkeep = np.concatenate([[True], np.diff(t_pose) > 0])
    return t_pose[pkeep], pose_rows[pkeep], cov[pkeep], position_only


def _imu_samples(im, notes: list[str], R_body_imu: np.ndarray | None = None):
    """``(gyro_t, gyro, att_t, roll_pitch)`` of an IMU stream: gyro stamps (G,) [s] and body
    rates (G, 3) [rad/s] (the IMU's rates turned by its mounting ``R_body_imu``, default the
    identity; repeated stamps and non-finite samples dropped) and, when the IMU provides its
    attitude (REP-145), the stamps (A,) and the body's roll/pitch (A, 2) [rad] as prediction
    inputs (else None, None)."""
    att_t = rp = None
    gyro_t = np.asarray(im.stamp, dtype=float)
    gk = np.concatenate([[True], np.diff(gyro_t) > 0])
    ori = np.asarray(im.orientation, dtype=float)[gk]
    gyro_t, gyro = gyro_t[gk], np.asarray(im.angular_velocity, dtype=float)[gk]
    ok = np.all(np.isfinite(ori), axis=1) & (np.sum(ori * ori, axis=1) > 0.5)
    R = np.eye(3) if R_body_imu is None else np.asarray(R_body_imu, dtype=float)
    rotated = not np.allclose(R, np.eye(3))
    if rotated:
        gyro = gyro @ R.T
    if ok.sum() >= 2:
        qo = ori[ok] / np.linalg.norm(ori[ok], axis=1, keepdims=True)
        if rotated:  # R_world_body = R_world_imu R_body_imu^T (as gnss.body_attitude)
            from scipy.spatial.transform import Rotation

            qo = (Rotation.from_quat(qo, scalar_first=True)
                  * Rotation.from_matrix(R).inv()).as_quat(scalar_first=True)
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
