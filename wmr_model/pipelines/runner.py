"""One task runner for fleet calibration and sweeps: in-process, on local Ray, or on a cluster.

A :class:`Task` is a module-level function and its keyword arguments. :meth:`Runner.run` runs
a list of them and returns one :class:`TaskResult` per task, in task order, whichever way they
ran:

* in-process (default, ``workers=None`` or 1): one after the other in this process;
* local Ray (``workers=N`` > 1): ``ray.init(num_cpus=N)``, one CPU per task;
* an existing Ray cluster (``ray_address="ADDR"``): ``ray.init(address=ADDR)``.

Ray is optional (``pip install .[cluster]``); asking for it without it installed raises
:class:`~wmr_model.errors.ParameterError` saying so. The same function on the same inputs gives
the same result on every path: workers run the very same code, with one BLAS/OpenMP thread
(:data:`WORKER_ENV`), and results come back pickled (bitwise).

**Cache.** With ``cache_dir``, each task's result is stored as ``<key>.pkl`` where the key is
the SHA-256 of the function's qualified name, its hash inputs (``Task.key``, default its
keyword arguments; callers put content identities there, e.g. :func:`content_id` of a bag,
instead of paths) and the code (:func:`code_id`: package version and source hash). A task
whose key is in the cache is not run again, so an interrupted run resumes where it stopped.
Failed tasks are not cached.

**Failures.** An exception in one task becomes ``TaskResult(ok=False, error="Type: message")``
(one line); the others still run. :class:`RunStats` counts executed, cached and failed tasks.

**Progress.** A plain-text bar on stderr (``\\r[#####     ] 3/8 done, 1 cached, 0 failed``),
only when stderr is a terminal and ``quiet`` is off.
"""

from __future__ import annotations

import functools
import hashlib
import os
import pickle
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from wmr_model.errors import ParameterError

__all__ = ["Task", "TaskResult", "RunStats", "Runner", "Progress", "content_id", "code_id",
           "task_key",
           "ray_available", "CLUSTER_HINT", "WORKER_ENV"]

#: What to install for ``--workers N`` / ``--ray-address`` (the ``cluster`` extra).
CLUSTER_HINT = "pip install '.[cluster]' (Ray) in the wmr_model checkout, or run without it"

#: Environment of Ray workers: one BLAS/OpenMP/numba thread each (N workers use N cores).
WORKER_ENV = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
              "NUMBA_NUM_THREADS": "1"}


@dataclass(frozen=True)
class Task:
    """One unit of work: ``fn(**kwargs)``.

    Attributes:
        name: label for tables and messages (e.g. the bag or the sweep point).
        fn: a module-level function (Ray ships it by reference).
        kwargs: its keyword arguments (picklable).
        key: what identifies the result for the cache (default: ``kwargs``); put content
            identities here instead of file paths.
    """

    name: str
    fn: Callable[..., Any]
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    key: Any = None


@dataclass(frozen=True)
class TaskResult:
    """Outcome of one task: ``value`` when ``ok``, else ``error`` (one line)."""

    name: str
    ok: bool
    value: Any = None
    error: str = ""
    cached: bool = False


@dataclass
class RunStats:
    """Counts of the last :meth:`Runner.run`: tasks, executed (run now), cached, failed."""

    tasks: int = 0
    executed: int = 0
    cached: int = 0
    failed: int = 0


def ray_available() -> bool:
    """Whether ``import ray`` works."""
    try:
        import ray  # noqa: F401
    except ImportError:
        return False
    return True


