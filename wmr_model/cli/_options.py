"""Command-line flags built from the option schema (:mod:`wmr_model.parameters`).

``wmr calibrate`` and ``wmr replay`` cut a log into calibration intervals the same way; their
interval flags are declared here once, with the defaults and help of the ``interval`` option
rows (:mod:`wmr_model.calibration.intervals`) the calibrator node declares as parameters.
"""

from __future__ import annotations

import argparse
import math

from wmr_model.calibration.intervals import INTERVAL_OPTIONS
from wmr_model.calibration.reference import REFERENCE_OPTIONS
from wmr_model.errors import ParameterError
from wmr_model.parameters import option, option_default, option_help

__all__ = ["INTERVAL_FLAGS", "add_interval_arguments", "check_interval_arguments",
           "add_reference_arguments", "check_reference_arguments"]

#: (flag, option row, metavar, unit shown): the command line cuts time intervals only, so
#: ``--interval`` is in seconds.
INTERVAL_FLAGS = (
    ("--interval", "interval.length", "S", "s"),
    ("--min-distance", "interval.min_distance", "M", None),
    ("--min-turn", "interval.min_turn", "RAD", None),
    ("--split", "split", "F", None),
)


def add_interval_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--interval``, ``--min-distance``, ``--min-turn`` and ``--split`` (defaults and
    help from the schema) as an argument group of ``parser``."""
    g = parser.add_argument_group(
        "intervals", "how the log is cut into calibration intervals (the calibrator node's "
        "interval.* parameters): time intervals of --interval seconds; the calibrators learn "
        "from the informative ones (--min-distance or --min-turn, both 0: all), the tables "
        "score all of them")
    for flag, name, metavar, unit in INTERVAL_FLAGS:
        g.add_argument(flag, type=float, default=float(option_default(INTERVAL_OPTIONS, name)),
                       metavar=metavar, help=option_help(INTERVAL_OPTIONS, name, unit))


def check_interval_arguments(args: argparse.Namespace) -> None:
    """ParameterError naming the flag when an interval flag is out of its range."""
    if not (math.isfinite(args.interval) and args.interval > 0):
        raise ParameterError(f"--interval: must be a finite number > 0 s, got {args.interval}")
    for flag, value, unit in (("--min-distance", args.min_distance, "m"),
                              ("--min-turn", args.min_turn, "rad")):
        if not (math.isfinite(value) and value >= 0):
            raise ParameterError(f"{flag}: must be a finite number >= 0 {unit}, got {value}")
    if not (math.isfinite(args.split) and 0 <= args.split <= 1):
        raise ParameterError(f"--split: must be a fraction in [0, 1], got {args.split}")


def add_reference_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--no-reference-check`` and ``--reference-settle`` (default and help from the
    ``reference`` option rows of :mod:`wmr_model.calibration.reference`, which the calibrator
    node declares as parameters)."""
    g = parser.add_argument_group(
        "reference check", "reference (ground-truth) faults: jumps and diverged stretches "
        "found against the latency-corrected wheels and gyro are excluded from calibration "
        "and evaluation and reported; replay measures drift on the trusted path")
    g.add_argument("--no-reference-check", action="store_true",
                   help="keep every interval, faults included")
    g.add_argument("--reference-settle", type=float, metavar="S",
                   default=float(option_default(REFERENCE_OPTIONS, "reference_settle")),
                   help=option_help(REFERENCE_OPTIONS, "reference_settle"))


def check_reference_arguments(args: argparse.Namespace) -> None:
    """ParameterError naming the flag when ``--reference-settle`` is out of its row's range."""
    s = option(REFERENCE_OPTIONS, "reference_settle")
    v = args.reference_settle
    if not (math.isfinite(v) and s.lower <= v <= s.upper):
        raise ParameterError(f"--reference-settle: must be a number in [{s.lower:g}, "
                             f"{s.upper:g}] s, got {v}")
