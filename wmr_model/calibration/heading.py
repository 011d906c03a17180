"""Heading for a position-only reference (a GNSS fix): the log's own yaw aligned to its track.

A GNSS receiver gives positions; an identity quaternion in its ``nav_msgs/Odometry`` is a
placeholder, not a heading. Interval predictions still need the start heading, so it is
derived from what the vehicle measures itself: the **relative** heading ``psi_o(t)`` (the
gyro's yaw rate integrated, else the planar model's from the wheels and steering:
:func:`wmr_model.calibration.reference.dead_reckoning`) is exact over seconds up to a constant,
and that constant is the rotation that lays the dead-reckoned track onto the reference track.
Over a window around each reference sample the rotation is the planar Procrustes solution of
the centred tracks (Umeyama 1991 without scale):

.. math:: \\theta_k = \\operatorname{atan2}\\Big(\\sum_i o_i \\times g_i,
          \\sum_i o_i \\cdot g_i\\Big),
          \\qquad \\psi_k = \\psi_o(t_k) + \\theta_k

with ``o_i``, ``g_i`` the dead-reckoned and reference positions minus their window means. Its
standard deviation from the reference noise ``sigma_p`` is ``sigma_p / sqrt(sum |o_i|^2)``
(the lever of the track about its centre): a long, spread-out window pins the heading, a
vehicle standing still does not, and a window whose spread is too small for the reference's
noise (:data:`MIN_SPREAD_SIGMAS`) gives no estimate: the nearest good windows' rotations
are interpolated (the gyro or wheels carry the heading across the stop). The window length
follows the reference's noise: about :data:`WINDOW_SIGMAS` position sigmas of travel, within
:data:`WINDOW_BOUNDS`.

Roll and pitch come from the IMU's attitude when the log has it, else zero (level) with a
variance that says so.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np

from wmr_model.calibration.logs import CalibrationLog
from wmr_model.errors import ParameterError
from wmr_model.spatial import eulers_to_quat

__all__ = ["derive_heading", "heading_offsets", "WINDOW_SIGMAS", "WINDOW_BOUNDS",
           "MIN_SPREAD_SIGMAS"]

#: a window spans about this many reference position sigmas of travel
WINDOW_SIGMAS = 40.0
#: [s] shortest and longest alignment window
WINDOW_BOUNDS = (5.0, 60.0)
#: a window's rms spread about its centre must exceed this many position sigmas
MIN_SPREAD_SIGMAS = 3.0
#: [m/s] wheel speeds above this count as moving (the typical speed sets the window)
MOVING_SPEED = 0.05
#: [rad] roll/pitch sigma of a derived orientation without an IMU attitude (level assumed)
LEVEL_STD = 0.05


def heading_offsets(t: np.ndarray, ref_xy: np.ndarray, odo_xy: np.ndarray, window: float,
                    sigma_p: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rotation ``theta`` (M,) [rad] taking the dead-reckoned track ``odo_xy`` (M, 2) onto the
    reference track ``ref_xy`` (M, 2) over a ``window`` [s] centred at each stamp ``t`` (M,),
    its standard deviation (M,) [rad] for reference position noise ``sigma_p`` [m], and the
    mask (M,) of samples whose own window moved enough (module docstring); the others are
    interpolated from the nearest good ones (unwrapped)."""
    M = len(t)
    lo = np.searchsorted(t, t - 0.5 * window, side="left")
    hi = np.searchsorted(t, t + 0.5 * window, side="right")
    theta = np.full(M, np.nan)
    std = np.full(M, np.nan)
    for k in range(M):
        a, b = int(lo[k]), int(hi[k])
        if b - a < 3:
            continue
        o = odo_xy[a:b] - odo_xy[a:b].mean(axis=0)
        g = ref_xy[a:b] - ref_xy[a:b].mean(axis=0)
        spread = float(np.sum(o * o))
        if spread < (MIN_SPREAD_SIGMAS * sigma_p) ** 2 * (b - a):
            continue
        theta[k] = math.atan2(float(np.sum(o[:, 0] * g[:, 1] - o[:, 1] * g[:, 0])),
                              float(np.sum(o[:, 0] * g[:, 0] + o[:, 1] * g[:, 1])))
        std[k] = sigma_p / math.sqrt(spread)
    good = np.isfinite(theta)
    if good.any():
        th = np.unwrap(theta[good])
        theta = np.interp(t, t[good], th)
        std = np.where(good, std, np.interp(t, t[good], std[good]))
    return theta, std, good


