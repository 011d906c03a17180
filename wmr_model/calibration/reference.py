"""Reference (ground-truth) faults: jumps and diverged stretches of a pose reference.

A lidar-ICP or GNSS reference can jump (re-localization: metres in one update) or diverge
(wander off for seconds). Residuals over such stretches measure the reference, not the model,
so calibration and evaluation must skip them and drift must be computed on the trusted path.

The test compares the reference with what the vehicle's own proprioception says over the same
time, **latency-corrected**: a reference step ``k -> k + 1`` (stamps ``t_k``, ``t_k+1``) is
compared with the wheels' travelled distance and the gyro's (else the wheels') yaw change over
``[t_k - d, t_k+1 - d]`` (``d`` the reference latency). Stamp jitter (two ICP poses 0.05 s
apart) does not fire it, unlike a speed ``|dp| / dt`` test, because both sides of the comparison
cover the same (short) time:

* **jump** (:func:`reference_faults`): ``|dp_ref| > (1 + slack) * s_wheel + max(jump_distance,
  3 sigma)`` (``sigma`` the standard deviation of the two samples' difference from their
  covariances: a noisy GNSS fix is not faulty for moving by its own noise) or
  ``|dyaw_ref - dyaw_proprio| > jump_yaw + slack * |dyaw_proprio|``;
* **diverged**: over a window of ``window`` seconds the reference displacement (in its own
  start frame) differs from the dead-reckoned one (wheel speed along the gyro's heading) by more
  than ``max(margin, 3 sigma) + drift_slack * s_wheel`` (the reference went where the vehicle
  cannot have);
* **unsettled**: every other step less than ``settle`` seconds from a jump or diverged step,
  before or after it. A localizer that has just re-localized is trusted again only after it
  has agreed with the wheels and gyro for ``settle`` seconds, so a burst of recurring faults
  (the Warthog log's lidar ICP between 85 and 128 s of the bag: a fault every 1-7 s while it
  updates at 1 Hz with a processing delay that changes from update to update) is excluded as
  one stretch, poses between the faults included. Before a fault: a re-localization jump
  corrects an error that built up before it (on that log the ICP stalls for 2 s while the
  wheels move 1.3 m, then jumps), and a jump cannot be told from an outlier pose.

Untrusted steps are the jumps, every step inside a diverged window and the unsettled steps;
:func:`trusted_intervals` drops intervals containing one; :func:`fault_stretches` lists them
for the notes. One :class:`ReferencePolicy` serves ``wmr calibrate``, ``wmr replay`` and the
calibrator node.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from wmr_model.calibration.intervals import unwrapped_yaw
from wmr_model.calibration.logs import CalibrationLog
from wmr_model.errors import ParameterError
from wmr_model.parameters import OptionSpec, register_options

__all__ = ["ReferencePolicy", "ReferenceFaults", "reference_faults", "trusted_intervals",
           "fault_stretches", "unsettled_steps", "proprioceptive_increments", "estimate_latency",
           "fault_note", "dead_reckoning", "sanity_warnings", "yaw_track", "SANITY_RATIO",
           "DEFAULT_SETTLE", "REFERENCE_OPTIONS", "excluded_by_check"]


#: [s] default settling time of :class:`ReferencePolicy`.
DEFAULT_SETTLE = 5.0

#: Option group of the reference check (:func:`wmr_model.parameters.options`): the calibrator
#: node's parameters and the ``wmr calibrate`` / ``wmr replay`` flags of the same names.
REFERENCE_OPTIONS = "reference"

register_options(REFERENCE_OPTIONS, [
    OptionSpec("reference_check", True, read_only=True, description=(
        "skip intervals whose reference poses jump or diverge against the latency-corrected "
        "wheels and gyro (the test of wmr calibrate and wmr replay; counted as skipped "
        "reference_fault)")),
    OptionSpec("reference_settle", DEFAULT_SETTLE, unit="s", lower=0.0, upper=600.0,
               read_only=True, description=(
        "with reference_check: the reference is also untrusted this long before and after a "
        "faulty step (0: the faulty steps only): a localizer that re-localized is trusted "
        "again after agreeing with the wheels and gyro this long; the calibrator node, "
        "updating as data arrive, skips the intervals starting this long after one (counted "
        "as reference_unsettled)")),
])


@dataclass(frozen=True)
class ReferencePolicy:
    """Thresholds of the reference-fault tests (module docstring).

    Attributes:
        jump_distance: [m] allowed excess of a reference step over the wheel distance.
        jump_yaw: [rad] allowed yaw disagreement of one step.
        slack: relative slack on the proprioceptive increments (wheel slip, gyro scale).
        window: [s] diverged-reference window; margin [m], drift_slack: its displacement
            test (allowed dead-reckoning error = margin + drift_slack * wheel distance).
        settle: [s] time before and after a jump or diverged step during which the
            reference is untrusted too (0: only the faulty steps themselves).
    """

    jump_distance: float = 0.3
    jump_yaw: float = 0.15
    slack: float = 0.5
    window: float = 2.0
    drift_slack: float = 0.3
    margin: float = 0.5
    settle: float = DEFAULT_SETTLE

    def __post_init__(self) -> None:
        for n in ("jump_distance", "jump_yaw", "slack", "window", "drift_slack", "margin"):
            v = getattr(self, n)
            if not (math.isfinite(v) and v > 0):
                raise ParameterError(f"reference policy {n}: must be a finite number > 0, "
                                     f"got {v}")
        if not (math.isfinite(self.settle) and self.settle >= 0):
            raise ParameterError(f"reference policy settle: must be a finite number >= 0 s, "
                                 f"got {self.settle}")


@dataclass(frozen=True)
class ReferenceFaults:
    """What :func:`reference_faults` found over the M reference samples.

    Attributes:
        jump: (M - 1,) steps that jump; diverged: (M - 1,) steps inside a diverged window;
        unsettled: (M - 1,) other steps within the policy's ``settle`` seconds of one of
        those (before or after); untrusted: (M - 1,) the union of the three; excess: (M - 1,) [m]
        reference step minus the allowed wheel distance (> 0: jump); latency: the ``d`` used
        [s].
    """

    jump: np.ndarray
    diverged: np.ndarray
    unsettled: np.ndarray
    untrusted: np.ndarray
    excess: np.ndarray
    latency: float


def _cumulative(t_grid: np.ndarray, t: np.ndarray, rate: np.ndarray) -> np.ndarray:
    """Trapezoid integral of ``rate`` sampled at ``t`` from ``t[0]``, evaluated at ``t_grid``
    (rate held at the ends)."""
    c = np.concatenate([[0.0], np.cumsum(0.5 * (rate[1:] + rate[:-1]) * np.diff(t))])
    tg = np.asarray(t_grid, dtype=float)
    out = np.interp(tg, t, c)
    out = np.where(tg < t[0], (tg - t[0]) * rate[0], out)
    return np.where(tg > t[-1], c[-1] + (tg - t[-1]) * rate[-1], out)


def _twist(log: CalibrationLog, dd) -> tuple[np.ndarray, np.ndarray]:
    """Forward speed and yaw rate (Ne,) of the planar model ``dd`` at the encoder stamps."""
    return dd.twist(log, log.joint_time)


def _heading(log: CalibrationLog, dd, t: np.ndarray) -> np.ndarray:
    """Integrated yaw [rad] at ``t`` from 0 at the first sample: gyro z, else the wheels
    (the planar model's yaw rate)."""
    if log.gyro is not None and log.gyro_time is not None and len(log.gyro) >= 2:
        return _cumulative(t, log.gyro_time, log.gyro[:, 2])
    return _cumulative(t, log.joint_time, _twist(log, dd)[1])


def dead_reckoning(log: CalibrationLog, dd, times: np.ndarray) -> np.ndarray:
    """Planar dead reckoning (N, 3) ``[x, y, yaw]`` at ``times`` from the origin: the planar
    model's speed (``dd``, a :class:`~wmr_model.calibration.predictors.PlanarPredictor`)
    along the gyro's (else the model's) heading, on the encoder samples."""
    v, _ = _twist(log, dd)
    tj = log.joint_time
    th = _heading(log, dd, tj)
    x = _cumulative(tj, tj, v * np.cos(th))
    y = _cumulative(tj, tj, v * np.sin(th))
    t = np.asarray(times, dtype=float)
    return np.stack([np.interp(t, tj, x), np.interp(t, tj, y), _heading(log, dd, t)], axis=-1)


def proprioceptive_increments(log: CalibrationLog, dd, latency: float = 0.0):
    """``(s_wheel, dyaw)`` (M - 1,) of each reference step: wheel distance [m] (|v| integrated,
    ``v`` = mean rim speed of the diff-drive sides of ``dd``, a
    :class:`~wmr_model.calibration.predictors.PlanarPredictor`) and yaw change [rad] (gyro z
    where the log has a gyro, else the planar model's yaw rate), over the step's stamps
    shifted back by ``latency``."""
    v, _ = _twist(log, dd)
    tq = log.pose_time - latency
    s = _cumulative(tq, log.joint_time, np.abs(v))
    return np.diff(s), np.diff(_heading(log, dd, tq))


def estimate_latency(log: CalibrationLog, dd, max_latency: float = 1.0,
                     resolution: float = 0.05) -> float:
    """Reference latency [s] in ``[0, max_latency]``: the shift minimizing the median absolute
    difference between the reference's and the gyro's (else the wheels') yaw change per step.
    A first estimate for the fault test; the calibrators refine it as ``time_offset.pose``.
    A position-only reference (``log.heading_measured`` False) has no yaw of its own: its step
    lengths are matched to the wheel distance instead."""
    a_ref = np.diff(unwrapped_yaw(log.pose[:, :4]))
    step = np.linalg.norm(np.diff(log.pose[:, 4:6], axis=0), axis=1)
    best, best_d = math.inf, 0.0
    for d in np.arange(0.0, max_latency + 1e-9, resolution):
        s_p, a_p = proprioceptive_increments(log, dd, float(d))
        cost = float(np.median(np.abs(a_ref - a_p) if log.heading_measured
                               else np.abs(step - s_p)))
        if cost < best - 1e-12:
            best, best_d = cost, float(d)
    return best_d


def reference_faults(log: CalibrationLog, dd, policy: ReferencePolicy | None = None,
                     latency: float = 0.0) -> ReferenceFaults:
    """Jumps and diverged stretches of the log's reference (module docstring)."""
    pol = ReferencePolicy() if policy is None else policy
    M = len(log.pose_time)
    if M < 2:
        z = np.zeros(0, dtype=bool)
        return ReferenceFaults(z, z, z, z, np.zeros(0), float(latency))
    s_w, a_p = proprioceptive_increments(log, dd, latency)
    step = np.linalg.norm(np.diff(log.pose[:, 4:6], axis=0), axis=1)
    a_ref = np.diff(unwrapped_yaw(log.pose[:, :4]))
    # a noisy reference (an SBAS GNSS fix, sigma ~1 m) moves by its own noise: the allowed
    # disagreement of two of its samples is at least 3 sigma of their difference
    sig = _position_sigma(log)
    noise_step = 3.0 * np.hypot(sig[:-1], sig[1:])
    excess = step - ((1.0 + pol.slack) * s_w + np.maximum(pol.jump_distance, noise_step))
    jump = excess > 0
    if log.heading_measured:  # a derived heading is the gyro's: no test of its own
        jump |= np.abs(a_ref - a_p) > pol.jump_yaw + pol.slack * np.abs(a_p)
    # diverged: windows where the reference's displacement (in its start frame) disagrees with
    # dead reckoning's (in its own) by more than dead reckoning's error can explain
    c_w = np.concatenate([[0.0], np.cumsum(s_w)])
    t = log.pose_time
    end = np.searchsorted(t, t + pol.window, side="right") - 1
    dr = dead_reckoning(log, dd, t - latency)
    yr = unwrapped_yaw(log.pose[:, :4])
    d_ref = _in_frame(log.pose[end, 4:6] - log.pose[:, 4:6], yr)
    d_dr = _in_frame(dr[end, :2] - dr[:, :2], dr[:, 2])
    bad_win = (np.linalg.norm(d_ref - d_dr, axis=1)
               > np.maximum(pol.margin, 3.0 * np.hypot(sig, sig[end]))
               + pol.drift_slack * (c_w[end] - c_w))
    diverged = np.zeros(M - 1, dtype=bool)
    mark = np.zeros(M, dtype=int)  # +1 at a bad window's first step, -1 after its last
    starts = np.flatnonzero(bad_win & (end > np.arange(M)))
    np.add.at(mark, starts, 1)
    np.add.at(mark, end[starts], -1)
    diverged = np.cumsum(mark)[:-1] > 0
    unsettled = unsettled_steps(t, jump | diverged, pol.settle)
    return ReferenceFaults(jump=jump, diverged=diverged, unsettled=unsettled,
                           untrusted=jump | diverged | unsettled, excess=excess,
                           latency=float(latency))


def _position_sigma(log: CalibrationLog) -> np.ndarray:
    """(M,) horizontal position sigma [m] of each reference sample (rms of its x and y
    standard deviations; 0 where the covariance is not finite)."""
    v = np.diagonal(np.asarray(log.pose_covariance)[:, 3:5, 3:5], axis1=1, axis2=2)
    v = np.where(np.isfinite(v), v, 0.0)
    return np.sqrt(np.maximum(v.mean(axis=1), 0.0))


def unsettled_steps(times: np.ndarray, faulty: np.ndarray, settle: float) -> np.ndarray:
    """(M - 1,) steps of a reference stamped ``times`` (M,) that are not ``faulty`` (M - 1,)
    but lie less than ``settle`` [s] from a faulty step: starting less than ``settle`` after
    its end, or ending less than ``settle`` before its start (module docstring)."""
    t = np.asarray(times, dtype=float)
    bad = np.asarray(faulty, dtype=bool)
    if not bad.any() or settle <= 0:
        return np.zeros(len(bad), dtype=bool)
    end = np.where(bad, t[1:], -np.inf)  # end stamp of each faulty step
    last = np.maximum.accumulate(end)
    prev = np.concatenate([[-np.inf], last[:-1]])  # latest faulty end before each step
    start = np.where(bad, t[:-1], np.inf)  # start stamp of each faulty step
    first = np.minimum.accumulate(start[::-1])[::-1]
    nxt = np.concatenate([first[1:], [np.inf]])  # earliest faulty start after each step
    return ~bad & ((t[:-1] - prev < settle) | (nxt - t[1:] < settle))


def _in_frame(d: np.ndarray, yaw: np.ndarray) -> np.ndarray:
    """World displacements (N, 2) expressed in frames rotated by ``yaw`` (N,)."""
    c, s = np.cos(yaw), np.sin(yaw)
    return np.stack([c * d[:, 0] + s * d[:, 1], -s * d[:, 0] + c * d[:, 1]], axis=1)


def trusted_intervals(intervals: np.ndarray, faults: ReferenceFaults) -> np.ndarray:
    """The intervals (K, 2) that contain no untrusted reference step."""
    iv = np.asarray(intervals, dtype=int).reshape(-1, 2)
    c = np.concatenate([[0], np.cumsum(faults.untrusted)])
    return iv[c[iv[:, 1]] == c[iv[:, 0]]]


def fault_stretches(times: np.ndarray, faults: ReferenceFaults) -> list[tuple[float, float]]:
    """Untrusted stretches ``(t_start, t_end)`` [s] (consecutive untrusted steps merged)."""
    t = np.asarray(times, dtype=float)
    u = np.concatenate([[False], np.asarray(faults.untrusted, dtype=bool), [False]])
    d = np.diff(u.astype(int))
    return [(float(t[a]), float(t[b])) for a, b in zip(np.flatnonzero(d == 1),
                                                       np.flatnonzero(d == -1))]


def fault_note(source: str, times: np.ndarray, faults: ReferenceFaults, excluded: int,
               total: int) -> str:
    """One line for the notes: what was found and how many intervals it excluded."""
    st = fault_stretches(times, faults)
    shown = ", ".join(f"{a:.1f}-{b:.1f} s" for a, b in st[:6]) + (" ..." if len(st) > 6 else "")
    return (f"{source}: reference faults (latency {faults.latency:.2f} s corrected): "
            f"{int(faults.jump.sum())} jump steps, {int(faults.diverged.sum())} steps in diverged "
            f"stretches, {int(faults.unsettled.sum())} steps before the reference settled "
            f"({len(st)} untrusted stretches{': ' + shown if st else ''}); {excluded} of {total} "
            "intervals excluded from calibration and evaluation")


#: Ratios of reference to wheel-derived motion outside [1 / SANITY_RATIO, SANITY_RATIO] are
#: reported: "is this the right vehicle / radius / track width?"
SANITY_RATIO = 1.6


def yaw_track(model) -> float:
    """Effective track [m] of the wheels' yaw rate ``r (w_r - w_l) / B_eff``: the left-right
    distance B for a differential drive; for a skid steer (wheels ahead of and behind the
    centre, wheelbase L) the kinematic least-squares value ``B (1 + (L / B)^2)`` (sideways
    scrub of the outer wheels). A model without wheels off the axle gives B."""
    from wmr_model.kinematics import api

    data = api.create_data(model)
    Tw = api.forward_kinematics(model, data, model.neutral_state())
    p = Tw[model.wheel_frame, :2, 3]
    y, x = p[:, 1], p[:, 0]
    B = float(y[y > 0].mean() - y[y <= 0].mean())
    return B + float(np.mean(x * x)) * 4.0 / B


def sanity_warnings(log: CalibrationLog, dd, track: float, faults: ReferenceFaults,
                    source: str, window: float = 2.0) -> tuple[list[str], dict[str, float]]:
    """Warnings when the reference's speed or yaw rate is far from the wheels' (ratio outside
    ``[1/SANITY_RATIO, SANITY_RATIO]``), and the ratios: medians over ``window`` [s] windows
    that move >= 0.3 m (speed: reference path / wheel distance) or turn >= 0.1 rad by the wheels
    (yaw: reference / wheel yaw change, ``track`` from :func:`yaw_track`). Medians over all
    windows, faults included: a wrong radius makes the whole reference look diverged."""
    v, w = _twist(log, dd)
    if hasattr(dd, "track"):  # differential drive: the skid steer's effective track
        w = w * dd.track / track
    t = log.pose_time
    tq = t - faults.latency
    s_w = _cumulative(tq, log.joint_time, np.abs(v))
    a_w = _cumulative(tq, log.joint_time, w)
    c_ref = np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(log.pose[:, 4:6], axis=0),
                                                            axis=1))])
    y_ref = unwrapped_yaw(log.pose[:, :4])
    end = np.searchsorted(t, t + window, side="right") - 1
    ds, da = s_w[end] - s_w, a_w[end] - a_w
    ratios = {}
    mv = ds >= 0.3
    if mv.sum() >= 3:
        ratios["speed"] = float(np.median((c_ref[end] - c_ref)[mv] / ds[mv]))
    tn = np.abs(da) >= 0.1
    if tn.sum() >= 3 and log.heading_measured:
        ratios["yaw_rate"] = float(np.median((y_ref[end] - y_ref)[tn] / da[tn]))
    out = []
    what = {"speed": "wheel radius", "yaw_rate": "track width (or the left/right joints)"}
    for k, r in ratios.items():
        if not (1.0 / SANITY_RATIO <= r <= SANITY_RATIO):
            out.append(f"{source}: reference/wheel {k.replace('_', ' ')} ratio {r:.2f} (expected "
                       f"~1): is this the right vehicle? check its {what[k]}")
    faulty = faults.jump | faults.diverged
    if len(faulty) and faulty.mean() > 0.3:
        out.append(f"{source}: {100 * faulty.mean():.0f} % of the reference steps look "
                   "faulty: a reference this bad, or the wrong vehicle?")
    return out, ratios


