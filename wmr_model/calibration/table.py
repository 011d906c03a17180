"""Table 3.3-style comparison of reference and 3D models on one log (thesis §3.4.1).

Rows: the planar model of the vehicle's kind (diff drive (3.64)-(3.65) for differential and skid
steering, the kinematic bicycle for steered vehicles:
:func:`~wmr_model.calibration.predictors.planar_predictor`) and its calibrated "+" variant
(diff drive+ (3.66) with a speed scale; bicycle+) online and converged; 3D kinematic (§2.2);
3D enhanced kinematic (§2.3) online and converged; optionally the offline fit (3.44). "Online"
errors are those of each interval predicted with the estimate from *prior* intervals only;
"converged" re-predicts every interval with the final estimate. Errors are means over all
evaluation intervals: horizontal Euclidean position error [m] and absolute (wrapped) yaw error
[rad] of the final predicted pose, each interval started at the measured ground-truth pose.

Standard definition (the one the issue's reference numbers use): evaluation intervals are
consecutive, non-overlapping ground-truth-to-ground-truth intervals of about the nominal length
(:class:`~wmr_model.calibration.intervals.IntervalPolicy` ``"time"``, end sample nearest to
``t0 + length`` within 15 %), *standing still included*; the calibrators learn only from the
moving ones (``calibration_intervals``, the moving filter). An independent re-implementation
(plain 2D diff drive, r = 0.3 m, B = 1.08 m) gives 0.063 m / 0.031 rad on the Warthog log over
147 intervals, the same as the "diff drive" row (the reference's yaw error). Diff drive+ with
the reference's alpha 0.62 gives its 0.028 m / 0.006 rad on the 139 intervals without a lidar-ICP
re-localization jump (``IntervalPolicy.max_speed`` 2 m/s); the reference's plain 0.047 m lies
between the jump-free 0.041 m and the all-interval 0.063 m (README, "Calibration (IPEM)").

**Out-of-sample evaluation** (``split=F``): the calibrators run over the informative intervals
of the whole log in time order; the first ``F`` of the log is the calibration part. Rows of the
out-of-sample table are over the evaluation intervals that start after the split: "calibrated"
rows predict them with the estimate of the updates finished by the split (the model calibrated on
the first ``F``, frozen), "online" rows with the estimate of the updates finished by each
interval's start (the calibrator keeps learning, causally). The in-sample rows are the whole-log
table (its "converged" rows score the final estimate on the data it was fitted to).

The ground-truth latency is calibrated as ``time_offset.pose`` together with the other
parameters of the calibrated rows (inputs re-sampled on ``[t0 - d, t - d]``); the uncalibrated
rows use offset 0.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from wmr_model.calibration.bounds import physical_bounds, physical_warnings
from wmr_model.calibration.evaluate import evaluate, online_errors
from wmr_model.calibration.identifiability import check_identifiability
from wmr_model.calibration.intervals import split_intervals, split_time
from wmr_model.calibration.logs import CalibrationLog
from wmr_model.calibration.offline import calibrate_offline
from wmr_model.calibration.online import OnlineCalibrator
from wmr_model.calibration.predictors import ModelPredictor, planar_predictor
from wmr_model.errors import ParameterError
from wmr_model.terrain.surface import Terrain, flat
from wmr_model.vehicles.model import VehicleModel

__all__ = ["TableRow", "DEFAULT_3D_PARAMS", "DEFAULT_NOISE", "compare_models", "initial_std",
           "empty_split_warning", "steering_params", "reference_jitter", "resolution_note"]

#: Default parameters of the 3D kin+ rows on flat ground (p1 needs grades to be observable).
DEFAULT_3D_PARAMS = ("slip.p2", "slip.p3", "slip.p4", "slip.p5", "slip.p6", "time_offset.pose")

#: Q' Cholesky entries estimated with them (yaw rate, forward and lateral speed noise).
DEFAULT_NOISE = ("noise.U.wz_wz", "noise.U.vx_vx", "noise.U.vy_vy")

#: Starting Q' Cholesky entries [unit/s^0.5] (bounded to twice these during the first 20
#: intervals): 0.02 rad/s^0.5 yaw, 0.05 m/s^0.5 speed noise.
DEFAULT_NOISE0 = {"noise.U.wz_wz": 0.02, "noise.U.vx_vx": 0.05, "noise.U.vy_vy": 0.05}

_STD0 = {"slip": 0.5, "time_offset": 0.1, "diff_drive": 0.5, "noise": 0.05, "wheel": 0.02,
         "vehicle": 0.1, "sensor": 0.3, "steer.offset": 0.05, "steer.gain": 0.2,
         "steer.lag": 0.1, "bicycle.alpha": 0.3, "bicycle.steer_offset": 0.05,
         "planar.speed_scale": 0.1}


@dataclass(frozen=True)
class TableRow:
    """One row: model label, mean position error [m], mean yaw error [rad], values used, number
    of evaluation intervals and the table (``"in-sample"`` or ``"out-of-sample"``)."""

    model: str
    pos: float
    yaw: float
    values: dict[str, float]
    intervals: int
    table: str = "in-sample"


def reference_jitter(log: CalibrationLog, half_window: float = 1.0) -> float:
    """RMS [m] of the reference's horizontal positions about a local quadratic fit over
    ``+- half_window`` seconds: the short-term noise that enters every interval's end error (a
    slowly wandering bias, e.g. SBAS GNSS, cancels between an interval's two ends and is not
    in it). NaN with fewer than 5 samples in every window."""
    t = np.asarray(log.pose_time, dtype=float)
    p = np.asarray(log.pose[:, 4:6], dtype=float)
    res = []
    for k in range(0, len(t), max(1, len(t) // 400)):  # about 400 windows
        sel = np.abs(t - t[k]) <= half_window
        if sel.sum() < 5:
            continue
        dt = t[sel] - t[k]
        A = np.stack([np.ones_like(dt), dt, dt * dt], axis=1)
        coef, *_ = np.linalg.lstsq(A, p[sel], rcond=None)
        r = p[sel][np.argmin(np.abs(dt))] - coef[0]
        res.append(float(r @ r))
    return float(np.sqrt(np.mean(res))) if res else math.nan


def resolution_note(log: CalibrationLog, intervals: int, rows: Sequence[tuple[str, float]]
                    ) -> list[str]:
    """The note (in a list; empty when it does not apply) saying which differences of mean
    position error the reference can resolve over ``intervals`` intervals: its jitter ``j``
    (:func:`reference_jitter`) adds about ``sqrt(pi) j`` (the mean norm of the difference of
    two 2D errors of ``j``) to each interval's error, with a spread of the same size, so two
    rows closer than about two standard errors ``2 sqrt(pi) j / sqrt(K)`` are not told apart.
    ``rows``: (label, mean position error) of the table; the note names the calibrated
    rows that are within it."""
    j = reference_jitter(log)
    K = max(int(intervals), 1)
    if not math.isfinite(j):
        return []
    floor = math.sqrt(math.pi) * j
    res = 2.0 * floor / math.sqrt(K)
    vals = {lab: v for lab, v in rows if math.isfinite(v)}
    best = min(vals.values()) if vals else math.nan
    close = [lab for lab, v in vals.items() if v - best < res]
    note = (f"reference jitter {j:.3g} m (rms about a local fit): it adds about {floor:.3g} m "
            f"to each interval's position error; over {K} intervals rows closer than "
            f"{res:.3g} m are not told apart")
    if len(close) > 1:
        note += (f" - {', '.join(close)} are within it: this reference cannot rank them "
                 "(longer --interval lets model errors grow past its noise)")
    return [note]


def steering_params(model: VehicleModel) -> list[str]:
    """The steering parameters a steered vehicle's 3D kin.+ calibrates beside the slip set:
    each steering joint's angle offset, and the gain and lag of each commanded one
    (:mod:`wmr_model.estimation.steering`); none for other vehicles."""
    from wmr_model.estimation.steering import steer_inputs

    out = []
    for j, si in steer_inputs(model).items():
        out.append(f"steer.{j}.offset")
        if si.source == "commanded":  # a servo: its gain and lag are the actuator's
            out += [f"steer.{j}.gain", f"steer.{j}.lag"]
    return out


def initial_std(names: Sequence[str]) -> dict[str, float]:
    """Initial standard deviation of each named parameter for an online calibration, by the
    name's family (``slip``, ``time_offset``, ...); 1.0 for families without a default."""
    def one(n: str) -> float:
        parts = n.split(".")
        return _STD0.get(n, _STD0.get(f"{parts[0]}.{parts[-1]}", _STD0.get(parts[0], 1.0)))

    return {n: one(n) for n in names}


