"""``wmr bench``: time the standard scenarios and print them beside the thesis' figures.

Sections (``--only``, comma-separated; default all):

  kinematic    Zoë, 1 m/s straight, 10 s, wmrde rough benchmark terrains (RMS 0.15 m, corr
               0.8 m), stabilized-DAE kinematics, Euler, dt 0.01/0.04/0.10: real-time factor
               (Table 2.6 "kinematic").
  enhanced     the same runs with enhanced kinematics and the stability margin (§2.3).
  dynamic      the same runs with the dynamic model: piecewise-linear, Pacejka and Ishigami
               contact at dt 0.01/0.04/0.10 (Table 2.6); --quick: Pacejka at dt 0.04 only.
               Also Pacejka at dt 0.04 with the speed-ups of §2.4.4 that trade fidelity for
               time (fused-body bias force (2.89), one Newton step per time step, warm-started
               wheel collision), with how far they move the end positions from the full model.
               And piecewise-linear and Pacejka at dt 0.04 with the C++ library's own contact
               parameters (--quick: Pacejka): the workload of its figures, which hold the
               targets of those two models (LIKE_FOR_LIKE).
  batch        enhanced-kinematic batched prediction with covariance, Zoë on rough terrain,
               5 s at dt 0.04, N = 1, 10, 100, 1000, 10000 constant-twist candidates (--quick:
               up to 1000): candidate-steps/s; and N = 1000 keeping the end states only
               (predict(every=T)).
  odometry     Odometry3D on the Warthog, 1 kHz encoders and gyro: µs per encoder message.
  calibration  one IPEM online update (2 s interval, 6 slip + 3 Q' parameters).

Each figure is the best of a few repeats after a warm-up call (compilation excluded), averaged
over the terrains. "C++ here" is the thesis' C++ library rebuilt on this machine class in its
fastest documented configuration (wmr_model/data/wmrde_terrains/PROVENANCE.md): beside each
figure it has, the table prints both as µs per step and the ratio C++ time / ours (>= 1: at
least as fast). The targets are that library's figures (kinematic dt 0.04 and 0.10, dynamic
Pacejka, Ishigami and linear contact at dt 0.04), 1000 candidates x 5 s in <= 0.10 s and
odometry <= 1 ms per update. Timings are reported, never asserted; --quick uses fewer terrains
and repeats.
"""

from __future__ import annotations

import argparse
import math
import time
from typing import Any

__all__ = ["SECTIONS", "TARGETS", "CPP_REAL_TIME", "CPP_US_PER_STEP", "DYNAMIC_SPEEDUPS",
           "LIKE_FOR_LIKE", "register", "run"]

#: Benchmark sections, in the order they run and print.
SECTIONS: tuple[str, ...] = ("kinematic", "enhanced", "dynamic", "batch", "odometry",
                              "calibration")

#: The thesis' C++ library on this machine class, x real time (Zoë, the ten benchmark terrains,
#: 10 s, Euler; PROVENANCE.md of the terrains): (section or contact model, dt) -> factor. Its
#: "linear spring-damper + Coulomb" contact is compared with our piecewise-linear model.
CPP_REAL_TIME: dict[tuple[str, float], float] = {
    ("kinematic", 0.04): 11655.0, ("kinematic", 0.10): 29220.0, ("pacejka", 0.04): 3796.0,
    ("ishigami", 0.04): 4169.0, ("piecewise_linear", 0.04): 5692.0}
#: The same as µs per step (dt / factor): 3.43, 3.42, 10.5, 9.6 and 7.0.
CPP_US_PER_STEP: dict[tuple[str, float], float] = {
    k: k[1] / f * 1e6 for k, f in CPP_REAL_TIME.items()}

#: Performance targets: key -> (description, comparison, threshold, unit); the real-time
#: factors are the C++ library's.
TARGETS: dict[str, tuple[str, str, float, str]] = {
    **{f"{what}_zoe_dt{dt:.2f}": (f"{what} Zoe dt {dt:.2f}", ">=", f, "x real time")
       for (what, dt), f in CPP_REAL_TIME.items()},
    "batch_1000x5s": ("batch 1000 x 5 s end states, float32, wall", "<=", 0.10, "s"),
    "odometry_update": ("odometry per update", "<=", 1000.0, "us"),
}

