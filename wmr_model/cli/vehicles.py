"""``wmr vehicles``: every shipped vehicle (wheeled, closed-chain, tracked), size and mass."""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["register", "run", "vehicle_summary"]


def register(subparsers: Any) -> None:
    """Add the ``vehicles`` subcommand."""
    from wmr_model.cli._output import add_json_flag

    p = subparsers.add_parser(
        "vehicles",
        help="list the shipped vehicles",
        description="List every shipped vehicle with its kind (wheeled, closed-chain, tracked): "
                    "wheels, tracks, joints, joint constraints, total mass.",
    )
    add_json_flag(p)
    p.set_defaults(func=run)


def vehicle_summary(model: Any) -> dict[str, Any]:
    """Key numbers of a compiled model (used by ``wmr vehicles`` and ``wmr check``)."""
    from wmr_model.io.vehicles import vehicle_kind

    return {
        "name": model.name,
        "kind": vehicle_kind(model),
        "source": model.source,
        "frames": model.nf,
        "joints": model.nj,
        "wheels": model.nw,
        "joint_constraints": model.ncj,
        "total_mass": model.total_mass,
        "wheel_names": list(model.wheel_names),
        "wheel_radius": [float(r) for r in model.wheel_radius],
        "wheel_width": [float(w) for w in model.wheel_width],
        "tracks": list(model.track_names),
        "track_patches": model.ntp,
        "actuated": [model.joint_names[k] for k in model.actuated_joints],
        "sensors": list(model.sensor_frame),
    }


def _table(rows: list[dict[str, Any]]) -> str:
    head = (f"{'name':<16}{'kind':<14}{'wheels':>7}{'tracks':>7}{'joints':>7}{'constraints':>12}"
            f"{'mass [kg]':>12}  wheel radius [m]")
    lines = [head]
    for r in rows:
        radii = sorted(set(round(x, 4) for x in r["wheel_radius"]))
        lines.append(
            f"{r['name']:<16}{r['kind']:<14}{r['wheels']:>7}{len(r['tracks']):>7}{r['joints']:>7}"
            f"{r['joint_constraints']:>12}{r['total_mass']:>12.2f}  "
            f"{', '.join(f'{x:g}' for x in radii) or '-'}"
        )
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """Compile every shipped vehicle, tracked ones included, and print the table (or JSON)."""
    from wmr_model.cli._output import emit
    from wmr_model.io.vehicles import list_vehicles, load_vehicle

    rows = [vehicle_summary(load_vehicle(n)) for n in list_vehicles(include_tracked=True)]
    emit(args, rows, _table)
    return 0
