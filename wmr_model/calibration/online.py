"""Online IPEM: the identification EKF (thesis (3.48)-(3.54)) with outlier rejection (3.68),
parameter bounds and a bounded Q' while the systematic part converges (end of §3.2.4).

The state ``xi`` holds named parameters: systematic ones (``slip.p*``, ``wheel.<w>.radius``,
``vehicle.track_scale``, ``sensor.<s>.x/y/z``, ``time_offset.<stream>``, ``diff_drive.alpha``)
and stochastic ones (``noise.U.<a>_<b>``, the Cholesky factor of Q'). Per interval:

1. process update (3.48)-(3.49): ``xi`` unchanged, ``P_xi += Q_xi``;
2. one batched prediction of the nominal and perturbed parameter sets gives ``r``, ``H_mu``,
   ``R_mu`` (:func:`~wmr_model.calibration.systematic.systematic_terms`);
3. Mahalanobis distance ``D_M = y^T S^-1 y`` (3.68) of the systematic innovation; above the
   threshold the interval is rejected and nothing changes;
4. joint measurement update (3.50)-(3.54) of ``[r; vec(r r^T)]`` against ``[g; vec(E[r r^T])]``
   with block-diagonal ``R = diag(R_mu, R_sigma)``; ``E[r r^T]`` is ``R_mu`` (3.31) (or, with
   ``expected_scatter="S"``, the innovation covariance ``R_mu + H_mu P_pp H_mu^T``);
5. clip to bounds (schema bounds, user bounds, and the temporary Q' bound during the first
   ``qprime_bound_intervals`` updates).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
from scipy.stats import chi2

from wmr_model.calibration.logs import CalibrationLog
from wmr_model.calibration.residuals import component_indices
from wmr_model.calibration.stochastic import (
    cholesky_factor,
    cholesky_index,
    stochastic_covariance,
    stochastic_jacobian,
    stochastic_measurement,
    vec,
)
from wmr_model.calibration.systematic import systematic_terms
from wmr_model.errors import ParameterError
from wmr_model.parameters import get_spec

if TYPE_CHECKING:  # annotation only: the runtime import graph stays as it was
    from wmr_model.calibration.predictors import IntervalPredictor

__all__ = ["UpdateRecord", "OnlineCalibrator", "DEFAULT_OUTLIER_PROBABILITY",
           "MIN_CHOLESKY_DIAGONAL"]

#: Default outlier gate: reject when D_M exceeds the chi-square quantile of this probability
#: with m degrees of freedom (m = residual components). The thesis used D_M > 90 for 6 dof.
DEFAULT_OUTLIER_PROBABILITY = 0.9999

#: Smallest factor a Cholesky diagonal entry of Q' may shrink by in one update.
MAX_NOISE_SHRINK = 0.5

#: Floor of the diagonal of U [unit/s^0.5]: dQ'/dU_ii = 2 U_ii vanishes at 0, where the filter
#: could never move the entry again.
MIN_CHOLESKY_DIAGONAL = 1e-4


@dataclass(frozen=True)
class UpdateRecord:
    """What one interval did.

    Attributes:
        interval: (i0, i1) ground-truth indices.
        r: (m,) residual with the parameters *before* the update (online prediction error).
        R: (m, m) residual covariance (3.21) before the update.
        mahalanobis: D_M (3.68).
        accepted: False when rejected as an outlier.
        x: (n,) estimate after the update; std: (n,) its standard deviations.
    """

    interval: tuple[int, int]
    r: np.ndarray
    R: np.ndarray
    mahalanobis: float
    accepted: bool
    x: np.ndarray
    std: np.ndarray


@dataclass
class OnlineCalibrator:
    """Identification EKF over named parameters (module docstring).

    Args:
        predictor: a :mod:`~wmr_model.calibration.predictors` predictor.
        names: parameters to estimate (systematic and/or ``noise.U.*``).
        x0: starting values (default: the predictor's nominal values / schema defaults).
        std0: initial standard deviations by name (the prior ``P_xi``; default 1 per unit).
        process_std: per-interval random-walk standard deviation by name (``Q`` of (3.49)).
        fixed_noise: Cholesky entries of Q' that are not estimated (``noise.U.*`` -> value).
        components: residual components (``("x", "y", "yaw")``; see
            :data:`~wmr_model.calibration.residuals.COMPONENTS`).
        outlier_threshold: D_M gate (default the chi-square quantile of
            :data:`DEFAULT_OUTLIER_PROBABILITY`; ``inf`` disables rejection).
        bounds: ``name -> (lower, upper)`` overriding the schema bounds.
        qprime_bound: ``noise.U.* -> upper bound of |entry|`` applied during the first
            ``qprime_bound_intervals`` accepted updates (bounded Q', end of §3.2.4).
        stochastic: also run the stochastic update of the ``noise.U.*`` entries.
        iterations: Gauss-Newton iterations of the systematic update (1: EKF; more: iterated
            EKF, which re-linearizes at the updated estimate - one more batched prediction per
            iteration; helps strongly nonlinear parameters such as a time offset).
        expected_scatter: ``"R"`` - ``h_sigma = vec(R_mu)`` as (3.31); ``"S"`` - use the
            innovation covariance ``R_mu + H P H^T`` instead (parameter uncertainty included).
        max_history: keep at most this many :class:`UpdateRecord` in ``history`` (the oldest
            are dropped; None keeps all). Long-running nodes set it (memory); the counters
            ``n_updates`` / ``n_rejected`` count every update regardless, and
            :meth:`converged_after` sees only the kept records.
    """

    predictor: IntervalPredictor
    names: Sequence[str]
    x0: Mapping[str, float] | None = None
    std0: Mapping[str, float] | None = None
    process_std: Mapping[str, float] | None = None
    fixed_noise: Mapping[str, float] = field(default_factory=dict)
    components: Sequence[str] = ("x", "y", "yaw")
    outlier_threshold: float | None = None
    bounds: Mapping[str, tuple[float, float]] | None = None
    qprime_bound: Mapping[str, float] | None = None
    qprime_bound_intervals: int = 20
    stochastic: bool = True
    expected_scatter: str = "R"
    iterations: int = 1
    max_history: int | None = None

    def __post_init__(self) -> None:
        if self.max_history is not None and int(self.max_history) < 1:
            raise ParameterError(f"max_history: must be >= 1 or None, got {self.max_history}")
        self.names = list(self.names)
        if len(set(self.names)) != len(self.names):
            raise ParameterError(f"calibrated names: duplicates in {self.names}")
        self.predictor.check_names(self.names)
        self.sys_names = [n for n in self.names if not n.startswith("noise.")]
        self.noise_names = [n for n in self.names if n.startswith("noise.")]
        for n in self.noise_names:
            cholesky_index(n)
        self.idx = component_indices(self.components)
        m = len(self.idx)
        if self.outlier_threshold is None:
            self.outlier_threshold = float(chi2.ppf(DEFAULT_OUTLIER_PROBABILITY, m))
        x0 = dict(self.x0 or {})
        self.x = np.array([float(x0[n]) if n in x0 else self._nominal(n) for n in self.names])
        std0 = dict(self.std0 or {})
        self.P = np.diag([float(std0.get(n, 1.0)) ** 2 for n in self.names])
        ps = dict(self.process_std or {})
        self.Qxi = np.diag([float(ps.get(n, 0.0)) ** 2 for n in self.names])
        b = dict(self.bounds or {})
        self.lower = np.array([b[n][0] if n in b else get_spec(n).lower for n in self.names])
        self.upper = np.array([b[n][1] if n in b else get_spec(n).upper for n in self.names])
        for k, n in enumerate(self.names):
            if n in self.noise_names and cholesky_index(n)[0] == cholesky_index(n)[1]:
                self.lower[k] = max(self.lower[k], MIN_CHOLESKY_DIAGONAL)
        self._diag_pos = [k for k, n in enumerate(self.names) if n in self.noise_names
                          and cholesky_index(n)[0] == cholesky_index(n)[1]]
        self.n_accepted = 0
        self.n_updates = 0  # intervals through update(), accepted or not
        self.n_rejected = 0  # of those, rejected by the gate (3.68)
        self.history: list[UpdateRecord] = []
        self._clip()

    def _nominal(self, name: str) -> float:
        if name.startswith("noise."):
            return float(self.fixed_noise.get(name, 0.0))
        return float(self.predictor.nominal(name))

    # ---- current estimate ------------------------------------------------------------------
    @property
    def estimate(self) -> dict[str, float]:
        """Current values by name."""
        return {n: float(v) for n, v in zip(self.names, self.x)}

    @property
    def std(self) -> dict[str, float]:
        """Current standard deviations by name."""
        return {n: float(math.sqrt(max(self.P[k, k], 0.0))) for k, n in enumerate(self.names)}

    def cholesky(self) -> np.ndarray:
        """U (6, 6) of the current Q' (estimated entries over ``fixed_noise``)."""
        vals = dict(self.fixed_noise)
        vals.update({n: v for n, v in self.estimate.items() if n in self.noise_names})
        return cholesky_factor(vals)

    def qprime(self) -> np.ndarray:
        """Current ``Q' = U^T U`` (6, 6)."""
        U = self.cholesky()
        return U.T @ U

    def _clip(self) -> None:
        lo, hi = self.lower.copy(), self.upper.copy()
        if self.qprime_bound and self.n_accepted < self.qprime_bound_intervals:
            for k, n in enumerate(self.names):
                if n in self.qprime_bound:
                    hi[k] = min(hi[k], float(self.qprime_bound[n]))
                    lo[k] = max(lo[k], -float(self.qprime_bound[n]))
        self.x = np.clip(self.x, lo, hi)

    # ---- one interval ----------------------------------------------------------------------
    def update(self, log: CalibrationLog, i0: int, i1: int) -> UpdateRecord:
        """Process and measurement update with interval ``(i0, i1)`` of ``log``."""
        self.P = self.P + self.Qxi  # (3.49)
        sys_pos = [self.names.index(n) for n in self.sys_names]
        noi_pos = [self.names.index(n) for n in self.noise_names]
        U = self.cholesky()
        Q = U.T @ U
        m = len(self.idx)
        x_prior = self.x.copy()
        x_lin = self.x.copy()
        t = systematic_terms(self.predictor, log, i0, i1, self.sys_names, x_lin[sys_pos], Q,
                             self.idx)
        r_prior, R_prior = t.r, t.R
        H = np.zeros((m, len(self.names)))
        H[:, sys_pos] = t.H
        S_mu = H @ self.P @ H.T + t.R  # (3.51), systematic block
        D = float(t.r @ np.linalg.solve(S_mu, t.r))  # (3.68)
        gate = self.outlier_threshold
        if gate is None:  # __post_init__ sets the default; None only if reassigned since
            raise ParameterError("outlier_threshold: None after construction; set a number "
                                 "(inf disables rejection)")
        accepted = bool(D <= gate)
        y_mu = t.r
        for _ in range(self.iterations - 1 if accepted else 0):
            # iterated EKF: re-linearize the systematic measurement at the updated estimate
            K = np.linalg.solve(S_mu, H @ self.P).T
            x_lin = x_prior + K @ y_mu
            x_lin = np.clip(x_lin, self.lower, self.upper)
            t = systematic_terms(self.predictor, log, i0, i1, self.sys_names, x_lin[sys_pos],
                                 Q, self.idx)
            H = np.zeros((m, len(self.names)))
            H[:, sys_pos] = t.H
            y_mu = t.r + H @ (x_lin - x_prior)
            S_mu = H @ self.P @ H.T + t.R
        if accepted:
            ys, Hs, Rs = [y_mu], [H], [t.R]
            self.x = x_prior
            if self.stochastic and noi_pos:
                z_s = stochastic_measurement(t.r)
                h_s = vec(t.R if self.expected_scatter == "R" else S_mu)
                Hsig = np.zeros((len(z_s), len(self.names)))
                Hsig[:, noi_pos] = stochastic_jacobian(t.prediction.cmap, U, self.noise_names,
                                                       self.idx)
                ys.append(z_s - h_s)
                Hs.append(Hsig)
                Rs.append(stochastic_covariance(S_mu))
            y = np.concatenate(ys)
            Hf = np.vstack(Hs)
            Rf = np.zeros((len(y), len(y)))
            o = 0
            for Rb in Rs:
                k = Rb.shape[0]
                Rf[o:o + k, o:o + k] = Rb
                o += k
            S = Hf @ self.P @ Hf.T + Rf  # (3.51)
            K = np.linalg.solve(S, Hf @ self.P).T  # (3.52), S symmetric
            old = self.x.copy()
            self.x = self.x + K @ y  # (3.53)
            # Q' step limit: the linearized update of a Cholesky diagonal entry may overshoot
            # past zero (z_sigma - h_sigma << 0 when Q' starts large), where dQ'/dU vanishes
            # and the entry could never recover; allow at most halving per interval.
            for k in self._diag_pos:
                self.x[k] = max(self.x[k], MAX_NOISE_SHRINK * old[k])
            IKH = np.eye(len(self.x)) - K @ Hf
            self.P = IKH @ self.P @ IKH.T + K @ Rf @ K.T  # (3.54), Joseph form
            self.P = 0.5 * (self.P + self.P.T)
            self.n_accepted += 1
            self._clip()
        rec = UpdateRecord(interval=(int(i0), int(i1)), r=r_prior, R=R_prior, mahalanobis=D,
                           accepted=accepted, x=self.x.copy(),
                           std=np.sqrt(np.maximum(np.diag(self.P), 0.0)))
        self.history.append(rec)
        self.n_updates += 1
        self.n_rejected += 0 if accepted else 1
        if self.max_history is not None and len(self.history) > self.max_history:
            del self.history[:len(self.history) - int(self.max_history)]
        return rec

    def run(self, log: CalibrationLog, intervals: np.ndarray) -> list[UpdateRecord]:
        """:meth:`update` over intervals (K, 2) in order; returns their records."""
        return [self.update(log, int(a), int(b)) for a, b in np.asarray(intervals)]

    def converged_after(self, tolerance: float = 0.1) -> int:
        """Number of intervals after which every systematic estimate stays within
        max(3 final standard deviations, ``tolerance`` x |final value|) of its final value."""
        if not self.history:
            return 0
        X = np.array([h.x for h in self.history])
        final = X[-1]
        band = np.maximum(3.0 * np.sqrt(np.maximum(np.diag(self.P), 0.0)),
                          tolerance * np.abs(final))
        sys_pos = [self.names.index(n) for n in self.sys_names]
        inside = np.all(np.abs(X[:, sys_pos] - final[sys_pos]) <= band[sys_pos], axis=1)
        k = len(inside)
        while k > 0 and inside[k - 1]:
            k -= 1
        return k + 1