_CPP_LABEL = {"piecewise_linear": " (linear + Coulomb)", "ishigami": " (lookup table)"}
# A general physics engine (MuJoCo, heightfield terrain) on the same rover and terrain.
_PHYSICS_ENGINE_HERE = "50-90"
# C++ run one candidate at a time, kinematic dt 0.04: candidate-steps/s.
_CPP_ONE_BY_ONE_STEPS_PER_S = 1e6 / CPP_US_PER_STEP[("kinematic", 0.04)]

#: The §2.4.4 speed-ups of the "dynamic" section's extra row (simulate_dynamics keywords).
DYNAMIC_SPEEDUPS: dict[str, Any] = {"fused_bias": True, "single_step": True, "collision": "warm"}

_BATCH_SIZES = (1, 10, 100, 1000, 10000)
_DYN_BATCH = 16  # candidates of the dynamic batch row (Pacejka, 5 s at dt 0.04)
_KIN_STEPS = (0.01, 0.04, 0.10)
_DYN_MODELS = ("piecewise_linear", "pacejka", "ishigami")
#: Contact models whose C++ figure is compared with our run on the same workload: Zoë with the
#: C++ library's own contact parameters
#: (:func:`wmr_model.experiments.dynamic.zoe_library_contact_params`; our defaults saturate
#: friction at ~0.01 m/s of slip, the library's at ~0.2 m/s). Their rows with our default
#: parameters are printed too, beside the C++ figure, but the target is the like-for-like row.
#: The library has no Ishigami parameters we could take: that row uses ours.
LIKE_FOR_LIKE = ("piecewise_linear", "pacejka")


def register(subparsers: Any) -> None:
    """Add the ``bench`` subcommand."""
    from wmr_model.cli._output import add_json_flag

    p = subparsers.add_parser(
        "bench",
        help="time the standard scenarios (real-time factors, batch throughput, latency)",
        description=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--quick", action="store_true",
                   help="fewer terrains, repeats and simulated seconds (about a minute)")
    p.add_argument("--only", default=None, metavar="LIST",
                   help="comma-separated sections to run: " + ",".join(SECTIONS))
    p.add_argument("--out", default=None, metavar="FILE",
                   help="also write the results as JSON to FILE")
    add_json_flag(p)
    p.set_defaults(func=run)


def _sections(text: str | None) -> list[str]:
    from wmr_model.errors import ParameterError

    if text is None:
        return list(SECTIONS)
    names = [t.strip() for t in text.split(",") if t.strip()]
    bad = [n for n in names if n not in SECTIONS]
    if bad or not names:
        raise ParameterError(f"--only: unknown section(s) {', '.join(bad) or '(none)'}; "
                             f"choose from {', '.join(SECTIONS)}")
    return [s for s in SECTIONS if s in names]


def _terrains(quick: bool):
    from wmr_model.io.terrain_files import load_wmrde_benchmark_terrains

    terrains = load_wmrde_benchmark_terrains()
    return terrains[:2] if quick else terrains


def _kinematic(quick: bool, method: str = "dae") -> dict:
    from wmr_model.experiments import kinematic as ex
    from wmr_model.io.vehicles import load_vehicle

    terrains = _terrains(quick)
    rows = ex.zoe_kinematic_benchmark(load_vehicle("zoe"), terrains, step_sizes=_KIN_STEPS,
                                      repeats=2 if quick else 5, method=method)
    return {"vehicle": "zoe", "terrains": len(terrains), "rows": rows}


def _enhanced(quick: bool) -> dict:
    return _kinematic(quick, "enhanced")


def _dynamic(quick: bool) -> dict:
    from wmr_model.experiments import dynamic as sc
    from wmr_model.io.vehicles import load_vehicle

    terrains = _terrains(quick)
    model = load_vehicle("zoe")
    rows = sc.zoe_dynamics_benchmark(model, terrains,
                                     contact_models=("pacejka",) if quick else _DYN_MODELS,
                                     step_sizes=(0.04,) if quick else _KIN_STEPS,
                                     repeats=1 if quick else 3)
    fast = sc.zoe_dynamics_benchmark(model, terrains, contact_models=("pacejka",),
                                     step_sizes=(0.04,), repeats=1 if quick else 3,
                                     options=DYNAMIC_SPEEDUPS)[0]
    library = sc.zoe_dynamics_benchmark(
        model, terrains, contact_models=("pacejka",) if quick else LIKE_FOR_LIKE,
        step_sizes=(0.04,), repeats=1 if quick else 3,
        options={"contact_params": sc.zoe_library_contact_params(model)})
    for r in (*rows, fast, *library):
        r["real_time_factor"] = 1e3 / r["normalized_time_e3"]
        t = r["thesis_normalized_time_e3"]
        r["thesis_real_time_factor"] = 1e3 / t if t else None
    full = next(r for r in rows if r["contact_model"] == "pacejka" and math.isclose(r["dt"], 0.04))
    moved = [math.dist(a, b) for a, b in zip(fast["end_positions"], full["end_positions"])]
    fast["moved_vs_full_mean_m"] = sum(moved) / len(moved)
    fast["moved_vs_full_max_m"] = max(moved)
    batch = sc.dynamics_batch_throughput(model, terrains[0], candidates=_DYN_BATCH,
                                         repeats=1 if quick else 3, contact_model="pacejka")
    return {"vehicle": "zoe", "terrains": len(terrains), "rows": rows, "speedups": fast,
            "library_rows": library, "batch": batch}


