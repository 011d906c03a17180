"""Identifiability of a calibrated parameter set from the filter's own covariance.

IPEM (thesis §3.2) can only recover parameters whose effects on the interval residuals are
linearly independent over the data seen: the observability of the systematic parameters is the
rank of the stacked Jacobians ``H_mu`` (3.26) - the information matrix
``P^-1 - P0^-1 = sum H^T R^-1 H`` of the identification EKF (3.50)-(3.54). Two ways a set
fails, both visible in the posterior covariance ``P_xi``:

* **confounded** - a combination of parameters has (nearly) the same effect as another one
  (a wheel radius and the longitudinal slip p2 both scale the forward speed; the radius of
  one wheel of a skid steer and the rolling-resistance asymmetry p5 both curve straight
  driving): the data pin the combination, not each parameter, so their posterior correlation
  goes to +-1 and a parameter's *multiple* correlation with all the others,
  ``R_i^2 = 1 - 1 / (C^-1)_ii`` (``C`` the correlation matrix of ``P_xi``), goes to 1;
* **unobserved** - the data never excite the parameter (p1 on flat ground): after many
  intervals its standard deviation has not shrunk below the prior's.

Either way the estimate is the prior plus whatever the parameter absorbs of the others' (or of
an uncalibrated effect's) error; it must not be pushed to the odometry as a calibrated value.
:func:`check_identifiability` applies both tests; the calibrator node reports the result in
its diagnostics and withholds the flagged names from its pushes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from wmr_model.errors import ParameterError

__all__ = [
    "DEFAULT_MAX_CORRELATION",
    "DEFAULT_MAX_STD_RATIO",
    "DEFAULT_MIN_INTERVALS",
    "Identifiability",
    "check_identifiability",
]

#: A multiple correlation ``R_i`` (and a pairwise ``|rho|``) at or above this is "confounded":
#: 0.95 means 90 % of the parameter's posterior variance is explained by the others. On a
#: synthetic Warthog grass run (100 intervals) the identifiable set slip.p2, p6 and one wheel
#: radius peaks at 0.75, slip.p2-p4, p6 and the radius at 0.86; adding p5 (one wheel's radius
#: is p2 plus p5 on a skid steer) takes the radius to 0.97.
DEFAULT_MAX_CORRELATION = 0.95
#: A posterior/prior standard deviation ratio above this after ``min_intervals`` accepted
#: intervals is "unobserved" (the data removed less than 75 % of the prior variance).
DEFAULT_MAX_STD_RATIO = 0.5
#: Accepted intervals before the shrink test applies (the correlation test always applies).
DEFAULT_MIN_INTERVALS = 20


@dataclass(frozen=True)
class Identifiability:
    """Result of :func:`check_identifiability`.

    Attributes:
        names: (n,) the parameters checked, in the order of the covariance.
        multiple_correlation: name -> ``R_i`` in [0, 1], the correlation of the parameter with
            the best linear combination of all the others.
        std_ratio: name -> posterior / prior standard deviation.
        pairs: ``(a, b, rho)`` of every pair with ``|rho| >= max_correlation``.
        confounded: name -> reason, for each parameter that fails a test (empty: identifiable).
    """

    names: tuple[str, ...]
    multiple_correlation: dict[str, float]
    std_ratio: dict[str, float]
    pairs: tuple[tuple[str, str, float], ...] = ()
    confounded: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when no parameter failed."""
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
                          max_correlation: float = DEFAULT_MAX_CORRELATION,
                          max_std_ratio: float = DEFAULT_MAX_STD_RATIO,
                          min_intervals: int = DEFAULT_MIN_INTERVALS) -> Identifiability:
    """Flag the confounded and unobserved parameters of a calibration (module docstring).

    Args:
        names: (n,) calibrated parameter names, in the order of ``P``.
        P: (n, n) posterior covariance of the identification EKF (``P_xi`` after (3.54)).
        std0: name -> prior standard deviation (the ``P_xi`` the filter started from; with a
            random walk (3.49) pass the prior inflated by it, or the shrink test is strict).
        n_intervals: accepted intervals behind ``P``.
        max_correlation: a parameter whose multiple correlation with the others is at least
            this is confounded (``>= 1`` disables the test).
        max_std_ratio: after ``min_intervals`` accepted intervals, a parameter whose standard
            deviation is above this times its prior one is unobserved (``>= 1`` disables).
        min_intervals: accepted intervals before the shrink test applies.

    Returns:
        :class:`Identifiability`; ``confounded`` names each failing parameter with a reason
        that names its most correlated partner.
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
    s = np.sqrt(np.maximum(np.diag(P), 0.0))
    ok = s > 0
    C = np.eye(n)
    if np.any(ok):
        C[np.ix_(ok, ok)] = P[np.ix_(ok, ok)] / np.outer(s[ok], s[ok])
    C = np.clip(0.5 * (C + C.T), -1.0, 1.0)
    R = _multiple_correlation(C)
    ratio = {k: (float(s[i] / std0[k]) if std0[k] > 0 else math.inf)
             for i, k in enumerate(names)}
    pairs = tuple((names[i], names[j], float(C[i, j])) for i in range(n)
                  for j in range(i + 1, n) if abs(C[i, j]) >= max_correlation)
    confounded: dict[str, str] = {}
    for i, k in enumerate(names):
        if R[i] >= max_correlation:
            off = np.abs(C[i]).copy()
            off[i] = -1.0
            j = int(np.argmax(off))
            confounded[k] = (f"confounded: multiple correlation {R[i]:.4f} with the other "
                             f"parameters (most with {names[j]}, rho {C[i, j]:+.3f})")
        elif n_intervals >= min_intervals and ratio[k] > max_std_ratio:
            confounded[k] = (f"unobserved: std {s[i]:.3g} is {ratio[k]:.2f} of the prior "
                             f"{std0[k]:.3g} after {n_intervals} intervals")
    return Identifiability(names, {k: float(R[i]) for i, k in enumerate(names)}, ratio, pairs,
                           confounded)
