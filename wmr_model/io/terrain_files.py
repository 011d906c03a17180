"""Height-map files: NumPy, CSV, grayscale PNG and the wmrde ``gridsurfdata`` text format.

All loaders return a ``GRID`` :class:`~wmr_model.terrain.surface.Terrain` (see
:func:`wmr_model.terrain.surface.height_map`). For the array formats (``.npy``, ``.csv``, ``.png``)
the file's 2-D array is read as ``heights[j, i]`` at ``(x0 + i dx, y0 + j dy)``: row j of the file
is y index j (so an image viewer shows +y pointing down), and the caller supplies the grid
placement (``resolution``, ``origin``), which those files do not store.

The wmrde format (Seegmiller's C++ library, ``resource/gridsurfdata*.txt``) carries its own
placement: one comma-separated line ``xmin,xmax,nx,ymin,ymax,ny,`` followed by nx*ny heights
[m] with x varying fastest; node spacing is (xmax - xmin) / (nx - 1).
"""

from __future__ import annotations

import math
import os
import struct
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from wmr_model._jit import njit
from wmr_model.errors import TerrainError
from wmr_model.terrain.surface import Terrain, height_map

__all__ = [
    "load_height_map",
    "load_wmrde_grid",
    "load_wmrde_benchmark_terrains",
    "read_png_gray",
    "WMRDE_BENCHMARK_COUNT",
    "WMRDE_TERRAIN_DIR",
]

WMRDE_BENCHMARK_COUNT = 10
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_ARRAY_SUFFIXES = (".npy", ".csv", ".png")


def _placed(path: Path, heights: np.ndarray, resolution: Any, origin: Any) -> Terrain:
    """height_map() with errors prefixed by the file."""
    try:
        return height_map(heights, resolution, origin, name=path.name)
    except TerrainError as exc:
        raise TerrainError(f"{path}: {_without_place(exc)}") from None


def load_height_map(
    path: str | os.PathLike[str],
    resolution: Any = None,
    origin: Any = None,
    *,
    z_scale: float | None = None,
    z_offset: float = 0.0,
) -> Terrain:
    """Load a height map file as a ``GRID`` terrain; the format follows the file suffix.

    Parameters
    ----------
    path : str or PathLike
        ``.npy`` (2-D float array, shape (ny, nx)), ``.csv`` (ny lines of nx comma-separated
        heights), ``.png`` (8- or 16-bit grayscale, non-interlaced) or ``.txt`` (wmrde
        ``gridsurfdata`` format, see :func:`load_wmrde_grid`).
    resolution : float or (float, float)
        Node spacing (dx, dy) [m]; required for .npy/.csv/.png, must be None for .txt.
    origin : (float, float)
        Position (x0, y0) [m] of ``heights[0, 0]``; required for .npy/.csv/.png, must be None
        for .txt.
    z_scale : float
        PNG only, required: metres per gray level; height = z_offset + z_scale * gray.
    z_offset : float
        PNG only: height [m] of gray level 0.

    Returns
    -------
    Terrain
        A ``GRID`` terrain named after the file.

    Raises
    ------
    TerrainError
        Naming the file and what is wrong with it or with the arguments.
    """
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix == ".txt":
        if resolution is not None or origin is not None:
            raise TerrainError(
                f"{p}: wmrde .txt height maps carry their own grid; pass neither resolution "
                f"nor origin (got resolution={resolution!r}, origin={origin!r})"
            )
        if z_scale is not None:
            raise TerrainError(f"{p}: z_scale applies to .png only, got {z_scale!r}")
        return load_wmrde_grid(p)
    if suffix not in _ARRAY_SUFFIXES:
        raise TerrainError(
            f"{p}: unsupported height map suffix {p.suffix!r}, expected one of "
            f".npy, .csv, .png, .txt (wmrde)"
        )
    if resolution is None or origin is None:
        missing = " and ".join(k for k, v in (("resolution", resolution), ("origin", origin))
                               if v is None)
        raise TerrainError(
            f"{p}: {missing} required, {suffix} files store heights only"
        )
    if suffix == ".png":
        return _placed(p, _png_heights(p, z_scale, z_offset), resolution, origin)
    if z_scale is not None or z_offset != 0.0:
        raise TerrainError(f"{p}: z_scale and z_offset apply to .png only")
    return _placed(p, _array_heights(p, suffix), resolution, origin)


