"""Workspace of the compiled dynamics: :class:`StepData` (:func:`create_step_data`), ``d`` of
the kernels ``f(dm, t, d, ...)``. (The Python API's rigid-body algorithms,
:mod:`wmr_model.dynamics.api`, use the one workspace of every algorithm,
:func:`wmr_model.kinematics.api.create_data`.)

One record, allocated once per trajectory by :func:`create_step_data`, holds every array a
step of :func:`~wmr_model.dynamics.simulate.dynamics_step` writes: the kinematics and contact
frames (Alg. 1, 2.8-2.9), the joint-space inertia and bias force (Alg. 3-4), the constraint
matrix (2.55) and the force balance's scratch (2.75)-(2.88). Sizes: nf frames, nv joint-space
velocities, ncon contacts (nw wheels, then ntp track patches), na actuated joints, nh holonomic
rows, nrow = 3 ncon + na + nh constraint rows.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from wmr_model._jit import njit
from wmr_model.dynamics.actuators import IDEAL
from wmr_model.dynamics.constraints import rows_workspace
from wmr_model.dynamics.crba import crba_workspace
from wmr_model.dynamics.force_balance import workspace
from wmr_model.dynamics.rnea import rnea_workspace
from wmr_model.kinematics.constraints import loop_closure_rows
from wmr_model.kinematics.wheel_collision import CONTACT_WS_WIDTH

__all__ = ["StepData", "create_step_data", "free_columns", "rigid_body_arrays"]


@njit
def rigid_body_arrays(nf, nv):
    """The arrays of Algorithms 1, 3 and 4: ``T_world`` (nf, 4, 4), composite inertias ``Ic``
    (nf, 6, 6), joint-space inertia ``M`` (nv, nv), bias force ``c`` (nv,) and joint-space
    force ``tau`` (nv,), zeroed."""
    return (np.zeros((nf, 4, 4)), np.zeros((nf, 6, 6)), np.zeros((nv, nv)), np.zeros(nv),
            np.zeros(nv))


class StepData(NamedTuple):
    """Per-trajectory workspace of the dynamics step (see the module docstring for sizes).

    ``fbuf``/``ibuf`` are flat buffers from which the arrays sized by the step's number of
    independent rows nI are cut as C-contiguous views; ``fb`` is the force balance's
    :func:`~wmr_model.dynamics.force_balance.workspace`; ``crba_ws``, ``rnea_ws``, ``rows_ws``
    the scratch of the CRBA, the bias force and the independent rows. ``contact_ws`` (nwarm,
    CONTACT_WS_WIDTH) is the warm-start collision workspace of
    :func:`~wmr_model.kinematics.wheel_collision.wheel_contact` and ``fan_frame`` (nwarm, 7, 3)
    that of
    :func:`~wmr_model.dynamics.simulate.warm_wheel_contact`; nwarm = 0 keeps the cold search.
    ``share``, ``dz_model`` (ncon,) are the track patches' load shares and sinkage
    (:func:`~wmr_model.dynamics.track_contact.track_shares`; 1 and 0 for wheels). The
    joint-acceleration solver (:mod:`wmr_model.dynamics.joint_acceleration`) uses ``Minv_tc``
    as its error and ``Lm`` as its Jacobian, and ``contact_jac`` as the ``jc`` of its
    :class:`~wmr_model.dynamics.joint_acceleration.AccelArgs`.
    """

    T_world: np.ndarray  #: (nf, 4, 4) frame-to-world transforms
    Ic: np.ndarray  #: (nf, 6, 6) composite inertias
    M: np.ndarray  #: (nv, nv) joint-space inertia
    c: np.ndarray  #: (nv,) joint-space bias force
    tau: np.ndarray  #: (nv,) joint-space force (unused by the step)
    T_contact: np.ndarray  #: (ncon, 4, 4) contact frames
    dz: np.ndarray  #: (ncon,) contact height errors [m]
    contact_angle: np.ndarray  #: (ncon,) contact angles [rad]
    A: np.ndarray  #: (nrow, nv) constraint matrix (2.55)
    fmodel: np.ndarray  #: (nrow,) model forces of the rows (2.78)
    v_prev: np.ndarray  #: (nrow,) the previous step's row velocities (warm start)
    c_hol: np.ndarray  #: (nh,) holonomic constraint residuals
    J_hol: np.ndarray  #: (nh, nv) their Jacobian
    active: np.ndarray  #: (nrow,) bool: rows in contact
    forced: np.ndarray  #: (nrow,) bool: rows of prescribed velocity
    indep: np.ndarray  #: (nrow,) bool: independent rows (2.66)-(2.68)
    cols: np.ndarray  #: (nv,) bool: columns not set by ideal actuators
    Lm: np.ndarray  #: (nv, nv) Cholesky factor of M
    Minv_tc: np.ndarray  #: (nv,) M^{-1}(tau - c)
    fbuf: np.ndarray  #: flat float buffer of the nI-sized arrays
    ibuf: np.ndarray  #: (4 nrow,) int buffer: row context
    fb: tuple  #: force-balance workspace
    crba_ws: tuple
    rnea_ws: tuple
    rows_ws: tuple
    contact_ws: np.ndarray
    fan_frame: np.ndarray
    share: np.ndarray
    dz_model: np.ndarray
    eye: np.ndarray  #: (nv, nv) identity: the input map of the joint-acceleration solver
    free: np.ndarray  #: (nF,) int: joint-space columns not set by an ideal actuator
    contact_jac: np.ndarray  #: (ncon, 3, 5) each contact's model-force Jacobian (last error)


@njit
def create_step_data(dm, nv):
    """The :class:`StepData` of the dynamics model ``dm`` for ``nv`` joint-space velocities."""
    m = dm.kin
    nf = m.parent.shape[0]
    nw = m.wheel_frame.shape[0]
    ncon = nw + dm.trk.frame.shape[0]
    na = dm.act_joints.shape[0]
    nh = m.A_joint.shape[0] + loop_closure_rows(m.loop_closure)
    nc = 3 * ncon + na + nh
    nwarm = nw if dm.opt.warm_contact and ncon == nw else 0
    nfl = 7 * nc * nv + 4 * nc * nc + 4 * nc + nv
    T_world, Ic, M, c, tau = rigid_body_arrays(nf, nv)
    return StepData(
        T_world, Ic, M, c, tau, np.empty((ncon, 4, 4)), np.empty(ncon), np.empty(ncon),
        np.empty((nc, nv)), np.zeros(nc), np.empty(nc), np.empty(nh), np.empty((nh, nv)),
        np.empty(nc, dtype=np.bool_), np.empty(nc, dtype=np.bool_),
        np.empty(nc, dtype=np.bool_), np.empty(nv, dtype=np.bool_), np.empty((nv, nv)),
        np.empty(nv), np.empty(nfl), np.empty(4 * nc, dtype=np.int64), workspace(nv, max(nc, nv)),
        crba_workspace(nf), rnea_workspace(nf, nv), rows_workspace(nc, nv),
        np.zeros((nwarm, CONTACT_WS_WIDTH)), np.zeros((nwarm, 7, 3)), np.ones(ncon),
        np.zeros(ncon), np.eye(nv), free_columns(dm, nv),
        np.zeros((ncon, 3, 5)))


@njit
def free_columns(dm, nv):
    """The joint-space columns (nF,) not set by an ideal actuator, in ascending order."""
    fixed = np.zeros(nv, dtype=np.bool_)
    for a in range(dm.act_joints.shape[0]):
        if dm.akinds[a] == IDEAL:
            fixed[6 + dm.act_joints[a]] = True
    return np.nonzero(~fixed)[0].astype(np.int64)
