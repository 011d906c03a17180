"""The ``wmr`` command line.

Each subcommand lives in its own module ``wmr_model.cli.<name>`` listed in :data:`SUBCOMMANDS`
and defines ``register(subparsers)``, which adds its parser and sets ``func`` on it with
``parser.set_defaults(func=run)``; ``run(args)`` returns the exit code (``None`` means 0).
Modules that do not exist (yet) are skipped. Subcommand modules should import heavy packages
(numba, scipy, matplotlib, rclpy) inside ``run`` so that ``wmr --help`` stays fast and works
without them.

Errors derived from :class:`wmr_model.errors.WmrError` (and missing or unreadable files) end the
command with one line ``wmr: error: <message>`` on stderr and exit code 2; ``--traceback``
shows the full traceback instead.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from wmr_model import __version__
from wmr_model.errors import WmrError

__all__ = ["EXIT_ERROR", "SUBCOMMANDS", "build_parser", "main"]

#: Subcommand modules, in the order ``wmr --help`` lists them.
SUBCOMMANDS: tuple[str, ...] = (
    "vehicles",
    "check",
    "simulate",
    "predict",
    "bench",
    "synth",
    "replay",
    "calibrate",
    "play",
    "compile",
)

#: Exit code for bad input (same as argparse's usage errors).
EXIT_ERROR = 2

PROG = "wmr"


def _load_subcommand(name: str):
    """Import ``wmr_model.cli.<name>``; ``None`` if that module does not exist."""
    modname = f"{__name__}.{name}"
    try:
        return importlib.import_module(modname)
    except ModuleNotFoundError as exc:
        if exc.name == modname:  # the subcommand itself is missing, not one of its imports
            return None
        raise


def build_parser(subcommands: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """Top-level parser with one subparser per available module of ``subcommands``.

    ``subcommands`` defaults to :data:`SUBCOMMANDS`.
    """
    parser = argparse.ArgumentParser(
        prog=PROG,
        description=(
            "Calibrated 3D motion models for wheeled and tracked ground robots: check vehicle "
            "descriptions, simulate, predict, benchmark, replay and calibrate from bags."
        ),
        epilog="Run 'wmr COMMAND --help' for the options of one command.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument(
        "--traceback",
        action="store_true",
        help="show the full Python traceback on errors instead of a one-line message",
    )
    sub = parser.add_subparsers(title="commands", dest="command", metavar="COMMAND")
    for name in SUBCOMMANDS if subcommands is None else subcommands:
        module = _load_subcommand(name)
        if module is not None:
            module.register(sub)
    return parser


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``wmr`` with ``argv`` (default ``sys.argv[1:]``) and return the exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(None if argv is None else list(argv))
    except SystemExit as exc:  # --help, --version, usage errors
        return exc.code if isinstance(exc.code, int) else EXIT_ERROR
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help(sys.stderr)
        return EXIT_ERROR
    from wmr_model._jit import set_background_compilation

    set_background_compilation(False)  # a short process: compile what it needs where needed
    try:
        code = func(args)
    except (WmrError, OSError) as exc:
        if args.traceback:
            raise
        if isinstance(exc, OSError) and exc.filename is not None and exc.strerror:
            message = f"{exc.filename}: {exc.strerror}"
        else:
            message = _one_line(exc)
        print(f"{PROG}: error: {message}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    return 0 if code is None else int(code)
