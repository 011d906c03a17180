"""Offline replay of a bag: odometry, online IPEM calibration and Table 3.3 evaluation.

:func:`replay` runs what the robot's nodes run, message by message in stamp order and as fast as
the CPU allows:

1. **Odometry** - :class:`wmr_model.estimation.odometry.Odometry3D` (the odometry node's class) in
the
   variants ``3D kin. (encoders)`` (no gyro), ``3D kin. + gyro`` and ``3D kin.+ + gyro,
   calibrated online`` (enhanced kinematics whose slip, Q' and wheel radius follow the online
   calibration as each interval is processed), and after the run ``3D kin.+ + gyro, converged``
   (the final estimate from the start).
2. **Online calibration** - :class:`wmr_model.calibration.OnlineCalibrator` over consecutive
   ground-truth intervals of ``interval`` seconds, each processed as soon as its end pose is
   read; intervals whose ground-truth path is shorter than ``min_distance`` and whose net yaw
   change is smaller than ``min_turn`` (standing still) are skipped, since they carry no slip
   information and pull Q' toward zero (spins in place are kept).
3. **Evaluation** (thesis Table 3.3): mean horizontal position and absolute yaw error of the
   predicted end pose over all 1, 2 and 4 s intervals, for diff drive, diff drive+ (online and
   converged), 3D kin. and 3D kin.+ (online and converged). "Online" predicts each interval
   with the estimate of the updates completed before it started. Long-run drift: horizontal
   end-point error of each odometry variant against the reference after aligning the starts
   (planar), in % of the reference path length. **Out of sample** (``split`` F, default 0.6):
   the same rows over the intervals that start after the first F of the log, "calibrated"
   with the estimate of the updates finished by the split (frozen), "online" as above
   (:mod:`wmr_model.calibration.table`); reported first.

Input handling:

* Topics default to ``wmr synth``'s and common drivers' (:data:`DEFAULT_TOPICS`,
  :data:`wmr_model.io.bags.POSE_TOPIC_CANDIDATES`); a missing or empty required topic raises
  :class:`~wmr_model.errors.BagError` naming it and listing the bag's topics.
* **Stale wheel speeds** (loggers that republish the last value at a fixed rate, told from
  quantized fresh values that repeat by chance by :func:`held_values`): an encoder message
  whose velocities equal the last kept ones is dropped unless ``stale_hold`` seconds have
  passed or they are all zero (the wheels standing still: a measurement). Odometry then steps
  over the true refresh intervals and the calibration interpolates between fresh values.
* **Ground-truth latency** (lidar ICP, GPS/INS) is calibrated as ``time_offset.pose``; the drift
  evaluation against that stream shifts it by the converged estimate.
* A pose reference of a sensor frame other than the body (``child_frame_id``, e.g. a GPS
  antenna) becomes a sensor of the vehicle at ``pose_sensor_xyz`` (a synthetic bag's
  ``wmr_synth.yaml`` gives the nominal one) and ``sensor.<name>.x/y`` are calibrated. The planar
  diff-drive models have no sensor offset: their rows use the reference moved to the body with
  the converged 3D kin.+ offset.

Everything here is deterministic: two replays of a bag give identical results.
"""

from __future__ import annotations

import dataclasses
import math
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from wmr_model.calibration.intervals import (
    INTERVAL_OPTIONS,
    MOVING_MIN_DISTANCE,
    MOVING_MIN_TURN,
)
from wmr_model.calibration.reference import DEFAULT_SETTLE
from wmr_model.errors import BagError, ParameterError
from wmr_model.parameters import option_default

__all__ = [
    "DEFAULT_TOPICS",
    "EVAL_INTERVALS",
    "ReplayOptions",
    "ReplayResult",
    "OdometryTrack",
    "replay",
    "stale_mask",
    "held_values",
    "write_csv",
    "write_output_bag",
    "RESULTS_VERSION",
]

#: Default topics (``pose``: None = first of
#: :data:`wmr_model.io.bags.POSE_TOPIC_CANDIDATES` in the bag).
DEFAULT_TOPICS = {"encoders": "/joint_states", "imu": "/imu/data", "pose": None,
                  "truth": "/ground_truth/odom"}
#: Interval lengths of the Table 3.3 evaluation [s].
EVAL_INTERVALS = (1.0, 2.0, 4.0)
#: Version of results.json / the CSV layout. History: 1 - first version.
RESULTS_VERSION = 1

#: Odometry variant labels, in report order.
ODO_ENCODERS = "3D kin. (encoders)"
ODO_GYRO = "3D kin. + gyro"
ODO_ONLINE = "3D kin.+ + gyro, calibrated online"
ODO_CONVERGED = "3D kin.+ + gyro, converged"


@dataclass(frozen=True)
class ReplayOptions:
    """Options of :func:`replay` (the ``wmr replay`` flags have the same names).

    Attributes:
        vehicle: shipped name or description file (default: the synthetic bag's, else
            ``warthog``).
        encoder_topic, imu_topic, pose_topic, truth_topic: topics (pose None: auto; imu and
            truth optional unless ``require_imu``).
        steer_topic: JointState topic of the steering angles when the encoder topic lacks them
            (None: the vehicle sidecar's ``steering.<joint>.topic``, else the encoder topic).
        pose_sensor: sensor name of the pose reference frame (None: its ``child_frame_id``;
            the body frame means no sensor).
        pose_sensor_xyz: nominal position of that sensor in the body frame [m].
        terrain: terrain spec (:mod:`wmr_model.io.terrain_spec`); None: the synthetic bag's
            terrain, else flat.
        params: systematic parameters of 3D kin.+ (None: the synthetic bag's list, else slip
            p2..p6 and ``time_offset.pose``, plus ``sensor.<s>.x/y`` for a sensor frame).
        noise: Q' Cholesky entries estimated online.
        interval: calibration interval [s]; min_distance [m], min_turn [rad]: skip intervals
            whose ground-truth path is shorter and whose net yaw change is smaller.
        split: out-of-sample split fraction in (0, 1) (None: in-sample table only).
        reference_check: exclude intervals over reference jumps and diverged stretches from
            calibration and evaluation (:mod:`wmr_model.calibration.reference`), and warn when
            the reference's speed or yaw rate is far from the wheels'; reference_settle [s]:
            the reference is untrusted this long before and after a fault.
        eval_intervals: Table 3.3 interval lengths [s].
        dt: prediction step [s]; stale_hold: see the module docstring (None: keep all).
        pose_std: override the reference covariance (rotation [rad], position [m]).
        progress: draw a progress bar on stderr.
    """

    vehicle: str | None = None
    encoder_topic: str = "/joint_states"
    steer_topic: str | None = None
    imu_topic: str | None = "/imu/data"
    pose_topic: str | None = None
    truth_topic: str | None = "/ground_truth/odom"
    require_imu: bool = False
    pose_sensor: str | None = None
    pose_sensor_xyz: tuple[float, float, float] | None = None
    terrain: str | None = None
    params: tuple[str, ...] | None = None
    noise: tuple[str, ...] = ("noise.U.wz_wz", "noise.U.vx_vx", "noise.U.vy_vy")
    interval: float = option_default(INTERVAL_OPTIONS, "interval.length")
    min_distance: float = MOVING_MIN_DISTANCE
    min_turn: float = MOVING_MIN_TURN
    split: float | None = 0.6
    eval_intervals: tuple[float, ...] = EVAL_INTERVALS
    dt: float = 0.05
    stale_hold: float | None = 0.3
    stale_mode: str = "interpolate"
    pose_std: tuple[float, float] | None = None
    progress: bool = False
    reference_check: bool = True
    reference_settle: float = DEFAULT_SETTLE


#: Most points kept per plotted series (error vs time, aligned path, reference path); the drift
#: numbers are computed at full resolution before the series are thinned to this.
PLOT_POINTS = 5000


