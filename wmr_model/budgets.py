"""Size budgets checked before anything large is allocated or a long loop starts.

A typo in a command line or a vehicle file (``--dt 1e-7``, ``rough:0.05,1e-3``,
``samples: 100000000``) must end in one line naming the number and the budget, not in the
kernel's OOM killer or an hour of computing. Each budget is a module constant; the numbers are
far above anything the shipped vehicles, terrains and benchmarks need (the largest shipped use
is listed beside each) and far below what exhausts a laptop.
"""

from __future__ import annotations

import math

from wmr_model.errors import ParameterError

__all__ = [
    "MAX_GRID_POINTS",
    "MAX_STEPS",
    "MAX_TRACK_SAMPLES",
    "MAX_CANDIDATES",
    "MAX_PREDICTION_BYTES",
    "MAX_INTERVAL_STEPS",
    "MAX_COMMAND_SPAN",
    "check_budget",
]

#: Height-map nodes of a generated terrain (20 M float64 = 160 MB; ``rough`` at its finest
#: shipped use: 320 k).
MAX_GRID_POINTS = 20_000_000
#: Integration steps of one simulation or prediction (1 M steps x ~20 states = 160 MB of
#: trajectory; the longest shipped run: 3,000).
MAX_STEPS = 1_000_000
#: Contact samples along one track's belt (the shipped tracks use 20 to 40).
MAX_TRACK_SAMPLES = 10_000
#: Prediction steps of one calibration/evaluation interval (interval / dt; shipped: 80).
MAX_INTERVAL_STEPS = 100_000
#: Candidate trajectories of one :func:`wmr_model.prediction.predict.predict` call (the issue-10
# sweep's
#: largest: 10,000).
MAX_CANDIDATES = 100_000
#: [bytes] arrays one :func:`wmr_model.prediction.predict.predict` call allocates
#: (:func:`wmr_model.prediction.predict.prediction_bytes`; 10,000 enhanced Zoe candidates x 126
# states
#: with covariance: about 0.9 GB, with ``every=T``: 0.03 GB).
MAX_PREDICTION_BYTES = 2 * 1024**3
#: [s] time spanned by a command script (one week).
MAX_COMMAND_SPAN = 7 * 24 * 3600.0


def check_budget(what: str, count: float, limit: float, hint: str = "") -> int:
    """Return ``count`` as an int, or raise :class:`ParameterError` when it exceeds ``limit``.

    Args:
        what: what is counted and where it comes from, e.g. ``"--duration/--dt: steps"``.
        count: the number about to be allocated or looped over (may be a float, inf or NaN).
        limit: the budget.
        hint: how to get under it (appended to the message).
    """
    if not (isinstance(count, (int, float)) and math.isfinite(count)) or count > limit:
        shown = f"{count:,.0f}" if isinstance(count, (int, float)) and abs(count) < 1e15 \
            else f"{count:.3g}"
        raise ParameterError(f"{what}: {shown} exceeds the budget of {limit:,.0f}"
                             + (f"; {hint}" if hint else ""))
    return int(count)
