"""Vehicle controllers: how body twist commands become actuated joint rates at run time.

A planner or a script commands a planar body twist ``(vx [m/s], wz [rad/s])``; the vehicle's
controller turns it into rates of the actuated joints (``model.actuated_joints`` order) at every
step. Which controller a vehicle has is part of the vehicle: the sidecar's ``controller:``
section (``config/vehicles/README.md``), read by :func:`vehicle_controller`. Kinds:

===============  ==========================================================================
``naive``        open loop: the control context of (2.37) on flat ground with a level body
                 (:func:`wmr_model.prediction.predict.twist_commands`, §2.5.1's "naive controller");
                 the default when the sidecar has no ``controller:`` section
``differential`` skid / differential drive: wheel ``k`` at ``(vx - wz y_k) / r_k``
                 (:func:`differential_rates`); no state feedback
``ackermann``    actuated steer joints driven to the Ackermann angles about the line of the
                 unsteered wheels, wheel speeds projected on the measured steer angles
                 (:func:`ackermann_rates`); closed loop
``passive_steer`` passive steering axles steered by the left/right wheel-speed difference, the
                 steer angles fed back (:func:`passive_steer_rates`, the Zoë controller of the
                 thesis' C++ library); closed loop
===============  ==========================================================================

Closed-loop controllers read the current state at every step. :func:`predict_controlled`
(kinematic and enhanced-kinematic prediction) and :func:`simulate_dynamics_controlled`
(dynamics) run them inside the compiled loops (the state part of each law is
:mod:`wmr_model.kinematics.feedback`), the open-loop kinds from rates computed up front; either
way one call.

Geometry (wheel centres, steer pivots, steer-joint signs) comes from the model at its neutral
state, in body coordinates (x forward, y left, z up; REP-103).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from wmr_model.errors import ModelError, ParameterError, ShapeError
from wmr_model.kinematics import feedback as FB
from wmr_model.kinematics.feedback import (
    Feedback,
    FeedbackInputs,
    FeedbackLaw,
    feedback_rates_batch,
)
from wmr_model.terrain.surface import Terrain
from wmr_model.vehicles.model import REVOLUTE, VehicleModel
from wmr_model.vehicles.tree import forward_kinematics

if TYPE_CHECKING:
    from wmr_model.dynamics.model import DynamicsOptions

__all__ = [
    "FLIPPERS_FLAT",
    "straight_wheel_rates",
    "track_rates",
    "sprocket_radius",
    "CONTROLLER_KINDS",
    "CONTROLLER_KEYS",
    "PASSIVE_STEER_GAIN",
    "PASSIVE_STEER_MAX_SPEED_DIFFERENCE",
    "PASSIVE_STEER_MIN_TURN_RADIUS",
    "Controller",
    "vehicle_controller",
    "twist_profile",
    "differential_rates",
    "ackermann_steer_angles",
    "ackermann_rates",
    "passive_steer_targets",
    "passive_steer_rates",
    "controller_rates",
    "feedback_parts",
    "feedback_law",
    "predict_controlled",
    "predict_twist_steps",
    "open_loop_rates",
    "simulate_dynamics_controlled",
]

CONTROLLER_KINDS = ("naive", "differential", "ackermann", "passive_steer")
#: Sidecar keys of ``controller:`` per kind (besides ``type``).
CONTROLLER_KEYS = {
    "naive": (),
    "differential": (),
    "ackermann": ("steer_joints", "min_turn_radius", "max_steer_rate"),
    "passive_steer": ("steer_joints", "gain", "max_speed_difference", "min_turn_radius"),
}
#: Zoë's steer-angle feedback gain of the thesis' C++ library [m/s per rad of steer error]: 1.
PASSIVE_STEER_GAIN = 1.0
#: Largest left/right wheel-speed difference the feedback adds [m/s] (same library): 1.5.
PASSIVE_STEER_MAX_SPEED_DIFFERENCE = 1.5
#: Smallest commanded turn radius [m] (same library): 3 m; tighter twists keep vx and turn
#: at vx / 3 m.
PASSIVE_STEER_MIN_TURN_RADIUS = 3.0
# |joint axis . body z| above this: the joint steers (turns about the body's vertical).
_STEER_AXIS_MIN = 0.9


@dataclass(frozen=True)
class Controller:
    """A vehicle's controller with the geometry it needs (build with :func:`vehicle_controller`).

    Attributes:
        kind: one of :data:`CONTROLLER_KINDS`.
        steer_joints: (ns,) joint indices of the steer joints (ackermann, passive_steer).
        steer_sign: (ns,) +1 when a positive joint angle turns the wheels left, else -1.
        steer_lower, steer_upper: (ns,) steer-angle limits [rad] in the left-positive sense.
        pivot_xy: (ns, 2) steer-axis position in body coordinates [m].
        wheel_joints: (nw,) wheel joint indices; wheel_radius: (nw,) [m].
        wheel_xy: (nw, 2) wheel-centre x, y in body coordinates [m].
        wheel_steer: (nw,) index into ``steer_joints`` of the joint that steers the wheel, -1
            for an unsteered wheel.
        wheel_col: (nw,) column of the wheel in the actuated joints, -1 when passive.
        steer_col: (ns,) column of the steer joint in the actuated joints, -1 when passive.
        na: number of actuated joints.
        rear_x: x [m] of the unsteered wheels' axle line (ackermann turn centres lie on it).
        gain: steer feedback gain [m/s per rad] (passive_steer).
        max_speed_difference: limit of the feedback's wheel-speed change [m/s] (passive_steer).
        min_turn_radius: smallest turn radius [m] (0: none).
        max_steer_rate: largest steer-joint rate [rad/s] (ackermann; inf: reach the target
            within one step).
        feedback: True when the rates depend on the current state (closed loop).
    """

    kind: str
    steer_joints: np.ndarray
    steer_sign: np.ndarray
    steer_lower: np.ndarray
    steer_upper: np.ndarray
    pivot_xy: np.ndarray
    wheel_joints: np.ndarray
    wheel_radius: np.ndarray
    wheel_xy: np.ndarray
    wheel_steer: np.ndarray
    wheel_col: np.ndarray
    steer_col: np.ndarray
    na: int
    rear_x: float = 0.0
    gain: float = PASSIVE_STEER_GAIN
    max_speed_difference: float = PASSIVE_STEER_MAX_SPEED_DIFFERENCE
    min_turn_radius: float = 0.0
    max_steer_rate: float = math.inf

    @property
    def feedback(self) -> bool:
        """True for the closed-loop kinds (ackermann, passive_steer)."""
        return self.kind in ("ackermann", "passive_steer")


def _number(cfg: Mapping[str, Any], key: str, default: float, where: str, *,
            lo: float = 0.0, unit: str = "") -> float:
    v = cfg.get(key, default)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not (v >= lo) or math.isnan(v):
        raise ModelError(f"{where}.{key} must be a number >= {lo:g}{unit}, got {v!r}")
    return float(v)


def vehicle_controller(model: VehicleModel, kind: str | None = None) -> Controller:
    """The controller of ``model`` (its sidecar ``controller:`` section), or of ``kind``.

    ``kind`` overrides the sidecar's ``type`` (keeping its other keys when the type matches);
    ``None`` or ``"vehicle"`` uses the sidecar, ``"naive"`` when it has none. Errors name the
    sidecar, the key and the allowed values, e.g. ``zoe.yaml: controller.type must be one of
    ['naive', 'differential', 'ackermann', 'passive_steer'], got 'pid'``.
    """
    cfg = dict(model.options.get("controller") or {})
    src = str(cfg.pop("source", model.source))
    where = f"{src}: controller"
    own = cfg.get("type", "naive")
    if kind is None or kind == "vehicle":
        kind = own
    elif kind != own:
        cfg = {}
    if kind not in CONTROLLER_KINDS:
        raise ModelError(f"{where}.type must be one of {list(CONTROLLER_KINDS)}, got {kind!r}")
    extra = sorted(set(cfg) - {"type", *CONTROLLER_KEYS[kind]})
    if extra:
        raise ModelError(f"{where}: unknown key(s) {extra} for type {kind!r}; allowed: "
                         f"{['type', *CONTROLLER_KEYS[kind]]}")
    T_world = np.empty((model.nf, 4, 4))
    forward_kinematics(model.parent, model.joint_type, model.axis, model.T0,
                       model.neutral_state(), T_world)
    act = [int(k) for k in model.actuated_joints]
    wj = np.asarray(model.wheel_joints, dtype=np.int64)
    wf = np.asarray(model.wheel_frame, dtype=np.int64)
    wheel_xy = np.array([T_world[f, 0:2, 3] for f in wf]).reshape(-1, 2)
    wheel_col = np.array([act.index(int(j)) if int(j) in act else -1 for j in wj], dtype=np.int64)
    steer = _steer_joints(model, cfg, kind, where, T_world)
    sframes = [k + 1 for k in steer]
    wheel_steer = np.full(len(wj), -1, dtype=np.int64)
    for i, f in enumerate(wf):
        p = int(f)
        while p > 0:
            if p in sframes:
                wheel_steer[i] = sframes.index(p)
                break
            p = int(model.parent[p])
    sign = np.array([math.copysign(1.0, (T_world[k + 1, 0:3, 0:3] @ model.axis[k + 1])[2])
                     for k in steer])
    lo = np.array([model.lower[k + 1] for k in steer], dtype=float)
    hi = np.array([model.upper[k + 1] for k in steer], dtype=float)
    s_lo = np.where(sign > 0, lo, -hi)
    s_hi = np.where(sign > 0, hi, -lo)
    steer_col = np.array([act.index(k) if k in act else -1 for k in steer], dtype=np.int64)
    for i, k in enumerate(steer):
        if not np.any(wheel_steer == i):
            raise ModelError(f"{where}.steer_joints: {model.joint_names[k]!r} steers no wheel")
    fixed = wheel_steer < 0
    rear_x = float(wheel_xy[fixed, 0].mean()) if fixed.any() else 0.0
    kw: dict[str, Any] = {}
    if kind == "passive_steer":
        if np.any(steer_col >= 0):
            bad = [model.joint_names[k] for k, c in zip(steer, steer_col) if c >= 0]
            raise ModelError(f"{where}.steer_joints: passive_steer needs passive steer joints, "
                             f"{bad} are actuated (use type ackermann)")
        kw = {"gain": _number(cfg, "gain", PASSIVE_STEER_GAIN, where, unit=" m/s per rad"),
              "max_speed_difference": _number(cfg, "max_speed_difference",
                                              PASSIVE_STEER_MAX_SPEED_DIFFERENCE, where,
                                              unit=" m/s"),
              "min_turn_radius": _number(cfg, "min_turn_radius", PASSIVE_STEER_MIN_TURN_RADIUS,
                                         where, unit=" m")}
    elif kind == "ackermann":
        if np.any(steer_col < 0):
            bad = [model.joint_names[k] for k, c in zip(steer, steer_col) if c < 0]
            raise ModelError(f"{where}.steer_joints: ackermann needs actuated steer joints, "
                             f"{bad} are passive (use type passive_steer)")
        if not fixed.any():
            raise ModelError(f"{where}: ackermann needs unsteered wheels (their axle line holds "
                             "the turn centre)")
        kw = {"min_turn_radius": _number(cfg, "min_turn_radius", 0.0, where, unit=" m"),
              "max_steer_rate": _number(cfg, "max_steer_rate", math.inf, where,
                                        unit=" rad/s")}
    pivot = np.array([T_world[k + 1, 0:2, 3] for k in steer]).reshape(-1, 2)
    # a wheel whose joint is mirrored (its spin axis points right) rolls forward at a negative
    # rate: its radius carries the sign, so every rate below is speed / signed radius
    radius = (np.asarray(model.wheel_radius, dtype=float)
              * np.where(T_world[wf, 1, 1] < 0.0, -1.0, 1.0))
    wj, radius, wheel_xy, wheel_steer, wheel_col = _with_differentials(
        model, act, wj, radius, wheel_xy, wheel_steer, wheel_col)
    if kind == "differential" and not np.any(wheel_col >= 0):
        raise ModelError(f"{where}: differential needs actuated wheels; {model.name} has none")
    return Controller(kind=kind, steer_joints=np.array(steer, dtype=np.int64), steer_sign=sign,
                      steer_lower=s_lo, steer_upper=s_hi, pivot_xy=pivot, wheel_joints=wj,
                      wheel_radius=radius,
                      wheel_xy=wheel_xy, wheel_steer=wheel_steer, wheel_col=wheel_col,
                      steer_col=steer_col, na=len(act), rear_x=rear_x, **kw)


def _with_differentials(model: VehicleModel, act: list[int], wj: np.ndarray, radius: np.ndarray,
                        xy: np.ndarray, steer: np.ndarray, col: np.ndarray):
    """The controller's driven wheels plus one per differential encoder of the sidecar
    (``options["differentials"]``): a wheel at the mean of its wheels, of their mean (signed)
    radius times the ratio (mean wheel rate = ratio x its rate), steered like them, driven
    through the encoder joint's actuated column. Its own wheels stay passive."""
    diffs = model.options.get("differentials") or {}
    if not diffs:
        return wj, radius, xy, steer, col
    names = list(model.wheel_names)
    j_, r_, xy_, s_, c_ = list(wj), list(radius), list(xy), list(steer), list(col)
    for enc, d in diffs.items():
        ws = [names.index(w) for w in d["wheels"]]
        k = model.joint_index(enc)
        j_.append(k)
        r_.append(float(np.mean([radius[w] for w in ws])) * float(d["ratio"]))
        xy_.append(np.mean([xy[w] for w in ws], axis=0))
        st = {int(steer[w]) for w in ws}
        s_.append(st.pop() if len(st) == 1 else -1)
        c_.append(act.index(k))
    return (np.array(j_, dtype=np.int64), np.array(r_), np.array(xy_).reshape(-1, 2),
            np.array(s_, dtype=np.int64), np.array(c_, dtype=np.int64))


