"""Robust handling of timestamped sensor streams (no ROS types): time base, order, plausibility.

Shared by the odometry and calibrator nodes (and usable offline). Three mechanisms, one class or
function each:

* :class:`OrderedInput` - one front door for several streams (``"encoders"``, ``"imu"``, ...):

  1. **time-base guard**, per stream: a stamp more than ``jump_threshold`` seconds away from
     the newest accepted stamp *of its stream* (behind or ahead) is held as a *candidate* of a
     new time base. It becomes the time base only when confirmed - by ``confirm_count``
     consecutive messages of that stream consistent with it (each within ``jump_threshold``
     of the previous candidate), or at once when it agrees with the clock the stamps follow
     (``clock`` argument, e.g. ``/clock`` under ``use_sim_time``). A message consistent with
     the old time base refutes the candidates: they are dropped and counted as
     ``stray_stamp``. So one stray stamp (0, 5 s old, 100 s ahead) is rejected and counted; a
     bag loop or ``/clock`` reset is followed after ``confirm_count`` messages (none of them
     lost: the candidates are released once confirmed, the first flagged ``new_time_base``).
     Per stream, because a backlogged replay lets one stream lag another by seconds of stamp
     time without any jump.
  2. **reorder window**: accepted messages wait in a heap and are released in stamp order
     (ties: the order of ``streams``, so an IMU sample stamped like an encoder message comes
     first). A message is released once every *live* stream has delivered a stamp at or past it
     (a k-way merge), and in any case once the newest stamp is ``window`` seconds past it. A
     stream stops being waited for when :meth:`poll` finds it silent for ``idle`` seconds of
     *receive* time while another stream delivered (silence is counted from the first message,
     or from the end of a pause of every stream); its next message makes it live again. When *every*
     stream is silent (a paused player, the end of a bag) nothing is given up until
     ``ALL_SILENT_FACTOR * idle``, then the held tail leaves: a pause common to all streams
     must not release one stream ahead of the other. Nor is the consumer's own stall: when
     neither :meth:`push` nor :meth:`poll` was called for more than :data:`STALL_GAP` seconds
     (a descheduled process on a loaded machine, a long callback), no stream could be heard
     meanwhile, so silence is counted from the end of that gap (``stalls`` counts them);
     otherwise the first poll after it would give up on a stream whose messages are queued
     behind the stall and release the others ahead of it, and that stream's backlog would
     then arrive late. Without receive times (``now`` None)
     every stream heard from is live. Liveness by receive time is what makes a replay at
     several times real time lossless: an executor that serves one queue per turn lets one
     stream lag the other by a backlog's worth of stamp time, yet both stay live and the merge
     waits. Added latency: about one period of the slowest stream while all flow; ``idle``
     (receive time) when one stops; never more than ``window`` of stamp time. ``window = 0``
     releases every message at once, in arrival order (no reordering).

* :class:`WindowedOrder` - the same guard for recorded streams (bags), ordering by a pure
  stamp window since a recorded stream's own stamps may be out of order; and
  :func:`rate_or_difference` (and :func:`differentiate_positions` over a recorded stream), rates
  of encoders that publish positions only.

* :func:`wheel_rate_problem`, :func:`angular_rate_problem` - plausibility gates with limits from
  :class:`PlausibilityLimits` (rim speed and acceleration from the wheel radii, gyro rate).
  They return a one-line reason ("" when plausible); the caller counts and rejects.

Counters (:attr:`OrderedInput.stats`): ``stray_stamp`` (messages dropped by the guard),
``time_base_changes`` (confirmed jumps), ``late`` (released behind an already released stamp:
the window was too short for that message; the consumer decides, e.g. rejects it as late),
``non_finite_stamp`` (passed through at once for the consumer to reject), ``released_idle``
(released by :meth:`poll` because a stream fell silent), ``stalls`` (gaps in the consumer's own
calls longer than :data:`STALL_GAP`, not counted as silence).
"""

from __future__ import annotations

import heapq
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from wmr_model.errors import ParameterError

