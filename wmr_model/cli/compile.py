"""``wmr compile``: build the compiled-kernel cache before the nodes or a planner need it."""

from __future__ import annotations

import argparse
import sys
from typing import Any

__all__ = ["register", "run"]


def register(subparsers: Any) -> None:
    """Add the ``compile`` subcommand."""
    from wmr_model.cli._output import add_json_flag

    p = subparsers.add_parser(
        "compile",
        help="compile the kernels into the on-disk cache (minutes once, seconds after)",
        description=(
            "Run one tiny call of every product path (kinematics, prediction, odometry, "
            "dynamics, controllers) so that their compiled kernels are in the on-disk cache: "
            "the first node start or planner request after an install or update then loads "
            "them in seconds instead of compiling for minutes. Groups run in parallel "
            "processes. Exit 0 when every group ran, 1 when one failed (its error is printed)."
        ),
    )
    p.add_argument("--jobs", "-j", type=int, default=None, metavar="N",
                   help="worker processes (default: one per group, at most the CPU count)")
    p.add_argument("--group", action="append", default=None, metavar="NAME",
                   help="only this warm-up group (repeatable): kinematic, dynamic, planner")
    p.add_argument("--vehicle", default="zoe", metavar="FILE_OR_NAME",
                   help="vehicle the calls use (default zoe; kernels are shared by all)")
    add_json_flag(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run the groups; one line per group as it ends, then the cache folder."""
    import time

    from wmr_model._jit import CACHE_DIR, JIT_ENABLED
    from wmr_model.cli._output import emit
    from wmr_model.io.vehicles import load_vehicle
    from wmr_model.pipelines.warmup import GroupResult, compile_kernels

    load_vehicle(args.vehicle)  # a bad vehicle is a one-line error (exit 2) before any work
    quiet = bool(getattr(args, "json", False))

    def report(r: GroupResult) -> None:
        if not quiet:
            state = f"failed: {r.error}" if r.error else "ready"
            print(f"{r.group}: {state} ({r.seconds:.1f} s)", flush=True)

    t0 = time.perf_counter()
    results = compile_kernels(args.group, args.vehicle, args.jobs, report)
    total = time.perf_counter() - t0
    data = {"jit": JIT_ENABLED, "cache": CACHE_DIR, "seconds": total,
            "groups": [{"group": r.group, "seconds": r.seconds, "error": r.error}
                       for r in results]}
    if not JIT_ENABLED:
        text = "numba is not importable (or WMR_DISABLE_JIT is set): nothing to compile"
    else:
        text = f"kernels cached in {CACHE_DIR or 'numba default'} ({total:.1f} s)"
    emit(args, data, text)
    failed = [r for r in results if r.error]
    if failed:
        print(f"wmr: error: warm-up group {failed[0].group} failed: {failed[0].error}",
              file=sys.stderr)
        return 1
    return 0
