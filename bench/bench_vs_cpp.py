"""Our speed against the thesis' C++ library, corrected for the machine of the day (issue 22).

The C++ figures (``wmr bench``'s "C++ here" column, PROVENANCE.md of the benchmark terrains)
were measured once, on one machine of this class, interleaved with ``wmr bench`` of the package
as it then was: main at :data:`ANCHOR_COMMIT`, whose figures that day were
:data:`ANCHOR_THEN` (issue 22's table). That the table came from this commit is inferred, not
recorded: it is the last commit before the day of the rebuild, and on 2026-11-28 its five
figures ran at 0.96-0.99 of the table's, one factor for kinematics and dynamics alike.
Machines of this class differ from day to day by more than 2x (seen across sessions), so
today's figure set against that day's C++ figure says as much about the machine as about the
code. This script measures the day's machine with the anchor
itself: it checks :data:`ANCHOR_COMMIT` out into a temporary git worktree and runs its ``wmr
bench --only kinematic,dynamic --json`` and this tree's, alternately, ``--rounds`` times (after
one warm-up run each that compiles). Per figure (Zoë, ten terrains, 10 s, Euler; real-time
factors, medians over the rounds):

* ``machine`` = anchor today / anchor that day (1: the day's machine runs the anchor as fast);
* ``C++ today`` = the C++ figure x ``machine``: the C++ library's expected speed today, assuming
  it scales with the machine as the anchor's compiled code does;
* ``ratio`` = ours today / C++ today (>= 1: at least as fast, issue 22's criterion);
  ``paired``: the median over the rounds of the same ratio from each round's two runs alone
  (they run back to back, so a drifting load touches both alike).

For the piecewise-linear and Pacejka models (``LIKE_FOR_LIKE``) "ours" is this tree's run with
the C++ library's own contact parameters, the workload of its figures (``wmr bench``'s rows
with them); a line "(ours)" under each gives our default parameters against the same C++
figure, for reference. The machine factor of those rows comes from the anchor's runs with our
parameters: it measures the machine, not the workload.

Prints numbers, asserts nothing. Needs the git history (a clone has it) and ~5 min for the
anchor's first compile. Run: ``.venv/bin/python bench/bench_vs_cpp.py [--rounds 3] [--json]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from wmr_model.cli.bench import CPP_REAL_TIME, LIKE_FOR_LIKE

ROOT = Path(__file__).resolve().parents[1]

#: main when the C++ library was rebuilt and measured beside ``wmr bench`` (2026-11-25).
ANCHOR_COMMIT = "532d43f"
#: ``wmr bench`` of :data:`ANCHOR_COMMIT` that day (issue 22's table), x real time; keys as
#: :data:`wmr_model.cli.bench.CPP_REAL_TIME`.
ANCHOR_THEN: dict[tuple[str, float], float] = {
    ("kinematic", 0.04): 9491.0, ("kinematic", 0.10): 18291.0, ("pacejka", 0.04): 1336.0,
    ("ishigami", 0.04): 1118.0, ("piecewise_linear", 0.04): 1186.0}


def figures(result: dict) -> dict[tuple[str, float], float]:
    """Real-time factors of the compared figures in a ``wmr bench --json`` document: the
    kinematic rows and the dynamic section's plain rows (without options), where a tree has
    them the rows with the C++ library's contact parameters instead for the models of
    :data:`~wmr_model.cli.bench.LIKE_FOR_LIKE` (the anchor has none: its plain rows measure
    the machine). The plain rows those replace are kept under the key ``(model, dt,
    "ours")``."""
    out: dict[tuple, float] = {}
    for r in result["kinematic"]["rows"]:
        out[("kinematic", round(float(r["dt"]), 2))] = float(r["real_time_factor"])
    for r in result["dynamic"]["rows"]:
        if not r.get("options"):
            out[(r["contact_model"], round(float(r["dt"]), 2))] = float(r["real_time_factor"])
    for r in result["dynamic"].get("library_rows", []):
        key = (r["contact_model"], round(float(r["dt"]), 2))
        if key in out:
            out[(*key, "ours")] = out[key]
        out[key] = float(r["real_time_factor"])
    return {k: v for k, v in out.items() if k[:2] in CPP_REAL_TIME}


def run_bench(tree: Path, shared: Path) -> dict[tuple[str, float], float]:
    """One ``wmr bench --only kinematic,dynamic --json`` of the package in ``tree``."""
    env = dict(os.environ, PYTHONPATH=str(tree), WMR_SHARED=str(shared))
    done = subprocess.run([sys.executable, "-m", "wmr_model", "bench", "--only",
                           "kinematic,dynamic", "--json"], cwd=tree, env=env,
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"bench_vs_cpp: wmr bench in {tree} failed ({done.returncode}): "
                         f"{done.stderr.strip().splitlines()[-1:]}")
    return figures(json.loads(done.stdout))


def compare(rounds: int) -> dict:
    """Run the anchor and this tree alternately; the table's numbers (see the module doc)."""
    anchor = ANCHOR_COMMIT
    with tempfile.TemporaryDirectory(prefix="wmr-anchor-") as tmp:
        tree = Path(tmp) / "anchor"
        made = subprocess.run(["git", "worktree", "add", "--detach", "-q", str(tree), anchor],
                              cwd=ROOT, capture_output=True, text=True, check=False)
        if made.returncode != 0:
            raise SystemExit(f"bench_vs_cpp: cannot check out the anchor {anchor} (needs the "
                             f"git history of a clone): {made.stderr.strip()}")
        # the anchor reads the benchmark terrains from $WMR_SHARED/data/wmrde_terrains
        shared = Path(tmp) / "shared"
        (shared / "data").mkdir(parents=True)
        (shared / "data" / "wmrde_terrains").symlink_to(ROOT / "wmr_model" / "data"
                                                       / "wmrde_terrains")
        try:
            run_bench(tree, shared)  # warm-up: compiles
            run_bench(ROOT, shared)
            old: list[dict] = []
            new: list[dict] = []
            for _ in range(rounds):
                old.append(run_bench(tree, shared))
                new.append(run_bench(ROOT, shared))
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT,
                           check=False)
    rows = []
    for key, cpp in CPP_REAL_TIME.items():
        a_today = statistics.median(r[key] for r in old)
        ours = statistics.median(r[key] for r in new)
        machine = a_today / ANCHOR_THEN[key]
        cpp_today = cpp * machine
        # each round's pair alone (run back to back, so the least touched by drifting load)
        paired = statistics.median(n[key] / (cpp * o[key] / ANCHOR_THEN[key])
                                   for o, n in zip(old, new))
        rows.append({"figure": key[0], "dt": key[1], "anchor_then": ANCHOR_THEN[key],
                     "anchor_today": a_today, "machine": machine, "cpp_then": cpp,
                     "cpp_today": cpp_today, "ours_today": ours, "ratio": ours / cpp_today,
                     "paired_ratio": paired, "parameters": "library" if key[0] in LIKE_FOR_LIKE
                     else "ours",
                     "anchor_rounds": [r[key] for r in old], "ours_rounds": [r[key] for r in new]})
        own = (*key, "ours")
        if all(own in r for r in new):  # the same model with our parameters, for reference
            ours = statistics.median(r[own] for r in new)
            paired = statistics.median(n[own] / (cpp * o[key] / ANCHOR_THEN[key])
                                       for o, n in zip(old, new))
            rows.append({**rows[-1], "ours_today": ours, "ratio": ours / cpp_today,
                         "paired_ratio": paired, "parameters": "ours",
                         "ours_rounds": [r[own] for r in new]})
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return {"anchor": anchor, "rounds": rounds, "load_after": load, "rows": rows}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", action="store_true", help="print one JSON document instead")
    args = ap.parse_args(argv)
    res = compare(max(args.rounds, 1))
    if args.json:
        print(json.dumps(res))
        return 0
    print(f"Zoë, 10 terrains, 10 s; x real time, medians of {res['rounds']} interleaved rounds; "
          f"anchor {res['anchor']}; load average after {res['load_after']:.2f}")
    print(f"{'figure':<38s}{'anchor then':>12s}{'today':>9s}{'machine':>9s}"
          f"{'C++ then':>10s}{'C++ today':>11s}{'ours today':>12s}{'ratio':>7s}{'paired':>8s}")
    for r in res["rows"]:
        name = r["figure"] + " dt " + format(r["dt"], ".2f")
        if r["figure"] in LIKE_FOR_LIKE:
            name += " (C++ params)" if r["parameters"] == "library" else " (ours)"
        print(f"{name:<38s}{r['anchor_then']:>12,.0f}"
              f"{r['anchor_today']:>9,.0f}{r['machine']:>9.3f}{r['cpp_then']:>10,.0f}"
              f"{r['cpp_today']:>11,.0f}{r['ours_today']:>12,.0f}{r['ratio']:>7.2f}"
              f"{r['paired_ratio']:>8.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