def _steer_joints(model: VehicleModel, cfg: Mapping[str, Any], kind: str, where: str,
                  T_world: np.ndarray) -> list[int]:
    """Steer joint indices: the sidecar's ``steer_joints``, else every revolute joint turning
    about the body's vertical with a wheel below it (actuated ones for ackermann, passive ones
    for passive_steer)."""
    if kind not in ("ackermann", "passive_steer"):
        return []
    names = cfg.get("steer_joints")
    wheels = {int(j) for j in model.wheel_joints}

    def vertical(k: int) -> bool:
        a = T_world[k + 1, 0:3, 0:3] @ model.axis[k + 1]
        return model.joint_type[k + 1] == REVOLUTE and abs(float(a[2])) > _STEER_AXIS_MIN

    if names is None:
        want_act = kind == "ackermann"
        act = {int(k) for k in model.actuated_joints}
        out = [k for k in range(model.nf - 1) if k not in wheels and vertical(k)
               and (k in act) == want_act]
        if not out:
            raise ModelError(f"{where}: {kind} needs steer joints; {model.name} has no "
                             f"{'actuated' if want_act else 'passive'} revolute joint about "
                             "the vertical (give controller.steer_joints)")
        return out
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names) or not names:
        raise ModelError(f"{where}.steer_joints must be a non-empty list of joint names, "
                         f"got {names!r}")
    out = []
    for n in names:
        if n not in model.joint_names:
            raise ModelError(f"{where}.steer_joints: unknown joint {n!r}; joints: "
                             f"{list(model.joint_names)}")
        k = model.joint_index(n)
        if not vertical(k):
            raise ModelError(f"{where}.steer_joints: {n!r} is not a revolute joint about the "
                             "body's vertical axis")
        out.append(k)
    return out