def empty_split_warning(split: Mapping | None) -> list[str]:
    """The notes line (in a list, empty when it does not apply) saying that no informative
    trusted interval ended before the split, so the "calibrated" rows are the models at their
    starting values; ``split`` is the split record (``fraction``, ``t_split``,
    ``calibration_intervals``) of ``wmr calibrate`` or ``wmr replay``."""
    if not split or split.get("calibration_intervals", 1):
        return []
    return [f"WARNING: no informative interval with a trusted reference ends in the first "
            f"{split['fraction']:g} of the log (by {split['t_split']:.1f} s): the "
            "\"calibrated\" rows are the uncalibrated starting values; a later --split "
            "calibrates on data"]


def _online_and_converged(rows: list, label: str, predictor, names: Sequence[str],
                          log: CalibrationLog, intervals: np.ndarray, cal_iv: np.ndarray,
                          x0: dict, bound: dict, iterations: int,
                          test: np.ndarray | None = None, t_split: float = np.inf):
    """Run the online calibrator over ``cal_iv`` and append the model's "online" row (each
    evaluation interval predicted with the estimate of the updates finished by its start) and
    "converged" row (final estimate on every evaluation interval); with ``test`` intervals
    (those after ``t_split``), also its out-of-sample "online" and "calibrated" rows (estimate
    of the updates finished by ``t_split``). Returns (calibrator, records, evaluation of the
    last row, split details or None)."""
    cal = OnlineCalibrator(predictor, names, std0=initial_std(names), x0=x0, qprime_bound=bound,
                           iterations=iterations, bounds=physical_bounds(names))
    start = cal.estimate
    rec = cal.run(log, cal_iv)
    t_upd = log.pose_time[np.asarray(cal_iv, dtype=int).reshape(-1, 2)[:, 1]]
    pos, yaw = online_errors(predictor, log, intervals, t_upd, np.array([r.x for r in rec]),
                             cal.names, start)
    rows.append(TableRow(f"{label} online", float(pos.mean()), float(yaw.mean()),
                         cal.estimate, len(intervals)))
    ev = evaluate(predictor, log, intervals, cal.estimate)
    rows.append(TableRow(f"{label} converged", ev.mean_pos, ev.mean_yaw, cal.estimate,
                         len(intervals)))
    if test is not None:
        x_split = dict(start)
        n_before = int(np.searchsorted(t_upd, t_split, side="right"))
        if n_before:
            x_split = dict(zip(cal.names, rec[n_before - 1].x))
        done = np.searchsorted(t_upd, log.pose_time[test[:, 0]], side="right")
        assert len(test) == 0 or done.min() >= n_before
        pos_t: np.ndarray | float = np.nan  # no test interval: no error
        yaw_t: np.ndarray | float = np.nan
        if len(test):
            pos_t, yaw_t = online_errors(predictor, log, test, t_upd,
                                         np.array([r.x for r in rec]), cal.names, start)
        rows.append(TableRow(f"{label} online", float(np.mean(pos_t)), float(np.mean(yaw_t)),
                             cal.estimate, len(test), "out-of-sample"))
        et = evaluate(predictor, log, test, x_split) if len(test) else None
        rows.append(TableRow(f"{label} calibrated", et.mean_pos if et else np.nan,
                             et.mean_yaw if et else np.nan, x_split, len(test),
                             "out-of-sample"))
        split_info = {"estimate": x_split, "updates": n_before,
                      "std": (dict(zip(cal.names, rec[n_before - 1].std)) if n_before
                              else cal.std)}
    else:
        split_info = None
    return cal, rec, ev, split_info