__all__ = [
    "usable_poses",
    "Released",
    "OrderedInput",
    "WindowedOrder",
    "differentiate_positions",
    "rate_or_difference",
    "PlausibilityLimits",
    "wheel_rate_problem",
    "angular_rate_problem",
    "ALL_SILENT_FACTOR",
    "DEFAULT_CONFIRM_COUNT",
    "DEFAULT_MAX_ANGULAR_RATE",
    "DEFAULT_MAX_WHEEL_SPEED",
    "DEFAULT_MAX_WHEEL_ACCELERATION",
]

#: Every stream silent this many ``idle`` periods: the held tail is released.
ALL_SILENT_FACTOR = 5.0
#: [s] a gap longer than this between the consumer's own calls (push or poll) is a stall of
#: the consumer, not silence of its streams (the nodes poll every 0.05 s).
STALL_GAP = 0.1
#: Consecutive messages that confirm a new time base (bag loop, clock reset, long dropout).
DEFAULT_CONFIRM_COUNT = 3
#: [rad/s] gyro rate gate: the full scale of common MEMS gyros (2000 deg/s).
DEFAULT_MAX_ANGULAR_RATE = 35.0
#: [m/s] wheel rim speed gate (omega * r): 180 km/h, above any vehicle in this package.
DEFAULT_MAX_WHEEL_SPEED = 50.0
#: [m/s^2] wheel rim acceleration gate (d omega/dt * r): about 10 g.
DEFAULT_MAX_WHEEL_ACCELERATION = 100.0


@dataclass(frozen=True)
class Released:
    """One message leaving :class:`OrderedInput`, in stamp order.

    Attributes:
        stamp: message stamp [s].
        stream: stream name given to :meth:`OrderedInput.push`.
        item: the caller's payload, untouched.
        new_time_base: this message starts a confirmed new time base (the consumer may reset).
    """

    stamp: float
    stream: str
    item: Any
    new_time_base: bool = False


def _check_nonneg(name: str, value: float) -> float:
    v = float(value)
    if not (math.isfinite(v) and v >= 0.0):
        raise ParameterError(f"{name}: must be a finite number >= 0, got {value!r}")
    return v