def derive_heading(log: CalibrationLog, model: Any, topic: str = "pose",
                   window: float | None = None) -> CalibrationLog:
    """Copy of the position-only ``log`` with orientation rows derived (module docstring),
    their rotation covariance filled (world-axes ``[dtheta]`` block: roll/pitch from the IMU or
    :data:`LEVEL_STD`, yaw from the alignment) and ``heading_measured`` False.

    Args:
        log: a log whose ``pose_covariance`` rotation block is NaN (not measured).
        model: the vehicle (its planar model dead-reckons the track).
        topic: name of the reference for messages.
        window: [s] alignment window (None: from the reference's noise, module docstring).

    Raises:
        ParameterError: the reference never moves enough for its noise to give a heading.
    """
    from wmr_model.calibration.predictors import planar_predictor
    from wmr_model.calibration.reference import dead_reckoning

    t = np.asarray(log.pose_time, dtype=float)
    ref_xy = np.asarray(log.pose[:, 4:6], dtype=float)
    pos_var = np.diagonal(log.pose_covariance[:, 3:5, 3:5], axis1=1, axis2=2)
    sigma_p = float(np.sqrt(np.median(np.mean(pos_var, axis=1))))
    dd = planar_predictor(model)
    dr = dead_reckoning(log, dd, t)
    if window is None:  # the vehicle's typical speed while moving, from its wheels
        speed = np.abs(dd.twist(log, log.joint_time)[0])
        moving = speed[speed > MOVING_SPEED]
        v_typ = float(np.median(moving)) if len(moving) else MOVING_SPEED
        window = float(np.clip(WINDOW_SIGMAS * sigma_p / v_typ, *WINDOW_BOUNDS))
    theta, std, good = heading_offsets(t, ref_xy, dr[:, :2], window, sigma_p)
    if not good.any():
        raise ParameterError(
            f"{log.source}: {topic} gives positions only and the vehicle never moves far "
            f"enough for its noise ({sigma_p:.3g} m) within a {window:.0f} s window to tell "
            "the heading; give a reference with orientation, or a longer log")
    yaw = dr[:, 2] + theta
    if log.roll_pitch is not None and log.attitude_time is not None:
        rp = np.stack([np.interp(t, log.attitude_time, log.roll_pitch[:, a]) for a in (0, 1)],
                      axis=1)
        rp_std = 0.01
        how = "roll/pitch from the IMU"
    else:
        rp = np.zeros((len(t), 2))
        rp_std = LEVEL_STD
        how = f"level assumed (roll/pitch sigma {LEVEL_STD:g} rad)"
    q = eulers_to_quat(np.column_stack([rp, yaw]))
    pose = np.array(log.pose, dtype=float)
    pose[:, :4] = q
    cov = np.array(log.pose_covariance, dtype=float)
    cov[:, :3, :] = 0.0
    cov[:, :, :3] = 0.0
    cov[:, 0, 0] = cov[:, 1, 1] = rp_std ** 2
    cov[:, 2, 2] = std ** 2
    src = "gyro" if log.gyro is not None else "wheels and steering"
    note = (f"{topic}: heading derived from the {src} aligned to the reference track over "
            f"{window:.0f} s windows (reference sigma {sigma_p:.3g} m; heading sigma median "
            f"{float(np.median(std)):.3g} rad; {int(good.sum())} of {len(t)} samples from a "
            f"window that moves enough; {how}); yaw errors are not scored against it")
    return replace(log, pose=pose, pose_covariance=cov, heading_measured=False,
                   notes=log.notes + (note,))