def compare_models(model: VehicleModel, log: CalibrationLog, intervals: np.ndarray, *,
                   calibration_intervals: np.ndarray | None = None,
                   params: Sequence[str] = DEFAULT_3D_PARAMS,
                   noise: Sequence[str] = DEFAULT_NOISE, terrain: Terrain | None = None,
                   dt: float = 0.05, offline: bool = False,
                   noise0: Mapping[str, float] | None = None,
                   iterations: int = 1,
                   inputs: Sequence[str] = (),
                   split: float | None = None) -> tuple[list[TableRow], dict]:
    """Rows of the comparison over the evaluation ``intervals`` (K, 2) and the calibrators'
    details (estimates, std, rejections).

    ``calibration_intervals`` (default: ``intervals``) are the ones the online and offline
    calibrators learn from (normally the informative subset of ``intervals``); ``inputs`` are
    the measured inputs of the 3D rows (:attr:`ModelPredictor.inputs`). With ``split`` F in
    (0, 1), out-of-sample rows (``table="out-of-sample"``, first) score the intervals after the
    first F of the log (module docstring); the offline fit then uses the calibration part only.
    ``info["split"]`` gives the split stamp and interval counts.
    """
    terrain = flat() if terrain is None else terrain
    cal_iv = intervals if calibration_intervals is None else calibration_intervals
    parts = None if split is None else _split_parts(log, intervals, cal_iv, split)
    test = None if parts is None else parts.test
    t_split = np.inf if parts is None else parts.t_split
    n0 = {n: DEFAULT_NOISE0.get(n, 0.05) for n in noise}
    n0.update(noise0 or {})
    rows: list[TableRow] = []
    oos: list[TableRow] = []
    info: dict = {}
    dd = planar_predictor(model, dt=dt)
    lab = dd.label
    _nominal_rows(rows, oos, lab, dd, log, intervals, test)
    dd_names = [*dd.plus_names, "time_offset.pose", *noise]
    bound = {n: 2.0 * v for n, v in n0.items()}
    cal, rec, ev, sp = _online_and_converged(rows, f"{lab}+", dd, dd_names, log, intervals,
                                             cal_iv, n0, bound, iterations, test, t_split)
    info[f"{lab}+"] = {"estimate": cal.estimate, "std": cal.std,
                       "rejected": int(sum(not r.accepted for r in rec))}
    if sp:
        info[f"{lab}+"]["split"] = sp
    kin = ModelPredictor(model, terrain, fidelity="kinematic", dt=dt, inputs=tuple(inputs))
    _nominal_rows(rows, oos, "3D kin.", kin, log, intervals, test)
    enh = ModelPredictor(model, terrain, fidelity="enhanced", dt=dt, inputs=tuple(inputs))
    names = [*params, *noise]
    cal, rec, ev, sp = _online_and_converged(rows, "3D kin.+", enh, names, log, intervals,
                                             cal_iv, n0, bound, iterations, test, t_split)
    info["3D kin.+"] = _enhanced_info(cal, rec, ev, sp, params)
    if offline:
        fit_iv = cal_iv if parts is None else parts.cal_train
        x0 = cal.estimate if sp is None else sp["estimate"]
        info["3D kin.+ offline"] = _offline_rows(rows, oos, enh, log, intervals, test, fit_iv,
                                                 names, x0)
    # the out-of-sample rows of _online_and_converged went into ``rows``: move them
    oos += [r for r in rows if r.table == "out-of-sample"]
    rows = [r for r in rows if r.table != "out-of-sample"]
    if parts is not None:
        order = [lab, f"{lab}+ online", f"{lab}+ calibrated", "3D kin.",
                 "3D kin.+ online", "3D kin.+ calibrated", "3D kin.+ offline (3.44)"]
        oos.sort(key=lambda r: order.index(r.model))
        info["split"] = {"fraction": parts.fraction, "t_split": parts.t_split,
                         "calibration_intervals": len(parts.cal_train),
                         "evaluation_intervals": len(parts.test),
                         "in_sample_intervals": len(parts.train)}
    return oos + rows, info


