"""Offline (batch) IPEM: minimize (3.44) for systematic and (3.46) for stochastic parameters.

* Systematic: ``p* = argmin sum_k r_k^T R_k^-1 r_k`` (3.44) with
  :func:`scipy.optimize.least_squares` on the whitened residuals ``L_k^-1 r_k``
  (``R_k = L_k L_k^T``, held at the starting parameters within one fit). The Jacobian is the
  batched forward difference of :func:`~wmr_model.calibration.systematic.systematic_terms`:
  each interval costs one prediction of ``1 + n`` parameter sets for residual and Jacobian
  together. The loss is robust (``loss="soft_l1"`` on the whitened residual components with
  scale :data:`ROBUST_SCALE` = 3 sigma: quadratic for clean residuals, linear for reference
  faults, so one ICP jump cannot drag the fit before the gate sees it); ``loss="linear"`` is
  plain (3.44). Intervals whose Mahalanobis distance exceeds the gate after a fit are dropped
  and the fit repeated (3.68).
* Stochastic: ``s* = argmin sum_k [log det R_k(s) + r_k^T R_k(s)^-1 r_k]`` (3.46)-(3.47) over
  the named Cholesky entries of Q', with the residuals and covariance maps of the systematic
  fit (:func:`scipy.optimize.minimize`, L-BFGS-B, bounds from the schema).
* :func:`calibrate_offline` alternates the two (``rounds`` times).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import least_squares, minimize
from scipy.stats import chi2

from wmr_model.calibration.logs import CalibrationLog
from wmr_model.calibration.online import DEFAULT_OUTLIER_PROBABILITY, MIN_CHOLESKY_DIAGONAL
from wmr_model.calibration.residuals import component_indices
from wmr_model.calibration.stochastic import cholesky_factor, cholesky_index
from wmr_model.calibration.systematic import systematic_terms
from wmr_model.parameters import get_spec

__all__ = ["OfflineResult", "fit_systematic", "fit_stochastic", "calibrate_offline",
           "ROBUST_LOSS", "ROBUST_SCALE"]

#: Robust loss of the offline systematic fit (:func:`scipy.optimize.least_squares` ``loss``)
#: and its scale on whitened residual components (sigma units).
ROBUST_LOSS = "soft_l1"
ROBUST_SCALE = 3.0


@dataclass(frozen=True)
class OfflineResult:
    """Result of an offline fit.

    Attributes:
        values: estimated values by name (systematic and ``noise.U.*``).
        std: standard deviations by name (systematic: from the Gauss-Newton covariance
            ``(J^T J)^-1`` of the whitened problem; stochastic: from the inverse Hessian).
        covariance: (n, n) of the systematic names in ``names`` order.
        names: systematic names; inliers: (K,) bool mask of the intervals used.
        cost: final value of (3.44) over the inliers.
    """

    values: dict[str, float]
    std: dict[str, float]
    covariance: np.ndarray
    names: list[str]
    inliers: np.ndarray
    cost: float


def _bounds(names: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Schema bounds narrowed to the physical ranges of :func:`physical_bounds`."""
    from wmr_model.calibration.bounds import physical_bounds

    phys = physical_bounds(names)
    lo = np.array([max(get_spec(n).lower, phys.get(n, (-np.inf,))[0]) for n in names])
    hi = np.array([min(get_spec(n).upper, phys.get(n, (0, np.inf))[1]) for n in names])
    return lo, hi


