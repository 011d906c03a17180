"""HMMWV-class vehicle scenarios of seed 002 (Cameron et al.), closed-chain vs embedded models.

Two descriptions of one vehicle (``urdf/hmmwv*.urdf``, ``config/vehicles/hmmwv*.yaml``):

* ``hmmwv`` - closed chains: double-wishbone corners (upper ball joint as a point loop
  closure) and a rack with two tie-rod distance closures: 25 tree coordinates, 14 closure rows
  of rank 10, hence 15 independent DOF - the 15 essential coordinates of seed 002's model
  (whose tree-plus-constraints form has 45 coordinates and 30 constraint rows);
* ``hmmwv_embedded`` - one prismatic joint per corner with the equivalent spring-damper and
  unsprung mass, and the two steer angles commanded from the closed linkage's rack map
  (:func:`steering_map`) - the "constraint embedding" form in its simplest, exact-at-design-
  height sense.

Scenarios (seed 002, "Scenarios"):

* :func:`lane_change` - scenario 2: accelerate to about 20 m/s, lane change at 30 s, hold the
  lane 20 s, return at 50 s; speed, roll, pitch, yaw, lateral acceleration and yaw rate.
  Open loop, like the seed's: the steer profile is one period of a sine whose amplitude the
  kinematic bicycle model gives for a 3.65 m lane offset (:func:`lane_change_steer`).
* :func:`steady_turn` with :func:`quasi_static_roll` - constant rack offset at constant speed;
  the steady roll angle against the quasi-static roll-stiffness estimate.
* :func:`off_road` - scenario 3: joystick-like driving (speed and steer set points held for a
  few seconds, smoothed) over rough terrain (:func:`wmr_model.terrain.surface.rough`) at several
  speeds.

Every run returns a :class:`HmmwvRun` with the planner-facing quantities: suspension travel,
wheel loads and a tip-over margin (:func:`wmr_model.prediction.predict.dynamic_stability_margin`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from wmr_model.contact.models import contact_setup
from wmr_model.dynamics.simulate import simulate_dynamics
from wmr_model.io.vehicles import load_vehicle
from wmr_model.kinematics import initialize_contact
from wmr_model.kinematics.constraints import project_loop_closures
from wmr_model.kinematics.describe import holonomic_jacobian
from wmr_model.prediction.predict import dynamic_stability_margin
from wmr_model.spatial import STANDARD_GRAVITY, quat_to_rot, quats_to_euler
from wmr_model.terrain.surface import Terrain, flat, rough
from wmr_model.vehicles.inertia import composite_inertias, inertia_mass_com, model_frame_inertias
from wmr_model.vehicles.model import VehicleModel
from wmr_model.vehicles.tree import forward_kinematics

__all__ = [
    "CORNERS",
    "LANE_OFFSET",
    "LANE_CHANGE_DURATION",
    "WHEEL_KP",
    "HmmwvRun",
    "steering_map",
    "rack_for_steer",
    "lane_change_steer",
    "commands",
    "suspension_travel",
    "quasi_static_roll",
    "run",
    "lane_change",
    "steady_turn",
    "off_road",
    "static_loads",
]

CORNERS = ("FL", "FR", "RL", "RR")
#: Lane offset of scenario 2 [m] (a 12 ft lane; the seed does not give one).
LANE_OFFSET = 3.65
#: Duration of each lane change [s] (ours; the seed's figures show a few seconds).
LANE_CHANGE_DURATION = 4.0
#: Wheel-rate P gain [N m s/rad] of the all-wheel drive (ours): 650 N m per wheel (1 m/s^2 for
#: the whole vehicle) costs 0.1 rad/s of wheel rate, 5 cm/s at the tread.
WHEEL_KP = 6500.0


@dataclass
class HmmwvRun:
    """One simulated HMMWV run (both variants share the fields).

    Attributes:
        vehicle: model name; dt [s]; t: (T+1,) [s].
        q: (T+1, nq); qdot: (T+1, nv); speed: (T+1,) horizontal speed [m/s]; roll, pitch,
        yaw: (T+1,) [rad].
        lateral_acceleration: (T+1,) along the body y axis, gravity excluded [m/s^2].
        yaw_rate: (T+1,) [rad/s] about the world z axis.
        travel: (T+1, 4) suspension travel of FL, FR, RL, RR, + = bump (wheel up) [m].
        wheel_load: (T, 4) normal contact forces [N].
        tip_margin: (T,) smallest tip-over stability margin [m] of the support polygon
            (:func:`wmr_model.prediction.predict.dynamic_stability_margin`: gravity and inertial
            load).
        loop_residual: largest |loop-closure residual| over the run [m] (0 when none).
        wall_time: simulation time [s] (compiled, after warm-up); real_time_factor: simulated
            duration / wall_time (> 1 is faster than real time).
        mean_iterations: mean force-balance Newton iterations per step.
    """

    vehicle: str
    dt: float
    t: np.ndarray
    q: np.ndarray
    qdot: np.ndarray
    speed: np.ndarray
    roll: np.ndarray
    pitch: np.ndarray
    yaw: np.ndarray
    lateral_acceleration: np.ndarray
    yaw_rate: np.ndarray
    travel: np.ndarray
    wheel_load: np.ndarray
    tip_margin: np.ndarray
    loop_residual: float
    wall_time: float
    real_time_factor: float
    mean_iterations: float
    extra: dict[str, Any] = field(default_factory=dict)


# ---- steering -----------------------------------------------------------------------------


def steering_map(model: VehicleModel, rack: np.ndarray) -> np.ndarray:
    """Front steer angles (len(rack), 2) [rad] of FL, FR for rack displacements ``rack`` [m].

    The closed linkage solved at design ride height (suspension joints at zero): the rack is
    set and the loop closures are solved for the knuckle angles by
    :func:`~wmr_model.kinematics.constraints.project_loop_closures` (continuation along ``rack``,
    which should start near 0). Positive angles turn the wheel left (about +z).
    """
    rack = np.asarray(rack, dtype=float)
    ir = model.joint_index("rack")
    kn = [model.joint_index(f"knuckle_{c}") for c in ("FL", "FR")]
    movable = np.zeros(model.nv, dtype=bool)
    movable[[6 + k for k in kn]] = True
    T_world = np.empty((model.nf, 4, 4))
    out = np.empty((rack.size, 2))
    q = model.neutral_state()
    for i, s in enumerate(rack):
        q[7 + ir] = s
        project_loop_closures(model.parent, model.joint_type, model.axis, model.T0,
                              model.loop_closure, movable, q, T_world)
        out[i] = q[[7 + k for k in kn]]
    return out


def _rack_grid(model: VehicleModel) -> tuple[np.ndarray, np.ndarray]:
    """Rack displacements (n,) over the rack's range and their steer angles (n, 2)."""
    lim = float(model.upper[model.frame_index("rack")])
    pos = np.linspace(0.0, lim, 161)
    neg = np.linspace(0.0, -lim, 161)
    dp, dn = steering_map(model, pos), steering_map(model, neg)
    return np.concatenate([neg[::-1], pos[1:]]), np.concatenate([dn[::-1], dp[1:]])