class _Split(NamedTuple):
    """The out-of-sample split of :func:`compare_models`: fraction F of the log and its stamp
    [s], the evaluation intervals before (``train``) and after (``test``) it, (K, 2) each, and
    the calibration intervals before it (``cal_train``)."""

    fraction: float
    t_split: float
    train: np.ndarray
    test: np.ndarray
    cal_train: np.ndarray


def _split_parts(log: CalibrationLog, intervals: np.ndarray, cal_iv: np.ndarray,
                 split: float) -> _Split:
    """The intervals before/after the stamp of fraction ``split`` of the log; ParameterError
    when no evaluation interval starts after it. Without a calibration interval before it the
    "calibrated" rows are the models at their starting values (as in ``wmr replay``); the
    caller reports it (``info["split"]["calibration_intervals"]`` is 0)."""
    t_split = split_time(log.pose_time, split)
    train, test = split_intervals(log.pose_time, intervals, t_split)
    cal_train, _ = split_intervals(log.pose_time, cal_iv, t_split)
    if len(test) == 0:
        raise ParameterError(f"{log.source}: no evaluation interval starts after the split "
                             f"at {t_split:.1f} s (split {split:g}); nothing to evaluate "
                             "out of sample")
    return _Split(float(split), t_split, train, test, cal_train)


