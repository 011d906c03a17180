"""Replay report: Markdown + HTML text and PNG plots (matplotlib, Agg backend, no display).

Plots (each with labelled axes in SI units and a legend):

* ``path.png`` - horizontal path of the reference and every odometry variant (aligned at the
  start like the drift evaluation);
* ``error_time.png`` - horizontal position error of each odometry variant vs time;
* ``parameters.png`` - online estimate of each calibrated parameter vs time with its +-1 sigma
  band, and the true value when known (thesis Fig. 3.5);
* ``scatter.png`` - end-pose position residuals of the converged 3D kin.+ model over the
  evaluation intervals, in the interval's start-heading frame (along/cross track), with the
  sample covariance ellipse and the mean predicted covariance ellipse, both 95 % (Fig. 3.8).
"""

from __future__ import annotations

import html
import math
from pathlib import Path

import numpy as np

__all__ = ["write_report", "table_text", "REPORT_FILES", "write_lane_change_plots",
           "LANE_CHANGE_PLOTS"]

#: Files :func:`write_report` writes.
REPORT_FILES = ("report.md", "report.html", "path.png", "error_time.png", "parameters.png",
                "scatter.png")

#: Chi-square 95 % quantile with 2 dof: scale of the covariance ellipses.
_CHI2_95_2DOF = 5.991464547107979


def _num(v: float) -> str:
    """A table cell: 4 decimals, ``n/a`` for a value the data cannot give (NaN: the yaw of a
    position-only reference)."""
    return f"{v:.4f}" if math.isfinite(v) else "n/a"


def table_text(result, out_of_sample: bool = False) -> list[str]:
    """Table 3.3 as Markdown lines (one column pair per interval length); the in-sample table,
    or with ``out_of_sample`` the one over the intervals after the split."""
    table = getattr(result, "table_oos", {}) if out_of_sample else result.table
    Ls = [L for L in table if table[L]]
    head = "| model | " + " | ".join(f"{L:g} s pos [m] | {L:g} s yaw [rad]" for L in Ls) + " |"
    lines = [head, "|---|" + "---:|---:|" * len(Ls)]
    models = [r[0] for r in table[Ls[0]]] if Ls else []
    for i, m in enumerate(models):
        cells = []
        for L in Ls:
            _, p, y, _ = table[L][i]
            cells += [_num(p), _num(y)]
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    if Ls:
        lines.append("| intervals | " + " | ".join(f"{table[L][0][3]} | "
                                                   for L in Ls) + " |")
    return lines


def _ellipse(C: np.ndarray, n: int = 100) -> np.ndarray:
    w, V = np.linalg.eigh(0.5 * (C + C.T))
    a = np.linspace(0, 2 * math.pi, n)
    circ = np.stack([np.cos(a), np.sin(a)])
    return (V @ (np.sqrt(np.maximum(w, 0) * _CHI2_95_2DOF)[:, None] * circ)).T


