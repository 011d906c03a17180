"""Linearized uncertainty propagation of predicted poses (Seegmiller 2014, §3.2.1, §3.3.2).

Pose-error convention (used everywhere in the package)
------------------------------------------------------

A 6-D pose error ``dx = [dtheta; dp]`` (rotation first, like spatial vectors ``[w; v]`` and the
state ``q = [o; r; theta]``):

* ``dtheta`` (3,) is a rotation about the **fixed world axes**: the true orientation is
  :math:`R = \\mathrm{Exp}([\\delta\\theta]_\\times) \\hat R` (a left perturbation);
* ``dp`` (3,) is the position error in world coordinates: :math:`r = \\hat r + \\delta p`.

A pose covariance ``P`` (6, 6) is ``E[dx dx^T]`` in this order. ROS ``PoseWithCovariance``
uses the same fixed-axis rotation error but orders ``(x, y, z, rot_x, rot_y, rot_z)``;
:func:`to_ros_pose_covariance` only permutes the blocks.

Error dynamics
--------------

For the kinematic state equation :math:`\\dot q = V(q) \\dot q'` (3.55) with noise ``w`` (6,)
added to the body twist ``[w; v]`` (body coordinates), the linearized error dynamics
(3.9)-(3.11) in the coordinates above are

.. math::

    F = \\begin{bmatrix} 0 & 0 \\\\ -[R_b^w v_b]_\\times & 0 \\end{bmatrix}, \\qquad
    G = \\begin{bmatrix} R_b^w & 0 \\\\ 0 & R_b^w \\end{bmatrix}

This is (3.60)-(3.63) after the change of rotation coordinates: the thesis' closed form
:math:`F([2],[1]) = -R [v]_\\times \\Omega^{-1}` is for Euler-angle errors; with body-axis
errors it is :math:`-R [v]_\\times`, and with world-axis errors
:math:`-R [v]_\\times R^T = -[R v]_\\times`, while the rotation block :math:`F([1],[1])`
vanishes. ``G = V(q)`` restricted to the pose rows (3.63). The discrete propagation is
(3.22)-(3.24): :math:`P_k = \\Phi P_{k-1} \\Phi^T + G Q' G^T \\Delta t`,
:math:`\\Phi = I + F \\Delta t`.

``Q'`` (6, 6) [(rad/s)^2 s, (m/s)^2 s] is the spectral density of the body-twist noise; a
discrete simulation reproduces it by adding, each step, a sample with covariance
``Q' / dt`` to the body twist. It is parametrized by its Cholesky factor ``Q' = U^T U`` with
``U`` upper triangular (3.40)-(3.41); the 21 entries have stable names
``noise.U.<a>_<b>`` over the twist components ``wx wy wz vx vy vz`` (:func:`qprime_names`).
"""

from __future__ import annotations

import math

import numpy as np

from wmr_model._jit import njit
from wmr_model.errors import ParameterError, ShapeError
from wmr_model.spatial import quat_to_rot

__all__ = [
    "TWIST_COMPONENTS",
    "error_dynamics",
    "propagate_covariance",
    "propagate_pose_covariance",
    "covariance_workspace",
    "qprime_from_cholesky",
    "cholesky_from_qprime",
    "qprime_names",
    "qprime_from_parameters",
    "pose_error",
    "to_ros_pose_covariance",
    "from_ros_pose_covariance",
    "check_covariance",
]

#: Names of the body-twist components, in the order of the joint-space velocity's body part.
TWIST_COMPONENTS = ("wx", "wy", "wz", "vx", "vy", "vz")

# ROS order (x, y, z, rot_x, rot_y, rot_z) as indices into ours ([rot; pos]).
_ROS_FROM_OURS = np.array([3, 4, 5, 0, 1, 2])


@njit(refcount=False)
def error_dynamics(Rb, v_b, F, G):
    """Jacobians F (3.60)-(3.62) and G (3.63) of the pose error (world-axis convention).

    ``Rb`` (3, 3) body orientation :math:`R_b^w`; ``v_b`` (3,) body linear velocity in body
    coordinates. Writes ``F`` (6, 6) and ``G`` (6, 6) (see the module docstring).
    """
    F[:, :] = 0.0
    G[:, :] = 0.0
    u0 = Rb[0, 0] * v_b[0] + Rb[0, 1] * v_b[1] + Rb[0, 2] * v_b[2]
    u1 = Rb[1, 0] * v_b[0] + Rb[1, 1] * v_b[1] + Rb[1, 2] * v_b[2]
    u2 = Rb[2, 0] * v_b[0] + Rb[2, 1] * v_b[1] + Rb[2, 2] * v_b[2]
    # -[u]_x in rows 3..5, columns 0..2
    F[3, 1] = u2
    F[3, 2] = -u1
    F[4, 0] = -u2
    F[4, 2] = u0
    F[5, 0] = u1
    F[5, 1] = -u0
    for r in range(3):
        for c in range(3):
            G[r, c] = Rb[r, c]
            G[3 + r, 3 + c] = Rb[r, c]