def rack_for_steer(model: VehicleModel, steer: np.ndarray) -> np.ndarray:
    """Rack displacement [m] giving the mean front steer angle ``steer`` [rad] (inverse map)."""
    s, d = _rack_grid(model)
    mean = d.mean(axis=1)
    order = np.argsort(mean)
    return np.interp(steer, mean[order], s[order])


def lane_change_steer(t: np.ndarray, speed: float, *, wheelbase: float = 3.30,
                      offset: float = LANE_OFFSET, duration: float = LANE_CHANGE_DURATION,
                      starts: Sequence[tuple[float, float]] = ((30.0, 1.0), (50.0, -1.0))
                      ) -> np.ndarray:
    """Open-loop mean steer angle [rad] for lane changes starting at ``starts`` (time, side).

    Each is one period of ``delta_m sin(2 pi tau / D)``; with the kinematic bicycle model the
    lateral acceleration is ``v^2 delta / L`` and its double integral over one period gives the
    offset ``y = v^2 delta_m D^2 / (2 pi L)``, hence ``delta_m = 2 pi L y / (v^2 D^2)``.
    """
    t = np.asarray(t, dtype=float)
    dm = 2.0 * math.pi * wheelbase * offset / (speed * speed * duration * duration)
    out = np.zeros_like(t)
    for t0, side in starts:
        tau = t - t0
        on = (tau >= 0) & (tau < duration)
        out[on] += side * dm * np.sin(2.0 * math.pi * tau[on] / duration)
    return out