def _nominal_rows(rows: list[TableRow], oos: list[TableRow], label: str, predictor,
                  log: CalibrationLog, intervals: np.ndarray, test: np.ndarray | None) -> None:
    """The uncalibrated row of ``predictor`` (nominal values) in ``rows`` and, with ``test``
    intervals, its out-of-sample row in ``oos``."""
    ev = evaluate(predictor, log, intervals, {})
    rows.append(TableRow(label, ev.mean_pos, ev.mean_yaw, {}, len(intervals)))
    if test is not None:
        et = evaluate(predictor, log, test, {})
        oos.append(TableRow(label, et.mean_pos, et.mean_yaw, {}, len(test), "out-of-sample"))


def _enhanced_info(cal: OnlineCalibrator, rec: list, ev, sp: dict | None,
                   params: Sequence[str]) -> dict:
    """Details of the online 3D kin.+ calibration: estimate, std, rejections, convergence,
    NEES of the converged row, split estimate, identifiability and physical warnings."""
    info = {"estimate": cal.estimate, "std": cal.std,
            "rejected": int(sum(not r.accepted for r in rec)),
            "converged_after": cal.converged_after(),
            "mean_nees": ev.mean_nees,
            "median_nees": float(np.nanmedian(ev.nees))}
    if sp:
        info["split"] = sp
    idf = check_identifiability(cal.names, cal.P, initial_std(cal.names), cal.n_accepted)
    info["identifiability"] = {
        "checked": idf.checked, "accepted": int(cal.n_accepted),
        "confounded": dict(idf.confounded),
        "std_ratio": idf.std_ratio, "pairs": [list(p) for p in idf.pairs]}
    info["warnings"] = physical_warnings(cal.estimate, cal.std, params)
    return info


def _offline_rows(rows: list[TableRow], oos: list[TableRow], enh, log: CalibrationLog,
                  intervals: np.ndarray, test: np.ndarray | None, fit_iv: np.ndarray,
                  names: Sequence[str], x0: Mapping[str, float]) -> dict:
    """The offline (3.44) fit of ``enh`` over ``fit_iv`` from ``x0``: its in-sample row in
    ``rows`` (and out-of-sample row in ``oos`` with ``test``); returns its details."""
    if len(fit_iv):
        res = calibrate_offline(enh, log, fit_iv, names, x0=x0)
        values, std, inliers = res.values, res.std, int(res.inliers.sum())
    else:  # nothing to fit before the split: the starting values, as the online rows
        values, std, inliers = dict(x0), {n: math.nan for n in names}, 0
    ev = evaluate(enh, log, intervals, values)
    rows.append(TableRow("3D kin.+ offline (3.44)", ev.mean_pos, ev.mean_yaw, values,
                         len(intervals)))
    if test is not None:
        et = evaluate(enh, log, test, values)
        oos.append(TableRow("3D kin.+ offline (3.44)", et.mean_pos, et.mean_yaw,
                            values, len(test), "out-of-sample"))
    return {"estimate": values, "std": std, "inliers": inliers}
