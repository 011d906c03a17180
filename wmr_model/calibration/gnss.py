"""GNSS/INS ground truth: a ``NavSatFix``-style geodetic fix plus an INS/IMU attitude as a pose
in a local ENU frame (REP-103/105 ``map``: x east, y north, z up) about a datum.

The geodetic -> ENU conversion is pymap3d's (WGS-84 ellipsoid); the position covariance of a
fix is already in ENU axes (``sensor_msgs/NavSatFix.position_covariance``), so it carries over
unchanged; the attitude covariance is the INS/IMU's (rotation about the fixed x, y, z axes,
REP-145). Cross-covariances between the two are not given by either message and are zero.
An IMU mounted rotated on the body reports its own frame's attitude; :func:`body_attitude`
turns it into the body's (the world-axes covariance is unchanged by that constant rotation).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from wmr_model.errors import ParameterError

__all__ = [
    "COVARIANCE_UNKNOWN",
    "COVARIANCE_APPROXIMATED",
    "COVARIANCE_DIAGONAL_KNOWN",
    "COVARIANCE_KNOWN",
    "geodetic_to_enu",
    "fix_position_covariance",
    "fix_pose",
    "body_attitude",
]

#: ``sensor_msgs/NavSatFix.position_covariance_type`` values.
COVARIANCE_UNKNOWN = 0
COVARIANCE_APPROXIMATED = 1
COVARIANCE_DIAGONAL_KNOWN = 2
COVARIANCE_KNOWN = 3


def geodetic_to_enu(lat: float, lon: float, alt: float,
                    datum: Sequence[float]) -> np.ndarray:
    """Position (3,) [m] east, north, up of the geodetic point ``lat, lon`` [deg], ``alt`` [m
    above the WGS-84 ellipsoid] in the local tangent frame at ``datum = (lat0, lon0, alt0)``."""
    import pymap3d

    vals = (lat, lon, alt, *datum)
    if len(datum) != 3 or not all(math.isfinite(float(v)) for v in vals):
        raise ParameterError(f"geodetic position: expected finite lat, lon, alt and a datum of "
                             f"three finite numbers, got {(lat, lon, alt)} about {tuple(datum)}")
    if not (-90.0 <= lat <= 90.0 and -90.0 <= datum[0] <= 90.0):
        raise ParameterError(f"latitude: must be in [-90, 90] deg, got {lat} (datum "
                             f"{datum[0]})")
    e, n, u = pymap3d.geodetic2enu(float(lat), float(lon), float(alt), float(datum[0]),
                                   float(datum[1]), float(datum[2]))
    return np.array([float(e), float(n), float(u)])


def fix_position_covariance(values: Sequence[float], covariance_type: int,
                            unknown_std: float = 0.0) -> np.ndarray | None:
    """ENU position covariance (3, 3) [m^2] of a fix, or None when it cannot be used.

    ``COVARIANCE_UNKNOWN`` (0) gives ``unknown_std^2 I`` when ``unknown_std > 0`` (a documented
    stand-in), else None (the caller rejects the fix); ``DIAGONAL_KNOWN`` keeps the diagonal;
    ``APPROXIMATED`` and ``KNOWN`` keep the whole matrix. Non-finite, non-symmetric or not
    positive definite matrices give None.
    """
    t = int(covariance_type)
    if t == COVARIANCE_UNKNOWN:
        return np.eye(3) * float(unknown_std) ** 2 if unknown_std > 0 else None
    if t not in (COVARIANCE_APPROXIMATED, COVARIANCE_DIAGONAL_KNOWN, COVARIANCE_KNOWN):
        return None
    c = np.asarray(values, dtype=float).reshape(3, 3)
    if t == COVARIANCE_DIAGONAL_KNOWN:
        c = np.diag(np.diag(c))
    if not np.all(np.isfinite(c)) or not np.allclose(c, c.T, rtol=1e-9, atol=1e-15):
        return None
    if np.any(np.linalg.eigvalsh(0.5 * (c + c.T)) <= 0):
        return None
    return 0.5 * (c + c.T)


def fix_pose(position_enu: np.ndarray, position_cov: np.ndarray,
             orientation_wxyz: Sequence[float] | np.ndarray, orientation_cov: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray]:
    """``(pose [qw, qx, qy, qz, x, y, z] (7,), covariance (6, 6) in [dtheta; dp] world axes)``
    of the antenna from its ENU position (3,) with covariance (3, 3) and the attitude
    ``[w, x, y, z]`` with its covariance (3, 3) about the fixed axes."""
    pose = np.concatenate([np.asarray(orientation_wxyz, dtype=float),
                           np.asarray(position_enu, dtype=float)])
    cov = np.zeros((6, 6))
    cov[:3, :3] = orientation_cov
    cov[3:, 3:] = position_cov
    return pose, cov


def body_attitude(q_world_imu: Sequence[float], R_body_imu: np.ndarray) -> np.ndarray:
    """Body attitude ``[w, x, y, z]`` from the IMU frame's ``q_world_imu`` ``[w, x, y, z]`` and
    the IMU's mounting rotation ``R_body_imu`` (3, 3): ``R_world_body = R_world_imu
    R_body_imu^T``."""
    from scipy.spatial.transform import Rotation

    q = np.asarray(q_world_imu, dtype=float)
    R = Rotation.from_quat(q, scalar_first=True) * Rotation.from_matrix(
        np.asarray(R_body_imu, dtype=float)).inv()
    out = R.as_quat(scalar_first=True)
    return out if out @ q >= 0 else -out  # keep the sign of the input (same rotation)