class TrackSamples:
    """Odometry samples of one variant, rows ``[t, qw, qx, qy, qz, x, y, z, var_x, var_y,
    var_yaw]`` (11 float64, 88 bytes): spooled in blocks to an unnamed temporary file (deleted
    when closed or collected) and read back block by block, so a long log costs disk, not
    memory: the writers stream the rows, the drift evaluation reads the planar columns
    ``(t, x, y, yaw)`` of one variant at a time (:attr:`planar`, 32 bytes a sample).

    Args:
        capacity: most samples that will be appended (one per encoder message).
        block: rows buffered in memory before they are written out.
    """

    WIDTH = 11
    #: rows read back at a time
    BLOCK_READ = 65536

    def __init__(self, capacity: int, block: int = 4096) -> None:
        import tempfile

        self.capacity = max(int(capacity), 0)
        self._block = np.empty((block, self.WIDTH))
        self._nb = 0  # rows in the block, not yet written
        self._written = 0  # rows in the file
        self._file = tempfile.TemporaryFile(prefix="wmr_replay_track_")

    def append(self, t: float, pose: np.ndarray, vx: float, vy: float, vyaw: float) -> None:
        """Add one sample: ``pose`` (7,) ``[qw, qx, qy, qz, x, y, z]``, variances of x, y, yaw."""
        if self._written + self._nb == self.capacity:
            raise ParameterError(f"odometry track: more than its capacity of {self.capacity} "
                                 "samples")
        row = self._block[self._nb]
        row[0] = t
        row[1:8] = pose[:7]
        row[8], row[9], row[10] = vx, vy, vyaw
        self._nb += 1
        if self._nb == len(self._block):
            self._flush()

    def _flush(self) -> None:
        if self._nb == 0:
            return
        self._file.seek(0, 2)
        self._file.write(self._block[:self._nb].tobytes())
        self._written += self._nb
        self._nb = 0

    def __len__(self) -> int:
        return self._written + self._nb

    @property
    def planar(self) -> np.ndarray:
        """(N, 4) ``[t, x, y, yaw]`` of every sample (read back from the spool)."""
        from wmr_model.calibration.residuals import yaw_of

        out = np.empty((len(self), 4))
        n = 0
        for b in self.blocks(self.BLOCK_READ):
            p = out[n:n + len(b)]
            p[:, 0], p[:, 1], p[:, 2], p[:, 3] = b[:, 0], b[:, 5], b[:, 6], yaw_of(b[:, 1:5])
            n += len(b)
        return out

    def blocks(self, rows: int = BLOCK_READ):
        """Yield the samples as (n, 11) arrays of at most ``rows`` rows, in order."""
        self._flush()
        f = self._file
        f.seek(0)
        left = self._written
        while left > 0:
            n = min(rows, left)
            yield np.frombuffer(f.read(n * 8 * self.WIDTH), dtype=float).reshape(n, self.WIDTH)
            left -= n

    def array(self) -> np.ndarray:
        """(N, 11) every sample at once (O(N) memory; the writers use :meth:`blocks`)."""
        parts = list(self.blocks())
        return np.concatenate(parts) if parts else np.zeros((0, self.WIDTH))

    def close(self) -> None:
        """Delete the spool file (the planar columns stay)."""
        self._file.close()


@dataclass
class OdometryTrack:
    """One odometry variant: ``samples`` (:class:`TrackSamples`; ``t`` (N,) [s from the bag
    start], ``pose`` (N, 7) ``[qw, qx, qy, qz, x, y, z]`` of the body in the odom frame, ``var``
    (N, 3) variances of x [m^2], y [m^2], yaw [rad^2] read it back whole); evaluation against
    the reference: ``err_t``, ``err`` horizontal error [m] and ``aligned_xy`` (M, 2), thinned to
    at most :data:`PLOT_POINTS` samples for the plots, ``drift_pct``, ``end_error`` [m],
    ``length`` [m] (full resolution) on the reference's trusted path, made of ``segments``
    stretches (reference faults cut it; :func:`_align_errors`), ``diagnostics`` summary."""

    label: str
    samples: TrackSamples
    err_t: np.ndarray = field(default_factory=lambda: np.zeros(0))
    err: np.ndarray = field(default_factory=lambda: np.zeros(0))
    aligned_xy: np.ndarray = field(default_factory=lambda: np.zeros((0, 2)))
    drift_pct: float = math.nan
    end_error: float = math.nan
    length: float = math.nan
    segments: int = 0
    diagnostics: dict = field(default_factory=dict)

    @property
    def t(self) -> np.ndarray:
        """(N,) sample times [s from the bag start]."""
        return self.samples.planar[:, 0].copy()

    @property
    def pose(self) -> np.ndarray:
        """(N, 7) poses (read back from the spool: O(N) memory)."""
        return self.samples.array()[:, 1:8]

    @property
    def var(self) -> np.ndarray:
        """(N, 3) variances of x, y, yaw (read back from the spool: O(N) memory)."""
        return self.samples.array()[:, 8:11]


@dataclass
class ReplayResult:
    """Everything :func:`replay` found (read by :mod:`wmr_model.io.report` and the CLI).

    Attributes:
        bag, vehicle, topics: inputs; t0: absolute stamp of the bag start [s].
        duration: replayed time [s]; wall_time: replay time [s] (not in any output file).
        table: ``{length: [(model, mean pos [m], mean yaw [rad], K)]}`` (Table 3.3, in sample).
        table_oos: the same over the intervals after the split (out of sample; empty without
            a split); split: ``{"fraction", "t_split", "calibration_intervals", "estimate",
            "dd_estimate"}`` (the frozen estimates) or {}.
        interval_classes: informative calibration intervals per class (straight, arc, spin).
        estimate, std: converged 3D kin.+ values and standard deviations by name;
        dd_estimate, dd_std: the same for the planar "+" model (``planar``: its kind, diff
            drive or bicycle); truth: known true values (synthetic).
        history: (U,) update times [s], values (U, n), stds (U, n), accepted (U,), names.
        odometry: tracks by label; reference: (t, xy) of the drift reference and its name.
        scatter: 2 s residuals of 3D kin.+ converged in the start-heading frame: ``r`` (K, 2)
            [m], ``R`` (K, 2, 2) predicted covariances.
        notes: what the replay did about the input (stale samples, rejected intervals...).
    """

    bag: str
    vehicle: str
    topics: dict[str, str]
    t0: float
    duration: float
    wall_time: float
    table: dict[float, list[tuple[str, float, float, int]]]
    estimate: dict[str, float]
    std: dict[str, float]
    dd_estimate: dict[str, float]
    dd_std: dict[str, float]
    truth: dict[str, float]
    history: dict
    odometry: dict[str, OdometryTrack]
    reference: dict
    scatter: dict
    notes: list[str]
    counts: dict[str, int]
    calibration_intervals: int
    rejected: int
    nominal: dict[str, float]
    table_oos: dict = field(default_factory=dict)
    split: dict = field(default_factory=dict)
    interval_classes: dict = field(default_factory=dict)
    #: the planar model of the vehicle's kind (``"diff drive"``, ``"bicycle"``)
    planar: str = "diff drive"

    def z_scores(self) -> dict[str, float]:
        """``(estimate - truth) / std`` of every calibrated name with a known truth."""
        return {n: (self.estimate[n] - self.truth[n]) / self.std[n] for n in self.estimate
                if n in self.truth and self.std.get(n, 0) > 0}


class _Progress:
    """Text progress bar on stderr (drawn at most every 0.2 s)."""

    def __init__(self, total: int, enabled: bool, label: str = "replay") -> None:
        self.total = max(1, total)
        self.enabled = enabled
        self.label = label
        self._last = 0.0

    def update(self, k: int, note: str = "") -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self._last < 0.2 and k < self.total:
            return
        self._last = now
        f = min(1.0, k / self.total)
        bar = "#" * int(30 * f) + "." * (30 - int(30 * f))
        sys.stderr.write(f"\r{self.label} [{bar}] {100 * f:5.1f}% {note}")
        sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            self.update(self.total)
            sys.stderr.write("\n")
            sys.stderr.flush()


def stale_mask(stamp: np.ndarray, values: np.ndarray, hold: float | None) -> np.ndarray:
    """Mask (N,) of encoder samples to keep: a sample repeating the last kept ``values`` row
    (N, nj) exactly is dropped unless ``hold`` seconds have passed since that row was kept.
    Only moving values can be stale: a row of exact zeros (NaN columns aside) is the wheels
    standing still, a measurement, and always kept."""
    n = len(stamp)
    keep = np.ones(n, dtype=bool)
    if hold is None or n == 0:
        return keep
    raw = np.asarray(values, dtype=float)
    still = np.all((raw == 0.0) | np.isnan(raw), axis=1)
    v = np.nan_to_num(raw, nan=np.inf)
    last_v, last_t = v[0], stamp[0]
    for i in range(1, n):
        if not still[i] and np.array_equal(v[i], last_v) and stamp[i] - last_t < hold:
            keep[i] = False
        else:
            last_v, last_t = v[i], stamp[i]
    return keep


def held_values(values: np.ndarray) -> bool:
    """Whether an encoder stream's rates (N, nj) are sample-and-hold (a logger republishing the
    last value faster than it refreshes), not fresh values that happen to repeat: per joint,
    consecutive moving samples that repeat exactly are compared with those one quantization
    step apart (the smallest non-zero change): a quantized but fresh signal (encoder ticks per
    period) repeats about as often as it moves by one step, a held one repeats far more often
    (more than three times as often, and more than 5 times). True when most joints say so."""
    v = np.asarray(values, dtype=float)
    votes = []
    for j in range(v.shape[1] if v.ndim == 2 else 0):
        x = v[:, j]
        x = x[np.isfinite(x)]
        a, b = x[:-1], x[1:]
        moving = (a != 0) & (b != 0)
        d = np.abs(b - a)[moving]
        if len(d) < 10:
            continue
        rep = int(np.sum(d == 0))
        nz = d[d > 0]
        q = float(nz.min()) if len(nz) else math.inf
        adj = int(np.sum((d > 0) & (d <= 1.5 * q)))
        votes.append(rep > 3 * adj and rep > 5)
    return bool(votes) and sum(votes) * 2 > len(votes)


