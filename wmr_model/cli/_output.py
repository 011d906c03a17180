"""Output helpers shared by the ``wmr`` subcommands.

Every subcommand that reports numbers offers ``--json``: one JSON document on stdout, with
numpy scalars and arrays converted to plain numbers and lists, non-finite floats written as
``null``, and keys kept in insertion order. Text output stays human-oriented.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable, Mapping
from typing import Any, TextIO

__all__ = ["add_json_flag", "emit", "to_jsonable", "write_json"]


def add_json_flag(parser: argparse.ArgumentParser) -> None:
    """Add the common ``--json`` flag (``args.json``) to a subcommand parser."""
    parser.add_argument(
        "--json",
        action="store_true",
        help="write the result as one JSON document on stdout instead of text",
    )


def to_jsonable(value: Any) -> Any:
    """Convert ``value`` to plain JSON types.

    Handles mappings, sequences, sets (sorted), numpy scalars/arrays (via ``tolist``),
    ``pathlib`` paths and dataclass-like objects with ``_asdict``; NaN and inf become ``None``.
    """
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if hasattr(value, "tolist") and callable(value.tolist):  # numpy array or scalar
        return to_jsonable(value.tolist())
    if hasattr(value, "_asdict"):
        return to_jsonable(value._asdict())
    if isinstance(value, (set, frozenset)):
        return [to_jsonable(v) for v in sorted(value, key=repr)]
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if hasattr(value, "__fspath__"):
        return str(value)
    raise TypeError(f"cannot write {type(value).__name__} as JSON: {value!r}")


def write_json(data: Any, stream: TextIO | None = None) -> None:
    """Write ``data`` as indented JSON plus a newline to ``stream`` (default stdout)."""
    stream = sys.stdout if stream is None else stream
    json.dump(to_jsonable(data), stream, indent=2, allow_nan=False)
    stream.write("\n")


def emit(
    args: argparse.Namespace,
    data: Any,
    text: Callable[[Any], str] | str | None = None,
    stream: TextIO | None = None,
) -> None:
    """Write ``data`` as JSON if ``args.json`` is set, else as text.

    ``text`` is the text form: a string, or a function of ``data`` returning one; by default
    ``data`` is printed as ``key: value`` lines (mapping) or with ``str``.
    """
    stream = sys.stdout if stream is None else stream
    if getattr(args, "json", False):
        write_json(data, stream)
        return
    if callable(text):
        out = text(data)
    elif text is not None:
        out = text
    elif isinstance(data, Mapping):
        out = "\n".join(f"{k}: {v}" for k, v in data.items())
    else:
        out = str(data)
    stream.write(out if out.endswith("\n") else out + "\n")
