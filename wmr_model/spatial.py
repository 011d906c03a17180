"""Orientation representations and spatial vector algebra (Seegmiller 2014, Appendices A and B).

Conventions, stated once for the whole package:

* Spatial vectors are ``[angular; linear]`` (B.1): velocity ``[w; v]``, force ``[tau; f]``.
* ``R_a_b`` (thesis :math:`R_a^b`) is the orientation of frame *a* relative to frame *b*; it maps
  coordinates ``b_u = R_a_b @ a_u``.
* Euler angles are roll, pitch, yaw about x, y, z applied as :math:`R = R_z(\\psi) R_y(\\theta)
  R_x(\\phi)` (A.9).
* Quaternions are scalar first, ``[w, x, y, z]`` (A.16), unit norm. (ROS messages are x, y, z, w;
  conversion happens only in the ROS layer.)

All functions here are scalar kernels (one 3-vector, one 3x3 matrix) compiled with numba so that
compiled simulation loops can call them; they also work on plain NumPy arrays from Python.
"""

from __future__ import annotations

import math

import numpy as np

from wmr_model._jit import njit

__all__ = [
    "STANDARD_GRAVITY",
    "skew",
    "rot_x",
    "rot_y",
    "rot_z",
    "rot_axis_angle",
    "euler_to_rot",
    "rot_to_euler",
    "omega_euler_rates",
    "omega_euler_rates_inv",
    "quat_to_rot",
    "quat_to_rot_into",
    "quat_rot_entries",
    "rot_to_quat",
    "quat_mul",
    "quat_mul_into",
    "quat_exp_body",
    "quat_exp_body_into",
    "quat_from_euler",
    "euler_from_quat",
    "quat_normalize",
    "quat_normalize_into",
    "plucker_from_transform",
    "plucker_force_from_transform",
    "crm",
    "crf",
    "spatial_inertia",
    "transform_inverse",
    "quats_to_euler",
    "eulers_to_quat",
]

# Below this rotation angle [rad] the quaternion exponential uses its Taylor series: the direct
# formula sin(a/2)/a loses all digits near a = 0 and the series is exact to double precision.
#: Standard gravity [m/s^2] (ISO 80000-3), the package's one gravity constant: world gravity is
#: ``(0, 0, -STANDARD_GRAVITY)`` in the z-up world frame (REP-103) unless a vehicle sets its own
#: ``options.gravity`` (:func:`wmr_model.dynamics.api.gravity_of`).
STANDARD_GRAVITY = 9.80665

SMALL_ANGLE = 1e-8


@njit
def skew(u: np.ndarray) -> np.ndarray:
    """Skew-symmetric cross-product matrix :math:`[u]_\\times`, (1.1). ``u``: (3,) -> (3, 3)."""
    S = np.zeros((3, 3))
    S[0, 1] = -u[2]
    S[0, 2] = u[1]
    S[1, 0] = u[2]
    S[1, 2] = -u[0]
    S[2, 0] = -u[1]
    S[2, 1] = u[0]
    return S


@njit
def rot_x(a: float) -> np.ndarray:
    """Elemental rotation about x, (A.1)."""
    c, s = math.cos(a), math.sin(a)
    R = np.eye(3)
    R[1, 1] = c
    R[1, 2] = -s
    R[2, 1] = s
    R[2, 2] = c
    return R


@njit
def rot_y(a: float) -> np.ndarray:
    """Elemental rotation about y, (A.2)."""
    c, s = math.cos(a), math.sin(a)
    R = np.eye(3)
    R[0, 0] = c
    R[0, 2] = s
    R[2, 0] = -s
    R[2, 2] = c
    return R


@njit
def rot_z(a: float) -> np.ndarray:
    """Elemental rotation about z, (A.3)."""
    c, s = math.cos(a), math.sin(a)
    R = np.eye(3)
    R[0, 0] = c
    R[0, 1] = -s
    R[1, 0] = s
    R[1, 1] = c
    return R


