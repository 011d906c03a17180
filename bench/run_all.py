"""Run every benchmark script in bench/ (``make bench``); each prints its own table.

A script that ends with ``raise SystemExit(main())`` (or ``sys.exit``) ends only itself: the
others still run, and the exit status is that of the first script that failed.
"""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

here = Path(__file__).resolve().parent
failed: list[str] = []
for script in sorted(here.glob("bench_*.py")):
    print(f"\n===== {script.name} =====", flush=True)
    sys.argv = [str(script)]
    try:
        runpy.run_path(str(script), run_name="__main__")
    except SystemExit as stop:
        if stop.code not in (None, 0):
            print(f"{script.name}: exited with {stop.code}", file=sys.stderr, flush=True)
            failed.append(script.name)
if failed:
    print(f"run_all: {len(failed)} benchmark(s) failed: {', '.join(failed)}", file=sys.stderr)
    sys.exit(1)