@njit
def propagate_covariance(P, F, G, Qprime, dt, out, ws=None):
    """One discrete covariance step, (3.22)-(3.24).

    .. math:: P_k = \\Phi P_{k-1} \\Phi^T + G Q' G^T \\Delta t, \\quad \\Phi = I + F \\Delta t

    ``P`` (6, 6) previous covariance, ``F``, ``G`` (6, 6) at the start of the step, ``Qprime``
    (6, 6) spectral density, ``dt`` [s]; writes ``out`` (6, 6) (may alias ``P``), symmetrized.
    ``ws``: optional scratch from :func:`covariance_workspace` (allocated when omitted; the
    simulation loops create one per trajectory).
    """
    if ws is None:
        _propagate_covariance(P, F, G, Qprime, dt, out, covariance_workspace())
    else:
        _propagate_covariance(P, F, G, Qprime, dt, out, ws)


@njit
def covariance_workspace():
    """Scratch of :func:`propagate_covariance`: three (6, 6) arrays."""
    return (np.empty((6, 6)), np.empty((6, 6)), np.empty((6, 6)))


@njit(refcount=False)
def _propagate_covariance(P, F, G, Qprime, dt, out, ws):
    """:func:`propagate_covariance` with its scratch ``ws`` (no allocation here)."""
    # Small fixed-size products in loops (no temporaries, no BLAS call per step):
    # Pn = Phi P Phi^T + G Q' G^T dt with Phi = I + F dt.
    PhiP, GQ, Pn = ws
    for i in range(6):
        for j in range(6):
            a = P[i, j]
            g = 0.0
            for k in range(6):
                a += F[i, k] * dt * P[k, j]
                g += G[i, k] * Qprime[k, j]
            PhiP[i, j] = a
            GQ[i, j] = g
    for i in range(6):
        for j in range(6):
            a = PhiP[i, j]
            g = 0.0
            for k in range(6):
                a += PhiP[i, k] * F[j, k] * dt
                g += GQ[i, k] * G[j, k]
            Pn[i, j] = a + g * dt
    for i in range(6):
        for j in range(i, 6):
            s = 0.5 * (Pn[i, j] + Pn[j, i])
            out[i, j] = s
            out[j, i] = s


@njit(refcount=False)
def _f_row_entries(r, u0, u1, u2):
    """Columns and values of the two nonzero entries of row ``3 + r`` of F (:func:
    `error_dynamics`), columns ascending: ``-[u]_x`` has rows (0, u2, -u1), (-u2, 0, u0),
    (u1, -u0, 0)."""
    if r == 0:
        return 1, u2, 2, -u1
    if r == 1:
        return 0, -u2, 2, u0
    return 0, u1, 1, -u0