def twist_profile(segments: np.ndarray, dt: float) -> tuple[np.ndarray, np.ndarray]:
    """Per-step commanded ``vx`` (N, T) [m/s] and ``wz`` (N, T) [rad/s] of twist segments.

    ``segments`` (S, 3) or (N, S, 3) rows ``(vx, wz, duration [s])``; a segment lasts
    ``round(duration / dt)`` steps; shorter candidates are padded with zero twist (stopped),
    as in :func:`wmr_model.prediction.predict.twist_commands`.
    """
    from wmr_model.prediction.predict import segment_steps

    seg, steps, T = segment_steps(segments, dt)
    vx = np.zeros((seg.shape[0], T))
    wz = np.zeros((seg.shape[0], T))
    for n in range(seg.shape[0]):
        t = 0
        for s in range(seg.shape[1]):
            k = int(steps[n, s])
            vx[n, t:t + k], wz[n, t:t + k] = seg[n, s, 0], seg[n, s, 1]
            t += k
    return vx, wz


def _wheel_rates(ctrl: Controller, speed: np.ndarray) -> np.ndarray:
    """(N, na) actuated rates with the actuated wheels at ``speed`` (N, nw) [m/s] / radius."""
    u = np.zeros((speed.shape[0], ctrl.na))
    on = ctrl.wheel_col >= 0
    u[:, ctrl.wheel_col[on]] = speed[:, on] / ctrl.wheel_radius[on]
    return u


