"""``wmr simulate``: drive a vehicle over a terrain with the stabilized-DAE kinematics (§2.2).

Commands are either a body twist (``--speed``/``--yaw-rate``, turned into actuated joint rates
at every step by the vehicle's controller, ``--controller``: the sidecar's ``controller:``
section, :mod:`wmr_model.prediction.controllers`; ``naive`` is the open-loop control-context solve
of (2.37) on flat ground), explicit actuated joint rates
(``--joint-rates``), or a CSV script (``--commands``: a ``time`` column plus one column per
actuated joint, zero-order hold). Writes the trajectory as CSV and prints a summary.
"""

from __future__ import annotations

import argparse
import math
from typing import Any

__all__ = ["register", "run"]


def _schema_argument(p: argparse.ArgumentParser, flag: str, name: str, *,
                     metavar: str | None = None, help_prefix: str = "") -> None:
    """Add ``flag`` for the prediction option ``name``: default, choices and help from the
    schema (:data:`wmr_model.prediction.rollouts.PREDICTION_OPTIONS`), as the prediction node
    declares it."""
    from wmr_model.parameters import option, option_help
    from wmr_model.prediction.rollouts import PREDICTION_OPTIONS

    s = option(PREDICTION_OPTIONS, name)
    kw: dict[str, Any] = {"choices": s.choices} if s.choices else {
        "type": type(s.default), "metavar": metavar}
    p.add_argument(flag, default=s.default,
                   help=help_prefix + option_help(PREDICTION_OPTIONS, name), **kw)


