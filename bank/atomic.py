"""Files written whole or not at all: a temporary file beside the target, fsync, rename.

A reader (or a tune killed mid-write, or a machine that loses power) sees the old file or the
new one, never a torn mix. Every file tunebank writes goes through here.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any


@contextmanager
def atomic_file(path: Path, *, binary: bool = False) -> Iterator[IO[Any]]:
    """A handle on a temporary file that replaces ``path`` when the block ends without error.

    The data is fsynced before the rename and the folder after it, so the new name survives a
    crash. The file gets the permissions a plain ``open`` would give it (the old file's, if
    there was one). On any error the temporary file is removed and ``path`` is left as it was.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        handle: IO[Any] = os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8")
        with handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, _mode_for(path))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_folder(path.parent)


def write_text_atomic(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` (UTF-8) atomically."""
    with atomic_file(path) as handle:
        handle.write(text)


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically."""
    with atomic_file(path, binary=True) as handle:
        handle.write(data)


def write_json_atomic(path: Path, value: Any, *, pretty: bool = True) -> None:
    """Replace ``path`` with ``value`` as JSON atomically.

    ``pretty=False`` writes it compact, which the C encoder does many times faster: for files
    rewritten after every operator of a large model.
    """
    write_text_atomic(path, json.dumps(value, indent=2 if pretty else None, ensure_ascii=False) + "\n")


def _mode_for(path: Path) -> int:
    """The old file's permissions, else what the umask leaves of rw for everyone."""
    try:
        return path.stat().st_mode & 0o7777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def _fsync_folder(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:  # some filesystems cannot sync a directory; the rename itself is done
        pass
    finally:
        os.close(fd)