def differential_rates(ctrl: Controller, vx: np.ndarray, wz: np.ndarray) -> np.ndarray:
    """Skid / differential drive: actuated rates (N, na) for twists ``vx``, ``wz`` (N,).

    Every actuated wheel rolls at the body-twist velocity of its centre, projected on the
    body x axis: ``omega_k = (vx - wz y_k) / r_k`` (``y_k`` the centre's lateral offset; for a
    two-wheel drive of track b, ``(vx -+ wz b/2) / r``). Other actuated joints are held.

    .. math:: \\omega_k = (v_x - \\omega_z y_k) / r_k
    """
    vx = np.atleast_1d(np.asarray(vx, dtype=float))
    wz = np.atleast_1d(np.asarray(wz, dtype=float))
    speed = vx[:, None] - wz[:, None] * ctrl.wheel_xy[None, :, 1]
    return _wheel_rates(ctrl, speed)


def _limit_turn(vx: np.ndarray, wz: np.ndarray, r_min: float) -> np.ndarray:
    """``wz`` with |vx / wz| >= ``r_min`` (the turn radius limit; vx kept)."""
    if r_min <= 0.0:
        return wz
    w_max = np.abs(vx) / r_min
    return np.clip(wz, -w_max, w_max)


def ackermann_steer_angles(ctrl: Controller, vx: np.ndarray, wz: np.ndarray) -> np.ndarray:
    """Ackermann steer angles (N, ns) [rad, left positive] for twists ``vx``, ``wz`` (N,).

    The turn centre lies on the unsteered wheels' axle line ``x = x_r`` at ``y = vx / wz``; a
    wheel at ``(x_k, y_k)`` then rolls without slip when it points along its velocity
    ``wz (-(y_k - R), x_k - x_r)``:

    .. math:: \\tan\\delta_k = \\frac{\\omega_z (x_k - x_r)}{v_x - \\omega_z y_k}

    (the steer joint's wheels' mean position; clipped to the joint's limits).
    """
    vx = np.atleast_1d(np.asarray(vx, dtype=float))
    wz = _limit_turn(vx, np.atleast_1d(np.asarray(wz, dtype=float)), ctrl.min_turn_radius)
    ns = len(ctrl.steer_joints)
    xy = np.array([ctrl.wheel_xy[ctrl.wheel_steer == i].mean(axis=0) for i in range(ns)])
    xy = xy.reshape(ns, 2)
    num = wz[:, None] * (xy[None, :, 0] - ctrl.rear_x)
    den = vx[:, None] - wz[:, None] * xy[None, :, 1]
    s = np.where(den < 0.0, -1.0, 1.0)
    return np.clip(np.arctan2(s * num, np.abs(den)), ctrl.steer_lower, ctrl.steer_upper)


