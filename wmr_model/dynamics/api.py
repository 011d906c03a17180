"""Python API of the rigid-body dynamics: ``f(model, data, ...)`` over the compiled kernels.

``data`` is the one workspace of every algorithm (:func:`create_data`, re-exported from
:mod:`wmr_model.kinematics.api`): the same object serves forward kinematics, contact, the
velocity solves and these.
"""

from __future__ import annotations

import numpy as np

from wmr_model.dynamics import crba as _crba
from wmr_model.dynamics import rnea as _rnea
from wmr_model.errors import check_shape
from wmr_model.kinematics.api import Data, create_data
from wmr_model.vehicles.inertia import gravity_of
from wmr_model.vehicles.model import VehicleModel

__all__ = ["Data", "create_data", "gravity_of", "crba", "rnea", "bias_force"]


def _vec(name: str, x: np.ndarray, n: int) -> np.ndarray:
    x = np.ascontiguousarray(x, dtype=float)
    check_shape(name, x.shape, (n,))
    return x


def crba(model: VehicleModel, data: Data, q: np.ndarray) -> np.ndarray:
    """Joint-space inertia ``data.M`` (nv, nv) at state ``q`` (nq,), Algorithm 3."""
    q = _vec("q", q, model.nq)
    _crba.crba(model.parent, model.joint_type, model.axis, model.T0, data.I_frame, q,
               data.T_world, data.Ic, data.M)
    return data.M


def rnea(model: VehicleModel, data: Data, q: np.ndarray, qdot: np.ndarray,
         qddot: np.ndarray, f_ext: np.ndarray | None = None) -> np.ndarray:
    """Inverse dynamics ``data.tau`` (nv,) = M qddot' + c - sum J^T f_ext (Algorithm 4).

    Args:
        q: (nq,); qdot, qddot: (nv,) joint-space velocity and acceleration (2.14).
        f_ext: optional (nf, 6) external spatial forces on each frame in its own coordinates.
    """
    q = _vec("q", q, model.nq)
    qdot = _vec("qdot", qdot, model.nv)
    qddot = _vec("qddot", qddot, model.nv)
    if f_ext is None:
        f_ext = np.zeros((model.nf, 6))
    f_ext = np.ascontiguousarray(f_ext, dtype=float)
    check_shape("f_ext", f_ext.shape, (model.nf, 6))
    _rnea.rnea(model.kinematic_arrays(), data.I_frame, data.gravity, q, qdot, qddot, f_ext,
               data.T_world, data.tau)
    return data.tau


def bias_force(model: VehicleModel, data: Data, q: np.ndarray, qdot: np.ndarray, *,
               fused: bool = False) -> np.ndarray:
    """Joint-space bias force ``data.c`` (nv,): Algorithm 4, or the fused-body (2.89)."""
    q = _vec("q", q, model.nq)
    qdot = _vec("qdot", qdot, model.nv)
    if fused:
        _crba.crba(model.parent, model.joint_type, model.axis, model.T0, data.I_frame, q,
                   data.T_world, data.Ic, data.M)
        _rnea.bias_force_fused(np.ascontiguousarray(data.Ic[0]), data.gravity, q, qdot, data.c)
    else:
        _rnea.bias_force(model.kinematic_arrays(), data.I_frame, data.gravity, q, qdot,
                         data.T_world, data.c)
    return data.c
