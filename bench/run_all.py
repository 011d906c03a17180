"""Run every benchmark script in bench/ (``make bench``); each prints its own table."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

here = Path(__file__).resolve().parent
for script in sorted(here.glob("bench_*.py")):
    print(f"\n===== {script.name} =====", flush=True)
    sys.argv = [str(script)]
    runpy.run_path(str(script), run_name="__main__")