def _batch(quick: bool) -> dict:
    from wmr_model.experiments import kinematic as ex
    from wmr_model.io.vehicles import load_vehicle
    from wmr_model.terrain import surface as tr

    dt, duration = 0.04, 5.0
    model = load_vehicle("zoe")
    terrain = tr.rough(0.15, 0.8, seed=0, x_range=(-10, 10), y_range=(-10, 10))
    sizes = [n for n in _BATCH_SIZES if not (quick and n > 1000)]
    q0, commands, _ = ex.random_twist_candidates(model, terrain, max(sizes), dt, duration)
    kw = dict(fidelity="enhanced", slip_params=ex.BATCH_SLIP, Qprime=ex.BATCH_QPRIME)
    rows = [ex.predict_throughput(model, terrain, q0, commands[:n], dt,
                                  repeat=2 if quick or n > 1000 else 5, **kw)
            for n in sizes]
    # the planner's usual need: end states, covariance and flags only (predict(every=T))
    end_only = ex.predict_throughput(model, terrain, q0, commands[:1000], dt,
                                     repeat=2 if quick else 5, every=commands.shape[1], **kw)
    # the planner precision (float32 lanes): the figure that holds the batch target
    end_only_f32 = ex.predict_throughput(model, terrain, q0, commands[:1000], dt,
                                         repeat=2 if quick else 5, every=commands.shape[1],
                                         precision="float32", **kw)
    return {"vehicle": "zoe", "terrain": "rough(rms=0.15, corr=0.8, seed=0)", "dt": dt,
            "horizon_s": duration, "fidelity": "enhanced", "covariance": True, "rows": rows,
            "end_only_1000": end_only, "end_only_1000_float32": end_only_f32}


def _odometry(quick: bool) -> dict:
    from wmr_model.experiments import kinematic as ex

    return ex.odometry_latency(1000.0, 1000.0, seconds=2.0 if quick else 20.0)


def _calibration(quick: bool) -> dict:
    from wmr_model.experiments import kinematic as ex

    return ex.online_calibration_update_time(duration=10.0 if quick else 120.0)


_RUNNERS = {"kinematic": _kinematic, "enhanced": _enhanced, "dynamic": _dynamic,
            "batch": _batch,
            "odometry": _odometry, "calibration": _calibration}


def _cpp_key(what: str, dt: float) -> tuple[str, float] | None:
    key = (what, round(dt, 2))
    return key if key in CPP_US_PER_STEP else None


def _versus_cpp(result: dict) -> None:
    """Add to every kinematic and dynamic row with a C++ figure our µs per step, the C++ µs
    per step and the ratio C++ / ours (>= 1: at least as fast)."""
    dyn = result.get("dynamic", {})
    rows = [("kinematic", r) for r in result.get("kinematic", {}).get("rows", [])]
    rows += [(r["contact_model"], r) for r in (*dyn.get("rows", []),
                                               *dyn.get("library_rows", []))]
    for what, r in rows:
        r["us_per_step"] = r["dt"] / r["real_time_factor"] * 1e6
        key = _cpp_key(what, r["dt"])
        r["cpp_us_per_step"] = CPP_US_PER_STEP[key] if key else None
        r["ratio_vs_cpp"] = r["cpp_us_per_step"] / r["us_per_step"] if key else None