def _plots(result, d: Path) -> None:
    """The report's PNG plots (module docstring) in ``d``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    meta = {"Software": None}
    _plot_path(plt, result, d, meta)
    _plot_error_time(plt, result, d, meta)
    _plot_parameters(plt, result, d, meta)
    _plot_scatter(plt, result, d, meta)


def _plot_path(plt, result, d: Path, meta: dict) -> None:
    """``path.png``: reference and odometry paths, aligned at the start."""
    ref = result.reference
    fig, ax = plt.subplots(figsize=(7, 6))
    ax.plot(ref["xy"][:, 0], ref["xy"][:, 1], "k-", lw=2, label=f"reference ({ref['name']})")
    for lab, tr in result.odometry.items():
        if len(tr.aligned_xy):
            ax.plot(tr.aligned_xy[:, 0], tr.aligned_xy[:, 1], lw=1,
                    label=f"{lab} (drift {tr.drift_pct:.2f} %)")
    ax.set_xlabel("x [m]")
    ax.set_ylabel("y [m]")
    ax.set_aspect("equal", adjustable="datalim")
    ax.set_title("Path: reference and odometry (aligned at the start)")
    ax.legend(fontsize=7, loc="best")
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    _savefig(fig, d / "path.png", dpi=110, metadata=meta)
    plt.close(fig)


def _plot_error_time(plt, result, d: Path, meta: dict) -> None:
    """``error_time.png``: horizontal position error of each odometry variant vs time."""
    fig, ax = plt.subplots(figsize=(8, 4))
    for lab, tr in result.odometry.items():
        if len(tr.err):
            ax.plot(tr.err_t, tr.err, lw=1, label=lab)
    ax.set_xlabel("time since bag start [s]")
    ax.set_ylabel("horizontal position error [m]")
    ax.set_title("Odometry error vs reference")
    ax.legend(fontsize=7)
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    _savefig(fig, d / "error_time.png", dpi=110, metadata=meta)
    plt.close(fig)


def _plot_parameters(plt, result, d: Path, meta: dict) -> None:
    """``parameters.png``: online estimates with their +-1 sigma band (Fig. 3.5)."""
    h = result.history
    names = h["names"]
    n = len(names)
    cols = 3
    rows = max(1, math.ceil(n / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(12, 2.6 * rows), squeeze=False)
    for k, name in enumerate(names):
        ax = axes[k // cols][k % cols]
        x, s = h["x"][:, k], h["std"][:, k]
        ax.plot(h["t"], x, "b-", lw=1, label="estimate")
        ax.fill_between(h["t"], x - s, x + s, color="b", alpha=0.2, label="±1σ")
        if name in result.truth:
            ax.axhline(result.truth[name], color="k", ls="--", lw=1, label="truth")
        from wmr_model.parameters import get_spec

        unit = get_spec(name).unit
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("time [s]", fontsize=8)
        ax.set_ylabel(f"value [{unit}]", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(True, alpha=0.3)
        if k == 0:
            ax.legend(fontsize=7)
    for k in range(n, rows * cols):
        axes[k // cols][k % cols].axis("off")
    fig.suptitle("Online calibration of 3D kin.+ (Fig. 3.5 style)")
    fig.tight_layout()
    _savefig(fig, d / "parameters.png", dpi=100, metadata=meta)
    plt.close(fig)


def _plot_scatter(plt, result, d: Path, meta: dict) -> None:
    """``scatter.png``: end-pose residuals in the start-heading frame with the sample and mean
    predicted 95 % covariance ellipses (Fig. 3.8)."""
    sc = result.scatter
    fig, ax = plt.subplots(figsize=(6, 6))
    if sc:
        r, R = sc["r"], sc["R"]
        ax.plot(r[:, 0], r[:, 1], ".", ms=4, color="tab:blue", label=f"{len(r)} intervals")
        if len(r) > 2:
            e = _ellipse(np.cov(r.T)) + r.mean(axis=0)
            ax.plot(e[:, 0], e[:, 1], "b-", label="sample covariance (95 %)")
        e = _ellipse(R.mean(axis=0))
        ax.plot(e[:, 0], e[:, 1], "r--", label="predicted covariance (95 %)")
        ax.set_title(f"End-pose residuals, {sc['length']:g} s intervals, 3D kin.+ converged")
    ax.set_xlabel("along-track residual [m]")
    ax.set_ylabel("cross-track residual [m]")
    ax.set_aspect("equal", adjustable="datalim")
    ax.axhline(0, color="gray", lw=0.5)
    ax.axvline(0, color="gray", lw=0.5)
    ax.legend(fontsize=8)
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    _savefig(fig, d / "scatter.png", dpi=110, metadata=meta)
    plt.close(fig)


def _markdown(result) -> str:
    L = ["# wmr replay report", "", f"- bag: `{result.bag}`", f"- vehicle: {result.vehicle}",
         "- topics: " + ", ".join(f"{k} `{v}`" for k, v in result.topics.items()),
         f"- replayed: {result.duration:.1f} s of data", ""]
    sp = getattr(result, "split", {})
    if sp and getattr(result, "table_oos", {}):
        L += ["## Out-of-sample interval prediction errors (headline)", "",
              f"Intervals starting after the first {sp['fraction']:g} of the log "
              f"({sp['t_split']:.1f} s); *calibrated* = the estimate of the "
              f"{sp['calibration_intervals']} updates before the split, frozen; *online* = the "
              "estimate of the updates before each interval (still learning).", ""]
        L += table_text(result, out_of_sample=True) + [""]
    L += ["## In-sample interval prediction errors (thesis Table 3.3)", "",
          "Mean horizontal position error and mean absolute yaw error of the predicted end "
          "pose over the whole log; *online* uses only the estimate of intervals processed "
          "before each interval, *converged* the final estimate (scored on the data it was "
          "fitted to).", ""]
    L += table_text(result)
    L += ["", "## Odometry drift", "",
          f"Reference: {result.reference['name']}. Planar alignment at the start of each "
          "stretch of the reference's trusted path (reference faults cut it); drift = summed "
          "end-point horizontal errors of the stretches / their summed path length.", "",
          "| odometry | end error [m] | path [m] | drift [%] | stretches |",
          "|---|---:|---:|---:|---:|"]
    for lab, tr in result.odometry.items():
        L.append(f"| {lab} | {tr.end_error:.3f} | {tr.length:.1f} | {tr.drift_pct:.2f} | "
                 f"{tr.segments} |")
    L += ["", "## Calibrated parameters (3D kin.+, online, final)", "",
          "| parameter | start | estimate | 1σ | truth | (est - truth)/σ |",
          "|---|---:|---:|---:|---:|---:|"]
    z = result.z_scores()
    for n, v in result.estimate.items():
        t = result.truth.get(n)
        start = result.nominal.get(n, math.nan)
        L.append(f"| {n} | {start:.4g} | {v:.4g} | {result.std[n]:.2g} | "
                 f"{'' if t is None else f'{t:.4g}'} | "
                 f"{'' if n not in z else f'{z[n]:+.2f}'} |")
    L += ["", f"{result.planar}+: " + ", ".join(f"{n} = {v:.4g} ± {result.dd_std[n]:.2g}"
                                             for n, v in result.dd_estimate.items()), ""]
    L += ["## Notes", ""] + [f"- {n}" for n in result.notes] + [
        f"- {result.calibration_intervals} calibration intervals, {result.rejected} rejected",
        ""]
    L += ["## Plots", "", "![path](path.png)", "", "![error vs time](error_time.png)", "",
          "![parameters](parameters.png)", "", "![interval scatter](scatter.png)", ""]
    return "\n".join(L)


def _html(md: str) -> str:
    """Minimal Markdown -> HTML for the report's own constructs (headings, lists, tables,
    images, paragraphs)."""
    out = ["<!DOCTYPE html>", "<html><head><meta charset='utf-8'><title>wmr replay report"
           "</title><style>body{font-family:sans-serif;max-width:1100px;margin:auto}"
           "table{border-collapse:collapse}td,th{border:1px solid #999;padding:2px 6px}"
           "td{text-align:right}td:first-child{text-align:left}</style></head><body>"]
    in_table = in_list = False
    for line in md.splitlines():
        esc = html.escape(line)
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            if all(set(c) <= set("-:") for c in cells):
                continue
            if not in_table:
                out.append("<table>")
                in_table = True
                out.append("<tr>" + "".join(f"<th>{html.escape(c)}</th>" for c in cells)
                           + "</tr>")
            else:
                out.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells)
                           + "</tr>")
            continue
        if in_table:
            out.append("</table>")
            in_table = False
        if line.startswith("- "):
            if not in_list:
                out.append("<ul>")
                in_list = True
            out.append(f"<li>{html.escape(line[2:])}</li>")
            continue
        if in_list:
            out.append("</ul>")
            in_list = False
        if line.startswith("## "):
            out.append(f"<h2>{html.escape(line[3:])}</h2>")
        elif line.startswith("# "):
            out.append(f"<h1>{html.escape(line[2:])}</h1>")
        elif line.startswith("!["):
            alt, src = line[2:].split("](", 1)
            out.append(f"<p><img src='{html.escape(src.rstrip(')'))}' alt='{html.escape(alt)}'"
                       " style='max-width:100%'></p>")
        elif line.strip():
            out.append(f"<p>{esc}</p>")
    if in_table:
        out.append("</table>")
    if in_list:
        out.append("</ul>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def _savefig(fig, path: Path, **kw) -> None:
    """``fig.savefig`` through a temporary file and a rename (:mod:`wmr_model.io.files`)."""
    from wmr_model.io.files import atomic_output

    with atomic_output(path) as tmp:
        fig.savefig(tmp, format=path.suffix.lstrip(".") or "png", **kw)


def write_report(result, out_dir: str | Path, *, plots: bool = True) -> dict[str, Path]:
    """Write :data:`REPORT_FILES` for a :class:`wmr_model.pipelines.replay.ReplayResult` into
    ``out_dir``; returns name -> path."""
    from wmr_model.io.files import prepare_output_dir, write_text_atomically

    d = prepare_output_dir(out_dir, "report folder")
    md = _markdown(result)
    write_text_atomically(d / "report.md", md)
    write_text_atomically(d / "report.html", _html(md))
    if plots:
        _plots(result, d)
    return {n: d / n for n in REPORT_FILES if (d / n).exists()}


#: Files :func:`write_lane_change_plots` writes (seed 002, Figs. 11-14).
LANE_CHANGE_PLOTS = ("lane_change_speed.png", "lane_change_attitude.png",
                     "lane_change_lateral.png", "lane_change_yaw_rate.png",
                     "lane_change_loads.png")


def write_lane_change_plots(runs, out_dir: str | Path) -> dict[str, Path]:
    """Scenario 2 plots of seed 002 for one or more :class:`wmr_model.experiments.hmmwv.HmmwvRun`.

    Speed (Fig. 11), roll/pitch/yaw (Fig. 12), lateral acceleration (Fig. 13), yaw rate
    (Fig. 14), plus wheel loads and suspension travel; each run (e.g. the closed-chain and
    embedded models) is one line per panel. Returns name -> path of :data:`LANE_CHANGE_PLOTS`.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from wmr_model.io.files import prepare_output_dir

    d = prepare_output_dir(out_dir, "plot folder")
    meta = {"Software": None}
    styles = ("-", "--", ":", "-.")

    def save(fig, name: str) -> None:
        fig.tight_layout()
        _savefig(fig, d / name, dpi=110, metadata=meta)
        plt.close(fig)

    fig, ax = plt.subplots(figsize=(7, 3.5))
    for k, r in enumerate(runs):
        ax.plot(r.t, r.speed, styles[k % 4], label=r.vehicle)
    ax.set_xlabel("time [s]")
    ax.set_ylabel("speed [m/s]")
    ax.legend()
    save(fig, LANE_CHANGE_PLOTS[0])
    fig, axs = plt.subplots(3, 1, figsize=(7, 7), sharex=True)
    for k, r in enumerate(runs):
        for ax, key in zip(axs, ("roll", "pitch", "yaw")):
            ax.plot(r.t, np.degrees(getattr(r, key)), styles[k % 4], label=r.vehicle)
            ax.set_ylabel(f"{key} [deg]")
    axs[0].legend()
    axs[-1].set_xlabel("time [s]")
    save(fig, LANE_CHANGE_PLOTS[1])
    for name, key, unit in ((LANE_CHANGE_PLOTS[2], "lateral_acceleration", "m/s^2"),
                            (LANE_CHANGE_PLOTS[3], "yaw_rate", "rad/s")):
        fig, ax = plt.subplots(figsize=(7, 3.5))
        for k, r in enumerate(runs):
            ax.plot(r.t, getattr(r, key), styles[k % 4], label=r.vehicle)
        ax.set_xlabel("time [s]")
        ax.set_ylabel(f"{key.replace('_', ' ')} [{unit}]")
        ax.legend()
        save(fig, name)
    fig, axs = plt.subplots(2, 1, figsize=(7, 6), sharex=True)
    for k, r in enumerate(runs):
        for w, c in enumerate(("FL", "FR", "RL", "RR")):
            lab = f"{r.vehicle} {c}"
            axs[0].plot(r.t[:-1], r.wheel_load[:, w], styles[k % 4], lw=1, label=lab)
            axs[1].plot(r.t, r.travel[:, w], styles[k % 4], lw=1, label=lab)
    axs[0].set_ylabel("wheel load [N]")
    axs[1].set_ylabel("suspension travel [m]")
    axs[1].set_xlabel("time [s]")
    axs[0].legend(fontsize=7, ncol=2)
    save(fig, LANE_CHANGE_PLOTS[4])
    return {n: d / n for n in LANE_CHANGE_PLOTS}