@njit(refcount=False)
def propagate_pose_covariance(P, Rb, v_b, Qprime, dt, out, ws):
    """:func:`error_dynamics` followed by :func:`propagate_covariance`, without forming F, G.

    One discrete step (3.22)-(3.24) for the pose error of the kinematic state equation, using
    the structure of F (six nonzeros, ``-[R_b v_b]_x`` in rows 3..5, columns 0..2) and G
    (block-diagonal ``R_b``): the same sums as the general kernel in the same order with its
    exact zero terms left out, so the result is the general kernel's (equal values; at most the
    sign of an exact zero differs). About a third of the general kernel's cost; the simulation
    loops use this. ``P`` (6, 6), ``Rb`` (3, 3), ``v_b`` (3,), ``Qprime`` (6, 6), ``dt`` [s];
    writes ``out`` (6, 6) (may alias ``P``); ``ws`` from :func:`covariance_workspace`.
    """
    PhiP, GQ, Pn = ws
    u0 = Rb[0, 0] * v_b[0] + Rb[0, 1] * v_b[1] + Rb[0, 2] * v_b[2]
    u1 = Rb[1, 0] * v_b[0] + Rb[1, 1] * v_b[1] + Rb[1, 2] * v_b[2]
    u2 = Rb[2, 0] * v_b[0] + Rb[2, 1] * v_b[1] + Rb[2, 2] * v_b[2]
    # PhiP = P + F dt P (rows 0..2 of F are zero), GQ = G Q' (G block-diagonal R_b)
    for i in range(6):
        b = 0 if i < 3 else 3
        if i >= 3:
            ka, fa, kb, fb = _f_row_entries(i - 3, u0, u1, u2)
        for j in range(6):
            a = P[i, j]
            if i >= 3:
                a += fa * dt * P[ka, j]
                a += fb * dt * P[kb, j]
            PhiP[i, j] = a
            g = 0.0
            for k in range(3):
                g += Rb[i - b, k] * Qprime[b + k, j]
            GQ[i, j] = g
    # Pn = PhiP + PhiP (F dt)^T + GQ G^T dt
    for j in range(6):
        b = 0 if j < 3 else 3
        if j >= 3:
            ka, fa, kb, fb = _f_row_entries(j - 3, u0, u1, u2)
        for i in range(6):
            a = PhiP[i, j]
            if j >= 3:
                a += PhiP[i, ka] * fa * dt
                a += PhiP[i, kb] * fb * dt
            g = 0.0
            for k in range(3):
                g += GQ[i, b + k] * Rb[j - b, k]
            Pn[i, j] = a + g * dt
    for i in range(6):
        for j in range(i, 6):
            s = 0.5 * (Pn[i, j] + Pn[j, i])
            out[i, j] = s
            out[j, i] = s


def qprime_from_cholesky(U: np.ndarray) -> np.ndarray:
    """Spectral density from its Cholesky factor, (3.40): ``Q' = U^T U``.

    ``U`` (n, n) upper triangular (entries below the diagonal must be zero).
    """
    U = np.asarray(U, dtype=float)
    if U.ndim != 2 or U.shape[0] != U.shape[1]:
        raise ShapeError(f"U: expected a square (n, n) matrix, got {U.shape}")
    if not np.all(np.isfinite(U)):
        raise ParameterError("U: must be finite")
    low = np.tril(U, -1)
    if np.any(low != 0.0):
        i, j = np.argwhere(low != 0.0)[0]
        raise ParameterError(f"U: must be upper triangular (3.40); U[{i}, {j}] = {U[i, j]}")
    return U.T @ U


def cholesky_from_qprime(Q: np.ndarray) -> np.ndarray:
    """Upper-triangular ``U`` with ``U^T U = Q`` (3.41) for a symmetric positive semidefinite Q.

    Components with zero variance get zero rows and columns (noise on some twist components
    only); the rest must be positive definite, else give ``U`` directly.
    """
    Q = check_covariance(Q, "Qprime")
    n = Q.shape[0]
    idx = np.flatnonzero(np.diag(Q) > 0.0)
    U = np.zeros((n, n))
    if idx.size:
        try:
            L = np.linalg.cholesky(Q[np.ix_(idx, idx)])
        except np.linalg.LinAlgError:
            raise ParameterError("Qprime: singular on its nonzero-variance components; "
                                 "give the Cholesky factor U instead") from None
        U[np.ix_(idx, idx)] = L.T
    return U


def qprime_names(components: tuple[str, ...] = TWIST_COMPONENTS) -> list[str]:
    """Stable parameter names ``noise.U.<a>_<b>`` of the upper-triangular factor (3.41).

    Row-major upper triangle, the order of ``vec`` in (3.30): ``noise.U.wx_wx``,
    ``noise.U.wx_wy``, ..., ``noise.U.vz_vz`` (21 names for the body twist).
    """
    n = len(components)
    return [f"noise.U.{components[i]}_{components[j]}" for i in range(n) for j in range(i, n)]


def qprime_from_parameters(values: dict[str, float],
                           components: tuple[str, ...] = TWIST_COMPONENTS) -> np.ndarray:
    """``Q'`` (n, n) from named Cholesky entries (:func:`qprime_names`); missing entries are 0.

    Unknown names raise :class:`~wmr_model.errors.ParameterError` listing the valid ones.
    """
    names = qprime_names(components)
    index = {}
    n = len(components)
    k = 0
    for i in range(n):
        for j in range(i, n):
            index[names[k]] = (i, j)
            k += 1
    U = np.zeros((n, n))
    for name, val in values.items():
        if name not in index:
            raise ParameterError(f"{name}: not a Q' Cholesky parameter; expected one of "
                                 f"{names[0]} .. {names[-1]}")
        v = float(val)
        if not math.isfinite(v):
            raise ParameterError(f"{name}: must be finite, got {val}")
        U[index[name]] = v
    return U.T @ U


