"""Synthetic ground-truth calibration logs with known true parameters (seeded).

:func:`synthetic_log` drives a "true" vehicle (its dimensions, sensor offsets, slip
coefficients and process noise are the truth) over a terrain with random piecewise-constant
twist commands that steer back toward the origin, and records what a real log would hold:

* encoder rates of the actuated joints (the commanded rates plus white noise) at ``dt``;
* ground-truth poses of the pose sensor at ``pose_rate`` with Gaussian rotation/position noise
  of the declared covariance, stamped ``time_offset`` late (latency of the ground truth);
* process noise: white body-twist noise of spectral density ``Qprime`` (a sample of covariance
  ``Q'/dt`` added each step, the discrete equivalent of (3.13));
* roll/pitch (inclinometer/IMU attitude, white noise ``attitude_std``) and gyro (body angular
  velocity of each step, white noise ``gyro_std``) on the wheel clock, for predictors that use
  them as inputs.

The truth is simulated with the same model structure the calibration uses (enhanced kinematics
of :func:`wmr_model.prediction.predict.predict`), so a correct calibration must recover it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np

from wmr_model import kinematics as kin
from wmr_model.calibration.logs import CalibrationLog
from wmr_model.calibration.residuals import quat_multiply, sensor_pose
from wmr_model.parameters import slip_vector
from wmr_model.prediction.predict import predict
from wmr_model.spatial import quats_to_euler
from wmr_model.terrain.surface import Terrain
from wmr_model.vehicles.model import VehicleModel

__all__ = ["SyntheticRun", "synthetic_log", "inject_outliers"]


@dataclass(frozen=True)
class SyntheticRun:
    """A synthetic log and its truth.

    Attributes:
        log: the :class:`CalibrationLog`.
        truth: true values of the named parameters given to :func:`synthetic_log`.
        q: (T+1, nq) true states at the encoder stamps.
        time: (T+1,) their times [s] (wheel clock).
    """

    log: CalibrationLog
    truth: dict[str, float]
    q: np.ndarray
    time: np.ndarray


def _exp_quat(w: np.ndarray) -> np.ndarray:
    a = np.linalg.norm(w, axis=-1, keepdims=True)
    s = np.where(a > 1e-12, np.sin(a / 2) / np.where(a > 1e-12, a, 1.0), 0.5)
    return np.concatenate([np.cos(a / 2), w * s], axis=-1)


def synthetic_log(model: VehicleModel, terrain: Terrain, *, duration: float = 300.0,
                  dt: float = 0.02, slip: Mapping[str, float] | None = None,
                  Qprime: np.ndarray | None = None, pose_sensor: str | None = None,
                  pose_std: tuple[float, float] = (0.005, 0.02), pose_rate: float = 5.0,
                  encoder_std: float = 0.01, time_offset: float = 0.0,
                  speed: tuple[float, float] = (0.4, 1.5), yaw_rate: float = 0.5,
                  segment: tuple[float, float] = (1.5, 4.0), box: float = 20.0,
                  truth: Mapping[str, float] | None = None, attitude_std: float = 0.002,
                  gyro_std: float = 0.002, seed: int = 0) -> SyntheticRun:
    """Simulate a calibration run of the true vehicle ``model`` (see the module docstring).

    Args:
        model: the *true* vehicle (apply true dimensions with
            :func:`wmr_model.vehicles.parameters.with_parameters` first).
        terrain: ground; keep the run inside it with ``box`` [m] (half-size steered toward).
        slip: true ``slip.p*`` values; Qprime: (6, 6) true spectral density (default zero).
        pose_sensor: sensor of ``model`` whose pose is logged (None: body).
        pose_std: (rotation [rad], position [m]) standard deviations of the logged poses.
        pose_rate: ground-truth rate [Hz]; encoder_std: rate noise [rad/s].
        time_offset: ground-truth latency [s] (stamps = true time + offset).
        speed, yaw_rate, segment: command ranges [m/s], [rad/s] and segment durations [s].
        truth: named true values recorded in the result (e.g. the radius and sensor offsets
            already applied to ``model``).
        attitude_std, gyro_std: noise of the logged roll/pitch [rad] and gyro [rad/s] (drawn
            after everything else, so they do not change the other streams of a seed).
    """
    rng = np.random.default_rng(seed)
    p = slip_vector(slip)
    Q = np.zeros((6, 6)) if Qprime is None else np.asarray(Qprime, dtype=float)
    Lq = np.linalg.cholesky(Q / dt + 1e-18 * np.eye(6))
    data = kin.api.create_data(model)
    Tw = kin.api.forward_kinematics(model, data, model.neutral_state())
    act = [int(k) for k in model.actuated_joints]
    y_w = np.array([Tw[k + 1, 1, 3] for k in act])
    r_w = np.array([model.wheel_radius[list(model.wheel_joints).index(k)]
                    if k in model.wheel_joints else 1.0 for k in act])
    q, _ = kin.initialize_contact(model, terrain)
    qs = [q[None]]
    omegas = []
    rates = []
    t = 0.0
    while t < duration:
        seg = rng.uniform(*segment)
        T = max(1, int(round(seg / dt)))
        vx = rng.uniform(*speed)
        wz = rng.uniform(-yaw_rate, yaw_rate)
        pos = q[4:6]
        if np.linalg.norm(pos) > 0.6 * box:  # head back toward the origin
            yaw = math.atan2(2 * (q[0] * q[3] + q[1] * q[2]), 1 - 2 * (q[2] ** 2 + q[3] ** 2))
            err = math.atan2(-pos[1], -pos[0]) - yaw
            err = math.atan2(math.sin(err), math.cos(err))
            wz = float(np.clip(1.5 * err / seg, -yaw_rate, yaw_rate))
        u = (vx - wz * y_w) / r_w
        U = np.repeat(u[None], T, axis=0)
        noise = rng.standard_normal((T, 6)) @ Lq.T
        pr = predict(model, terrain, q, U, dt, fidelity="enhanced", slip_params=p,
                     process_noise=noise)
        qs.append(pr.q[0, 1:])
        omegas.append(pr.qdot[0, :, 0:3])
        rates.append(U)
        q = pr.q[0, -1].copy()
        t += T * dt
    qall = np.concatenate(qs)
    U = np.concatenate(rates)
    time = np.arange(len(qall)) * dt
    joint_rate = U + encoder_std * rng.standard_normal(U.shape)
    # rate of step k is held over [t_k, t_k+1): stamp it at the step's middle for interpolation
    joint_time = (np.arange(len(U)) + 0.5) * dt
    stride = max(1, int(round(1.0 / (pose_rate * dt))))
    k = np.arange(0, len(qall), stride)
    if pose_sensor is None:
        Ts = np.eye(4)
    else:
        _fi, Ts = model.sensor_frame[pose_sensor]
    poses = sensor_pose(qall[k, :7], np.broadcast_to(Ts, (len(k), 4, 4)))
    sr, sp = pose_std
    dq = _exp_quat(sr * rng.standard_normal((len(k), 3)))
    poses[:, :4] = quat_multiply(dq, poses[:, :4])
    poses[:, 4:7] += sp * rng.standard_normal((len(k), 3))
    cov = np.repeat(np.diag([sr ** 2] * 3 + [sp ** 2] * 3)[None], len(k), axis=0)
    names = tuple(model.joint_names[j] for j in act)
    rp = quats_to_euler(qall[:, :4])[:, :2] + attitude_std * rng.standard_normal((len(qall), 2))
    gyro = np.concatenate(omegas)
    gyro = gyro + gyro_std * rng.standard_normal(gyro.shape)
    log = CalibrationLog(joint_names=names, joint_time=joint_time, joint_rate=joint_rate,
                         pose_time=time[k] + time_offset, pose=poses, pose_covariance=cov,
                         pose_sensor=pose_sensor, gyro_time=joint_time, gyro=gyro,
                         attitude_time=time, roll_pitch=rp, source=f"synthetic(seed={seed})")
    tr = dict(truth or {})
    tr.update({f"slip.p{i + 1}": float(p[i]) for i in range(6)})
    tr["time_offset.pose"] = float(time_offset)
    return SyntheticRun(log=log, truth=tr, q=qall, time=time)


def inject_outliers(log: CalibrationLog, indices, offset: float = 1.0,
                    seed: int = 0) -> CalibrationLog:
    """Copy of ``log`` with the ground-truth poses at ``indices`` displaced by ``offset`` [m]
    in a random horizontal direction (bad ground-truth segments, e.g. an ICP divergence)."""
    rng = np.random.default_rng(seed)
    pose = np.array(log.pose)
    idx = np.asarray(indices, dtype=int)
    ang = rng.uniform(0, 2 * math.pi, len(idx))
    pose[idx, 4] += offset * np.cos(ang)
    pose[idx, 5] += offset * np.sin(ang)
    return replace(log, pose=pose)
