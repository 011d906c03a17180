"""Planner-facing batch rollouts: what a prediction service needs around :func:`predict`.

A sampling planner asks for C candidates x T steps many times a second and keeps only a few
samples of each (``every``). This module runs such a batch with

* a **memory estimate** made before anything is allocated (:func:`rollout_bytes`), so a service
  can refuse a batch that would not fit, naming the numbers;
* a **time budget**: candidates are computed in chunks and the run stops before a chunk that
  would end past the deadline, returning the finished candidates (:func:`rollout`);
* **honest results**: a candidate whose state becomes non-finite or leaves a height-map
  terrain is flagged :data:`INVALID` from that sample on, with the exact step
  (:func:`invalid_states`, :func:`first_invalid_steps`);
* **2D initial poses** placed on the terrain by contact initialization (:func:`place_on_terrain`,
  Seegmiller (2014) (2.27)-(2.32));
* the **DYNAMIC** fidelity (constrained dynamics with ideal actuators) sampled and flagged like
  the kinematic ones (:func:`dynamic_flags`, :func:`friction_limits`).

No ROS here; :mod:`wmr_model.ros.prediction_node` converts messages to these arrays.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from wmr_model.contact.models import PIECEWISE_LINEAR, ROAMS, contact_setup
from wmr_model.dynamics.api import gravity_of
from wmr_model.errors import ParameterError
from wmr_model.kinematics import api as kin_api
from wmr_model.parameters import OptionSpec, register_options
from wmr_model.prediction.controllers import CONTROLLER_KINDS
from wmr_model.prediction.predict import (
    JOINT_LIMIT,
    PRECISIONS,
    TIPOVER_RISK,
    TRACTION_LIMIT,
    WHEEL_LIFTOFF,
    dynamic_stability_margin,
    joint_limit_flags,
    predict,
    prediction_bytes,
)
from wmr_model.terrain.surface import GRID, Terrain
from wmr_model.vehicles.model import VehicleModel

__all__ = [
    "INVALID",
    "ROLLOUT_FIDELITIES",
    "PREDICTION_OPTIONS",
    "DYNAMIC_ACTUATOR",
    "TRACTION_FRACTION",
    "LIFTOFF_FORCE_FRACTION",
    "LIFTOFF_HEIGHT_TOL",
    "sample_steps",
    "or_since_previous",
    "terrain_extent",
    "invalid_states",
    "first_invalid_steps",
    "place_on_terrain",
    "friction_limits",
    "dynamic_flags",
    "rollout_bytes",
    "Rollout",
    "rollout",
]

#: Flag bit of a sample whose state is non-finite or off the terrain (and of every later one).
INVALID = 16
ROLLOUT_FIDELITIES = ("kinematic", "enhanced", "dynamic")
#: Actuator model of DYNAMIC rollouts: commanded joint rates are imposed exactly.
DYNAMIC_ACTUATOR = "ideal"
#: TRACTION_LIMIT: tangential contact force >= this fraction of the friction limit.
TRACTION_FRACTION = 0.99
#: WHEEL_LIFTOFF (dynamics): normal force <= this fraction of the static wheel load m g / nw.
LIFTOFF_FORCE_FRACTION = 1e-3
#: WHEEL_LIFTOFF (dynamics): or a contact height error above this [m]. Not 0: a wheel placed on
#: the terrain by contact initialization sits at round-off from it (5e-17 m seen), on either
#: side depending on the CPU's floating-point contraction, and is not lifted.
LIFTOFF_HEIGHT_TOL = 1e-6
#: Option group of the integration settings shared by the prediction node, the odometry node
#: (stabilization) and ``wmr simulate`` (:func:`wmr_model.parameters.options`).
PREDICTION_OPTIONS = "prediction"

register_options(PREDICTION_OPTIONS, [
    OptionSpec("stabilization", 0.5, unit="-", lower=0.0, upper=1.0, description=(
        "Baumgarte gain sigma*dt (2.35) in [0, 1]; 0 lets wheels drift off the terrain")),
    OptionSpec("integrator", "euler", choices=("euler", "rk4"), description=(
        "euler or rk4")),
    OptionSpec("controller", "vehicle", choices=("vehicle", *CONTROLLER_KINDS), description=(
        "how body-twist commands become joint rates: vehicle (the sidecar's controller: "
        "section, naive without one) or a kind of wmr_model.prediction.controllers (naive: the "
        "open-loop flat-ground solve)")),
])

#: Near the deadline, chunks are sized to take about this long [s]: long enough that the
#: per-call overhead of predict() stays small, short enough that the time budget is honoured
#: to about this much.
CHUNK_SECONDS = 0.1
#: First (rate-measuring) chunk and smallest chunk, in candidates: kinematic / dynamic.
FIRST_CHUNK = {"kinematic": 64, "enhanced": 64, "dynamic": 4}
#: Candidates re-run at a time to locate the exact invalid step when every > 1.
RERUN_CHUNK = 64


def sample_steps(T: int, every: int) -> np.ndarray:
    """(S,) steps 0, k, 2k, ..., T kept by ``every = k`` (k capped at T; the last is T), as
    :func:`wmr_model.prediction.predict.predict` keeps them."""
    if isinstance(every, bool) or int(every) < 1 or int(T) < 1:
        raise ParameterError(f"every and T must be integers >= 1, got {every!r} and {T!r}")
    k = int(min(int(every), int(T)))
    S = (int(T) + k - 1) // k + 1
    return np.minimum(np.arange(S) * k, int(T))


def or_since_previous(flags: np.ndarray, steps: np.ndarray) -> np.ndarray:
    """(N, S) flags of the samples ``steps`` (S,), each the OR of the per-state flags (N, T+1)
    since the previous sample (sample 0: state 0 alone)."""
    starts = np.concatenate([[0], np.asarray(steps[:-1]) + 1]).astype(np.intp)
    return np.bitwise_or.reduceat(np.asarray(flags, dtype=np.uint8), starts, axis=1)


def terrain_extent(terrain: Terrain) -> tuple[float, float, float, float] | None:
    """``(x_min, x_max, y_min, y_max)`` [m] of a height-map (GRID) terrain, outside which its
    height is only the clamped edge value; None for terrains defined everywhere."""
    if terrain.kind != GRID:
        return None
    x0, y0, dx, dy = (float(v) for v in terrain.params[:4])
    ny, nx = terrain.grid.shape
    return x0, x0 + (nx - 1) * dx, y0, y0 + (ny - 1) * dy


def invalid_states(terrain: Terrain, q: np.ndarray) -> np.ndarray:
    """(...,) bool: state ``q`` (..., nq) has a non-finite entry or its body origin is outside
    the terrain's extent (:func:`terrain_extent`)."""
    q = np.asarray(q)
    bad = ~np.all(np.isfinite(q), axis=-1)
    ext = terrain_extent(terrain)
    if ext is not None:
        x, y = q[..., 4], q[..., 5]
        with np.errstate(invalid="ignore"):
            bad |= (x < ext[0]) | (x > ext[1]) | (y < ext[2]) | (y > ext[3])
    return bad


