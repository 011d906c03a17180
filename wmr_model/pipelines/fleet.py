"""Fleet calibration: many bags -> per-bag fits, grouped fits (a parameter library) and a
cross-validated error table (the application logic of ``wmr calibrate`` over many bags).

Bags come from a folder (every rosbag2 folder or ``.bag``/``.mcap``/``.db3`` file in it, plus
its ``manifest.yaml`` if present), a glob pattern, or a manifest YAML::

    vehicle: warthog            # default for entries that name none
    bags:
      - {path: runs/a1, robot: alpha, terrain: grass}
      - {path: runs/b1, robot: bravo, terrain: dirt, vehicle: husky}

(paths relative to the manifest). Labels the manifest does not give come from the rosbag2
``metadata.yaml`` ``custom_data`` (``robot``, ``terrain``, ``vehicle``, as written by ``ros2 bag
record --custom-data robot=alpha``), else robot = the vehicle name and terrain = ``unknown``.

Every fit is the offline IPEM fit of the 3D enhanced kinematic model (thesis eq. 3.44 with
3.46 for the ``noise.U.*`` entries, :func:`~wmr_model.calibration.offline.calibrate_offline`)
on the informative intervals the single-bag ``wmr calibrate`` uses (:func:`prepare_bag`, the
same reference check and interval filters). A fit over several bags concatenates their logs
(:func:`concatenate_logs`): intervals never span two bags, so this is (3.44) summed over bags.

* per bag: one fit on each bag (in-sample errors over all its intervals);
* per group (``group_by`` robot, terrain or vehicle; bags of one group share a vehicle): one
  fit on all the group's bags, written as a vehicle overlay with 1-sigma
  (:func:`~wmr_model.io.calibration_file.overlay_yaml`);
* cross-validation: the group's bags in ``folds`` round-robin folds (leave-one-bag-out up to
  ``folds`` bags); each fold is predicted by a fit on the group's other bags and compared with
  the uncalibrated (nominal) 3D kinematic model. One-bag groups have no fold.

All fits are :class:`~wmr_model.pipelines.runner.Task` s of one
:class:`~wmr_model.pipelines.runner.Runner` run (in-process or on Ray, cached by bag content,
vehicle, options and package version); a failed fit (e.g. a corrupt bag) is reported in the tables
and does not stop the others.
"""

from __future__ import annotations

import glob
import math
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from wmr_model.calibration.intervals import (
    INTERVAL_OPTIONS,
    MOVING_MIN_DISTANCE,
    MOVING_MIN_TURN,
)
from wmr_model.calibration.logs import CalibrationLog
from wmr_model.calibration.reference import DEFAULT_SETTLE, excluded_by_check
from wmr_model.calibration.table import DEFAULT_NOISE
from wmr_model.errors import ParameterError
from wmr_model.parameters import option_default
from wmr_model.pipelines.runner import Runner, Task, TaskResult, content_id

__all__ = ["FleetBag", "FitOptions", "PreparedBag", "GROUP_KEYS", "BAG_SUFFIXES", "is_bag",
           "discover_bags", "load_manifest", "prepare_bag", "default_params",
           "concatenate_logs", "fit_bags", "cross_validate", "bag_tasks", "group_tasks",
           "calibrate_fleet",
           "write_library", "fleet_text"]

#: Labels bags can be grouped by.
GROUP_KEYS = ("robot", "terrain", "vehicle")

#: Single-file bags (ROS 1, rosbag2 MCAP/SQLite3 without their folder).
BAG_SUFFIXES = (".bag", ".mcap", ".db3")

#: Seconds between two logs in a concatenated log (far above any interval + latency).
LOG_GAP = 1000.0


@dataclass(frozen=True)
class FleetBag:
    """One bag of a fleet with its labels (``vehicle``: shipped name or description file)."""

    path: str
    robot: str
    terrain: str
    vehicle: str