def ackermann_rates(ctrl: Controller, q: np.ndarray, vx: np.ndarray, wz: np.ndarray,
                    dt: float) -> np.ndarray:
    """Ackermann steering, closed loop: actuated rates (N, na) at the states ``q`` (N, nq).

    Steer joints turn toward :func:`ackermann_steer_angles` at ``(target - measured) / dt``
    (within ``max_steer_rate``): the target is reached within one step. Each actuated wheel
    rolls at its no-slip velocity ``v_k = wz (-(y_k - R), x_k - x_r)`` projected on its measured
    heading ``delta_k`` (0 for unsteered wheels), i.e.

    .. math:: \\omega_k = \\big[(v_x - \\omega_z y_k)\\cos\\delta_k
              + \\omega_z (x_k - x_r)\\sin\\delta_k\\big] / r_k

    which is ``(vx - wz y_k) / (r_k cos delta_k)`` once the steer angle has reached its target.
    The state part is :func:`wmr_model.kinematics.feedback.feedback_rates`.
    """
    return _feedback_rates(ctrl, q, vx, wz, dt)


def passive_steer_targets(ctrl: Controller, vx: np.ndarray,
                          wz: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Targets of the passive-steer controller for twists ``vx``, ``wz`` (N,).

    The turn radius is limited to ``min_turn_radius`` (``wz`` reduced, ``vx`` kept); the turn
    centre is on the body's y axis at ``R = vx / wz``. Axle ``j`` pivoting at ``x_j`` then
    points along its pivot's velocity ``(vx, wz x_j)``: steer angle and pivot speed

    .. math:: \\delta^*_j = \\arctan\\frac{\\omega_z x_j}{v_x}, \\qquad
              v_j = v_x / \\cos\\delta^*_j

    Returns ``(delta_target (N, ns) [rad], pivot_speed (N, ns) [m/s], wz (N,) limited)``.
    """
    vx = np.atleast_1d(np.asarray(vx, dtype=float))
    wz = _limit_turn(vx, np.atleast_1d(np.asarray(wz, dtype=float)), ctrl.min_turn_radius)
    s = np.where(vx < 0.0, -1.0, 1.0)[:, None]
    lat = wz[:, None] * ctrl.pivot_xy[None, :, 0]
    target = np.clip(np.arctan2(s * lat, np.abs(vx)[:, None]), ctrl.steer_lower,
                     ctrl.steer_upper)
    return target, s * np.hypot(vx[:, None], lat), wz


def passive_steer_rates(ctrl: Controller, q: np.ndarray, vx: np.ndarray,
                        wz: np.ndarray) -> np.ndarray:
    """Passive-steer feedback (Zoë), closed loop: actuated rates (N, na) at states ``q``.

    Feed-forward: a wheel at lateral offset ``y_k`` from its axle's pivot rolls at
    ``v_j - wz y_k`` (:func:`passive_steer_targets`; unsteered wheels at ``vx - wz y_k``).
    Feedback: the steer error turns the axle through the left/right speed difference,

    .. math:: \\Delta v_j = \\mathrm{clip}\\big(K (\\delta^*_j - \\delta_j),
              \\pm\\Delta v_{max}\\big), \\qquad
              v_k = v_j - \\omega_z y_k - \\Delta v_j\\,\\mathrm{sign}(y_k)

    with gain ``K`` = ``gain`` (1 m/s per rad) and ``Delta v_max`` = ``max_speed_difference``
    (1.5 m/s), the values of the thesis' C++ library Zoë controller; rates are ``v_k / r_k``.
    The state part is :func:`wmr_model.kinematics.feedback.feedback_rates`.
    """
    return _feedback_rates(ctrl, q, vx, wz, 0.0)


def _passive_steer_offsets(ctrl: Controller) -> np.ndarray:
    """(nw,) lateral offset of each wheel from its axle's pivot (unsteered: from the body x
    axis) [m]."""
    j = np.maximum(ctrl.wheel_steer, 0)  # passive_steer has >= 1 steer joint
    steered = ctrl.wheel_steer >= 0
    return ctrl.wheel_xy[:, 1] - np.where(steered, ctrl.pivot_xy[j, 1], 0.0)


def feedback_parts(ctrl: Controller, vx: np.ndarray, wz: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The twist-only parts of a closed-loop controller for twists ``vx``, ``wz`` (M,):
    steer-angle targets (M, ns) and the feed-forward wheel-speed terms ``a``, ``b`` (M, nw)
    of :mod:`wmr_model.kinematics.feedback`."""
    vx = np.atleast_1d(np.asarray(vx, dtype=float))
    wz = np.atleast_1d(np.asarray(wz, dtype=float))
    if ctrl.kind == "passive_steer":
        target, v_pivot, wz = passive_steer_targets(ctrl, vx, wz)
        j = np.maximum(ctrl.wheel_steer, 0)
        base = np.where(ctrl.wheel_steer >= 0, v_pivot[:, j], vx[:, None])
        a = base - wz[:, None] * _passive_steer_offsets(ctrl)
        return target, a, np.zeros_like(a)
    if ctrl.kind == "ackermann":
        wz = _limit_turn(vx, wz, ctrl.min_turn_radius)
        target = ackermann_steer_angles(ctrl, vx, wz)
        x, y = ctrl.wheel_xy[:, 0], ctrl.wheel_xy[:, 1]
        return target, vx[:, None] - wz[:, None] * y, wz[:, None] * (x - ctrl.rear_x)
    raise ParameterError(f"feedback_parts: the {ctrl.kind!r} controller is open loop")