def first_invalid_steps(bad: np.ndarray, steps: np.ndarray) -> np.ndarray:
    """(N,) int32 first step of ``steps`` (S,) where ``bad`` (N, S) holds, -1 where never."""
    bad = np.asarray(bad, dtype=bool)
    first = np.argmax(bad, axis=1)
    return np.where(bad.any(axis=1), np.asarray(steps)[first], -1).astype(np.int32)


def place_on_terrain(model: VehicleModel, terrain: Terrain, q: np.ndarray,
                     held_joints: tuple[int, ...] = ()) -> np.ndarray:
    """(nq,) state ``q`` with z, roll, pitch and the passive non-wheel joints (but
    ``held_joints``, joint indices) fitted to the terrain by contact initialization,
    Seegmiller (2014) (2.27)-(2.32) (:func:`wmr_model.kinematics.initialize_contact`); x, y,
    yaw and the actuated joints stay as given; the given z is only replaced: the iteration
    starts from the neutral height above the terrain under the body."""
    q = np.array(q, dtype=float)
    h, _ = terrain.height_normal(np.array([q[4]]), np.array([q[5]]))
    q[6] = float(np.ravel(h)[0]) + float(model.neutral_state()[6])
    free = kin_api.initialization_free(model)
    for k in held_joints:
        free[6 + int(k)] = False
    out, _ = kin_api.initialize_contact(model, terrain, q, free=free)
    return out