def _compared_dynamic_rows(dyn: dict) -> list[dict]:
    """The dynamic rows that hold the C++ targets: per contact model with a C++ figure, the
    row with the library's contact parameters for :data:`LIKE_FOR_LIKE` (when run), else the
    row with ours."""
    library = {(r["contact_model"], round(r["dt"], 2)): r for r in dyn.get("library_rows", [])}
    out = []
    for r in dyn.get("rows", []):
        key = _cpp_key(r["contact_model"], r["dt"])
        if key:
            out.append(library.get(key, r) if key[0] in LIKE_FOR_LIKE else r)
    known = {(r["contact_model"], round(r["dt"], 2)) for r in out}
    out += [r for k, r in library.items() if k not in known and _cpp_key(*k)]
    return out


def _targets(result: dict) -> dict:
    measured: dict[str, float] = {}
    for r in result.get("kinematic", {}).get("rows", []):
        if _cpp_key("kinematic", r["dt"]):
            measured[f"kinematic_zoe_dt{r['dt']:.2f}"] = r["real_time_factor"]
    for r in _compared_dynamic_rows(result.get("dynamic", {})):
        measured[f"{r['contact_model']}_zoe_dt{r['dt']:.2f}"] = r["real_time_factor"]
    if "end_only_1000_float32" in result.get("batch", {}):
        measured["batch_1000x5s"] = result["batch"]["end_only_1000_float32"]["wall_s"]
    if "odometry" in result:
        measured["odometry_update"] = result["odometry"]["encoder_us_median"]
    out = {}
    for key, value in measured.items():
        what, op, threshold, unit = TARGETS[key]
        met = value >= threshold if op == ">=" else value <= threshold
        out[key] = {"figure": what, "measured": value, "target": threshold, "comparison": op,
                    "unit": unit, "met": bool(met)}
    return out


def _num(v: float | None, spec: str = ",.0f") -> str:
    return "-" if v is None or not math.isfinite(v) else format(v, spec)


