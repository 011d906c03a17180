"""IPEM residuals and their covariance over one interval (thesis (3.3)-(3.4), (3.15)-(3.24),
(3.56)-(3.58)).

Poses are ``(..., 7)`` rows ``[qw, qx, qy, qz, x, y, z]``. The residual of an interval is the
measured minus the predicted final pose of the pose sensor, in the package's error convention
(:mod:`wmr_model.kinematics.uncertainty`): ``r = [Log(R_meas R_pred^T); p_meas - p_pred]`` (world
axes), restricted to the selected components (:data:`COMPONENTS`; default x, y, yaw). For a nearly
level vehicle the ``yaw`` component equals the yaw-angle difference.

Covariance (3.21): ``R = Sigma_meas(t) + P(t)`` with ``P(t)`` propagated from
``P(t0) = Sigma_meas(t0)`` by (3.22)-(3.24). Because that recursion is linear in ``P(t0)`` and
``Q'``, :func:`covariance_map` returns its closed form for one predicted trajectory,

.. math:: P(t) = \\Psi_0 P(t_0) \\Psi_0^T + \\Delta t \\sum_k A_k Q' A_k^T,
          \\qquad A_k = \\Phi_{T-1} \\cdots \\Phi_{k+1} G_k,

so the residual covariance for any ``Q'`` (and its derivative, for stochastic calibration) costs
a few small matrix products instead of a new prediction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from wmr_model.errors import ParameterError

__all__ = [
    "COMPONENTS",
    "component_indices",
    "quat_multiply",
    "quat_conjugate",
    "quat_to_matrix",
    "rotation_log",
    "pose_residual",
    "sensor_pose",
    "body_pose_from_sensor",
    "sensor_jacobian",
    "CovarianceMap",
    "covariance_map",
    "residual_covariance",
    "yaw_of",
]

#: Residual component names, indices into the pose error ``[dtheta; dp]`` (world axes).
COMPONENTS = ("rot_x", "rot_y", "yaw", "x", "y", "z")
_ALIASES = {"roll": "rot_x", "pitch": "rot_y", "rot_z": "yaw"}


def component_indices(components: Sequence[str]) -> np.ndarray:
    """Indices (m,) of residual components (:data:`COMPONENTS`, or ``"full"`` for all six)."""
    if isinstance(components, str):
        components = COMPONENTS if components == "full" else components.split(",")
    out = []
    for c in components:
        c = _ALIASES.get(c, c)
        if c not in COMPONENTS:
            raise ParameterError(f"residual component {c!r}: expected one of {list(COMPONENTS)}")
        out.append(COMPONENTS.index(c))
    if len(set(out)) != len(out) or not out:
        raise ParameterError(f"residual components: need distinct names, got {list(components)}")
    return np.array(out, dtype=int)


def quat_multiply(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hamilton product (..., 4) of scalar-first quaternions."""
    aw, ax, ay, az = np.moveaxis(a, -1, 0)
    bw, bx, by, bz = np.moveaxis(b, -1, 0)
    return np.stack([aw * bw - ax * bx - ay * by - az * bz,
                     aw * bx + ax * bw + ay * bz - az * by,
                     aw * by - ax * bz + ay * bw + az * bx,
                     aw * bz + ax * by - ay * bx + az * bw], axis=-1)


def quat_conjugate(q: np.ndarray) -> np.ndarray:
    """Conjugate (inverse of a unit quaternion), (..., 4)."""
    return q * np.array([1.0, -1.0, -1.0, -1.0])


def quat_to_matrix(q: np.ndarray) -> np.ndarray:
    """Rotation matrices (..., 3, 3) of unit quaternions (..., 4) ``[w, x, y, z]``."""
    w, x, y, z = np.moveaxis(q, -1, 0)
    return np.stack([
        np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], -1),
        np.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], -1),
        np.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], -1),
    ], axis=-2)


