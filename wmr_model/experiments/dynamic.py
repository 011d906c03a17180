"""The thesis' dynamic simulation experiments, reproducible from one function each (§2.5.2-2.5.4).

* :func:`ramp_and_turn` - §2.5.2, Table 2.5: LandTamer accelerating 1 -> 2 m/s at 1 s, over a
  1.5 m high 20° ramp (2-10 s), turning left (10 s) and right (15 s) at 1 rad/s; Pacejka contact,
  P actuators; constrained DAE at several step sizes vs the stiff ODE baseline.
* :func:`loss_of_traction` - §2.5.3, Figs. 2.16-2.17: 0.5 -> 5 -> 0.5 m/s with mu = 0.6;
  normalized longitudinal force vs slip ratio (:func:`force_slip_curve`).
* :func:`rollover` - §2.5.3, Figs. 2.20-2.21: 5 m/s, then a 7 rad/s turn command at 1 s, with the
  vehicle's cg at 0.83 m (liftoff and re-contact) or 1.25 m (rollover); :func:`landtamer_with_cg`.
* :func:`zoe_dynamics_benchmark` - §2.5.4, Tables 2.6-2.7: Zoë at 1 m/s for 10 s over the ten
  wmrde rough terrains, per contact model and step size.

Used by ``bench/bench_dynamics.py`` (full tables) and by the tests (coarser, shorter runs).

Choices not stated in the thesis (each named below): the ramp's position and top length, the P
controller gain, the LandTamer's mass distribution (see ``urdf/landtamer.urdf``; the rollover
uses the thesis' MATLAB model's, :func:`landtamer_with_cg`), the rollover criterion, and Zoë's
actuators (ideal) and start state.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from wmr_model._jit import njit, wait_for_kernels
from wmr_model.dynamics.simulate import (
    DynamicsTrajectory,
    simulate_dynamics,
    simulate_dynamics_batch,
)
from wmr_model.dynamics.stiff import StiffTrajectory, simulate_stiff
from wmr_model.io.vehicles import load_vehicle, load_vehicle_spec
from wmr_model.kinematics import initialize_contact
from wmr_model.kinematics.constraints import wheel_jacobian
from wmr_model.kinematics.wheel_collision import wheel_contact
from wmr_model.prediction.controllers import simulate_dynamics_controlled, straight_wheel_rates
from wmr_model.spatial import STANDARD_GRAVITY, quat_from_euler, quat_to_rot, rot_to_euler
from wmr_model.terrain.surface import Terrain, flat, ramp
from wmr_model.vehicles.model import VehicleModel, compile_vehicle
from wmr_model.vehicles.tree import forward_kinematics

__all__ = [
    "DynamicsRun",
    "contact_kinematics",
    "FORCE_BALANCE_TOL",
    "LANDTAMER_KP",
    "RAMP_HEIGHT",
    "RAMP_SLOPE",
    "RAMP_START",
    "RAMP_TOP",
    "THESIS_TABLE_2_5",
    "THESIS_TABLE_2_6",
    "THESIS_TABLE_2_7",
    "wheel_slip",
    "skid_steer_rates",
    "landtamer_ramp",
    "ramp_and_turn_commands",
    "ramp_and_turn",
    "loss_of_traction",
    "force_slip_curve",
    "LANDTAMER_BODY_BOX",
    "LANDTAMER_BODY_FRACTION",
    "LANDTAMER_WHEEL_WIDTH",
    "landtamer_with_cg",
    "rollover",
    "zoe_dynamics_benchmark",
    "zoe_library_contact_params",
    "dynamics_batch_throughput",
]

# §2.5.2 says only "a basic proportional controller ... with a modest gain". 2000 N m s/rad per
# wheel: the 20° ramp (m g sin 20° / 6 wheels ~ 340 N m per wheel) costs ~0.17 rad/s of wheel
# rate (7 cm/s), and the wheel-rate loop (gain / wheel inertia ~ 300 1/s) is far faster than the
# vehicle. No torque limit: the tyre's friction limit is what bounds the force.
LANDTAMER_KP = 2000.0
# Ramp of §2.5.2: 1.5 m high with 20° faces. Start (4 m ahead of the start pose) and top length
# (4.5 m) are ours, chosen so the traverse fits the thesis' 2-10 s interval at 2 m/s: the front
# wheels reach the ramp at ~1.97 s and the last wheel is back on the flat at ~9.74 s, so the
# wheel loads have settled before the turn command at 10 s. A turn commanded while a wheel is
# landing is resolved only to within one step: the DAE spreads the landing impulse over the
# step, during which the landing (middle) wheels carry nearly all the weight, the outer wheels'
# lateral forces no longer resist the yaw and a large step over-rotates (with a 5 m top, middle
# wheels landing at 10.25 s: 97 % of the weight on them over 10.2-10.4 s at dt 0.2 vs 34 % on
# average at dt 0.01, +0.064 rad of yaw in that step, 1.17 m at the end).
RAMP_HEIGHT = 1.5
RAMP_SLOPE = math.radians(20.0)
RAMP_START = 4.0
RAMP_TOP = 4.5

# Table 2.5 (MATLAB): method -> {step size: (position difference [m], normalized time)}.
THESIS_TABLE_2_5: dict[str, dict[float, tuple[float | None, float]]] = {
    "dae": {0.01: (None, 0.3204), 0.02: (0.0041, 0.1635), 0.04: (0.0766, 0.0903),
            0.10: (0.0053, 0.0435), 0.20: (0.3780, 0.0281)},
    "ode15s": {0.0025: (0.0742, 9.7647)},
    "ode23s": {0.0114: (0.0503, 7.0499)},
    "ode23tb": {0.0141: (0.0508, 1.5267)},
}
# Default force-balance tolerance of simulate_dynamics on |e| as a fraction of m g.
FORCE_BALANCE_TOL = 1e-6
# Table 2.6 (C++), normalized time x 1e-3, for the force-balance contact models.
THESIS_TABLE_2_6 = {
    "piecewise_linear": {0.01: 3.138, 0.02: 1.562, 0.04: 0.780, 0.10: 0.312},
    "pacejka": {0.01: 4.366, 0.02: 2.203, 0.04: 1.141, 0.10: 0.500},
    "ishigami": {0.01: 3.609, 0.02: 1.874, 0.04: 0.953, 0.10: 0.360},
}
# Table 2.7: model -> {step size: (position error [m], yaw error [rad], mean iterations)}.
THESIS_TABLE_2_7: dict[str, dict[float, tuple[float | None, float | None, float]]] = {
    "piecewise_linear": {0.01: (None, None, 0.9990), 0.02: (0.0039, 0.0003, 0.9980),
                         0.04: (0.0126, 0.0009, 0.9960), 0.10: (0.0401, 0.0039, 0.9901)},
    "pacejka": {0.01: (None, None, 1.7364), 0.02: (0.0037, 0.0006, 1.8663),
                0.04: (0.0109, 0.0014, 2.0100), 0.10: (0.0292, 0.0038, 2.3624)},
    "ishigami": {0.01: (None, None, 1.4118), 0.02: (0.0085, 0.0020, 1.6525),
                 0.04: (0.0226, 0.0043, 1.9657), 0.10: (0.0513, 0.0128, 2.3149)},
}


@dataclass
class DynamicsRun:
    """One simulated run of a dynamic experiment.

    Attributes:
        method: ``"dae"`` or the stiff solver's name (``"BDF"``, ``"Radau"``, ``"LSODA"``).
        dt: step size [s] (DAE) or mean adaptive step (stiff ODE).
        final_position: (3,) [m]; final_yaw [rad].
        wall_time: computation time [s] (compiled, after warm-up); normalized_time: wall_time
            divided by the simulated duration (< 1 is faster than real time).
        mean_iterations: mean Newton iterations per step (DAE; NaN for the stiff ODE).
        max_cost: largest force-balance residual sqrt(L) / (m g) over the steps (DAE; NaN).
        t: (N,) sample times [s] of the per-wheel series below.
        slip_ratio, slip_angle: (N, nw) (C.10)-(C.11) [-, rad]; f_contact: (N, nw, 3) contact
            forces on the wheels [N]; contact_point: (N, nw, 3) world contact points [m].
        q: (N + 1, nq) states.
    """

    method: str
    dt: float
    final_position: tuple[float, float, float]
    final_yaw: float
    wall_time: float
    normalized_time: float
    mean_iterations: float
    max_cost: float
    t: np.ndarray = field(repr=False)
    slip_ratio: np.ndarray = field(repr=False)
    slip_angle: np.ndarray = field(repr=False)
    f_contact: np.ndarray = field(repr=False)
    contact_point: np.ndarray = field(repr=False)
    q: np.ndarray = field(repr=False)

    def summary(self) -> dict[str, Any]:
        """Scalars only, for tables and JSON."""
        return {"method": self.method, "dt": self.dt, "final_position": self.final_position,
                "final_yaw": self.final_yaw, "wall_time": self.wall_time,
                "normalized_time": self.normalized_time,
                "mean_iterations": self.mean_iterations, "max_cost": self.max_cost}


@njit
def _contact_kinematics_loop(m, t, Q, QD, V, P):
    """Contact velocities ``V`` and points ``P`` (N, nw, 3) of :func:`contact_kinematics`:
    ``m`` the :class:`~wmr_model.vehicles.model.KernelModel`, ``t`` the
    :class:`~wmr_model.terrain.surface.TerrainArrays`."""
    parent, jtype, axis, T0, wheel_frame = m.parent, m.jtype, m.axis, m.T0, m.wheel_frame
    nf = parent.shape[0]
    nw = wheel_frame.shape[0]
    nv = QD.shape[1]
    T_world = np.empty((nf, 4, 4))
    T_contact = np.empty((nw, 4, 4))
    dz = np.empty(nw)
    ang = np.empty(nw)
    blk = np.empty((3, nv))
    for i in range(Q.shape[0]):
        forward_kinematics(parent, jtype, axis, T0, Q[i], T_world)
        wheel_contact(m, t, T_world, T_contact, dz, ang)
        for k in range(nw):
            wheel_jacobian(parent, jtype, axis, wheel_frame, T_world, T_contact, k, blk)
            for r in range(3):
                V[i, k, r] = blk[r] @ QD[i]
                P[i, k, r] = T_contact[k, r, 3]


def contact_kinematics(model: VehicleModel, terrain: Terrain, q: np.ndarray,
                       qdot: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Contact point velocities and world contact points of every wheel (Algorithm 2, 2.23).

    ``q`` (N, nq) gives the contact geometry, ``qdot`` (N, nv) the velocities: pair ``q[t]``
    with ``qdot[t + 1]`` of a dynamics trajectory to get the velocities at which the step's
    contact forces were evaluated. Returns ``(v_c, p)``: (N, nw, 3) in contact coordinates
    [m/s] and (N, nw, 3) world points [m].
    """
    Q = np.ascontiguousarray(q, dtype=float)
    QD = np.ascontiguousarray(qdot, dtype=float)
    V, P = np.empty((Q.shape[0], model.nw, 3)), np.empty((Q.shape[0], model.nw, 3))
    _contact_kinematics_loop(model.kinematic_arrays(), terrain.kernel_args(), Q, QD, V, P)
    return V, P