def _table(result: dict) -> str:
    rows: list[tuple[str, ...]] = []
    tg = result["targets"]

    def target_cols(key: str) -> tuple[str, str]:
        if key not in tg:
            return "", ""
        t = tg[key]
        spec = ".2f" if t["unit"] == "s" else ",.0f"
        return f"{t['comparison']} {format(t['target'], spec)}", "yes" if t["met"] else "NO"

    def plain(figure: str, ours: str, cpp: str = "-") -> None:
        rows.append((figure, ours, "-", cpp, "", "", "", "", ""))

    compared = [id(r) for r in _compared_dynamic_rows(result.get("dynamic", {}))]

    def timed(figure: str, what: str, r: dict, thesis: float | None) -> None:
        """A real-time-factor row with its µs per step beside the C++ library's; the target
        columns on the row compared with it (the kinematic rows, the dynamic rows of
        :func:`_compared_dynamic_rows`)."""
        key = _cpp_key(what, r["dt"])
        cpp = "-"
        if key:
            cpp = _num(CPP_REAL_TIME[key]) + _CPP_LABEL.get(what, "")
        holds = key and (what == "kinematic" or id(r) in compared)
        rows.append((figure, _num(r["real_time_factor"]), _num(thesis), cpp,
                     _num(r["us_per_step"], ".2f"), _num(r["cpp_us_per_step"], ".2f"),
                     _num(r["ratio_vs_cpp"], ".2f"),
                     *target_cols(f"{what}_zoe_dt{r['dt']:.2f}" if holds else "")))

    for r in result.get("kinematic", {}).get("rows", []):
        timed(f"kinematic Zoe dt {r['dt']:.2f} [x real time]", "kinematic", r,
              r["thesis_real_time_factor"])
    for r in result.get("enhanced", {}).get("rows", []):
        plain(f"enhanced Zoe dt {r['dt']:.2f} [x real time]", _num(r["real_time_factor"]))
    for r in result.get("dynamic", {}).get("rows", []):
        timed(f"dynamic {r['contact_model']} Zoe dt {r['dt']:.2f} [x real time]",
              r["contact_model"], r, r["thesis_real_time_factor"])
    for r in result.get("dynamic", {}).get("library_rows", []):
        timed(f"dynamic {r['contact_model']} Zoe dt {r['dt']:.2f}, C++ library's contact "
              "parameters [x real time]", r["contact_model"], r, None)
    if "speedups" in result.get("dynamic", {}):
        r = result["dynamic"]["speedups"]
        plain("dynamic pacejka Zoe dt 0.04, §2.4.4 speed-ups [x real time]",
              _num(r["real_time_factor"]))
        plain("  end position moved from the full model, mean / max [m]",
              f"{_num(r['moved_vs_full_mean_m'], '.4f')} / "
              f"{_num(r['moved_vs_full_max_m'], '.4f')}")
    if "batch" in result.get("dynamic", {}):
        r = result["dynamic"]["batch"]
        one = 1e6 / CPP_US_PER_STEP[("pacejka", 0.04)]
        plain(f"dynamic pacejka batch N={r['candidates']} x 5 s [cand-steps/s]",
              _num(r["batch_candidate_steps_per_s"]), f"~{_num(one)} (1 by 1)")
        plain("  the same one by one (simulate_dynamics) [cand-steps/s]",
              _num(r["single_candidate_steps_per_s"]))
    for r in result.get("batch", {}).get("rows", []):
        plain(f"batch N={r['candidates']} [cand-steps/s]", _num(r["candidate_steps_per_s"]),
              f"~{_num(_CPP_ONE_BY_ONE_STEPS_PER_S)} (1 by 1)")
        if r["candidates"] == 1000:
            plain("batch N=1000 x 5 s wall [s]", _num(r["wall_s"], ".3f"))
    if "end_only_1000" in result.get("batch", {}):
        plain("batch N=1000 x 5 s end states only wall [s]",
              _num(result["batch"]["end_only_1000"]["wall_s"], ".3f"))
    if "end_only_1000_float32" in result.get("batch", {}):
        rows.append(("batch N=1000 x 5 s end states, float32 [s]",
                     _num(result["batch"]["end_only_1000_float32"]["wall_s"], ".3f"), "-", "-",
                     "", "", "", *target_cols("batch_1000x5s")))
    if "odometry" in result:
        o = result["odometry"]
        rows.append(("odometry 1 kHz median [us/update]", _num(o["encoder_us_median"], ",.1f"),
                     "-", "-", "", "", "", *target_cols("odometry_update")))
        plain("odometry 1 kHz p99 [us/update]", _num(o["encoder_us_p99"], ",.1f"))
    if "calibration" in result:
        plain("IPEM online update [ms]", _num(result["calibration"]["online_update_ms"], ",.1f"))
    head = ("figure", "ours", "thesis", "C++ here", "ours us/step", "C++ us/step",
            "C++/ours", "target", "met")
    widths = [max(len(str(r[i])) for r in (head, *rows)) for i in range(len(head))]
    lines = ["  ".join(h.ljust(w) if i == 0 else h.rjust(w)
                       for i, (h, w) in enumerate(zip(r, widths))).rstrip()
             for r in (head, *rows)]
    lines.insert(1, "-" * len(lines[0]))
    info = (f"wmr bench{' --quick' if result['quick'] else ''}: {result['cpus']} CPUs, "
            f"Python {result['python']}, numba JIT {'on' if result['jit'] else 'off'}; "
            f"wall {result['wall_s']:.1f} s")
    notes = ("thesis: Table 2.6 (thesis hardware). C++ here: the thesis' C++ library rebuilt on\n"
             "this machine class, fastest configuration (PROVENANCE.md of the benchmark\n"
             "terrains); C++/ours >= 1 means at least as fast. A general physics engine\n"
             f"(MuJoCo, heightfield terrain) runs {_PHYSICS_ENGINE_HERE}x real time.\n"
             "ours: best of repeats after warm-up, mean over terrains. The "
             f"{' and '.join(LIKE_FOR_LIKE)}\n"
             "targets are held by the rows with the C++ library's own contact parameters\n"
             "(its workload); the rows with ours are for reference. §2.4.4 speed-ups:\n"
             "fused-body bias force (2.89), one Newton step per time step, warm-started wheel\n"
             "collision.")
    return "\n".join([info, "", *lines, "", notes])


def run(args: argparse.Namespace) -> int:
    """Run the selected sections and print the table (or JSON)."""
    import os
    import platform

    from wmr_model._jit import JIT_ENABLED
    from wmr_model.cli._output import emit, write_json

    sections = _sections(args.only)
    t0 = time.perf_counter()
    result: dict[str, Any] = {"quick": bool(args.quick), "sections": sections,
                              "machine": platform.machine(),
                              "python": platform.python_version(), "cpus": os.cpu_count(),
                              "jit": bool(JIT_ENABLED)}
    for name in sections:
        result[name] = _RUNNERS[name](args.quick)
    _versus_cpp(result)
    result["targets"] = _targets(result)
    result["wall_s"] = time.perf_counter() - t0
    if args.out:
        from wmr_model.io.files import atomic_output

        with atomic_output(args.out) as tmp, open(tmp, "w", encoding="utf-8") as f:
            write_json(result, f)
    emit(args, result, _table)
    return 0
