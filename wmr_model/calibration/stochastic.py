"""Stochastic IPEM variables: Q' from interval residuals (thesis (3.28)-(3.42)).

* measurement ``z_sigma = vec(r r^T)`` (3.28)-(3.30): upper triangle, row-major;
* prediction ``h_sigma = vec(R_mu)`` (3.31);
* covariance ``R_sigma`` by the Bohrnstedt-Goldberger rule (3.35)-(3.38):
  ``C[ab, cd] = C[a, c] C[b, d] + C[a, d] C[b, c]`` for zero-mean Gaussian entries;
* parameters ``s``: entries of the upper-triangular Cholesky factor ``U`` of ``Q' = U^T U``
  (3.40)-(3.41), named ``noise.U.<a>_<b>`` (:func:`wmr_model.kinematics.uncertainty.qprime_names`);
* Jacobian ``H_sigma = d vec(R_mu) / ds`` (3.42), exact because ``R_mu`` is linear in ``Q'``
  for a given predicted trajectory (:class:`~wmr_model.calibration.residuals.CovarianceMap`):
  ``dQ'/dU_ij = E_ji U + U^T E_ij``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from wmr_model.calibration.residuals import CovarianceMap
from wmr_model.errors import ParameterError
from wmr_model.kinematics.uncertainty import TWIST_COMPONENTS

__all__ = [
    "vec",
    "vec_indices",
    "stochastic_measurement",
    "stochastic_covariance",
    "cholesky_index",
    "cholesky_factor",
    "qprime_of",
    "stochastic_jacobian",
]


def vec_indices(m: int) -> tuple[np.ndarray, np.ndarray]:
    """Row and column index vectors ``I, J`` of (3.37)-(3.38) (0-based), each (m(m+1)/2,)."""
    I, J = np.triu_indices(m)
    return I, J


def vec(M: np.ndarray) -> np.ndarray:
    """Unique elements of symmetric ``M`` (..., m, m), upper triangle row-major (3.30)."""
    I, J = vec_indices(M.shape[-1])
    return M[..., I, J]


def stochastic_measurement(r: np.ndarray) -> np.ndarray:
    """``z_sigma = vec(r r^T)`` (3.28), (m(m+1)/2,)."""
    r = np.asarray(r, dtype=float)
    return vec(np.outer(r, r))


def stochastic_covariance(R_mu: np.ndarray) -> np.ndarray:
    """``R_sigma`` (3.34)-(3.36) from the residual covariance ``R_mu`` (m, m)."""
    I, J = vec_indices(R_mu.shape[0])
    return (R_mu[np.ix_(I, I)] * R_mu[np.ix_(J, J)]
            + R_mu[np.ix_(I, J)] * R_mu[np.ix_(J, I)])


def cholesky_index(name: str) -> tuple[int, int]:
    """``(i, j)`` of ``noise.U.<a>_<b>`` in U (row i <= column j)."""
    try:
        a, b = name.split(".", 2)[2].split("_")
        i, j = TWIST_COMPONENTS.index(a), TWIST_COMPONENTS.index(b)
    except (ValueError, IndexError):
        raise ParameterError(f"{name}: not a Q' Cholesky name noise.U.<a>_<b> over "
                             f"{list(TWIST_COMPONENTS)}") from None
    if i > j:
        raise ParameterError(f"{name}: U is upper triangular; use noise.U.{b}_{a}")
    return i, j


def cholesky_factor(values: Mapping[str, float]) -> np.ndarray:
    """U (6, 6) from named entries (others zero)."""
    U = np.zeros((6, 6))
    for n, v in values.items():
        U[cholesky_index(n)] = float(v)
    return U


def qprime_of(values: Mapping[str, float]) -> np.ndarray:
    """``Q' = U^T U`` (3.40) from named Cholesky entries."""
    U = cholesky_factor(values)
    return U.T @ U


def stochastic_jacobian(cmap: CovarianceMap, U: np.ndarray, names: Sequence[str],
                        idx: np.ndarray) -> np.ndarray:
    """``H_sigma`` (m(m+1)/2, ns): derivative of ``vec(R_mu[idx, idx])`` w.r.t. named U entries."""
    cols = []
    for n in names:
        i, j = cholesky_index(n)
        E = np.zeros((6, 6))
        E[i, j] = 1.0
        dQ = E.T @ U + U.T @ E
        dP = cmap.J1 @ cmap.process(dQ) @ cmap.J1.T
        cols.append(vec(dP[np.ix_(idx, idx)]))
    return np.stack(cols, axis=1) if cols else np.zeros((len(idx) * (len(idx) + 1) // 2, 0))