# ---- commands and runs --------------------------------------------------------------------


def commands(model: VehicleModel, t: np.ndarray, speed: np.ndarray, steer: np.ndarray
             ) -> np.ndarray:
    """Command array (T, na) for either variant from speed [m/s] and mean steer [rad] at ``t``.

    Wheel rates are ``speed / R`` (all-wheel drive, P actuators absorb the small turning
    differences like a limited-slip drive). The closed form gets the rack rate of
    :func:`rack_for_steer`; the embedded form the knuckle rates of the same linkage map
    (:func:`steering_map`) - both follow one steer input. Commands at step i are the rates
    over [t_i, t_i+1) (finite differences of the set points).
    """
    t = np.asarray(t, dtype=float)
    dt = float(t[1] - t[0])
    names = [model.joint_names[k] for k in model.actuated_joints]
    U = np.zeros((t.size - 1, len(names)))
    closed = model.nlc > 0
    ref = model if closed else load_vehicle("hmmwv")
    rack = rack_for_steer(ref, steer)
    if not closed:
        s, d = _rack_grid(ref)
        angles = np.stack([np.interp(rack, s, d[:, 0]), np.interp(rack, s, d[:, 1])], axis=1)
    for i, n in enumerate(names):
        if n.startswith("wheel_"):
            R = float(model.wheel_radius[list(model.wheel_names).index(n)])
            U[:, i] = 0.5 * (speed[1:] + speed[:-1]) / R
        elif n == "rack":
            U[:, i] = np.diff(rack) / dt
        elif n in ("knuckle_FL", "knuckle_FR"):
            U[:, i] = np.diff(angles[:, 0 if n.endswith("FL") else 1]) / dt
    return U


def suspension_travel(model: VehicleModel, q: np.ndarray) -> np.ndarray:
    """Suspension travel (..., 4) [m] of FL, FR, RL, RR, + = bump, from states q (..., nq).

    Closed form: ``L sin(theta)`` of the lower arm (parallelogram wishbones, L the arm length);
    embedded form: the prismatic strut displacement.
    """
    q = np.asarray(q, dtype=float)
    out = np.empty(q.shape[:-1] + (4,))
    for k, c in enumerate(CORNERS):
        if model.nlc > 0:
            j = model.joint_index(f"lower_arm_{c}")
            L = float(np.linalg.norm(model.T0[model.frame_index(f"upright_{c}"), :3, 3]))
            out[..., k] = L * np.sin(q[..., 7 + j])
        else:
            out[..., k] = q[..., 7 + model.joint_index(f"strut_{c}")]
    return out


def _series(model: VehicleModel, terrain: Terrain, Q: np.ndarray, QD: np.ndarray, dt: float
            ) -> dict[str, np.ndarray]:
    """Speed, attitude, lateral acceleration, yaw rate, travel and tip-over margin series."""
    R = np.stack([quat_to_rot(np.ascontiguousarray(o)) for o in Q[:, 0:4]])
    v_world = np.einsum("tij,tj->ti", R, QD[:, 3:6])
    w_world = np.einsum("tij,tj->ti", R, QD[:, 0:3])
    acc = np.gradient(v_world, dt, axis=0)
    eul = quats_to_euler(Q[:, 0:4])
    return {
        "speed": np.hypot(v_world[:, 0], v_world[:, 1]),
        "roll": eul[:, 0], "pitch": eul[:, 1], "yaw": np.unwrap(eul[:, 2]),
        "lateral_acceleration": np.einsum("ti,ti->t", R[:, :, 1], acc),
        "yaw_rate": w_world[:, 2],
        "travel": suspension_travel(model, Q),
        "tip_margin": dynamic_stability_margin(model, terrain, Q, QD, dt)[:-1],
    }


