"""Files written whole or not at all: a temporary file beside the target, fsync, rename.

A reader (or a tune killed mid-write, or a machine that loses power) sees the old file or the
new one, never a torn mix. Every file tunebank writes goes through here.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO, Any

from tunebank.bank.errors import WriteError


@contextmanager
def atomic_file(path: Path, *, binary: bool = False, exclusive: bool = False) -> Iterator[IO[Any]]:
    """A handle on a temporary file that replaces ``path`` when the block ends without error
    (with ``exclusive``, that becomes ``path`` only if there is no such file yet: linked into
    place, which no other writer can race).

    The data is fsynced before the rename and the folder after it, so the new name survives a
    crash. The file gets the permissions a plain ``open`` would give it (the old file's, if
    there was one). On any error the temporary file is removed and ``path`` is left as it was.

    Raises:
        WriteError: the file system refused (a full disk, a folder that cannot be written).
        FileExistsError: ``exclusive``, and ``path`` exists; nothing was written.
    """
    made: list[Path] = []
    try:
        _make_folders(path, made)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        _remove_folders(made)
        raise WriteError(f"{path}: cannot be written ({exc.strerror or exc})") from None
    try:
        handle: IO[Any] = os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8")
        with handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, _mode_for(path))
        if exclusive:
            os.link(tmp, path)  # FileExistsError if another file holds the name
            os.unlink(tmp)
        else:
            os.replace(tmp, path)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        _remove_folders(made)
        if isinstance(exc, FileExistsError):
            raise
        if isinstance(exc, OSError) and not isinstance(exc, BrokenPipeError):  # a full disk
            raise WriteError(f"{path}: cannot be written ({exc.strerror or exc}); it was left "
                             "as it was") from None
        raise
    _fsync_folder(path.parent)


def write_text_atomic(path: Path, text: str, *, exclusive: bool = False) -> None:
    """Replace ``path`` with ``text`` (UTF-8) atomically (see :func:`atomic_file`)."""
    with atomic_file(path, exclusive=exclusive) as handle:
        handle.write(text)


def write_texts_atomic(files: Mapping[Path, str]) -> None:
    """Write several files, all or (as far as a file system allows) none: every one is written
    and synced under a temporary name first, and only then are they renamed into place. A full
    disk in the middle leaves every target as it was and no temporary file behind.

    Raises:
        WriteError: a file could not be written; no target was changed.
    """
    written: list[tuple[Path, str]] = []
    made: list[Path] = []  # folders this made, innermost last
    try:
        for path, text in files.items():
            _make_folders(path, made)
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
            written.append((path, tmp))
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())
            os.chmod(tmp, _mode_for(path))
    except BaseException as exc:
        for _, tmp in written:
            Path(tmp).unlink(missing_ok=True)
        _remove_folders(made)
        if isinstance(exc, OSError):
            where = written[-1][0] if written else next(iter(files), Path("."))
            raise WriteError(f"{where}: cannot be written ({exc.strerror or exc}); no file of "
                             "this write was changed") from None
        raise
    for path, tmp in written:
        os.replace(tmp, path)
    for folder in {path.parent for path, _ in written}:
        _fsync_folder(folder)


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically."""
    with atomic_file(path, binary=True) as handle:
        handle.write(data)


def write_json_atomic(path: Path, value: Any, *, pretty: bool = True,
                      exclusive: bool = False) -> None:
    """Replace ``path`` with ``value`` as JSON atomically (see :func:`atomic_file`).

    ``pretty=False`` writes it compact, which the C encoder does many times faster: for files
    rewritten after every operator of a large model.
    """
    write_text_atomic(path, json.dumps(value, indent=2 if pretty else None, ensure_ascii=False) + "\n",
                      exclusive=exclusive)


def _make_folders(path: Path, made: list[Path]) -> None:
    """Make ``path``'s missing folders, outermost first, adding each to ``made``."""
    for folder in reversed([path.parent, *path.parent.parents]):
        if not folder.exists():
            try:
                folder.mkdir()
            except FileExistsError:  # made meanwhile by another process: not ours to remove
                continue
            made.append(folder)


def _remove_folders(made: list[Path]) -> None:
    """Remove the folders a failed write made (innermost first), if they are still empty."""
    for folder in reversed(made):
        with suppress(OSError):
            folder.rmdir()


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