def excluded_by_check(n_informative: int) -> str:
    """The clause an empty-calibration error adds when the reference check removed all
    ``n_informative`` informative intervals ("" when there were none)."""
    if n_informative == 0:
        return ""
    return (f" with a trusted reference (the reference check excluded all {n_informative} "
            "informative ones: faults, or within --reference-settle of one; "
            "--reference-settle 0 or --no-reference-check keeps them)")


@dataclass
class ReferenceCheck:
    """What :func:`check_reference` found: the faults, the ``intervals`` it was given minus
    those over an untrusted step, the notes line and the sanity warnings."""

    faults: ReferenceFaults
    intervals: np.ndarray
    note: str
    warnings: list[str]


def check_reference(log: CalibrationLog, model, intervals: np.ndarray, *, topic: str,
                    source: str, dt: float | None = None,
                    policy: ReferencePolicy | None = None) -> ReferenceCheck:
    """The reference check of ``wmr calibrate``, ``wmr replay`` and fleet fits in one place:
    latency-corrected faults against the wheels (+ gyro) of the vehicle's planar model
    (:func:`~wmr_model.calibration.predictors.planar_predictor`), ``intervals`` (K, 2) without
    the untrusted ones, the note naming ``topic``, and the sanity warnings naming ``source``
    (the bag). Raises ParameterError when the log cannot be checked (e.g. no joint the planar
    model can use). ``policy``: the thresholds
    (default :class:`ReferencePolicy`)."""
    from wmr_model.calibration.predictors import planar_predictor

    dd = planar_predictor(model) if dt is None else planar_predictor(model, dt=dt)
    faults = reference_faults(log, dd, policy, latency=estimate_latency(log, dd))
    iv = np.asarray(intervals, dtype=int).reshape(-1, 2)
    kept = trusted_intervals(iv, faults)
    note = fault_note(topic, log.pose_time, faults, len(iv) - len(kept), len(iv))
    warn, _ = sanity_warnings(log, dd, yaw_track(model) if hasattr(dd, "track") else 1.0,
                              faults, source)
    return ReferenceCheck(faults, kept, note, warn)