def content_id(path: str | os.PathLike[str]) -> str:
    """SHA-256 of a file's or a folder's content: relative names, sizes and bytes of every
    file (sorted), so a copy or a move keeps the id and any edit changes it."""
    p = Path(path)
    h = hashlib.sha256()
    files = [p] if p.is_file() else sorted(q for q in p.rglob("*") if q.is_file())
    if not files:
        raise ParameterError(f"{p}: no such file or folder, or an empty folder")
    for q in files:
        rel = q.name if q == p else q.relative_to(p).as_posix()
        h.update(f"{rel}\0{q.stat().st_size}\0".encode())
        with open(q, "rb") as f:
            for chunk in iter(functools.partial(f.read, 1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


@functools.cache
def code_id() -> str:
    """Package version plus the SHA-256 of every ``wmr_model`` source file: a result computed
    by other code (an edited model, a new release) is never taken from the cache."""
    from wmr_model import __version__

    root = Path(__file__).resolve().parents[1]  # the wmr_model package
    h = hashlib.sha256(__version__.encode())
    for f in sorted(root.rglob("*.py")):
        h.update(f.relative_to(root).as_posix().encode() + b"\0" + f.read_bytes())
    return f"{__version__}+{h.hexdigest()[:16]}"


def task_key(task: Task) -> str:
    """Cache key of ``task``: SHA-256 of function name, hash inputs and :func:`code_id`."""
    ident = (task.fn.__module__, task.fn.__qualname__,
             dict(task.kwargs) if task.key is None else task.key, code_id())
    return hashlib.sha256(pickle.dumps(ident, protocol=4)).hexdigest()


def _call(fn: Callable[..., Any], kwargs: Mapping[str, Any]) -> tuple[bool, Any]:
    """Run one task; ``(True, value)`` or ``(False, one-line error)``. The same function runs
    in-process and in Ray workers, so a failure reads the same either way."""
    try:
        return True, fn(**kwargs)
    except Exception as exc:
        msg = " ".join(str(exc).split()) or repr(exc)
        return False, f"{type(exc).__name__}: {msg}"


class Progress:
    """Plain-text progress bar on ``stream`` (default stderr); silent unless ``enabled`` and
    the stream is a terminal."""

    def __init__(self, total: int, label: str = "", *, enabled: bool = True,
                 stream: TextIO | None = None, width: int = 30):
        self.stream = sys.stderr if stream is None else stream
        self.on = bool(enabled and total and getattr(self.stream, "isatty", lambda: False)())
        self.total, self.label, self.width = total, label, width
        self.done = self.cached = self.failed = 0

    def update(self, result: TaskResult) -> None:
        """Count one finished task and redraw."""
        self.done += 1
        self.cached += result.cached
        self.failed += not result.ok
        if self.on:
            n = self.width * self.done // self.total
            self.stream.write(f"\r{self.label}[{'#' * n}{' ' * (self.width - n)}] "
                              f"{self.done}/{self.total} done, {self.cached} cached, "
                              f"{self.failed} failed")
            self.stream.flush()

    def close(self) -> None:
        """End the bar's line."""
        if self.on:
            self.stream.write("\n")
            self.stream.flush()


class Runner:
    """Runs :class:`Task` lists in-process or on Ray, with a result cache (module docstring).

    Args:
        workers: Ray workers on this machine (None or 1: in-process).
        ray_address: address of an existing Ray cluster (``ray.init(address=...)``).
        cache_dir: folder of cached results (None: no cache).
        quiet: no progress bar.
        label: progress bar prefix.
        use_ray: force Ray (e.g. one Ray worker, for a benchmark) or in-process; None: Ray
            exactly when ``workers`` > 1 or ``ray_address`` is given.

    ``close()`` (or leaving a ``with`` block) shuts down a Ray instance this runner started.
    """

    def __init__(self, workers: int | None = None, ray_address: str | None = None,
                 cache_dir: str | os.PathLike[str] | None = None, quiet: bool = False,
                 label: str = "", use_ray: bool | None = None):
        if workers is not None and workers < 1:
            raise ParameterError(f"--workers: must be >= 1, got {workers}")
        self.workers, self.ray_address = workers or 1, ray_address
        self.use_ray = (bool(ray_address) or self.workers > 1) if use_ray is None else use_ray
        self._ray_started = False
        if self.use_ray and not ray_available():
            what = (f"--ray-address {ray_address}" if ray_address
                    else f"--workers {workers}")
            raise ParameterError(f"{what} needs Ray, which is not installed: {CLUSTER_HINT}")
        self.cache = None if cache_dir is None else Path(cache_dir).expanduser()
        if self.cache is not None:
            from wmr_model.io.files import prepare_output_dir

            prepare_output_dir(self.cache, "--cache-dir")
        self.quiet, self.label = quiet, label
        self.stats = RunStats()

    def __enter__(self) -> Runner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        """Start (or join) Ray now if this runner uses it; else nothing. :meth:`run` calls it
        when there is work for Ray; a Ray instance already running in this process is used."""
        if not self.use_ray:
            return
        import ray

        if not ray.is_initialized():
            kw: dict[str, Any] = {"runtime_env": {"env_vars": dict(WORKER_ENV)},
                                  "include_dashboard": False, "logging_level": "ERROR",
                                  "log_to_driver": False}
            if self.ray_address:
                ray.init(address=self.ray_address, **kw)
            else:
                ray.init(num_cpus=self.workers, **kw)
            self._ray_started = True

    def close(self) -> None:
        """Shut down the Ray instance this runner started (if any)."""
        if self._ray_started:
            import ray

            ray.shutdown()
            self._ray_started = False

    @property
    def mode(self) -> str:
        """``"in-process"``, ``"ray (N workers)"`` or ``"ray cluster ADDR"``."""
        if self.ray_address:
            return f"ray cluster {self.ray_address}"
        return f"ray ({self.workers} workers)" if self.use_ray else "in-process"

    def _load(self, key: str) -> tuple[bool, Any]:
        if self.cache is None:
            return False, None
        f = self.cache / f"{key}.pkl"
        try:
            with open(f, "rb") as fh:
                return True, pickle.load(fh)
        except FileNotFoundError:
            return False, None
        except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError):
            return False, None  # a torn or stale entry: run the task again

    def _store(self, key: str, value: Any) -> None:
        if self.cache is None:
            return
        tmp = self.cache / f".{key}.{os.getpid()}.tmp"
        with open(tmp, "wb") as fh:
            pickle.dump(value, fh, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, self.cache / f"{key}.pkl")

    def run(self, tasks: Sequence[Task]) -> list[TaskResult]:
        """Run ``tasks``; results in task order (cached ones are not run again)."""
        self.stats = RunStats(tasks=len(tasks))
        bar = Progress(len(tasks), self.label, enabled=not self.quiet)
        out: list[TaskResult | None] = [None] * len(tasks)
        keys = [task_key(t) if self.cache is not None else "" for t in tasks]
        todo = []
        for i, t in enumerate(tasks):
            hit, value = self._load(keys[i])
            if hit:
                res = TaskResult(t.name, True, value, cached=True)
                out[i] = res
                self.stats.cached += 1
                bar.update(res)
            else:
                todo.append(i)
        try:
            finished = (self._run_ray(tasks, todo) if self.use_ray and todo
                        else ((i, _call(tasks[i].fn, tasks[i].kwargs)) for i in todo))
            for i, (ok, value) in finished:
                self.stats.executed += 1
                if ok:
                    self._store(keys[i], value)
                    res = TaskResult(tasks[i].name, True, value)
                else:
                    self.stats.failed += 1
                    res = TaskResult(tasks[i].name, False, error=value)
                out[i] = res
                bar.update(res)
        finally:
            bar.close()
        return [r for r in out if r is not None]

    def _run_ray(self, tasks: Sequence[Task], todo: list[int]):
        """Yield ``(index, (ok, value))`` as Ray tasks finish."""
        import ray

        self.start()
        remote = ray.remote(num_cpus=1, max_retries=0)(_call)
        pending = {remote.remote(tasks[i].fn, dict(tasks[i].kwargs)): i for i in todo}
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                i = pending.pop(ref)
                try:
                    yield i, ray.get(ref)
                except Exception as exc:
                    yield i, (False, f"{type(exc).__name__}: {' '.join(str(exc).split())}")
