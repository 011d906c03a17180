"""Interval predictors: ``g(x_meas(t0), u(*), p)`` of (3.26) for many parameter sets at once.

A predictor simulates one interval of a :class:`~wmr_model.calibration.logs.CalibrationLog`
from the measured initial pose, over the logged inputs, for N candidate parameter sets (the
nominal one first, then finite-difference perturbations), and returns the predicted final
pose-sensor poses plus the covariance map of the nominal prediction
(:func:`~wmr_model.calibration.residuals.covariance_map`).

* :class:`ModelPredictor` - 3D kinematic or enhanced kinematic model (§2.2-2.3) through
  :func:`wmr_model.prediction.predict.predict`: **one batched call** over all candidates that share
  the model geometry. Slip coefficients are batched natively; a wheel radius is batched by scaling
  that wheel's logged rate (the contact velocity is ``r * omega``; the small change of wheel
  centre height is neglected in the perturbed candidates only); sensor offsets change the
  candidate's initial body pose (3.57) and final sensor pose (3.58); a time offset re-samples
  the inputs; steering-pot gains/offsets re-map the logged pot readings to steer angles and
  rates. Only ``vehicle.track_scale`` and ``vehicle.cg.*`` need one call per distinct value.
* :class:`DiffDrivePredictor` - the planar reference models (3.64)-(3.66).

Parameters not listed in ``names`` take the predictor's ``base`` values, then schema defaults.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from wmr_model import kinematics as kin
from wmr_model.calibration.logs import CalibrationLog
from wmr_model.calibration.residuals import (
    CovarianceMap,
    body_pose_from_sensor,
    covariance_map,
    quat_to_matrix,
    sensor_jacobian,
    sensor_pose,
    yaw_of,
)
from wmr_model.errors import ParameterError
from wmr_model.parameters import SLIP_NAMES, get_spec
from wmr_model.prediction.predict import predict
from wmr_model.terrain.surface import Terrain, flat
from wmr_model.vehicles.model import VehicleModel
from wmr_model.vehicles.parameters import get_parameter, with_parameters
from wmr_model.vehicles.reference_models import integrate_planar

__all__ = [
    "IntervalPrediction",
    "IntervalPredictor",
    "ModelPredictor",
    "PlanarPredictor",
    "DiffDrivePredictor",
    "BicyclePredictor",
    "planar_predictor",
    "default_step",
    "interval_steps",
    "PREDICTION_INPUTS",
]

#: Measured inputs a :class:`ModelPredictor` can impose (its ``inputs`` attribute).
PREDICTION_INPUTS = ("roll_pitch", "gyro_yaw")

#: Finite-difference steps of (3.27) by parameter family (absolute, in the parameter's unit).
_STEPS = {"slip": 1e-3, "wheel": 1e-4, "vehicle": 1e-4, "sensor": 1e-3, "time_offset": 1e-2,
          "diff_drive": 1e-3, "noise": 1e-4, "steer": 1e-3, "bicycle": 1e-3, "planar": 1e-3}


def default_step(name: str) -> float:
    """Finite-difference step ``epsilon`` of (3.27) for parameter ``name``."""
    return _STEPS.get(name.split(".")[0], 1e-4)


def interval_steps(duration: float, dt: float) -> tuple[int, float]:
    """``(T, dt_i)``: whole steps covering ``duration`` exactly (``dt_i`` close to ``dt``)."""
    T = max(1, int(round(duration / dt)))
    return T, duration / T


@dataclass(frozen=True)
class IntervalPrediction:
    """Predicted end of one interval for N candidate parameter sets.

    Attributes:
        pose: (N, 7) predicted final pose of the pose sensor, candidate 0 nominal.
        cmap: covariance map of candidate 0 (sensor frame at both ends).
        body: (T+1, 7) nominal body pose trajectory (quaternion, position).
        dt: step used [s]; ``T`` steps cover the interval exactly.
    """

    pose: np.ndarray
    cmap: CovarianceMap
    body: np.ndarray
    dt: float


def _values(base: Mapping[str, float], names: Sequence[str], row: np.ndarray) -> dict[str, float]:
    out = dict(base)
    out.update({n: float(v) for n, v in zip(names, row)})
    return out


class IntervalPredictor(ABC):
    """What the calibrators drive (:class:`~wmr_model.calibration.online.OnlineCalibrator`,
    :func:`~wmr_model.calibration.offline.calibrate_offline`,
    :func:`~wmr_model.calibration.evaluate.evaluate`): ``g(x_meas(t0), u(*), p)`` of (3.26)
    through :meth:`check_names`, :meth:`nominal` and :meth:`simulate`, plus the plumbing every
    predictor shares: candidate values over ``base`` and whole steps over an interval.

    Subclasses are dataclasses with the fields ``dt`` (nominal step [s]) and ``base`` (values of
    the named parameters not being estimated).
    """

    dt: float
    base: dict[str, float]

    @abstractmethod
    def check_names(self, names: Sequence[str]) -> None:
        """Raise ParameterError for names this predictor cannot vary."""

    @abstractmethod
    def simulate(self, log: CalibrationLog, i0: int, i1: int, names: Sequence[str],
                 X: np.ndarray) -> IntervalPrediction:
        """Predict interval ``(i0, i1)`` for candidate rows ``X`` (N, n) of ``names``."""

    def nominal(self, name: str) -> float:
        """Starting value of ``name``: ``base``, else the schema default."""
        return float(self.base.get(name, get_spec(name).default))

    def candidates(self, names: Sequence[str], X: np.ndarray) -> list[dict[str, float]]:
        """Named values of each candidate row of ``X`` (N, n) (or one row (n,)) over ``base``."""
        X = np.atleast_2d(np.asarray(X, dtype=float))
        return [_values(self.base, names, X[k]) for k in range(X.shape[0])]

    def interval_clock(self, log: CalibrationLog, i0: int,
                       i1: int) -> tuple[int, float, np.ndarray]:
        """``(T, dt, mid)``: ``T`` whole steps of ``dt`` [s] over pose interval ``(i0, i1)``
        (:func:`interval_steps`) and the step midpoints ``mid`` (T,) [s from its start]."""
        dur = float(log.pose_time[i1] - log.pose_time[i0])
        T, dt = interval_steps(dur, self.dt)
        return T, dt, (np.arange(T) + 0.5) * dt

    def planar_setup(self, log: CalibrationLog, i0: int, i1: int, names: Sequence[str],
                     X: np.ndarray) -> tuple[list[dict[str, float]], int, float, np.ndarray]:
        """``(candidates, T, dt, mid)`` of a planar predictor (:meth:`candidates`,
        :meth:`interval_clock`); ParameterError unless the log's poses are of the body frame
        (planar models have no sensor offset)."""
        cands = self.candidates(names, X)
        if log.pose_sensor is not None:
            raise ParameterError(f"{type(self).__name__}: poses must be of the body frame")
        return (cands, *self.interval_clock(log, i0, i1))


@dataclass
class ModelPredictor(IntervalPredictor):
    """3D (enhanced) kinematic interval predictor over ``terrain``.

    Attributes:
        model: vehicle with its nominal dimensions.
        terrain: terrain of the prediction (flat when the log has no terrain geometry).
        fidelity: ``"kinematic"`` or ``"enhanced"``.
        dt: nominal step [s] (each interval uses whole steps of about this size).
        base: values of named parameters not being estimated (slip, sensor, time offsets...).
        integrator, stabilization: passed to :func:`wmr_model.prediction.predict.predict`.
        inputs: measured quantities imposed during the prediction (§3.3, "roll and pitch
            measurements can optionally be treated as inputs"; see :data:`PREDICTION_INPUTS`):
            ``"roll_pitch"`` - the log's roll/pitch replace the predicted attitude after every
            step (:func:`wmr_model.kinematics.api.impose_roll_pitch`; yaw, position and joints
            kept), and at the start, with the position stabilization (2.35) off since the
            predictor's terrain may contradict the measured attitude; ``"gyro_yaw"`` - the gyro's
            body angular velocity (step midpoints) is known in every velocity solve (2.37), as
            in the estimation context (:func:`wmr_model.kinematics.api.estimation_known` with
            ``gyro=True``), so the yaw increment is the gyro's. Inputs are read at
            ``t - time_offset`` like the wheel rates. A log without the data raises
            ParameterError. Both go to one batched :func:`predict` call (its ``attitude`` and
            ``known_angular_velocity``), imposed inside the compiled loop.
    """

    model: VehicleModel
    terrain: Terrain = field(default_factory=flat)
    fidelity: str = "enhanced"
    dt: float = 0.05
    base: dict[str, float] = field(default_factory=dict)
    integrator: str = "euler"
    stabilization: float = kin.api.DEFAULT_STABILIZATION
    inputs: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        from wmr_model.estimation.steering import steer_inputs

        self.inputs = tuple(self.inputs)
        #: nominal lag [s] of each commanded steering joint (the sidecar's)
        self._steer_lag = {j: si.lag for j, si in steer_inputs(self.model).items()
                           if si.source == "commanded"}
        bad = [i for i in self.inputs if i not in PREDICTION_INPUTS]
        if bad:
            raise ParameterError(f"prediction inputs {bad}: expected some of "
                                 f"{list(PREDICTION_INPUTS)}")

    def check_names(self, names: Sequence[str]) -> None:
        """Raise ParameterError for names this predictor cannot vary."""
        for n in names:
            get_spec(n)
            fam = n.split(".")[0]
            if fam not in ("slip", "wheel", "vehicle", "sensor", "time_offset", "noise",
                           "steer"):
                raise ParameterError(f"{n}: not a parameter of the 3D model predictor")
            if fam == "steer":
                j = n.split(".")[1]
                act = [self.model.joint_names[int(k)] for k in self.model.actuated_joints]
                if j not in act:
                    raise ParameterError(f"{n}: {j!r} is not an actuated joint of "
                                         f"{self.model.name}; actuated joints are {act}")
            if fam == "slip" and self.fidelity != "enhanced":
                raise ParameterError(f"{n}: slip coefficients need fidelity='enhanced'")

    def nominal(self, name: str) -> float:
        """Starting value of ``name``: ``base``, else the model, else the schema default."""
        if name in self.base:
            return float(self.base[name])
        if name.split(".")[0] in ("wheel", "vehicle", "sensor"):
            return get_parameter(self.model, name)
        if name.startswith("steer.") and name.endswith(".lag"):
            return float(self._steer_lag.get(name.split(".")[1], 0.0))
        return float(get_spec(name).default)

    def _sensor_T(self, sensor: str | None, vals: Mapping[str, float]) -> np.ndarray:
        if sensor is None:
            return np.eye(4)
        if sensor not in self.model.sensor_frame:
            raise ParameterError(f"pose sensor {sensor!r}: {self.model.name} has no such sensor; "
                                 f"sensors are {sorted(self.model.sensor_frame)}")
        fi, T = self.model.sensor_frame[sensor]
        if fi != 0:
            raise ParameterError(f"pose sensor {sensor!r}: must be attached to the body frame")
        T = np.array(T)
        for c, k in (("x", 0), ("y", 1), ("z", 2)):
            key = f"sensor.{sensor}.{c}"
            if key in vals:
                T[k, 3] = vals[key]
        return T

    @staticmethod
    def _pots(log: CalibrationLog, m: VehicleModel, act: list[int]) -> dict[int, int]:
        """Actuated-joint position -> ``pot_reading`` column, for the joints with pot readings
        (their commanded rates and initial angles come from the readings)."""
        out = {}
        for a, j in enumerate(act):
            jn = m.joint_names[j]
            if jn in log.pot_names:
                out[a] = log.pot_names.index(jn)
        return out

    @staticmethod
    def _pot_columns(log: CalibrationLog,
                     pots: dict[int, int]) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        """Actuated-joint position -> (pot stamps (P,), that pot's readings (P,)) of ``pots``."""
        if not pots:
            return {}
        if log.pot_time is None or log.pot_reading is None:
            raise ParameterError(f"{log.source}: steering pots {list(log.pot_names)} need "
                                 "pot_time and pot_reading in the log")
        return {a: (log.pot_time, log.pot_reading[:, col]) for a, col in pots.items()}

    @staticmethod
    def _measured_input(log: CalibrationLog, which: str) -> tuple[np.ndarray, np.ndarray]:
        """``(stamps, samples)`` of the measured prediction input ``which``: ``"roll_pitch"``
        (attitude_time, roll_pitch) or ``"gyro_yaw"`` (gyro_time, gyro), >= 2 samples."""
        if which == "roll_pitch":
            t, v, what = log.attitude_time, log.roll_pitch, "measured roll/pitch"
            fields = "attitude_time, roll_pitch"
        else:
            t, v, what, fields = log.gyro_time, log.gyro, "gyro samples", "gyro_time, gyro"
        if t is None or v is None or len(v) < 2:
            raise ParameterError(f"{log.source}: prediction input {which!r} needs {what} in "
                                 f"the log ({fields})")
        return t, v

    def _check_inputs(self, log: CalibrationLog) -> None:
        for which in ("roll_pitch", "gyro_yaw"):
            if which in self.inputs:
                self._measured_input(log, which)

    def _predict(self, mg: VehicleModel, log: CalibrationLog, q0: np.ndarray, cmds: np.ndarray,
                 dt: float, slip: np.ndarray, t_in: np.ndarray):
        """Trajectories of the candidates: ``q`` (Ng, T+1, nq), ``qdot`` (Ng, T, nv); one
        batched :func:`predict` call, measured inputs passed as its ``attitude`` and
        ``known_angular_velocity``."""
        kw: dict[str, Any] = dict(fidelity=self.fidelity, slip_params=slip,
                                  integrator=self.integrator, stabilization=self.stabilization)
        if not self.inputs:
            return predict(mg, self.terrain, q0, cmds, dt, **kw)
        if "roll_pitch" in self.inputs:
            # the measured attitude replaces the terrain's: no position stabilization toward a
            # terrain surface it contradicts (pure velocity solve, sigma = 0 in (2.35))
            kw["stabilization"] = 0.0
            t_att, rp = self._measured_input(log, "roll_pitch")
            kw["attitude"] = np.stack([np.interp(t_in, t_att, rp[:, a]) for a in range(2)],
                                      axis=-1)
        if "gyro_yaw" in self.inputs:
            tm = 0.5 * (t_in[:, :-1] + t_in[:, 1:])
            t_gyro, gyro = self._measured_input(log, "gyro_yaw")
            kw["known_angular_velocity"] = np.stack([np.interp(tm, t_gyro, gyro[:, a])
                                                     for a in range(3)], axis=-1)
        return predict(mg, self.terrain, q0, cmds, dt, **kw)

    def simulate(self, log: CalibrationLog, i0: int, i1: int, names: Sequence[str],
                 X: np.ndarray) -> IntervalPrediction:
        """Predict interval ``(i0, i1)`` for candidate rows ``X`` (N, n) of ``names``."""
        cands = self.candidates(names, X)
        N = len(cands)
        m = self.model
        sensor = log.pose_sensor
        stream = "pose"
        T, dt, mid = self.interval_clock(log, i0, i1)
        self._check_inputs(log)
        wheel_of_joint = {int(j): w for w, j in enumerate(m.wheel_joints)}
        act = [int(k) for k in m.actuated_joints]
        # geometry groups: candidates sharing track scale and cg use one predict call
        groups: dict[tuple, list[int]] = {}
        for k, c in enumerate(cands):
            key = tuple(sorted((n, float(v)) for n, v in c.items()
                               if n == "vehicle.track_scale" or n.startswith("vehicle.cg.")))
            groups.setdefault(key, []).append(k)
        pose_out = np.empty((N, 7))
        nominal_traj = None
        pots = self._pot_columns(log, self._pots(log, m, act))
        for key, members in groups.items():
            c0 = cands[members[0]] if 0 not in members else cands[0]
            radius0 = {n: v for n, v in c0.items() if n.startswith("wheel.")}
            geom = {n: v for n, v in key if not (n == "vehicle.track_scale" and v == 1.0)}
            mg = with_parameters(m, {**radius0, **geom})
            Ng = len(members)
            cmds = np.empty((Ng, T, len(act)))
            slip = np.zeros((Ng, len(SLIP_NAMES)))
            q0 = np.empty((Ng, m.nq))
            Ts = []
            q0_cache: dict[bytes, np.ndarray] = {}
            t_in = np.empty((Ng, T + 1))  # input-clock stamps of the step ends
            for g, k in enumerate(members):
                c = cands[k]
                d = float(c.get(f"time_offset.{stream}", 0.0))
                cmds[g] = log.actuated_rates(m, log.pose_time[i0] - d + mid)
                t_in[g] = log.pose_time[i0] - d + np.arange(T + 1) * dt
                t_g: np.ndarray = t_in[g]
                steer0 = {}
                for a in pots:  # steering: gain * reading + offset
                    jn = m.joint_names[act[a]]
                    lag = c.get(f"steer.{jn}.lag", self._steer_lag.get(jn, 0.0))
                    ang = (c.get(f"steer.{jn}.gain", 1.0) * log.steer_at(jn, t_g, lag)
                           + c.get(f"steer.{jn}.offset", 0.0))
                    cmds[g, :, a] = np.diff(ang) / dt
                    steer0[act[a]] = ang[0]
                for a, j in enumerate(act):
                    w = wheel_of_joint.get(j)
                    if w is not None:
                        rname = f"wheel.{m.wheel_names[w]}.radius"
                        if rname in c:
                            cmds[g, :, a] *= c[rname] / mg.wheel_radius[w]
                for i, sn in enumerate(SLIP_NAMES):
                    slip[g, i] = c.get(sn, 0.0)
                Tsb = self._sensor_T(sensor, c)
                Ts.append(Tsb)
                hk = Tsb.tobytes() + np.array(list(steer0.values())).tobytes()
                if hk not in q0_cache:
                    body = body_pose_from_sensor(log.pose[i0], Tsb)
                    qg = m.neutral_state()
                    qg[0:7] = body
                    for j, ang0 in steer0.items():
                        qg[7 + j] = ang0
                    q0_cache[hk], _ = kin.initialize_contact(mg, self.terrain, qg)
                q0[g] = q0_cache[hk]
            pr = self._predict(mg, log, q0, cmds, dt, slip, t_in)
            for g, k in enumerate(members):
                pose_out[k] = sensor_pose(pr.q[g, -1, :7], Ts[g])
            if 0 in members:
                g0 = members.index(0)
                nominal_traj = (pr.q[g0], pr.qdot[g0], Ts[g0])
        assert nominal_traj is not None
        qn, qdn, T0s = nominal_traj
        qn = np.asarray(qn)
        R = quat_to_matrix(qn[:-1, :4])
        o = T0s[:3, 3]
        cmap = covariance_map(R, qdn[:, 3:6], dt, sensor_jacobian(qn[0, :7], o),
                              sensor_jacobian(qn[-1, :7], o))
        return IntervalPrediction(pose=pose_out, cmap=cmap, body=qn[:, :7], dt=dt)


def planar_interval(pose0: np.ndarray, vx: np.ndarray, wz: np.ndarray,
                    dt: float, point: tuple[float, float] = (0.0, 0.0)) -> IntervalPrediction:
    """Interval prediction of planar candidates (level ground, height held).

    ``pose0`` (7,) logged body pose at the interval start; ``vx``, ``wz`` (N, T) forward speed
    [m/s] of the body point ``point`` (x, y in body coordinates [m]; a bicycle model's rear
    axle) and yaw rate [rad/s] per candidate and step, integrated by
    :func:`wmr_model.vehicles.reference_models.integrate_planar` (the point's arcs; the body
    origin follows rigidly). The covariance map is candidate 0's.
    """
    N = vx.shape[0]
    yaw0 = float(yaw_of(pose0[:4]))
    c0, s0 = math.cos(yaw0), math.sin(yaw0)
    px, py = point
    start = np.array([pose0[4] + c0 * px - s0 * py, pose0[5] + s0 * px + c0 * py, yaw0])
    traj = integrate_planar(np.repeat(start[None], N, 0), vx, wz, dt)
    if px or py:  # back from the point to the body origin
        c, s_ = np.cos(traj[..., 2]), np.sin(traj[..., 2])
        traj = np.stack([traj[..., 0] - c * px + s_ * py, traj[..., 1] - s_ * px - c * py,
                         traj[..., 2]], axis=-1)
    yaw = traj[..., 2]
    qz = np.stack([np.cos(yaw / 2), 0 * yaw, 0 * yaw, np.sin(yaw / 2)], axis=-1)
    z = np.full(traj.shape[:2] + (1,), pose0[6])
    body = np.concatenate([qz, traj[..., :2], z], axis=-1)
    R = quat_to_matrix(body[0, :-1, :4])
    v = np.stack([vx[0], 0 * vx[0], 0 * vx[0]], axis=1)
    return IntervalPrediction(pose=body[:, -1], cmap=covariance_map(R, v, dt), body=body[0],
                              dt=dt)


class PlanarPredictor(IntervalPredictor):
    """A planar reference model of Table 3.3: its body twist from the logged inputs
    (:meth:`twist`) integrated as arcs from the interval's start pose. Subclasses give the
    kind's ``label`` (``"diff drive"``, ``"bicycle"``) and the names of its calibrated "+"
    variant (:attr:`plus_names`, with ``time_offset.pose``)."""

    label = "planar"
    plus_names: tuple[str, ...] = ()

    @abstractmethod
    def twist(self, log: CalibrationLog, times: np.ndarray,
              values: Mapping[str, float] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Forward speed ``vx`` [m/s] and yaw rate ``wz`` [rad/s], each (Q,), of the model's
        reference point at ``times`` (Q,) [s] with the named ``values`` (default nominal)."""

    def check_names(self, names: Sequence[str]) -> None:
        """Raise ParameterError for names this predictor cannot vary."""
        for n in names:
            if n not in self.plus_names and not n.startswith(("time_offset.", "noise.")):
                raise ParameterError(f"{n}: not a parameter of the {self.label} predictor "
                                     f"({', '.join(self.plus_names)}, time_offset.<stream>)")

    def simulate(self, log: CalibrationLog, i0: int, i1: int, names: Sequence[str],
                 X: np.ndarray) -> IntervalPrediction:
        """Predict interval ``(i0, i1)`` for candidate rows ``X`` (N, n) of ``names``."""
        cands, T, dt, mid = self.planar_setup(log, i0, i1, names, X)
        N = len(cands)
        vx = np.empty((N, T))
        wz = np.empty((N, T))
        for k, c in enumerate(cands):
            d = float(c.get("time_offset.pose", 0.0))
            vx[k], wz[k] = self.twist(log, log.pose_time[i0] - d + mid, c)
        return planar_interval(log.pose[i0], vx, wz, dt, self.reference_point)

    #: (x, y) [m] of the point whose forward speed :meth:`twist` gives, in body coordinates
    reference_point: tuple[float, float] = (0.0, 0.0)


def _neutral_wheel_xy(model: VehicleModel) -> tuple[np.ndarray, np.ndarray]:
    """(nw, 2) wheel centre x, y [m] in body coordinates at the neutral state, and (nw,) the
    sign of each wheel's rolling direction: a wheel spins about its frame's y axis, so a
    positive rate rolls it forward when that axis points to the body's left (+1) and backward
    when the joint is mirrored (-1, e.g. a URDF left wheel with axis 0 -1 0)."""
    from wmr_model.kinematics import api

    Tw = api.forward_kinematics(model, api.create_data(model), model.neutral_state())
    sign = np.where(np.asarray(Tw[model.wheel_frame, 1, 1]) < 0, -1.0, 1.0)
    return np.asarray(Tw[model.wheel_frame, :2, 3]), sign


@dataclass
class DiffDrivePredictor(PlanarPredictor):
    """Planar differential drive (3.64)-(3.65) / diff drive+ (3.66) interval predictor.

    Attributes:
        left, right: model joint names (log columns) of the left and right wheels; their
            rates are averaged per side.
        radius: wheel radius [m]; track: B [m].
        dt: nominal step [s]; base: fixed named values (``diff_drive.alpha``,
            ``planar.speed_scale``, ``time_offset.pose``).
    """

    left: tuple[str, ...]
    right: tuple[str, ...]
    radius: float
    track: float
    dt: float = 0.05
    base: dict[str, float] = field(default_factory=dict)
    #: rolling direction (+1 / -1) of each wheel whose joint is mirrored; default +1
    sign: dict[str, float] = field(default_factory=dict)

    label = "diff drive"
    plus_names = ("diff_drive.alpha", "planar.speed_scale")

    @classmethod
    def from_model(cls, model: VehicleModel, **kw) -> DiffDrivePredictor:
        """Sides from the sign of each driven wheel's y position (the actuated wheels; every
        wheel when none is actuated, e.g. tracks' road wheels); B = mean left-right
        distance."""
        xy, sign = _neutral_wheel_xy(model)
        names = model.wheel_names
        act = {model.joint_names[int(k)] for k in model.actuated_joints}
        driven = [w for w, n in enumerate(names) if n in act] or list(range(len(names)))
        y = xy[driven, 1]
        dn = [names[w] for w in driven]
        left = tuple(n for n, yy in zip(dn, y) if yy > 0)
        right = tuple(n for n, yy in zip(dn, y) if yy <= 0)
        if not left or not right:
            raise ParameterError(f"{model.name}: a differential drive needs driven wheels on "
                                 f"both sides; driven wheels {dn} at y {np.round(y, 3).tolist()}")
        track = float(y[y > 0].mean() - y[y <= 0].mean())
        return cls(left=left, right=right,
                   radius=float(model.wheel_radius[driven].mean()), track=track,
                   sign={names[w]: float(sign[w]) for w in driven if sign[w] < 0}, **kw)

    def _sides(self, log: CalibrationLog) -> tuple[list[int], list[int]]:
        """Log columns of the left and right wheels (those with encoder rates)."""
        li = [log.joint_names.index(n) for n in self.left if n in log.joint_names]
        ri = [log.joint_names.index(n) for n in self.right if n in log.joint_names]
        if not li or not ri:
            raise ParameterError(f"{log.source}: no encoder rates for the left {list(self.left)} "
                                 f"or right {list(self.right)} wheels; the log has "
                                 f"{list(log.joint_names)} (is this the right vehicle?)")
        return li, ri

    def side_speeds(self, log: CalibrationLog, times: np.ndarray | None = None
                    ) -> tuple[np.ndarray, np.ndarray]:
        """Mean left and right rim speeds [m/s] at ``times`` (default: the encoder stamps)."""
        li, ri = self._sides(log)
        rates = log.joint_rate if times is None else log.rates_at(times)
        sg = np.array([self.sign.get(n, 1.0) for n in log.joint_names])
        return (self.radius * (rates[:, li] * sg[li]).mean(axis=1),
                self.radius * (rates[:, ri] * sg[ri]).mean(axis=1))

    def twist(self, log: CalibrationLog, times: np.ndarray,
              values: Mapping[str, float] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(3.64)-(3.66): ``vx = s (v_l + v_r) / 2``, ``wz = alpha (v_r - v_l) / B``."""
        c = self.base if values is None else values
        vl, vr = self.side_speeds(log, times)
        s = float(c.get("planar.speed_scale", 1.0))
        return (s * 0.5 * (vl + vr),
                s * float(c.get("diff_drive.alpha", 1.0)) * (vr - vl) / self.track)


@dataclass
class BicyclePredictor(PlanarPredictor):
    """Planar kinematic bicycle model of a steered vehicle (a tricycle, an Ackermann car, a
    steered rover): no wheel slips sideways, so the body turns about a point on the line of
    the unsteered wheels with curvature ``kappa = alpha tan(delta) / L`` at the midpoint R of
    those wheels (the reference point), ``delta`` the steering angle (mean tangent of the
    steering joints' angles plus ``bicycle.steer_offset``), L the distance of the steered
    wheels ahead of R. A driven wheel at ``(x_w, y_w)`` from R, steered by ``delta_w``, rolls at

    .. math:: s_w = v \\left[(1 - \\kappa y_w) \\cos\\delta_w + \\kappa x_w \\sin\\delta_w\right]

    so the speed ``v`` of R is the least-squares solution over the wheels with encoder rates
    (a driven front wheel gives the tricycle's ``v = s cos(delta)``; a rear axle gives
    ``v = s``), scaled by ``planar.speed_scale``; ``wz = kappa v``. The "+" variant calibrates
    ``bicycle.alpha`` (effective wheelbase L / alpha), ``bicycle.steer_offset`` and
    ``planar.speed_scale``. Commanded steering angles follow their nominal lag.

    Attributes:
        steer: steering joint names; wheels: the joints whose rates drive it - every wheel,
            and each differential encoder (a wheel at the mean of its wheels, its ratio in the
            radius) - with their ``(x, y)`` from R [m] (``xy`` (nw, 2)), rolling ``radius``
            (nw,) [m] and steering joint (``wheel_steer``,
            "" for unsteered wheels; negative for a mirrored joint, whose positive rate rolls
            backward); wheelbase: L [m]; lag: nominal lag of commanded joints.
    """

    steer: tuple[str, ...]
    wheels: tuple[str, ...]
    xy: np.ndarray
    radius: np.ndarray
    wheel_steer: tuple[str, ...]
    wheelbase: float
    reference_point: tuple[float, float] = (0.0, 0.0)
    lag: dict[str, float] = field(default_factory=dict)
    dt: float = 0.05
    base: dict[str, float] = field(default_factory=dict)

    label = "bicycle"
    plus_names = ("bicycle.alpha", "bicycle.steer_offset", "planar.speed_scale")

    @classmethod
    def from_model(cls, model: VehicleModel, **kw) -> BicyclePredictor:
        """Geometry from the model at its neutral state; ParameterError without steering
        joints or without unsteered wheels behind the steered ones."""
        from wmr_model.estimation.steering import steer_inputs

        inputs = steer_inputs(model)
        steer = tuple(inputs)
        if not steer:
            raise ParameterError(f"{model.name}: no steering joint; the bicycle model is for "
                                 "steered vehicles")
        xy, sign = _neutral_wheel_xy(model)
        names = model.wheel_names
        frame_of = {j: model.joint_index(j) + 1 for j in steer}
        wheel_steer = tuple(next((j for j in steer if model.chain[w, frame_of[j]]), "")
                            for w in range(len(names)))
        fixed = [w for w, j in enumerate(wheel_steer) if not j]
        steered = [w for w, j in enumerate(wheel_steer) if j]
        if not fixed:
            raise ParameterError(f"{model.name}: every wheel is steered; the bicycle model "
                                 "needs unsteered wheels to turn about")
        ref = xy[fixed].mean(axis=0)
        L = float(xy[steered, 0].mean() - ref[0])
        if abs(L) < 1e-3:
            raise ParameterError(f"{model.name}: steered and unsteered wheels share an axle "
                                 f"(wheelbase {L:.4f} m); no bicycle model")
        rim = np.asarray(model.wheel_radius, dtype=float) * sign
        points, pxy, prim, psteer = list(names), list(xy), list(rim), list(wheel_steer)
        # a differential encoder drives the mean of its wheels: a wheel at their mean position
        for enc, d in (model.options.get("differentials") or {}).items():
            ws = [names.index(w) for w in d["wheels"]]
            points.append(enc)
            pxy.append(xy[ws].mean(axis=0))
            prim.append(float(rim[ws].mean()) * float(d["ratio"]))
            st = {wheel_steer[w] for w in ws}
            psteer.append(st.pop() if len(st) == 1 else "")
        return cls(steer=steer, wheels=tuple(points), xy=np.array(pxy) - ref[None, :],
                   radius=np.array(prim), wheel_steer=tuple(psteer),
                   wheelbase=L, reference_point=(float(ref[0]), float(ref[1])),
                   lag={j: si.lag for j, si in inputs.items()}, **kw)

    def twist(self, log: CalibrationLog, times: np.ndarray,
              values: Mapping[str, float] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The bicycle model's ``(vx, wz)`` at ``times`` (class docstring)."""
        c = self.base if values is None else values
        t = np.asarray(times, dtype=float)
        off = float(c.get("bicycle.steer_offset", 0.0))
        delta = {j: log.steer_at(j, t, self.lag.get(j, 0.0)) + off for j in self.steer}
        kappa = (float(c.get("bicycle.alpha", 1.0))
                 * np.mean([np.tan(d) for d in delta.values()], axis=0) / self.wheelbase)
        rates = log.rates_at(t)
        num = np.zeros_like(t)
        den = np.zeros_like(t)
        for w, name in enumerate(self.wheels):
            if name not in log.joint_names:
                continue
            s_w = self.radius[w] * rates[:, log.joint_names.index(name)]
            d_w = delta[self.wheel_steer[w]] if self.wheel_steer[w] else 0.0
            x_w, y_w = self.xy[w]
            g = (1.0 - kappa * y_w) * np.cos(d_w) + kappa * x_w * np.sin(d_w)
            num += g * s_w
            den += g * g
        if not np.any(den > 0):
            raise ParameterError(f"{log.source}: no encoder rates for any wheel of the bicycle "
                                 f"model {list(self.wheels)}; the log has "
                                 f"{list(log.joint_names)}")
        v = float(c.get("planar.speed_scale", 1.0)) * num / np.maximum(den, 1e-12)
        return v, kappa * v


def planar_predictor(model: VehicleModel, **kw) -> PlanarPredictor:
    """The planar reference model of the vehicle's own kind for Table 3.3: the kinematic
    bicycle for a vehicle with steering joints (:class:`BicyclePredictor`), else the
    differential drive (:class:`DiffDrivePredictor`; skid steers and tracked vehicles)."""
    from wmr_model.estimation.steering import steer_joints

    if steer_joints(model):
        return BicyclePredictor.from_model(model, **kw)
    return DiffDrivePredictor.from_model(model, **kw)