@njit
def rot_axis_angle(axis: np.ndarray, angle: float) -> np.ndarray:
    """Rotation by ``angle`` [rad] about the unit ``axis`` (3,) (Rodrigues' formula).

    Generalizes the thesis' Rot(a(i), theta) of Algorithm 1 to an arbitrary joint axis; equals
    (A.1)-(A.3) for the coordinate axes.
    """
    c, s = math.cos(angle), math.sin(angle)
    K = skew(axis)
    return np.eye(3) + s * K + (1.0 - c) * (K @ K)


@njit
def euler_to_rot(roll: float, pitch: float, yaw: float) -> np.ndarray:
    """Rotation matrix from roll, pitch, yaw: :math:`R_z(\\psi) R_y(\\theta) R_x(\\phi)`, (A.9).

    (The printed (A.9) has a typo in element (2, 3); this is the product of (A.1)-(A.3).)
    """
    cr, sr = math.cos(roll), math.sin(roll)
    cp, sp = math.cos(pitch), math.sin(pitch)
    cy, sy = math.cos(yaw), math.sin(yaw)
    R = np.empty((3, 3))
    R[0, 0] = cy * cp
    R[0, 1] = cy * sp * sr - sy * cr
    R[0, 2] = cy * sp * cr + sy * sr
    R[1, 0] = sy * cp
    R[1, 1] = sy * sp * sr + cy * cr
    R[1, 2] = sy * sp * cr - cy * sr
    R[2, 0] = -sp
    R[2, 1] = cp * sr
    R[2, 2] = cp * cr
    return R


@njit
def rot_to_euler(R: np.ndarray) -> np.ndarray:
    """Roll, pitch, yaw from a rotation matrix, (A.10)-(A.13). Returns (3,)."""
    yaw = math.atan2(R[1, 0], R[0, 0])
    roll = math.atan2(R[2, 1], R[2, 2])
    # (A.12): use whichever of cos/sin(roll) is larger to avoid dividing by ~0.
    cr, sr = math.cos(roll), math.sin(roll)
    if abs(cr) > abs(sr):
        cp = R[2, 2] / cr
    else:
        cp = R[2, 1] / sr
    pitch = math.atan2(-R[2, 0], cp)
    out = np.empty(3)
    out[0] = roll
    out[1] = pitch
    out[2] = yaw
    return out


@njit
def omega_euler_rates(roll: float, pitch: float) -> np.ndarray:
    """Matrix :math:`\\Omega` mapping body angular velocity to Euler angle rates, (A.15).

    Singular at pitch = +-pi/2 (gimbal lock); the state uses quaternions, so this is only used
    where Euler angles are wanted explicitly (terrain-contact initialization, error dynamics).
    """
    cr, sr = math.cos(roll), math.sin(roll)
    cp, tp = math.cos(pitch), math.tan(pitch)
    W = np.empty((3, 3))
    W[0, 0] = 1.0
    W[0, 1] = sr * tp
    W[0, 2] = cr * tp
    W[1, 0] = 0.0
    W[1, 1] = cr
    W[1, 2] = -sr
    W[2, 0] = 0.0
    W[2, 1] = sr / cp
    W[2, 2] = cr / cp
    return W


@njit
def omega_euler_rates_inv(roll: float, pitch: float) -> np.ndarray:
    """Inverse of (A.15): Euler angle rates to body angular velocity, :math:`\\Omega^{-1}`."""
    cr, sr = math.cos(roll), math.sin(roll)
    cp, sp = math.cos(pitch), math.sin(pitch)
    E = np.zeros((3, 3))
    E[0, 0] = 1.0
    E[0, 2] = -sp
    E[1, 1] = cr
    E[1, 2] = sr * cp
    E[2, 1] = -sr
    E[2, 2] = cr * cp
    return E