def check_covariance(P: np.ndarray, name: str, n: int = 6) -> np.ndarray:
    """Validate a symmetric positive semidefinite (n, n) matrix; returns a float copy."""
    P = np.array(P, dtype=float)
    if P.shape != (n, n):
        raise ShapeError(f"{name}: expected shape ({n}, {n}), got {P.shape}")
    if not np.isfinite(P).all():
        raise ParameterError(f"{name}: must be finite")
    absP = np.abs(P)
    scale = max(1.0, float(absP.max()))
    # np.allclose(P, P.T, atol=1e-12 scale) (its rtol 1e-5) without its generic overhead
    if not (np.abs(P - P.T) <= 1e-12 * scale + 1e-5 * absP.T).all():
        raise ParameterError(f"{name}: must be symmetric")
    lam = float(np.linalg.eigvalsh(P).min())
    if lam < -1e-12 * scale:
        raise ParameterError(f"{name}: must be positive semidefinite, "
                             f"smallest eigenvalue {lam:.3g}")
    return 0.5 * (P + P.T)


def _rot_log(R: np.ndarray) -> np.ndarray:
    """Rotation vector (3,) of a rotation matrix (inverse of Rodrigues' formula)."""
    c = max(-1.0, min(1.0, 0.5 * (np.trace(R) - 1.0)))
    a = math.acos(c)
    w = np.array([R[2, 1] - R[1, 2], R[0, 2] - R[2, 0], R[1, 0] - R[0, 1]])
    if a < 1e-8:  # small-angle series: w / 2 is exact to O(a^3)
        return 0.5 * w
    if math.pi - a < 1e-6:  # near pi: axis from the symmetric part
        B = 0.5 * (R + np.eye(3))
        k = int(np.argmax(np.diag(B)))
        axis = B[:, k] / math.sqrt(B[k, k])
        if axis @ w < 0:
            axis = -axis
        return a * axis
    return a / (2.0 * math.sin(a)) * w


def pose_error(q_ref: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Pose error ``[dtheta; dp]`` (..., 6) of states ``q`` relative to ``q_ref`` (..., nq).

    ``dtheta = Log(R R_ref^T)`` (world axes), ``dp = r - r_ref`` (world), the convention of the
    module docstring. Broadcasts over leading axes.
    """
    q_ref = np.asarray(q_ref, dtype=float)
    q = np.asarray(q, dtype=float)
    shape = np.broadcast_shapes(q_ref.shape[:-1], q.shape[:-1])
    a = np.broadcast_to(q_ref[..., :7], shape + (7,)).reshape(-1, 7)
    b = np.broadcast_to(q[..., :7], shape + (7,)).reshape(-1, 7)
    out = np.empty((a.shape[0], 6))
    for i in range(a.shape[0]):
        R0 = quat_to_rot(np.ascontiguousarray(a[i, 0:4]))
        R1 = quat_to_rot(np.ascontiguousarray(b[i, 0:4]))
        out[i, 0:3] = _rot_log(R1 @ R0.T)
        out[i, 3:6] = b[i, 4:7] - a[i, 4:7]
    return out.reshape(shape + (6,))


def to_ros_pose_covariance(P: np.ndarray) -> np.ndarray:
    """ROS ``PoseWithCovariance.covariance`` layout: (..., 6, 6) -> (..., 36).

    Row-major 6x6 in the order ``(x, y, z, rot_x, rot_y, rot_z)``, rotation about the fixed
    (world/parent) axes - the same error definition as ours, so only the blocks are permuted.
    """
    P = np.asarray(P, dtype=float)
    if P.shape[-2:] != (6, 6):
        raise ShapeError(f"P: expected shape (..., 6, 6), got {P.shape}")
    idx = _ROS_FROM_OURS
    return P[..., idx[:, None], idx[None, :]].reshape(P.shape[:-2] + (36,))


def from_ros_pose_covariance(c: np.ndarray) -> np.ndarray:
    """Inverse of :func:`to_ros_pose_covariance`: (..., 36) -> (..., 6, 6) in our order."""
    c = np.asarray(c, dtype=float)
    if c.shape[-1] != 36:
        raise ShapeError(f"covariance: expected shape (..., 36), got {c.shape}")
    M = c.reshape(c.shape[:-1] + (6, 6))
    inv = np.argsort(_ROS_FROM_OURS)
    return M[..., inv[:, None], inv[None, :]]
