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
import importlib.util
import os
import re
import shutil
import sys
import threading
import time
import types
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["njit", "num_threads", "set_num_threads", "run_ranges", "JIT_ENABLED", "CACHE_DIR",
           "REFCOUNT_FREE", "specialized_kernel", "call_specialized", "NO_KERNEL",
           "wait_for_kernels", "set_background_compilation"]

#: The address of "no specialized kernel": the caller runs its generic kernel.
NO_KERNEL = 0

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

    # The planner's float32 lane kernels (wmr_model.kinematics.lanes) need LLVM to know that
    # their array arguments do not overlap, or it vectorizes none of their lane loops (the
    # runtime overlap checks of a dozen rows exceed its limit). numba has the flag (its parallel
    # gufuncs set it: every pointer argument noalias) but no decorator option; this maps one.
    from numba.core import cpu as _cpu
    from numba.core.options import TargetOptions as _TargetOptions

    if not hasattr(_cpu.CPUTargetOptions, "noalias"):
        _cpu.CPUTargetOptions.noalias = _TargetOptions.Mapping("noalias")

    #: numba options of a lane kernel (``njit(lanes=True)``): array arguments never overlap
    #: (the caller passes distinct buffers: a lane kernel must not be given two views of one
    #: array), no Python error model (division and square root vectorize), fused multiply-add.
    LANE_OPTIONS = {"noalias": True, "error_model": "numpy", "fastmath": {"contract"}}

    def njit(*args: Any, **kwargs: Any) -> Any:
        """``numba.njit`` with caching on by default, in a closure-keyed cache folder;
        ``refcount=False``: a refcount-free kernel (module docstring); ``lanes=True``: a lane
        kernel (:data:`LANE_OPTIONS`)."""
        kwargs.setdefault("cache", True)
        if kwargs.pop("lanes", False):
            kwargs.update(LANE_OPTIONS)
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

    # ---- specialized kernels: generated source compiled as C-callable functions ----------
    # A specialized kernel is code generated for one vehicle's sizes, every bound a constant
    # (issue 22, option b). It is compiled as a ``cfunc`` taking data pointers and int64 sizes
    # and returning an int64 status, cached on disk, kept for the process, and passed to the
    # compiled loops by its address (a plain int in their option records): one compiled loop
    # serves every vehicle, and a new vehicle costs one small function, not a recompilation of
    # the loop.
    from llvmlite import ir as _ir
    from numba import cfunc as _cfunc
    from numba import types as _types
    from numba.core import cgutils as _cgutils
    from numba.extending import intrinsic as _intrinsic

    _kernels: dict[Any, Any] = {}
    _kernels_lock = threading.Lock()

    # The generated module's header: the names a kernel's source may use.
    _KERNEL_HEADER = ("from math import inf, sqrt\n\n"
                      "from numba import float64, int64\n"
                      "from numba.np.numpy_support import carray\n\n\n")

    def _kernel_folder() -> Path | None:
        """Folder of the generated kernel modules (their numba cache beside them, in
        ``__pycache__``): under the package's cache folder, or ``NUMBA_CACHE_DIR``; None when
        neither is writable (kernels are then compiled in memory, every process)."""
        base = _CACHE_BASE or (Path(_USER_CACHE_DIR) if _USER_CACHE_DIR else None)
        if base is None:
            return None
        folder = base / "specialized"
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError:
            return None
        return folder

    def _kernel_module(key: Any, text: str) -> Any:
        """The module holding ``kernel``, imported from its file in :func:`_kernel_folder`
        (written once, under a name hashed from its text and numba's version: numba's on-disk
        cache then finds the compiled code from a previous process), or run in memory."""
        name = "wmr_specialized_" + hashlib.sha1(
            (text + _numba.__version__).encode()).hexdigest()[:20]
        module = sys.modules.get(name)
        if module is not None:
            return module
        folder = _kernel_folder()
        if folder is not None:
            path = folder / f"{name}.py"
            try:
                if not path.exists():  # never rewritten: its time stamp keys numba's cache
                    tmp = folder / f".{name}.{os.getpid()}.{threading.get_ident()}.tmp"
                    tmp.write_text(text, encoding="utf-8")
                    os.replace(tmp, path)
                spec = importlib.util.spec_from_file_location(name, path)
                if spec is not None and spec.loader is not None:
                    module = importlib.util.module_from_spec(spec)
                    sys.modules[name] = module  # numba's cache finds its globals by name
                    spec.loader.exec_module(module)
                    return module
            except OSError:
                sys.modules.pop(name, None)
        module = types.ModuleType(name)
        exec(compile(text, f"<wmr_model specialized kernel {key[0]}>", "exec"), module.__dict__)
        return module

    _pending: dict[Any, threading.Thread] = {}
    _background = [True]

    def set_background_compilation(enabled: bool) -> None:
        """Compile specialized kernels missing from the disk cache on a background thread
        (``True``, the default: long-running processes such as the nodes never wait for them)
        or at the call that first needs them (``False``: the ``wmr`` command line, whose
        processes are short and would otherwise exit before a background compilation ends)."""
        _background[0] = bool(enabled)

    def _is_compiled_on_disk(module: Any) -> bool:
        """Whether numba's cache beside the generated module holds its compiled kernel."""
        spec = module.__spec__
        if spec is None or not spec.origin:
            return False
        origin = Path(spec.origin)
        return any((origin.parent / "__pycache__").glob(f"{origin.stem}.kernel-*.nbi"))

    def _compile_kernel(key: Any, module: Any, sig: Any) -> None:
        """Compile (or load) ``module.kernel`` as a cfunc and publish it under ``key``; on
        failure (a bug in its generator) publish None, so that callers keep their generic
        kernels, and warn once with the error."""
        try:
            compiled = _cfunc(sig, cache=module.__spec__ is not None)(module.kernel)
        except Exception as exc:
            compiled = None
            warnings.warn(f"specialized kernel {key[0]!r} did not compile, the generic kernel "
                          f"runs instead: {type(exc).__name__}: {exc}", RuntimeWarning,
                          stacklevel=2)
        with _kernels_lock:
            # the first one published stays: an address handed out must outlive the process
            _kernels.setdefault(key, compiled)
            _pending.pop(key, None)

    def specialized_kernel(key: Any, source: Callable[[], str], n_arrays: int, n_ints: int,
                           wait: bool = False) -> int:
        """Address of the kernel ``key`` names, built from ``source()``: the text of a function
        ``kernel`` taking ``n_arrays`` data pointers then ``n_ints`` int64 and returning an
        int64; it may use ``carray``, ``float64``, ``int64``, ``sqrt`` and ``inf``. Kept (and
        its address valid) for the life of the process.

        Its compiled code is cached on disk like the other kernels (:func:`_kernel_module`):
        when the cache holds it, it is loaded here (tens of ms). Otherwise it is compiled on a
        background thread (seconds) and this returns :data:`NO_KERNEL` until it is ready, so
        callers run their generic kernel meanwhile: a node or planner never stalls on it, and
        results do not change, since every specialized kernel is bit-identical to its generic
        one. ``wait=True`` compiles here instead (tests), as does every call after
        ``set_background_compilation(False)`` (the command line); :func:`wait_for_kernels`
        waits for those under way (benchmarks, ``wmr compile``). The thread is a daemon: a
        process that exits first (or is stopped) leaves the kernel for a later one."""
        if _config.DISABLE_JIT:  # numba's own switch: nothing compiles, nothing to call
            return NO_KERNEL
        compiled: Any = _kernels.get(key, False)
        if compiled is False:
            with _kernels_lock:
                compiled = _kernels.get(key, False)
                thread = _pending.get(key)
                if compiled is False and thread is None:
                    module = _kernel_module(key, _KERNEL_HEADER + source())
                    sig = _types.int64(*([_types.voidptr] * n_arrays),
                                       *([_types.int64] * n_ints))
                    if not (wait or not _background[0] or _is_compiled_on_disk(module)):
                        thread = threading.Thread(target=_compile_kernel,
                                                  args=(key, module, sig),
                                                  name=f"wmr kernel {key[0]}", daemon=True)
                        _pending[key] = thread
                        thread.start()
            if compiled is False:
                if thread is None:  # load (or compile) here, outside the lock
                    _compile_kernel(key, module, sig)
                elif wait:
                    thread.join()
                compiled = _kernels.get(key)
        return NO_KERNEL if compiled is None or compiled is False else int(compiled.address)

    def wait_for_kernels() -> None:
        """Wait until every specialized kernel being compiled in the background is ready."""
        while True:
            with _kernels_lock:
                threads = list(_pending.values())
            if not threads:
                return
            for t in threads:
                t.join()

    @_intrinsic
    def call_specialized(typingctx: Any, address: Any, args: Any) -> Any:
        """Call the specialized kernel at ``address`` (nonzero, from
        :func:`specialized_kernel`) with the tuple ``args``: C-contiguous arrays (passed as
        their data pointers) then integers (as int64), in the kernel's order; its int64 status."""
        if not isinstance(address, _types.Integer) or not isinstance(args, _types.BaseTuple):
            return None
        elems: Any = args
        for ty in elems:
            if not ((isinstance(ty, _types.Array) and ty.layout == "C")
                    or isinstance(ty, _types.Integer)):
                return None

        def codegen(context: Any, builder: Any, signature: Any, llargs: Any) -> Any:
            tys = list(signature.args[1])
            vals = _cgutils.unpack_tuple(builder, llargs[1], len(tys))
            i64 = _ir.IntType(64)
            out, kinds = [], []
            for ty, val in zip(tys, vals):
                if isinstance(ty, _types.Array):
                    ary = _cgutils.create_struct_proxy(ty)(context, builder, value=val)
                    out.append(builder.bitcast(ary.data, _cgutils.voidptr_t))
                    kinds.append(_cgutils.voidptr_t)
                else:
                    out.append(context.cast(builder, val, ty, _types.int64))
                    kinds.append(i64)
            fnty = _ir.FunctionType(i64, kinds)
            addr = context.cast(builder, llargs[0], signature.args[0], _types.int64)
            return builder.call(builder.inttoptr(addr, fnty.as_pointer()), out)

        return _types.int64(address, args), codegen

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


if not JIT_ENABLED:  # pragma: no cover - the plain-Python build has no specialized kernels

    def specialized_kernel(key: Any, source: Callable[[], str], n_arrays: int, n_ints: int,
                           wait: bool = False) -> int:
        """Without numba: :data:`NO_KERNEL` (callers run their generic kernels)."""
        return NO_KERNEL

    def wait_for_kernels() -> None:
        """Without numba nothing is compiled."""

    def set_background_compilation(enabled: bool) -> None:
        """Without numba nothing is compiled."""

    def call_specialized(address: Any, args: Any) -> Any:  # type: ignore[misc]
        """Without numba there is nothing to call (callers test for :data:`NO_KERNEL`)."""
        raise RuntimeError("call_specialized: needs numba")


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