@dataclass(frozen=True)
class FitOptions:
    """Options of one fit (the ``wmr calibrate`` flags of the same names).

    ``params`` None: the vehicle's identifiability-checked set (:func:`default_params`);
    ``pose_std`` (rotation [rad], position [m]) overrides the reference covariance;
    ``reference_settle`` [s]: the reference is untrusted this long before and after a fault
    (:class:`wmr_model.calibration.reference.ReferencePolicy`).
    """

    interval: float = option_default(INTERVAL_OPTIONS, "interval.length")
    min_distance: float = MOVING_MIN_DISTANCE
    min_turn: float = MOVING_MIN_TURN
    max_speed: float | None = None
    reference_check: bool = True
    reference_settle: float = DEFAULT_SETTLE
    encoder_topic: str = "/joint_states"
    pose_topic: str | None = None
    steer_topic: str | None = None
    pose_std: tuple[float, float] | None = None
    dt: float = 0.05
    params: tuple[str, ...] | None = None
    noise: tuple[str, ...] = DEFAULT_NOISE
    inputs: tuple[str, ...] = ()


@dataclass(frozen=True)
class PreparedBag:
    """A bag's log and intervals as ``wmr calibrate`` uses them.

    Attributes:
        log: the calibration log.
        intervals: (K, 2) evaluation intervals (reference faults removed unless disabled).
        calibration_intervals: (Kc, 2) informative, trusted intervals.
        notes: warnings and fault notes, in report order.
        class_counts: informative intervals by class (straight, arc, spin, ...).
    """

    log: CalibrationLog
    intervals: np.ndarray
    calibration_intervals: np.ndarray
    notes: list[str] = field(default_factory=list)
    class_counts: dict[str, int] = field(default_factory=dict)


# ---------------------------------------------------------------------------------------------
# Bags and labels
# ---------------------------------------------------------------------------------------------


def is_bag(path: str | Path) -> bool:
    """A rosbag2 folder (with ``metadata.yaml``) or a single-file bag (:data:`BAG_SUFFIXES`)."""
    p = Path(path)
    return ((p.is_dir() and (p / "metadata.yaml").is_file())
            or (p.is_file() and p.suffix.lower() in BAG_SUFFIXES))


def _custom_data(path: Path) -> dict[str, str]:
    """``custom_data`` of a rosbag2 folder's metadata.yaml (empty when absent/unreadable)."""
    try:
        doc = yaml.safe_load((path / "metadata.yaml").read_text(encoding="utf-8"))
        cd = doc["rosbag2_bagfile_information"].get("custom_data") or {}
    except (OSError, yaml.YAMLError, KeyError, TypeError, AttributeError):
        return {}
    return {str(k): str(v) for k, v in cd.items()} if isinstance(cd, dict) else {}


def _labelled(path: Path, entry: dict, vehicle: str | None, where: str) -> FleetBag:
    cd = _custom_data(path) if path.is_dir() else {}
    veh = entry.get("vehicle") or cd.get("vehicle") or vehicle
    if not veh:
        raise ParameterError(f"{where}: no vehicle for bag {path}; pass --vehicle or name one "
                             "per bag in a manifest")
    return FleetBag(str(path), str(entry.get("robot") or cd.get("robot") or veh),
                    str(entry.get("terrain") or cd.get("terrain") or "unknown"), str(veh))


