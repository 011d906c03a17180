"""Workspace record of the compiled kinematics: the ``data`` of ``f(m, t, d, ...)``.

The model ``m`` (:class:`wmr_model.vehicles.model.KernelModel`) and the terrain ``t``
(:class:`wmr_model.terrain.surface.TerrainArrays`) are constant; everything a kinematic step,
the enhanced-kinematics step (§2.3), the stability margin and the covariance step (§3.3)
write lives in one :class:`KernelData`, made by :func:`kernel_data` (inside the compiled
loops, one per trajectory) or by :func:`wmr_model.kinematics.api.create_data` (Python callers).

Sizes: nf frames, nv = nf + 5 velocity coordinates, nw wheels, nc = nw + ntp contacts (wheels,
then track patches), nr = 3 nc + nhc constraint rows (2.34).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

import wmr_model.kinematics.enhanced as E
from wmr_model._jit import njit
from wmr_model.kinematics.constraints import loop_closure_rows
from wmr_model.kinematics.solve import solve_workspace
from wmr_model.kinematics.uncertainty import covariance_workspace
from wmr_model.kinematics.wheel_collision import CONTACT_WS_WIDTH

__all__ = ["KernelData", "kernel_data", "kernel_data_with", "constraint_rows"]


class KernelData(NamedTuple):
    """Workspace of one trajectory (or one state) of the compiled kinematics.

    Fields written by :func:`wmr_model.kinematics.solve.joint_space_velocity`:
    ``T_world`` (nf, 4, 4) frame-to-world transforms (Algorithm 1); ``T_contact`` (nc, 4, 4)
    contact frames (Figure 2.3); ``dz`` (nc,) contact height errors [m] (2.8);
    ``contact_angle`` (nc,) contact angles [rad] (2.9), for a track patch its fractional
    sub-point coordinate; ``A`` (nr, nv) and ``v`` (nr,) the constraint system (2.34)-(2.36);
    ``qdot`` (nv,) a joint-space velocity buffer for callers (kernels write the ``qdot`` they
    are given).

    Scratch carried from step to step: ``contact_ws`` (nw or 0, CONTACT_WS_WIDTH) collision
    warm start (zero rows: cold search every call); ``solve_ws`` the scratch and kept factor of
    the velocity solve (:func:`wmr_model.kinematics.solve.solve_workspace`, for one known set).

    Enhanced kinematics and stability (:mod:`wmr_model.kinematics.enhanced`): ``Ic``
    (nf, 6, 6) composite inertias; ``f_cg`` (6,) force at the cg (2.47); ``cg`` (3,) cg in
    body coordinates; ``v_b_slip`` (6,) body slip (2.50); ``vc_slip`` (nc, 2) contact slip (2.52);
    ``enhanced_ws`` its scratch (:func:`~wmr_model.kinematics.enhanced.enhanced_workspace` or
    the folded one); ``margin_ws`` the stability-margin scratch. ``cov_ws``: scratch of the
    covariance step (:func:`wmr_model.kinematics.uncertainty.covariance_workspace`).
    """

    T_world: np.ndarray
    T_contact: np.ndarray
    dz: np.ndarray
    contact_angle: np.ndarray
    A: np.ndarray
    v: np.ndarray
    qdot: np.ndarray
    contact_ws: np.ndarray
    solve_ws: tuple
    Ic: np.ndarray
    f_cg: np.ndarray
    cg: np.ndarray
    v_b_slip: np.ndarray
    vc_slip: np.ndarray
    enhanced_ws: tuple
    margin_ws: tuple
    cov_ws: tuple


@njit
def constraint_rows(m):
    """Rows nr = 3 nc + nhc of the stacked constraint system (2.34) of the model ``m``."""
    nc = m.wheel_frame.shape[0] + m.track_frame.shape[0]
    return 3 * nc + m.A_joint.shape[0] + loop_closure_rows(m.loop_closure)


@njit
def kernel_data(m, known, I_frame, fold, warm_contact, residual):
    """A fresh :class:`KernelData` for the model ``m`` and the known set ``known`` (nv,) bool.

    ``I_frame`` (nf, 6, 6) per-frame spatial inertias: with ``fold`` the enhanced scratch
    folds the spinning wheels into their parents
    (:func:`~wmr_model.kinematics.enhanced.folded_enhanced_workspace`), else it is the plain
    one and ``I_frame`` is unused. ``warm_contact``: give the wheels a collision warm-start
    workspace (else zero rows, a cold search every call). ``residual``: the velocity solves
    return ``|A qdot - v|`` (else NaN, cheaper).
    """
    if fold:
        enhanced_ws = E.folded_enhanced_workspace(m.parent, m.jtype, m.axis, m.T0, I_frame)
    else:
        enhanced_ws = E.enhanced_workspace()
    return kernel_data_with(m, known, enhanced_ws, warm_contact, residual)


@njit
def kernel_data_with(m, known, enhanced_ws, warm_contact, residual):
    """:func:`kernel_data` with the enhanced-kinematics scratch ``enhanced_ws`` given (e.g. one
    of :func:`~wmr_model.kinematics.enhanced.folded_workspace_of` on a tree folded once per
    batch)."""
    nf = m.parent.shape[0]
    nw = m.wheel_frame.shape[0]
    nc = nw + m.track_frame.shape[0]
    nv = nf + 5
    nr = constraint_rows(m)
    return KernelData(
        np.zeros((nf, 4, 4)), np.zeros((nc, 4, 4)), np.zeros(nc), np.zeros(nc),
        np.zeros((nr, nv)), np.zeros(nr), np.zeros(nv),
        np.zeros((nw if warm_contact else 0, CONTACT_WS_WIDTH)),
        solve_workspace(nr, known, residual),
        np.zeros((nf, 6, 6)), np.zeros(6), np.zeros(3), np.zeros(6), np.zeros((nc, 2)),
        enhanced_ws, E.margin_workspace(nc), covariance_workspace())
