"""Interval policies: which pairs of ground-truth samples form IPEM residuals (thesis §3.2.1).

An interval ``(i0, i1)`` indexes two ground-truth poses; the model is simulated from the pose at
``i0`` over the logged inputs to ``i1``. Policies:

* ``kind="time"``: duration ``length`` [s] (1, 2, 4 s in §3.4.1); the end sample is the one
  nearest to ``t0 + length`` and is accepted when within ``tolerance`` [s].
* ``kind="distance"``: ground-truth path length ``length`` [m] (10 m in §3.4.2); accepted when
  shorter than ``max_duration``.
* ``overlap="none"``: consecutive, non-overlapping intervals (the next starts where one ends).
* ``overlap="sliding"``: one interval ending at every sample, "t = now, t0 = prior" as §3.2.1
  recommends for online use (overlapping residuals are correlated).

Two filters apply after cutting (both off by default):

* **informative-motion filter** ``min_distance`` [m] / ``min_turn`` [rad]: keep an interval
  whose ground-truth path is at least ``min_distance`` long *or* whose ground-truth yaw changes
  by at least ``min_turn`` (net, unwrapped); drop the others (0 disables that criterion).
  Standing still says nothing about slip, and with a fixed Q' such residuals pull Q' to zero;
  turning in place is the most informative motion for a skid steer's yaw slip, so a
  distance-only filter must not discard it. The bag replay, ``wmr calibrate`` and the
  calibrator node calibrate on informative intervals only (:data:`MOVING_MIN_DISTANCE`,
  :data:`MOVING_MIN_TURN`, the one place of these defaults) and evaluate on all of them;
  :func:`classify_intervals` labels each interval straight, arc, spin or still.
* **ground-truth jump filter** ``max_speed`` [m/s]: drop intervals containing a ground-truth
  step faster than this (lidar-ICP re-localization jumps: 17 steps of the Warthog log imply
  2-30 m/s for a 1 m/s vehicle); for evaluation, since such residuals measure the reference,
  not the model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from wmr_model.errors import ParameterError
from wmr_model.parameters import OptionSpec, option_default, options, register_options

__all__ = ["IntervalPolicy", "INTERVAL_OPTIONS", "MOVING_MIN_DISTANCE", "MOVING_MIN_TURN",
           "select_intervals",
           "interval_ending_at", "ground_truth_jumps", "unwrapped_yaw", "classify_intervals",
           "interval_class_counts", "split_time", "split_intervals"]

#: Option group of the interval settings (:func:`wmr_model.parameters.options`): the calibrator
#: node declares these rows as its ``interval.*`` parameters, ``wmr calibrate`` / ``wmr replay``
#: build their interval flags from them and :class:`IntervalPolicy` takes its defaults from them.
INTERVAL_OPTIONS = "interval"

register_options(INTERVAL_OPTIONS, [
    OptionSpec("interval.kind", "time", choices=("time", "distance"), read_only=True,
               description="intervals by duration (time) or ground-truth path length "
               "(distance)"),
    OptionSpec("interval.length", 2.0, unit="s or m", lower=1e-3, upper=1e4, read_only=True,
               description="interval length (1-4 s in §3.4.1; longer: slower updates, better "
               "conditioned)"),
    OptionSpec("interval.overlap", "none", choices=("none", "sliding"), read_only=True,
               description="none: consecutive intervals; sliding: one ending at every pose "
               "(correlated residuals)"),
    OptionSpec("interval.tolerance", -1.0, unit="s", lower=-1.0, upper=1e4, read_only=True,
               description="accepted |duration - length| of time intervals; < 0: 0.15 length"),
    OptionSpec("interval.max_duration", 60.0, unit="s", lower=1e-3, upper=1e5, read_only=True,
               description="longest distance interval"),
    OptionSpec("interval.min_distance", 0.5, unit="m", lower=0.0, upper=1e4, read_only=True,
               description="moving filter: skip intervals with a shorter ground-truth path "
               "(standing still says nothing about slip and pulls Q' to zero); 0 keeps all"),
    OptionSpec("interval.min_turn", 0.2, unit="rad", lower=0.0, upper=1e3, read_only=True,
               description="... or whose net ground-truth yaw change is at least this (spins "
               "in place; 0.2 rad is a 2 s spin at 0.1 rad/s); 0 keeps only the distance "
               "criterion"),
    OptionSpec("interval.max_speed", 0.0, unit="m/s", lower=0.0, upper=1e4, read_only=True,
               description="skip intervals with a ground-truth step faster than this "
               "(re-localization jumps); 0 keeps all"),
    OptionSpec("split", 0.6, unit="-", lower=0.0, upper=1.0, description=(
        "out-of-sample table: models calibrated on this first fraction of the log are "
        "scored on the rest; 0 or 1: in-sample table only")),
])

#: Default informative-motion filter of calibration on real data (replay, calibrator node, CLI):
#: ground-truth path [m] ... (the ``interval.min_distance`` option's default)
MOVING_MIN_DISTANCE = option_default(INTERVAL_OPTIONS, "interval.min_distance")
#: ... or net ground-truth yaw change [rad] (``interval.min_turn``).
MOVING_MIN_TURN = option_default(INTERVAL_OPTIONS, "interval.min_turn")

#: Labels of :func:`classify_intervals`.
INTERVAL_CLASSES = ("straight", "arc", "spin", "still")


@dataclass(frozen=True)
class IntervalPolicy:
    """How to cut a log into intervals (see the module docstring).

    Attributes:
        kind: ``"time"`` or ``"distance"``.
        length: duration [s] or path length [m].
        overlap: ``"none"`` or ``"sliding"``.
        tolerance: largest |duration - length| accepted for ``"time"`` [s]; default
            ``0.15 length``.
        max_duration: longest accepted ``"distance"`` interval [s].
        min_distance: informative-motion filter: keep intervals whose ground-truth path is at
            least this long [m] (standing still: such residuals say nothing about slip and,
            with a constant Q', pull it to zero); 0: no distance criterion.
        min_turn: ... or whose net ground-truth yaw change is at least this [rad] (spins);
            0: no turn criterion. With both 0 every interval is kept.
        max_speed: ground-truth jump filter: drop intervals containing a ground-truth step
            faster than this [m/s]; inf keeps all.
    """

    kind: str = option_default(INTERVAL_OPTIONS, "interval.kind")
    length: float = option_default(INTERVAL_OPTIONS, "interval.length")
    overlap: str = option_default(INTERVAL_OPTIONS, "interval.overlap")
    tolerance: float | None = None
    max_duration: float = option_default(INTERVAL_OPTIONS, "interval.max_duration")
    # The motion and jump filters are off by default here (evaluation keeps every interval);
    # calibration turns the motion filter on with the options' defaults (from_options).
    min_distance: float = 0.0
    max_speed: float = math.inf
    min_turn: float = 0.0

    def __post_init__(self) -> None:
        if self.kind not in ("time", "distance"):
            raise ParameterError(f"interval kind: must be 'time' or 'distance', got {self.kind!r}")
        if self.overlap not in ("none", "sliding"):
            raise ParameterError(f"interval overlap: must be 'none' or 'sliding', got "
                                 f"{self.overlap!r}")
        if not (math.isfinite(self.length) and self.length > 0):
            raise ParameterError(f"interval length: must be > 0, got {self.length}")
        if not (math.isfinite(self.min_distance) and self.min_distance >= 0):
            raise ParameterError(f"interval min_distance: must be >= 0 m, got {self.min_distance}")
        if not (math.isfinite(self.min_turn) and self.min_turn >= 0):
            raise ParameterError(f"interval min_turn: must be >= 0 rad, got {self.min_turn}")
        if not self.max_speed > 0:
            raise ParameterError(f"interval max_speed: must be > 0 m/s, got {self.max_speed}")

    @classmethod
    def from_options(cls, values: dict[str, Any]) -> IntervalPolicy:
        """The policy of ``interval.*`` option values (missing ones take the options'
        defaults): ``interval.tolerance`` < 0 means 0.15 length and ``interval.max_speed`` 0
        keeps every interval, as the options describe."""
        v = {n: values.get(n, s.default) for n, s in options(INTERVAL_OPTIONS).items()
             if n.startswith("interval.")}
        tol = float(v["interval.tolerance"])
        vmax = float(v["interval.max_speed"])
        return cls(kind=v["interval.kind"], length=float(v["interval.length"]),
                   overlap=v["interval.overlap"], tolerance=None if tol < 0 else tol,
                   max_duration=float(v["interval.max_duration"]),
                   min_distance=float(v["interval.min_distance"]),
                   max_speed=vmax if vmax > 0 else math.inf,
                   min_turn=float(v["interval.min_turn"]))

    @property
    def filters_motion(self) -> bool:
        """True when the informative-motion filter is on (``min_distance`` or ``min_turn``)."""
        return self.min_distance > 0 or self.min_turn > 0

    def informative(self, distance: np.ndarray, turn: np.ndarray) -> np.ndarray:
        """Mask of intervals whose ground-truth ``distance`` [m] / net ``turn`` [rad] pass the
        informative-motion filter (all True when it is off)."""
        d, a = np.asarray(distance, dtype=float), np.abs(np.asarray(turn, dtype=float))
        if not self.filters_motion:
            return np.ones(d.shape, dtype=bool)
        keep = np.zeros(d.shape, dtype=bool)
        if self.min_distance > 0:
            keep |= d >= self.min_distance
        if self.min_turn > 0:
            keep |= a >= self.min_turn
        return keep

    @property
    def tol(self) -> float:
        """Accepted duration mismatch [s] of time intervals."""
        return 0.15 * self.length if self.tolerance is None else float(self.tolerance)


def _path_length(positions: np.ndarray) -> np.ndarray:
    d = np.linalg.norm(np.diff(positions[:, :2], axis=0), axis=1)
    return np.concatenate([[0.0], np.cumsum(d)])


def unwrapped_yaw(quaternions: np.ndarray) -> np.ndarray:
    """Yaw (M,) [rad] of ``[qw, qx, qy, qz]`` rows, unwrapped along the samples (so the net yaw
    change of an interval counts whole turns)."""
    from wmr_model.calibration.residuals import yaw_of

    q = np.asarray(quaternions, dtype=float).reshape(-1, 4)
    return np.unwrap(yaw_of(q)) if len(q) else np.zeros(0)


def classify_intervals(intervals: np.ndarray, positions: np.ndarray, yaw: np.ndarray,
                       policy: IntervalPolicy) -> np.ndarray:
    """Label (K,) of each interval: ``"straight"`` (moves >= ``min_distance``, turns less than
    ``min_turn``), ``"arc"`` (both), ``"spin"`` (turns only) or ``"still"`` (neither).

    ``positions`` (M, 3) and unwrapped ``yaw`` (M,) of the ground truth; thresholds of
    ``policy`` (the defaults :data:`MOVING_MIN_DISTANCE`, :data:`MOVING_MIN_TURN` where 0).
    """
    iv = np.asarray(intervals, dtype=int).reshape(-1, 2)
    s = _path_length(np.asarray(positions, dtype=float))
    y = np.asarray(yaw, dtype=float)
    d = s[iv[:, 1]] - s[iv[:, 0]]
    a = np.abs(y[iv[:, 1]] - y[iv[:, 0]])
    dmin = policy.min_distance or MOVING_MIN_DISTANCE
    amin = policy.min_turn or MOVING_MIN_TURN
    moves, turns = d >= dmin, a >= amin
    out = np.full(len(iv), "still", dtype=object)
    out[moves & ~turns] = "straight"
    out[moves & turns] = "arc"
    out[~moves & turns] = "spin"
    return out


def interval_class_counts(labels: np.ndarray) -> dict[str, int]:
    """Counts per :data:`INTERVAL_CLASSES` label."""
    lab = list(labels)
    return {c: lab.count(c) for c in INTERVAL_CLASSES}


def split_time(times: np.ndarray, fraction: float) -> float:
    """Stamp [s] that splits the ground truth ``times`` into the first ``fraction`` of its
    duration (calibration) and the rest (out-of-sample evaluation)."""
    if not (math.isfinite(fraction) and 0.0 < fraction < 1.0):
        raise ParameterError(f"split: must be a fraction in (0, 1), got {fraction}")
    t = np.asarray(times, dtype=float)
    return float(t[0] + fraction * (t[-1] - t[0]))


def split_intervals(times: np.ndarray, intervals: np.ndarray,
                    t_split: float) -> tuple[np.ndarray, np.ndarray]:
    """``(before, after)``: the intervals (K, 2) ending by ``t_split`` and those starting at or
    after it (an interval straddling the split is in neither)."""
    t = np.asarray(times, dtype=float)
    iv = np.asarray(intervals, dtype=int).reshape(-1, 2)
    return iv[t[iv[:, 1]] <= t_split], iv[t[iv[:, 0]] >= t_split]


def interval_ending_at(times: np.ndarray, i1: int, policy: IntervalPolicy,
                       positions: np.ndarray | None = None) -> int | None:
    """Start index of the interval of ``policy`` that ends at sample ``i1`` (or None)."""
    t = np.asarray(times, dtype=float)
    if policy.kind == "time":
        target = t[i1] - policy.length
        i0 = int(np.searchsorted(t, target))
        cands = [k for k in (i0 - 1, i0) if 0 <= k < i1]
        if not cands:
            return None
        k = min(cands, key=lambda c: abs(t[c] - target))
        return k if abs(t[k] - target) <= policy.tol else None
    if positions is None:
        raise ParameterError("distance intervals need the ground-truth positions")
    s = _path_length(np.asarray(positions, dtype=float))
    k = int(np.searchsorted(s, s[i1] - policy.length, side="right")) - 1
    if k < 0 or k >= i1 or t[i1] - t[k] > policy.max_duration:
        return None
    return k


def ground_truth_jumps(times: np.ndarray, positions: np.ndarray, max_speed: float) -> np.ndarray:
    """Mask (M - 1,) of ground-truth steps ``k -> k + 1`` whose horizontal speed exceeds
    ``max_speed`` [m/s] (re-localization jumps of the reference)."""
    t = np.asarray(times, dtype=float)
    d = np.linalg.norm(np.diff(np.asarray(positions, dtype=float)[:, :2], axis=0), axis=1)
    return d > max_speed * np.diff(t)


def select_intervals(times: np.ndarray, policy: IntervalPolicy,
                     positions: np.ndarray | None = None,
                     yaw: np.ndarray | None = None) -> np.ndarray:
    """Intervals (K, 2) of sample indices ``(i0, i1)`` over ground-truth ``times`` (M,).

    ``positions`` (M, 3) are needed for ``kind="distance"`` and the two filters; the unwrapped
    ground-truth ``yaw`` (M,) (:func:`unwrapped_yaw`) for ``min_turn``.
    """
    out = _select(np.asarray(times, dtype=float), policy, positions)
    if (policy.filters_motion or math.isfinite(policy.max_speed)) and positions is None:
        raise ParameterError("min_distance / min_turn / max_speed need the ground-truth "
                             "positions")
    if policy.min_turn > 0 and yaw is None:
        raise ParameterError("min_turn needs the ground-truth yaw")
    if policy.filters_motion and len(out):
        s = _path_length(np.asarray(positions, dtype=float))
        y = np.zeros(len(s)) if yaw is None else np.asarray(yaw, dtype=float)
        out = out[policy.informative(s[out[:, 1]] - s[out[:, 0]], y[out[:, 1]] - y[out[:, 0]])]
    if math.isfinite(policy.max_speed) and positions is not None and len(out):  # checked above
        jump = np.concatenate([[0], np.cumsum(ground_truth_jumps(times, positions,
                                                                  policy.max_speed))])
        out = out[jump[out[:, 1]] == jump[out[:, 0]]]
    return out


def _select(t: np.ndarray, policy: IntervalPolicy, positions: np.ndarray | None) -> np.ndarray:
    M = len(t)
    out: list[tuple[int, int]] = []
    if policy.overlap == "sliding":
        for i1 in range(1, M):
            i0 = interval_ending_at(t, i1, policy, positions)
            if i0 is not None:
                out.append((i0, i1))
        return np.array(out, dtype=int).reshape(-1, 2)
    s = None if policy.kind == "time" else _path_length(np.asarray(positions, dtype=float))
    i0 = 0
    while i0 < M - 1:
        if policy.kind == "time":
            target = t[i0] + policy.length
            k = int(np.searchsorted(t, target))
            cands = [c for c in (k - 1, k) if i0 < c < M]
            if not cands:
                break
            i1 = min(cands, key=lambda c: abs(t[c] - target))
            if abs(t[i1] - target) <= policy.tol:
                out.append((i0, i1))
            i0 = i1
        else:
            assert s is not None
            k = int(np.searchsorted(s, s[i0] + policy.length, side="left"))
            if k >= M:
                break
            if t[k] - t[i0] <= policy.max_duration:
                out.append((i0, k))
            i0 = k
    return np.array(out, dtype=int).reshape(-1, 2)