class OrderedInput:
    """Time-base guard plus stamp-ordered reorder window over several streams.

    Args:
        streams: stream names in tie-break order (earlier first at equal stamps).
        window: [s] of stamp time a message may be held for reordering; 0: no reordering.
        jump_threshold: [s] a stamp this far from the time base needs confirmation.
        confirm_count: consecutive consistent messages that confirm a new time base (>= 1;
            1 accepts every jump at once, the behaviour without a guard).
        idle: [s] of receive time after which a silent stream is no longer waited for.
    """

    def __init__(self, streams: Sequence[str], *, window: float = 0.0,
                 jump_threshold: float = 1.0, confirm_count: int = DEFAULT_CONFIRM_COUNT,
                 idle: float = 0.1) -> None:
        if not streams:
            raise ParameterError("streams: expected at least one stream name, got none")
        self.priority = {s: i for i, s in enumerate(streams)}
        self.window = _check_nonneg("window", window)
        self.jump_threshold = _check_nonneg("jump_threshold", jump_threshold)
        if int(confirm_count) < 1:
            raise ParameterError(f"confirm_count: must be >= 1, got {confirm_count!r}")
        self.confirm_count = int(confirm_count)
        self.idle = _check_nonneg("idle", idle)
        self.stats: Counter = Counter()
        #: one-line description of the last stray stamp ("" if none)
        self.last_stray = ""
        #: largest hold [s of stamp time] of a released message (newest stamp - its stamp)
        self.max_hold = 0.0
        self._heap: list[tuple[float, int, int, str, Any, bool]] = []
        self._seq = 0
        self._latest: dict[str, float] = {}
        self._released_front = -math.inf
        self._front: dict[str, float] = {}  # newest accepted stamp per stream (the guard's)
        self._start = math.nan  # first stamp since the last time-base change
        self._candidates: dict[str, list[tuple[float, Any]]] = {s: [] for s in streams}
        self._recv: dict[str, float] = {}  # last receive time per stream
        self._first_recv = math.nan  # receive time of the first message of the time base
        self._now: float | None = None  # newest receive time seen
        self._dead: set[str] = set()  # streams no longer waited for (decided by poll)
        self._active_since = math.nan  # receive time the streams resumed after a common pause
        self._last_call = math.nan  # receive time of the consumer's last push or poll
        self._resumed = -math.inf  # end of the consumer's last stall (silence counts from it)

    # ---- configuration ------------------------------------------------------------------------
    def set_window(self, window: float) -> list[Released]:
        """Change the window; returns what a shorter window releases now."""
        self.window = _check_nonneg("window", window)
        return self._release(final=False)

    @property
    def pending(self) -> int:
        """Messages held (reorder heap plus time-base candidates)."""
        return len(self._heap) + sum(len(c) for c in self._candidates.values())

    @property
    def time_base(self) -> float | None:
        """Newest accepted stamp [s] of any stream (None before the first message)."""
        return max(self._front.values()) if self._front else None

    # ---- input --------------------------------------------------------------------------------
    def push(self, stream: str, stamp: float, item: Any = None, *, now: float | None = None,
             clock: float | None = None) -> list[Released]:
        """Add one message; return the messages released by it, in stamp order.

        Args:
            stream: one of the ``streams`` names.
            stamp: message stamp [s].
            item: payload returned in :class:`Released`.
            now: receive time [s] (any monotonic clock) for the stream liveness; None: every
                stream heard from is live.
            clock: current time [s] of the clock the stamps follow (``/clock`` under sim
                time), or None; a stamp within ``jump_threshold`` of it is trusted at once.
        """
        if stream not in self.priority:
            raise ParameterError(f"stream: expected one of {list(self.priority)}, got {stream!r}")
        if now is not None:
            self._note_call(float(now))
            self._now = float(now)
            if not self._recv or self._now - max(self._recv.values()) > self.idle:
                self._active_since = self._now  # first message after a pause of every stream
            self._recv[stream] = self._now
            self._dead.discard(stream)
            if math.isnan(self._first_recv):
                self._first_recv = self._now
        t = float(stamp)
        if not math.isfinite(t):
            self.stats["non_finite_stamp"] += 1
            return [Released(t, stream, item)]
        front = self._front.get(stream)
        cands = self._candidates[stream]
        thr = self.jump_threshold
        if front is None or abs(t - front) <= thr:
            if cands:
                self._drop_candidates(stream, f"refuted by the next {stream} stamp {t:.9f}")
            self._accept(stream, t, item, False)
            return self._release(final=False)
        trusted = clock is not None and math.isfinite(clock) and abs(t - clock) <= thr
        if cands and abs(t - cands[-1][0]) > thr:
            self._drop_candidates(stream, f"not followed: the next {stream} stamp {t:.9f} is "
                                  f"far from it")
        cands = self._candidates[stream]
        cands.append((t, item))
        if not trusted and len(cands) < self.confirm_count:
            return []
        # confirmed: everything of the old time base leaves first, then the new base starts
        out = self._release(final=True)
        self._latest.clear()
        self._released_front = -math.inf
        self._start = math.nan
        del self._front[stream]
        self.stats["time_base_changes"] += 1
        self._candidates[stream] = []
        for k, (tc, it) in enumerate(cands):
            self._accept(stream, tc, it, k == 0)
        return out + self._release(final=False)

    def poll(self, now: float) -> list[Released]:
        """Stop waiting for streams silent for ``idle`` seconds (receive time ``now``) while
        another delivered, release what they held back; release everything once all streams
        are silent for ``ALL_SILENT_FACTOR * idle``. Call periodically (e.g. from a timer)."""
        self._note_call(float(now))
        self._now = now = float(now)
        if not self._recv:
            return []
        heard = self._resumed  # nothing could be heard during the consumer's last stall
        active = {s for s, r in self._recv.items() if now - max(r, heard) <= self.idle}
        if active:
            for s in self.priority:
                r = max(self._recv.get(s, self._first_recv), self._active_since, heard)
                if s not in active and now - r > self.idle:
                    self._dead.add(s)
            out = self._release(final=False)
        elif now - max(max(self._recv.values()), heard) > ALL_SILENT_FACTOR * self.idle:
            out = self._release(final=True)
        else:
            return []
        self.stats["released_idle"] += len(out)
        return out

    def flush(self) -> list[Released]:
        """Release every held message (in stamp order); pending time-base candidates stay."""
        return self._release(final=True)

    # ---- internals ----------------------------------------------------------------------------
    def _note_call(self, now: float) -> None:
        """Record a call of the consumer at receive time ``now``; a gap since its previous
        call longer than :data:`STALL_GAP` was its own stall: silence counts from ``now``."""
        if math.isfinite(self._last_call) and now - self._last_call > STALL_GAP:
            self._resumed = now
            self.stats["stalls"] += 1
        self._last_call = now

    def _drop_candidates(self, stream: str, why: str) -> None:
        cands = self._candidates[stream]
        n, t = len(cands), cands[0][0]
        self.stats["stray_stamp"] += n
        self.last_stray = (f"{stream} stamp {t:.9f} ({n} message{'s' * (n > 1)}) is "
                           f"{t - self._front[stream]:+.3f} s from its stream's time base: {why}")
        self._candidates[stream] = []

    def _accept(self, stream: str, t: float, item: Any, new_base: bool) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (t, self.priority[stream], self._seq, stream, item, new_base))
        if math.isnan(self._start):
            self._start = t
        self._latest[stream] = max(t, self._latest.get(stream, -math.inf))
        self._front[stream] = max(t, self._front.get(stream, -math.inf))

    def _release(self, *, final: bool) -> list[Released]:
        out: list[Released] = []
        if not self._heap:
            return out
        newest = max(self._latest.values()) if self._latest else math.inf
        limit = math.inf if final or self.window == 0.0 else self._limit(newest)
        while self._heap and self._heap[0][0] <= limit:
            t, _, _, stream, item, new_base = heapq.heappop(self._heap)
            if t < self._released_front:
                self.stats["late"] += 1
            else:
                self._released_front = t
            if math.isfinite(newest):
                self.max_hold = max(self.max_hold, newest - t)
            out.append(Released(t, stream, item, new_base))
        return out

    def _limit(self, newest: float) -> float:
        """Newest stamp that may leave: the k-way merge bound over the live streams, capped at
        ``window`` behind the newest stamp."""
        bound = math.inf
        for s in self.priority:
            if self._now is None:  # no receive times: heard streams, or the first window
                live = s in self._latest or newest - self._start <= self.window
            else:
                live = s not in self._dead
            if live:
                bound = min(bound, self._latest.get(s, -math.inf))
        return max(bound, newest - self.window)