def feedback_law(ctrl: Controller, dt: float, actuated_v: np.ndarray | None = None
                 ) -> FeedbackLaw:
    """The :class:`~wmr_model.kinematics.feedback.FeedbackLaw` of a closed-loop controller for
    steps of ``dt`` [s]; ``actuated_v`` (na,): joint-space velocity index of each actuated
    joint (for the compiled loop; default unused zeros)."""
    kind = {"passive_steer": FB.PASSIVE_STEER, "ackermann": FB.ACKERMANN}.get(ctrl.kind)
    if kind is None:
        raise ParameterError(f"feedback_law: the {ctrl.kind!r} controller is open loop")
    av = np.zeros(ctrl.na, dtype=np.int64) if actuated_v is None else actuated_v
    sign = np.sign(_passive_steer_offsets(ctrl)) if kind == FB.PASSIVE_STEER \
        else np.zeros(ctrl.wheel_col.shape[0])
    i64 = np.int64
    return FeedbackLaw(kind, np.ascontiguousarray(av, dtype=i64),
                       np.ascontiguousarray(7 + ctrl.steer_joints, dtype=i64),
                       np.ascontiguousarray(ctrl.steer_sign, dtype=float),
                       np.ascontiguousarray(ctrl.steer_col, dtype=i64),
                       np.ascontiguousarray(ctrl.wheel_col, dtype=i64),
                       np.ascontiguousarray(ctrl.wheel_radius, dtype=float),
                       np.ascontiguousarray(ctrl.wheel_steer, dtype=i64),
                       np.ascontiguousarray(sign, dtype=float), float(ctrl.gain),
                       float(ctrl.max_speed_difference), float(ctrl.max_steer_rate), float(dt))


def _closed_loop(model: VehicleModel, ctrl: Controller, vx: np.ndarray, wz: np.ndarray,
                 dt: float) -> Feedback:
    """The :class:`~wmr_model.kinematics.feedback.Feedback` that runs a closed-loop controller
    inside the compiled loops for the twists ``vx``, ``wz`` (N, T)."""
    N, T = vx.shape
    parts = feedback_parts(ctrl, vx.ravel(), wz.ravel())
    inputs = FeedbackInputs(*(np.ascontiguousarray(f.reshape(N, T, f.shape[1])) for f in parts))
    return Feedback(feedback_law(ctrl, dt, 6 + model.actuated_joints), inputs)


def _feedback_rates(ctrl: Controller, q: np.ndarray, vx: np.ndarray, wz: np.ndarray,
                    dt: float) -> np.ndarray:
    """Actuated rates (N, na) of a closed-loop controller at the states ``q`` (N, nq)."""
    q = np.ascontiguousarray(np.atleast_2d(np.asarray(q, dtype=float)))
    target, a, b = feedback_parts(ctrl, vx, wz)
    u = np.empty((q.shape[0], ctrl.na))
    feedback_rates_batch(feedback_law(ctrl, dt), np.ascontiguousarray(target),
                         np.ascontiguousarray(a), np.ascontiguousarray(b), q, u)
    return u


def controller_rates(ctrl: Controller, q: np.ndarray, vx: np.ndarray, wz: np.ndarray,
                     dt: float) -> np.ndarray:
    """Actuated rates (N, na) of ``ctrl`` at states ``q`` (N, nq) for twists (N,) (not naive)."""
    if ctrl.kind == "differential":
        return differential_rates(ctrl, vx, wz)
    if ctrl.kind == "ackermann":
        return ackermann_rates(ctrl, q, vx, wz, dt)
    if ctrl.kind == "passive_steer":
        return passive_steer_rates(ctrl, q, vx, wz)
    raise ParameterError(f"controller_rates: the {ctrl.kind!r} controller is open loop; use "
                         "wmr_model.prediction.predict.twist_commands")


