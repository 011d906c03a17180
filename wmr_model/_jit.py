"""Compilation switch for the hot kernels.

Kernels are written once, in loop form that reads like the thesis' algorithms, and compiled with
numba when it is importable. Without numba (or with ``WMR_DISABLE_JIT=1``) the same functions run
as plain Python: identical results, much slower. There is no second implementation to drift.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

__all__ = ["njit", "prange", "JIT_ENABLED"]

_disabled = os.environ.get("WMR_DISABLE_JIT", "") not in ("", "0")

try:  # pragma: no cover - exercised by whichever branch the environment takes
    if _disabled:
        raise ImportError
    import numba as _numba

    JIT_ENABLED = True
    prange = _numba.prange

    def njit(*args: Any, **kwargs: Any) -> Any:
        """``numba.njit`` with caching on by default."""
        kwargs.setdefault("cache", True)
        return _numba.njit(*args, **kwargs)

except ImportError:  # pragma: no cover
    JIT_ENABLED = False
    prange = range

    def njit(*args: Any, **kwargs: Any) -> Any:
        """No-op stand-in for ``numba.njit``."""
        if len(args) == 1 and callable(args[0]) and not kwargs:
            return args[0]

        def wrap(f: Callable[..., Any]) -> Callable[..., Any]:
            return f

        return wrap