# ---- plausibility -------------------------------------------------------------------------------
@dataclass(frozen=True)
class PlausibilityLimits:
    """Gates for absurd samples (a glitching driver, a bit flip), not for estimation.

    Attributes:
        max_wheel_speed: [m/s] largest wheel rim speed |omega| r.
        max_wheel_acceleration: [m/s^2] largest rim acceleration |d omega / dt| r between two
            accepted samples.
        max_angular_rate: [rad/s] largest gyro rate component.
    """

    max_wheel_speed: float = DEFAULT_MAX_WHEEL_SPEED
    max_wheel_acceleration: float = DEFAULT_MAX_WHEEL_ACCELERATION
    max_angular_rate: float = DEFAULT_MAX_ANGULAR_RATE

    def __post_init__(self) -> None:
        for name in ("max_wheel_speed", "max_wheel_acceleration", "max_angular_rate"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and v > 0):
                raise ParameterError(f"{name}: must be a number > 0, got {v!r}")


def wheel_rate_problem(rates: Mapping[str, float], radii: Mapping[str, float],
                       limits: PlausibilityLimits, previous: Mapping[str, float] | None = None,
                       dt: float = math.nan) -> str:
    """Why a set of wheel rates is implausible ("" when it is not).

    Args:
        rates: joint name -> rate [rad/s] (names without a radius are not checked).
        radii: joint name -> wheel radius [m] (mean radius when one encoder drives several).
        limits: the gates.
        previous: rates of the last accepted sample, for the acceleration gate (None: skip).
        dt: [s] since that sample (non-positive or NaN: skip the acceleration gate).
    """
    for name, w in rates.items():
        r = radii.get(name)
        if r is None:
            continue
        if abs(w) * r > limits.max_wheel_speed:
            return (f"joint {name!r}: rim speed {abs(w) * r:.3g} m/s (rate {w:.6g} rad/s x "
                    f"radius {r:.3g} m) > max_wheel_speed {limits.max_wheel_speed:g} m/s")
        if previous is not None and name in previous and dt > 0:
            a = abs(w - previous[name]) / dt * r
            if a > limits.max_wheel_acceleration:
                return (f"joint {name!r}: rim acceleration {a:.3g} m/s^2 (rate {previous[name]:.6g}"
                        f" -> {w:.6g} rad/s in {dt:.4g} s) > max_wheel_acceleration "
                        f"{limits.max_wheel_acceleration:g} m/s^2")
    return ""