def _png_heights(p: Path, z_scale: float | None, z_offset: float) -> np.ndarray:
    """(ny, nx) heights [m] of a grayscale PNG: ``z_offset + z_scale * gray``."""
    if z_scale is None:
        raise TerrainError(f"{p}: z_scale [m per gray level] is required for .png")
    scale = float(z_scale)
    offset = float(z_offset)
    if not (math.isfinite(scale) and scale > 0.0 and math.isfinite(offset)):
        raise TerrainError(
            f"{p}: z_scale must be > 0 and z_offset finite, got {z_scale!r}, {z_offset!r}"
        )
    gray = read_png_gray(p)
    return offset + scale * gray.astype(np.float64)


def _array_heights(p: Path, suffix: str) -> np.ndarray:
    """(ny, nx) float64 heights [m] of a ``.npy`` (real numeric array) or ``.csv`` file."""
    if suffix == ".npy":
        try:
            heights = np.load(p, allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise TerrainError(f"{p}: cannot read .npy file ({exc})") from None
        if not np.issubdtype(heights.dtype, np.number) or np.iscomplexobj(heights):
            raise TerrainError(f"{p}: expected a real numeric array, got dtype {heights.dtype}")
    else:
        try:
            heights = np.loadtxt(p, delimiter=",", ndmin=2, dtype=np.float64)
        except (OSError, ValueError) as exc:
            raise TerrainError(f"{p}: cannot read CSV height map ({exc})") from None
    return np.asarray(heights, dtype=np.float64)


def load_wmrde_grid(path: str | os.PathLike[str], normals: str = "bilinear") -> Terrain:
    """Load a wmrde ``gridsurfdata*.txt`` height map.

    Format: ``xmin,xmax,nx,ymin,ymax,ny,`` then nx*ny heights [m], x varying fastest, all
    comma-separated (line breaks and a trailing comma are accepted). Node (i, j) is at
    ``(xmin + i dx, ymin + j dy)`` with ``dx = (xmax - xmin) / (nx - 1)``.

    ``normals`` (:data:`wmr_model.terrain.surface.GRID_NORMALS`): ``"bilinear"`` (default) or
    ``"nodal"``, the normals wmrde itself computes for these grids.

    Returns
    -------
    Terrain
        ``GRID`` terrain with grid shape (ny, nx), named after the file stem.
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError) as exc:
        raise TerrainError(f"{p}: cannot read wmrde grid file ({exc})") from None
    tokens = [t.strip() for t in text.split(",")]
    while tokens and tokens[-1] == "":
        tokens.pop()
    header_form = "'xmin,xmax,nx,ymin,ymax,ny,'"
    if len(tokens) < 6:
        raise TerrainError(
            f"{p}: bad header, expected {header_form} then heights, got {len(tokens)} values"
        )
    try:
        xmin, xmax, nx_f, ymin, ymax, ny_f = (float(t) for t in tokens[:6])
    except ValueError:
        raise TerrainError(
            f"{p}: bad header, expected {header_form} as numbers, got {','.join(tokens[:6])!r}"
        ) from None
    ok = all(math.isfinite(v) for v in (xmin, xmax, nx_f, ymin, ymax, ny_f))
    if not ok or nx_f != int(nx_f) or ny_f != int(ny_f) or nx_f < 2 or ny_f < 2:
        raise TerrainError(
            f"{p}: bad header, nx and ny must be integers >= 2 and bounds finite, got "
            f"{','.join(tokens[:6])!r}"
        )
    if not (xmax > xmin and ymax > ymin):
        raise TerrainError(
            f"{p}: bad header, expected xmax > xmin and ymax > ymin, got "
            f"x in [{xmin}, {xmax}], y in [{ymin}, {ymax}]"
        )
    nx, ny = int(nx_f), int(ny_f)
    values = tokens[6:]
    if len(values) != nx * ny:
        raise TerrainError(
            f"{p}: expected nx*ny = {nx}*{ny} = {nx * ny} heights after the header, "
            f"got {len(values)}"
        )
    try:
        z = np.array(values, dtype=np.float64)
    except ValueError:
        k = next(k for k, t in enumerate(values) if not _is_float(t))
        raise TerrainError(
            f"{p}: height {k} (x index {k % nx}, y index {k // nx}) is not a number: "
            f"{values[k]!r}"
        ) from None
    resolution = ((xmax - xmin) / (nx - 1), (ymax - ymin) / (ny - 1))
    try:
        return height_map(z.reshape(ny, nx), resolution, (xmin, ymin), name=p.stem,
                          normals=normals)
    except TerrainError as exc:
        raise TerrainError(f"{p}: {_without_place(exc)}") from None


def _without_place(exc: TerrainError) -> str:
    """Message of a height_map() error without its 'height_map: ' prefix (the file replaces it)."""
    return str(exc).removeprefix("height_map: ")


def _is_float(t: str) -> bool:
    try:
        float(t)
    except ValueError:
        return False
    return True


#: The ten benchmark terrains as shipped package data (with their LICENSE and PROVENANCE.md).
WMRDE_TERRAIN_DIR = Path(__file__).resolve().parents[1] / "data" / "wmrde_terrains"


def _benchmark_terrain_folder() -> tuple[Path, str]:
    """Folder of the benchmark terrains and how it was chosen (for error messages)."""
    env = os.environ.get("WMR_SHARED")
    if env:
        return Path(env) / "data" / "wmrde_terrains", f"WMR_SHARED={env}"
    return WMRDE_TERRAIN_DIR, "the wmr_model package data"


def load_wmrde_benchmark_terrains(folder: str | os.PathLike[str] | None = None,
                                  normals: str = "bilinear") -> list[Terrain]:
    """The ten rough terrains of wmrde's speed benchmark (Seegmiller 2014 §2.5.4, Table 2.6).

    Parameters
    ----------
    folder : str or PathLike, optional
        Folder holding ``gridsurfdata1.txt`` ... ``gridsurfdata10.txt``. Default: the copy
        shipped as package data, :data:`WMRDE_TERRAIN_DIR` (``wmr_model/data/wmrde_terrains``);
        the environment variable ``WMR_SHARED`` (optional override) selects
        ``$WMR_SHARED/data/wmrde_terrains`` instead.
    normals : {"bilinear", "nodal"}
        Normal convention (:data:`wmr_model.terrain.surface.GRID_NORMALS`). ``"nodal"`` is the
        surface wmrde's benchmark ran on (node slopes interpolated: continuous normals); the
        default ``"bilinear"`` patch normals jump at the 0.1 m grid lines, which a wheel crosses
        every 0.1 s at 1 m/s.

    Returns
    -------
    list of Terrain
        Ten ``GRID`` terrains, in file order 1..10 (201 x 101 nodes, 0.1 m spacing, x in
        [-6, 14] m, y in [-5, 5] m).
    """
    if folder is None:
        base, how = _benchmark_terrain_folder()
    else:
        base, how = Path(folder), "folder argument"
    if not base.is_dir():
        hint = ("unset WMR_SHARED to use the shipped copy" if how.startswith("WMR_SHARED")
                else "the installation lacks its package data: reinstall wmr_model")
        raise TerrainError(
            f"{base}: wmrde benchmark terrain folder not found (from {how}); {hint}, or pass "
            f"folder="
        )
    files = [base / f"gridsurfdata{k}.txt" for k in range(1, WMRDE_BENCHMARK_COUNT + 1)]
    missing = [f.name for f in files if not f.is_file()]
    if missing:
        raise TerrainError(f"{base}: missing wmrde benchmark terrain files {missing}")
    return [load_wmrde_grid(f, normals) for f in files]


# ---------------------------------------------------------------------------------------------
# Minimal PNG reader (grayscale, 8/16 bit, non-interlaced): PNG spec, ISO/IEC 15948
# ---------------------------------------------------------------------------------------------


@njit
def _png_unfilter(raw: Any, height: int, stride: int, bpp: int) -> Any:
    """Undo the per-row PNG filters (None, Sub, Up, Average, Paeth) of ``raw``.

    ``raw`` is uint8 of length height * (1 + stride); returns uint8 (height, stride).
    Returns an empty (0, 0) array if a filter type is unknown.
    """
    out = np.zeros((height, stride), dtype=np.uint8)
    for r in range(height):
        ftype = raw[r * (stride + 1)]
        base = r * (stride + 1) + 1
        if ftype > 4:
            return np.zeros((0, 0), dtype=np.uint8)
        for c in range(stride):
            x = np.int32(raw[base + c])
            a = np.int32(out[r, c - bpp]) if c >= bpp else np.int32(0)
            b = np.int32(out[r - 1, c]) if r > 0 else np.int32(0)
            cc = np.int32(out[r - 1, c - bpp]) if (r > 0 and c >= bpp) else np.int32(0)
            if ftype == 1:
                x += a
            elif ftype == 2:
                x += b
            elif ftype == 3:
                x += (a + b) // 2
            elif ftype == 4:
                p = a + b - cc
                pa = abs(p - a)
                pb = abs(p - b)
                pc = abs(p - cc)
                if pa <= pb and pa <= pc:
                    x += a
                elif pb <= pc:
                    x += b
                else:
                    x += cc
            out[r, c] = np.uint8(x & 0xFF)
    return out


def read_png_gray(path: str | os.PathLike[str]) -> np.ndarray:
    """Read a grayscale PNG (8 or 16 bit, non-interlaced) as raw gray levels.

    Returns
    -------
    ndarray, shape (height, width)
        uint16 gray levels; row 0 is the image's top row.
    """
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise TerrainError(f"{p}: cannot read PNG file ({exc})") from None
    if not data.startswith(_PNG_SIGNATURE):
        raise TerrainError(f"{p}: not a PNG file (bad signature)")
    pos = len(_PNG_SIGNATURE)
    header: tuple[int, ...] | None = None
    idat = bytearray()
    while True:
        if pos + 8 > len(data):
            raise TerrainError(f"{p}: truncated PNG (no IEND chunk)")
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        ctype = data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + length]
        crc = data[pos + 8 + length:pos + 12 + length]
        if len(body) != length or len(crc) != 4:
            raise TerrainError(f"{p}: truncated PNG chunk {ctype!r}")
        if struct.unpack(">I", crc)[0] != zlib.crc32(ctype + body):
            raise TerrainError(f"{p}: PNG chunk {ctype!r} fails its CRC check")
        pos += 12 + length
        if ctype == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif ctype == b"IDAT":
            idat += body
        elif ctype == b"IEND":
            break
    if header is None:
        raise TerrainError(f"{p}: PNG has no IHDR chunk")
    width, height, depth, color, _compression, _filter, interlace = header
    if color != 0 or depth not in (8, 16) or interlace != 0:
        raise TerrainError(
            f"{p}: expected a non-interlaced 8- or 16-bit grayscale PNG (color type 0), got "
            f"color type {color}, bit depth {depth}, interlace {interlace}"
        )
    bpp = depth // 8
    stride = width * bpp
    try:
        raw = zlib.decompress(bytes(idat))
    except zlib.error as exc:
        raise TerrainError(f"{p}: corrupt PNG image data ({exc})") from None
    if len(raw) != height * (stride + 1):
        raise TerrainError(
            f"{p}: PNG image data has {len(raw)} bytes, expected {height * (stride + 1)} "
            f"for {width}x{height} at {depth} bit"
        )
    rows = _png_unfilter(np.frombuffer(raw, dtype=np.uint8), height, stride, bpp)
    if rows.shape[0] != height:
        raise TerrainError(f"{p}: PNG uses an unknown row filter type (> 4)")
    if bpp == 2:
        pairs = rows.reshape(height, width, 2).astype(np.uint16)
        return (pairs[:, :, 0] << 8) | pairs[:, :, 1]  # big-endian samples
    return rows.astype(np.uint16)