def _matrix_to_quat(R: np.ndarray) -> np.ndarray:
    from scipy.spatial.transform import Rotation

    xyzw = Rotation.from_matrix(R.reshape(-1, 3, 3)).as_quat()
    return np.concatenate([xyzw[:, 3:], xyzw[:, :3]], axis=1).reshape(R.shape[:-2] + (4,))


def rotation_log(q: np.ndarray) -> np.ndarray:
    """Rotation vectors (..., 3) of unit quaternions (..., 4); angle in [0, pi]."""
    q = np.where(q[..., :1] < 0, -q, q)
    v = q[..., 1:]
    s = np.linalg.norm(v, axis=-1, keepdims=True)
    ang = 2.0 * np.arctan2(s, q[..., :1])
    # small angles: 2 atan2(s, w)/s -> 2/w (exact to O(s^2))
    scale = np.where(s > 1e-12, ang / np.where(s > 1e-12, s, 1.0), 2.0 / q[..., :1])
    return v * scale


def pose_residual(meas: np.ndarray, pred: np.ndarray, idx: np.ndarray | None = None) -> np.ndarray:
    """Residual (3.3)/(3.56) ``[Log(R_meas R_pred^T); p_meas - p_pred]`` (..., 6), selected.

    ``meas``, ``pred`` (..., 7) poses; ``idx`` component indices (:func:`component_indices`).
    """
    meas = np.asarray(meas, dtype=float)
    pred = np.asarray(pred, dtype=float)
    dq = quat_multiply(meas[..., :4], quat_conjugate(pred[..., :4]))
    r = np.concatenate([rotation_log(dq), meas[..., 4:7] - pred[..., 4:7]], axis=-1)
    return r if idx is None else r[..., idx]


def sensor_pose(body: np.ndarray, T_body_sensor: np.ndarray) -> np.ndarray:
    """Sensor pose from body pose, (3.58): ``T_s^w = T_b^w T_s^b`` (..., 7).

    ``T_body_sensor`` (..., 4, 4) pose of the sensor in the body frame (the thesis writes the
    same composition as ``T_s^b T_b^w`` in its own transform convention).
    """
    body = np.asarray(body, dtype=float)
    T = np.asarray(T_body_sensor, dtype=float)
    Rb = quat_to_matrix(body[..., :4])
    p = body[..., 4:7] + np.einsum("...ij,...j->...i", Rb, T[..., :3, 3])
    qs = quat_multiply(body[..., :4], _matrix_to_quat(T[..., :3, :3]))
    return np.concatenate([qs, p], axis=-1)


def body_pose_from_sensor(sensor: np.ndarray, T_body_sensor: np.ndarray) -> np.ndarray:
    """Body pose from a measured sensor pose, (3.57): ``T_b^w = T_s^w (T_s^b)^{-1}`` (..., 7)."""
    sensor = np.asarray(sensor, dtype=float)
    T = np.asarray(T_body_sensor, dtype=float)
    qb = quat_multiply(sensor[..., :4], quat_conjugate(_matrix_to_quat(T[..., :3, :3])))
    Rb = quat_to_matrix(qb)
    p = sensor[..., 4:7] - np.einsum("...ij,...j->...i", Rb, T[..., :3, 3])
    return np.concatenate([qb, p], axis=-1)


def sensor_jacobian(body: np.ndarray, offset: np.ndarray) -> np.ndarray:
    """(6, 6) map of a body pose error to the sensor pose error (world axes).

    ``dtheta_s = dtheta_b``, ``dp_s = dp_b - [R_b o]_x dtheta_b`` with ``o`` (3,) the sensor
    origin in body coordinates.
    """
    u = quat_to_matrix(np.asarray(body[:4], dtype=float)) @ np.asarray(offset, dtype=float)
    J = np.eye(6)
    J[3:6, 0:3] = -np.array([[0, -u[2], u[1]], [u[2], 0, -u[0]], [-u[1], u[0], 0]])
    return J