def angular_rate_problem(w: Sequence[float], limits: PlausibilityLimits) -> str:
    """Why a gyro sample (3,) [rad/s] is implausible ("" when it is not)."""
    big = [(axis, float(v)) for axis, v in zip("xyz", w) if abs(float(v)) > limits.max_angular_rate]
    if big:
        axis, v = big[0]
        return (f"angular_velocity.{axis} = {v:.6g} rad/s > max_angular_rate "
                f"{limits.max_angular_rate:g} rad/s")
    return ""


# ---- offline: recorded stamps -------------------------------------------------------------------
class WindowedOrder(OrderedInput):
    """:class:`OrderedInput` for recorded streams whose own stamps may be out of order.

    The k-way merge of :class:`OrderedInput` trusts each stream to be in stamp order; a bag's
    header stamps are not (a driver's jittered clock, a reversed stretch, a bag recorded from
    several machines). Here a message leaves only once the newest stamp is ``window`` seconds
    past it, so any disorder shorter than ``window`` is undone; larger disorder is released
    ``late`` (counted, the consumer drops it). The time-base guard is unchanged: a lone stray
    stamp is dropped, a lasting jump (a clock reset mid-recording) is followed after
    ``confirm_count`` messages and flagged ``new_time_base``.
    """

    def _limit(self, newest: float) -> float:
        return newest - self.window


def rate_or_difference(velocity, position, previous_position, dt):
    """Joint rates: ``velocity`` where finite, else the backward difference
    ``(position - previous_position) / dt`` - the one rule for encoders that publish positions
    only (an empty ``velocity`` array means "not provided" in ROS). NaN where neither is
    available (a NaN position or no previous one).

    Used per message by :class:`wmr_model.estimation.odometry.Odometry3D` and over a whole recorded
    stream by :func:`differentiate_positions`.

    Args:
        velocity, position, previous_position: (..., nj) [rad/s or m/s], [rad or m], [rad or m];
            NaN = not provided.
        dt: [s] time from ``previous_position`` to ``position`` (> 0), scalar or broadcastable
            (e.g. (N, 1)).

    Returns:
        (..., nj) float array.
    """
    import numpy as np

    v = np.asarray(velocity, dtype=float)
    d = (np.asarray(position, dtype=float) - np.asarray(previous_position, dtype=float)) / dt
    return np.where(np.isfinite(v), v, d)


def differentiate_positions(stamp, position, velocity):
    """Joint rates (N, nj) of a recorded encoder stream by :func:`rate_or_difference`: each
    sample's positions differenced over the interval ending at it; the first sample takes the
    forward difference (the interval after it).

    Args:
        stamp: (N,) increasing stamps [s].
        position, velocity: (N, nj) [rad or m], [rad/s or m/s]; NaN = not provided.
    """
    import numpy as np

    t = np.asarray(stamp, dtype=float)
    p = np.asarray(position, dtype=float)
    v = np.array(velocity, dtype=float)
    if len(t) < 2:
        return v
    dt = (t[1:] - t[:-1])[:, None]
    return np.concatenate([rate_or_difference(v[:1], p[1:2], p[:1], dt[:1]),
                           rate_or_difference(v[1:], p[1:], p[:-1], dt)])


def usable_poses(series: Any) -> np.ndarray:
    """Mask (N,) of rows of a pose stream (``stamp``, ``position``, ``orientation`` arrays, e.g.
    :class:`wmr_model.io.bags.PoseSeries`) with finite stamp, position and a finite quaternion
    of norm near 1 (> 0.5 before normalization)."""
    q = np.asarray(series.orientation, dtype=float)
    return (np.isfinite(series.stamp) & np.all(np.isfinite(series.position), axis=1)
            & np.all(np.isfinite(q), axis=1) & (np.sum(q * q, axis=1) > 0.25))
