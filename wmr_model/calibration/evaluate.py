"""Prediction errors and consistency over intervals (thesis Table 3.3, Fig. 3.8).

:func:`evaluate` predicts every interval with fixed parameter values and reports the Table 3.3
metrics (Euclidean horizontal position error and absolute yaw error of the final predicted pose)
and the normalized estimation error squared ``NEES = r^T R_mu^-1 r`` of each residual. With a
well calibrated stochastic model the average NEES of K independent m-component residuals lies
within the two-sided chi-square interval of :func:`nees_bounds`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import chi2

from wmr_model.calibration.logs import CalibrationLog
from wmr_model.calibration.residuals import component_indices, yaw_of
from wmr_model.calibration.stochastic import qprime_of
from wmr_model.calibration.systematic import systematic_terms

__all__ = ["Evaluation", "evaluate", "nees_bounds", "errors_from_records", "online_errors"]


@dataclass(frozen=True)
class Evaluation:
    """Per-interval results of :func:`evaluate`.

    Attributes:
        intervals: (K, 2); pos_error: (K,) horizontal position error [m];
        yaw_error: (K,) |yaw error| [rad]; r: (K, m) residuals; R: (K, m, m) their
        covariances (3.21); nees: (K,).
    """

    intervals: np.ndarray
    pos_error: np.ndarray
    yaw_error: np.ndarray
    r: np.ndarray
    R: np.ndarray
    nees: np.ndarray

    @property
    def mean_pos(self) -> float:
        """Mean horizontal position error [m]."""
        return float(np.mean(self.pos_error))

    @property
    def mean_yaw(self) -> float:
        """Mean absolute yaw error [rad]."""
        return float(np.mean(self.yaw_error))

    @property
    def mean_nees(self) -> float:
        """Average NEES."""
        return float(np.mean(self.nees))


def nees_bounds(K: int, m: int, probability: float = 0.95) -> tuple[float, float]:
    """Two-sided bounds of the average NEES of K independent m-dof residuals."""
    a = (1.0 - probability) / 2.0
    return float(chi2.ppf(a, K * m) / K), float(chi2.ppf(1.0 - a, K * m) / K)


def _yaw_error(meas: np.ndarray, pred: np.ndarray) -> float:
    d = float(yaw_of(meas[:4]) - yaw_of(pred[:4]))
    return abs(np.arctan2(np.sin(d), np.cos(d)))


def evaluate(predictor, log: CalibrationLog, intervals: np.ndarray,
             values: Mapping[str, float] | None = None,
             components: Sequence[str] = ("x", "y", "yaw"),
             Qprime: np.ndarray | None = None) -> Evaluation:
    """Predict each interval with ``values`` (systematic names; ``noise.U.*`` give Q' unless
    ``Qprime`` is given) and collect errors and NEES."""
    values = dict(values or {})
    noise = {k: v for k, v in values.items() if k.startswith("noise.")}
    sysv = {k: v for k, v in values.items() if not k.startswith("noise.")}
    Q = qprime_of(noise) if Qprime is None else np.asarray(Qprime, dtype=float)
    idx = component_indices(components)
    names = list(sysv)
    x = np.array([sysv[n] for n in names])
    K = len(intervals)
    pos = np.empty(K)
    yaw = np.empty(K)
    rr = np.empty((K, len(idx)))
    RR = np.empty((K, len(idx), len(idx)))
    nees = np.empty(K)
    for k, (i0, i1) in enumerate(np.asarray(intervals)):
        t = systematic_terms(predictor, log, int(i0), int(i1), names, x, Q, idx, jacobian=False)
        pred = t.prediction.pose[0]
        meas = log.pose[i1]
        pos[k] = float(np.linalg.norm(meas[4:6] - pred[4:6]))
        # a position-only reference has no heading of its own to score (its orientation rows
        # are derived from the gyro / wheels): no yaw error
        yaw[k] = _yaw_error(meas, pred) if log.heading_measured else np.nan
        rr[k], RR[k] = t.r, t.R
        nees[k] = float(t.r @ np.linalg.solve(t.R, t.r)) if np.all(np.diag(t.R) > 0) else np.nan
    return Evaluation(intervals=np.asarray(intervals), pos_error=pos, yaw_error=yaw, r=rr, R=RR,
                      nees=nees)


def errors_from_records(log: CalibrationLog, records, components: Sequence[str] = ("x", "y",
                                                                                   "yaw")):
    """(pos_error (K,), yaw_error (K,)) of online records (predictions before each update)."""
    idx = list(component_indices(components))
    pos, yaw = [], []
    for rec in records:
        r = rec.r
        full = np.zeros(6)
        full[idx] = r
        pos.append(float(np.hypot(full[3], full[4])))
        yaw.append(abs(float(full[2])))
    return np.array(pos), np.array(yaw)


def online_errors(predictor, log: CalibrationLog, intervals: np.ndarray,
                  update_times: np.ndarray, estimates: np.ndarray, names: Sequence[str],
                  start: Mapping[str, float]) -> tuple[np.ndarray, np.ndarray]:
    """Table 3.3 "online" errors: each interval (K, 2) predicted with the estimate of the updates
    finished by its start.

    ``update_times`` (U,) end stamps of the online updates, increasing; ``estimates`` (U, n)
    the estimate after each (values of ``names``); ``start``: values before any update.
    Returns (pos_error (K,), yaw_error (K,)). The calibration and evaluation intervals may
    differ (e.g. calibrate on moving intervals only, evaluate on all).
    """
    iv = np.asarray(intervals, dtype=int).reshape(-1, 2)
    pe, ye = np.empty(len(iv)), np.empty(len(iv))
    if not len(iv):
        return pe, ye
    done = np.searchsorted(np.asarray(update_times, dtype=float), log.pose_time[iv[:, 0]],
                           side="right")
    for u in np.unique(done):
        sel = done == u
        vals = dict(start) if u == 0 else dict(zip(names, np.asarray(estimates)[u - 1]))
        ev = evaluate(predictor, log, iv[sel], vals)
        pe[sel], ye[sel] = ev.pos_error, ev.yaw_error
    return pe, ye
