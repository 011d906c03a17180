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

__all__ = ["derive_heading", "heading_offsets", "HeadingTrack", "WINDOW_SIGMAS",
           "WINDOW_BOUNDS", "MIN_SPREAD_SIGMAS", "LEVEL_STD"]

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


class HeadingTrack:
    """The same derived heading, causally, for a live calibrator (the node's GNSS fixes without
    an IMU attitude): feed it the body yaw rate (:meth:`add_gyro`, else the planar model's
    through :meth:`add_speed`), the planar forward speed (:meth:`add_speed`) and each fix
    (:meth:`heading`); the rotation of the dead-reckoned track onto the fixes is fitted over the
    *trailing* window (the fixes up to the one asked for), held from the last window that moved
    enough while the vehicle stands or drives too little for the fixes' noise.

    Args:
        max_history: [s] samples kept at most (the longest window is
            ``WINDOW_BOUNDS[1]``).
    """

    def __init__(self, max_history: float = 2 * WINDOW_BOUNDS[1]) -> None:
        self.max_history = float(max_history)
        self._gyro: list[tuple[float, float, float]] = []  # (t, wz, integrated yaw)
        self._wheel: list[tuple[float, float, float, float]] = []  # (t, yaw, x, y)
        self._ref: list[tuple[float, float, float]] = []  # (t, x, y)
        self._speeds: list[float] = []
        self._theta: tuple[float, float] | None = None  # last fitted (theta, std)

    def _yaw(self, t: float) -> float:
        """Relative heading [rad] at ``t``: the gyro's where it has samples, else the wheels'."""
        if len(self._gyro) >= 2:
            g = np.array(self._gyro)
            return float(np.interp(t, g[:, 0], g[:, 2]))
        if self._wheel:
            w = np.array(self._wheel)
            return float(np.interp(t, w[:, 0], w[:, 1]))
        return 0.0

    def add_gyro(self, t: float, wz: float) -> None:
        """A body yaw rate [rad/s] stamped ``t`` [s] (older stamps are ignored)."""
        if self._gyro and t <= self._gyro[-1][0]:
            return
        yaw = 0.0
        if self._gyro:
            t0, w0, y0 = self._gyro[-1]
            yaw = y0 + 0.5 * (w0 + wz) * (t - t0)
        self._gyro.append((float(t), float(wz), yaw))
        self._trim(self._gyro, t)

    def add_speed(self, t: float, v: float, wz: float = 0.0) -> None:
        """The planar model's forward speed [m/s] and yaw rate [rad/s] at ``t`` [s]: the
        dead-reckoned track advances along the relative heading."""
        if self._wheel and t <= self._wheel[-1][0]:
            return
        if not self._wheel:
            self._wheel.append((float(t), 0.0, 0.0, 0.0))
            return
        t0, y0, x0, yy0 = self._wheel[-1]
        dt = t - t0
        yaw_w = y0 + wz * dt
        self._wheel.append((float(t), yaw_w, 0.0, 0.0))  # the wheel yaw first (the fallback)
        h = self._yaw(t0 + 0.5 * dt)
        self._wheel[-1] = (float(t), yaw_w, x0 + v * math.cos(h) * dt,
                           yy0 + v * math.sin(h) * dt)
        if abs(v) > MOVING_SPEED:
            self._speeds.append(abs(float(v)))
            del self._speeds[:-2000]
        self._trim(self._wheel, t)

    def heading(self, t: float, xy: np.ndarray, sigma: float) -> tuple[float, float] | None:
        """Heading [rad] and its sigma at the fix stamped ``t`` [s] at ``xy`` (2,) [m] with
        horizontal position sigma ``sigma`` [m]; None until a trailing window has moved enough
        (the fix is kept for later windows either way)."""
        self._ref.append((float(t), float(xy[0]), float(xy[1])))
        self._trim(self._ref, t)
        if len(self._wheel) < 2:
            return None
        v_typ = float(np.median(self._speeds)) if self._speeds else MOVING_SPEED
        window = float(np.clip(WINDOW_SIGMAS * sigma / v_typ, *WINDOW_BOUNDS))
        r = np.array(self._ref)
        r = r[r[:, 0] >= t - window]
        w = np.array(self._wheel)
        r = r[(r[:, 0] >= w[0, 0]) & (r[:, 0] <= w[-1, 0])]
        if len(r) >= 3:
            o = np.stack([np.interp(r[:, 0], w[:, 0], w[:, k]) for k in (2, 3)], axis=1)
            o -= o.mean(axis=0)
            g = r[:, 1:] - r[:, 1:].mean(axis=0)
            spread = float(np.sum(o * o))
            if spread >= (MIN_SPREAD_SIGMAS * sigma) ** 2 * len(r):
                th = math.atan2(float(np.sum(o[:, 0] * g[:, 1] - o[:, 1] * g[:, 0])),
                                float(np.sum(o[:, 0] * g[:, 0] + o[:, 1] * g[:, 1])))
                self._theta = (th, sigma / math.sqrt(spread))
        if self._theta is None:
            return None
        th, std = self._theta
        return self._yaw(t) + th, std

    def _trim(self, rows: list, t: float) -> None:
        while rows and rows[0][0] < t - self.max_history:
            rows.pop(0)
