"""Reference planar models of §3.4.1: differential drive (3.64)-(3.65) and diff drive+ (3.66).

The vehicle moves in a plane (tangent to the terrain): pose ``(x, y, yaw)``, body twist
``(vx, wz)``. These are the baselines the thesis compares its 3D models against, and the
closed forms several tests check the 3D kinematics with.

Shapes: wheel speeds ``v_l, v_r`` broadcast over any leading axes; poses are (..., 3)
``[x, y, yaw]`` [m, m, rad]; ``dt`` [s].
"""

from __future__ import annotations

import math

import numpy as np

from wmr_model._jit import njit
from wmr_model.errors import ParameterError, ShapeError

__all__ = [
    "diff_drive_twist",
    "diff_drive_plus_twist",
    "integrate_planar_step",
    "integrate_planar",
    "predict_diff_drive",
]

# Below this |wz dt| [rad] the exact arc step uses its Taylor series: sin(a)/a and
# (1 - cos a)/a lose all digits as a -> 0; the series is exact to double precision there.
SMALL_TURN = 1e-6


def diff_drive_twist(v_l, v_r, track: float):
    """Differential drive, (3.64)-(3.65): ``vx = (v_l + v_r)/2``, ``wz = (v_r - v_l)/B``.

    ``v_l, v_r`` [m/s] wheel ground speeds (radius times angular rate), ``track`` B [m].
    Returns ``(vx, wz)`` broadcast over the inputs.
    """
    return diff_drive_plus_twist(v_l, v_r, track, 1.0)


def diff_drive_plus_twist(v_l, v_r, track: float, alpha: float):
    """Enhanced differential drive, (3.64) and (3.66): ``wz = alpha (v_r - v_l)/B``.

    ``alpha`` [-] scales the yaw rate (skid-steer vehicles turn less than the no-slip model
    predicts: alpha < 1).
    """
    if not (math.isfinite(track) and track > 0):
        raise ParameterError(f"track: must be > 0 m, got {track}")
    if not math.isfinite(alpha):
        raise ParameterError(f"alpha: must be finite, got {alpha}")
    v_l = np.asarray(v_l, dtype=float)
    v_r = np.asarray(v_r, dtype=float)
    return 0.5 * (v_l + v_r), alpha * (v_r - v_l) / track


@njit
def integrate_planar_step(x, y, yaw, vx, wz, dt):
    """Exact pose after constant body twist ``(vx, wz)`` for ``dt`` (circular arc).

    .. math::

        x' = x + \\tfrac{v}{\\omega}(\\sin(\\psi + \\omega\\Delta t) - \\sin\\psi), \\quad
        y' = y - \\tfrac{v}{\\omega}(\\cos(\\psi + \\omega\\Delta t) - \\cos\\psi), \\quad
        \\psi' = \\psi + \\omega \\Delta t

    evaluated in the form ``d (sin a / a, (1 - cos a) / a)`` rotated by yaw, which stays exact
    as ``a = wz dt -> 0`` (straight line).
    """
    a = wz * dt
    if abs(a) < SMALL_TURN:
        s = 1.0 - a * a / 6.0  # sin(a)/a
        c = 0.5 * a  # (1 - cos a)/a
    else:
        s = math.sin(a) / a
        c = (1.0 - math.cos(a)) / a
    d = vx * dt
    cy, sy = math.cos(yaw), math.sin(yaw)
    # displacement in the start frame: (d s, d c); rotate by yaw
    nx = x + cy * d * s - sy * d * c
    ny = y + sy * d * s + cy * d * c
    return nx, ny, yaw + a


@njit
def _integrate(pose0, vx, wz, dt, out):
    for n in range(vx.shape[0]):
        x, y, yaw = pose0[n, 0], pose0[n, 1], pose0[n, 2]
        out[n, 0, 0] = x
        out[n, 0, 1] = y
        out[n, 0, 2] = yaw
        for t in range(vx.shape[1]):
            x, y, yaw = integrate_planar_step(x, y, yaw, vx[n, t], wz[n, t], dt)
            out[n, t + 1, 0] = x
            out[n, t + 1, 1] = y
            out[n, t + 1, 2] = yaw


def integrate_planar(pose0: np.ndarray, vx: np.ndarray, wz: np.ndarray, dt: float) -> np.ndarray:
    """Poses (..., T+1, 3) from ``pose0`` (3,) or (N, 3) and twists ``vx, wz`` (T,) or (N, T).

    Each step is the exact arc of :func:`integrate_planar_step`; yaw is not wrapped.
    """
    p0 = np.asarray(pose0, dtype=float)
    vx = np.asarray(vx, dtype=float)
    wz = np.asarray(wz, dtype=float)
    batched = p0.ndim == 2 or vx.ndim == 2
    if p0.shape[-1:] != (3,):
        raise ShapeError(f"pose0: expected shape (3,) or (N, 3), got {np.shape(pose0)}")
    p0 = p0.reshape(-1, 3)
    if vx.shape != wz.shape or vx.ndim not in (1, 2):
        raise ShapeError(f"vx, wz: expected equal shapes (T,) or (N, T), got {vx.shape} and "
                         f"{wz.shape}")
    vx2 = np.atleast_2d(vx)
    wz2 = np.atleast_2d(wz)
    N = max(p0.shape[0], vx2.shape[0])
    p0 = np.ascontiguousarray(np.broadcast_to(p0, (N, 3)))
    vx2 = np.ascontiguousarray(np.broadcast_to(vx2, (N, vx2.shape[1])))
    wz2 = np.ascontiguousarray(np.broadcast_to(wz2, (N, wz2.shape[1])))
    if not (math.isfinite(dt) and dt > 0):
        raise ParameterError(f"dt: must be a finite step size > 0 s, got {dt}")
    out = np.empty((N, vx2.shape[1] + 1, 3))
    _integrate(p0, vx2, wz2, float(dt), out)
    return out if batched else out[0]


def predict_diff_drive(pose0: np.ndarray, v_l: np.ndarray, v_r: np.ndarray, track: float,
                       dt: float, alpha: float = 1.0) -> np.ndarray:
    """Planar prediction with diff drive (alpha = 1, 3.64-3.65) or diff drive+ (3.66).

    ``v_l, v_r`` (T,) or (N, T) wheel ground speeds [m/s]; returns (..., T+1, 3) poses.
    """
    vx, wz = diff_drive_plus_twist(v_l, v_r, track, alpha)
    return integrate_planar(pose0, vx, wz, dt)
