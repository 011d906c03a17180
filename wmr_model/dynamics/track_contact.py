"""Track patches as contacts of the dynamics (thesis §4.2 with the contact models of §2.4.3).

A track patch (:mod:`wmr_model.vehicles.tracks`) enters the force balance exactly like a wheel:
three rows of the constraint matrix (2.55), the velocity ``v_c`` of the *belt material* at its
contact point in contact coordinates (:func:`wmr_model.kinematics.constraints.track_point_jacobian`:
the rigid-body part plus the belt sliding over the track frame, the contact surface motion of
seed 003), and a contact model (2.71) evaluated from ``v_c``, a "rolling speed" and Δz. The
rolling speed of a patch is the belt surface speed ``R w = r_d theta_dot_s`` (``r_d`` the drive
radius, ``theta_dot_s`` the drive joint rate): with the belt term ``-r_d`` on the contact x axis
(the belt tangent), ``V_x = v_x + R w`` is the velocity of the track frame's point along the
belt, so the slip ratio ``s = -v_x / V_x`` and slip angle ``atan(v_y / V_x)`` of (C.10)-(C.12)
are those of the belt relative to the ground.

Load sharing (support independent of the number of patches)
-----------------------------------------------------------
The belt of seed 003 is non-deformable, so a track supports the vehicle as one compliant body:
its contact parameters describe the whole track (:func:`wmr_model.contact.models.contact_setup`)
and each patch carries a share of the whole-track force law, evaluated at the patch's contact
point velocity and at its *mean* penetration over the belt length it has below the surface,

.. math:: \\mathbf f_k = \\sigma_k\\, \\mathbf f_{track}(\\mathbf v_{c,k}, R\\omega,
    -P_k / l_k), \\qquad \\sigma_k = \\frac{l_k}{\\sum_{j \\in track} l_j}

with ``l_k`` the length of the patch's belt below the terrain surface and ``P_k`` the integral
of the penetration along it (sub-points of :mod:`wmr_model.vehicles.tracks`, linear between them:
:func:`patch_contact_length`). The shares of a track in contact sum to 1, so its slip gains,
rolling resistance and friction are those of the whole track; for a normal force linear in
penetration, ``f = K p``, the track carries ``K`` times its mean penetration over its contact
length, a uniform (Winkler) foundation of modulus ``K / l`` per metre of belt. Neither depends on
how the belt is cut into patches (Absolem at rest sinks the same with 10, 20 or 40 patches per
belt), and a tilted belt gets the foundation's restoring moment. Every parameter of the law
(normal stiffness and damping, slip gains, rolling resistance, a contact length or width) is
thereby scaled by ``sigma_k``. On stair nosings the few patches in contact share the whole
track's law (a rigid belt bridging the edges). ``sigma_k`` and the mean penetration are
continuous in the state (0 at touchdown); a patch clear of the terrain has ``l_k = 0`` and
carries no force. Shares and penetrations are held for the step (like A, from the state at its
start); the penetration then changes at the patch's normal velocity over the step (as a wheel's,
(2.71)).

ICR friction directions (seed 003 §IV-D, Fig. 2; Martínez et al.)
-----------------------------------------------------------------
With ``friction_directions="icr"`` each patch's longitudinal axis is the tangent, at its contact
point, of the circle about the vehicle's instantaneous centre of rotation (ICR) implied by the
commanded belt speeds, and the belt moves along that tangent at its full speed (seed 003 sets the
contact surface motion along this friction direction). The commanded speeds ``V_t = r_d u`` of
the tracks at lateral offsets ``y_t`` (body frame) give, by least squares of ``V_t = v - w y_t``
(differential drive; tracks carried by the body frame, flippers follow their main track), the
body speed ``v`` and yaw rate ``w``; Martínez et al.'s steering
efficiency ``chi`` in (0, 1] scales the yaw rate, ``w_icr = chi w`` (chi = 1: a geometrically
equal differential-drive vehicle; chi < 1: the ICRs of the tracks lie outside the belts, a wider
effective track). The ICR is the body-frame point ``(x_icr, v / w_icr, 0)``; the longitudinal axis
of a patch at ``p`` is ``z_body x (p - ICR)`` projected onto the contact plane and oriented along
the belt's forward direction; the lateral axis completes the frame. Straight commands (ICR
radius beyond :data:`ICR_MAX_RADIUS`) and zero commands keep the belt-aligned axes.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from wmr_model._jit import njit
from wmr_model.errors import ParameterError
from wmr_model.kinematics.constraints import track_point_jacobian
from wmr_model.kinematics.track_collision import _patch_height_error
from wmr_model.vehicles.model import VehicleModel
from wmr_model.vehicles.tree import forward_kinematics

__all__ = ["ICR_MAX_RADIUS", "FRICTION_DIRECTIONS", "patch_contact_length", "track_shares",
           "icr_point", "icr_contact_frames", "assemble_track_rows", "icr_map",
           "contact_drive", "check_friction_directions"]

#: ICR distance [m] beyond which a command counts as straight (belt-aligned axes): 1 km turns
#: the axes of a 1 m long belt by less than 1e-3 rad.
ICR_MAX_RADIUS = 1e3
#: Friction-direction options of :func:`wmr_model.dynamics.simulate.simulate_dynamics`.
FRICTION_DIRECTIONS = ("belt", "icr")


@njit
def patch_contact_length(tkind, tparams, tgrid, T, path_k, fvals):
    """Penetrating belt length ``l`` [m] of a patch and the integral ``P`` [m^2] of its
    penetration along the belt; returns ``(l, P, p_max)`` with p_max the deepest penetration.

    The sub-points' contact height errors (edge-corrected (2.8),
    :func:`wmr_model.kinematics.track_collision._patch_height_error`) go to ``fvals`` (M,); along
    each of the M - 1 belt segments the penetration ``max(0, -Δz)`` is the linear
    interpolation between its ends (exact where a segment crosses the surface).
    ``T`` (4, 4): the track frame; ``path_k`` (M, 6).
    """
    M = path_k.shape[0]
    pmax = 0.0
    for j in range(M):
        fvals[j] = _patch_height_error(tkind, tparams, tgrid, T, path_k[j])[0]
        pmax = max(pmax, -fvals[j])
    L = 0.0
    P = 0.0
    for j in range(M - 1):
        a = -fvals[j]
        b = -fvals[j + 1]
        if a <= 0.0 and b <= 0.0:
            continue
        d0 = path_k[j + 1, 0] - path_k[j, 0]
        d1 = path_k[j + 1, 1] - path_k[j, 1]
        d2 = path_k[j + 1, 2] - path_k[j, 2]
        seg = math.sqrt(d0 * d0 + d1 * d1 + d2 * d2)
        if a > 0.0 and b > 0.0:
            L += seg
            P += 0.5 * seg * (a + b)
        else:
            p = max(a, b)
            f = p / (abs(a) + abs(b))  # part of the segment below the surface
            L += seg * f
            P += 0.5 * seg * f * p
    return L, P, pmax


@njit
def track_shares(trk, t, T_world, nw, dz, share, dz_model):
    """Load shares and model penetrations of the contacts (module docstring).

    ``trk``: the :class:`~wmr_model.dynamics.model.TrackData`; ``t``: the terrain record
    (:class:`~wmr_model.terrain.surface.TerrainArrays`); ``T_world`` (nf, 4, 4).

    Writes ``share`` (nc,): 1 for wheels, ``l_k / sum_t l_j`` for patch k of track t; and
    ``dz_model`` (nc,): the Δz the contact model sees, ``dz`` (nc,) for wheels and clear
    patches, ``-P_k / l_k`` (minus the mean penetration over the patch's contact length) for
    patches in contact (:func:`patch_contact_length`).
    """
    track_frame, track_path, track_of = trk.frame, trk.path, trk.of
    ntp = track_of.shape[0]
    tot = np.zeros(trk.nt)
    fvals = np.empty(track_path.shape[1])
    for k in range(nw):
        share[k] = 1.0
        dz_model[k] = dz[k]
    for k in range(ntp):
        c = nw + k
        L, P, _ = patch_contact_length(t.kind, t.params, t.grid, T_world[track_frame[k]],
                                       track_path[k], fvals)
        share[c] = L
        dz_model[c] = -P / L if L > 0.0 else dz[c]
        tot[track_of[k]] += L
    for k in range(ntp):
        lt = tot[track_of[k]]
        share[nw + k] = share[nw + k] / lt if lt > 0.0 else 0.0


@njit
def icr_point(icr_map, u):
    """ICR of the commanded motion in the body frame: ``(straight, x, y)``.

    ``icr_map`` (3, na): rows map the commands ``u`` (na,) to ``v`` [m/s] and the steered yaw
    rate ``w_icr`` [rad/s]; row 2 holds ``x_icr`` in its first entry. ``straight`` is True for
    straight (or zero) commands, see :data:`ICR_MAX_RADIUS`.
    """
    v = 0.0
    w = 0.0
    for a in range(u.shape[0]):
        v += icr_map[0, a] * u[a]
        w += icr_map[1, a] * u[a]
    if abs(w) * ICR_MAX_RADIUS <= abs(v) or w == 0.0:
        return True, 0.0, 0.0
    return False, icr_map[2, 0], v / w


@njit
def icr_contact_frames(T_world, T_contact, nw, ntp, xi, yi):
    """Rotate the patches' contact axes about their normals onto the ICR circles (in place).

    For patch k with contact point ``p``, normal ``n`` and belt-aligned axis ``x_c``: the new x
    axis is ``t = z_b x (p - c)`` (``c`` the ICR ``(xi, yi, 0)`` of the body frame in world
    coordinates, ``z_b`` the body z axis) projected onto the plane normal to ``n``, normalized
    and flipped to ``t . x_c >= 0``; the new y axis is ``n x t``. A point at the ICR keeps its
    axes.
    """
    R = T_world[0, :3, :3]
    cx = T_world[0, 0, 3] + R[0, 0] * xi + R[0, 1] * yi
    cy = T_world[0, 1, 3] + R[1, 0] * xi + R[1, 1] * yi
    cz = T_world[0, 2, 3] + R[2, 0] * xi + R[2, 1] * yi
    zb0, zb1, zb2 = R[0, 2], R[1, 2], R[2, 2]
    for k in range(ntp):
        T = T_contact[nw + k]
        d0 = T[0, 3] - cx
        d1 = T[1, 3] - cy
        d2 = T[2, 3] - cz
        t0 = zb1 * d2 - zb2 * d1
        t1 = zb2 * d0 - zb0 * d2
        t2 = zb0 * d1 - zb1 * d0
        n0, n1, n2 = T[0, 2], T[1, 2], T[2, 2]
        s = t0 * n0 + t1 * n1 + t2 * n2
        t0 -= s * n0
        t1 -= s * n1
        t2 -= s * n2
        m = math.sqrt(t0 * t0 + t1 * t1 + t2 * t2)
        if m < 1e-12:
            continue
        if t0 * T[0, 0] + t1 * T[1, 0] + t2 * T[2, 0] < 0.0:
            m = -m
        t0 /= m
        t1 /= m
        t2 /= m
        T[0, 0] = t0
        T[1, 0] = t1
        T[2, 0] = t2
        T[0, 1] = n1 * t2 - n2 * t1
        T[1, 1] = n2 * t0 - n0 * t2
        T[2, 1] = n0 * t1 - n1 * t0


@njit
def assemble_track_rows(m, trk, T_world, T_contact, contact_angle, nw, A):
    """Rows ``3(nw + k) .. 3(nw + k) + 2`` of ``A`` (nc, nv): patch k's belt-point Jacobian.

    ``m``: the :class:`~wmr_model.vehicles.model.KernelModel`; ``trk``: the
    :class:`~wmr_model.dynamics.model.TrackData` (``trk.icr``, ``trk.contact_radius`` below).

    Belt-aligned axes: :func:`~wmr_model.kinematics.constraints.track_point_jacobian` as is (its
    belt term is ``-r_d`` on the x axis, the belt tangent). ``icr``: the axes were turned onto
    the ICR circle (:func:`icr_contact_frames`), and the belt moves along the new x axis at its
    full speed (seed 003 §IV-C/D): the drive column's belt term is replaced by ``(-r_d, 0, 0)``
    (``r_d`` = ``contact_radius[nw + k]``).
    """
    track_frame, track_drive, contact_radius = trk.frame, trk.drive, trk.contact_radius
    ntp = track_frame.shape[0]
    nv = A.shape[1]
    blk = np.empty((3, nv))
    belt = np.empty(3)
    for k in range(ntp):
        track_point_jacobian(m, (track_frame, track_drive, trk.path), T_world, T_contact,
                             contact_angle, nw, k, belt, blk)
        if trk.icr:
            col = 5 + track_drive[k]
            for r in range(3):
                blk[r, col] -= belt[r]
            blk[0, col] -= contact_radius[nw + k]
        r0 = 3 * (nw + k)
        for r in range(3):
            for j in range(nv):
                A[r0 + r, j] = blk[r, j]


def contact_drive(model: VehicleModel) -> tuple[np.ndarray, np.ndarray]:
    """Rolling radius (nc,) [m] and the joint (nc,) whose rate times it is the rolling speed:
    wheels' radius and joint; patches' drive radius ``|b|`` and drive joint."""
    M = model.track_path.shape[1]
    r = np.concatenate([model.wheel_radius,
                        np.linalg.norm(model.track_path[:, M // 2, 3:6], axis=1)])
    j = np.concatenate([model.wheel_frame - 1, model.track_drive - 1]).astype(np.int64)
    return np.ascontiguousarray(r, dtype=float), np.ascontiguousarray(j)


def icr_map(model: VehicleModel, steering_efficiency: float = 1.0,
            icr_x: float = 0.0) -> np.ndarray:
    """(3, na) map of :func:`icr_point`: commands -> (v, w_icr), and ``x_icr`` [m].

    Fits ``V_t = v - w y_t`` over the tracks carried by the body frame (all tracks if none
    is; flippers follow their main track) by least squares (``V_t = r_d u_a`` with ``a`` the
    actuator of the track's drive joint, ``y_t`` the mean lateral offset of the track's patches
    in the body frame at the neutral state), then scales w by the steering efficiency.
    """
    where = f"{model.source}: friction_directions='icr'"
    if not (math.isfinite(steering_efficiency) and 0.0 < steering_efficiency <= 1.0):
        raise ParameterError(f"steering_efficiency must be in (0, 1], got {steering_efficiency}")
    if not math.isfinite(icr_x):
        raise ParameterError(f"icr_x must be finite [m], got {icr_x}")
    nt = len(model.track_names)
    if nt == 0:
        raise ParameterError(f"{where} needs tracks; {model.name} has none")
    act = [int(j) for j in model.actuated_joints]
    T_world = np.empty((model.nf, 4, 4))
    forward_kinematics(model.parent, model.joint_type, model.axis, model.T0,
                       model.neutral_state(), T_world)
    r_d, _ = contact_drive(model)
    on_body = [t for t in range(nt) if np.any(model.track_frame[model.track_of == t] == 0)]
    fit = on_body or list(range(nt))
    Y = np.zeros((len(fit), 2))
    D = np.zeros((len(fit), len(act)))
    for i, t in enumerate(fit):
        sel = np.flatnonzero(model.track_of == t)
        k = int(sel[0])
        joint = int(model.track_drive[k]) - 1
        if joint not in act:
            raise ParameterError(f"{where}: the drive joint "
                                 f"{model.joint_names[joint]!r} of track "
                                 f"{model.track_names[t]!r} is not actuated")
        ys = []
        for kk in sel:
            T = T_world[int(model.track_frame[kk])]
            p = T[:3, :3] @ model.track_path[kk, :, 0:3].mean(axis=0) + T[:3, 3]
            ys.append(p[1])
        Y[i] = (1.0, -float(np.mean(ys)))
        D[i, act.index(joint)] = r_d[model.nw + k]
    if np.linalg.matrix_rank(Y) < 2:
        raise ParameterError(f"{where}: the tracks must lie at two or more lateral offsets")
    out = np.zeros((3, len(act)))
    out[:2] = np.linalg.pinv(Y) @ D
    out[1] *= steering_efficiency
    out[2, 0] = icr_x
    return out


def check_friction_directions(value: Any) -> bool:
    """True for ``"icr"``, False for ``"belt"``; anything else is a :class:`ParameterError`."""
    if value not in FRICTION_DIRECTIONS:
        raise ParameterError(
            f"friction_directions must be one of {list(FRICTION_DIRECTIONS)}, got {value!r}")
    return value == "icr"
