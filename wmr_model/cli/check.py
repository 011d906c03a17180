"""``wmr check VEHICLE``: load, validate and describe a vehicle description."""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["register", "run"]


def register(subparsers: Any) -> None:
    """Add the ``check`` subcommand."""
    from wmr_model.cli._output import add_json_flag

    p = subparsers.add_parser(
        "check",
        help="validate a vehicle (shipped name, URDF + sidecar, or frame table)",
        description=(
            "Load and compile a vehicle description and print its frame tree. Exit 0 when it "
            "is valid (it also needs wheels or tracks); otherwise print one line naming the file, "
            "frame and problem, exit 2."
        ),
    )
    p.add_argument(
        "vehicle",
        metavar="FILE_OR_NAME",
        help="shipped vehicle name (see 'wmr vehicles'), URDF file or frame-table YAML",
    )
    p.add_argument(
        "--sidecar",
        metavar="YAML",
        default=None,
        help="sidecar YAML of a URDF (default: <stem>.yaml next to it or config/vehicles/)",
    )
    add_json_flag(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Compile the vehicle and require ground contact (wheels or tracks); ModelError
    propagates (main prints it and exits 2)."""
    from wmr_model.cli._output import emit
    from wmr_model.cli.vehicles import vehicle_summary
    from wmr_model.io.vehicles import load_vehicle, require_ground_contact
    from wmr_model.kinematics.describe import describe

    model = load_vehicle(args.vehicle, args.sidecar)
    require_ground_contact(model)
    data = {"valid": True, **vehicle_summary(model)}
    data["joint_constraint_names"] = list(model.joint_constraint_names)
    emit(args, data, describe(model))
    return 0
