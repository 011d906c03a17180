"""Error hierarchy of wmr_model.

Every error names the place that failed (file, frame, joint, parameter or argument), what was
expected and what was found, so a user can fix the input without reading our code.
"""

from __future__ import annotations

__all__ = [
    "WmrError",
    "ModelError",
    "ParameterError",
    "TerrainError",
    "ShapeError",
    "BagError",
]


class WmrError(Exception):
    """Base class of all errors raised by wmr_model."""


class ModelError(WmrError, ValueError):
    """A vehicle description (URDF, sidecar, frame table) is malformed or inconsistent."""


class ParameterError(WmrError, ValueError):
    """A named parameter has a bad value (wrong type, out of bounds, NaN)."""


class TerrainError(WmrError, ValueError):
    """A terrain description or terrain file is malformed."""


class ShapeError(WmrError, ValueError):
    """An array argument has the wrong shape; the message names it, expected and actual."""


class BagError(WmrError, ValueError):
    """A bag cannot be read or lacks what the pipeline needs."""


def check_shape(name: str, array_shape: tuple[int, ...], expected: tuple[int | None, ...]) -> None:
    """Raise :class:`ShapeError` unless ``array_shape`` matches ``expected``.

    ``None`` in ``expected`` matches any size on that axis.
    """
    ok = len(array_shape) == len(expected) and all(
        e is None or e == a for a, e in zip(array_shape, expected)
    )
    if not ok:
        parts = ["N" if e is None else str(e) for e in expected]
        exp = "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"
        raise ShapeError(f"{name}: expected shape {exp}, got {tuple(array_shape)}")