@njit(refcount=False)
def quat_normalize_into(o: np.ndarray, out: np.ndarray) -> None:
    """:func:`quat_normalize` of ``o[0:4]`` written to ``out[0:4]`` (``out`` may be ``o``)."""
    n = math.sqrt(o[0] * o[0] + o[1] * o[1] + o[2] * o[2] + o[3] * o[3])
    flip = o[0] / n < 0.0
    for i in range(4):
        out[i] = -(o[i] / n) if flip else o[i] / n


@njit
def quat_normalize(o: np.ndarray) -> np.ndarray:
    """Unit quaternion with non-negative scalar part (a unique representative)."""
    out = np.empty(4)
    quat_normalize_into(o, out)
    return out


@njit(refcount=False)
def quat_rot_entries(w: float, x: float, y: float,
                     z: float) -> tuple[float, float, float, float, float, float, float, float,
                                        float]:
    """Entries R00, R01, .. R22 (row-major) of the rotation matrix of the unit quaternion."""
    return (1.0 - 2.0 * (y * y + z * z), 2.0 * (x * y - w * z), 2.0 * (x * z + w * y),
            2.0 * (x * y + w * z), 1.0 - 2.0 * (x * x + z * z), 2.0 * (y * z - w * x),
            2.0 * (x * z - w * y), 2.0 * (y * z + w * x), 1.0 - 2.0 * (x * x + y * y))


@njit(refcount=False)
def quat_to_rot_into(o: np.ndarray, R: np.ndarray) -> None:
    """:func:`quat_to_rot` of ``o[0:4]`` written to ``R[:3, :3]`` (``R`` may be a 4x4 transform)."""
    e = quat_rot_entries(o[0], o[1], o[2], o[3])
    R[0, 0], R[0, 1], R[0, 2] = e[0], e[1], e[2]
    R[1, 0], R[1, 1], R[1, 2] = e[3], e[4], e[5]
    R[2, 0], R[2, 1], R[2, 2] = e[6], e[7], e[8]


@njit
def quat_to_rot(o: np.ndarray) -> np.ndarray:
    """Rotation matrix of the unit quaternion ``o = [w, x, y, z]``."""
    R = np.empty((3, 3))
    quat_to_rot_into(o, R)
    return R


@njit
def rot_to_quat(R: np.ndarray) -> np.ndarray:
    """Unit quaternion ``[w, x, y, z]`` (w >= 0) of a rotation matrix (Shepperd's method)."""
    tr = R[0, 0] + R[1, 1] + R[2, 2]
    o = np.empty(4)
    if tr > 0.0:
        s = 2.0 * math.sqrt(tr + 1.0)
        o[0] = 0.25 * s
        o[1] = (R[2, 1] - R[1, 2]) / s
        o[2] = (R[0, 2] - R[2, 0]) / s
        o[3] = (R[1, 0] - R[0, 1]) / s
    elif R[0, 0] > R[1, 1] and R[0, 0] > R[2, 2]:
        s = 2.0 * math.sqrt(1.0 + R[0, 0] - R[1, 1] - R[2, 2])
        o[0] = (R[2, 1] - R[1, 2]) / s
        o[1] = 0.25 * s
        o[2] = (R[0, 1] + R[1, 0]) / s
        o[3] = (R[0, 2] + R[2, 0]) / s
    elif R[1, 1] > R[2, 2]:
        s = 2.0 * math.sqrt(1.0 + R[1, 1] - R[0, 0] - R[2, 2])
        o[0] = (R[0, 2] - R[2, 0]) / s
        o[1] = (R[0, 1] + R[1, 0]) / s
        o[2] = 0.25 * s
        o[3] = (R[1, 2] + R[2, 1]) / s
    else:
        s = 2.0 * math.sqrt(1.0 + R[2, 2] - R[0, 0] - R[1, 1])
        o[0] = (R[1, 0] - R[0, 1]) / s
        o[1] = (R[0, 2] + R[2, 0]) / s
        o[2] = (R[1, 2] + R[2, 1]) / s
        o[3] = 0.25 * s
    return quat_normalize(o)


