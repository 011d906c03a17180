"""Compilation switch for the hot kernels.

Kernels are written once, in loop form that reads like the thesis' algorithms, and compiled with
numba when it is importable. Without numba (or with ``WMR_DISABLE_JIT=1``) the same functions run
as plain Python: identical results, much slower. There is no second implementation to drift.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["njit", "prange", "JIT_ENABLED", "CACHE_DIR"]

_disabled = os.environ.get("WMR_DISABLE_JIT", "") not in ("", "0")

# Old cache folders of other source versions are removed after this long unused [s].
_STALE_CACHE_AGE = 7 * 24 * 3600.0


def _source_cache_dir() -> str:
    """Cache folder keyed on the package's whole source.

    numba invalidates a cached function only when *its own* file changes; a kernel inlined from
    another module (``kinematics/kernels.py`` into ``kinematics/loops.py``) would otherwise run
    stale after an edit. Keying the folder on a hash of every module avoids that. A user's
    ``NUMBA_CACHE_DIR`` takes precedence.
    """
    pkg = Path(__file__).resolve().parent
    h = hashlib.sha1()
    for f in sorted(pkg.rglob("*.py")):
        h.update(str(f.relative_to(pkg)).encode())
        h.update(f.read_bytes())
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "wmr_model"
    here = base / f"numba-{h.hexdigest()[:16]}"
    try:
        here.mkdir(parents=True, exist_ok=True)
        now = time.time()
        for old in base.glob("numba-*"):
            if old != here and now - old.stat().st_mtime > _STALE_CACHE_AGE:
                shutil.rmtree(old, ignore_errors=True)
        os.utime(here)
    except OSError:  # read-only home: fall back to numba's default (next to the sources)
        return ""
    return str(here)


CACHE_DIR = ""

try:  # pragma: no cover - exercised by whichever branch the environment takes
    if _disabled:
        raise ImportError
    import numba as _numba

    if not os.environ.get("NUMBA_CACHE_DIR"):
        CACHE_DIR = _source_cache_dir()
        if CACHE_DIR:
            _numba.config.CACHE_DIR = CACHE_DIR
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
