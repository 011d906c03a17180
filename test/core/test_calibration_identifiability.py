"""Identifiability of a calibrated set (wmr_model.calibration.identifiability).

Closed forms: the posterior of a linear-Gaussian identification, ``P = (P0^-1 + H^T H /
sigma^2)^-1``, over regressors ``H`` built with a known structure - two columns that are
multiples of each other (confounded pair), one a sum of two others (a triple whose pairwise
correlations stay moderate), a column of zeros (unobserved), and independent columns
(identifiable). A real filter check runs the identification EKF on a synthetic Warthog log.
"""

from __future__ import annotations

import numpy as np
import pytest

from wmr_model.calibration.identifiability import check_identifiability
from wmr_model.errors import ParameterError

STD0 = 0.5
NAMES = ("a", "b", "c")


def _posterior(H, sigma=0.01, std0=STD0):
    n = H.shape[1]
    return np.linalg.inv(np.eye(n) / std0**2 + H.T @ H / sigma**2)


def _regressors(seed=0, m=300):
    return np.random.default_rng(seed).normal(size=(m, 3))


def test_independent_regressors_are_identifiable():
    H = _regressors()
    res = check_identifiability(NAMES, _posterior(H), dict.fromkeys(NAMES, STD0), 50)
    assert res.ok, res.confounded
    assert all(r < 0.3 for r in res.multiple_correlation.values())
    assert all(r < 0.01 for r in res.std_ratio.values())
    assert res.pairs == ()


def test_a_confounded_pair_is_flagged_and_the_third_parameter_is_not():
    H = _regressors()
    H[:, 2] = -2.0 * H[:, 0]  # c's effect is exactly -2 x a's: only a - c/2 ... is observable
    res = check_identifiability(NAMES, _posterior(H), dict.fromkeys(NAMES, STD0), 50)
    assert set(res.confounded) == {"a", "c"}
    assert "most with c" in res.confounded["a"] and "most with a" in res.confounded["c"]
    assert [(p[0], p[1]) for p in res.pairs] == [("a", "c")]
    assert res.pairs[0][2] > 0.99  # the prior pulls both the same way: rho -> +1 for H_c = -2 H_a
    assert res.multiple_correlation["b"] < 0.3


def test_a_confounded_triple_is_flagged():
    H = _regressors()
    H[:, 2] = H[:, 0] + H[:, 1]  # c = a + b: each pair alone is independent in H
    res = check_identifiability(NAMES, _posterior(H), dict.fromkeys(NAMES, STD0), 50)
    assert set(res.confounded) == set(NAMES)
    assert all(r > 0.999 for r in res.multiple_correlation.values())


def test_an_unexcited_parameter_is_unobserved_only_after_min_intervals():
    H = _regressors()
    H[:, 1] = 0.0  # b never acts on the residuals (p1 on flat ground)
    P = _posterior(H)
    std0 = dict.fromkeys(NAMES, STD0)
    early = check_identifiability(NAMES, P, std0, 5, min_intervals=20)
    assert early.ok
    late = check_identifiability(NAMES, P, std0, 20, min_intervals=20)
    assert list(late.confounded) == ["b"] and late.confounded["b"].startswith("unobserved")
    assert late.std_ratio["b"] == pytest.approx(1.0)


def test_bad_arguments_name_the_problem():
    with pytest.raises(ParameterError, match=r"expected shape \(3, 3\)"):
        check_identifiability(NAMES, np.eye(2), dict.fromkeys(NAMES, 1.0), 0)
    with pytest.raises(ParameterError, match=r"no prior standard deviation for \['c'\]"):
        check_identifiability(NAMES, np.eye(3), {"a": 1.0, "b": 1.0}, 0)