@dataclass(frozen=True)
class CovarianceMap:
    """Closed form of (3.22)-(3.24) over one predicted trajectory (module docstring).

    Attributes:
        Psi: (6, 6) transition of the initial error to the final time.
        A: (T, 6, 6) ``Phi_{T-1}..Phi_{k+1} G_k``.
        dt: step [s].
        J0, J1: (6, 6) body-to-sensor error maps at the start and the end
            (:func:`sensor_jacobian`).
    """

    Psi: np.ndarray
    A: np.ndarray
    dt: float
    J0: np.ndarray
    J1: np.ndarray

    def process(self, Qprime: np.ndarray) -> np.ndarray:
        """``dt sum_k A_k Q' A_k^T`` (6, 6): the process-noise part of ``P(t)``."""
        return self.dt * np.einsum("kab,bc,kdc->ad", self.A, Qprime, self.A)

    def predicted(self, Sigma0: np.ndarray, Qprime: np.ndarray) -> np.ndarray:
        """Covariance (6, 6) of the predicted final *sensor* pose given ``Sigma_meas(t0)``."""
        J0i = np.linalg.inv(self.J0)
        P0 = J0i @ Sigma0 @ J0i.T
        P = self.Psi @ P0 @ self.Psi.T + self.process(Qprime)
        return self.J1 @ P @ self.J1.T


def covariance_map(R: np.ndarray, v: np.ndarray, dt: float, J0: np.ndarray | None = None,
                   J1: np.ndarray | None = None) -> CovarianceMap:
    """:class:`CovarianceMap` from body rotations ``R`` (T, 3, 3) and body linear velocities
    ``v`` (T, 3) (body coordinates) at the start of each step.

    ``Phi_k = I + F_k dt`` with ``F_k`` of (3.60)-(3.62) in world-axis error coordinates (only
    the block ``-[R_k v_k]_x`` is nonzero) and ``G_k = diag(R_k, R_k)`` (3.63); products of such
    ``Phi`` keep the form ``[[I, 0], [B, I]]``, so ``A_k`` is built from suffix sums of ``B``.
    """
    R = np.asarray(R, dtype=float)
    v = np.asarray(v, dtype=float)
    T = R.shape[0]
    u = np.einsum("kij,kj->ki", R, v)
    B = np.zeros((T, 3, 3))
    B[:, 0, 1], B[:, 0, 2] = u[:, 2], -u[:, 1]
    B[:, 1, 0], B[:, 1, 2] = -u[:, 2], u[:, 0]
    B[:, 2, 0], B[:, 2, 1] = u[:, 1], -u[:, 0]
    B *= dt
    suffix = np.zeros((T, 3, 3))  # sum_{j > k} B_j
    if T > 1:
        suffix[:-1] = np.cumsum(B[::-1], axis=0)[::-1][1:]
    A = np.zeros((T, 6, 6))
    A[:, 0:3, 0:3] = R
    A[:, 3:6, 3:6] = R
    A[:, 3:6, 0:3] = suffix @ R
    Psi = np.eye(6)
    Psi[3:6, 0:3] = B.sum(axis=0)
    I6 = np.eye(6)
    return CovarianceMap(Psi=Psi, A=A, dt=float(dt), J0=I6 if J0 is None else J0,
                         J1=I6 if J1 is None else J1)


def residual_covariance(cmap: CovarianceMap, Sigma0: np.ndarray, Sigma1: np.ndarray,
                        Qprime: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """``R_mu = Sigma_meas(t) + P(t)`` (3.21), restricted to components ``idx`` (m, m)."""
    Rm = Sigma1 + cmap.predicted(Sigma0, Qprime)
    return Rm[np.ix_(idx, idx)]


def yaw_of(q: np.ndarray) -> np.ndarray:
    """Yaw angle (...,) [rad] of quaternions (..., 4) (Z-Y-X Euler, A.10)."""
    w, x, y, z = np.moveaxis(np.asarray(q, dtype=float), -1, 0)
    return np.arctan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))