def fit_systematic(predictor, log: CalibrationLog, intervals: np.ndarray, names: Sequence[str],
                   x0: Mapping[str, float] | None = None, Qprime: np.ndarray | None = None,
                   components: Sequence[str] = ("x", "y", "yaw"),
                   outlier_probability: float = DEFAULT_OUTLIER_PROBABILITY,
                   gate_rounds: int = 2, max_nfev: int = 30,
                   loss: str = ROBUST_LOSS, f_scale: float = ROBUST_SCALE) -> OfflineResult:
    """Minimize (3.44) over the systematic ``names`` (see the module docstring)."""
    names = list(names)
    predictor.check_names(names)
    idx = component_indices(components)
    Q = np.zeros((6, 6)) if Qprime is None else np.asarray(Qprime, dtype=float)
    x0m = dict(x0 or {})
    x = np.array([float(x0m[n]) if n in x0m else predictor.nominal(n) for n in names])
    iv = np.asarray(intervals, dtype=int)
    inl = np.ones(len(iv), dtype=bool)
    lo, hi = _bounds(names)
    x = np.clip(x, lo, hi)
    gate = float(chi2.ppf(outlier_probability, len(idx)))
    m = len(idx)
    for _ in range(max(1, gate_rounds)):
        sel = iv[inl]
        Linv = []
        for i0, i1 in sel:  # weights held at the starting point of this fit
            t = systematic_terms(predictor, log, int(i0), int(i1), names, x, Q, idx,
                                 jacobian=False)
            Linv.append(np.linalg.inv(np.linalg.cholesky(t.R)))
        cache: dict[bytes, tuple[np.ndarray, np.ndarray]] = {}

        def terms(xx: np.ndarray, cache=cache, sel=sel,
                  Linv=Linv) -> tuple[np.ndarray, np.ndarray]:
            key = xx.tobytes()
            if key not in cache:
                cache.clear()
                f = np.empty(len(sel) * m)
                J = np.empty((len(sel) * m, len(names)))
                for k, (i0, i1) in enumerate(sel):
                    t = systematic_terms(predictor, log, int(i0), int(i1), names, xx, Q, idx)
                    f[k * m:(k + 1) * m] = Linv[k] @ t.r
                    J[k * m:(k + 1) * m] = -Linv[k] @ t.H  # dr/dp = -dg/dp
                cache[key] = (f, J)
            return cache[key]

        sol = least_squares(lambda xx: terms(xx)[0], x, jac=lambda xx: terms(xx)[1],
                            bounds=(lo, hi), x_scale="jac", max_nfev=max_nfev, loss=loss,
                            f_scale=f_scale)
        x = sol.x
        D = np.empty(len(iv))
        for k, (i0, i1) in enumerate(iv):
            t = systematic_terms(predictor, log, int(i0), int(i1), names, x, Q, idx,
                                 jacobian=False)
            D[k] = float(t.r @ np.linalg.solve(t.R, t.r))
        new = D <= gate
        if np.array_equal(new, inl):
            break
        inl = new
    J = sol.jac
    try:
        cov = np.linalg.inv(J.T @ J)
    except np.linalg.LinAlgError:
        cov = np.full((len(names), len(names)), np.nan)
    std = {n: float(math.sqrt(max(cov[k, k], 0.0))) for k, n in enumerate(names)}
    return OfflineResult(values={n: float(v) for n, v in zip(names, x)}, std=std,
                         covariance=cov, names=names, inliers=inl, cost=float(2 * sol.cost))


def fit_stochastic(predictor, log: CalibrationLog, intervals: np.ndarray,
                   noise_names: Sequence[str], systematic: Mapping[str, float],
                   s0: Mapping[str, float] | None = None,
                   fixed_noise: Mapping[str, float] | None = None,
                   components: Sequence[str] = ("x", "y", "yaw"), *,
                   return_std: bool = False):
    """Minimize the negative log likelihood (3.46)-(3.47) over named Cholesky entries of Q'.

    Returns the estimated ``noise.U.*`` values; with ``return_std`` also their standard
    deviations from the inverse Fisher information (half the Hessian of (3.46) at the optimum,
    by central differences; NaN when that Hessian is singular).
    """
    noise_names = list(noise_names)
    idx = component_indices(components)
    names = list(systematic)
    x = np.array([systematic[n] for n in names])
    rs, cms, S0, S1 = [], [], [], []
    for i0, i1 in np.asarray(intervals, dtype=int):
        t = systematic_terms(predictor, log, int(i0), int(i1), names, x, np.zeros((6, 6)), idx,
                             jacobian=False)
        rs.append(t.r)
        cms.append(t.prediction.cmap)
        S0.append(t.Sigma0)
        S1.append(t.Sigma1)
    base = {}
    for k, cm in enumerate(cms):  # measurement part of R_k does not depend on Q'
        base[k] = (S1[k] + cm.predicted(S0[k], np.zeros((6, 6))))[np.ix_(idx, idx)]
    fixed = dict(fixed_noise or {})
    s0m = dict(s0 or {})
    s = np.array([float(s0m.get(n, fixed.get(n, 0.05))) for n in noise_names])
    # Process-noise part sum_k A_k Q A_k^T is linear in Q: precompute its 21 basis responses.
    basis = []
    for a in range(6):
        for b in range(6):
            E = np.zeros((6, 6))
            E[a, b] = 1.0
            basis.append(E)
    resp = [np.stack([(cm.J1 @ cm.process(E) @ cm.J1.T)[np.ix_(idx, idx)] for E in basis])
            for cm in cms]

    def nll(ss: np.ndarray) -> float:
        vals = dict(fixed)
        vals.update(dict(zip(noise_names, ss)))
        U = cholesky_factor(vals)
        Q = (U.T @ U).reshape(-1)
        tot = 0.0
        for k, r in enumerate(rs):
            R = base[k] + np.tensordot(Q, resp[k], axes=1)
            sign, logdet = np.linalg.slogdet(R)
            if sign <= 0:
                return 1e30
            tot += logdet + float(r @ np.linalg.solve(R, r))
        return tot

    lo, hi = _bounds(noise_names)
    for k, n in enumerate(noise_names):
        i, j = cholesky_index(n)
        if i == j:
            lo[k] = max(lo[k], MIN_CHOLESKY_DIAGONAL)
    bnds = [(None if not math.isfinite(a) else a, None if not math.isfinite(b) else b)
            for a, b in zip(lo, hi)]
    sol = minimize(nll, np.clip(s, lo, hi), method="L-BFGS-B", bounds=bnds)
    values = {n: float(v) for n, v in zip(noise_names, sol.x)}
    if not return_std:
        return values
    cov = _nll_covariance(nll, sol.x, lo)
    return values, {n: float(math.sqrt(cov[k, k])) if cov[k, k] >= 0 else math.nan
                    for k, n in enumerate(noise_names)}