def _controller(model: VehicleModel, controller: Controller | str | None) -> Controller:
    if isinstance(controller, Controller):
        return controller
    return vehicle_controller(model, controller)


def open_loop_rates(model: VehicleModel, controller: Controller | str | None,
                    twist: np.ndarray, dt: float, q: np.ndarray | None = None) -> np.ndarray:
    """Actuated rates (N, T, na) of an open-loop controller (naive, differential) for the
    per-step twists ``twist`` (N, T, 2); ``q`` (nq,) seeds the naive solve's joints."""
    from wmr_model.prediction.predict import twist_commands

    ctrl = _controller(model, controller)
    tw = np.asarray(twist, dtype=float)
    if ctrl.feedback:
        raise ParameterError(f"open_loop_rates: the {ctrl.kind} controller is closed loop; "
                             "its rates depend on the state at each step")
    if ctrl.kind == "naive":
        seg = np.concatenate([tw, np.full(tw.shape[:2] + (1,), float(dt))], axis=2)
        return twist_commands(model, seg, dt, q=q)
    N, T = tw.shape[:2]
    return differential_rates(ctrl, tw[..., 0].ravel(), tw[..., 1].ravel()).reshape(N, T,
                                                                                     ctrl.na)


def _rows(a: Any, t0: int, t1: int, tail: int) -> Any:
    """Rows ``t0:t1`` of the step axis of a (T', tail) or (N, T', tail) array (None kept)."""
    if a is None:
        return None
    a = np.asarray(a, dtype=float)
    return a[t0:t1] if a.ndim == 2 else a[:, t0:t1]


def predict_controlled(model: VehicleModel, terrain: Terrain, q0: np.ndarray,
                       segments: np.ndarray, dt: float, *,
                       controller: Controller | str | None = None, **kwargs: Any):
    """:func:`wmr_model.prediction.predict.predict` driven by twist segments through a controller.

    Args:
        q0: (nq,) or (N, nq) start states.
        segments: (S, 3) or (N, S, 3) rows ``(vx [m/s], wz [rad/s], duration [s])``.
        controller: a :class:`Controller`, a kind of :data:`CONTROLLER_KINDS`, or None / the
            string ``"vehicle"`` for the vehicle's own (sidecar ``controller:``).
        kwargs: keywords of :func:`~wmr_model.prediction.predict.predict`.

    ``naive`` is :func:`~wmr_model.prediction.predict.predict_twist` (open loop); ``differential``
    is one :func:`predict` call with its rates; the closed-loop kinds are one :func:`predict` call
    too, their law evaluated inside its compiled loop at each candidate's state at the start of
    each step (:mod:`wmr_model.kinematics.feedback`). The result is a
    :class:`~wmr_model.prediction.predict.Prediction` like :func:`predict`'s.
    """
    from wmr_model.prediction.predict import predict_twist

    ctrl = _controller(model, controller)
    if ctrl.kind == "naive":
        return predict_twist(model, terrain, q0, segments, dt, **kwargs)
    vx, wz = twist_profile(segments, dt)
    return predict_twist_steps(model, terrain, q0, np.stack([vx, wz], axis=-1), dt,
                               controller=ctrl, **kwargs)


def predict_twist_steps(model: VehicleModel, terrain: Terrain, q0: np.ndarray,
                        twist: np.ndarray, dt: float, *,
                        controller: Controller | str | None = None, **kwargs: Any):
    """:func:`predict_controlled` for a commanded twist per step: ``twist`` (T, 2) or (N, T, 2)
    rows ``(vx [m/s], wz [rad/s])`` (the naive controller converts it as one-step segments)."""
    from wmr_model.prediction.predict import predict, predict_twist

    ctrl = _controller(model, controller)
    tw = np.asarray(twist, dtype=float)
    tw = tw[None] if tw.ndim == 2 else tw
    if tw.ndim != 3 or tw.shape[2] != 2:
        raise ShapeError(f"twist: expected shape (T, 2) or (N, T, 2) rows (vx, wz), got "
                         f"{np.shape(twist)}")
    if not np.all(np.isfinite(tw)):
        raise ParameterError("twist: must be finite")
    if ctrl.kind == "naive":
        seg = np.concatenate([tw, np.full(tw.shape[:2] + (1,), float(dt))], axis=2)
        q0a = np.asarray(q0, dtype=float)
        return predict_twist(model, terrain, q0a, seg, dt, **kwargs)
    vx, wz = tw[..., 0], tw[..., 1]
    N, T = vx.shape
    if not ctrl.feedback:
        u = differential_rates(ctrl, vx.ravel(), wz.ravel()).reshape(N, T, ctrl.na)
        return predict(model, terrain, q0, u, dt, **kwargs)
    fb = _closed_loop(model, ctrl, vx, wz, dt)
    return predict(model, terrain, q0, np.zeros((N, T, ctrl.na)), dt, feedback=fb, **kwargs)


