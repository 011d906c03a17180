"""Compilation switch for the hot kernels.

Kernels are written once, in loop form that reads like the thesis' algorithms, and compiled with
numba when it is importable. Without numba (or with ``WMR_DISABLE_JIT=1``) the same functions run
as plain Python: identical results, much slower. There is no second implementation to drift.

``@njit(refcount=False)`` marks a *refcount-free kernel*: it allocates no array, returns no
array and calls no function that returns an array (it may call kernels that allocate for
themselves: those are compiled with reference counting whoever calls them). numba then emits
no reference counting for the arrays it reads. Each reference count is an out-of-line atomic
call (about 8 ns), made at every call for every array the function reads from its arguments
and records; a terrain lookup on a grid costs 70 ns with it and 30 ns without. numba refuses
to compile an allocation in such a function; ``test/core/test_refcount_free_kernels.py``
checks the rest (numba's allocation counters balance on the product paths). The caller keeps
every array alive for the call, so nothing else changes.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["njit", "num_threads", "set_num_threads", "run_ranges", "JIT_ENABLED", "CACHE_DIR",
           "REFCOUNT_FREE"]

_disabled = os.environ.get("WMR_DISABLE_JIT", "") not in ("", "0")

# Old cache folders of other source versions are removed after this long unused [s].
_STALE_CACHE_AGE = 7 * 24 * 3600.0

_PKG = Path(__file__).resolve().parent
_IMPORT_RE = re.compile(
    r"^[ \t]*(?:from[ \t]+(wmr_model(?:\.\w+)*)[ \t]+import[ \t]+(?:\(([^)]*)\)|([\w \t,]+))"
    r"|import[ \t]+(wmr_model(?:\.\w+)*))", re.MULTILINE)


def _module_file(modname: str) -> Path | None:
    parts = modname.split(".")[1:]
    if not parts:  # the package itself
        cands: tuple[Path, ...] = (_PKG / "__init__.py",)
    else:
        rel = Path(*parts)
        cands = (_PKG / rel.with_suffix(".py"), _PKG / rel / "__init__.py")
    for cand in cands:
        if cand.is_file():
            return cand
    return None


def _imports(path: Path) -> set[Path]:
    """wmr_model source files that ``path`` imports directly (static scan)."""
    out: set[Path] = set()
    for m in _IMPORT_RE.finditer(path.read_text(encoding="utf-8")):
        base = m.group(1) or m.group(4)
        f = _module_file(base)
        if f is not None:
            out.add(f)
        names = m.group(2) or m.group(3) or ""
        for name in names.replace("\n", " ").split(","):
            name = name.strip().split(" as ")[0].strip()
            sub = _module_file(f"{base}.{name}") if name else None
            if sub is not None:
                out.add(sub)
    return out


@functools.cache
def _closure_hash(path: Path) -> str:
    """sha1 of ``path`` and every wmr_model module it imports, transitively."""
    seen: set[Path] = set()
    todo = [path]
    while todo:
        f = todo.pop()
        if f in seen:
            continue
        seen.add(f)
        todo.extend(_imports(f) - seen)
    h = hashlib.sha1()
    for f in sorted(seen):
        h.update(str(f).encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


def _cache_base() -> Path | None:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "wmr_model"
    try:
        base.mkdir(parents=True, exist_ok=True)
        now = time.time()
        for old in base.glob("numba-*"):
            if now - old.stat().st_mtime > _STALE_CACHE_AGE:
                shutil.rmtree(old, ignore_errors=True)
    except OSError:  # read-only home: numba's default location (next to the sources)
        return None
    return base


def _cache_dir_for(func: Callable[..., Any]) -> str:
    """Cache folder of one compiled function, keyed on its source file's import closure.

    numba invalidates a cached function only when *its own* file changes; a kernel inlined from
    another module (``kinematics/solve.py`` into ``kinematics/loops.py``) would run stale
    after an edit there. Keying the folder on a hash of the defining file and every wmr_model
    module it imports (transitively) avoids that, while edits elsewhere leave it valid.
    """
    if _CACHE_BASE is None:
        return ""
    try:
        src = Path(func.__code__.co_filename).resolve()
        key = _closure_hash(src)
    except (OSError, AttributeError):
        return ""
    d = _CACHE_BASE / f"numba-{key}"
    try:
        d.mkdir(exist_ok=True)
        os.utime(d)
    except OSError:
        return ""
    return str(d)


CACHE_DIR = ""
_CACHE_BASE: Path | None = None
#: The kernels compiled with ``refcount=False`` (module docstring), for the tests.
REFCOUNT_FREE: list[Any] = []

try:  # pragma: no cover - exercised by whichever branch the environment takes
    if _disabled:
        raise ImportError
    import numba as _numba

    # numba sets its configuration attributes at run time; they are invisible to a type checker
    _config: Any = _numba.config

    _USER_CACHE_DIR = os.environ.get("NUMBA_CACHE_DIR", "")
    if not _USER_CACHE_DIR:
        _CACHE_BASE = _cache_base()
        CACHE_DIR = str(_CACHE_BASE) if _CACHE_BASE else ""
    JIT_ENABLED = True

    _MAX_THREADS = max(1, int(_config.NUMBA_NUM_THREADS))
    _threads = _MAX_THREADS

    def num_threads() -> int:
        """Threads :func:`run_ranges` spreads a batch over."""
        return _threads

    def set_num_threads(n: int) -> None:
        """Run batches on ``n`` threads (1 .. ``NUMBA_NUM_THREADS``, by default the CPU count)
        from now on, process-wide; results do not change."""
        global _threads
        from wmr_model.errors import ParameterError

        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= _MAX_THREADS:
            raise ParameterError(f"threads: must be an integer in 1..{_MAX_THREADS}, got {n!r}")
        _threads = n

    def njit(*args: Any, **kwargs: Any) -> Any:
        """``numba.njit`` with caching on by default, in a closure-keyed cache folder;
        ``refcount=False``: a refcount-free kernel (module docstring)."""
        kwargs.setdefault("cache", True)
        free = not kwargs.pop("refcount", True)
        # explicit either way: a kernel that does not say inherits its first caller's setting
        kwargs["_nrt"] = not free

        def compile_(f: Callable[..., Any]) -> Any:
            if not kwargs.get("cache") or _USER_CACHE_DIR:
                out = _numba.njit(**kwargs)(f)
            else:
                saved = _config.CACHE_DIR
                _config.CACHE_DIR = _cache_dir_for(f)
                try:
                    out = _numba.njit(**kwargs)(f)
                finally:
                    _config.CACHE_DIR = saved
            if free:
                REFCOUNT_FREE.append(out)
            return out

        if len(args) == 1 and callable(args[0]):
            return compile_(args[0])
        if args:  # explicit signature(s)
            return _numba.njit(*args, **kwargs)
        return compile_

except ImportError:  # pragma: no cover
    JIT_ENABLED = False
    _threads = 1

    def num_threads() -> int:
        """Without numba the kernels hold the GIL: one thread."""
        return _threads

    def set_num_threads(n: int) -> None:
        """Without numba there is one thread; any request is accepted and ignored."""

    def njit(*args: Any, **kwargs: Any) -> Any:
        """No-op stand-in for ``numba.njit``."""
        if len(args) == 1 and callable(args[0]) and not kwargs:
            return args[0]

        def wrap(f: Callable[..., Any]) -> Callable[..., Any]:
            return f

        return wrap


def run_ranges(kernel: Callable[..., Any], n: int, chunks: int, *args: Any) -> None:
    """``kernel(lo, hi, *args)`` over ``chunks`` contiguous ranges covering ``0..n-1``, on up to
    :func:`num_threads` threads (the calling one included), chunks handed out in order.

    ``kernel`` is a compiled range loop declared ``nogil=True`` (each item independent, its
    outputs disjoint), so the threads run at the same time; without numba they take turns and
    the result is the same. This replaces a ``parallel=True`` ``prange`` region: the results do
    not depend on the thread count or the chunking, an exception reaches the caller as itself
    (the first raised; the other threads finish their chunk and stop), and there is no parallel
    region to compile (about 40-60 s per batch kernel on a cold cache).
    """
    chunks = max(1, min(int(chunks), n))
    bounds = [(c * n // chunks, (c + 1) * n // chunks) for c in range(chunks)]
    workers = min(_threads, chunks)
    if workers <= 1:
        for lo, hi in bounds:
            kernel(lo, hi, *args)
        return
    lock = threading.Lock()
    todo = iter(bounds)
    errors: list[BaseException] = []

    def work() -> None:
        while True:
            with lock:
                if errors:
                    return
                nxt = next(todo, None)
            if nxt is None:
                return
            try:
                kernel(nxt[0], nxt[1], *args)
            except BaseException as exc:
                with lock:
                    errors.append(exc)
                return

    helpers = [threading.Thread(target=work, name=f"wmr-batch-{k}", daemon=True)
               for k in range(workers - 1)]
    for h in helpers:
        h.start()
    work()
    for h in helpers:
        h.join()
    if errors:
        raise errors[0]