def _nll_covariance(nll, s: np.ndarray, lower: np.ndarray) -> np.ndarray:
    """Covariance (n, n) of the (3.46) estimate: ``nll`` is -2 log likelihood (+ const), so the
    Fisher information is half its Hessian; central differences, steps kept above ``lower``
    (an entry pinned at its bound gets the one-sided curvature of its free side)."""
    n = len(s)
    h = 1e-3 * np.maximum(np.abs(s), 1e-2)
    base = s.copy()
    for k in range(n):  # keep s - h feasible (log det of R needs R > 0)
        base[k] = max(base[k], lower[k] + h[k]) if math.isfinite(lower[k]) else base[k]
    f0 = nll(base)
    Hm = np.empty((n, n))
    for i in range(n):
        for j in range(i, n):
            ei, ej = np.eye(n)[i] * h[i], np.eye(n)[j] * h[j]
            if i == j:
                v = (nll(base + ei) - 2 * f0 + nll(base - ei)) / (h[i] * h[i])
            else:
                v = (nll(base + ei + ej) - nll(base + ei - ej) - nll(base - ei + ej)
                     + nll(base - ei - ej)) / (4 * h[i] * h[j])
            Hm[i, j] = Hm[j, i] = v
    try:
        return 2.0 * np.linalg.inv(Hm)
    except np.linalg.LinAlgError:
        return np.full((n, n), np.nan)


def calibrate_offline(predictor, log: CalibrationLog, intervals: np.ndarray,
                      names: Sequence[str], x0: Mapping[str, float] | None = None,
                      fixed_noise: Mapping[str, float] | None = None,
                      components: Sequence[str] = ("x", "y", "yaw"), rounds: int = 2,
                      **kw) -> OfflineResult:
    """Alternate (3.44) and (3.46) over ``names`` (systematic and ``noise.U.*``)."""
    names = list(names)
    sys_names = [n for n in names if not n.startswith("noise.")]
    noise_names = [n for n in names if n.startswith("noise.")]
    x0m = dict(x0 or {})
    noise = dict(fixed_noise or {})
    noise.update({n: float(x0m.get(n, noise.get(n, 0.05))) for n in noise_names})
    sysx = {n: x0m[n] for n in sys_names if n in x0m}
    res = None
    noise_std: dict[str, float] = {}
    for _ in range(max(1, rounds)):
        U = cholesky_factor(noise)
        res = fit_systematic(predictor, log, intervals, sys_names, sysx, U.T @ U,
                             components=components, **kw)
        sysx = dict(res.values)
        if not noise_names:
            break
        est, noise_std = fit_stochastic(
            predictor, log, np.asarray(intervals)[res.inliers], noise_names, sysx,
            s0={n: noise[n] for n in noise_names}, fixed_noise=noise, components=components,
            return_std=True)
        noise.update(est)
    assert res is not None
    values = dict(res.values)
    values.update({n: noise[n] for n in noise_names})
    std = dict(res.std)
    std.update(noise_std)
    return OfflineResult(values=values, std=std, covariance=res.covariance, names=res.names,
                         inliers=res.inliers, cost=res.cost)