def run(name: str, terrain: Terrain, t: np.ndarray, speed: np.ndarray, steer: np.ndarray, *,
        warm_up: bool = True) -> HmmwvRun:
    """Simulate vehicle ``name`` (``hmmwv`` or ``hmmwv_embedded``) following the set points.

    The initial body velocity is ``speed[0]`` along x with rolling wheels; the vehicle is placed
    on the terrain by :func:`~wmr_model.kinematics.initialize_contact`. P actuators
    (:data:`WHEEL_KP`) on the wheels, ideal steering actuators.
    """
    model = load_vehicle(name)
    dt = float(t[1] - t[0])
    U = commands(model, t, speed, steer)
    q0, _ = initialize_contact(model, terrain)
    qd0 = np.zeros(model.nv)
    qd0[3] = speed[0]
    for k in model.wheel_joints:
        qd0[6 + k] = speed[0] / float(model.wheel_radius[0])
    act = {n: "p" for n in model.wheel_names}
    kw: dict[str, Any] = dict(actuator=act, actuator_params={"Kp": WHEEL_KP})
    if warm_up:
        simulate_dynamics(model, terrain, q0, qd0, U[:3], dt, **kw)
    t0 = time.perf_counter()
    tr = simulate_dynamics(model, terrain, q0, qd0, U, dt, **kw)
    wall = time.perf_counter() - t0
    s = _series(model, terrain, tr.q, tr.qdot, dt)
    resid = 0.0
    if model.nlc:
        resid = max(float(np.abs(holonomic_jacobian(model, q)[0][model.ncj:]).max())
                    for q in tr.q[::max(1, len(tr.q) // 600)])
    duration = dt * U.shape[0]
    return HmmwvRun(name, dt, tr.t, tr.q, tr.qdot, s["speed"], s["roll"], s["pitch"], s["yaw"],
                    s["lateral_acceleration"], s["yaw_rate"], s["travel"],
                    tr.f_contact[:, :, 2].copy(), s["tip_margin"], resid, wall,
                    duration / wall, float(tr.iterations.mean()))


def lane_change(name: str = "hmmwv", dt: float = 0.01, duration: float = 60.0, *,
                top_speed: float = 20.0, acceleration: float = 1.0) -> HmmwvRun:
    """Scenario 2 of seed 002: from rest to ``top_speed`` at ``acceleration``, lane change at
    30 s, back at 50 s (:func:`lane_change_steer`), on flat ground."""
    t = np.arange(int(round(duration / dt)) + 1) * dt
    speed = np.minimum(top_speed, acceleration * t)
    steer = lane_change_steer(t, top_speed)
    return run(name, flat(), t, speed, steer)


def steady_turn(name: str, speed: float, steer: float, *, dt: float = 0.01,
                duration: float = 8.0) -> HmmwvRun:
    """Constant speed and mean steer angle [rad] (ramped in over 1 s) on flat ground.

    ``extra``: ``roll``, ``lateral_acceleration`` averaged over the last 2 s.
    """
    t = np.arange(int(round(duration / dt)) + 1) * dt
    st = steer * np.clip(t, 0.0, 1.0)
    r = run(name, flat(), t, np.full(t.size, speed), st)
    tail = r.t >= duration - 2.0
    r.extra = {"roll": float(r.roll[tail].mean()),
               "lateral_acceleration": float(r.lateral_acceleration[tail].mean())}
    return r


def quasi_static_roll(model: VehicleModel, lateral_acceleration: float) -> float:
    """Quasi-static body roll [rad] for a steady lateral acceleration [m/s^2] (+ = left turn).

    Roll-stiffness estimate (e.g. Gillespie, *Fundamentals of Vehicle Dynamics*, ch. 8) about
    the roll axis at ground level (parallel, level wishbones or vertical struts):

    .. math:: \\phi = \\frac{m a_y h}{K_\\phi - m g h}, \\qquad
              K_\\phi = \\sum_{corners} k_{eff}\\, y_w^2

    with ``k_eff`` the wheel rate of the spring in series with the tyre's normal stiffness and
    ``y_w`` the wheel's lateral position. Both linkages keep the uprights parallel to the
    chassis, so the lateral inertia of the unsprung parts rolls the body too: m and h are the
    whole vehicle's mass and cg height (taken from the embedded form's parameters at design
    ride height; the closed form has the same).
    """
    emb = model if model.nlc == 0 else load_vehicle("hmmwv_embedded")
    T_world = np.empty((emb.nf, 4, 4))
    q = emb.neutral_state()
    q[6] = float(emb.wheel_radius[0])
    forward_kinematics(emb.parent, emb.joint_type, emb.axis, emb.T0, q, T_world)
    Ic = np.empty((emb.nf, 6, 6))
    m, c = inertia_mass_com(composite_inertias(emb.parent, model_frame_inertias(emb), T_world,
                                               Ic))
    h = float(c[2] + q[6])
    # tyre normal stiffness [N/m]
    kt = float(contact_setup(emb, None, None, STANDARD_GRAVITY).params[0, 0])
    K_phi = 0.0
    for corner in CORNERS:
        k = float(emb.joint_stiffness[emb.joint_constraint_names.index(f"spring_{corner}")])
        y = float(T_world[emb.frame_index(f"wheel_{corner}"), 1, 3])
        K_phi += y * y / (1.0 / k + 1.0 / kt)
    return m * lateral_acceleration * h / (K_phi - m * STANDARD_GRAVITY * h)


def static_loads(name: str, duration: float = 3.0, dt: float = 0.01) -> HmmwvRun:
    """Vehicle at rest on flat ground for ``duration`` (wheel loads settle)."""
    t = np.arange(int(round(duration / dt)) + 1) * dt
    return run(name, flat(), t, np.zeros(t.size), np.zeros(t.size), warm_up=False)


def off_road(name: str = "hmmwv", speeds: Sequence[float] = (3.0, 6.0, 10.0), *,
             dt: float = 0.01, duration: float = 20.0, rms: float = 0.05,
             correlation_length: float = 1.0, seed: int = 2) -> list[HmmwvRun]:
    """Scenario 3 of seed 002: joystick-like driving over rough terrain at several speeds.

    The "joystick" holds a speed set point and a steer set point for 4 s at a time (steer
    uniformly within +-0.1 rad, seeded), each change smoothed over 1 s like a human hand. The
    terrain is Gaussian-correlated rough ground (:func:`wmr_model.terrain.surface.rough`), ``rms``
    [m] and ``correlation_length`` [m], long enough for the fastest run.
    """
    rng = np.random.default_rng(seed)
    t = np.arange(int(round(duration / dt)) + 1) * dt
    holds = rng.uniform(-0.1, 0.1, size=int(duration // 4) + 1)
    xp, fp, prev = [], [], 0.0
    for k, h in enumerate(holds):  # hold 4 s, then move to the next set point over 1 s
        xp += [4.0 * k, 4.0 * k + 1.0]
        fp += [prev, float(h)]
        prev = float(h)
    steer = np.interp(t, xp, fp)
    reach = max(speeds) * duration + 20.0
    ter = rough(rms, correlation_length, seed, x_range=(-10.0, reach),
                y_range=(-reach / 2, reach / 2), resolution=0.25)
    out = []
    for v in speeds:
        sp = v * np.clip(t / 2.0, 0.0, 1.0)
        r = run(name, ter, t, sp, steer * min(1.0, 5.0 / max(v, 1e-9)))
        r.extra = {"set_speed": v, "terrain": repr(ter)}
        out.append(r)
    return out
