"""Compiled simulation loops: kinematic prediction (§2.2.6) and the unconstrained baseline (§2.5.1).

Each loop runs a whole trajectory inside numba; the batch versions run N trajectories over both
cores (``prange``). They compose the per-step kernels of :mod:`.kernels` and contain no physics of
their own.
"""

from __future__ import annotations

import numpy as np

from wmr_model._jit import njit, prange
from wmr_model.kinematics.kernels import (
    contact_velocity_norms,
    initialize_terrain_contact,
    integrate_euler,
    joint_space_velocity,
    normalize_state,
    state_derivative,
)
from wmr_model.spatial import quat_mul, quat_to_rot

EULER = 0
RK4 = 1


@njit
def simulate_trajectory(parent, jtype, axis, T0, wheel_frame, wheel_radius, A_joint,
                        joint_offset, tkind, tparams, tgrid, q0, known, qdot_cmd, vc_xy, dt,
                        sigma, integrator, q_traj, qdot_traj, vc_norm, dz_traj):
    """Kinematic motion prediction over T steps (Figure 2.6 loop), Euler (2.39) or RK4.

    Parameters (beyond the model/terrain arrays): ``q0`` (nq,); ``known`` (nv,) bool;
    ``qdot_cmd`` (T, nv) known joint-space velocity entries per step (others ignored);
    ``vc_xy`` (T, nw, 2) contact slip velocities per step (zeros for no-slip); ``dt`` [s];
    ``sigma`` Baumgarte gain [1/s] (2.35); ``integrator`` EULER or RK4.
    Outputs: ``q_traj`` (T+1, nq), ``qdot_traj`` (T, nv), ``vc_norm`` (T, nw) contact point
    speeds |v_c| at the start of each step, ``dz_traj`` (T+1, nw) contact height errors.
    """
    nf = parent.shape[0]
    nw = wheel_frame.shape[0]
    nv = nf + 5
    nq = nf + 6
    m = 3 * nw + A_joint.shape[0]
    T_world = np.empty((nf, 4, 4))
    T_contact = np.empty((nw, 4, 4))
    dz = np.empty(nw)
    ang = np.empty(nw)
    A = np.empty((m, nv))
    v = np.empty(m)
    qdot = np.empty(nv)
    q = q0.copy()
    qn = np.empty(nq)
    k1 = np.empty(nq)
    k2 = np.empty(nq)
    k3 = np.empty(nq)
    k4 = np.empty(nq)
    qs = np.empty(nq)
    qd_s = np.empty(nv)
    q_traj[0] = q
    nsteps = qdot_cmd.shape[0]
    for t in range(nsteps):
        joint_space_velocity(parent, jtype, axis, T0, wheel_frame, wheel_radius, A_joint,
                             joint_offset, tkind, tparams, tgrid, q, known, qdot_cmd[t], sigma,
                             vc_xy[t], T_world, T_contact, dz, ang, A, v, qdot)
        dz_traj[t] = dz
        qdot_traj[t] = qdot
        contact_velocity_norms(A, qdot, nw, vc_norm[t])
        if integrator == EULER:
            integrate_euler(q, qdot, dt, qn)
        else:
            state_derivative(q, qdot, k1)
            qs[:] = q + 0.5 * dt * k1
            normalize_state(qs)
            joint_space_velocity(parent, jtype, axis, T0, wheel_frame, wheel_radius, A_joint,
                                 joint_offset, tkind, tparams, tgrid, qs, known, qdot_cmd[t],
                                 sigma, vc_xy[t], T_world, T_contact, dz, ang, A, v, qd_s)
            state_derivative(qs, qd_s, k2)
            qs[:] = q + 0.5 * dt * k2
            normalize_state(qs)
            joint_space_velocity(parent, jtype, axis, T0, wheel_frame, wheel_radius, A_joint,
                                 joint_offset, tkind, tparams, tgrid, qs, known, qdot_cmd[t],
                                 sigma, vc_xy[t], T_world, T_contact, dz, ang, A, v, qd_s)
            state_derivative(qs, qd_s, k3)
            qs[:] = q + dt * k3
            normalize_state(qs)
            joint_space_velocity(parent, jtype, axis, T0, wheel_frame, wheel_radius, A_joint,
                                 joint_offset, tkind, tparams, tgrid, qs, known, qdot_cmd[t],
                                 sigma, vc_xy[t], T_world, T_contact, dz, ang, A, v, qd_s)
            state_derivative(qs, qd_s, k4)
            qn[:] = q + (dt / 6.0) * (k1 + 2.0 * k2 + 2.0 * k3 + k4)
            normalize_state(qn)
        q[:] = qn
        q_traj[t + 1] = q
    # contact height error of the final state (collision detection only)
    joint_space_velocity(parent, jtype, axis, T0, wheel_frame, wheel_radius, A_joint,
                         joint_offset, tkind, tparams, tgrid, q, known, qdot_cmd[nsteps - 1],
                         sigma, vc_xy[nsteps - 1], T_world, T_contact, dz, ang, A, v, qdot)
    dz_traj[nsteps] = dz