@njit
def quat_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hamilton product ``a * b`` of quaternions ``[w, x, y, z]`` (rotation a then b in body)."""
    out = np.empty(4)
    quat_mul_into(a, b, out)
    return out


@njit
def quat_mul_into(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
    """:func:`quat_mul` of ``a[0:4]``, ``b[0:4]`` written to ``out[0:4]`` (may alias either)."""
    w = a[0] * b[0] - a[1] * b[1] - a[2] * b[2] - a[3] * b[3]
    x = a[0] * b[1] + a[1] * b[0] + a[2] * b[3] - a[3] * b[2]
    y = a[0] * b[2] - a[1] * b[3] + a[2] * b[0] + a[3] * b[1]
    z = a[0] * b[3] + a[1] * b[2] - a[2] * b[1] + a[3] * b[0]
    out[0], out[1], out[2], out[3] = w, x, y, z


@njit
def quat_exp_body(o: np.ndarray, w_body: np.ndarray, dt: float) -> np.ndarray:
    """Orientation after rotating at constant body angular velocity ``w_body`` for ``dt``.

    :math:`o_{k+1} = o_k \\otimes \\exp(\\tfrac{1}{2} \\omega \\Delta t)`; the quaternion form of
    the orientation row of (2.39), exact for constant body rate and free of gimbal lock.
    """
    out = np.empty(4)
    quat_exp_body_into(o, w_body, dt, out)
    return out


@njit
def quat_exp_body_into(o: np.ndarray, w_body: np.ndarray, dt: float, out: np.ndarray) -> None:
    """:func:`quat_exp_body` of ``o[0:4]``, ``w_body[0:3]`` written to ``out[0:4]``.

    ``out`` must not be ``o``.
    """
    ax, ay, az = w_body[0] * dt, w_body[1] * dt, w_body[2] * dt
    a = math.sqrt(ax * ax + ay * ay + az * az)
    if a < SMALL_ANGLE:
        out[0] = 1.0 - a * a / 8.0
        k = 0.5 - a * a / 48.0
    else:
        out[0] = math.cos(0.5 * a)
        k = math.sin(0.5 * a) / a
    out[1] = k * ax
    out[2] = k * ay
    out[3] = k * az
    quat_mul_into(o, out, out)
    quat_normalize_into(out, out)


@njit
def quat_from_euler(roll: float, pitch: float, yaw: float) -> np.ndarray:
    """Quaternion of :func:`euler_to_rot` (same convention, A.9)."""
    cr, sr = math.cos(0.5 * roll), math.sin(0.5 * roll)
    cp, sp = math.cos(0.5 * pitch), math.sin(0.5 * pitch)
    cy, sy = math.cos(0.5 * yaw), math.sin(0.5 * yaw)
    o = np.empty(4)
    o[0] = cy * cp * cr + sy * sp * sr
    o[1] = cy * cp * sr - sy * sp * cr
    o[2] = cy * sp * cr + sy * cp * sr
    o[3] = sy * cp * cr - cy * sp * sr
    return quat_normalize(o)


@njit
def euler_from_quat(o: np.ndarray) -> np.ndarray:
    """Roll, pitch, yaw (3,) of a unit quaternion, via (A.10)-(A.13)."""
    return rot_to_euler(quat_to_rot(o))


@njit
def transform_inverse(T: np.ndarray) -> np.ndarray:
    """Inverse of a 4x4 homogeneous transform (B.3)."""
    Ti = np.eye(4)
    R = T[:3, :3]
    Ti[:3, :3] = R.T
    Ti[:3, 3] = -(R.T @ T[:3, 3])
    return Ti


@njit
def plucker_from_transform(T_a_b: np.ndarray) -> np.ndarray:
    """Plücker motion transform :math:`X_a^b` from the homogeneous transform :math:`T_a^b`.

    (B.2)-(B.10): for ``T_a_b = [[R, p], [0, 1]]`` (frame a's origin at ``p`` in b coordinates)
    this is ``[[R, 0], [skew(p) R, R]]``, so that ``b_v = X @ a_v`` for motion vectors (B.11).
    """
    R = np.ascontiguousarray(T_a_b[:3, :3])
    X = np.zeros((6, 6))
    X[:3, :3] = R
    X[3:, 3:] = R
    X[3:, :3] = skew(T_a_b[:3, 3]) @ R
    return X


@njit
def plucker_force_from_transform(T_a_b: np.ndarray) -> np.ndarray:
    """Force transform :math:`(X_a^b)^{-T}` (B.12): ``b_f = Xf @ a_f``.

    Equals ``[[R, skew(p) R], [0, R]]`` for ``T_a_b = [[R, p], [0, 1]]``.
    """
    R = np.ascontiguousarray(T_a_b[:3, :3])
    X = np.zeros((6, 6))
    X[:3, :3] = R
    X[3:, 3:] = R
    X[:3, 3:] = skew(T_a_b[:3, 3]) @ R
    return X


@njit
def crm(v: np.ndarray) -> np.ndarray:
    """Motion cross-product matrix: ``v x_m m = crm(v) @ m``, (B.14). ``v``: (6,) -> (6, 6)."""
    X = np.zeros((6, 6))
    W = skew(v[:3])
    X[:3, :3] = W
    X[3:, 3:] = W
    X[3:, :3] = skew(v[3:])
    return X


@njit
def crf(v: np.ndarray) -> np.ndarray:
    """Force cross-product matrix: ``v x_f f = crf(v) @ f = -crm(v).T @ f``, (B.15)."""
    return -crm(v).T


@njit
def spatial_inertia(mass: float, com: np.ndarray, I_com: np.ndarray) -> np.ndarray:
    """Spatial inertia (6, 6) of a body about its frame origin, (B.13).

    ``com`` (3,) is the centre of mass in the body frame, ``I_com`` (3, 3) the rotational inertia
    about the centre of mass in body-frame axes.
    """
    C = skew(com)
    Isp = np.zeros((6, 6))
    Isp[:3, :3] = I_com + mass * (C @ C.T)
    Isp[:3, 3:] = mass * C
    Isp[3:, :3] = mass * C.T
    Isp[3:, 3:] = mass * np.eye(3)
    return Isp


@njit
def _quats_to_euler(o: np.ndarray, out: np.ndarray) -> None:
    for k in range(o.shape[0]):
        out[k] = euler_from_quat(o[k])


@njit
def _eulers_to_quat(e: np.ndarray, out: np.ndarray) -> None:
    for k in range(e.shape[0]):
        out[k] = quat_from_euler(e[k, 0], e[k, 1], e[k, 2])


def quats_to_euler(o: np.ndarray) -> np.ndarray:
    """Batch :func:`euler_from_quat`: ``o`` (..., 4) ``[w, x, y, z]`` -> (..., 3) roll/pitch/yaw."""
    o = np.asarray(o, dtype=float)
    flat = np.ascontiguousarray(o.reshape(-1, 4))
    out = np.empty((flat.shape[0], 3))
    _quats_to_euler(flat, out)
    return out.reshape(o.shape[:-1] + (3,))


def eulers_to_quat(e: np.ndarray) -> np.ndarray:
    """Batch :func:`quat_from_euler`: ``e`` (..., 3) -> (..., 4) ``[w, x, y, z]``."""
    e = np.asarray(e, dtype=float)
    flat = np.ascontiguousarray(e.reshape(-1, 3))
    out = np.empty((flat.shape[0], 4))
    _eulers_to_quat(flat, out)
    return out.reshape(e.shape[:-1] + (4,))
