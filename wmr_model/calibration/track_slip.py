"""Track-slip calibration: one parameter set for spins and arcs (issue 9).

Synthetic IPEM runs of a tracked vehicle whose ground truth is the Janosi-Hanamoto skid-steer
model of :mod:`wmr_model.kinematics.skid_steer` (turn-radius-dependent yaw efficiency), calibrated
with the offline IPEM (:func:`wmr_model.calibration.offline.fit_systematic`, (3.44)) and the 3D
enhanced-kinematics predictor (:class:`~wmr_model.calibration.predictors.ModelPredictor`):

* :func:`truth_vehicle` - the skid-steer truth with the track length and gauge of a compiled
  tracked model (its ``left``/``right`` main tracks);
* :func:`track_slip_log` - a log of manoeuvres (spins, arcs of given radii, straights) at
  constant belt speeds: steady-state truth twist per manoeuvre, exact planar poses, Gaussian
  pose noise (GPS/INS-like), sprocket rates, flipper angles as pot readings;
* :class:`PlanarSlipPredictor` - the slip law on the ideal differential drive of the belts;
* :func:`manoeuvre_intervals` - calibration intervals inside the manoeuvres, labelled by class;
* :func:`class_errors` - per-class pose errors of a calibrated predictor against the noise-free
  truth (model error) or the noisy log (residuals).

Parameter sets compared (:data:`SEED_003_SET`, :data:`TURN_RATIO_SET`): seed 003 §V calibrates
a linear gain and an angular gain (steering efficiency) per vehicle, which in the thesis'
vocabulary are ``slip.p2`` (forward speed scaled by 1 + p2) and ``slip.p6`` (yaw rate scaled by
1 + p6); the extended set adds the turn-ratio yaw slip ``slip.p7``, ``slip.p8``
(:func:`wmr_model.kinematics.enhanced.cg_slip_velocity`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from wmr_model import kinematics as kin
from wmr_model.calibration.logs import CalibrationLog
from wmr_model.calibration.predictors import (
    IntervalPrediction,
    IntervalPredictor,
    planar_interval,
)
from wmr_model.calibration.residuals import (
    component_indices,
    pose_residual,
    quat_multiply,
)
from wmr_model.calibration.synthetic import _exp_quat
from wmr_model.errors import ModelError, ParameterError
from wmr_model.kinematics.enhanced import DEFAULT_SLIP_AXES, cg_slip_velocity
from wmr_model.kinematics.skid_steer import SkidSteerVehicle, steady_state_motion
from wmr_model.parameters import get_spec, slip_vector
from wmr_model.prediction.controllers import FLIPPERS_FLAT, track_rates
from wmr_model.spatial import STANDARD_GRAVITY
from wmr_model.terrain.surface import flat
from wmr_model.vehicles.model import VehicleModel
from wmr_model.vehicles.reference_models import integrate_planar_step

__all__ = [
    "SEED_003_SET",
    "TURN_RATIO_SET",
    "Manoeuvre",
    "TrackSlipRun",
    "PlanarSlipPredictor",
    "track_geometry",
    "truth_vehicle",
    "belt_speeds",
    "standard_manoeuvres",
    "track_slip_log",
    "manoeuvre_intervals",
    "class_errors",
]

#: Seed 003's linear and angular gain as slip coefficients.
SEED_003_SET = ("slip.p2", "slip.p6")
#: The same plus the turn-ratio yaw slip p7, p8.
TURN_RATIO_SET = ("slip.p2", "slip.p6", "slip.p7", "slip.p8")
# Sub-points within this height [m] of a main track's lowest one form its flat ground run.
_GROUND_RUN_TOL = 1e-6
# Encoder sample this long [s] before a switch of belt speeds still has the old speeds.
_SWITCH_EPS = 1e-6


@dataclass(frozen=True)
class Manoeuvre:
    """Constant belt-speed manoeuvre, commanded as a no-slip turn.

    Attributes:
        radius: commanded turn radius [m] of the body origin (0: spin in place; ``inf``:
            straight); the sign of ``speed`` and ``turn`` choose the direction.
        speed: speed [m/s] of the faster belt (negative: reverse).
        turn: +1 turn left, -1 turn right (ignored for straights).
        duration: [s].
    """

    radius: float
    speed: float
    turn: int = 1
    duration: float = 4.0

    @property
    def label(self) -> str:
        """Class name: ``spin``, ``straight`` or ``arc R=<radius>``."""
        if self.radius == 0.0:
            return "spin"
        if math.isinf(self.radius):
            return "straight"
        return f"arc R={self.radius:g}"


@dataclass(frozen=True)
class TrackSlipRun:
    """A synthetic track-slip run.

    Attributes:
        log: the noisy calibration log; truth_log: the same without pose noise.
        manoeuvres: the manoeuvres in order; start: (n,) their start times [s].
        twist: (n, 3) truth ``(v_lon, v_lat, yaw_rate)`` of each manoeuvre.
        belts: (n, 2) belt speeds (left, right) [m/s].
        vehicle: the skid-steer truth.
    """

    log: CalibrationLog
    truth_log: CalibrationLog
    manoeuvres: tuple[Manoeuvre, ...]
    start: np.ndarray
    twist: np.ndarray
    belts: np.ndarray
    vehicle: SkidSteerVehicle


def track_geometry(model: VehicleModel) -> tuple[float, float]:
    """Ground-run length L [m] and gauge B [m] of the ``left`` and ``right`` main tracks.

    L: x extent of the track's lowest contact sub-points (its flat lower run, in the body
    frame); B: lateral distance of the two tracks. Raises ModelError without such tracks or when
    a main track is not carried by the body frame.
    """
    L = []
    y = []
    for name in ("left", "right"):
        if name not in model.track_names:
            raise ModelError(f"{model.name}: no track {name!r}; tracks are "
                             f"{list(model.track_names)}")
        sel = np.flatnonzero(model.track_of == model.track_names.index(name))
        if np.any(model.track_frame[sel] != 0):
            raise ModelError(f"{model.name}: track {name!r} must be carried by the body frame")
        pts = model.track_path[sel, :, 0:3].reshape(-1, 3)
        low = pts[pts[:, 2] <= pts[:, 2].min() + _GROUND_RUN_TOL]
        L.append(float(low[:, 0].max() - low[:, 0].min()))
        y.append(float(np.mean(low[:, 1])))
    return 0.5 * (L[0] + L[1]), abs(y[0] - y[1])


def truth_vehicle(model: VehicleModel, **kw) -> SkidSteerVehicle:
    """:class:`SkidSteerVehicle` with ``model``'s track length and gauge; ``kw`` sets the rest
    (mass, friction, shear modulus ...)."""
    L, B = track_geometry(model)
    return SkidSteerVehicle(length=L, gauge=B, **kw)


def belt_speeds(m: Manoeuvre, gauge: float) -> tuple[float, float]:
    """No-slip belt speeds (left, right) [m/s] of a manoeuvre for track gauge B [m]:
    ``V = omega (R -+ B/2)`` with the faster belt at ``speed``."""
    if m.radius < 0.0 or math.isnan(m.radius):
        raise ParameterError(f"manoeuvre radius: must be >= 0 m or inf, got {m.radius}")
    if math.isinf(m.radius):
        return m.speed, m.speed
    b = 0.5 * gauge
    inner, outer = m.speed * (m.radius - b) / (m.radius + b), m.speed
    return (inner, outer) if m.turn > 0 else (outer, inner)


def standard_manoeuvres(radii: Sequence[float] = (0.0, 0.25, 0.5, 1.0, 2.0, 4.0),
                        speed: float = 0.25, duration: float = 4.0,
                        straight: bool = True) -> list[Manoeuvre]:
    """Each radius turning left then right (forward), plus a straight forward and back."""
    out = []
    for R in radii:
        out += [Manoeuvre(float(R), speed, 1, duration), Manoeuvre(float(R), speed, -1, duration)]
    if straight:
        out += [Manoeuvre(math.inf, speed, 1, duration), Manoeuvre(math.inf, -speed, 1, duration)]
    return out


def _yaw_quat(yaw: np.ndarray) -> np.ndarray:
    q = np.zeros(np.shape(yaw) + (4,))
    q[..., 0] = np.cos(0.5 * yaw)
    q[..., 3] = np.sin(0.5 * yaw)
    return q


def _planar_poses(twists: np.ndarray, durations: np.ndarray, t: np.ndarray,
                  start: np.ndarray) -> np.ndarray:
    """(M, 3) x, y, yaw at times ``t`` of piecewise constant body twists ``(v_lon, v_lat,
    yaw_rate)`` (exact: a constant planar twist moves along a circular arc at the speed
    ``|v|``, heading ``yaw + atan2(v_lat, v_lon)``, :func:`integrate_planar_step`)."""
    out = np.empty((len(t), 3))
    pose = (0.0, 0.0, 0.0)
    seg = np.clip(np.searchsorted(start, t, side="right") - 1, 0, len(twists) - 1)
    ends = [pose]
    for i, (vx, vy, w) in enumerate(twists):
        beta = math.atan2(vy, vx)
        x, y, th = integrate_planar_step(pose[0], pose[1], pose[2] + beta, math.hypot(vx, vy),
                                         w, durations[i])
        pose = (x, y, th - beta)
        ends.append(pose)
    for k, (tk, i) in enumerate(zip(t, seg)):
        vx, vy, w = twists[i]
        beta = math.atan2(vy, vx)
        x0, y0, th0 = ends[i]
        x, y, th = integrate_planar_step(x0, y0, th0 + beta, math.hypot(vx, vy), w,
                                         tk - start[i])
        out[k] = (x, y, th - beta)
    return out


def track_slip_log(model: VehicleModel, manoeuvres: Sequence[Manoeuvre],
                   vehicle: SkidSteerVehicle | None = None, *, pose_rate: float = 10.0,
                   joint_rate: float = 50.0, pose_std: tuple[float, float] = (0.003, 0.005),
                   flippers: float = FLIPPERS_FLAT, seed: int = 0) -> TrackSlipRun:
    """Synthetic log of ``manoeuvres`` driven by the skid-steer truth ``vehicle`` (default
    :func:`truth_vehicle` of ``model``).

    Each manoeuvre holds its no-slip belt speeds (:func:`belt_speeds`); the body follows the
    truth's steady-state twist (:func:`wmr_model.kinematics.skid_steer.steady_state_motion`),
    switching instantly between manoeuvres. Body poses are sampled at ``pose_rate`` [Hz] (height and
    attitude of ``model`` resting on flat ground) with independent Gaussian noise of standard
    deviations ``pose_std = (rotation [rad], position [m])`` on every axis; sprocket rates at
    ``joint_rate`` [Hz] and just before each switch; the flipper joints are held at
    ``flippers`` [rad] (pot readings).
    """
    veh = truth_vehicle(model) if vehicle is None else vehicle
    mans = tuple(manoeuvres)
    if not mans:
        raise ParameterError("manoeuvres: need at least one")
    durs = np.array([m.duration for m in mans])
    if np.any(durs <= 0.0):
        raise ParameterError(f"manoeuvre durations must be > 0 s, got {durs.tolist()}")
    start = np.concatenate([[0.0], np.cumsum(durs)[:-1]])
    belts = np.array([belt_speeds(m, veh.gauge) for m in mans])
    twist = np.array([[s.v_lon, s.v_lat, s.yaw_rate] for s in
                      (steady_state_motion(veh, bl, br) for bl, br in belts)])
    total = float(durs.sum())
    t_pose = np.arange(round(total * pose_rate) + 1) / pose_rate
    xyth = _planar_poses(twist, durs, t_pose, start)
    # resting height and attitude of the model (flippers raised) on flat ground
    q = model.neutral_state()
    act = [model.joint_names[int(k)] for k in model.actuated_joints]
    flip = [n for n in act if n.startswith("flipper")]
    for n in flip:
        q[7 + model.joint_names.index(n)] = flippers
    q, _ = kin.initialize_contact(model, flat(), q)
    rest = q[0:4] / np.linalg.norm(q[0:4])
    pose = np.empty((len(t_pose), 7))
    pose[:, 0:4] = quat_multiply(_yaw_quat(xyth[:, 2]), rest)
    pose[:, 4:6] = xyth[:, 0:2]
    pose[:, 6] = q[6]
    rng = np.random.default_rng(seed)
    s_rot, s_pos = pose_std
    noisy = pose.copy()  # world-axes rotation noise exp(dtheta) * q, as synthetic_log
    noisy[:, 0:4] = quat_multiply(_exp_quat(rng.normal(0.0, s_rot, (len(t_pose), 3))),
                                  pose[:, 0:4])
    noisy[:, 4:7] += rng.normal(0.0, s_pos, (len(t_pose), 3))
    cov = np.zeros((len(t_pose), 6, 6))
    cov[:, range(3), range(3)] = max(s_rot, 1e-6) ** 2
    cov[:, range(3, 6), range(3, 6)] = max(s_pos, 1e-6) ** 2
    # encoder samples at joint_rate plus one just before each switch of belt speeds, so the
    # log's linear interpolation (CalibrationLog.rates_at) keeps the switch a step instead of
    # blending two manoeuvres over the last sample period of each one
    t_joint = np.union1d(np.arange(round(total * joint_rate) + 1) / joint_rate,
                         start[1:] - _SWITCH_EPS)
    seg = np.clip(np.searchsorted(start, t_joint, side="right") - 1, 0, len(mans) - 1)
    rates = track_rates(model, belts[seg, 0], belts[seg, 1])
    sprockets = [act[0], act[1]]
    joint_rate_arr = rates[:, 0:2]
    pot_time = np.array([0.0, total])
    pot = np.full((2, len(flip)), flippers)
    common: dict[str, Any] = dict(
        joint_names=tuple(sprockets), joint_time=t_joint, joint_rate=joint_rate_arr,
        pose_time=t_pose, pose_covariance=cov, pot_names=tuple(flip), pot_time=pot_time,
        pot_reading=pot)
    log = CalibrationLog(pose=noisy, source="<track_slip_log>", **common)
    truth = CalibrationLog(pose=pose, source="<track_slip_log truth>", **common)
    return TrackSlipRun(log, truth, mans, start, twist, belts, veh)


@dataclass
class PlanarSlipPredictor(IntervalPredictor):
    """Planar skid-steer interval predictor with the enhanced-kinematics slip law.

    The no-slip motion is the ideal differential drive of the belts (3.64)-(3.65):
    ``v = (V_l + V_r)/2``, ``omega = (V_r - V_l)/B``; the body slip of (2.48)-(2.49) with p7,
    p8 (:func:`wmr_model.kinematics.enhanced.cg_slip_velocity`, cg at the body origin, level ground
    so the only force is the weight) is added to it, and each step is the exact arc of that twist
    (:func:`wmr_model.vehicles.reference_models.integrate_planar`). It isolates the slip law from
    the 3D track contact kinematics: the same parameters as :class:`ModelPredictor`'s ``slip.*``
    with the differential drive as the no-slip solution (seed 003's gains act on it).

    Attributes:
        left, right: log joint names of the left and right drive (sprocket) joints.
        radius: belt speed per unit drive rate [m/rad]; gauge: B [m].
        dt: nominal step [s]; base: fixed named values.
    """

    left: str
    right: str
    radius: float
    gauge: float
    dt: float = 0.05
    base: dict[str, float] = field(default_factory=dict)

    @classmethod
    def from_model(cls, model: VehicleModel, **kw) -> PlanarSlipPredictor:
        """Drive joints, belt radius and gauge of a tracked model's ``left``/``right`` tracks
        (the first two actuated joints drive them, :func:`track_rates`)."""
        act = [model.joint_names[int(k)] for k in model.actuated_joints]
        r = 1.0 / float(track_rates(model, np.ones(1), np.zeros(1))[0, 0])
        return cls(left=act[0], right=act[1], radius=r, gauge=track_geometry(model)[1], **kw)

    def check_names(self, names: Sequence[str]) -> None:
        """Raise ParameterError for names this predictor cannot vary."""
        for n in names:
            get_spec(n)
            if not n.startswith(("slip.", "time_offset.", "noise.")):
                raise ParameterError(f"{n}: not a parameter of the planar slip predictor "
                                     "(slip.*, time_offset.<stream>)")

    def simulate(self, log: CalibrationLog, i0: int, i1: int, names: Sequence[str],
                 X: np.ndarray) -> IntervalPrediction:
        """Predict interval ``(i0, i1)`` for candidate rows ``X`` (N, n) of ``names``."""
        cands, T, dt, mid = self.planar_setup(log, i0, i1, names, X)
        N = len(cands)
        li, ri = log.joint_names.index(self.left), log.joint_names.index(self.right)
        f_cg = np.zeros(6)
        f_cg[5] = -STANDARD_GRAVITY  # weight per unit mass: only f_z matters on level ground
        vx = np.empty((N, T))
        wz = np.empty((N, T))
        v_cg = np.zeros(6)
        for k, c in enumerate(cands):
            p = slip_vector({n: v for n, v in c.items() if n.startswith("slip.")})
            d = float(c.get("time_offset.pose", 0.0))
            rates = log.rates_at(log.pose_time[i0] - d + mid)
            vl, vr = self.radius * rates[:, li], self.radius * rates[:, ri]
            for t in range(T):
                v_cg[2] = (vr[t] - vl[t]) / self.gauge
                v_cg[3] = 0.5 * (vl[t] + vr[t])
                slip = cg_slip_velocity(v_cg, f_cg, p, DEFAULT_SLIP_AXES, 0.0)
                vx[k, t] = v_cg[3] + slip[3]
                wz[k, t] = v_cg[2] + slip[2]
        return planar_interval(log.pose[i0], vx, wz, dt)


def manoeuvre_intervals(run: TrackSlipRun, length: float = 2.0) -> tuple[np.ndarray, list[str]]:
    """Non-overlapping intervals ``(K, 2)`` of pose indices, ``length`` [s] each, inside the
    manoeuvres (none straddles a change of belt speeds), and each one's class label."""
    t = run.log.pose_time
    iv, lab = [], []
    for m, t0 in zip(run.manoeuvres, run.start):
        k = 0
        while (k + 1) * length <= m.duration + 1e-9:
            i0 = int(np.argmin(np.abs(t - (t0 + k * length))))
            i1 = int(np.argmin(np.abs(t - (t0 + (k + 1) * length))))
            iv.append((i0, i1))
            lab.append(m.label)
            k += 1
    return np.array(iv, dtype=int), lab


def class_errors(predictor, log: CalibrationLog, intervals: np.ndarray, labels: Sequence[str],
                 values: dict[str, float]) -> dict[str, dict[str, float]]:
    """Per class: RMS horizontal position error [m] and RMS yaw error [rad] of the predicted
    interval end poses (from each interval's logged start pose) against ``log``'s end poses,
    with the named parameter ``values``. Pass the noise-free truth log for the model error."""
    names = list(values)
    X = np.array([values[n] for n in names], dtype=float)
    idx = component_indices(("x", "y", "yaw"))
    per: dict[str, list[np.ndarray]] = {}
    for (i0, i1), lab in zip(intervals, labels):
        pr = predictor.simulate(log, int(i0), int(i1), names, X[None, :] if names else
                                np.zeros((1, 0)))
        r = pose_residual(log.pose[i1], pr.pose[0], idx)
        per.setdefault(lab, []).append(r)
    out = {}
    for lab, rs in per.items():
        r = np.array(rs)
        out[lab] = {"pos_rms": float(np.sqrt(np.mean(r[:, 0] ** 2 + r[:, 1] ** 2))),
                    "yaw_rms": float(np.sqrt(np.mean(r[:, 2] ** 2))), "n": len(rs)}
    return out