def simulate_dynamics_controlled(model: VehicleModel, terrain: Terrain, q0: np.ndarray,
                                 qdot0: np.ndarray, vx: np.ndarray, wz: np.ndarray, dt: float,
                                 *, controller: Controller | str | None = None,
                                 options: DynamicsOptions | None = None, **keywords: Any):
    """:func:`wmr_model.dynamics.simulate_dynamics` with commands from a controller.

    ``vx``, ``wz`` (T,) are the commanded twist per step [m/s, rad/s], or (N, T) for N runs at
    once (then ``q0``, ``qdot0`` may be (N, nq), (N, nv) and the result has a leading N axis,
    as :func:`~wmr_model.dynamics.simulate.simulate_dynamics_batch`'s); ``options`` and
    ``keywords`` are those of :func:`simulate_dynamics` (a
    :class:`~wmr_model.dynamics.model.DynamicsOptions` whose fields the keywords replace).
    Open-loop kinds compute all T commands first (naive:
    :func:`wmr_model.prediction.predict.twist_commands` from ``q0``'s joints); closed-loop kinds
    evaluate their law inside the compiled loop at the state at the start of each step
    (:mod:`wmr_model.kinematics.feedback`). Either way it is one call of the compiled loop.
    """
    from wmr_model.dynamics.model import DynamicsOptions
    from wmr_model.dynamics.simulate import DynamicsTrajectory, simulate_dynamics_batch

    opts = DynamicsOptions.of(options, keywords)
    ctrl = _controller(model, controller)
    vx = np.asarray(vx, dtype=float)
    wz = np.asarray(wz, dtype=float)
    if vx.shape != wz.shape or vx.ndim not in (1, 2) or vx.shape[-1] == 0:
        raise ShapeError(f"vx, wz: expected two (T,) or (N, T) arrays, got {vx.shape} and "
                         f"{wz.shape}")
    if not (np.all(np.isfinite(vx)) and np.all(np.isfinite(wz))):
        raise ParameterError("vx, wz: must be finite")
    single = vx.ndim == 1
    vx, wz = np.atleast_2d(vx), np.atleast_2d(wz)
    N, T = vx.shape
    fb = None
    if ctrl.kind == "naive":
        from wmr_model.prediction.predict import twist_commands

        q0a = np.atleast_2d(np.asarray(q0, dtype=float))
        U = np.stack([twist_commands(model, np.stack([vx[n], wz[n], np.full(T, dt)], axis=1),
                                     dt, q=q0a[n if q0a.shape[0] > 1 else 0])[0]
                      for n in range(N)])
    elif not ctrl.feedback:
        U = differential_rates(ctrl, vx.ravel(), wz.ravel()).reshape(N, T, ctrl.na)
    else:
        fb = _closed_loop(model, ctrl, vx, wz, dt)
        U = np.zeros((N, T, ctrl.na))
    run = simulate_dynamics_batch(model, terrain, q0, qdot0, U, dt, opts, feedback=fb)
    if not single:
        return run
    return DynamicsTrajectory(run.t, run.q[0], run.qdot[0], run.iterations[0], run.cost[0],
                              run.f_contact[0], run.dz[0], run.contact_models)


# Command generators of the experiments and of the track-slip calibration (open loop).

def straight_wheel_rates(model: VehicleModel, speed: float) -> np.ndarray:
    """Actuated-joint rates (na,) of the naive flat-ground controller: every wheel at speed/r.

    Non-wheel actuated joints (steering) are held still; §2.5.1 "drove all wheels at equal
    speeds".
    """
    wheel_rate = {int(j): speed / r for j, r in zip(model.wheel_joints, model.wheel_radius)}
    return np.array([wheel_rate.get(int(k), 0.0) for k in model.actuated_joints])


# Absolem flipper angle [rad] that lifts the flippers off flat ground: only the main tracks touch.
FLIPPERS_FLAT = -0.6


def sprocket_radius(model: VehicleModel) -> float:
    t = int(np.flatnonzero(np.array(model.track_names) == "left")[0])
    k = int(np.flatnonzero(model.track_of == t)[0])
    M = model.track_path.shape[1]
    return float(np.linalg.norm(model.track_path[k, M // 2, 3:6]))


def track_rates(model: VehicleModel, left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Actuated joint rates (T, 6): sprockets from belt speeds [m/s], flippers held."""
    r = sprocket_radius(model)
    u = np.zeros((len(left), len(model.actuated_joints)))
    u[:, 0] = np.asarray(left) / r
    u[:, 1] = np.asarray(right) / r
    return u
