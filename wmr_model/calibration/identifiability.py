"""Identifiability of a calibrated parameter set from the filter's own covariance.

IPEM (thesis §3.2) can only recover parameters whose effects on the interval residuals are
linearly independent over the data seen: the observability of the systematic parameters is the
rank of the stacked Jacobians ``H_mu`` (3.26), i.e. of the information the identification EKF
(3.50)-(3.54) gathered, ``P^-1 - P0^-1 = sum H^T R^-1 H``. Two ways a set fails:

* **confounded** - a combination of parameters has (nearly) the same effect as another one
  (a wheel radius and the longitudinal slip p2 both scale the forward speed; on a skid steer
  one wheel's radius acts as p2 plus the rolling-resistance asymmetry p5): the data pin the
  combination, not each parameter; their posterior correlation goes to +-1 *and* along the
  unpinned combination the posterior keeps the prior's spread;
* **unobserved** - the data never excite the parameter (p1 on flat ground): its standard
  deviation stays near the prior's.

Both are one test on the prior-normalized posterior ``P~ = D0^-1 P D0^-1`` (``D0`` the prior
standard deviations): its eigenvectors are parameter combinations in prior units and the square
roots of its eigenvalues how much of the prior spread the data left along each. A direction
keeping more than ``max_std_ratio`` of it is *weak*; every parameter carrying at least
:data:`MIN_SHARE` of a weak direction (``v_i^2``) is flagged - "unobserved" when it carries the
direction alone, else "confounded" with the others in it. A high correlation alone is not a
failure: two well-determined wheel radii of a differential drive are correlated 0.97 (their sum
is measured by distance, their difference by heading) and both are known to 0.3 mm.

Either way a flagged estimate is the prior plus whatever it absorbs of other (or uncalibrated)
effects; it must not be pushed to the odometry as a calibrated value. The calibrator node
reports the result in its diagnostics and withholds the flagged names from its pushes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from wmr_model.errors import ParameterError

__all__ = [
    "DEFAULT_MAX_STD_RATIO",
    "DEFAULT_MIN_INTERVALS",
    "MIN_SHARE",
    "REPORT_CORRELATION",
    "Identifiability",
    "check_identifiability",
]

#: A combination of parameters (in prior units) whose posterior std is above this fraction of
#: its prior std after ``min_intervals`` accepted intervals is weak: the data removed less than
#: 75 % of its prior variance. Measured on a synthetic Warthog grass run (100 intervals): the
#: radius of {slip.p2, slip.p5, slip.p6, one wheel radius} keeps 0.85; identifiable sets (p2, p6
#: and the radius; the two radii of a differential drive) keep at most 0.3.
DEFAULT_MAX_STD_RATIO = 0.5
#: Accepted intervals before the check applies (earlier the prior still dominates everything).
DEFAULT_MIN_INTERVALS = 20
#: A parameter takes part in a weak direction when it carries at least this share ``v_i^2`` of
#: its unit eigenvector.
MIN_SHARE = 0.1
#: Pairs with ``|rho|`` at least this are listed in :attr:`Identifiability.pairs` (information).
REPORT_CORRELATION = 0.95


@dataclass(frozen=True)
class Identifiability:
    """Result of :func:`check_identifiability`.

    Attributes:
        names: (n,) the parameters checked, in the order of the covariance.
        std_ratio: name -> posterior / prior standard deviation.
        multiple_correlation: name -> ``R_i`` in [0, 1], the correlation of the parameter with
            the best linear combination of the others (information).
        pairs: ``(a, b, rho)`` of every pair with ``|rho| >= REPORT_CORRELATION``
            (information).
        confounded: name -> reason, for each flagged parameter (empty: identifiable).
        checked: False before ``min_intervals`` (nothing flagged yet).
    """

    names: tuple[str, ...]
    std_ratio: dict[str, float]
    multiple_correlation: dict[str, float]
    pairs: tuple[tuple[str, str, float], ...] = ()
    confounded: dict[str, str] = field(default_factory=dict)
    checked: bool = True

    @property
    def ok(self) -> bool:
        """True when no parameter was flagged."""
        return not self.confounded


def _multiple_correlation(C: np.ndarray) -> np.ndarray:
    """``R_i = sqrt(1 - 1 / (C^-1)_ii)`` (n,) of a correlation matrix ``C`` (n, n): the
    correlation of parameter i with the best linear combination of the others (1 when ``C``
    is singular along it; a 1e-12 ridge keeps the inverse finite)."""
    n = C.shape[0]
    if n == 1:
        return np.zeros(1)
    inv_diag = np.diag(np.linalg.inv(C + 1e-12 * np.eye(n)))
    return np.sqrt(np.clip(1.0 - 1.0 / np.maximum(inv_diag, 1.0), 0.0, 1.0))


def check_identifiability(names: Sequence[str], P: np.ndarray, std0: Mapping[str, float],
                          n_intervals: int, *,
                          max_std_ratio: float = DEFAULT_MAX_STD_RATIO,
                          min_intervals: int = DEFAULT_MIN_INTERVALS) -> Identifiability:
    """Flag the confounded and unobserved parameters of a calibration (module docstring).

    Args:
        names: (n,) calibrated parameter names, in the order of ``P``.
        P: (n, n) posterior covariance of the identification EKF (``P_xi`` after (3.54)).
        std0: name -> prior standard deviation (the ``P_xi`` the filter started from; with a
            random walk (3.49) pass the prior inflated by it).
        n_intervals: accepted intervals behind ``P``.
        max_std_ratio: a direction keeping more than this fraction of its prior std is weak.
        min_intervals: accepted intervals before anything is flagged.

    Returns:
        :class:`Identifiability`; ``confounded`` names each flagged parameter with a reason
        naming the other parameters of its weak direction.
    """
    names = tuple(names)
    P = np.asarray(P, dtype=float)
    n = len(names)
    if P.shape != (n, n):
        raise ParameterError(f"covariance: expected shape ({n}, {n}) for {list(names)}, got "
                             f"{P.shape}")
    if not np.all(np.isfinite(P)):
        raise ParameterError("covariance: must be finite")
    missing = [k for k in names if k not in std0]
    if missing:
        raise ParameterError(f"std0: no prior standard deviation for {missing}")
    bad = [k for k in names if not (math.isfinite(std0[k]) and std0[k] > 0)]
    if bad:
        raise ParameterError(f"std0: prior standard deviations must be finite and > 0: {bad}")
    d0 = np.array([float(std0[k]) for k in names])
    s = np.sqrt(np.maximum(np.diag(P), 0.0))
    ok = s > 0
    C = np.eye(n)
    if np.any(ok):
        C[np.ix_(ok, ok)] = P[np.ix_(ok, ok)] / np.outer(s[ok], s[ok])
    C = np.clip(0.5 * (C + C.T), -1.0, 1.0)
    ratio = {k: float(s[i] / d0[i]) for i, k in enumerate(names)}
    R = _multiple_correlation(C)
    pairs = tuple((names[i], names[j], float(C[i, j])) for i in range(n)
                  for j in range(i + 1, n) if abs(C[i, j]) >= REPORT_CORRELATION)
    checked = n_intervals >= min_intervals
    confounded: dict[str, str] = {}
    if checked:
        Pn = P / np.outer(d0, d0)
        lam, V = np.linalg.eigh(0.5 * (Pn + Pn.T))
        for k in np.argsort(lam)[::-1]:
            kept = math.sqrt(max(float(lam[k]), 0.0))
            if kept <= max_std_ratio:
                break
            part = [i for i in range(n) if V[i, k] ** 2 >= MIN_SHARE]
            for i in part:
                if names[i] in confounded:
                    continue
                others = [names[j] for j in part if j != i]
                if others:
                    combo = " + ".join(f"{V[j, k] / V[i, k]:+.2g} {names[j]}" for j in part
                                       if j != i)
                    confounded[names[i]] = (
                        f"confounded with {', '.join(others)}: the combination {names[i]} "
                        f"{combo} (prior units) keeps {kept:.2f} of its prior std after "
                        f"{n_intervals} intervals")
                else:
                    confounded[names[i]] = (
                        f"unobserved: std {s[i]:.3g} is {ratio[names[i]]:.2f} of the prior "
                        f"{d0[i]:.3g} after {n_intervals} intervals")
    return Identifiability(names, ratio, {k: float(R[i]) for i, k in enumerate(names)}, pairs,
                           confounded, checked)