@njit(parallel=True)
def simulate_batch(parent, jtype, axis, T0, wheel_frame, wheel_radius, A_joint, joint_offset,
                   tkind, tparams, tgrid, q0, known, qdot_cmd, vc_xy, dt, sigma, integrator,
                   q_traj, qdot_traj, vc_norm, dz_traj):
    """:func:`simulate_trajectory` for N trajectories in parallel.

    Batched shapes: ``q0`` (N, nq), ``qdot_cmd`` (N, T, nv), ``vc_xy`` (N, T, nw, 2); outputs
    (N, T+1, nq), (N, T, nv), (N, T, nw), (N, T+1, nw).
    """
    for n in prange(q0.shape[0]):
        simulate_trajectory(parent, jtype, axis, T0, wheel_frame, wheel_radius, A_joint,
                            joint_offset, tkind, tparams, tgrid, q0[n], known, qdot_cmd[n],
                            vc_xy[n], dt, sigma, integrator, q_traj[n], qdot_traj[n], vc_norm[n],
                            dz_traj[n])


@njit
def simulate_unconstrained(parent, jtype, axis, T0, wheel_frame, wheel_radius, A_joint,
                           joint_offset, tkind, tparams, tgrid, q0, body_velocity, joint_rates,
                           free, dt, max_iter, tol, q_traj, vc_norm, dz_traj):
    """The conventional baseline of §2.5.1: unconstrained motion, then terrain fitting.

    Each step integrates the *nominal* body velocity ``body_velocity`` (T, 6) ``[w; v]`` in body
    coordinates (what the controller assumes on flat ground) and the joint rates
    ``joint_rates`` (T, nj), then re-fits the ``free`` coordinates (z, roll, pitch, passive
    joints) to the terrain with :func:`initialize_terrain_contact`. ``vc_norm`` (T, nw) reports
    the contact point speeds implied by the resulting motion (finite-difference joint-space
    velocity through the wheel Jacobians at the start of the step).
    """
    nf = parent.shape[0]
    nw = wheel_frame.shape[0]
    nv = nf + 5
    nq = nf + 6
    m = 3 * nw + A_joint.shape[0]
    T_world = np.empty((nf, 4, 4))
    T_contact = np.empty((nw, 4, 4))
    dz = np.empty(nw)
    ang = np.empty(nw)
    A = np.empty((m, nv))
    v = np.empty(m)
    qdot = np.empty(nv)
    qdot_fd = np.empty(nv)
    none_known = np.zeros(nv, dtype=np.bool_)
    zeros_xy = np.zeros((nw, 2))
    q = q0.copy()
    qn = np.empty(nq)
    qfit = np.empty(nq)
    q_traj[0] = q
    for t in range(body_velocity.shape[0]):
        # wheel Jacobians at the start of the step (for the implied contact speeds)
        joint_space_velocity(parent, jtype, axis, T0, wheel_frame, wheel_radius, A_joint,
                             joint_offset, tkind, tparams, tgrid, q, none_known, qdot, 0.0,
                             zeros_xy, T_world, T_contact, dz, ang, A, v, qdot)
        dz_traj[t] = dz
        qdot[0:6] = body_velocity[t]
        qdot[6:] = joint_rates[t]
        integrate_euler(q, qdot, dt, qn)
        initialize_terrain_contact(parent, jtype, axis, T0, wheel_frame, wheel_radius, A_joint,
                                   joint_offset, tkind, tparams, tgrid, qn, free, max_iter, tol,
                                   T_world, T_contact, dz, ang, qfit)
        # finite-difference joint-space velocity q -> qfit (body rates in body coordinates)
        _qdot_between(q, qfit, dt, qdot_fd)
        contact_velocity_norms(A, qdot_fd, nw, vc_norm[t])
        q[:] = qfit
        q_traj[t + 1] = q
    dz_traj[body_velocity.shape[0]] = dz


@njit
def _qdot_between(q0, q1, dt, out):
    """Constant joint-space velocity taking q0 to q1 in dt (inverse of :func:`integrate_euler`)."""
    conj = q0[0:4].copy()
    conj[1:] = -conj[1:]
    d = quat_mul(conj, q1[0:4])
    if d[0] < 0.0:
        d = -d
    s = np.sqrt(d[1] * d[1] + d[2] * d[2] + d[3] * d[3])
    if s < 1e-12:
        out[0:3] = 2.0 * d[1:4] / dt
    else:
        ang = 2.0 * np.arctan2(s, d[0])
        out[0:3] = d[1:4] / s * ang / dt
    out[3:6] = quat_to_rot(q0[0:4]).T @ ((q1[4:7] - q0[4:7]) / dt)
    out[6:] = (q1[7:] - q0[7:]) / dt