def load_manifest(path: str | Path, vehicle: str | None = None) -> list[FleetBag]:
    """Bags of a manifest YAML (module docstring); ParameterError naming the file and entry."""
    p = Path(path).expanduser()
    try:
        doc = yaml.safe_load(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ParameterError(f"{p}: cannot read the manifest: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise ParameterError(f"{p}: not valid YAML: {' '.join(str(exc).split())}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("bags"), list) or not doc["bags"]:
        raise ParameterError(f"{p}: bags: expected a non-empty list of {{path, robot, terrain, "
                             "vehicle}} entries")
    unknown = [k for k in doc if k not in ("vehicle", "bags")]
    if unknown:
        raise ParameterError(f"{p}: unknown key(s) {unknown}; a manifest has vehicle, bags")
    veh = doc.get("vehicle") or vehicle
    out = []
    for i, e in enumerate(doc["bags"]):
        if isinstance(e, str):
            e = {"path": e}
        where = f"{p}: bags[{i}]"
        if not isinstance(e, dict) or not isinstance(e.get("path"), str):
            raise ParameterError(f"{where}: expected a mapping with a 'path' string, got {e!r}")
        bad = [k for k in e if k not in ("path", "robot", "terrain", "vehicle")]
        if bad:
            raise ParameterError(f"{where}: unknown key(s) {bad}; expected path, robot, "
                                 "terrain, vehicle")
        bp = Path(e["path"]).expanduser()
        bp = bp if bp.is_absolute() else p.parent / bp
        out.append(_labelled(bp, e, veh, where))
    return out


def discover_bags(source: str, vehicle: str | None = None) -> list[FleetBag]:
    """Bags of a manifest YAML, a folder of bags or a glob pattern (module docstring)."""
    p = Path(source).expanduser()
    if p.is_file() and p.suffix.lower() in (".yaml", ".yml"):
        return load_manifest(p, vehicle)
    if p.is_dir() and not is_bag(p):
        if (p / "manifest.yaml").is_file():
            return load_manifest(p / "manifest.yaml", vehicle)
        paths = sorted(q for q in p.iterdir() if is_bag(q))
        where = str(p)
    elif glob.has_magic(source):
        paths = sorted(Path(q) for q in glob.glob(str(p)) if is_bag(q))
        where = f"pattern {source!r}"
    elif is_bag(p):
        paths, where = [p], str(p)
    else:
        raise ParameterError(f"{source}: not a bag, a folder of bags, a glob pattern or a "
                             "manifest YAML")
    if not paths:
        raise ParameterError(f"{where}: no bags (rosbag2 folders with metadata.yaml or "
                             f"{'/'.join(BAG_SUFFIXES)} files)")
    return [_labelled(q, {}, vehicle, where) for q in paths]


# ---------------------------------------------------------------------------------------------
# One bag's data (shared with the single-bag ``wmr calibrate``)
# ---------------------------------------------------------------------------------------------


def default_params(model) -> tuple[list[str], str]:
    """Parameters of the 3D kin.+ fit when none are named, and the note saying which: the
    vehicle's identifiability-checked calibrator set plus ``time_offset.pose``, else
    :data:`~wmr_model.calibration.table.DEFAULT_3D_PARAMS`."""
    from wmr_model.calibration.table import DEFAULT_3D_PARAMS, steering_params
    from wmr_model.io.vehicles import vehicle_parameter_set

    vs = vehicle_parameter_set(model.name)
    params = list(DEFAULT_3D_PARAMS) if vs is None else [*vs[0], "time_offset.pose"]
    params += [n for n in steering_params(model) if n not in params]
    return params, (f"3D kin.+ parameters: {', '.join(params)} ("
                    + ("default set" if vs is None
                       else f"the identifiability-checked set of {vs[1]}") + ")")


def prepare_bag(bag: str, model, opts: FitOptions) -> PreparedBag:
    """Load ``bag`` and cut it into the evaluation and informative calibration intervals of
    ``wmr calibrate`` (reference faults excluded and reported unless
    ``opts.reference_check`` is off); ParameterError when nothing is informative."""
    from wmr_model.calibration.intervals import (
        IntervalPolicy,
        classify_intervals,
        interval_class_counts,
        select_intervals,
        unwrapped_yaw,
    )
    from wmr_model.calibration.logs import with_pose_std
    from wmr_model.io.bags import log_from_bag

    log = log_from_bag(bag, model, encoder_topic=opts.encoder_topic,
                       pose_topic=opts.pose_topic, steer_topic=opts.steer_topic)
    if opts.pose_std is not None:
        log = with_pose_std(log, *opts.pose_std)
    vmax = math.inf if opts.max_speed is None else opts.max_speed
    iv = select_intervals(log.pose_time, IntervalPolicy("time", opts.interval, max_speed=vmax),
                          log.pose[:, 4:7])
    notes = list(log.notes)
    faults = None
    if opts.reference_check:
        from wmr_model.calibration.reference import ReferencePolicy, check_reference

        ref = check_reference(log, model, iv, topic=opts.pose_topic or "the reference",
                              source=str(bag),
                              policy=ReferencePolicy(settle=opts.reference_settle))
        faults, iv = ref.faults, ref.intervals
        notes[:0] = [f"WARNING: {w}" for w in ref.warnings] + [ref.note]
    yaw = unwrapped_yaw(log.pose[:, :4])
    pol = IntervalPolicy("time", opts.interval, min_distance=opts.min_distance,
                         min_turn=opts.min_turn, max_speed=vmax)
    ivc = select_intervals(log.pose_time, pol, log.pose[:, 4:7], yaw)
    n_informative = len(ivc)
    if faults is not None:
        from wmr_model.calibration.reference import trusted_intervals

        ivc = trusted_intervals(ivc, faults)
    if len(ivc) == 0:
        raise ParameterError(f"{bag}: no {opts.interval} s interval of the ground truth "
                             f"moves --min-distance {opts.min_distance} m or turns --min-turn "
                             f"{opts.min_turn} rad" + excluded_by_check(n_informative)
                             + "; nothing to calibrate")
    counts = interval_class_counts(classify_intervals(ivc, log.pose[:, 4:7], yaw, pol))
    return PreparedBag(log, iv, ivc, notes, counts)


def concatenate_logs(logs: Sequence[CalibrationLog], gap: float = LOG_GAP
                     ) -> tuple[CalibrationLog, np.ndarray]:
    """One log of ``logs`` end to end: log k's clocks shifted to start ``gap`` seconds after
    log k-1's last sample. Returns the log and the (n,) offsets to add to each log's pose
    indices (its intervals). Encoder joints, pose sensor and steering pots must match; gyro
    and attitude are kept only when every log has them."""
    first = logs[0]
    for lg in logs[1:]:
        for f in ("joint_names", "pose_sensor", "pot_names"):
            if getattr(lg, f) != getattr(first, f):
                raise ParameterError(f"{lg.source}: {f} {getattr(lg, f)!r} differs from "
                                     f"{first.source}'s {getattr(first, f)!r}; these bags "
                                     "cannot be fitted together")
    streams = ["joint_time", "pose_time"]
    for t in ("gyro_time", "attitude_time", "pot_time"):
        if all(getattr(lg, t) is not None for lg in logs):
            streams.append(t)
    shifted: dict[str, list[np.ndarray]] = {s: [] for s in streams}
    end = -gap
    for lg in logs:
        ts = [getattr(lg, s) for s in streams]
        t0 = min(float(t[0]) for t in ts if len(t))
        off = end + gap - t0
        for s, t in zip(streams, ts):
            shifted[s].append(np.asarray(t, dtype=float) + off)
        end = max(float(t[-1]) for t in ts if len(t)) + off
    # keyword bundles for replace(): clocks and arrays by CalibrationLog field (None: absent)
    cat: dict[str, Any] = {s: np.concatenate(v) for s, v in shifted.items()}
    data: dict[str, Any] = {
        "joint_rate": np.concatenate([lg.joint_rate for lg in logs]),
        "pose": np.concatenate([lg.pose for lg in logs]),
        "pose_covariance": np.concatenate([lg.pose_covariance for lg in logs])}
    for t, v in (("gyro_time", "gyro"), ("attitude_time", "roll_pitch"),
                 ("pot_time", "pot_reading")):
        data[v] = np.concatenate([getattr(lg, v) for lg in logs]) if t in cat else None
        cat.setdefault(t, None)
    offsets = np.cumsum([0, *(len(lg.pose_time) for lg in logs[:-1])])
    log = replace(first, **cat, **data,
                  pot_names=first.pot_names if cat["pot_time"] is not None else (),
                  source=" + ".join(lg.source for lg in logs),
                  notes=tuple(n for lg in logs for n in lg.notes))
    return log, offsets


# ---------------------------------------------------------------------------------------------
# Tasks (module-level: the runner ships them to Ray workers by reference)
# ---------------------------------------------------------------------------------------------


def _prepared(bags: Sequence[str], vehicle: str, opts: FitOptions):
    from wmr_model.io.vehicles import load_vehicle

    model = load_vehicle(vehicle)
    return model, [prepare_bag(b, model, opts) for b in bags]


def _fit(model, prepared: Sequence[PreparedBag], opts: FitOptions):
    """Offline fit (3.44)/(3.46) over the informative intervals of ``prepared`` (their logs
    concatenated); returns the enhanced-kinematic predictor and the
    :class:`~wmr_model.calibration.offline.OfflineResult`."""
    from wmr_model.calibration.offline import calibrate_offline
    from wmr_model.calibration.predictors import ModelPredictor
    from wmr_model.calibration.table import DEFAULT_NOISE0
    from wmr_model.terrain.surface import flat

    log, off = concatenate_logs([p.log for p in prepared])
    ivc = np.concatenate([p.calibration_intervals + o for p, o in zip(prepared, off)])
    params = list(opts.params) if opts.params is not None else default_params(model)[0]
    names = [*params, *opts.noise]
    enh = ModelPredictor(model, flat(), fidelity="enhanced", dt=opts.dt,
                         inputs=tuple(opts.inputs))
    x0 = {n: DEFAULT_NOISE0.get(n, 0.05) for n in opts.noise}
    return enh, calibrate_offline(enh, log, ivc, names, x0=x0)


def _errors(predictor, prepared: Sequence[PreparedBag], values: dict) -> dict[str, float]:
    """Mean position [m] and yaw [rad] errors over the evaluation intervals of ``prepared``."""
    from wmr_model.calibration.evaluate import evaluate

    pos, yaw, n = 0.0, 0.0, 0
    for p in prepared:
        ev = evaluate(predictor, p.log, p.intervals, values)
        k = len(p.intervals)
        pos, yaw, n = pos + ev.mean_pos * k, yaw + ev.mean_yaw * k, n + k
    return {"pos": pos / n if n else math.nan, "yaw": yaw / n if n else math.nan,
            "intervals": n}


def fit_bags(bags: Sequence[str], vehicle: str, options: FitOptions) -> dict[str, Any]:
    """Fit task: the offline fit on ``bags`` (one or many) and its in-sample errors.

    Returns plain data: ``estimate`` and ``std`` by name, ``intervals`` (evaluation),
    ``calibration_intervals``, ``inliers``, ``pos``/``yaw`` mean errors [m]/[rad], ``notes``.
    """
    model, prepared = _prepared(bags, vehicle, options)
    enh, res = _fit(model, prepared, options)
    err = _errors(enh, prepared, res.values)
    return {"estimate": dict(res.values), "std": dict(res.std), "vehicle": model.name,
            "intervals": err["intervals"],
            "calibration_intervals": int(sum(len(p.calibration_intervals) for p in prepared)),
            "inliers": int(res.inliers.sum()), "pos": err["pos"], "yaw": err["yaw"],
            "notes": [n for p in prepared for n in p.notes]}


def cross_validate(train: Sequence[str], test: Sequence[str], vehicle: str,
                   options: FitOptions) -> dict[str, Any]:
    """Cross-validation task: fit on ``train``, predict the evaluation intervals of ``test``
    with that fit and with the nominal (uncalibrated) model; mean errors of both."""
    model, prepared = _prepared([*train, *test], vehicle, options)
    enh, res = _fit(model, prepared[:len(train)], options)
    held = prepared[len(train):]
    cal = _errors(enh, held, res.values)
    nom = _errors(enh, held, {})
    return {"estimate": dict(res.values), "intervals": cal["intervals"],
            "pos": cal["pos"], "yaw": cal["yaw"], "nominal_pos": nom["pos"],
            "nominal_yaw": nom["yaw"]}


# ---------------------------------------------------------------------------------------------
# The fleet run
# ---------------------------------------------------------------------------------------------


def _vehicle_id(vehicle: str) -> str:
    """Cache identity of a vehicle: content of its files (shipped or given)."""
    from wmr_model.io.vehicles import vehicle_files

    p = Path(vehicle).expanduser()
    if p.exists():
        return content_id(p)
    try:
        return "+".join(content_id(f) for f in vehicle_files(vehicle))
    except Exception:
        return vehicle


def _groups(bags: Sequence[FleetBag], group_by: str) -> dict[str, list[FleetBag]]:
    """Bags by group label (``<vehicle>-<label>`` when the fleet mixes vehicles)."""
    if group_by not in GROUP_KEYS:
        raise ParameterError(f"--group-by: expected one of {list(GROUP_KEYS)}, got "
                             f"{group_by!r}")
    mixed = len({b.vehicle for b in bags}) > 1 and group_by != "vehicle"
    out: dict[str, list[FleetBag]] = {}
    for b in bags:
        label = getattr(b, group_by)
        out.setdefault(f"{Path(b.vehicle).stem}-{label}" if mixed else label, []).append(b)
    return out


class _TaskMaker:
    """Builds fit tasks whose cache keys hold bag and vehicle content ids, not paths."""

    def __init__(self, options: FitOptions):
        self.options, self.opt = options, asdict(options)
        self.ids: dict[str, str] = {}
        self.vids: dict[str, str] = {}

    def bag_id(self, p: str) -> str:
        if p not in self.ids:
            try:
                self.ids[p] = content_id(p)
            except (OSError, ParameterError):
                self.ids[p] = f"missing:{p}"  # the task fails on it and says why
        return self.ids[p]

    def __call__(self, name: str, fn, vehicle: str, **bags: list[str]) -> Task:
        if vehicle not in self.vids:
            self.vids[vehicle] = _vehicle_id(vehicle)
        key = {k: [self.bag_id(p) for p in v] for k, v in bags.items()}
        return Task(name, fn, {**bags, "vehicle": vehicle, "options": self.options},
                    key={**key, "vehicle": self.vids[vehicle], "options": self.opt})


def bag_tasks(bags: Sequence[FleetBag], options: FitOptions) -> list[Task]:
    """Stage 1 of a fleet run: one :func:`fit_bags` task per bag (``bag:<path>``)."""
    make = _TaskMaker(options)
    return [make(f"bag:{b.path}", fit_bags, b.vehicle, bags=[b.path]) for b in bags]


def group_tasks(groups: dict[str, list[FleetBag]], options: FitOptions,
                folds: int = 5) -> list[Task]:
    """Stage 2: one :func:`fit_bags` task per group (``group:<name>``) and its
    :func:`cross_validate` folds (``cv:<name>:<k>``; round-robin, none for one bag)."""
    if folds < 2:
        raise ParameterError(f"--folds: must be >= 2, got {folds}")
    make = _TaskMaker(options)
    tasks = [make(f"group:{g}", fit_bags, m[0].vehicle, bags=[b.path for b in m])
             for g, m in groups.items() if m]
    for g, m in groups.items():
        k = min(folds, len(m))
        for f in range(k if k >= 2 else 0):
            tasks.append(make(f"cv:{g}:{f}", cross_validate, m[0].vehicle,
                              train=[b.path for i, b in enumerate(m) if i % k != f],
                              test=[b.path for i, b in enumerate(m) if i % k == f]))
    return tasks


def _group_vehicle_error(members: Sequence[FleetBag]) -> str:
    vs = sorted({b.vehicle for b in members})
    return "" if len(vs) < 2 else (f"bags of one group must share a vehicle, got {vs}; "
                                   "group by vehicle or split the manifest")


def calibrate_fleet(bags: Sequence[FleetBag], options: FitOptions, runner: Runner, *,
                    group_by: str = "vehicle", folds: int = 5) -> dict[str, Any]:
    """Run a fleet on ``runner``; the report (plain data; see :func:`fleet_text`).

    Stage 1 fits each bag; stage 2 fits each group and its cross-validation folds on the bags
    whose own fit succeeded (a failed bag is left out of its group and named in
    ``excluded``). ``report["bags"]``, ``["groups"]`` and ``["cross_validation"]`` have one row
    per bag, group and fold with ``ok``/``error``; ``report["runner"]`` the task counts of
    both stages; ``report["failed"]`` the number of failed rows.
    """
    groups = _groups(bags, group_by)
    if folds < 2:
        raise ParameterError(f"--folds: must be >= 2, got {folds}")
    stats = {"tasks": 0, "executed": 0, "cached": 0, "failed": 0}

    def run(tasks: list[Task]) -> dict[str, TaskResult]:
        res = dict(zip((t.name for t in tasks), runner.run(tasks)))
        for k in stats:
            stats[k] += getattr(runner.stats, k)
        return res

    def row(r: TaskResult | None, error: str = "", **extra) -> dict:
        if r is None or not r.ok:
            return {**extra, "ok": False, "cached": False,
                    "error": error or (r.error if r is not None else "not run")}
        return {**extra, "ok": True, "error": "", "cached": r.cached, **(r.value or {})}

    res = run(bag_tasks(bags, options))
    rows = [row(res[f"bag:{b.path}"], bag=b.path, robot=b.robot, terrain=b.terrain,
                vehicle_arg=b.vehicle) for b in bags]
    good = {b.path for b, r in zip(bags, rows) if r["ok"]}
    bad = {g: e for g, m in groups.items() if (e := _group_vehicle_error(m))}
    fit = {g: [b for b in m if b.path in good] for g, m in groups.items() if g not in bad}
    tasks = group_tasks(fit, options, folds)
    res = run(tasks)
    rep: dict[str, Any] = {"group_by": group_by, "bags": rows, "groups": [],
                           "cross_validation": []}
    for g, m in groups.items():
        err = bad.get(g) or ("" if fit[g] else "no bag of the group could be fitted")
        d = row(res.get(f"group:{g}"), err, group=g, bags=[b.path for b in fit.get(g, [])],
                excluded=[b.path for b in m if b.path not in good], vehicle_arg=m[0].vehicle)
        rep["groups"].append(d)
    for t in tasks:
        if t.name.startswith("cv:"):
            rep["cross_validation"].append(row(res[t.name], group=t.name.split(":")[1],
                                               train=list(t.kwargs["train"]),
                                               test=list(t.kwargs["test"])))
    rep["runner"] = {"mode": runner.mode, **stats}
    rep["failed"] = sum(not d["ok"] for k in ("bags", "groups", "cross_validation")
                        for d in rep[k])
    return rep


def _file_name(group: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", group).strip("._") or "group"


def write_library(report: dict[str, Any], folder: str | Path) -> list[Path]:
    """Write one vehicle overlay YAML (values and 1-sigma) per fitted group into ``folder``
    (``<group>.yaml``); adds ``overlay`` to the report's group rows; returns the paths."""
    from wmr_model.io.calibration_file import overlay_yaml
    from wmr_model.io.files import prepare_output_dir, write_text_atomically

    out = prepare_output_dir(folder, "--library")
    paths = []
    for g in report["groups"]:
        if not g["ok"]:
            continue
        p = out / f"{_file_name(g['group'])}.yaml"
        note = (f"3D kin.+ offline fit (3.44) on {len(g['bags'])} bag(s) of "
                f"{report['group_by']} {g['group']}: {', '.join(g['bags'])}")
        write_text_atomically(p, overlay_yaml(g["vehicle"], g["estimate"], g["std"], note))
        g["overlay"] = str(p)
        paths.append(p)
    return paths


def fleet_text(d: dict[str, Any]) -> str:
    """The report as text: per-bag table, groups with their estimates, cross-validation."""
    def est(e: dict) -> str:
        return ", ".join(f"{n}={x:.4g}" for n, x in e.items())

    def err(r: dict) -> str:
        return f"FAILED: {r['error']}"

    lines = ["PER BAG (in-sample, offline 3D kin.+ fit)",
             f"{'bag':40s} {'robot':10s} {'terrain':10s} {'mean pos (m)':>12s} "
             f"{'mean yaw (rad)':>14s}"]
    for r in d["bags"]:
        head = f"{r['bag'][-40:]:40s} {r['robot'][:10]:10s} {r['terrain'][:10]:10s}"
        lines.append(f"{head} {r['pos']:12.4f} {r['yaw']:14.4f}" if r["ok"]
                     else f"{head} {err(r)}")
    lines.append(f"GROUPS (by {d['group_by']})")
    for g in d["groups"]:
        if g["ok"]:
            where = f" -> {g['overlay']}" if g.get("overlay") else ""
            if g["excluded"]:
                where += f" (left out, their fit failed: {', '.join(g['excluded'])})"
            lines.append(f"{g['group']}: {len(g['bags'])} bag(s), {g['pos']:.4f} m / "
                         f"{g['yaw']:.4f} rad in sample; {est(g['estimate'])}{where}")
        else:
            lines.append(f"{g['group']}: {err(g)}")
    lines += ["CROSS-VALIDATED (fit on the group's other bags, evaluated on the held-out ones)",
              f"{'group':12s} {'held out':30s} {'nominal pos':>11s} {'nominal yaw':>11s} "
              f"{'fitted pos':>10s} {'fitted yaw':>10s}"]
    for r in d["cross_validation"]:
        head = f"{r['group'][:12]:12s} {','.join(Path(t).name for t in r['test'])[:30]:30s}"
        lines.append(f"{head} {r['nominal_pos']:11.4f} {r['nominal_yaw']:11.4f} "
                     f"{r['pos']:10.4f} {r['yaw']:10.4f}" if r["ok"] else f"{head} {err(r)}")
    if not d["cross_validation"]:
        lines.append("(no group has two bags)")
    s = d["runner"]
    lines.append(f"runner: {s['mode']}, {s['tasks']} tasks: {s['executed']} run, "
                 f"{s['cached']} cached, {s['failed']} failed")
    return "\n".join(lines)