def _listing(topics: Mapping[str, tuple[str, int]]) -> str:
    return ", ".join(f"{t} [{m}, {n} msgs]" for t, (m, n) in sorted(topics.items())) or "none"


def _resolve_topics(bag: str, opt: ReplayOptions, side: dict | None) -> dict[str, str]:
    from wmr_model.io.bags import bag_topics, find_pose_topic

    topics = bag_topics(bag)
    listing = _listing(topics)

    def need(role: str, topic: str) -> str:
        if topic not in topics:
            raise BagError(f"{bag}: topic {topic!r} ({role}) is not in the bag; its topics "
                           f"are: {listing}")
        if topics[topic][1] == 0:
            raise BagError(f"{bag}: topic {topic!r} ({role}) has no messages; its topics are: "
                           f"{listing}")
        return topic

    out = {"encoders": need("encoders", opt.encoder_topic)}
    steer = opt.steer_topic or _sidecar_steer_topic(opt, side)
    if steer and steer != opt.encoder_topic:
        out["steer"] = need("steering angles", steer)
    pose = opt.pose_topic
    if pose is None and side is not None:
        pose = side.get("pose_sensor", {}).get("topic")
    if pose is None:
        pose = find_pose_topic(bag, topics)
    out["pose"] = need("pose reference", pose)
    if opt.imu_topic:
        if opt.require_imu:
            out["imu"] = need("imu", opt.imu_topic)
        elif topics.get(opt.imu_topic, ("", 0))[1] > 0:
            out["imu"] = opt.imu_topic
    if opt.truth_topic and opt.truth_topic != pose and topics.get(opt.truth_topic,
                                                                   ("", 0))[1] > 0:
        out["truth"] = opt.truth_topic
    return out


def _vehicle_name(opt: ReplayOptions, side: dict | None) -> str:
    """The vehicle of the replay: ``opt.vehicle``, else the synthetic bag's, else warthog."""
    return opt.vehicle or (side or {}).get("vehicle") or "warthog"


def _sidecar_steer_topic(opt: ReplayOptions, side: dict | None) -> str | None:
    """The steering-angle topic the vehicle's sidecar names (``steering.<joint>.topic``)."""
    from wmr_model.io.bags import sidecar_steer_topic
    from wmr_model.io.vehicles import load_vehicle_spec

    return sidecar_steer_topic(load_vehicle_spec(_vehicle_name(opt, side)))


def _default_params(sensor: str | None, side: dict | None, terrain_flat: bool,
                    model=None) -> list[str]:
    """The 3D kin.+ parameters when none are named: the synthetic bag's list, else slip
    (p1 on uneven terrain only) and ``time_offset.pose``, the steering parameters of a steered
    vehicle (:func:`~wmr_model.calibration.table.steering_params`) and the pose sensor's x, y
    (``sensor`` None: none)."""
    from wmr_model.calibration.table import steering_params

    if side is not None and side.get("calibrate"):
        return [str(n) for n in side["calibrate"]]
    names = [] if terrain_flat else ["slip.p1"]
    names += ["slip.p2", "slip.p3", "slip.p4", "slip.p5", "slip.p6", "time_offset.pose"]
    if model is not None:
        names += steering_params(model)
    if sensor is not None:
        names += [f"sensor.{sensor}.x", f"sensor.{sensor}.y"]
    return names


def _build_model(opt: ReplayOptions, side: dict | None, child_frame: str):
    """Vehicle model with the pose sensor added when the reference is not of the body."""
    from wmr_model.io.sidecar import vec3
    from wmr_model.io.vehicles import load_vehicle_spec
    from wmr_model.vehicles.model import SensorSpec, compile_vehicle

    spec = load_vehicle_spec(_vehicle_name(opt, side))
    sensor = opt.pose_sensor
    if sensor is None and child_frame and child_frame != spec.body_name:
        sensor = child_frame
    if sensor in (spec.body_name, "", None):
        return compile_vehicle(spec), None
    if sensor not in {s.name for s in spec.sensors}:
        xyz = None if opt.pose_sensor_xyz is None else vec3(list(opt.pose_sensor_xyz),
                                                            "pose_sensor_xyz")
        if xyz is None and side is not None and side.get("pose_sensor", {}).get("name") == sensor:
            xyz = vec3(side["pose_sensor"]["nominal_xyz"], "sidecar pose_sensor.nominal_xyz")
        x, y, z = xyz or (0.0, 0.0, 0.0)
        spec.sensors.append(SensorSpec(sensor, spec.body_name, (float(x), float(y), float(z))))
    return compile_vehicle(spec), sensor


def _encoder_map(model, names: Sequence[str]) -> dict | None:
    """Encoder map for :class:`Odometry3D`: the model's when the bag carries its joints, else
    identity when the bag carries the actuated joints themselves (the layouts and their match
    are the odometry's own, :func:`wmr_model.estimation.odometry.match_encoder_layout`)."""
    from wmr_model.estimation.odometry import encoder_layouts, match_encoder_layout

    layouts = encoder_layouts(model)
    layout, _ = match_encoder_layout(layouts, names)
    if layout == "encoder_map":
        return None
    if layout == "per_wheel":
        return {}
    raise BagError(f"encoder joints {list(names)}: neither the encoder_map joints "
                   f"{sorted(layouts.get('encoder_map', {}))} nor the actuated joints "
                   f"{list(layouts['per_wheel'])} of {model.name}")


def _planar(pose: np.ndarray) -> np.ndarray:
    """(N, 3) x, y, yaw of (N, 7) poses."""
    from wmr_model.calibration.residuals import yaw_of

    return np.stack([pose[:, 4], pose[:, 5], yaw_of(pose[:, :4])], axis=1)


def _interp_planar(t: np.ndarray, xyyaw: np.ndarray, tq: np.ndarray) -> np.ndarray:
    yaw = np.unwrap(xyyaw[:, 2])
    return np.stack([np.interp(tq, t, xyyaw[:, 0]), np.interp(tq, t, xyyaw[:, 1]),
                     np.interp(tq, t, yaw)], axis=1)


