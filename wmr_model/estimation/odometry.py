"""3D wheel odometry from asynchronous encoder and IMU streams (Seegmiller 2014, §2.2.5).

:class:`Odometry3D` is the estimation context of the stabilized-DAE kinematics run online: each
encoder message closes an interval ``(t0, t1]`` of **message stamps**; the joint rates it carries
(or its positions differentiated over the interval) and the mean gyro rate of the IMU samples
received for the interval are the *known* elements of the joint-space velocity, (2.37)-(2.38)
solves for the rest with Baumgarte stabilization (2.35), and one Euler step (2.39) advances the
state ``q``. The pose covariance is propagated alongside, (3.22)-(3.24) with the error dynamics of
:mod:`wmr_model.kinematics.uncertainty`. Wall time is never read: a bag replayed at any speed gives
the same result.

It is a plain class (no ROS types): the ROS node converts messages to arrays and calls
:meth:`Odometry3D.update_encoders` and :meth:`Odometry3D.update_imu`; the offline replay tool
calls the same methods.

Message policy
--------------
Every message is either used or rejected with a reason counted in :attr:`Odometry3D.diagnostics`
(``rejected[reason]``); nothing raises on bad input.

==================  ==========================================================================
reason              when
==================  ==========================================================================
``non_finite``      stamp, a required joint's value or the gyro rate is NaN/inf
``bad_length``      ``positions``/``velocities`` neither empty nor as long as ``names``
``missing_joints``  the message carries neither every encoder of the encoder map nor every
                    per-wheel (actuated) joint (``diagnostics.missing_joints`` names the
                    absent ones of the closer layout)
``no_values``       both ``positions`` and ``velocities`` are empty ("not provided")
``implausible``     a wheel rim speed or acceleration, or a gyro rate, beyond the plausibility
                    limits (:mod:`wmr_model.estimation.streams`: ``max_wheel_speed``,
                    ``max_wheel_acceleration``, ``max_angular_rate``)
``duplicate``       same stamp as the previous message of that stream
``out_of_order``    stamp older than the previous message of that stream (less than
                    ``time_jump_threshold`` older; more is a time jump)
``late``            IMU sample older than the interval it could still contribute to
==================  ==========================================================================

Encoder layouts: a message may name the encoders of the vehicle's ``encoder_map`` (e.g.
Warthog's ``left_wheel_joint`` driving both left wheels) or each actuated joint by its own name
(what ``wmr synth`` writes); the layout is chosen per message (:func:`encoder_layouts`,
:func:`match_encoder_layout`; the replay tool uses the same pair). Velocities are used when
given; an empty ``velocity`` array (valid ROS: "not provided") makes the odometry differentiate
the positions over the interval (the first such message only sets the time base); the rule is
:func:`wmr_model.estimation.streams.rate_or_difference`, shared with the offline calibration log.

Time jumps: an encoder stamp more than ``time_jump_threshold`` seconds *behind* the integration
front (a bag loop, a ``/clock`` reset) resets the odometry to its initial state and restarts from
that message. A *forward* gap larger than ``max_step`` is not integrated over (holding velocities
for seconds would be a guess): with ``reset_on_gap`` the odometry resets, otherwise it keeps the
pose and restarts the time base at the new message. Both are counted in
``diagnostics.resets`` with the reason in ``diagnostics.last_reset_reason``.

Fusion: the gyro rate used for ``(t0, t1]`` is the mean of the IMU samples with stamps in
``(t0 - late_tolerance, t1]`` not used before (samples stamped at ``t1`` that arrive just after
the encoder message still count, for the next interval); without any, the last used rate is held
for up to ``gyro_timeout`` seconds, after which the step is encoder-only and
``diagnostics.gyro_stale_steps`` counts it.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from wmr_model.errors import ParameterError
from wmr_model.estimation.streams import (
    DEFAULT_MAX_ANGULAR_RATE,
    DEFAULT_MAX_WHEEL_ACCELERATION,
    DEFAULT_MAX_WHEEL_SPEED,
    PlausibilityLimits,
    angular_rate_problem,
    rate_or_difference,
    wheel_rate_problem,
)
from wmr_model.kinematics import api as kin
from wmr_model.kinematics.enhanced import (
    BodySlip,
    enhanced_joint_space_velocity,
    enhanced_workspace,
    slip_axes_array,
)
from wmr_model.kinematics.integrate import integrate_euler
from wmr_model.kinematics.solve import joint_space_velocity, solve_workspace
from wmr_model.kinematics.uncertainty import (
    TWIST_COMPONENTS,
    check_covariance,
    covariance_workspace,
    propagate_pose_covariance,
    qprime_from_parameters,
    qprime_names,
    to_ros_pose_covariance,
)
from wmr_model.parameters import SLIP_NAMES, check_value, slip_vector
from wmr_model.spatial import (
    STANDARD_GRAVITY,
    eulers_to_quat,
    quat_to_rot,
    quats_to_euler,
    rot_to_quat,
)
from wmr_model.terrain.surface import Terrain, flat
from wmr_model.vehicles.inertia import model_frame_inertias
from wmr_model.vehicles.model import VehicleModel

__all__ = [
    "DEFAULT_QPRIME_U",
    "ENCODER_LAYOUTS",
    "encoder_layouts",
    "match_encoder_layout",
    "imu_rotation",
    "REJECT_REASONS",
    "OdometryDiagnostics",
    "UpdateResult",
    "Odometry3D",
    "twist_covariance_ros",
]

#: Default diagonal of the Cholesky factor U of Q' (3.40), [rad/s^0.5] for wx wy wz and
#: [m/s^0.5] for vx vy vz: after 100 s the yaw sigma is 0.1 rad and the along-track sigma 0.5 m.
#: Calibrate (``noise.U.*``) for a real vehicle; too small makes the covariances overconfident.
DEFAULT_QPRIME_U = {"noise.U.wx_wx": 0.01, "noise.U.wy_wy": 0.01, "noise.U.wz_wz": 0.01,
                    "noise.U.vx_vx": 0.05, "noise.U.vy_vy": 0.05, "noise.U.vz_vz": 0.02}

REJECT_REASONS = ("non_finite", "bad_length", "missing_joints", "no_values", "duplicate",
                  "out_of_order", "late", "implausible")

#: Names of the encoder layouts, in order of preference (:func:`encoder_layouts`).
ENCODER_LAYOUTS = ("encoder_map", "per_wheel")

# ROS twist order (vx, vy, vz, wx, wy, wz) as indices into ours ([w; v]).
_ROS_TWIST_FROM_OURS = np.array([3, 4, 5, 0, 1, 2])


def encoder_layouts(model: VehicleModel, encoder_map: Mapping[str, Sequence[str]] | None = None
                    ) -> dict[str, dict[str, list[int]]]:
    """The ways an encoder message may name the driven joints.

    Args:
        model: compiled vehicle.
        encoder_map: encoder name -> model joints it drives; default
            ``model.options["encoder_map"]``.

    Returns:
        layout name (:data:`ENCODER_LAYOUTS`) -> {encoder name -> model joint indices whose
        rate it gives}: ``"encoder_map"`` (the map plus each actuated joint it does not cover,
        by its own name) when the map is not empty, and ``"per_wheel"`` (each actuated joint by
        its own name) always.
    """
    emap = (dict(model.options.get("encoder_map", {}) or {}) if encoder_map is None
            else dict(encoder_map))
    per_wheel = {model.joint_names[int(k)]: [int(k)] for k in model.actuated_joints}
    out: dict[str, dict[str, list[int]]] = {}
    if emap:
        targets = {enc: [model.joint_index(j) for j in joints] for enc, joints in emap.items()}
        covered = {k for ks in targets.values() for k in ks}
        for name, ks in per_wheel.items():
            if ks[0] not in covered:
                targets.setdefault(name, ks)
        out["encoder_map"] = targets
    out["per_wheel"] = per_wheel
    return out


def imu_rotation(model: VehicleModel) -> np.ndarray:
    """Rotation ``R_body_imu`` (3, 3) of the model's ``imu`` sensor frame at the neutral state
    (an IMU mounted upside down has ``diag(1, -1, -1)``); the identity without one. A gyro
    sample ``w_imu`` is ``R_body_imu @ w_imu`` in body axes."""
    if "imu" not in model.sensor_frame:
        return np.eye(3)
    fi, T = model.sensor_frame["imu"]
    Tw = kin.forward_kinematics(model, kin.create_data(model), model.neutral_state())
    return np.asarray(Tw[0, :3, :3].T @ Tw[fi, :3, :3] @ np.asarray(T)[:3, :3])


def match_encoder_layout(layouts: Mapping[str, Mapping[str, Sequence[int]]],
                         names: Sequence[str]) -> tuple[str | None, list[str]]:
    """The first layout whose every encoder name is in ``names``.

    Returns:
        ``(layout name, [])``, or ``(None, missing)`` with the absent names of the layout that
        misses the fewest.
    """
    have = set(names)
    best: list[str] | None = None
    for layout, targets in layouts.items():
        missing = [n for n in targets if n not in have]
        if not missing:
            return layout, []
        if best is None or len(missing) < len(best):
            best = missing
    return None, best or []


def twist_covariance_ros(C: np.ndarray) -> np.ndarray:
    """Body twist covariance (6, 6) in our ``[w; v]`` order -> ROS ``TwistWithCovariance`` (36,)."""
    idx = _ROS_TWIST_FROM_OURS
    return np.asarray(C, dtype=float)[idx[:, None], idx[None, :]].reshape(36)


@dataclass
class OdometryDiagnostics:
    """What the odometry did with its input; read by the node's diagnostics publisher.

    Attributes:
        accepted: messages used, per stream (``encoders``, ``imu``).
        rejected: rejected messages per reason (:data:`REJECT_REASONS`).
        rejected_by_stream: the same per ``(stream, reason)``.
        last_rejection: one-line description of the last rejection ("" if none).
        missing_joints: required encoder joints absent from the last message that lacked some.
        unknown_joints: joint names seen in encoder messages that neither the model nor the
            encoder map knows (ignored).
        steps: integration steps taken.
        gyro_stale_steps: steps without a fresh gyro rate (encoder-only).
        resets: resets since construction (time jumps, gaps, explicit :meth:`Odometry3D.reset`).
        last_reset_reason: why the last reset happened.
        last_stamp: stamp [s] of the last accepted message per stream.
        max_residual: largest least-squares residual |A qdot - v| of the solves [m/s].
    """

    accepted: Counter = field(default_factory=Counter)
    rejected: Counter = field(default_factory=Counter)
    rejected_by_stream: Counter = field(default_factory=Counter)
    last_rejection: str = ""
    missing_joints: tuple[str, ...] = ()
    unknown_joints: tuple[str, ...] = ()
    steps: int = 0
    gyro_stale_steps: int = 0
    resets: int = 0
    last_reset_reason: str = ""
    last_stamp: dict[str, float] = field(default_factory=dict)
    max_residual: float = 0.0

    @property
    def rejected_total(self) -> int:
        """Total rejected messages."""
        return int(sum(self.rejected.values()))


@dataclass(frozen=True)
class UpdateResult:
    """Outcome of one ``update_*`` call.

    Attributes:
        accepted: the message was used (possibly only to initialize).
        stepped: the state advanced (a new pose is available).
        reason: rejection reason or "" ; ``reset`` is the reset reason when this message caused
            one (the message is then used as the first of the new run).
    """

    accepted: bool
    stepped: bool = False
    reason: str = ""
    reset: str = ""


class Odometry3D:
    """Online 3D kinematic odometry of one vehicle (estimation context, §2.2.5).

    Args:
        model: compiled vehicle.
        terrain: terrain in the odom frame (default flat ground z = 0).
        use_gyro: make the IMU's angular velocity a known element of the solve (2.37).
        impose_imu_attitude: after each step, replace roll and pitch by the IMU orientation's
            (when provided and not older than ``gyro_timeout``); yaw stays odometric.
        fidelity: ``"kinematic"`` or ``"enhanced"`` (body slip from ``slip.p1..p8``, §2.3).
        Qprime: (6, 6) spectral density of the body-twist noise [w; v] (3.13); default from
            :data:`DEFAULT_QPRIME_U`.
        P0: (6, 6) initial pose covariance (default zero).
        q0: (nq,) initial state; default the neutral state placed on the terrain
            (:func:`kin.initialize_contact`).
        encoder_map: encoder joint name -> model joints it drives; default
            ``model.options["encoder_map"]``. Messages may name either these encoders or the
            actuated joints themselves (:func:`encoder_layouts`).
        required_joints: encoder names every encoder message must carry (one fixed layout);
            default: per message, the encoder map's or the per-wheel layout.
        imu_rotation: (3, 3) rotation ``R_body_imu`` of the IMU frame; default from the model's
            ``imu`` sensor, else identity.
        stabilization: Baumgarte gain as sigma*dt in [0, 1] (2.35).
        max_step: largest interval [s] integrated in one step; larger gaps are not integrated.
        time_jump_threshold: an encoder stamp this far [s] behind the front is a time jump.
        reset_on_gap: reset (instead of keeping the pose) on a forward gap > ``max_step``.
        gyro_timeout: how long [s] a gyro rate or IMU attitude may be held.
        late_tolerance: IMU samples up to this much [s] older than an interval's start still
            count for it.
        max_wheel_speed, max_wheel_acceleration, max_angular_rate: plausibility gates
            (:class:`wmr_model.estimation.streams.PlausibilityLimits`) [m/s, m/s^2, rad/s].
        parameters: initial named parameters (see :meth:`set_parameters`).
    """

    def __init__(self, model: VehicleModel, terrain: Terrain | None = None, *,
                 use_gyro: bool = True, impose_imu_attitude: bool = False,
                 fidelity: str = "kinematic", Qprime: np.ndarray | None = None,
                 P0: np.ndarray | None = None, q0: np.ndarray | None = None,
                 encoder_map: Mapping[str, Sequence[str]] | None = None,
                 required_joints: Sequence[str] | None = None,
                 imu_rotation: np.ndarray | None = None,
                 stabilization: float = kin.DEFAULT_STABILIZATION, max_step: float = 0.5,
                 time_jump_threshold: float = 1.0, reset_on_gap: bool = False,
                 gyro_timeout: float = 0.5, late_tolerance: float = 0.1,
                 max_wheel_speed: float = DEFAULT_MAX_WHEEL_SPEED,
                 max_wheel_acceleration: float = DEFAULT_MAX_WHEEL_ACCELERATION,
                 max_angular_rate: float = DEFAULT_MAX_ANGULAR_RATE,
                 parameters: Mapping[str, float] | None = None) -> None:
        if fidelity not in ("kinematic", "enhanced"):
            raise ParameterError(f"fidelity: must be 'kinematic' or 'enhanced', got {fidelity!r}")
        for name, val, lo in (("stabilization", stabilization, 0.0), ("max_step", max_step, 0.0),
                              ("time_jump_threshold", time_jump_threshold, 0.0),
                              ("gyro_timeout", gyro_timeout, 0.0),
                              ("late_tolerance", late_tolerance, 0.0)):
            if not (isinstance(val, (int, float)) and math.isfinite(val) and val >= lo):
                raise ParameterError(f"{name}: must be a finite number >= {lo}, got {val!r}")
        if stabilization > 1.0:
            raise ParameterError(
                f"stabilization: must be in [0, 1] (sigma*dt), got {stabilization}")
        self.terrain = flat() if terrain is None else terrain
        self.use_gyro = bool(use_gyro)
        self.impose_imu_attitude = bool(impose_imu_attitude)
        self.fidelity = fidelity
        self.stabilization = float(stabilization)
        self.max_step = float(max_step)
        self.time_jump_threshold = float(time_jump_threshold)
        self.reset_on_gap = bool(reset_on_gap)
        self.gyro_timeout = float(gyro_timeout)
        self.late_tolerance = float(late_tolerance)
        self.limits = PlausibilityLimits(float(max_wheel_speed), float(max_wheel_acceleration),
                                         float(max_angular_rate))
        self._user_encoder_map = None if encoder_map is None else {
            k: list(v) for k, v in encoder_map.items()}
        self._user_required = None if required_joints is None else list(required_joints)
        self._user_imu_rotation = None if imu_rotation is None else np.array(imu_rotation, float)
        self._user_q0 = None if q0 is None else np.array(q0, dtype=float)
        U = dict(DEFAULT_QPRIME_U)
        self._noise_U: dict[str, float] = U
        self.Qprime = (qprime_from_parameters(U) if Qprime is None
                       else check_covariance(Qprime, "Qprime"))
        self.P0 = np.zeros((6, 6)) if P0 is None else check_covariance(P0, "P0")
        self.slip = slip_vector(None)
        self.slip_axes = slip_axes_array()
        self.diagnostics = OdometryDiagnostics()
        self._pending: dict[str, float] = {}
        self._pending_model: VehicleModel | None = None
        self._install_model(model)
        if parameters:
            self.set_parameters(parameters)
            self._apply_pending()
        self.reset("start", count=False)

    # ---- model --------------------------------------------------------------------------------
    def _install_model(self, model: VehicleModel) -> None:
        self.model = model
        self._data = kin.create_data(model)
        self._cov_ws = covariance_workspace()
        self._I_frame = model_frame_inertias(model)
        if self._user_required is not None:
            targets = encoder_layouts(model, self._user_encoder_map).get("encoder_map", {})
            for name in self._user_required:
                if name not in targets:
                    targets[name] = [model.joint_index(name)]
            layouts = {"required_joints": {n: targets[n] for n in self._user_required}}
        else:
            layouts = encoder_layouts(model, self._user_encoder_map)
        #: layout name -> {encoder name -> model joint indices whose rate it gives}
        self.encoder_layouts = layouts
        wheel_r = {int(k): float(r) for k, r in zip(model.wheel_joints, model.wheel_radius)}
        self._layout_known = {}
        self._layout_radii = {}
        for lay, tg in layouts.items():
            self._layout_known[lay] = kin.estimation_known(
                model, sorted({k for ks in tg.values() for k in ks}), gyro=False)
            # rim speed gate radius of each encoder: mean radius of the wheels it drives
            self._layout_radii[lay] = {
                n: float(np.mean([wheel_r[k] for k in ks if k in wheel_r]))
                for n, ks in tg.items() if any(k in wheel_r for k in ks)}
        keep = getattr(self, "layout", None)
        self._select_layout(keep if keep in layouts else next(iter(layouts)))
        wheel = set(int(k) for k in model.wheel_joints)
        # non-wheel joints whose measured position is imposed after each step (steering,
        # suspension); wheel angles are irrelevant to the pose and just integrated
        self._position_joints = {model.joint_names[k]: k for k in range(model.nj)
                                 if k not in wheel}
        self.R_body_imu = (self._user_imu_rotation if self._user_imu_rotation is not None
                           else imu_rotation(model))

    def _select_layout(self, layout: str) -> None:
        self.layout = layout
        #: encoder name -> model joint indices of the layout in use
        self.encoder_targets = self.encoder_layouts[layout]
        self.required_joints = tuple(self.encoder_targets)
        self._known_base = self._layout_known[layout]

    def set_model(self, model: VehicleModel) -> None:
        """Replace the vehicle model (e.g. recalibrated); takes effect on the next step.

        The state is kept when the joint names are unchanged, otherwise the odometry resets.
        """
        self._pending_model = model

    def set_parameters(self, values: Mapping[str, float]) -> None:
        """Update named parameters; they take effect on the next step.

        Accepted names: ``slip.p1`` .. ``slip.p6`` (enhanced fidelity), ``noise.U.<a>_<b>``
        (Cholesky entries of Q', :func:`wmr_model.kinematics.uncertainty.qprime_names`) and
        ``wheel.<wheel name>.radius`` [m]. Raises ParameterError naming the bad one (nothing is
        applied then).
        """
        checked: dict[str, float] = {}
        qn = set(qprime_names(TWIST_COMPONENTS))
        for name, val in values.items():
            if name in SLIP_NAMES or name in qn:
                checked[name] = check_value(name, val)
            elif name.startswith("wheel.") and name.endswith(".radius"):
                wname = name[len("wheel."):-len(".radius")]
                if wname not in self.model.wheel_names:
                    raise ParameterError(f"{name}: {self.model.name} has no wheel {wname!r}; "
                                         f"wheels are {list(self.model.wheel_names)}")
                try:
                    v = float(val)
                except (TypeError, ValueError):
                    raise ParameterError(f"{name}: must be a number [m], got {val!r}") from None
                if not (math.isfinite(v) and v > 0):
                    raise ParameterError(f"{name}: must be > 0 m, got {val}")
                checked[name] = v
            else:
                raise ParameterError(
                    f"{name}: not an odometry parameter; expected slip.p1..p8, noise.U.* or "
                    f"wheel.<name>.radius")
        self._pending.update(checked)

    def parameters(self) -> dict[str, float]:
        """Current values of the named parameters (pending updates not included)."""
        out = {n: float(v) for n, v in zip(SLIP_NAMES, self.slip)}
        out.update(self._noise_U)
        for n, r in zip(self.model.wheel_names, self.model.wheel_radius):
            out[f"wheel.{n}.radius"] = float(r)
        return out

    def _apply_pending(self) -> None:
        if self._pending_model is not None:
            old = self.model.joint_names
            self._install_model(self._pending_model)
            self._pending_model = None
            if self.model.joint_names != old:
                self.reset("model replaced with different joints")
        if not self._pending:
            return
        pend, self._pending = self._pending, {}
        radii = {}
        noise_changed = False
        for name, v in pend.items():
            if name in SLIP_NAMES:
                self.slip[SLIP_NAMES.index(name)] = v
            elif name.startswith("noise.U."):
                self._noise_U[name] = v
                noise_changed = True
            else:
                radii[name[len("wheel."):-len(".radius")]] = v
        if noise_changed:
            self.Qprime = qprime_from_parameters(self._noise_U)
        if radii:
            r = np.array(self.model.wheel_radius, dtype=float)
            for wname, v in radii.items():
                r[self.model.wheel_names.index(wname)] = v
            r.setflags(write=False)
            self._install_model(dataclasses.replace(self.model, wheel_radius=r))

    # ---- state --------------------------------------------------------------------------------
    def reset(self, reason: str = "reset", *, count: bool = True) -> None:
        """Back to the initial state and covariance; forget the time base and held inputs."""
        if self._user_q0 is not None:
            self.q = kin._state(self.model, self._user_q0, "q0").copy()
        else:
            self.q, _ = kin.initialize_contact(self.model, self.terrain)
        self.qdot = np.zeros(self.model.nv)
        self._data.kernel.contact_ws[:] = 0.0  # collision warm start: none yet
        self.P = self.P0.copy()
        self.stamp: float | None = None  # integration front [s]
        self._dt_last = math.nan
        self._enc_positions: dict[str, float] = {}
        self._enc_stamp: float | None = None
        self._gate_prev: tuple[float, dict[str, float]] | None = None
        self._imu_buffer: list[tuple[float, np.ndarray]] = []
        self._imu_stamp: float | None = None
        self._gyro_held: tuple[float, np.ndarray] | None = None
        self._gyro_cov: np.ndarray | None = None
        self._attitude: tuple[float, np.ndarray] | None = None
        if count:
            self.diagnostics.resets += 1
            self.diagnostics.last_reset_reason = reason

    @property
    def pose(self) -> tuple[np.ndarray, np.ndarray]:
        """``(position (3,) [m], orientation (4,) [w, x, y, z])`` of the body in the odom frame."""
        return self.q[4:7].copy(), self.q[0:4].copy()

    @property
    def twist(self) -> tuple[np.ndarray, np.ndarray]:
        """``(linear (3,) [m/s], angular (3,) [rad/s])`` body twist in body coordinates."""
        return self.qdot[3:6].copy(), self.qdot[0:3].copy()

    @property
    def pose_covariance(self) -> np.ndarray:
        """(6, 6) propagated pose covariance, ``[dtheta; dp]`` world axes (uncertainty module)."""
        return self.P.copy()

    @property
    def pose_covariance_ros(self) -> np.ndarray:
        """(36,) pose covariance in ``PoseWithCovariance`` layout (x y z rx ry rz)."""
        return to_ros_pose_covariance(self.P)

    @property
    def twist_covariance(self) -> np.ndarray:
        """(6, 6) covariance of the body twist ``[w; v]`` of the last step.

        ``Q' / dt`` (the discrete twist noise of the step, uncertainty module docstring), with
        the angular block replaced by the gyro's covariance when the gyro was used and its
        covariance provided. Before the first step ``Q' / max_step``.
        """
        dt = self._dt_last if math.isfinite(self._dt_last) else self.max_step
        C = self.Qprime / max(dt, 1e-6)
        if self.use_gyro and self._gyro_cov is not None:
            C = C.copy()
            C[0:3, :] = 0.0
            C[:, 0:3] = 0.0
            C[0:3, 0:3] = self.R_body_imu @ self._gyro_cov @ self.R_body_imu.T
        return C

    @property
    def twist_covariance_ros(self) -> np.ndarray:
        """(36,) twist covariance in ``TwistWithCovariance`` layout (vx vy vz wx wy wz)."""
        return twist_covariance_ros(self.twist_covariance)

    # ---- input --------------------------------------------------------------------------------
    def _reject(self, stream: str, reason: str, detail: str) -> UpdateResult:
        d = self.diagnostics
        d.rejected[reason] += 1
        d.rejected_by_stream[(stream, reason)] += 1
        d.last_rejection = f"{stream}: {reason}: {detail}"
        return UpdateResult(False, reason=reason)

    def update_imu(self, stamp: float, angular_velocity: Sequence[float],
                   orientation: Sequence[float] | None = None, *,
                   angular_velocity_covariance: np.ndarray | None = None,
                   orientation_covariance: np.ndarray | None = None) -> UpdateResult:
        """Add one IMU sample (never steps the state; encoder messages do).

        Args:
            stamp: sample time [s] (message header stamp).
            angular_velocity: (3,) [rad/s] in the IMU frame.
            orientation: (4,) ``[w, x, y, z]`` of the IMU frame in a gravity-aligned frame, or
                None / NaN when not provided (REP-145: orientation_covariance[0] = -1).
            angular_velocity_covariance: (3, 3) or None when unknown.
            orientation_covariance: (3, 3); unused except for "not provided" by the caller.
        """
        try:
            t = float(stamp)
            w = np.asarray(angular_velocity, dtype=float).reshape(3)
        except (TypeError, ValueError):
            return self._reject("imu", "bad_length", "angular_velocity must have 3 elements")
        if not math.isfinite(t):
            return self._reject("imu", "non_finite", f"stamp {stamp}")
        if not np.all(np.isfinite(w)):
            return self._reject("imu", "non_finite", f"angular_velocity {w.tolist()}")
        problem = angular_rate_problem(w.tolist(), self.limits)
        if problem:
            return self._reject("imu", "implausible", f"stamp {t:.9f}: {problem}")
        last = self._imu_stamp
        if last is not None and t == last:
            return self._reject("imu", "duplicate", f"stamp {t:.9f} repeated")
        if last is not None and last - self.time_jump_threshold <= t < last:
            return self._reject("imu", "out_of_order", f"stamp {t:.9f} < previous {last:.9f}")
        if self.stamp is not None and t <= self.stamp - self.late_tolerance:
            if t < self.stamp - self.time_jump_threshold:
                # the IMU clock jumped back; the encoder stream decides about a reset
                self._imu_stamp = t
            return self._reject("imu", "late", f"stamp {t:.9f} behind the odometry front "
                                f"{self.stamp:.9f} by more than {self.late_tolerance} s")
        self._imu_stamp = t
        self._imu_buffer.append((t, w))
        if angular_velocity_covariance is not None:
            c = np.asarray(angular_velocity_covariance, dtype=float).reshape(3, 3)
            self._gyro_cov = c if (np.all(np.isfinite(c)) and c[0, 0] >= 0
                                   and np.any(c != 0)) else None
        if orientation is not None:
            o = np.asarray(orientation, dtype=float).reshape(4)
            n = float(np.linalg.norm(o)) if np.all(np.isfinite(o)) else math.nan
            if math.isfinite(n) and abs(n - 1.0) < 0.1:
                self._attitude = (t, o / n)
        self.diagnostics.accepted["imu"] += 1
        self.diagnostics.last_stamp["imu"] = t
        return UpdateResult(True)

    def update_encoders(self, stamp: float, names: Sequence[str],
                        positions: Sequence[float] | None = None,
                        velocities: Sequence[float] | None = None) -> UpdateResult:
        """Add one encoder message; steps the state over ``(previous stamp, stamp]``.

        Args:
            stamp: message time [s].
            names: joint names (encoder names of ``encoder_map`` or model joint names); names
                neither knows are ignored and listed in ``diagnostics.unknown_joints``.
            positions: joint positions [rad or m], empty/None when not provided.
            velocities: joint rates [rad/s or m/s], empty/None when not provided; joints without
                a finite rate are differentiated from their positions.
        """
        names = list(names)
        pos = np.asarray([] if positions is None else positions, dtype=float).reshape(-1)
        vel = np.asarray([] if velocities is None else velocities, dtype=float).reshape(-1)
        for label, arr in (("positions", pos), ("velocities", vel)):
            if arr.size not in (0, len(names)):
                return self._reject("encoders", "bad_length",
                                    f"{label} has {arr.size} elements for {len(names)} names")
        try:
            t = float(stamp)
        except (TypeError, ValueError):
            return self._reject("encoders", "non_finite", f"stamp {stamp!r}")
        if not math.isfinite(t):
            return self._reject("encoders", "non_finite", f"stamp {stamp}")
        if names and pos.size == 0 and vel.size == 0:
            return self._reject("encoders", "no_values", f"stamp {t:.9f}: both position and "
                                f"velocity are empty (not provided) for {names}")
        layout, missing = match_encoder_layout(self.encoder_layouts, names)
        if layout is None:
            self.diagnostics.missing_joints = tuple(missing)
            alts = " or ".join(f"{k} {list(v)}" for k, v in self.encoder_layouts.items())
            return self._reject("encoders", "missing_joints",
                                f"{missing} absent (message has {names}; expected {alts})")
        if layout != self.layout:
            self._select_layout(layout)
        index = {n: i for i, n in enumerate(names)}
        known = {n for tg in self.encoder_layouts.values() for n in tg}
        unknown = [n for n in names if n not in known and n not in self._position_joints]
        if unknown and set(unknown) - set(self.diagnostics.unknown_joints):
            self.diagnostics.unknown_joints = tuple(sorted(set(self.diagnostics.unknown_joints)
                                                           | set(unknown)))
        # per required joint: a rate, or a position to differentiate
        meas_pos: dict[str, float] = {}
        meas_vel: dict[str, float] = {}
        for n in self.required_joints:
            i = index[n]
            p = float(pos[i]) if pos.size else math.nan
            v = float(vel[i]) if vel.size else math.nan
            if not (math.isfinite(p) or math.isfinite(v)):
                return self._reject("encoders", "non_finite", f"joint {n!r}: position {p}, "
                                    f"velocity {v}")
            if math.isfinite(p):
                meas_pos[n] = p
            if math.isfinite(v):
                meas_vel[n] = v
        front = self.stamp
        if front is not None:
            if t == front:
                return self._reject("encoders", "duplicate", f"stamp {t:.9f} repeated")
            if front - self.time_jump_threshold <= t < front:
                return self._reject("encoders", "out_of_order",
                                    f"stamp {t:.9f} < previous {front:.9f}")
        rates: dict[str, float] = {}
        if front is not None and front < t <= front + self.max_step:
            req = self.required_joints
            nan = math.nan
            r = rate_or_difference([meas_vel.get(n, nan) for n in req],
                                   [meas_pos.get(n, nan) for n in req],
                                   [self._enc_positions.get(n, nan) for n in req], t - front)
            rates = {n: float(x) for n, x in zip(req, r.tolist()) if math.isfinite(x)}
            prev = self._gate_prev
            problem = wheel_rate_problem(
                rates, self._layout_radii[self.layout], self.limits,
                None if prev is None else prev[1], math.nan if prev is None else t - prev[0])
            if problem:
                return self._reject("encoders", "implausible", f"stamp {t:.9f}: {problem}")
        reset = "" if front is None else self._time_jump(t, front)
        self.diagnostics.accepted["encoders"] += 1
        self.diagnostics.last_stamp["encoders"] = t
        stepped = False
        if rates and len(rates) == len(self.required_joints):
            self._gate_prev = (t, rates)
            self._apply_pending()
            self._step(t, rates, names, pos)
            stepped = True
        self.stamp = t
        self._enc_positions.update(meas_pos)
        return UpdateResult(True, stepped=stepped, reset=reset)

    def _restart_time_base(self) -> None:
        self.stamp = None
        self._enc_positions = {}
        self._gate_prev = None
        self._imu_buffer = []
        self._gyro_held = None

    def _time_jump(self, t: float, front: float) -> str:
        """Handle an encoder stamp ``t`` far from the integration front: a backwards jump
        (bag loop, clock reset) resets; a gap over ``max_step`` resets (``reset_on_gap``) or
        restarts the time base keeping the pose. Returns the reason, or "" when neither."""
        reset = ""
        if t < front - self.time_jump_threshold:
            reset = (f"time jumped backwards by {front - t:.3f} s (stamp {t:.9f} after "
                     f"{front:.9f}): bag loop or clock reset")
            self.reset(reset)
        elif t - front > self.max_step:
            reset = (f"gap of {t - front:.3f} s > max_step {self.max_step} s after stamp "
                     f"{front:.9f}: not integrated")
            if self.reset_on_gap:
                self.reset(reset)
            else:
                self.diagnostics.resets += 1
                self.diagnostics.last_reset_reason = reset + " (pose kept)"
                self._restart_time_base()
        return reset

    # ---- the step -------------------------------------------------------------------------------
    def _gyro_for(self, t0: float, t1: float) -> np.ndarray | None:
        lo = t0 - self.late_tolerance
        used = [w for s, w in self._imu_buffer if lo < s <= t1]
        self._imu_buffer = [(s, w) for s, w in self._imu_buffer if s > t1]
        if used:
            w = np.mean(used, axis=0)
            self._gyro_held = (t1, w)
            return w
        if self._gyro_held is not None and t1 - self._gyro_held[0] <= self.gyro_timeout:
            return self._gyro_held[1]
        return None

    def _step(self, t1: float, rates: Mapping[str, float], names: Sequence[str],
              pos: np.ndarray) -> None:
        model, data = self.model, self._data
        t0 = self.stamp
        assert t0 is not None
        dt = t1 - t0
        known = self._known_base.copy()
        qk = np.zeros(model.nv)
        for n, r in rates.items():
            for k in self.encoder_targets[n]:
                qk[6 + k] = r
        w_imu = self._gyro_for(t0, t1) if self.use_gyro else None
        if self.use_gyro and w_imu is None:
            self.diagnostics.gyro_stale_steps += 1
        if w_imu is not None:
            known[0:3] = True
            qk[0:3] = self.R_body_imu @ w_imu
        q = self.q
        sigma = self.stabilization / dt
        m, t = model.kinematic_arrays(), self.terrain.kernel_args()
        vc = np.zeros((model.nc, 2))
        # fresh solve scratch for this step's known set (with or without the gyro)
        d = data.kernel._replace(solve_ws=solve_workspace(data.A.shape[0], known))
        if self.fidelity == "enhanced":
            d = d._replace(enhanced_ws=enhanced_workspace())
            res = enhanced_joint_space_velocity(
                m, t, d, q, known, qk, sigma, vc, d.qdot,
                BodySlip(self._I_frame, np.array([0.0, 0.0, -STANDARD_GRAVITY]), self.slip,
                         self.slip_axes, True))
        else:
            res = joint_space_velocity(m, t, d, q, known, qk, sigma, vc, d.qdot)
        self.diagnostics.max_residual = max(self.diagnostics.max_residual, float(res))
        qdot = data.qdot
        # covariance first: F and G at the start of the step (3.22)-(3.24)
        propagate_pose_covariance(self.P, quat_to_rot(q[0:4]), np.ascontiguousarray(qdot[3:6]),
                                  self.Qprime, dt, self.P, self._cov_ws)
        q_next = np.empty(model.nq)
        integrate_euler(q, qdot, dt, q_next)
        # measured positions of non-wheel joints (steering, suspension) replace integrated ones
        if pos.size:
            for i, n in enumerate(names):
                j = self._position_joints.get(n)
                if j is not None and math.isfinite(pos[i]):
                    q_next[7 + j] = pos[i]
        if self.impose_imu_attitude and self._attitude is not None \
                and t1 - self._attitude[0] <= self.gyro_timeout:
            R_w_body = quat_to_rot(self._attitude[1]) @ self.R_body_imu.T
            rpy = quats_to_euler(rot_to_quat(R_w_body))
            yaw = float(quats_to_euler(q_next[0:4])[2])
            q_next[0:4] = eulers_to_quat(np.array([rpy[0], rpy[1], yaw]))
        self.q = q_next
        self.qdot = qdot.copy()
        self._dt_last = dt
        self.diagnostics.steps += 1

