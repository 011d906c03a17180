"""Systematic IPEM variables of one interval: measurement, prediction, covariance, Jacobian
(thesis (3.7)-(3.27)).

For parameters ``p`` (named), the measured final pose ``x_meas(t)`` is compared with the
prediction ``g(x_meas(t0), u(*), p)`` (3.26). :func:`systematic_terms` returns

* the residual ``r = x_meas(t) - g(p)`` (3.3), selected components (the innovation (3.50),
  since the expected residual is 0 (3.8));
* ``H = dg/dp`` by forward differences (3.27), all ``1 + n`` parameter sets in **one batched
  prediction** (:mod:`wmr_model.calibration.predictors`);
* ``R_mu = Sigma_meas(t) + P(t)`` (3.21) for a given ``Q'``, plus the covariance map needed to
  differentiate it with respect to ``Q'`` (stochastic calibration).

Sign: the thesis writes ``H_mu = dh_mu/dp = -dg/dp`` (3.27) for the "prediction" ``h_mu = 0``
of the measurement ``z_mu = r``. An EKF step ``K (z - h)`` with that pair would move ``p`` in
the direction that *increases* the residual; the consistent pair is measurement
``x_meas(t)``, prediction ``g(p)``, Jacobian ``+dg/dp``, which has the same innovation
``y = r``. That is what this module returns.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from wmr_model.calibration.logs import CalibrationLog
from wmr_model.calibration.predictors import IntervalPrediction, default_step
from wmr_model.calibration.residuals import pose_residual, residual_covariance

__all__ = ["SystematicTerms", "perturbation_rows", "systematic_terms"]


@dataclass(frozen=True)
class SystematicTerms:
    """Systematic variables of one interval.

    Attributes:
        r: (m,) residual (3.3), selected components.
        H: (m, n) ``dg/dp`` by forward differences (3.27).
        R: (m, m) ``Sigma_meas(t) + P(t)`` (3.21) at the given ``Q'``.
        prediction: the batched :class:`IntervalPrediction` (candidate 0 nominal).
        Sigma0, Sigma1: (6, 6) measurement covariances at both ends.
    """

    r: np.ndarray
    H: np.ndarray
    R: np.ndarray
    prediction: IntervalPrediction
    Sigma0: np.ndarray
    Sigma1: np.ndarray


def perturbation_rows(x: np.ndarray, steps: np.ndarray) -> np.ndarray:
    """Candidate rows (1 + n, n): ``x`` then ``x + steps_i e_i`` (the deltas of (3.27))."""
    x = np.asarray(x, dtype=float)
    return np.vstack([x[None], x[None] + np.diag(steps)])


def systematic_terms(predictor, log: CalibrationLog, i0: int, i1: int, names: Sequence[str],
                     x: np.ndarray, Qprime: np.ndarray, idx: np.ndarray,
                     steps: np.ndarray | None = None, *,
                     jacobian: bool = True) -> SystematicTerms:
    """Residual, FD Jacobian and residual covariance of interval ``(i0, i1)`` at ``x`` (n,).

    ``predictor`` is a :class:`~wmr_model.calibration.predictors.ModelPredictor` or
    :class:`~wmr_model.calibration.predictors.DiffDrivePredictor`; ``names`` the systematic
    parameters (n,), ``Qprime`` (6, 6), ``idx`` residual component indices (m,).
    """
    x = np.asarray(x, dtype=float)
    n = len(names)
    if steps is None:
        steps = np.array([default_step(nm) for nm in names])
    rows = perturbation_rows(x, steps) if (jacobian and n) else x[None]
    pred = predictor.simulate(log, i0, i1, names, rows)
    meas = log.pose[i1]
    res = pose_residual(meas[None], pred.pose, idx)  # (1 + n, m)
    r = res[0]
    H = np.zeros((len(idx), n))
    if jacobian and n:
        # dg/dp = -(dr/dp): r_i = meas - g(p + delta_i)
        H = ((res[0][None] - res[1:]) / steps[:, None]).T
    S0, S1 = log.pose_covariance[i0], log.pose_covariance[i1]
    R = residual_covariance(pred.cmap, S0, S1, Qprime, idx)
    return SystematicTerms(r=r, H=H, R=R, prediction=pred, Sigma0=S0, Sigma1=S1)