def friction_limits(model: VehicleModel) -> tuple[np.ndarray, np.ndarray]:
    """Per-wheel friction coefficients (nw, 2) ``[mu_x, mu_y]`` (NaN: no closed-form limit) and
    whether each wheel's limit is a cone (nw,) bool, from the default contact setup."""
    cs = contact_setup(model, gravity=float(np.linalg.norm(gravity_of(model))))
    mu = np.full((model.nw, 2), np.nan)
    cone = np.zeros(model.nw, dtype=bool)
    for k, kind in enumerate(cs.kinds):
        p = cs.params[k]
        if kind == PIECEWISE_LINEAR:
            mu[k] = p[5], p[6]
            cone[k] = p[7] != 0.0
        elif kind == ROAMS and p[4] == 0.0:  # no cohesion: Coulomb with mu = tan(phi)
            mu[k] = math.tan(p[5])
            cone[k] = True
    return mu, cone


def dynamic_flags(model: VehicleModel, f_contact: np.ndarray, dz: np.ndarray,
                  q: np.ndarray | None = None, margin: np.ndarray | None = None,
                  tipover_margin: float = 0.0,
                  limits: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """(T+1,) flags of one dynamic simulation from its (T, nw, 3) contact forces and (T, nw)
    contact height errors; point t takes step t's values, the last point the last step's.

    WHEEL_LIFTOFF where some wheel has Δz above :data:`LIFTOFF_HEIGHT_TOL` or a normal force
    below :data:`LIFTOFF_FORCE_FRACTION` of its static load; TRACTION_LIMIT where a loaded wheel's
    tangential force reaches :data:`TRACTION_FRACTION` of its friction limit
    (:func:`friction_limits`, pass them as ``limits`` to skip recomputing). With the states
    ``q`` (T+1, nq): JOINT_LIMIT where a passive joint (suspension) is at a stop
    (:func:`wmr_model.prediction.predict.joint_limit_flags`); with the tip-over ``margin`` (T+1,)
    [m] (:func:`wmr_model.prediction.predict.dynamic_stability_margin`): TIPOVER_RISK where it is
    below ``tipover_margin``.
    """
    T = f_contact.shape[0]
    g = float(np.linalg.norm(gravity_of(model)))
    load = model.total_mass * g / max(model.nw, 1)
    fz = f_contact[:, :, 2]
    lifted = (dz > LIFTOFF_HEIGHT_TOL) | (fz <= LIFTOFF_FORCE_FRACTION * load)
    mu, cone = limits if limits is not None else friction_limits(model)
    fx, fy = np.abs(f_contact[:, :, 0]), np.abs(f_contact[:, :, 1])
    with np.errstate(invalid="ignore"):
        pyramid = (fx >= TRACTION_FRACTION * mu[:, 0] * fz) | (fy >= TRACTION_FRACTION
                                                               * mu[:, 1] * fz)
        circle = np.hypot(fx, fy) >= TRACTION_FRACTION * mu[:, 0] * fz
    limited = np.where(cone, circle, pyramid) & ~lifted & ~np.isnan(mu[:, 0])
    step = (np.where(lifted.any(axis=1), WHEEL_LIFTOFF, 0)
            | np.where(limited.any(axis=1), TRACTION_LIMIT, 0)).astype(np.uint8)
    flags = np.concatenate([step, step[-1:]]) if T else np.zeros(1, dtype=np.uint8)
    if q is not None:
        flags |= np.where(joint_limit_flags(model, q), JOINT_LIMIT, 0).astype(np.uint8)
    if margin is not None and T:  # like the other flags: point t from step t's start state
        m = np.concatenate([margin[:T], margin[T - 1:T]])
        with np.errstate(invalid="ignore"):
            flags |= np.where(m < tipover_margin, TIPOVER_RISK, 0).astype(np.uint8)
    return flags


# ---- memory estimate ----------------------------------------------------------------------------
def _chunk_scratch_per_candidate(model: VehicleModel, fidelity: str, T: int, S: int,
                                 covariance: bool) -> int:
    """Bytes one candidate of a chunk allocates inside predict / simulate_dynamics_batch."""
    nq, nv, nc, na = model.nq, model.nv, model.nc, len(model.actuated_joints)
    if fidelity == "dynamic":
        # Q, QD (T+1), IT, COST, FC (nc, 3), DZ (T), commands copy, margins and flags per state
        return 8 * ((T + 1) * (nq + nv + 2) + T * (2 + 4 * nc + na)) + (T + 1)
    return prediction_bytes(model, 1, T, S, covariance=covariance)


def rollout_bytes(model: VehicleModel, fidelity: str, C: int, T: int, every: int, *,
                  covariance: bool, response_values_per_sample: int,
                  response_bytes_per_value: int = 8, chunk: int | None = None,
                  per_candidate_extra: int = 0) -> dict[str, int]:
    """Peak memory [bytes] of :func:`rollout` for C candidates x T steps, by part.

    Parts: ``commands`` (C, T, na) float64 inputs; ``scratch``: one chunk's working arrays
    (``chunk`` candidates, default all C); ``results``: the (C, S, ...) arrays kept (states,
    rates, flags, margins, covariances); ``response``: ``response_values_per_sample`` values of
    ``response_bytes_per_value`` per candidate and sample, twice (the response arrays and their
    serialized copy), plus ``per_candidate_extra`` bytes per candidate (e.g. message objects).
    ``total`` is their sum. Nothing is allocated.
    """
    if fidelity not in ROLLOUT_FIDELITIES:
        raise ParameterError(f"fidelity: must be one of {list(ROLLOUT_FIDELITIES)}, got "
                             f"{fidelity!r}")
    S = len(sample_steps(T, every))
    B = C if chunk is None else max(1, min(int(chunk), C))
    na = len(model.actuated_joints)
    cov = covariance and fidelity != "dynamic"
    parts = {
        "commands": 8 * C * T * na,
        "scratch": B * _chunk_scratch_per_candidate(model, fidelity, T, S, cov),
        "results": C * (8 * S * (model.nq + model.nv + 1 + (36 if cov else 0)) + S + 4),
        "response": C * (2 * S * response_values_per_sample * response_bytes_per_value
                         + per_candidate_extra),
    }
    parts["total"] = sum(parts.values())
    return parts


# ---- chunked rollout ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Rollout:
    """Result of :func:`rollout`; ``N`` = ``done`` candidates (the first ones), S samples.

    Attributes:
        steps: (S,) step index of each sample (0 .. T).
        q: (N, S, nq) states ``[w, x, y, z, px, py, pz, joints]`` at the samples.
        qdot: (N, S, nv) joint-space rates used over the step starting at each sample (the
            last sample repeats the last step's); DYNAMIC: the simulated rates of the state.
        flags: (N, S) uint8, OR of the states since the previous sample, :data:`INVALID` from
            the first bad sample on.
        invalid_step: (N,) int32 first step whose state was non-finite or off the terrain,
            -1 when none (exact step, also when ``every`` > 1).
        stability_margin: (N, S) tip-over margin [m] (NaN without mass).
        ros_covariance: (N, S, 36) pose covariance in ROS layout, or None.
        done: candidates computed (== N); C unless the time budget ran out.
        requested: C.
        seconds: wall time [s] spent.
    """

    steps: np.ndarray
    q: np.ndarray
    qdot: np.ndarray
    flags: np.ndarray
    invalid_step: np.ndarray
    stability_margin: np.ndarray
    ros_covariance: np.ndarray | None
    done: int
    requested: int
    seconds: float

    @property
    def partial(self) -> bool:
        """True when fewer than the requested candidates were computed."""
        return self.done < self.requested


def _rate_rows(S: int, per_step: int) -> np.ndarray:
    """Rows of the per-step arrays (``per_step`` rows) giving each of S samples its rate."""
    return np.minimum(np.arange(S), max(per_step - 1, 0))


def _kinematic_chunk(model, terrain, q0, commands, dt, every, kw, ctrl=None):
    if ctrl is None:
        p = predict(model, terrain, q0, commands, dt, every=every, **kw)
    else:  # closed-loop controller: commands are twists (B, T, 2); float64 only
        from wmr_model.prediction.controllers import predict_twist_steps

        kw = {k: v for k, v in kw.items() if k != "precision"}
        p = predict_twist_steps(model, terrain, q0, commands, dt, controller=ctrl, every=every,
                                **kw)
    S = p.q.shape[1]
    qdot = p.qdot[:, _rate_rows(S, p.qdot.shape[1])]
    cov = p.ros_covariance
    return p.q, qdot, p.flags, p.stability_margin, cov


def _dynamic_margin(model, terrain, q, qdot, dt) -> np.ndarray:
    """:func:`dynamic_stability_margin` of one trajectory; where its geometry is degenerate
    (the margin's plane basis divides by zero, e.g. a body tumbling at extreme rates) the
    margin of that state is NaN (undefined) and the others are kept. The per-state fallback
    uses the 3-state window around each state, whose central difference is the trajectory's."""
    try:
        return dynamic_stability_margin(model, terrain, q, qdot, dt)
    except (ZeroDivisionError, FloatingPointError):
        pass
    n = q.shape[0]
    out = np.full(n, np.nan)
    for i in range(n):
        lo, hi = max(i - 1, 0), min(i + 2, n)
        try:
            out[i] = dynamic_stability_margin(model, terrain, q[lo:hi], qdot[lo:hi], dt)[i - lo]
        except (ZeroDivisionError, FloatingPointError):
            pass
    return out


def _dynamic_chunk(model, terrain, q0, qdot0, commands, dt, steps, limits, ctrl=None):
    from wmr_model.dynamics.simulate import simulate_dynamics_batch

    if ctrl is None:
        runs = simulate_dynamics_batch(model, terrain, q0, qdot0, commands, dt,
                                       actuator=DYNAMIC_ACTUATOR)
    else:  # closed-loop controller: commands are twists (B, T, 2)
        from wmr_model.prediction.controllers import simulate_dynamics_controlled

        runs = simulate_dynamics_controlled(model, terrain, q0, qdot0, commands[..., 0],
                                            commands[..., 1], dt, controller=ctrl,
                                            actuator=DYNAMIC_ACTUATOR)
    n, T1 = runs.q.shape[0], runs.q.shape[1]
    flags = np.empty((n, T1), dtype=np.uint8)
    margin = np.full((n, T1), np.nan)
    bad = invalid_states(terrain, runs.q)
    for c in range(n):
        ok = int(np.argmax(bad[c])) if bad[c].any() else T1  # states before the first bad one
        if ok > 0 and model.total_mass > 0.0:
            margin[c, :ok] = _dynamic_margin(model, terrain, runs.q[c, :ok],
                                             runs.qdot[c, :ok], dt)
        with np.errstate(invalid="ignore"):
            flags[c] = dynamic_flags(model, runs.f_contact[c], runs.dz[c], runs.q[c],
                                     margin[c], limits=limits)
    return runs.q, runs.qdot, flags, margin, bad


def rollout(model: VehicleModel, terrain: Terrain, q0: np.ndarray, commands: np.ndarray,
            dt: float, *, fidelity: str = "kinematic", every: int = 1,
            qdot0: np.ndarray | None = None, deadline: float | None = None,
            slip_params: np.ndarray | Mapping[str, float] | None = None,
            Qprime: np.ndarray | None = None, integrator: str = "euler",
            stabilization: float = kin_api.DEFAULT_STABILIZATION,
            max_chunk: int | None = None, controller: Any = None,
            precision: str = "float64") -> Rollout:
    """Roll out C candidates in chunks, keeping the samples ``every`` steps, within a deadline.

    Args:
        q0: (nq,) initial state shared by all candidates.
        commands: (C, T, na) actuated joint rates per step (``model.actuated_joints`` order).
        fidelity: ``"kinematic"``, ``"enhanced"`` (:func:`wmr_model.prediction.predict.predict`) or
            ``"dynamic"`` (:func:`~wmr_model.dynamics.simulate.simulate_dynamics_batch` with
            ideal actuators, from the joint-space velocity ``qdot0`` (nv,), default zero;
            no covariance).
        deadline: ``time.perf_counter()`` value. A first chunk measures the time per
            candidate; the rest runs in one call while it is expected to take less than half
            the time left, else in chunks of about :data:`CHUNK_SECONDS`, and a chunk that
            would end after the deadline is shrunk to what fits or not started (the first
            chunk always runs). None: no limit, one call.
        slip_params, Qprime, integrator, stabilization: as :func:`predict` (kinematic and
            enhanced only).
        max_chunk: most candidates per chunk (bounds the scratch memory); default C.
        controller: when given (a :class:`wmr_model.prediction.controllers.Controller`, a kind or
            ``"vehicle"``), ``commands`` are body twists (C, T, 2) rows ``(vx, wz)`` that the
            controller turns into joint rates, at every step from the state for the
            closed-loop kinds (:func:`wmr_model.prediction.controllers.predict_twist_steps`).
        precision: as :func:`predict` (``"float32"``: the planner's float32 lanes) for
            kinematic and enhanced rollouts with open-loop commands; closed-loop controllers
            and the dynamics run float64 whatever it says.

    Every kept sample equals the unchunked computation's bit for bit (candidates are computed
    independently). A candidate with a non-finite state or one off a height map's extent gets
    :data:`INVALID` on the first bad sample and every later one, and ``invalid_step`` is the
    exact step (with ``every`` > 1 the candidate is re-run alone at every step to find it).
    """
    if fidelity not in ROLLOUT_FIDELITIES:
        raise ParameterError(f"fidelity: must be one of {list(ROLLOUT_FIDELITIES)}, got "
                             f"{fidelity!r}")
    t_start = time.perf_counter()
    u = np.ascontiguousarray(commands, dtype=float)
    if u.ndim != 3:
        raise ParameterError(f"commands: expected shape (C, T, na), got {u.shape}")
    ctrl = None
    if controller is not None:
        from wmr_model.prediction.controllers import Controller, open_loop_rates, vehicle_controller

        ctrl = controller if isinstance(controller, Controller) else vehicle_controller(
            model, controller)
        if not ctrl.feedback:
            u, ctrl = open_loop_rates(model, ctrl, u, dt, q=np.asarray(q0, dtype=float)), None
    C, T = u.shape[0], u.shape[1]
    steps = sample_steps(T, every)
    S = len(steps)
    dyn = fidelity == "dynamic"
    cov = Qprime is not None and not dyn
    out: dict[str, np.ndarray] = {
        "q": np.empty((C, S, model.nq)), "qdot": np.empty((C, S, model.nv)),
        "flags": np.zeros((C, S), dtype=np.uint8), "margin": np.empty((C, S)),
        "invalid": np.full(C, -1, dtype=np.int32)}
    if cov:  # only with Qprime, below DYNAMIC
        out["cov"] = np.empty((C, S, 36))
    kw: dict[str, Any] = dict(fidelity=fidelity, slip_params=slip_params, Qprime=Qprime,
                              integrator=integrator, stabilization=stabilization)
    if precision not in PRECISIONS:
        raise ParameterError(f"precision: must be one of {list(PRECISIONS)}, got {precision!r}")
    if precision != "float64" and not dyn:
        kw["precision"] = precision
    limits = friction_limits(model) if dyn else None
    v0 = np.zeros(model.nv) if qdot0 is None else np.asarray(qdot0, dtype=float)
    top = C if max_chunk is None else max(1, int(max_chunk))
    done = 0
    rate = None  # seconds per candidate, measured
    while done < C:
        B = _chunk_size(min(C - done, top), rate, deadline, fidelity)
        if B < 1:
            break
        t0 = time.perf_counter()
        sl = slice(done, done + B)
        if dyn:
            _dynamic_chunk_into(out, sl, model, terrain, q0, v0, u[sl], dt, steps, limits, ctrl)
        else:
            _kinematic_chunk_into(out, sl, model, terrain, q0, u[sl], dt, every, steps, kw,
                                  ctrl)
        done += B
        took = time.perf_counter() - t0
        rate = took / B if rate is None else 0.5 * (rate + took / B)
    n = done
    rcov = out.get("cov")
    return Rollout(steps=steps, q=out["q"][:n], qdot=out["qdot"][:n], flags=out["flags"][:n],
                   invalid_step=out["invalid"][:n], stability_margin=out["margin"][:n],
                   ros_covariance=None if rcov is None else rcov[:n], done=n, requested=C,
                   seconds=time.perf_counter() - t_start)


def _chunk_size(B: int, rate: float | None, deadline: float | None, fidelity: str) -> int:
    """Candidates of the next chunk (at most ``B``) under the ``deadline``: a first chunk of
    :data:`FIRST_CHUNK` measures the ``rate`` [s per candidate]; near the budget chunks of
    about :data:`CHUNK_SECONDS`; shrunk to what fits (0: nothing does)."""
    if deadline is None:
        return B
    if rate is None:  # a first chunk measures the rate
        return min(B, FIRST_CHUNK[fidelity])
    left = deadline - time.perf_counter()
    if rate * B > 0.5 * left:  # near the budget: chunks of about CHUNK_SECONDS
        B = min(B, max(FIRST_CHUNK[fidelity], int(CHUNK_SECONDS / rate)))
    if rate * B > left:  # shrink to what fits; stop when nothing does
        B = min(B, int(left / rate))
    return B


def _dynamic_chunk_into(out: dict[str, np.ndarray], sl: slice, model: VehicleModel,
                        terrain: Terrain, q0: np.ndarray, v0: np.ndarray, u: np.ndarray, dt: float,
                        steps: np.ndarray, limits: Any, ctrl: Any) -> None:
    """Run one DYNAMIC chunk (candidates ``sl``) and write its samples, flags (with
    :data:`INVALID` from the first bad step on) and first invalid steps into ``out``."""
    T = u.shape[1]
    qf, qdf, ff, mf, bad = _dynamic_chunk(model, terrain, q0, v0, u, dt, steps, limits, ctrl)
    out["q"][sl], out["qdot"][sl] = qf[:, steps], qdf[:, steps]
    out["margin"][sl] = mf[:, steps]
    first = first_invalid_steps(bad, np.arange(T + 1))
    bad = np.logical_or.accumulate(bad, axis=1)
    ff = ff | np.where(bad, INVALID, 0).astype(np.uint8)
    out["flags"][sl] = or_since_previous(ff, steps)
    out["invalid"][sl] = first


def _kinematic_chunk_into(out: dict[str, np.ndarray], sl: slice, model: VehicleModel,
                          terrain: Terrain, q0: np.ndarray, u: np.ndarray, dt: float,
                          every: int, steps: np.ndarray, kw: dict[str, Any],
                          ctrl: Any) -> None:
    """Run one KINEMATIC/ENHANCED chunk (candidates ``sl``) and write its samples,
    covariances, flags and first invalid steps (exact: re-run at every step when sampled
    sparsely) into ``out``."""
    T = u.shape[1]
    qs, qds, fs, ms, cs = _kinematic_chunk(model, terrain, q0, u, dt, every, kw, ctrl)
    out["q"][sl], out["qdot"][sl], out["margin"][sl] = qs, qds, ms
    if "cov" in out:
        out["cov"][sl] = cs
    bad = invalid_states(terrain, qs)
    fs = fs | np.where(np.logical_or.accumulate(bad, axis=1), INVALID, 0).astype(np.uint8)
    out["flags"][sl] = fs
    out["invalid"][sl] = first_invalid_steps(bad, steps)
    if len(steps) < T + 1 and bad.any():
        out["invalid"][sl] = _exact_invalid_steps(model, terrain, q0, u, dt, kw,
                                                  out["invalid"][sl], ctrl)


def _exact_invalid_steps(model, terrain, q0, u, dt, kw, sampled: np.ndarray,
                         ctrl=None) -> np.ndarray:
    """Exact first bad step of the candidates with ``sampled`` >= 0 (re-run at every step)."""
    out = sampled.copy()
    idx = np.flatnonzero(sampled >= 0)
    kw = dict(kw, Qprime=None)  # the state alone decides
    for i in range(0, idx.size, RERUN_CHUNK):
        rows = idx[i:i + RERUN_CHUNK]
        p = _kinematic_chunk(model, terrain, q0, u[rows], dt, 1, kw, ctrl)[0]
        out[rows] = first_invalid_steps(invalid_states(terrain, p), np.arange(p.shape[1]))
    return out
