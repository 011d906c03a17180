"""Streaming online IPEM: buffers encoder, IMU and ground-truth pose samples by stamp, closes
intervals by an :class:`~wmr_model.calibration.intervals.IntervalPolicy` as poses arrive, and
runs :meth:`~wmr_model.calibration.online.OnlineCalibrator.update` on each (thesis §3.2.4).

This is the ROS-free driver of the calibrator node (style.md §7): it takes stamps [s] and
arrays, never messages. All timing comes from the stamps; the caller's clock is never read.

Interval closing repeats :func:`~wmr_model.calibration.intervals.select_intervals` one pose at
a time, so a stream fed sample by sample yields the same intervals (and, with the same inputs,
the same estimates) as the batch :meth:`OnlineCalibrator.run` over the whole log. A closed
interval waits until the encoders cover its end (DDS delivers the streams independently) and
is then simulated over a window of the buffered encoder rates (:class:`CalibrationLog` with
two poses).

Robustness, as in :class:`wmr_model.estimation.odometry.Odometry3D`:

* non-finite values, missing joints, unusable quaternions: the sample is rejected (counted);
* duplicate stamps and stamps older than the newest of their stream: rejected, unless older by
  more than ``time_jump_threshold`` - a bag loop or ``/clock`` reset: the buffers are cleared
  (the estimate is kept) and the reason recorded;
* encoder gaps longer than ``max_encoder_gap`` inside an interval, or encoders that never cover
  it (``max_wait``): the interval is skipped (counted), the filter is not touched;
* a pose without a usable covariance gets :data:`~wmr_model.calibration.logs.DEFAULT_POSE_STD`;
* with ``reference=(dd, policy)``, an interval whose reference poses contain a jump or a
  diverged stretch against the latency-corrected wheels and gyro
  (:func:`wmr_model.calibration.reference.reference_faults`, the same test as ``wmr calibrate``
  and ``wmr replay``) is skipped as ``reference_fault`` (counted), and so is, as
  ``reference_unsettled``, every interval starting less than the policy's ``settle`` seconds
  after the last faulty step. Two differences from the whole-log test, both from updating as
  the data arrive: an interval is not taken back when a fault follows within ``settle`` (the
  whole-log test also distrusts the reference ``settle`` before a fault), and the stream sees
  the reference of the intervals it closes only (not of standing-still stretches the interval
  policy drops), so a fault there does not start the settling time.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from wmr_model.calibration.intervals import (
    IntervalPolicy,
    ground_truth_jumps,
    interval_ending_at,
    unwrapped_yaw,
)
from wmr_model.calibration.logs import DEFAULT_POSE_STD, CalibrationLog
from wmr_model.calibration.online import OnlineCalibrator, UpdateRecord
from wmr_model.errors import ParameterError, WmrError
from wmr_model.parameters import OptionSpec, option_default, register_options

__all__ = ["IntervalOutcome", "StreamDiagnostics", "StreamCalibrator", "STREAM_OPTIONS"]

#: Option group of the stream buffers (:func:`wmr_model.parameters.options`): the defaults of
#: :class:`StreamCalibrator` and the calibrator node's parameters of the same names.
STREAM_OPTIONS = "stream"

register_options(STREAM_OPTIONS, [
    OptionSpec("margin", 0.25, unit="s", lower=0.0, upper=60.0, read_only=True, description=(
        "encoder history kept around each interval (>= |time offset| + one encoder period)")),
    OptionSpec("max_wait", 5.0, unit="s", lower=0.0, upper=600.0, read_only=True, description=(
        "(stamp time) an interval waits for encoders covering it before it is skipped")),
    OptionSpec("max_encoder_gap", 0.5, unit="s", lower=0.0, upper=600.0, read_only=True,
               description="intervals with a longer encoder gap are skipped"),
    OptionSpec("time_jump_threshold", 1.0, unit="s", lower=0.0, upper=3600.0, read_only=True,
               description="a stamp this far behind its stream is a time jump (bag loop): "
               "buffers cleared, estimate kept"),
    OptionSpec("max_history", 120.0, unit="s", lower=1.0, upper=86400.0, read_only=True,
               description="encoder history kept at most (memory)"),
])

#: Quaternions whose squared norm is below this are rejected (not a rotation; e.g. all zero).
MIN_QUATERNION_NORM2 = 0.5


@dataclass(frozen=True)
class IntervalOutcome:
    """One closed interval.

    Attributes:
        t0, t1: stamps [s] of its ground-truth poses.
        record: what the filter did (None when the interval was skipped before the filter).
        skipped: why it was skipped ("" when processed).
    """

    t0: float
    t1: float
    record: UpdateRecord | None = None
    skipped: str = ""


@dataclass
class StreamDiagnostics:
    """Counters of a :class:`StreamCalibrator` (for the node's ``/diagnostics``)."""

    accepted: Counter = field(default_factory=Counter)  # stream -> samples
    rejected: Counter = field(default_factory=Counter)  # reason -> samples
    skipped: Counter = field(default_factory=Counter)  # reason -> intervals
    intervals: int = 0  # intervals through the filter, accepted or not
    outliers: int = 0  # of those, rejected by the D_M gate (3.68)
    resets: int = 0
    last_reset_reason: str = ""
    last_rejection: str = ""
    default_covariances: int = 0  # poses that got DEFAULT_POSE_STD

    @property
    def rejected_total(self) -> int:
        return int(sum(self.rejected.values()))


@dataclass
class _Pending:
    t0: float
    t1: float
    pose: np.ndarray  # (2, 7)
    cov: np.ndarray  # (2, 6, 6)
    waited_since: float  # newest stamp seen when the interval closed
    path_t: np.ndarray | None = None  # (n,) stamps of every reference pose of the interval
    path: np.ndarray | None = None  # (n, 7) those poses


class StreamCalibrator:
    """Online IPEM over live streams (see the module docstring).

    Args:
        make_calibrator: builds a fresh :class:`OnlineCalibrator` (at start and on
            :meth:`reset`).
        joint_names: (ne,) model joint names whose rates the predictor reads (the actuated
            joints; :meth:`CalibrationLog.actuated_columns`).
        policy: interval policy.
        encoder_map: robot joint -> model joints it drives (a vehicle sidecar's
            ``encoder_map``); joints not in it are matched by name.
        pose_sensor: sensor frame the poses are of (None: the body).
        margin: [s] encoder history kept beyond each interval end for interpolation and time
            offsets (>= the largest |time_offset| estimated plus one encoder period).
        max_wait: [s] (stamp time) an interval waits for the encoders to cover it.
        max_encoder_gap: [s] longest encoder gap accepted inside an interval.
        time_jump_threshold: [s] a stamp this far behind its stream's newest is a time jump.
        max_history: [s] encoder history kept at most (memory bound).
        steering: steering joint -> :class:`~wmr_model.estimation.steering.SteerInput` of a
            steered vehicle: their angles come through :meth:`add_steer` and reach every
            interval's log as steering readings (commanded ones followed with their lag by
            the predictor); they are not among ``joint_names``.
        heading: ``(planar predictor, R_body_imu (3, 3))`` to derive the heading of a
            position-only reference live (:meth:`fix_heading`,
            :class:`~wmr_model.calibration.heading.HeadingTrack`): the planar model's speed of
            every encoder sample and the gyro's yaw rate (turned into body axes) feed it; None:
            the reference gives its orientation.
    """

    def __init__(self, make_calibrator: Callable[[], OnlineCalibrator],
                 joint_names: Sequence[str], policy: IntervalPolicy, *,
                 encoder_map: Mapping[str, Sequence[str]] | None = None,
                 pose_sensor: str | None = None,
                 margin: float = option_default(STREAM_OPTIONS, "margin"),
                 max_wait: float = option_default(STREAM_OPTIONS, "max_wait"),
                 max_encoder_gap: float = option_default(STREAM_OPTIONS, "max_encoder_gap"),
                 time_jump_threshold: float = option_default(STREAM_OPTIONS,
                                                             "time_jump_threshold"),
                 max_history: float = option_default(STREAM_OPTIONS, "max_history"),
                 source: str = "<stream>",
                 reference: tuple | None = None,
                 steering: Mapping[str, Any] | None = None,
                 heading: tuple | None = None) -> None:
        if not joint_names:
            raise ParameterError(f"{source}: joint_names: at least one joint is needed")
        for name, v in (("margin", margin), ("max_wait", max_wait),
                        ("max_encoder_gap", max_encoder_gap),
                        ("time_jump_threshold", time_jump_threshold),
                        ("max_history", max_history)):
            if not (math.isfinite(v) and v >= 0):
                raise ParameterError(f"{source}: {name}: must be finite and >= 0 s, got {v}")
        self.make_calibrator = make_calibrator
        self.joint_names = tuple(joint_names)
        self.policy = policy
        self.pose_sensor = pose_sensor
        self.margin = float(margin)
        self.max_wait = float(max_wait)
        self.max_encoder_gap = float(max_encoder_gap)
        self.time_jump_threshold = float(time_jump_threshold)
        self.max_history = float(max_history)
        self.source = source
        #: (DiffDrivePredictor, ReferencePolicy) of the reference-fault test, or None
        self.reference = reference
        col = {n: k for k, n in enumerate(self.joint_names)}
        # robot joint -> columns of joint_names it fills
        self._columns: dict[str, list[int]] = {n: [k] for n, k in col.items()}
        for robot, targets in dict(encoder_map or {}).items():
            cols = [col[t] for t in targets if t in col]
            if cols:
                self._columns[str(robot)] = cols
        self.steering = dict(steering or {})
        self.steer_names = tuple(self.steering)
        self.steer_commanded = tuple(j for j, si in self.steering.items()
                                     if getattr(si, "source", "measured") == "commanded")
        self.heading = heading
        self.calibrator = make_calibrator()
        self.diagnostics = StreamDiagnostics()
        self._clear()

    # ---- state ------------------------------------------------------------------------------
    def _clear(self) -> None:
        self._enc_t: list[float] = []
        self._enc_r: list[np.ndarray] = []
        self._last_pos: dict[str, tuple[float, float]] = {}  # joint -> (stamp, position)
        self._enc_newest = -math.inf
        self._imu_newest = -math.inf
        self._gyro_t: list[float] = []
        self._gyro: list[np.ndarray] = []
        self._steer_t: list[float] = []
        self._steer: list[np.ndarray] = []
        self._steer_last = np.full(len(getattr(self, "steer_names", ())), np.nan)
        from wmr_model.calibration.heading import HeadingTrack

        self._track = HeadingTrack() if getattr(self, "heading", None) is not None else None
        self._pose_t: list[float] = []
        self._pose: list[np.ndarray] = []
        self._pose_cov: list[np.ndarray] = []
        self._i0: int | None = None  # start of the next non-overlapping interval
        self._pending: list[_Pending] = []
        # reference stamp before which the reference has not settled after its last fault
        self._settled_at = -math.inf

    def reset(self, reason: str = "reset requested") -> None:
        """Restart: a fresh calibrator (initial values and covariance) and empty buffers."""
        self.calibrator = self.make_calibrator()
        self._clear()
        self._note_reset(reason)

    def _note_reset(self, reason: str) -> None:
        self.diagnostics.resets += 1
        self.diagnostics.last_reset_reason = reason

    def _reject(self, reason: str, detail: str) -> list[IntervalOutcome]:
        self.diagnostics.rejected[reason] += 1
        self.diagnostics.last_rejection = f"{reason}: {detail}"
        return []

    def _order(self, stream: str, stamp: float, newest: float) -> str:
        """"ok", "jump" (buffers cleared) or a rejection reason for a new ``stamp``."""
        if not math.isfinite(stamp):
            return "non_finite_stamp"
        if stamp == newest:
            return "duplicate"
        if stamp < newest:
            if newest - stamp > self.time_jump_threshold:
                self._clear()
                self._note_reset(f"time jump: {stream} stamp {stamp:.3f} s is "
                                 f"{newest - stamp:.3f} s behind (bag loop or clock reset); "
                                 "buffers cleared, estimate kept")
                return "jump"
            return "out_of_order"
        return "ok"

    @property
    def time_offset(self) -> float:
        """Current ``time_offset.pose`` estimate [s] (0 when not estimated)."""
        cal = self.calibrator
        if "time_offset.pose" in cal.names:
            return float(cal.x[cal.names.index("time_offset.pose")])
        return float(getattr(cal.predictor, "base", {}).get("time_offset.pose", 0.0))

    # ---- inputs -----------------------------------------------------------------------------
    def add_encoders(self, stamp: float, names: Sequence[str],
                     positions: Sequence[float] | np.ndarray = (),
                     velocities: Sequence[float] | np.ndarray = ()) -> list[IntervalOutcome]:
        """One joint-state sample; returns the intervals it let complete.

        Rates come from ``velocities`` (one per name) or, when those are not given, from the
        difference of consecutive ``positions`` (stamped at the midpoint).
        """
        names = list(names)
        pos = np.asarray(positions, dtype=float).ravel()
        vel = np.asarray(velocities, dtype=float).ravel()
        if len(vel) not in (0, len(names)) or len(pos) not in (0, len(names)):
            return self._reject("length_mismatch", f"{len(names)} names, {len(pos)} positions,"
                                f" {len(vel)} velocities")
        order = self._order("encoders", float(stamp), self._enc_newest)
        if order not in ("ok", "jump"):
            return self._reject(order, f"encoder stamp {stamp} (newest {self._enc_newest})")
        stamp = float(stamp)
        rate = np.full(len(self.joint_names), np.nan)
        t_rate = stamp
        if len(vel):
            need = [k for k, n in enumerate(names) if n in self._columns]
            if not np.all(np.isfinite(vel[need])):
                return self._reject("non_finite", f"encoder velocities at {stamp}: {vel}")
            for n, v in zip(names, vel):
                for c in self._columns.get(n, ()):
                    rate[c] = v
        elif len(pos):
            if not np.all(np.isfinite(pos)):
                return self._reject("non_finite", f"encoder positions at {stamp}: {pos}")
            prev = {n: self._last_pos[n] for n in names if n in self._last_pos}
            for n, p in zip(names, pos):
                self._last_pos[n] = (stamp, float(p))
            self._enc_newest = stamp
            if not prev:
                return []  # first position sample: no rate yet
            t_prev = max(t for t, _ in prev.values())
            t_rate = 0.5 * (t_prev + stamp)
            for n, p in zip(names, pos):
                if n in prev and prev[n][0] == t_prev:
                    for c in self._columns.get(n, ()):
                        rate[c] = (p - prev[n][1]) / (stamp - t_prev)
        else:
            return self._reject("empty", f"encoder sample at {stamp} has neither positions nor "
                                "velocities")
        missing = [self.joint_names[k] for k in np.flatnonzero(np.isnan(rate))]
        if missing:
            return self._reject("missing_joints", f"no rate for {missing} at {stamp}; got "
                                f"{names}")
        self._enc_newest = stamp
        if self._enc_t and t_rate <= self._enc_t[-1]:
            return self._reject("out_of_order", f"encoder rate stamp {t_rate}")
        self._enc_t.append(t_rate)
        self._enc_r.append(rate)
        self.diagnostics.accepted["encoders"] += 1
        if self._track is not None:
            self._track_speed(t_rate, rate)
        out = self._process()
        self._trim()
        return out

    def add_steer(self, stamp: float, names: Sequence[str],
                  positions: Sequence[float] | np.ndarray) -> int:
        """The steering joints' angles [rad] of one JointState sample (its positions; others
        and non-finite values ignored, a joint missing from the sample keeps its last angle);
        buffered in stamp order for the intervals' logs. Returns how many were taken."""
        if not self.steer_names:
            return 0
        pos = np.asarray(positions, dtype=float).ravel()
        row = self._steer_last.copy()
        n = 0
        for name, p in zip(names, pos):
            if name in self.steering and math.isfinite(float(p)):
                row[self.steer_names.index(name)] = float(p)
                n += 1
        t = float(stamp)
        if not n or not math.isfinite(t) or (self._steer_t and t <= self._steer_t[-1]):
            return 0
        self._steer_last = row
        if np.all(np.isfinite(row)):
            self._steer_t.append(t)
            self._steer.append(row)
            self.diagnostics.accepted["steer"] += 1
        return n

    def _track_speed(self, t: float, rate: np.ndarray) -> None:
        """The planar model's speed and yaw rate of one encoder sample into the heading track
        (the steering angles at ``t`` for a steered vehicle; none yet: skipped)."""
        assert self.heading is not None and self._track is not None
        planar = self.heading[0]
        steer: dict[str, Any] = {}
        if self.steer_names:
            if not np.all(np.isfinite(self._steer_last)):
                return
            steer = {"pot_names": self.steer_names, "pot_time": np.array([t - 1e-3, t]),
                     "pot_reading": np.tile(self._steer_last, (2, 1))}
        log = CalibrationLog(joint_names=self.joint_names, joint_time=np.array([t - 1e-3, t]),
                             joint_rate=np.tile(rate, (2, 1)), pose_time=np.zeros(0),
                             pose=np.zeros((0, 7)), pose_covariance=np.zeros((0, 6, 6)),
                             source=self.source, **steer)
        try:
            v, w = planar.twist(log, np.array([t]))
        except (WmrError, ValueError):
            return
        self._track.add_speed(t, float(v[0]), float(w[0]))

    def fix_heading(self, stamp: float, position: np.ndarray,
                    sigma: float) -> tuple[float, float] | None:
        """Derived heading [rad] and its sigma for a position-only reference sample at
        ``position`` (>= 2,) [m] with horizontal sigma ``sigma`` [m], from the trailing window
        (:class:`~wmr_model.calibration.heading.HeadingTrack`); None when not configured
        (``heading``) or not yet determined."""
        if self._track is None:
            return None
        return self._track.heading(float(stamp), np.asarray(position, dtype=float)[:2],
                                   float(sigma))

    def add_imu(self, stamp: float, angular_velocity: Sequence[float] | np.ndarray) -> None:
        """One gyro sample [rad/s] (IMU axes); buffered for predictors that read gyro, and its
        body yaw rate fed to the heading track of a position-only reference."""
        w = np.asarray(angular_velocity, dtype=float).ravel()
        if w.shape != (3,) or not np.all(np.isfinite(w)):
            self._reject("non_finite", f"imu angular velocity at {stamp}: {w}")
            return
        if self._track is not None and self.heading is not None:
            R = np.asarray(self.heading[1], dtype=float)
            self._track.add_gyro(float(stamp), float((R @ w)[2]))
        order = self._order("imu", float(stamp), self._imu_newest)
        if order not in ("ok", "jump"):
            self._reject(order, f"imu stamp {stamp} (newest {self._imu_newest})")
            return
        self._imu_newest = float(stamp)
        self._gyro_t.append(float(stamp))
        self._gyro.append(w)
        self.diagnostics.accepted["imu"] += 1

    def add_pose(self, stamp: float, pose: Sequence[float] | np.ndarray,
                 covariance: np.ndarray | None = None) -> list[IntervalOutcome]:
        """One ground-truth pose ``[qw, qx, qy, qz, x, y, z]`` of the pose sensor, with its
        (6, 6) covariance in ``[dtheta; dp]`` world axes (None: not provided); returns the
        intervals it let complete."""
        p = np.asarray(pose, dtype=float).ravel()
        if p.shape != (7,) or not np.all(np.isfinite(p)):
            return self._reject("non_finite", f"pose at {stamp}: {p}")
        n2 = float(p[:4] @ p[:4])
        if n2 < MIN_QUATERNION_NORM2:
            return self._reject("bad_quaternion", f"pose at {stamp}: |q|^2 = {n2:.3g}")
        p[:4] /= math.sqrt(n2)
        newest = self._pose_t[-1] if self._pose_t else -math.inf
        order = self._order("pose", float(stamp), newest)
        if order not in ("ok", "jump"):
            return self._reject(order, f"pose stamp {stamp} (newest {newest})")
        cov = None if covariance is None else np.asarray(covariance, dtype=float)
        if (cov is None or cov.shape != (6, 6) or not np.all(np.isfinite(cov))
                or np.any(np.diag(cov) <= 0)):
            a, b = DEFAULT_POSE_STD
            cov = np.diag([a * a] * 3 + [b * b] * 3)
            self.diagnostics.default_covariances += 1
        self._pose_t.append(float(stamp))
        self._pose.append(p)
        self._pose_cov.append(cov)
        self.diagnostics.accepted["pose"] += 1
        self._close_intervals()
        out = self._process()
        self._trim()
        return out

    # ---- intervals --------------------------------------------------------------------------
    def _path(self) -> np.ndarray:
        P = np.array([p[4:6] for p in self._pose])
        d = np.linalg.norm(np.diff(P, axis=0), axis=1)
        return np.concatenate([[0.0], np.cumsum(d)])

    def _close(self, i0: int, i1: int, s: np.ndarray | None) -> None:
        pol = self.policy
        if pol.filters_motion:
            s = self._path() if s is None else s
            yaw = unwrapped_yaw(np.array([p[:4] for p in self._pose[i0:i1 + 1]]))
            if not pol.informative(s[i1] - s[i0], yaw[-1] - yaw[0]):
                self.diagnostics.skipped["uninformative"] += 1  # neither moves nor turns enough
                return
        if math.isfinite(pol.max_speed):
            P = np.array([p[4:7] for p in self._pose[i0:i1 + 1]])
            if np.any(ground_truth_jumps(np.asarray(self._pose_t[i0:i1 + 1]), P, pol.max_speed)):
                self.diagnostics.skipped["ground_truth_jump"] += 1
                return
        newest = max(self._enc_newest, self._pose_t[-1])
        self._pending.append(_Pending(
            self._pose_t[i0], self._pose_t[i1], np.stack([self._pose[i0], self._pose[i1]]),
            np.stack([self._pose_cov[i0], self._pose_cov[i1]]), newest,
            *((np.array(self._pose_t[i0:i1 + 1]), np.array(self._pose[i0:i1 + 1]))
              if self.reference is not None else (None, None))))

    def _close_intervals(self) -> None:
        pol = self.policy
        t = self._pose_t
        k = len(t) - 1
        if pol.overlap == "sliding":
            s = self._path() if pol.kind == "distance" else None
            pos = None if s is None else np.array([p[4:7] for p in self._pose])
            i0 = interval_ending_at(np.asarray(t), k, pol, pos)
            if i0 is not None:
                self._close(i0, k, s)
            return
        if self._i0 is None:
            self._i0 = k
            return
        s = self._path() if pol.kind == "distance" or pol.filters_motion else None
        while self._i0 is not None and self._i0 < k:
            i0 = self._i0
            if pol.kind == "time":
                target = t[i0] + pol.length
                if t[k] < target:
                    return
                i1 = min((c for c in (k - 1, k) if c > i0), key=lambda c: abs(t[c] - target))
                if abs(t[i1] - target) <= pol.tol:
                    self._close(i0, i1, s)
            else:
                assert s is not None
                if s[k] < s[i0] + pol.length:
                    return
                i1 = k
                if t[i1] - t[i0] <= pol.max_duration:
                    self._close(i0, i1, s)
            self._i0 = i1

    def _process(self) -> list[IntervalOutcome]:
        out: list[IntervalOutcome] = []
        while self._pending:
            iv = self._pending[0]
            d = self.time_offset
            lo, hi = iv.t0 - d, iv.t1 - d
            newest = max(self._enc_newest, self._pose_t[-1] if self._pose_t else -math.inf)
            if not self._enc_t or self._enc_t[-1] < hi:
                if newest - iv.waited_since > self.max_wait:
                    self._pending.pop(0)
                    out.append(self._skip(iv, "encoders_do_not_cover_interval"))
                    continue
                break  # wait for the encoders
            self._pending.pop(0)
            out.append(self._run(iv, lo, hi))
        return out

    def _skip(self, iv: _Pending, reason: str) -> IntervalOutcome:
        self.diagnostics.skipped[reason] += 1
        return IntervalOutcome(iv.t0, iv.t1, skipped=reason)

    def _run(self, iv: _Pending, lo: float, hi: float) -> IntervalOutcome:
        t = np.asarray(self._enc_t)
        if t[0] - lo > self.max_encoder_gap:  # np.interp holds the first rate before t[0]
            return self._skip(iv, "encoders_start_after_interval")
        # the samples around [lo - margin, hi + margin] and one neighbour each side
        a = max(int(np.searchsorted(t, lo - self.margin, side="right")) - 1, 0)
        b = min(int(np.searchsorted(t, hi + self.margin, side="left")) + 1, len(t))
        a_in = max(int(np.searchsorted(t, lo, side="right")) - 1, 0)
        b_in = min(int(np.searchsorted(t, hi, side="left")) + 1, len(t))
        if b_in - a_in > 1 and float(np.max(np.diff(t[a_in:b_in]))) > self.max_encoder_gap:
            return self._skip(iv, "encoder_gap")
        gyro_t = gyro = None
        if self._gyro_t:
            gt = np.asarray(self._gyro_t)
            keep = (gt >= lo - self.margin) & (gt <= hi + self.margin)
            if np.any(keep):
                gyro_t, gyro = gt[keep], np.asarray(self._gyro)[keep]
        steer: dict[str, Any] = {}
        if self.steer_names:
            st = np.asarray(self._steer_t)
            if len(st) < 2 or st[0] > lo or st[-1] < lo:
                return self._skip(iv, "no_steering_angles")
            sa = max(int(np.searchsorted(st, lo - self.margin - 1.0, side="right")) - 1, 0)
            steer = {"pot_names": self.steer_names, "pot_time": st[sa:],
                     "pot_reading": np.asarray(self._steer[sa:]),
                     "steer_commanded": self.steer_commanded}
        try:
            log = CalibrationLog(joint_names=self.joint_names, joint_time=t[a:b],
                                 joint_rate=np.asarray(self._enc_r[a:b]),
                                 pose_time=np.array([iv.t0, iv.t1]), pose=iv.pose,
                                 pose_covariance=iv.cov, pose_sensor=self.pose_sensor,
                                 gyro_time=gyro_t, gyro=gyro, source=self.source, **steer)
            if (self.reference is not None and iv.path_t is not None and iv.path is not None
                    and self._faulty(log, self.reference, iv.path_t, iv.path, iv.cov)):
                return self._skip(iv, "reference_fault")
            if self.reference is not None and iv.t0 < self._settled_at:
                return self._skip(iv, "reference_unsettled")
            rec = self.calibrator.update(log, 0, 1)
        except (WmrError, ValueError, np.linalg.LinAlgError) as exc:
            return self._skip(iv, f"prediction_failed: {type(exc).__name__}: {exc}")
        self.diagnostics.intervals += 1
        if not rec.accepted:
            self.diagnostics.outliers += 1
        return IntervalOutcome(iv.t0, iv.t1, record=rec)

    def _faulty(self, log: CalibrationLog, reference: tuple, path_t: np.ndarray,
                path: np.ndarray, cov: np.ndarray) -> bool:
        """True when the interval's reference poses ``path`` (n, 7) at ``path_t`` (n,) jump or
        diverge (module docstring) under ``reference`` (predictor, policy); ``cov`` (2, 6, 6)
        the interval's end pose covariances. A fault also moves the stamp before which later
        intervals are skipped as unsettled (the policy's ``settle`` after its last faulty
        step)."""
        from dataclasses import replace

        from wmr_model.calibration.reference import reference_faults

        dd, policy = reference
        n = len(path_t)
        full = replace(log, pose_time=path_t, pose=path,
                       pose_covariance=np.repeat(cov[:1], n, axis=0))
        f = reference_faults(full, dd, policy, latency=self.time_offset)
        bad = np.flatnonzero(f.jump | f.diverged)
        if not len(bad):
            return False
        self._settled_at = max(self._settled_at, float(path_t[bad[-1] + 1]) + policy.settle)
        return True

    def _trim(self) -> None:
        """Drop samples no future interval can need."""
        if not self._pose_t:
            return
        pol = self.policy
        if pol.overlap == "none" and self._i0 is not None:
            keep_from = self._i0
        else:
            span = pol.length + pol.tol if pol.kind == "time" else pol.max_duration
            t_last = self._pose_t[-1]
            keep_from = int(np.searchsorted(self._pose_t, t_last - span, side="left")) - 1
            keep_from = max(keep_from, 0)
        if keep_from > 0:
            del self._pose_t[:keep_from], self._pose[:keep_from], self._pose_cov[:keep_from]
            if self._i0 is not None:
                self._i0 -= keep_from
        t_need = min([iv.t0 for iv in self._pending] + [self._pose_t[0]])
        d = abs(self.time_offset)
        t_cut = max(t_need - d - 2 * self.margin,
                    (self._enc_t[-1] if self._enc_t else -math.inf) - self.max_history)
        n = int(np.searchsorted(self._enc_t, t_cut, side="left")) - 1
        if n > 0:
            del self._enc_t[:n], self._enc_r[:n]
        g = int(np.searchsorted(self._gyro_t, t_cut, side="left")) - 1
        if g > 0:
            del self._gyro_t[:g], self._gyro[:g]
        # steering: a second more than the encoders (a commanded angle's lag history)
        k = int(np.searchsorted(self._steer_t, t_cut - 1.0, side="left")) - 1
        if k > 0:
            del self._steer_t[:k], self._steer[:k]
