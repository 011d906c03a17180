"""File-system helpers every reader and writer of the package uses.

* **Atomic writes**: :func:`atomic_output` (a temporary file in the destination folder, renamed
  over the destination when complete) and :func:`write_text_atomically` on top of it. A reader
  sees the old file or the new one, never half of one, and an interrupted write leaves the old
  file. New files get mode 0644 (readable by the other users of a shared robot account), not
  the 0600 of a bare temporary file.
* **Output folders**: :func:`prepare_output_dir` creates the last component only; a missing
  parent is a typo far more often than an intent, so it is an error naming it.
* **Reading**: :func:`read_text` decodes UTF-8 and names the file and the byte offset when it
  cannot; :func:`check_regular_file` refuses FIFOs, devices and folders before a read blocks
  or fails obscurely.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

from wmr_model.errors import ParameterError, WmrError

__all__ = [
    "FILE_MODE",
    "atomic_output",
    "write_text_atomically",
    "prepare_output_dir",
    "read_text",
    "check_regular_file",
]

#: Mode of the files the package writes (rw-r--r--), before the process umask.
FILE_MODE = 0o644


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def prepare_output_dir(path: str | os.PathLike[str], what: str = "output folder") -> Path:
    """Create folder ``path`` if needed (the last component only) and return it.

    Raises:
        ParameterError: the parent folder does not exist, or ``path`` exists and is not a folder.
    """
    p = Path(path).expanduser()
    if p.is_dir():
        return p
    if p.exists():
        raise ParameterError(f"{what} {p}: exists and is not a folder")
    parent = p.parent
    if not parent.is_dir():
        raise ParameterError(f"{what} {p}: its parent folder {parent} does not exist (only the "
                             "last component is created)")
    p.mkdir(exist_ok=True)
    return p


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike[str], *, mode: int = FILE_MODE,
                  what: str = "output file") -> Iterator[Path]:
    """Yield a temporary path next to ``path``; when the block completes, rename it to ``path``.

    The temporary file is removed when the block raises. The parent folder must exist (see
    :func:`prepare_output_dir`). ``mode`` is applied (minus the umask) before the rename.
    """
    dest = Path(path).expanduser()
    if not dest.parent.is_dir():
        raise ParameterError(f"{what} {dest}: folder {dest.parent} does not exist")
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, mode & ~_umask())
        os.replace(tmp, dest)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):  # make the rename itself durable
        dfd = os.open(dest.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


def write_text_atomically(path: str | os.PathLike[str], text: str, *,
                          mode: int = FILE_MODE) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically (:func:`atomic_output`); returns the path.

    A missing parent folder is created when its own parent exists (one level, like
    :func:`prepare_output_dir`)."""
    dest = Path(path).expanduser()
    prepare_output_dir(dest.parent, "folder of")
    with atomic_output(dest, mode=mode) as tmp, open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    return dest


def check_regular_file(path: str | os.PathLike[str], what: str = "file",
                       error: type[WmrError] = ParameterError) -> Path:
    """``path`` as a Path if it is a regular file (symlinks followed); else raise ``error``
    naming it (missing, a folder, a FIFO or a device: reading those would fail or block)."""
    p = Path(path).expanduser()
    try:
        st = p.stat()
    except OSError as exc:
        raise error(f"{what} {p}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(st.st_mode):
        kind = "a folder" if stat.S_ISDIR(st.st_mode) else \
            "a FIFO" if stat.S_ISFIFO(st.st_mode) else "not a regular file"
        raise error(f"{what} {p}: is {kind}; expected a regular file")
    return p


def read_text(path: str | os.PathLike[str], what: str = "file",
              error: type[WmrError] = ParameterError) -> str:
    """The UTF-8 text of regular file ``path``; ``error`` names the file on a bad byte."""
    p = check_regular_file(path, what, error)
    data = p.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise error(f"{what} {p}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset "
                    f"{exc.start}, line {line})") from None