def wheel_slip(model: VehicleModel, terrain: Terrain, q: np.ndarray,
               qdot: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Slip ratio and angle of every wheel, (C.10)-(C.12), and the world contact points.

    ``q`` (N, nq), ``qdot`` (N, nv): the contact geometry of ``q[i]`` with the velocity
    ``qdot[i]``. Returns ``(s, alpha, p)``: (N, nw), (N, nw) [rad], (N, nw, 3) [m]. Slip ratio
    ``s = -v_x / V_x`` is positive when the wheel drives (spins faster than it moves); both are
    0 where ``V_x = v_x + R w`` is exactly 0.
    """
    V, P = contact_kinematics(model, terrain, q, qdot)
    vx, vy = V[..., 0], V[..., 1]
    Vx = vx + model.wheel_radius * np.asarray(qdot, dtype=float)[:, 5 + model.wheel_frame]
    moving = Vx != 0.0
    den = np.where(moving, Vx, 1.0)
    S = np.where(moving, -vx / den, 0.0)
    A = np.where(moving, np.arctan(vy / den), 0.0)
    return S, A, P


def skid_steer_rates(model: VehicleModel, speed: float, yaw_rate: float) -> np.ndarray:
    """Actuated-joint rates (na,) of a skid-steer command: wheel k at ``(v - w y_k) / R_k``.

    ``y_k`` is the wheel centre's lateral offset in the body frame at the neutral state; other
    actuated joints are held still.
    """
    T_world = np.empty((model.nf, 4, 4))
    forward_kinematics(model.parent, model.joint_type, model.axis, model.T0,
                       model.neutral_state(), T_world)
    rate = {int(j): (speed - yaw_rate * T_world[f, 1, 3]) / r
            for j, f, r in zip(model.wheel_joints, model.wheel_frame, model.wheel_radius)}
    return np.array([rate.get(int(k), 0.0) for k in model.actuated_joints])


def _profile_commands(model: VehicleModel, dt: float, duration: float,
                      speed: Any, yaw_rate: Any) -> np.ndarray:
    """(T, na) commands from speed(t), yaw_rate(t) sampled at the start of each step."""
    n = round(duration / dt)
    t = np.arange(n) * dt + 1e-9  # a switch at t_s applies from the step starting at t_s
    return np.array([skid_steer_rates(model, speed(ti), yaw_rate(ti)) for ti in t])


def _moving_start(model: VehicleModel, terrain: Terrain, speed: float,
                  yaw: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """State on the terrain at the origin and velocity ``speed`` [m/s] forward, wheels rolling."""
    q = model.neutral_state()
    q[0:4] = quat_from_euler(0.0, 0.0, yaw)
    q0, _ = initialize_contact(model, terrain, q)
    qd0 = np.zeros(model.nv)
    qd0[3] = speed
    qd0[6:] = 0.0
    qd0[6 + model.wheel_joints] = speed / model.wheel_radius
    return q0, qd0


def _run(model: VehicleModel, terrain: Terrain, method: str, q0: np.ndarray, qd0: np.ndarray,
         U: np.ndarray, dt: float, **kw: Any) -> DynamicsRun:
    mg = model.total_mass * STANDARD_GRAVITY
    duration = U.shape[0] * dt
    t0 = time.perf_counter()
    if method == "dae":
        tr: DynamicsTrajectory | StiffTrajectory = simulate_dynamics(model, terrain, q0, qd0,
                                                                     U, dt, **kw)
        wall = time.perf_counter() - t0
        assert isinstance(tr, DynamicsTrajectory)
        s, a, p = wheel_slip(model, terrain, tr.q[:-1], tr.qdot[1:])
        t, fc = tr.t[:-1], tr.f_contact
        it = float(tr.iterations.mean())
        cost = float(np.sqrt(tr.cost).max() / mg)
        step = dt
    else:
        tr = simulate_stiff(model, terrain, q0, qd0, U, dt, method=method, **kw)
        wall = tr.wall_time
        s, a, p = wheel_slip(model, terrain, tr.q, tr.qdot)
        t, fc = tr.t, tr.f_contact
        it = cost = math.nan
        step = tr.mean_step
    R = quat_to_rot(tr.q[-1, 0:4])
    pos = tr.q[-1, 4:7]
    return DynamicsRun(method, step, (float(pos[0]), float(pos[1]), float(pos[2])),
                       float(rot_to_euler(R)[2]), wall, wall / duration, it, cost, t, s, a, fc,
                       p, tr.q)


def landtamer_ramp() -> Terrain:
    """The §2.5.2 ramp: 1.5 m high, 20° up and down faces, :data:`RAMP_TOP` m flat top."""
    side = RAMP_HEIGHT / math.tan(RAMP_SLOPE)
    return ramp(RAMP_HEIGHT, side, RAMP_TOP, side, RAMP_START)


def ramp_and_turn_commands(model: VehicleModel, dt: float, duration: float = 20.0) -> np.ndarray:
    """(T, na) wheel rates of §2.5.2: 1 m/s, 2 m/s from 1 s, +1 rad/s from 10 s, -1 from 15 s."""
    return _profile_commands(model, dt, duration, lambda t: 1.0 if t < 1.0 else 2.0,
                             lambda t: 0.0 if t < 10.0 else (1.0 if t < 15.0 else -1.0))


def ramp_and_turn(step_sizes: Sequence[float] = (0.01, 0.02, 0.04, 0.10, 0.20),
                  stiff_methods: Sequence[str] = ("BDF", "Radau", "LSODA"),
                  duration: float = 20.0, model: VehicleModel | None = None) -> list[DynamicsRun]:
    """§2.5.2 / Table 2.5: the DAE at each step size and the stiff ODE with each solver.

    Pacejka contact (Table C.1, mu = 1), P actuators (:data:`LANDTAMER_KP`). The stiff runs are
    sampled on a 0.01 s grid (their own steps are adaptive, ``max_step`` 0.04 s). The first call
    compiles the kernels; run it twice to time.
    """
    m = load_vehicle("landtamer") if model is None else model
    ter = landtamer_ramp()
    q0, qd0 = _moving_start(m, ter, 1.0)
    kw = {"contact_model": "pacejka", "actuator": "p",
          "actuator_params": {"Kp": LANDTAMER_KP}}
    runs = [_run(m, ter, "dae", q0, qd0, ramp_and_turn_commands(m, dt, duration), dt, **kw)
            for dt in step_sizes]
    runs += [_run(m, ter, meth, q0, qd0, ramp_and_turn_commands(m, 0.01, duration), 0.01, **kw)
             for meth in stiff_methods]
    return runs


def loss_of_traction(dt: float = 0.01, mu: float = 0.6, duration: float = 6.0,
                     yaw_rate: float = 0.0, model: VehicleModel | None = None) -> DynamicsRun:
    """§2.5.3, Figs. 2.16-2.17: 0.5 m/s, 5 m/s from 1 s, 0.5 m/s from 3 s on flat ground.

    Pacejka contact with ``mu``, P actuators; ``yaw_rate`` [rad/s] commanded from 1 s to 3 s
    gives the turning variant (Figs. 2.18-2.19, 2 rad/s).
    """
    m = load_vehicle("landtamer") if model is None else model
    ter = flat()
    q0, qd0 = _moving_start(m, ter, 0.5)
    U = _profile_commands(m, dt, duration, lambda t: 5.0 if 1.0 <= t < 3.0 else 0.5,
                          lambda t: yaw_rate if 1.0 <= t < 3.0 else 0.0)
    return _run(m, ter, "dae", q0, qd0, U, dt, contact_model="pacejka",
                contact_params={"mu": mu}, actuator="p",
                actuator_params={"Kp": LANDTAMER_KP})


def force_slip_curve(run: DynamicsRun, edges: Sequence[float] | None = None,
                     min_normal: float = 1.0) -> dict[str, np.ndarray]:
    """Fig. 2.17: normalized longitudinal force f_x/f_z binned over slip ratio (all wheels).

    Samples with ``f_z > min_normal`` [N]; ``edges`` default -1 ... 1.5 in steps of 0.05.
    Returns ``{"s": bin centres, "f": median f_x/f_z per bin (NaN when empty), "n": counts}``.
    """
    bins: np.ndarray = (np.arange(-1.0, 1.5001, 0.05) if edges is None
                        else np.asarray(edges, float))
    fz = run.f_contact[:, :, 2]
    ok = fz > min_normal
    s = run.slip_ratio[ok]
    f = run.f_contact[:, :, 0][ok] / fz[ok]
    idx = np.digitize(s, bins) - 1
    nb = len(bins) - 1
    med = np.full(nb, np.nan)
    cnt = np.zeros(nb, dtype=int)
    for b in range(nb):
        sel = idx == b
        cnt[b] = int(sel.sum())
        if cnt[b]:
            med[b] = float(np.median(f[sel]))
    return {"s": 0.5 * (bins[1:] + bins[:-1]), "f": med, "n": cnt}


# Mass distribution of the thesis' own (MATLAB) LandTamer model, which §2.5.3 raises: 95 % of the
# 3225 lbm in the body, a uniform box of wheelbase x track x 32.6 in (84 x 64.5 x 32.6 in); 5 % in
# the six wheels, uniform cylinders of the wheel radius and 10 in wide.
LANDTAMER_BODY_FRACTION = 0.95
LANDTAMER_BODY_BOX = (84 * 0.0254, 64.5 * 0.0254, 32.6 * 0.0254)  # [m] x, y, z
LANDTAMER_WHEEL_WIDTH = 10 * 0.0254  # [m], for the wheel inertia only


def landtamer_with_cg(cg_height: float) -> VehicleModel:
    """The thesis' LandTamer of §2.5.3 with its body's centre of mass ``cg_height`` [m] above
    flat ground (wheel centres at the wheel radius R, zero sinkage).

    §2.5.3's "cg height" is that of the body frame's mass in the thesis' MATLAB model
    (:data:`LANDTAMER_BODY_FRACTION`, :data:`LANDTAMER_BODY_BOX`): its body com is half the box
    height above the axle plane, R + 16.3 in = 0.833 m, the "baseline cg height of 0.83 m", and a
    commented-out variant puts it at the full box height, R + 32.6 in = 1.247 m, the "raised cg
    height of 1.25 m". Geometry and total mass are those of ``urdf/landtamer.urdf`` (Table E.1);
    the masses and inertias are replaced by that model's (the shipped URDF's own split, 70 % body
    with its com 0.2 m above the axles, is an assumption that puts the cg at 0.56 m, not 0.83 m).
    The body com is at ``z_body = cg_height - R`` above the axle plane, its inertia about its own
    com that of the box; the whole vehicle's cg is ``0.95 cg_height + 0.05 R`` (0.812 m and
    1.206 m for the thesis' two models).
    """
    spec = load_vehicle_spec("landtamer")
    m_total = spec.body_mass + sum(f.mass for f in spec.frames)
    R = max(f.wheel_radius or 0.0 for f in spec.frames)
    mb = LANDTAMER_BODY_FRACTION * m_total
    x, y, z = LANDTAMER_BODY_BOX
    spec.body_mass = mb
    spec.body_com = (0.0, 0.0, cg_height - R)
    spec.body_inertia = np.diag([mb * (y * y + z * z), mb * (x * x + z * z),
                                 mb * (x * x + y * y)]) / 12.0
    wheels = [f for f in spec.frames if f.wheel_radius]
    mw = (m_total - mb) / len(wheels)
    for f in wheels:
        r, w = float(f.wheel_radius or 0.0), LANDTAMER_WHEEL_WIDTH
        f.mass, f.com = mw, (0.0, 0.0, 0.0)
        f.inertia = np.diag([mw * (3 * r * r + w * w) / 12, mw * r * r / 2,
                             mw * (3 * r * r + w * w) / 12])
    spec.name = f"landtamer_cg{cg_height:g}"
    return compile_vehicle(spec)


def rollover(cg_height: float, dt: float = 0.01, duration: float = 4.0,
             speed: float = 5.0, yaw_rate: float = 7.0, turn_at: float = 1.0,
             model: VehicleModel | None = None) -> dict[str, Any]:
    """§2.5.3, Figs. 2.20-2.21: ``speed`` straight, then ``yaw_rate`` skid-steer from ``turn_at``.

    Pacejka contact (mu = 1), P actuators, flat ground. A wheel has lifted off when its normal
    force is zero after ``turn_at``; it re-contacts when its normal force returns. The vehicle
    has rolled over when its body z axis points down (roll past 90°): no wheel contact can right
    it, and the wheels are the only contacts, so the outcome is evaluated up to that instant.

    Returns ``{"run": DynamicsRun, "lifted": wheel names, "recontacted": names, "max_roll": rad,
    "rolled_over": bool, "t_rollover": s or None, "final_roll": rad}``.
    """
    m = landtamer_with_cg(cg_height) if model is None else model
    ter = flat()
    q0, qd0 = _moving_start(m, ter, speed)
    U = _profile_commands(m, dt, duration, lambda t: speed,
                          lambda t: yaw_rate if t >= turn_at else 0.0)
    run = _run(m, ter, "dae", q0, qd0, U, dt, contact_model="pacejka", actuator="p",
               actuator_params={"Kp": LANDTAMER_KP})
    roll = np.array([rot_to_euler(quat_to_rot(q[0:4]))[0] for q in run.q])
    up = np.array([quat_to_rot(q[0:4])[2, 2] for q in run.q])  # world z of the body z axis
    over = np.flatnonzero(up <= 0.0)
    n_ok = over[0] if over.size else len(run.t)
    fz = run.f_contact[:n_ok, :, 2]
    lifted, recontacted = [], []
    for k, name in enumerate(m.wheel_names):
        air = np.flatnonzero(fz[:, k] <= 0.0)
        air = air[run.t[air] >= turn_at]
        if air.size:
            lifted.append(name)
            if np.any(fz[air[0]:, k] > 0.0):
                recontacted.append(name)
    return {"run": run, "lifted": lifted, "recontacted": recontacted,
            "max_roll": float(np.abs(roll[:n_ok + 1]).max()),
            "rolled_over": bool(over.size), "t_rollover": float(over[0] * dt) if over.size
            else None, "final_roll": float(roll[-1])}


def zoe_library_contact_params(model: VehicleModel, gravity: float = STANDARD_GRAVITY
                               ) -> dict[str, dict[str, float]]:
    """Contact parameters of the thesis' C++ library's Zoë benchmark, per contact model.

    The library sizes the normal spring for 2 cm of static sinkage, ``Kp = m g / (n_w 0.02)``,
    with ``Kd = Kp / 20``; its linear (ODE-style) model has slip gains ``C = 0.1 Kp`` [N s/m]
    (friction saturates at ~0.2 m/s of slip, not ~0.01 m/s as our defaults) and mu = 1, no
    rolling resistance; its Pacejka model mu = 1 with the same spring. A per-model mapping for
    ``contact_params`` (:func:`wmr_model.contact.models.params_for_model`).
    """
    Kp = model.total_mass * gravity / (model.nw * 0.02)
    return {"piecewise_linear": {"Kp": Kp, "Kd": Kp / 20.0, "Cx": 0.1 * Kp, "Cy": 0.1 * Kp,
                                 "Crr": 0.0, "mu_x": 1.0, "mu_y": 1.0},
            "pacejka": {"Kp": Kp, "Kd": Kp / 20.0, "mu": 1.0}}


def zoe_dynamics_benchmark(model: VehicleModel, terrains: Sequence[Terrain],
                           contact_models: Sequence[str] = ("piecewise_linear", "pacejka",
                                                            "ishigami"),
                           step_sizes: Sequence[float] = (0.01, 0.02, 0.04, 0.10),
                           speed: float = 1.0, duration: float = 10.0,
                           repeats: int = 3, options: Mapping[str, Any] | None = None,
                           controller: str = "naive") -> list[dict[str, Any]]:
    """§2.5.4, Tables 2.6-2.7: Zoë driving straight over each terrain, per model and step size.

    Ideal actuators at the naive straight-line wheel rates (the thesis does not name Zoë's
    actuator model), default contact parameters. Start: at the origin heading +x, placed on the
    terrain by (2.27)-(2.32), moving at ``speed``. Each run is timed ``repeats`` times (fastest
    kept; the first call compiles and is excluded). Errors are relative to the smallest step size
    on the same terrain. One row per (model, step size), averaged over the terrains;
    ``steps_over_tol`` counts the steps whose force balance ended above the default tolerance
    (:data:`FORCE_BALANCE_TOL` m g), ``rolled_over`` the terrains on which Zoë ended a step with
    its body z axis pointing down.

    With constant wheel rates Zoë's passive steering axles (Table E.2) are steered only by
    the difference of the left and right wheel forces, which nothing here controls. On the loose
    soil of Table C.2 (Ishigami), where the longitudinal force at zero slip depends strongly on
    sinkage, the axles swing, the rover veers (yaw up to 90° within 5 s) and rolls over on some
    terrains at every step size; the force balance fails only in those tumbling states (and,
    for the piecewise-linear pyramid at dt 0.10, where a wheel sits on a corner of the friction
    pyramid, C.7-C.8; the Coulomb cone converges there).

    ``controller`` (:mod:`wmr_model.prediction.controllers`): ``"naive"`` (default; constant wheel
    rates, one compiled loop per run: the timing configuration) or ``"vehicle"`` /
    ``"passive_steer"`` (Zoë's steer-angle feedback, as the thesis' C++ library drives Zoë,
    evaluated inside the compiled loop). With the controller the axles hold their
    commanded (zero) steer angles and the errors of Table 2.7 are comparable with the thesis'.

    ``options`` are keywords of :func:`simulate_dynamics` for every run (e.g. the speed-ups of
    §2.4.4: ``fused_bias``, ``single_step``, or ``collision="warm"``); each row repeats them
    and lists the end positions per terrain (``end_positions`` [m]), so that configurations
    can be compared run by run.
    """
    opts = dict(options or {})
    u = straight_wheel_rates(model, speed)
    starts = [_moving_start(model, ter, speed) for ter in terrains]
    for name in contact_models:  # compile outside the timing
        simulate_dynamics(model, terrains[0], *starts[0], np.tile(u, (5, 1)), 0.1,
                          contact_model=name, **opts)
    wait_for_kernels()  # the vehicle's specialized kernels, compiled in the background
    rows = []
    for name in contact_models:
        ref: dict[int, tuple[np.ndarray, float]] = {}
        for dt in sorted(step_sizes):
            U = np.tile(u, (round(duration / dt), 1))
            norm, its, pos_err, yaw_err, cost, over, rolled = [], [], [], [], [], 0, 0
            ends = []
            for k, ter in enumerate(terrains):
                best = math.inf
                for _ in range(max(repeats, 1)):
                    t0 = time.perf_counter()
                    if controller == "naive":
                        tr = simulate_dynamics(model, ter, *starts[k], U, dt,
                                               contact_model=name, **opts)
                    else:
                        tr = simulate_dynamics_controlled(
                            model, ter, *starts[k], np.full(U.shape[0], speed),
                            np.zeros(U.shape[0]), dt, controller=controller,
                            contact_model=name, **opts)
                    best = min(best, time.perf_counter() - t0)
                norm.append(best / (U.shape[0] * dt))
                its.append(float(tr.iterations.mean()))
                cost.append(float(np.sqrt(tr.cost).max() / (model.total_mass * STANDARD_GRAVITY)))
                over += int(np.count_nonzero(np.sqrt(tr.cost) > FORCE_BALANCE_TOL * model.total_mass
                                             * STANDARD_GRAVITY))
                rolled += int(any(quat_to_rot(q[0:4])[2, 2] <= 0.0 for q in tr.q))
                pos = tr.q[-1, 4:7]
                ends.append([float(v) for v in pos])
                yaw = float(rot_to_euler(quat_to_rot(tr.q[-1, 0:4]))[2])
                if k not in ref:
                    ref[k] = (pos, yaw)
                else:
                    pos_err.append(float(np.linalg.norm(pos - ref[k][0])))
                    yaw_err.append(abs(math.remainder(yaw - ref[k][1], 2 * math.pi)))
            rows.append({
                "contact_model": name, "dt": dt, "terrains": len(terrains),
                "normalized_time_e3": float(np.mean(norm)) * 1e3,
                "mean_iterations": float(np.mean(its)),
                "position_error": float(np.mean(pos_err)) if pos_err else None,
                "yaw_error": float(np.mean(yaw_err)) if yaw_err else None,
                "max_cost": float(np.max(cost)),
                "steps_over_tol": over, "steps": U.shape[0] * len(terrains),
                "rolled_over": rolled,
                "thesis_normalized_time_e3": THESIS_TABLE_2_6.get(name, {}).get(dt),
                "thesis": THESIS_TABLE_2_7.get(name, {}).get(dt),
                "options": opts, "end_positions": ends, "controller": controller,
            })
    return rows


def dynamics_batch_throughput(model: VehicleModel, terrain: Terrain, candidates: int = 16,
                              duration: float = 5.0, dt: float = 0.04, repeats: int = 3,
                              seed: int = 0, **options: Any) -> dict[str, Any]:
    """Candidate-steps per second of :func:`simulate_dynamics_batch` against the same
    candidates run one by one with :func:`simulate_dynamics` (best of ``repeats`` each).

    Candidates: ``model`` starting at 1 m/s on ``terrain`` (as :func:`zoe_dynamics_benchmark`),
    each wheel's straight-line rate scaled by a factor drawn in [0.6, 1.4] per candidate and
    wheel (so they turn and differ). ``options`` go to both calls; the batch's trajectories are
    checked to equal the single runs (``identical``).
    """
    rng = np.random.default_rng(seed)
    base = straight_wheel_rates(model, 1.0)
    T = round(duration / dt)
    U = np.tile(base, (candidates, T, 1)) * rng.uniform(0.6, 1.4, (candidates, 1, base.size))
    q0, qd0 = _moving_start(model, terrain, 1.0)
    simulate_dynamics_batch(model, terrain, q0, qd0, U[:2, :3], dt, **options)  # compile
    simulate_dynamics(model, terrain, q0, qd0, U[0, :3], dt, **options)
    wait_for_kernels()
    best_batch = best_single = math.inf
    batch: DynamicsTrajectory | None = None
    singles: list[DynamicsTrajectory] = []
    for _ in range(max(repeats, 1)):
        t0 = time.perf_counter()
        batch = simulate_dynamics_batch(model, terrain, q0, qd0, U, dt, **options)
        best_batch = min(best_batch, time.perf_counter() - t0)
        t0 = time.perf_counter()
        singles = [simulate_dynamics(model, terrain, q0, qd0, U[n], dt, **options)
                   for n in range(candidates)]
        best_single = min(best_single, time.perf_counter() - t0)
    same = batch is not None and all(np.array_equal(batch.q[n], s.q)
                                     for n, s in enumerate(singles))
    steps = candidates * T
    return {"candidates": candidates, "steps": T, "dt": dt, "options": dict(options),
            "batch_wall_s": best_batch, "single_wall_s": best_single,
            "batch_candidate_steps_per_s": steps / best_batch,
            "single_candidate_steps_per_s": steps / best_single,
            "speedup": best_single / best_batch, "identical": bool(same)}