def register(subparsers: Any) -> None:
    """Add the ``simulate`` subcommand."""
    from wmr_model.cli._output import add_json_flag

    p = subparsers.add_parser(
        "simulate",
        help="simulate a vehicle on a terrain (kinematic model) and write the trajectory",
        description=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("vehicle", metavar="FILE_OR_NAME", help="shipped vehicle name or URDF/table")
    p.add_argument("--sidecar", metavar="YAML", default=None, help="sidecar YAML of a URDF")
    p.add_argument("--terrain", default="flat", metavar="SPEC",
                   help="flat | plane:SLOPE_DEG[,HEADING_DEG] | rough:RMS,CORR[,SEED] | "
                        "ramp:H,UP,TOP,DOWN,START | step:H,AT | zoe-ramp[:START] | wmrde:N | "
                        "file:PATH (default flat)")
    cmd = p.add_mutually_exclusive_group()
    cmd.add_argument("--speed", type=float, default=None, metavar="M_S",
                     help="forward speed [m/s] (body twist command; default 0.5)")
    cmd.add_argument("--joint-rates", default=None, metavar="R1,R2,...",
                     help="constant actuated joint rates [rad/s or m/s] in the order of "
                          "'wmr check' (actuated joints)")
    cmd.add_argument("--commands", default=None, metavar="CSV",
                     help="CSV with a 'time' column and one column per actuated joint")
    p.add_argument("--yaw-rate", type=float, default=0.0, metavar="RAD_S",
                   help="yaw rate [rad/s] with --speed (default 0)")
    _schema_argument(p, "--controller", "controller", help_prefix="with --speed/--yaw-rate: ")
    p.add_argument("--duration", type=float, default=10.0, metavar="S",
                   help="simulated time [s] (default 10; with --commands: the script's end)")
    p.add_argument("--dt", type=float, default=0.04, metavar="S", help="step size [s] (0.04)")
    _schema_argument(p, "--integrator", "integrator")
    _schema_argument(p, "--stabilization", "stabilization", metavar="SIGMA_DT")
    p.add_argument("--method", choices=("dae", "unconstrained"), default="dae",
                   help="stabilized DAE (default) or the unconstrained baseline of §2.5.1")
    p.add_argument("--start", default="0,0,0", metavar="X,Y,YAW_DEG",
                   help="start position [m] and yaw [deg] (default 0,0,0)")
    p.add_argument("--out", default=None, metavar="CSV", help="write the trajectory here")
    add_json_flag(p)
    p.set_defaults(func=run)


def _floats(text: str, what: str, n: int | None = None) -> list[float]:
    from wmr_model.errors import ParameterError

    try:
        vals = [float(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise ParameterError(f"{what}: expected comma-separated numbers, got {text!r}") from None
    if n is not None and len(vals) != n:
        raise ParameterError(f"{what}: expected {n} numbers, got {len(vals)}")
    if not all(math.isfinite(v) for v in vals):
        raise ParameterError(f"{what}: numbers must be finite, got {text!r}")
    return vals


def _script_rates(path: str, names: list[str], dt: float):
    """Zero-order-hold actuated rates (T, na) from a command CSV; returns (rates, duration)."""
    import numpy as np

    from wmr_model.budgets import MAX_COMMAND_SPAN, MAX_STEPS, check_budget
    from wmr_model.errors import ParameterError
    from wmr_model.io.files import check_regular_file

    check_regular_file(path, "--commands")
    try:
        with open(path, encoding="utf-8") as f:
            header = [h.strip() for h in f.readline().strip().split(",")]
            data = np.loadtxt(f, delimiter=",", ndmin=2)
    except (OSError, ValueError) as exc:  # UnicodeDecodeError is a ValueError
        raise ParameterError(f"{path}: cannot read command CSV ({exc})") from None
    if data.size == 0:
        raise ParameterError(f"{path}: command CSV has a header but no rows")
    if not header or header[0] != "time":
        raise ParameterError(f"{path}: first column must be 'time', got {header[:1]}")
    missing = [n for n in names if n not in header]
    if missing:
        raise ParameterError(f"{path}: missing columns for actuated joints {missing}; "
                             f"columns are {header}")
    if data.shape[1] != len(header) or not np.all(np.isfinite(data)):
        raise ParameterError(f"{path}: every row needs {len(header)} finite numbers")
    t = data[:, 0]
    if np.any(np.diff(t) <= 0):
        raise ParameterError(f"{path}: time must increase strictly")
    span = float(t[-1] - t[0])
    check_budget(f"{path}: time span [s]", span, MAX_COMMAND_SPAN, "split the script")
    steps = max(1, check_budget(f"{path}: steps of {dt:g} s over {span:g} s", round(span / dt),
                                MAX_STEPS, "use a larger --dt or a shorter script"))
    ts = t[0] + np.arange(steps) * dt
    idx = np.clip(np.searchsorted(t, ts, side="right") - 1, 0, len(t) - 1)
    cols = [header.index(n) for n in names]
    return data[idx][:, cols], steps * dt


def run(args: argparse.Namespace) -> int:
    """Simulate and report."""
    import numpy as np

    from wmr_model.cli._output import emit
    from wmr_model.io.terrain_spec import parse_terrain_spec
    from wmr_model.io.vehicles import load_vehicle, require_ground_contact

    _check_arguments(args)
    model = load_vehicle(args.vehicle, sidecar=args.sidecar)
    require_ground_contact(model)
    terrain = parse_terrain_spec(args.terrain)
    start = _floats(args.start, "--start", 3)
    names = [model.joint_names[k] for k in model.actuated_joints]
    rates, duration, ctrl, seg = _commanded_rates(model, names, args)
    closed = ctrl is not None and ctrl.feedback
    if not closed:
        _check_rates(model, names, rates)
    q0, fit, reach = _initial_state(model, terrain, start)
    traj, wall = _integrate(model, terrain, q0, rates, seg, ctrl if closed else None, args)
    if closed:
        rates = traj.qdot[:, 6 + model.actuated_joints]
        _check_rates(model, names, rates)
    _check_plausible(traj, model, reach, args.dt)
    eul = traj.euler
    if args.out:
        _write_trajectory(args.out, model, traj)
    summary = {
        "vehicle": model.name,
        "terrain": terrain.name,
        "method": args.method,
        "controller": "open loop (joint rates)" if ctrl is None else ctrl.kind,
        "dt": args.dt,
        "steps": int(rates.shape[0]),
        "duration": duration,
        "initial_contact_rms": fit,
        "final_position": traj.position[-1],
        "final_rpy_deg": np.degrees(eul[-1]),
        "mean_contact_speed": float(traj.contact_speed.mean()),
        "max_abs_contact_height_error": float(np.abs(traj.dz).max()),
        "wall_time": wall,
        "real_time_factor": duration / wall if wall > 0 else None,
        "trajectory_csv": args.out,
    }
    emit(args, summary, _text)
    return 0


def _check_arguments(args: argparse.Namespace) -> None:
    """ParameterError naming the flag for a bad step, duration, step count or number."""
    from wmr_model.budgets import MAX_STEPS, check_budget
    from wmr_model.errors import ParameterError

    if not (math.isfinite(args.dt) and args.dt > 0):
        raise ParameterError(f"--dt: must be > 0 s, got {args.dt}")
    if not (math.isfinite(args.duration) and args.duration > 0):
        raise ParameterError(f"--duration: must be > 0 s, got {args.duration}")
    if args.commands is None:
        check_budget(f"--duration {args.duration:g} s / --dt {args.dt:g} s: steps",
                     round(args.duration / args.dt), MAX_STEPS,
                     "use a larger --dt or a shorter --duration")
    for flag in ("speed", "yaw_rate", "stabilization"):
        v = getattr(args, flag)
        if v is not None and not math.isfinite(v):
            raise ParameterError(f"--{flag.replace('_', '-')}: must be finite, got {v}")


def _commanded_rates(model: Any, names: list[str], args: argparse.Namespace):
    """``(rates (T, na), duration [s], controller or None, twist segment (1, 3) or None)``
    of the command flags: a CSV script, constant joint rates, or --speed/--yaw-rate through
    the vehicle's controller (a closed-loop one leaves zero rates: its law runs inside the
    prediction loop)."""
    import numpy as np

    from wmr_model.errors import ParameterError
    from wmr_model.prediction.controllers import open_loop_rates, vehicle_controller

    if args.commands:
        rates, duration = _script_rates(args.commands, names, args.dt)
        return rates, duration, None, None
    ctrl = seg = None
    steps = max(1, round(args.duration / args.dt))
    duration = steps * args.dt
    r: list[float] | np.ndarray  # (na,) constant or (T, na) per step
    if args.joint_rates is not None:
        r = _floats(args.joint_rates, "--joint-rates", len(names))
    else:
        # The vehicle's controller; open-loop kinds (naive: §2.5.1's flat-ground solve,
        # differential) give the rates up front, closed-loop ones from the state at every
        # step inside the compiled loop (_integrate).
        speed = 0.5 if args.speed is None else args.speed
        seg = np.array([[speed, args.yaw_rate, duration]])
        ctrl = vehicle_controller(model, args.controller)
        if not ctrl.feedback:
            r = open_loop_rates(model, ctrl, np.tile([speed, args.yaw_rate], (1, steps, 1)),
                                args.dt)[0]
        else:  # closed loop: rates from the state at every step
            if args.method != "dae":
                raise ParameterError(f"--controller: the {ctrl.kind} controller is closed "
                                     "loop and runs with --method dae only; use "
                                     "--controller naive for --method unconstrained")
            r = np.zeros((steps, len(names)))
    r = np.asarray(r, dtype=float)
    return (r if r.ndim == 2 else np.tile(r, (steps, 1))), duration, ctrl, seg


def _initial_state(model: Any, terrain: Any, start: list[float]):
    """``(q0 (nq,), contact fit [m], reach [m])``: the --start pose ``(x, y, yaw_deg)`` put
    on the terrain.

    Starts 0.5 m above the terrain plus the vehicle's reach below its frames (largest wheel
    radius, or belt depth below a track frame: tracked vehicles have no wheels), then
    initialize_contact (2.27)-(2.32) puts the contacts on it.
    """
    import numpy as np

    from wmr_model import kinematics as kin
    from wmr_model.errors import ParameterError
    from wmr_model.spatial import quat_from_euler

    x0, y0, yaw_deg = start
    q = model.neutral_state()
    q[0:4] = quat_from_euler(0.0, 0.0, math.radians(yaw_deg))
    q[4], q[5] = x0, y0
    reach = float(max(model.wheel_radius.max(initial=0.0),
                      np.abs(model.track_path[..., 2]).max(initial=0.0)))
    q[6] = float(terrain.height(x0, y0)) + reach + 0.5
    q0, fit = kin.initialize_contact(model, terrain, q)
    if not (math.isfinite(fit) and fit <= reach):
        raise ParameterError(f"{model.source}: initial contact error {fit:.3g} m exceeds the "
                             f"reach {reach:.3g} m: the joint constraints contradict each other "
                             "or the wheels cannot touch the terrain together")
    return q0, fit, reach


def _integrate(model: Any, terrain: Any, q0: Any, rates: Any, seg: Any, closed_loop: Any,
               args: argparse.Namespace):
    """``(trajectory, wall time [s])`` of the --method integration (the closed-loop
    controller ``closed_loop`` steps the twist ``seg``), timed after a one-step warm-up of the
    same path that takes numba's one-time compile / cache load."""
    import time

    from wmr_model import kinematics as kin
    from wmr_model.prediction.controllers import predict_controlled

    # warm-up: one step of the path timed below (numba loads its compiled kernels on first use)
    if closed_loop is not None:
        one = seg[:1].copy()
        one[0, 2] = args.dt  # the twist held for one step
        predict_controlled(model, terrain, q0, one, args.dt, controller=closed_loop,
                           integrator=args.integrator, stabilization=args.stabilization)
    elif args.method == "dae":
        kin.simulate(model, terrain, q0, rates[:1], args.dt, integrator=args.integrator)
    else:
        kin.simulate_unconstrained(model, terrain, q0, rates[:1], args.dt)
    t0 = time.perf_counter()
    if closed_loop is not None:
        pr = predict_controlled(model, terrain, q0, seg, args.dt, controller=closed_loop,
                                integrator=args.integrator, stabilization=args.stabilization)
        traj = kin.Trajectory(pr.dt, pr.q[0], pr.qdot[0], pr.contact_speed[0], pr.dz[0])
    elif args.method == "dae":
        traj = kin.simulate(model, terrain, q0, rates, args.dt, integrator=args.integrator,
                            stabilization=args.stabilization)
    else:
        traj = kin.simulate_unconstrained(model, terrain, q0, rates, args.dt)
    return traj, time.perf_counter() - t0


def _write_trajectory(path: str, model: Any, traj: Any) -> None:
    """The trajectory as CSV: t, position, roll/pitch/yaw, joints, contact height errors."""
    import numpy as np

    from wmr_model.io.files import atomic_output

    cols = ["t", "x", "y", "z", "roll", "pitch", "yaw", *model.joint_names,
            *[f"dz_{c}" for c in _contact_names(model)]]
    table = np.column_stack([traj.time, traj.position, traj.euler, traj.joints, traj.dz])
    with atomic_output(path) as tmp:
        np.savetxt(tmp, table, delimiter=",", header=",".join(cols), comments="",
                   fmt="%.9g")


def _check_rates(model: Any, names: list[str], rates: Any) -> None:
    """Raise ParameterError for a non-finite rate or a wheel rim speed above the odometry's
    plausibility gate (:func:`wmr_model.estimation.streams.wheel_rate_problem`)."""
    import numpy as np

    from wmr_model.errors import ParameterError
    from wmr_model.estimation.streams import PlausibilityLimits, wheel_rate_problem

    rates = np.asarray(rates, dtype=float)
    if not np.all(np.isfinite(rates)):
        raise ParameterError(f"{model.name}: joint rates must be finite")
    radius = {model.joint_names[int(k)]: float(r)
              for k, r in zip(model.wheel_joints, model.wheel_radius)}
    peak = {n: float(rates[np.argmax(np.abs(rates[:, j])), j]) for j, n in enumerate(names)}
    problem = wheel_rate_problem(peak, radius, PlausibilityLimits())
    if problem:
        raise ParameterError(f"{model.name}: implausible command: {problem}")


def _check_plausible(traj: Any, model: Any, reach: float, dt: float) -> None:
    """Raise ParameterError when the trajectory is not a kinematic solution: a non-finite
    state, or a wheel off the terrain by more than ``reach`` (largest wheel radius [m]; the
    model of §2.2 assumes wheel contact is kept)."""
    import numpy as np

    from wmr_model.errors import ParameterError

    states = np.column_stack([traj.position, traj.joints])
    bad = ~np.all(np.isfinite(states), axis=1)
    if bad.any():
        k = int(np.argmax(bad))
        raise ParameterError(f"{model.name}: the state is non-finite from step {k} (t = "
                             f"{k * dt:g} s); the joint rates or the step size are out of range")
    # wheels only: a belt sample off the ground (a raised flipper, a belt bridging a dip) is
    # normal; a wheel off the ground is outside the model's assumption
    dz = np.abs(np.asarray(traj.dz, dtype=float))[:, :len(model.wheel_names)]
    if dz.size and float(dz.max()) > reach:
        k, c = (int(i) for i in np.unravel_index(int(np.argmax(dz)), dz.shape))
        raise ParameterError(f"{model.name}: contact {_contact_names(model)[int(c)]!r} lost the "
                             f"terrain by {float(dz[k, c]):.4g} m at step {int(k)} (t = "
                             f"{int(k) * dt:g} s), more than the reach {reach:.4g} m; the "
                             "kinematic model assumes contact (is the terrain too steep?)")


def _contact_names(model: Any) -> list[str]:
    """Names of the nc contacts: the wheels, then each track's patches as ``<track>_<k>``."""
    names = list(model.wheel_names)
    count: dict[int, int] = {}
    for t in model.track_of:
        k = count.get(int(t), 0)
        count[int(t)] = k + 1
        names.append(f"{model.track_names[int(t)]}_{k}")
    return names


def _text(s: dict) -> str:
    p = s["final_position"]
    r = s["final_rpy_deg"]
    lines = [
        f"{s['vehicle']} on {s['terrain']} ({s['method']}, dt {s['dt']} s, {s['steps']} steps)",
        f"  final position  x {p[0]:.4f}  y {p[1]:.4f}  z {p[2]:.4f} m",
        f"  final attitude  roll {r[0]:.3f}  pitch {r[1]:.3f}  yaw {r[2]:.3f} deg",
        f"  mean |v_c| {s['mean_contact_speed']:.5f} m/s, max |dz| "
        f"{s['max_abs_contact_height_error']:.5f} m",
        f"  wall time {s['wall_time'] * 1e3:.2f} ms, {s['real_time_factor']:.0f}x real time "
        "(after a warm-up step)",
    ]
    if s["trajectory_csv"]:
        lines.append(f"  trajectory written to {s['trajectory_csv']}")
    return "\n".join(lines)