def _thin(n: int, most: int = PLOT_POINTS) -> slice | np.ndarray:
    """Indices of at most ``most`` evenly spread samples of ``n``, the last one included."""
    if n <= most:
        return slice(None)
    return np.unique(np.append(np.arange(0, n, -(-n // (most - 1))), n - 1))


def trusted_segments(trusted: np.ndarray, sel: np.ndarray) -> list[tuple[int, int]]:
    """Index ranges ``(a, b)`` (inclusive, ``b > a``) of the reference samples selected by
    ``sel`` (M,) joined by trusted steps only (``trusted`` (M - 1,)): the stretches the drift
    is measured on."""
    ok = np.asarray(trusted, dtype=bool) & sel[:-1] & sel[1:]
    edge = np.diff(np.concatenate([[0], ok.astype(np.int8), [0]]))
    return [(int(a), int(b)) for a, b in zip(np.flatnonzero(edge == 1),
                                             np.flatnonzero(edge == -1))]


def _align_errors(track: OdometryTrack, ref_t: np.ndarray, ref_xy: np.ndarray,
                  trusted: np.ndarray | None = None) -> None:
    """Drift of ``track`` on the trusted path of the reference (``trusted`` (M - 1,) steps;
    None: all): on each trusted stretch inside the track the odometry is aligned (planar) to
    the reference at the stretch's first sample; fills the end-point error (sum over the
    stretches), the reference length (sum of their lengths) and the drift [% of that length]
    (full resolution), and the error series and aligned path (thinned for plotting, NaN rows
    between stretches). One stretch (no faults) is the plain start-aligned drift."""
    pl = track.samples.planar
    sel = (ref_t >= pl[0, 0]) & (ref_t <= pl[-1, 0])
    if sel.sum() < 2:
        return
    ok = np.ones(len(ref_t) - 1, dtype=bool) if trusted is None else trusted
    segs = trusted_segments(ok, sel)
    if not segs:
        return
    od = _interp_planar(pl[:, 0], pl[:, 1:4], ref_t[sel])
    od_at = np.full((len(ref_t), 3), np.nan)
    od_at[sel] = od
    ts: list[np.ndarray] = []
    es: list[np.ndarray] = []
    xs: list[np.ndarray] = []
    end_error = length = 0.0
    for a, b in segs:
        rp, o = ref_xy[a:b + 1], od_at[a:b + 1]
        dyaw = rp[0, 2] - o[0, 2]
        c, s_ = math.cos(dyaw), math.sin(dyaw)
        rel = o[:, :2] - o[0, :2]
        xy = rp[0, :2] + np.stack([c * rel[:, 0] - s_ * rel[:, 1],
                                   s_ * rel[:, 0] + c * rel[:, 1]], axis=1)
        err = np.linalg.norm(xy - rp[:, :2], axis=1)
        end_error += float(err[-1])
        length += float(np.linalg.norm(np.diff(rp[:, :2], axis=0), axis=1).sum())
        if ts:  # a NaN row breaks the plotted lines between stretches
            ts.append(np.array([np.nan]))
            es.append(np.array([np.nan]))
            xs.append(np.full((1, 2), np.nan))
        ts.append(ref_t[a:b + 1])
        es.append(err)
        xs.append(xy)
    t_all, e_all, x_all = np.concatenate(ts), np.concatenate(es), np.concatenate(xs)
    keep = _thin(len(t_all))
    track.err_t, track.err, track.aligned_xy = t_all[keep], e_all[keep], x_all[keep]
    track.end_error = end_error
    track.length = length
    track.segments = len(segs)
    track.drift_pct = 100.0 * end_error / length if length > 0 else math.nan


def _odometry_params(values: Mapping[str, float], model) -> dict[str, float]:
    """The named values :meth:`Odometry3D.set_parameters` accepts."""
    wheels = {f"wheel.{w}.radius" for w in model.wheel_names}
    return {n: float(v) for n, v in values.items()
            if n.startswith(("slip.", "noise.U.")) or n in wheels}


def _return_free_memory() -> None:
    """Hand the C allocator's free pages back to the OS (glibc ``malloc_trim``) between the
    replay's phases: the arrays one phase drops leave holes in the heap that would otherwise
    stay resident and add to the next phase's peak. Nothing happens without glibc."""
    import ctypes
    import ctypes.util

    try:
        ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _event_order(stamps: Sequence[np.ndarray]) -> np.ndarray:
    """Processing order of the events of several stamp arrays: indices into their
    concatenation, by stamp, then by array (earlier first), then by index; int32 when it fits
    (4 bytes an event)."""
    t = np.concatenate(stamps)
    k = np.repeat(np.arange(len(stamps), dtype=np.int8), [len(a) for a in stamps])
    i = np.concatenate([np.arange(len(a), dtype=np.int32) for a in stamps])
    order = np.lexsort((i, k, t))
    return order.astype(np.int32) if len(order) < 2**31 else order


def replay(bag: str | Path, options: ReplayOptions | None = None) -> ReplayResult:
    """Replay ``bag`` through odometry, online calibration and evaluation (module docstring)."""
    from wmr_model.io.synth_bag import read_synth_sidecar

    opt = ReplayOptions() if options is None else options
    wall0 = time.perf_counter()
    bag = str(bag)
    _check_options(opt)
    side = read_synth_sidecar(bag)
    inp = _load_inputs(bag, opt, side)
    _return_free_memory()  # the streams are gone: only the log and plain arrays stay
    notes, topics, model = inp.notes, inp.topics, inp.model
    c = _calibration_setup(bag, opt, side, inp)
    odos, tracks, upd_t = _odometry_pass(inp, c, opt.progress)
    _return_free_memory()
    final = c.cal.estimate
    fstd = c.cal.std
    ev = _diff_drive_calibration(inp, c, final, opt.dt)
    ev.X = np.array([h.x for h in c.cal.history])
    ev.t_upd = np.array(upd_t)
    table, table_oos, scatter, split = _table_33(ev, c, opt)
    planar = ev.dd.label
    ev_log = ev.log
    rt, ref_xy, ref_name, trusted = _drift_reference(inp, ev.log_dd, final, c.faults)
    duration = float(max(inp.t_enc[-1], inp.log.pose_time[-1]))
    vehicle, t0, counts, has_imu = model.name, inp.t0, inp.counts, inp.has_imu
    # the log and the odometry inputs are done with: freed before the drift's temporaries
    del inp
    ev.log = ev.log_dd = None
    _return_free_memory()
    out_tracks = _drift_tracks(odos, tracks, rt, ref_xy, has_imu, trusted)
    hist = _history(c, ev.t_upd, ev.X)
    rejected = int((~hist["accepted"]).sum())
    from wmr_model.calibration.table import empty_split_warning

    notes += empty_split_warning(split)
    from wmr_model.calibration.table import resolution_note

    head = table_oos or table
    L = opt.interval if opt.interval in head else next(iter(head), None)
    if L is not None and head.get(L):
        notes += resolution_note(ev_log, head[L][0][3],
                                 [(m, p) for m, p, _, _ in head[L] if "+" in m])
    if rejected:
        notes.append(f"online 3D kin.+: {rejected} of {len(c.iv_cal)} intervals rejected as "
                     "outliers (Mahalanobis gate (3.68))")
    return ReplayResult(
        bag=bag, vehicle=vehicle, topics=topics, t0=t0,
        duration=duration, wall_time=time.perf_counter() - wall0,
        table=table, estimate=final, std=fstd, dd_estimate=ev.dd_cal.estimate,
        dd_std=ev.dd_cal.std,
        truth={str(k): float(v) for k, v in (side or {}).get("truth", {}).items()},
        history=hist, odometry=out_tracks,
        reference={"t": rt[_thin(len(rt))], "xy": ref_xy[_thin(len(rt)), :2],
                   "name": ref_name}, scatter=scatter,
        notes=notes, counts=counts, calibration_intervals=len(c.iv_cal), rejected=rejected,
        nominal=c.nominal, table_oos=table_oos, interval_classes=c.classes, split=split,
        planar=planar)


@dataclass
class _Inputs:
    """What :func:`replay` keeps of the bag once its streams are gone (issue 24: memory bounded
    by the log's essentials, not by every field of every message).

    Attributes:
        topics, counts: resolved topics by role and message counts by topic; notes: what was
            done about the input so far.
        model, sensor: compiled vehicle (with the pose sensor) and the pose sensor (None: body).
        terrain, tname: terrain and its description.
        log: calibration log (times from ``t0``, the first encoder stamp [s]).
        enc_names, enc_pos (E, nj), enc_vel (E, nj), t_enc (E,): encoder samples for the
            odometry; t_imu (G,), gyro_raw (G, 3): gyro samples (empty without IMU).
        ref_truth: ``(t, planar x, y, yaw)`` of the exact truth stream, or None.
    """

    topics: dict[str, str]
    counts: dict[str, int]
    notes: list[str]
    model: Any
    sensor: str | None
    terrain: Any
    tname: str
    log: Any
    t0: float
    enc_names: Sequence[str]
    enc_pos: np.ndarray
    enc_vel: np.ndarray
    t_enc: np.ndarray
    t_imu: np.ndarray
    gyro_raw: np.ndarray
    has_imu: bool
    ref_truth: tuple[np.ndarray, np.ndarray] | None


def _check_options(opt: ReplayOptions) -> None:
    """ParameterError on a non-positive interval or dt; the steps per interval in budget."""
    for name, v in (("interval", opt.interval), ("dt", opt.dt)):
        if not (math.isfinite(v) and v > 0):
            raise ParameterError(f"{name}: must be > 0 s, got {v}")
    from wmr_model.budgets import MAX_INTERVAL_STEPS, check_budget

    longest = max([opt.interval, *opt.eval_intervals])
    check_budget(f"interval {longest:g} s / dt {opt.dt:g} s: steps per interval",
                 longest / opt.dt, MAX_INTERVAL_STEPS, "use a larger dt")


def _load_inputs(bag: str, opt: ReplayOptions, side: dict | None) -> _Inputs:
    """Read the bag's streams, build the vehicle, terrain and calibration log, and keep the
    plain arrays the odometry pass and the drift need (the streams go on return)."""
    from wmr_model.calibration.logs import log_from_streams, with_pose_std

    topics, enc, ps, imu, steer, ref_truth, notes, counts = _read_bag(bag, opt, side)
    _return_free_memory()  # the reader's row buffers are gone
    model, sensor = _build_model(opt, side, ps.child_frame_id)
    terrain, tname = _replay_terrain(opt, side)
    notes.append(f"terrain: {tname}")
    enc_f = _fresh_encoders(enc, opt, topics["encoders"], notes)
    del enc
    streams = {"enc": enc_f, "pose": ps}
    if imu is not None:
        streams["imu"] = imu
    if steer is not None:
        streams["steer"] = steer
    log = log_from_streams(model, streams, imu="imu" if imu is not None else None,
                           steer="steer" if steer is not None else None,
                           pose_sensor=sensor, source=bag)
    enc_f = _with_steer_angles(enc_f, steer, model)
    notes += log.notes
    if opt.pose_std is not None:
        log = with_pose_std(log, *opt.pose_std)
    if len(log.pose_time) < 2:
        raise BagError(f"{bag}: {topics['pose']} has {len(log.pose_time)} usable poses; "
                       "replay needs at least 2")
    t0 = float(enc_f.stamp[0])
    t_imu, gyro_raw = np.zeros(0), np.zeros((0, 3))
    if imu is not None:
        t_imu, gyro_raw = imu.stamp - t0, imu.angular_velocity
        if log.gyro is not None and log.gyro_time is not None \
                and np.array_equal(log.gyro_time, t_imu) \
                and np.array_equal(log.gyro, gyro_raw):
            t_imu, gyro_raw = log.gyro_time, log.gyro  # the same numbers: share the log's
    if ref_truth is not None:
        ref_truth = (ref_truth[0] - t0, ref_truth[1])
    return _Inputs(topics, counts, notes, model, sensor, terrain, tname, log, t0,
                   enc_f.names, enc_f.position, enc_f.velocity, enc_f.stamp - t0, t_imu,
                   gyro_raw, imu is not None, ref_truth)


def _read_bag(bag: str, opt: ReplayOptions, side: dict | None):
    """``(topics, encoders, pose, imu or None, truth reference or None, notes, counts)``: the
    resolved topics' streams, IMU without the unused fields, the exact truth as planar
    ``(t, x y yaw)`` (poses that are not finite dropped) and message counts by topic."""
    from wmr_model.io.bags import ImuSeries, JointStateSeries, PoseSeries, read_streams

    topics = _resolve_topics(bag, opt, side)
    kinds = {"encoders": "joint_states", "pose": "pose", "imu": "imu", "truth": "pose",
             "steer": "joint_states"}
    s = read_streams(bag, topics, {r: kinds[r] for r in topics})
    enc, ps = s["encoders"], s["pose"]
    steer = s.get("steer", JointStateSeries)
    imu = s.get("imu", ImuSeries)
    truth_s = s.get("truth", PoseSeries)
    notes: list[str] = list(s.notes)
    if truth_s is not None:
        from wmr_model.calibration.logs import _pose_rows
        from wmr_model.estimation.streams import usable_poses

        good = usable_poses(truth_s)
        if not good.all():
            notes.append(f"{truth_s.topic}: {int((~good).sum())} of {len(good)} poses dropped "
                         "(non-finite position or orientation)")
            truth_s = _pose_rows(truth_s, good) if good.sum() >= 2 else None
    counts = {topics[r]: len(s[r].stamp) for r in topics}
    del s  # from here on only the arrays that are used stay (issue 24: bounded memory)
    ref_truth = None  # drift reference (t [s from the first encoder stamp], planar x, y, yaw)
    if truth_s is not None:
        ref_truth = (truth_s.stamp, _planar(np.hstack([truth_s.orientation,
                                                       truth_s.position])))
        del truth_s
    if imu is not None:  # the odometry and the log read stamps, rates and attitude only
        imu = dataclasses.replace(imu, receive_time=np.zeros(0),
                                  linear_acceleration=np.zeros((0, 3)))
    return topics, enc, ps, imu, steer, ref_truth, notes, counts


def _with_steer_angles(enc, steer, model):
    """The encoder stream with the steering joints' angles for the odometry at its stamps:
    from the ``steer`` stream (None: the encoder stream's own positions), measured angles
    interpolated, commanded ones followed with their nominal lag
    (:func:`wmr_model.estimation.steering.lagged_command`); velocities NaN (the odometry
    differentiates the angles and imposes them)."""
    from wmr_model.estimation.steering import lagged_command, steer_inputs

    inputs = steer_inputs(model)
    names = list(enc.names)
    pos, vel = np.array(enc.position), np.array(enc.velocity)
    for j, si in inputs.items():
        src = steer if steer is not None and j in steer.names else enc
        if j not in src.names:
            continue
        col = np.asarray(src.position, dtype=float)[:, list(src.names).index(j)]
        ok = np.isfinite(col) & np.isfinite(src.stamp)
        if ok.sum() < 2:
            continue
        ts, u = src.stamp[ok], col[ok]
        if si.source == "commanded":
            a = lagged_command(ts, u, si.lag, enc.stamp)
            # no angle before the first command, as a live node has none (it rejects those
            # encoder messages as missing the joint; here they are not finite)
            a[enc.stamp < ts[0]] = np.nan
        elif src is enc:
            continue  # the encoder stream's own measured angles: as they are
        else:
            a = np.interp(enc.stamp, ts, u)
        if j not in names:
            names.append(j)
            pos = np.hstack([pos, np.full((len(pos), 1), np.nan)])
            vel = np.hstack([vel, np.full((len(vel), 1), np.nan)])
        k = names.index(j)
        pos[:, k], vel[:, k] = a, np.nan
    if len(names) == len(enc.names) and steer is None \
            and not any(si.source == "commanded" for si in inputs.values()):
        return enc
    return dataclasses.replace(enc, names=tuple(names), position=pos, velocity=vel,
                               effort=np.zeros((0, len(names))))


def _replay_terrain(opt: ReplayOptions, side: dict | None):
    """``(terrain, description)``: ``opt.terrain``, else the synthetic bag's, else flat."""
    from wmr_model.io.synth_bag import synth_terrain
    from wmr_model.io.terrain_spec import parse_terrain_spec
    from wmr_model.terrain.surface import flat

    if opt.terrain is not None:
        return parse_terrain_spec(opt.terrain), opt.terrain
    if side is not None:
        tr_ = side["terrain"]
        terrain = synth_terrain(tr_["preset"], int(tr_["seed"]), float(tr_.get("box", 20.0)))
        return terrain, f"synthetic {tr_['preset']} (seed {tr_['seed']})"
    return flat(), "flat"


def _fresh_encoders(enc, opt: ReplayOptions, topic: str, notes: list[str]):
    """The encoder stream with stale wheel speeds handled (module docstring): dropped
    (``stale_mode`` "drop") or replaced by the line between fresh values ("interpolate");
    receive times and efforts emptied (unused)."""
    # wheel speeds are what a logger holds: steering angles (positions without velocity) and
    # joints without any velocity do not take part; repeated positions are a standstill
    has_v = np.any(np.isfinite(enc.velocity), axis=0)
    held = bool(has_v.any()) and held_values(enc.velocity[:, has_v])
    keep = stale_mask(enc.stamp, enc.velocity[:, has_v], opt.stale_hold if held else None)
    n_drop = int((~keep).sum())
    if n_drop:
        rate = len(enc.stamp) / max(enc.stamp[-1] - enc.stamp[0], 1e-9)
        fresh = keep.sum() / max(enc.stamp[-1] - enc.stamp[0], 1e-9)
        notes.append(f"stale wheel speeds: {n_drop} of {len(keep)} {topic} "
                     f"messages repeat the previous values (published {rate:.1f} Hz, fresh "
                     f"{fresh:.1f} Hz); dropped (hold {opt.stale_hold} s)")
    if opt.stale_mode == "drop":
        enc_f = dataclasses.replace(
            enc, stamp=enc.stamp[keep], receive_time=enc.receive_time[keep],
            position=enc.position[keep], velocity=enc.velocity[keep], effort=enc.effort[keep])
    else:  # "interpolate": every stamp kept, held rates replaced by the line between fresh ones
        vel = np.array(enc.velocity)
        for j in range(vel.shape[1]):
            ok = keep & np.isfinite(vel[:, j])
            if ok.sum() >= 2:
                vel[:, j] = np.interp(enc.stamp, enc.stamp[ok], vel[ok, j])
        enc_f = dataclasses.replace(enc, velocity=vel)
    return dataclasses.replace(enc_f, receive_time=np.zeros(0),
                               effort=np.zeros((0, len(enc.names))))


@dataclass
class _Calibration:
    """The online 3D kin.+ calibration of :func:`replay` and what it learns from.

    Attributes:
        params, noise, names: systematic, Q' and all calibrated names; n0, bound: starting Q'
            entries and their early bounds.
        enh, kinp: enhanced and kinematic predictors; cal: the calibrator; start0: its
            starting values; nominal: nominal values of ``params``.
        iv_cal: (K, 2) calibration intervals (pose indices); faults: reference faults (None
            without the check); classes: informative intervals per class; t_split: split stamp
            [s] (inf: no split).
    """

    params: list[str]
    noise: list[str]
    names: list[str]
    n0: dict[str, float]
    bound: dict[str, float]
    enh: Any
    kinp: Any
    cal: Any
    start0: dict[str, float]
    nominal: dict[str, float]
    iv_cal: np.ndarray
    faults: Any
    classes: dict[str, int]
    t_split: float


def _calibration_setup(bag: str, opt: ReplayOptions, side: dict | None,
                       inp: _Inputs) -> _Calibration:
    """Predictors, the online calibrator and its informative intervals (reference faults
    excluded when checked); notes what was selected."""
    from wmr_model.calibration.intervals import (
        IntervalPolicy,
        classify_intervals,
        interval_class_counts,
        select_intervals,
        split_time,
        unwrapped_yaw,
    )
    from wmr_model.calibration.online import OnlineCalibrator
    from wmr_model.calibration.predictors import ModelPredictor

    # same priors and starting Q' as ``wmr calibrate`` (calibration.table)
    from wmr_model.calibration.table import DEFAULT_NOISE0, initial_std

    log, model, notes = inp.log, inp.model, inp.notes
    is_flat = inp.tname == "flat" or inp.tname.startswith("flat:")
    # a position-only reference does not show the heading an antenna offset turns with
    params = list(opt.params) if opt.params is not None else _default_params(
        inp.sensor if log.heading_measured else None, side, is_flat, model)
    noise = list(opt.noise)
    names = params + noise
    n0 = {n: DEFAULT_NOISE0.get(n, 0.05) for n in noise}
    bound = {n: 2.0 * v for n, v in n0.items()}
    enh = ModelPredictor(model, inp.terrain, fidelity="enhanced", dt=opt.dt)
    kinp = ModelPredictor(model, inp.terrain, fidelity="kinematic", dt=opt.dt)
    cal = OnlineCalibrator(enh, names, std0=initial_std(names), x0=n0, qprime_bound=bound)
    start0 = cal.estimate  # starting values (nominal model, schema defaults, Q' start)
    nominal = {n: float(enh.nominal(n)) for n in params}
    pos = log.pose[:, 4:7]
    yaw_u = unwrapped_yaw(log.pose[:, :4])
    pol = IntervalPolicy("time", opt.interval, min_distance=opt.min_distance,
                         min_turn=opt.min_turn)
    iv_cal = select_intervals(log.pose_time, pol, pos, yaw_u)
    iv_all = select_intervals(log.pose_time, IntervalPolicy("time", opt.interval), pos)
    faults = None
    n_informative = len(iv_cal)
    if opt.reference_check:
        faults, iv_all, iv_cal = _check_reference(bag, opt, inp, iv_all, iv_cal)
    if len(iv_cal) == 0:
        from wmr_model.calibration.reference import excluded_by_check

        raise BagError(f"{bag}: no {opt.interval} s interval of {inp.topics['pose']} moves "
                       f"{opt.min_distance} m or turns {opt.min_turn} rad or more"
                       + excluded_by_check(n_informative) + "; nothing to calibrate")
    classes = {k: n for k, n in interval_class_counts(
        classify_intervals(iv_cal, pos, yaw_u, pol)).items() if k != "still"}
    notes.append(f"calibration: {len(iv_cal)} of {len(iv_all)} {opt.interval:g} s intervals ("
                 + ", ".join(f"{n} {k}" for k, n in classes.items())
                 + f"; ground-truth path >= {opt.min_distance:g} m or |yaw change| >= "
                 f"{opt.min_turn:g} rad; the others stand still)")
    t_split = math.inf
    if opt.split is not None:
        t_split = split_time(log.pose_time, opt.split)
    return _Calibration(params, noise, names, n0, bound, enh, kinp, cal, start0, nominal,
                        iv_cal, faults, classes, t_split)


def _check_reference(bag: str, opt: ReplayOptions, inp: _Inputs, iv_all: np.ndarray,
                     iv_cal: np.ndarray):
    """``(faults, iv_all, iv_cal)``: the reference check's faults and the intervals clear of
    them (:mod:`wmr_model.calibration.reference`); unchanged, with a note, when the check
    cannot run."""
    from wmr_model.calibration.reference import (
        ReferencePolicy,
        check_reference,
        trusted_intervals,
    )

    try:
        ref = check_reference(inp.log, inp.model, iv_all, topic=inp.topics["pose"], source=bag,
                              dt=opt.dt, policy=ReferencePolicy(settle=opt.reference_settle))
    except ParameterError as e:
        inp.notes.append(f"reference check skipped: {e}")
        return None, iv_all, iv_cal
    inp.notes.append(ref.note)
    inp.notes.extend(f"WARNING: {w}" for w in ref.warnings)
    return ref.faults, ref.intervals, trusted_intervals(iv_cal, ref.faults)


def _feed(inp: _Inputs, odo_set: dict, k: int, i: int, rec: dict) -> None:
    """Event ``i`` of stream ``k`` (0 gyro, 1 encoders) to every odometry of ``odo_set``; the
    encoder steps recorded in ``rec`` (t, pose, var x, y, yaw)."""
    if k == 0:
        w = inp.gyro_raw[i]
        for o in odo_set.values():
            if o.use_gyro:  # without gyro the samples would only pile up in its buffer
                o.update_imu(inp.t_imu[i], w)
    else:
        for lab, o in odo_set.items():
            r = o.update_encoders(inp.t_enc[i], inp.enc_names, inp.enc_pos[i], inp.enc_vel[i])
            if r.stepped:
                P = o.P
                rec[lab].append(inp.t_enc[i], o.q[:7], P[3, 3], P[4, 4], P[2, 2])


def _odometry_pass(inp: _Inputs, c: _Calibration, progress: bool):
    """``(odometries, tracks, update times)``: the odometry variants and the online
    calibration, one pass over gyro, encoder and interval-end events in stamp order; then the
    converged variant (final estimate from the start) over the same events."""
    from wmr_model.estimation.odometry import Odometry3D

    model, cal = inp.model, c.cal
    kw = dict(terrain=inp.terrain, encoder_map=_encoder_map(model, inp.enc_names))
    odos = {ODO_ENCODERS: Odometry3D(model, use_gyro=False, **kw)}
    if inp.has_imu:
        odos[ODO_GYRO] = Odometry3D(model, use_gyro=True, **kw)
        odos[ODO_ONLINE] = Odometry3D(model, use_gyro=True, fidelity="enhanced", **kw)
    else:
        inp.notes.append("no IMU topic: gyro odometry variants skipped")
        odos[ODO_ONLINE] = Odometry3D(model, use_gyro=False, fidelity="enhanced", **kw)
    odos[ODO_ONLINE].set_parameters(_odometry_params(cal.estimate, model))
    t_cal = inp.log.pose_time[c.iv_cal[:, 1]]
    stamps = (inp.t_imu, inp.t_enc, t_cal)
    order = _event_order(stamps)
    n_imu, n_ie = len(inp.t_imu), len(inp.t_imu) + len(inp.t_enc)
    t_last = max(float(t[-1]) for t in stamps if len(t))
    tracks = {k: TrackSamples(len(inp.t_enc)) for k in odos}
    upd_t: list[float] = []
    bar = _Progress(len(order), progress)
    for n_ev, j in enumerate(order.tolist()):
        k = 0 if j < n_imu else 1 if j < n_ie else 2
        i = j - (0, n_imu, n_ie)[k]
        if k == 2:
            a, b = c.iv_cal[i]
            rec = cal.update(inp.log, int(a), int(b))
            upd_t.append(float(t_cal[i]))
            if rec.accepted:
                odos[ODO_ONLINE].set_parameters(_odometry_params(cal.estimate, model))
        else:
            _feed(inp, odos, k, i, tracks)
        if n_ev % 256 == 0:
            bar.update(n_ev, f"{stamps[k][i]:.0f} s of {t_last:.0f} s")
    bar.close()
    # converged odometry: the final estimate from the start
    conv = {ODO_CONVERGED: Odometry3D(model, use_gyro=inp.has_imu, fidelity="enhanced", **kw)}
    conv[ODO_CONVERGED].set_parameters(_odometry_params(cal.estimate, model))
    tracks[ODO_CONVERGED] = TrackSamples(len(inp.t_enc))
    for j in order.tolist():
        if j < n_ie:
            _feed(inp, conv, 0 if j < n_imu else 1, j if j < n_imu else j - n_imu, tracks)
    odos.update(conv)
    return odos, tracks, upd_t


@dataclass
class _Rows:
    """The calibrated models Table 3.3 scores: diff drive(+) on the body-frame log ``log_dd``
    (names ``dd_names``, start ``dd_start``, history ``Xdd`` (U, n)) and 3D kin.(+) on ``log``
    (history ``X`` (U, n)); ``t_upd`` (U,) update times [s]."""

    dd: Any
    dd_cal: Any
    dd_names: list[str]
    dd_start: dict[str, float]
    log_dd: Any
    log: Any
    final: dict[str, float]
    Xdd: np.ndarray
    X: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    t_upd: np.ndarray = field(default_factory=lambda: np.zeros(0))


def _diff_drive_calibration(inp: _Inputs, c: _Calibration, final: dict[str, float],
                            dt: float) -> _Rows:
    """Diff drive+ calibrated online over the calibration intervals on body poses (a pose
    sensor's poses moved to the body with the converged 3D kin.+ offset)."""
    from wmr_model.calibration.online import OnlineCalibrator
    from wmr_model.calibration.predictors import planar_predictor
    from wmr_model.calibration.residuals import body_pose_from_sensor
    from wmr_model.calibration.table import initial_std

    log, sensor = inp.log, inp.sensor
    log_dd = log
    if sensor is not None:
        T = np.array(inp.model.sensor_frame[sensor][1])
        for ax, kk in (("x", 0), ("y", 1), ("z", 2)):
            T[kk, 3] = final.get(f"sensor.{sensor}.{ax}", T[kk, 3])
        log_dd = dataclasses.replace(log, pose=body_pose_from_sensor(log.pose, T),
                                     pose_sensor=None)
        inp.notes.append(f"diff-drive rows: {inp.topics['pose']} poses moved to the body with "
                         f"the converged 3D kin.+ offset of sensor {sensor!r}")
    dd = planar_predictor(inp.model, dt=dt)
    dd_names = [*dd.plus_names, "time_offset.pose", *c.noise]
    dd_cal = OnlineCalibrator(dd, dd_names, std0=initial_std(dd_names), x0=c.n0,
                              qprime_bound=c.bound)
    dd_start = dd_cal.estimate
    dd_cal.run(log_dd, c.iv_cal)
    return _Rows(dd, dd_cal, dd_names, dd_start, log_dd, log, final,
                 np.array([h.x for h in dd_cal.history]))


def _online(ev: _Rows, pred, lg, iv: np.ndarray, hist: np.ndarray, nms: Sequence[str],
            start: Mapping[str, float]) -> tuple[float, float]:
    """Mean position and yaw error of ``pred`` over ``iv``, each interval predicted with the
    estimate of the updates finished by its start."""
    from wmr_model.calibration.evaluate import online_errors

    if len(iv) == 0:
        return math.nan, math.nan
    pe, ye = online_errors(pred, lg, iv, ev.t_upd, hist, nms, start)
    return float(pe.mean()), float(ye.mean())


def _in_sample_rows(ev: _Rows, c: _Calibration, iv: np.ndarray):
    """Table 3.3 rows over ``iv`` (in sample: converged = final estimates) and the evaluation
    of 3D kin.+ converged (its residuals feed the scatter plot)."""
    from wmr_model.calibration.evaluate import evaluate

    K = len(iv)
    rows: list[tuple[str, float, float, int]] = []
    lab = ev.dd.label
    e = evaluate(ev.dd, ev.log_dd, iv, {})
    rows.append((lab, e.mean_pos, e.mean_yaw, K))
    rows.append((f"{lab}+ online", *_online(ev, ev.dd, ev.log_dd, iv, ev.Xdd, ev.dd_names,
                                            ev.dd_start), K))
    e = evaluate(ev.dd, ev.log_dd, iv, ev.dd_cal.estimate)
    rows.append((f"{lab}+ converged", e.mean_pos, e.mean_yaw, K))
    e = evaluate(c.kinp, ev.log, iv, {})
    rows.append(("3D kin.", e.mean_pos, e.mean_yaw, K))
    rows.append(("3D kin.+ online", *_online(ev, c.enh, ev.log, iv, ev.X, c.names, c.start0),
                 K))
    e = evaluate(c.enh, ev.log, iv, ev.final)
    rows.append(("3D kin.+ converged", e.mean_pos, e.mean_yaw, K))
    return rows, e


def _out_of_sample_rows(ev: _Rows, c: _Calibration, iv: np.ndarray, x_split: dict[str, float],
                        dd_split: dict[str, float]) -> list[tuple[str, float, float, int]]:
    """Table rows over the intervals of ``iv`` starting after ``c.t_split``, "calibrated" with
    the estimates frozen at the split (module docstring)."""
    from wmr_model.calibration.evaluate import evaluate
    from wmr_model.calibration.intervals import split_intervals

    _, test = split_intervals(ev.log.pose_time, iv, c.t_split)
    K = len(test)
    if K == 0:
        return []
    out = []
    lab = ev.dd.label
    e = evaluate(ev.dd, ev.log_dd, test, {})
    out.append((lab, e.mean_pos, e.mean_yaw, K))
    out.append((f"{lab}+ online", *_online(ev, ev.dd, ev.log_dd, test, ev.Xdd, ev.dd_names,
                                           ev.dd_start), K))
    e = evaluate(ev.dd, ev.log_dd, test, dd_split)
    out.append((f"{lab}+ calibrated", e.mean_pos, e.mean_yaw, K))
    e = evaluate(c.kinp, ev.log, test, {})
    out.append(("3D kin.", e.mean_pos, e.mean_yaw, K))
    out.append(("3D kin.+ online", *_online(ev, c.enh, ev.log, test, ev.X, c.names, c.start0),
                K))
    e = evaluate(c.enh, ev.log, test, x_split)
    out.append(("3D kin.+ calibrated", e.mean_pos, e.mean_yaw, K))
    return out


def _table_33(ev: _Rows, c: _Calibration, opt: ReplayOptions):
    """``(table, table_oos, scatter, split)`` of :class:`ReplayResult` over the evaluation
    interval lengths (reference faults excluded); the scatter is of the calibration interval
    length (else the first length with intervals)."""
    from wmr_model.calibration.intervals import IntervalPolicy, select_intervals

    table: dict[float, list[tuple[str, float, float, int]]] = {}
    table_oos: dict[float, list[tuple[str, float, float, int]]] = {}
    scatter: dict = {}
    n_split = int(np.searchsorted(ev.t_upd, c.t_split, side="right"))
    x_split = dict(zip(c.names, ev.X[n_split - 1])) if n_split else dict(c.start0)
    dd_split = dict(zip(ev.dd_names, ev.Xdd[n_split - 1])) if n_split else dict(ev.dd_start)
    for L in opt.eval_intervals:
        iv = select_intervals(ev.log.pose_time, IntervalPolicy("time", float(L)))
        if c.faults is not None:
            from wmr_model.calibration.reference import trusted_intervals

            iv = trusted_intervals(iv, c.faults)
        if len(iv) == 0:
            table[float(L)] = []
            continue
        table[float(L)], e = _in_sample_rows(ev, c, iv)
        if math.isfinite(c.t_split):
            table_oos[float(L)] = _out_of_sample_rows(ev, c, iv, x_split, dd_split)
        if abs(L - opt.interval) < 1e-9 or not scatter:
            scatter = _scatter(ev.log, iv, e, float(L))
    split: dict[str, Any] = {}
    if opt.split is not None and math.isfinite(c.t_split):  # t_split is inf without a split
        split = {"fraction": float(opt.split), "t_split": c.t_split,
                 "calibration_intervals": n_split, "estimate": x_split, "dd_estimate": dd_split}
    return table, table_oos, scatter, split


def _scatter(log, iv: np.ndarray, e, length: float) -> dict:
    """Residuals ``r`` (K, 2) [m] and predicted covariances ``R`` (K, 2, 2) of evaluation
    ``e`` over ``iv`` in each interval's start-heading frame, and the NEES."""
    yaw0 = _planar(log.pose[iv[:, 0]])[:, 2]
    c, s_ = np.cos(yaw0), np.sin(yaw0)
    Rz = np.stack([np.stack([c, s_], -1), np.stack([-s_, c], -1)], 1)  # world->start
    return {"length": length, "r": np.einsum("kij,kj->ki", Rz, e.r[:, :2]),
            "R": np.einsum("kij,kjl,kml->kim", Rz, e.R[:, :2, :2], Rz), "nees": e.nees}


def _drift_reference(inp: _Inputs, log_dd, final: dict[str, float], faults):
    """``(t, planar x y yaw, name, trusted steps or None)`` of the drift reference: the exact
    truth when present (all trusted), else the pose reference (moved to the body) shifted by
    the converged latency, trusted where the reference check (``faults``, None when off)
    found no fault."""
    if inp.ref_truth is not None:
        rt, ref_xy = inp.ref_truth
        return rt, ref_xy, inp.topics["truth"], None
    d = final.get("time_offset.pose", 0.0)
    rt = inp.log.pose_time - d
    ref_xy = _planar(log_dd.pose if inp.sensor is not None else inp.log.pose)
    name = f"{inp.topics['pose']} (shifted by time_offset.pose = {d:.3f} s)"
    if faults is None:
        return rt, ref_xy, name, None
    return rt, ref_xy, name + ", trusted path only", ~np.asarray(faults.untrusted, dtype=bool)


def _drift_tracks(odos: dict, tracks: dict[str, TrackSamples], rt: np.ndarray,
                  ref_xy: np.ndarray, has_imu: bool,
                  trusted: np.ndarray | None = None) -> dict[str, OdometryTrack]:
    """The odometry tracks (two samples or more) with their diagnostics and their drift
    against the reference on its ``trusted`` steps (None: all); without IMU the labels lose
    their "+ gyro"."""
    out_tracks: dict[str, OdometryTrack] = {}
    for lab in odos:
        if len(tracks[lab]) < 2:
            tracks[lab].close()
            continue
        tr_ = OdometryTrack(lab, tracks[lab])
        dg = odos[lab].diagnostics
        tr_.diagnostics = {"steps": dg.steps, "rejected": dict(dg.rejected),
                           "gyro_stale_steps": dg.gyro_stale_steps, "resets": dg.resets}
        _align_errors(tr_, rt, ref_xy, trusted)
        if not has_imu:  # no IMU: no "+ gyro" in the labels of the enhanced variants
            tr_.label = lab.replace(" + gyro", "")
        out_tracks[tr_.label] = tr_
    return out_tracks


def _history(c: _Calibration, t_upd: np.ndarray, X: np.ndarray) -> dict:
    """``ReplayResult.history`` of the online 3D kin.+ calibration."""
    h = c.cal.history
    return {"t": t_upd, "names": list(c.names), "x": X, "std": np.array([r.std for r in h]),
            "accepted": np.array([r.accepted for r in h]),
            "mahalanobis": np.array([r.mahalanobis for r in h]),
            "r": [r.r for r in h],
            "intervals": c.iv_cal}


# ---- outputs -------------------------------------------------------------------------------


def _fmt(v: float) -> str:
    return "nan" if not math.isfinite(v) else f"{v:.9g}"


def write_csv(result: ReplayResult, out_dir: str | Path) -> dict[str, Path]:
    """``odometry.csv`` (one row per odometry step and variant) and ``calibration.csv`` (one
    row per calibration interval) in ``out_dir``; returns their paths."""
    from wmr_model.io.files import atomic_output, prepare_output_dir

    d = prepare_output_dir(out_dir, "replay output folder")
    po = d / "odometry.csv"
    with atomic_output(po) as tmp, tmp.open("w", encoding="utf-8") as f:
        f.write("variant,t,x,y,z,qw,qx,qy,qz,var_x,var_y,var_yaw\n")
        for lab, tr_ in result.odometry.items():
            for block in tr_.samples.blocks():
                for row in block:  # t, qw, qx, qy, qz, x, y, z, var_x, var_y, var_yaw
                    f.write(",".join([f'"{lab}"', _fmt(row[0]), *(_fmt(x) for x in row[5:8]),
                                      *(_fmt(x) for x in row[1:5]),
                                      *(_fmt(x) for x in row[8:11])]) + "\n")
    pc = d / "calibration.csv"
    h = result.history
    with atomic_output(pc) as tmp, tmp.open("w", encoding="utf-8") as f:
        f.write(",".join(["t", "i0", "i1", "accepted", "mahalanobis",
                          *h["names"], *(f"std.{n}" for n in h["names"])]) + "\n")
        for k in range(len(h["t"])):
            f.write(",".join([_fmt(h["t"][k]), str(int(h["intervals"][k, 0])),
                              str(int(h["intervals"][k, 1])), str(int(h["accepted"][k])),
                              _fmt(h["mahalanobis"][k]), *(_fmt(x) for x in h["x"][k]),
                              *(_fmt(x) for x in h["std"][k])]) + "\n")
    return {"odometry": po, "calibration": pc}


def _calibration_msgdef() -> str | None:
    repo = Path(__file__).resolve().parents[2]  # wmr_model/pipelines/replay.py -> checkout
    for p in (repo / "msg" / "CalibrationState.msg",
              Path(sys.prefix) / "share" / "wmr_model" / "msg" / "CalibrationState.msg"):
        if p.is_file():
            return p.read_text(encoding="utf-8")
    return None


def write_output_bag(result: ReplayResult, path: str | Path, storage: str = "mcap") -> Path:
    """Write the odometry variants (``/wmr/odometry/<n>``, nav_msgs/Odometry, n = 0.. in
    report order; the label is in ``child_frame_id``'s topic metadata) and the calibration state
    (``/wmr/calibration_state``, wmr_model/msg/CalibrationState when its definition is found)
    as a rosbag2 at ``path`` (must not exist)."""
    import heapq

    from rosbags.rosbag2 import StoragePlugin, Writer

    ts, has_state = _output_typestore()
    p = Path(path)
    if p.exists():
        raise ParameterError(f"{p}: exists; choose a new output bag path")
    plug = {"mcap": StoragePlugin.MCAP, "sqlite3": StoragePlugin.SQLITE3}[storage]
    # each topic is in stamp order: merged by (stamp, topic), one message in memory at a time
    # per topic (a sorted list of every message object took ~1 KB per odometry step)
    topics = [_odometry_msgs(ts, result.t0, n, lab, tr_)
              for n, (lab, tr_) in enumerate(result.odometry.items())]
    if has_state:
        topics.append(_calibration_msgs(ts, result))
    if not p.parent.is_dir():
        raise ParameterError(f"output bag {p}: folder {p.parent} does not exist")
    with Writer(p, version=8, storage_plugin=plug) as w:
        conns = {}
        for ns, topic, mt, m in heapq.merge(*topics, key=lambda r: (r[0], r[1])):
            if topic not in conns:
                conns[topic] = w.add_connection(topic, mt, typestore=ts)
            w.write(conns[topic], ns, ts.serialize_cdr(m, mt))
    return p


def _output_typestore():
    """``(typestore, has_state)``: ROS 2 Jazzy types plus wmr_model/msg/CalibrationState when
    its definition is found (``has_state``)."""
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore

    ts = get_typestore(Stores.ROS2_JAZZY)
    msgdef = _calibration_msgdef()
    if msgdef is not None:
        ts.register(get_types_from_msg(msgdef, "wmr_model/msg/CalibrationState"))
    return ts, msgdef is not None


def _ros_stamp(ts, t0: float, t: float):
    """``(builtin_interfaces/Time, ns)`` of ``t`` [s from the bag start ``t0``]."""
    ns = int(round((t0 + t) * 1e9))
    return ts.types["builtin_interfaces/msg/Time"](sec=ns // 10**9, nanosec=ns % 10**9), ns


def _odometry_msgs(ts, t0: float, n: int, lab: str, tr_: OdometryTrack):
    """``(ns, topic, type, message)`` of each sample of odometry variant ``lab``, in order:
    nav_msgs/Odometry on ``/wmr/odometry/<n>`` with the x, y, yaw variances (zero twist)."""
    from wmr_model.kinematics.uncertainty import to_ros_pose_covariance

    T = ts.types
    Hd, Q, P3 = T["std_msgs/msg/Header"], T["geometry_msgs/msg/Quaternion"], \
        T["geometry_msgs/msg/Point"]
    V3 = T["geometry_msgs/msg/Vector3"]
    topic = f"/wmr/odometry/{n}"
    for t, q, v in ((r[0], r[1:8], r[8:11]) for b in tr_.samples.blocks() for r in b):
        st, ns = _ros_stamp(ts, t0, float(t))
        P = np.zeros((6, 6))
        P[3, 3], P[4, 4], P[2, 2] = v[0], v[1], v[2]
        pose = T["geometry_msgs/msg/Pose"](
            position=P3(x=float(q[4]), y=float(q[5]), z=float(q[6])),
            orientation=Q(x=float(q[1]), y=float(q[2]), z=float(q[3]), w=float(q[0])))
        tw = T["geometry_msgs/msg/Twist"](linear=V3(x=0.0, y=0.0, z=0.0),
                                          angular=V3(x=0.0, y=0.0, z=0.0))
        m = T["nav_msgs/msg/Odometry"](
            header=Hd(stamp=st, frame_id="odom"), child_frame_id=lab,
            pose=T["geometry_msgs/msg/PoseWithCovariance"](
                pose=pose, covariance=np.ascontiguousarray(to_ros_pose_covariance(P),
                                                              dtype=float)),
            twist=T["geometry_msgs/msg/TwistWithCovariance"](
                twist=tw, covariance=np.zeros(36)))
        yield ns, topic, "nav_msgs/msg/Odometry", m


def _calibration_msgs(ts, result: ReplayResult):
    """``(ns, topic, type, message)`` of each calibration update, in order:
    wmr_model/msg/CalibrationState on ``/wmr/calibration_state``."""
    T = ts.types
    h = result.history
    sysn = [n for n in h["names"] if not n.startswith("noise.")]
    noi = [n for n in h["names"] if n.startswith("noise.")]
    si = [h["names"].index(n) for n in sysn]
    ni = [h["names"].index(n) for n in noi]
    for k in range(len(h["t"])):
        st, ns = _ros_stamp(ts, result.t0, float(h["t"][k]))
        sd = h["std"][k][si]
        m = T["wmr_model/msg/CalibrationState"](
            header=T["std_msgs/msg/Header"](stamp=st, frame_id="base_link"),
            parameter_names=sysn,
            values=np.ascontiguousarray(h["x"][k][si], float),
            covariance=np.ascontiguousarray(np.diag(sd * sd).reshape(-1)),
            stochastic_names=noi,
            stochastic_values=np.ascontiguousarray(h["x"][k][ni], float),
            last_innovation=np.ascontiguousarray(h["r"][k], float),
            last_nis=float(h["mahalanobis"][k]),
            last_accepted=bool(h["accepted"][k]), interval_count=k + 1,
            rejected_count=int((~h["accepted"][:k + 1]).sum()))
        yield ns, "/wmr/calibration_state", "wmr_model/msg/CalibrationState", m
