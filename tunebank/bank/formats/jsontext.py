"""Reading JSON from files users hand us: every way one can be bad is one line naming it.

Not UTF-8, not JSON, nested deeper than the parser goes, a number too long to convert, too
big to read, a folder where a file was expected: each becomes the caller's own error class
with the file (and line) in its message. NaN and Infinity parse, as Python's json does; the
readers that take numbers reject them.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import stat
from pathlib import Path
from typing import Any, BinaryIO

from tunebank.bank.canonical import parse_json as fast_parse
from tunebank.bank.errors import BankError

_SURROGATE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
MAX_BYTES = 512 * 1024 * 1024
"""The largest JSON input read (a real result file or bank tree is a few MB at most)."""
UNCAPPED = 1 << 62
"""The limit of an input read a line at a time (an events file): memory stays flat at any size."""


def read_json_file(path: Path, error: type[BankError], label: str = "") -> Any:
    """The JSON value in ``path``; ``label`` (an option name) starts every message.

    Raises:
        error: the file cannot be read, is too big, or is not JSON.
    """
    return parse_json(read_bytes(path, error, label), _where(path, label), error)


def read_text(path: Path, error: type[BankError], label: str = "") -> str:
    """The UTF-8 text of an input file, or ``error`` naming the file and what is wrong."""
    data = read_bytes(path, error, label)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"{_where(path, label)}: not UTF-8 text (bad byte at offset {exc.start})") from None


def read_bytes(path: Path, error: type[BankError], label: str = "",
               limit: int = MAX_BYTES) -> bytes:
    """The bytes of an input file, or ``error`` naming the file and why it cannot be read."""
    where = _where(path, label)
    with open_regular(path, error, label, limit) as handle:
        try:
            data = _read_capped(handle, limit)
        except OSError as exc:
            raise error(f"{where}: cannot read ({exc.strerror or exc})") from exc
        except MemoryError:  # a file this machine (or its ulimit) cannot hold
            raise error(f"{where}: too big to read into this machine's memory") from None
    if len(data) > limit:
        raise error(f"{where}: more than the {limit // 2**20} MiB an input may be")
    return data


_CHUNK = 1 << 20


def _read_capped(handle: BinaryIO, limit: int) -> bytes:
    """At most ``limit + 1`` bytes of ``handle``, allocating what the file holds, not the cap:
    ``read(n)`` reserves all ``n`` bytes before it reads, so ``read(limit + 1)`` with a 2 GiB
    model cap failed under any address-space limit below that (issue 41). The file's size as
    opened is read in one go; what it grew by since (or all of a file that says it is empty,
    as /proc's do) comes in 1 MiB chunks, up to the cap."""
    size = min(os.fstat(handle.fileno()).st_size, limit)
    first = handle.read(size + 1)
    if len(first) <= size:  # the end came before the byte past the size: all of it
        return first
    chunks = [first]
    total = len(first)
    while total <= limit:
        chunk = handle.read(min(_CHUNK, limit + 1 - total))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    return b"".join(chunks)


def open_regular(path: Path, error: type[BankError], label: str = "",
                 limit: int = MAX_BYTES) -> BinaryIO:
    """``path`` opened for reading if it is a regular file of at most ``limit`` bytes, or
    ``error`` naming the file and why not. The check is made on the file opened, not on the
    name (which could be swapped between a look and an open), and the open never waits: a FIFO
    would hang a read, and a device (``/dev/zero``) never ends one.
    """
    where = _where(path, label)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO opens at once, to be refused
    except OSError as exc:
        raise error(f"{where}: cannot read ({exc.strerror or exc})") from exc
    try:
        problem = file_problem(os.fstat(fd), limit)
        if problem:
            raise error(f"{where}: {problem}")
        os.set_blocking(fd, True)
        handle = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    return handle


def file_problem(status: os.stat_result, limit: int = MAX_BYTES) -> str | None:
    """Why a file of ``status`` is no input (a folder, a device, a pipe, a socket, or more
    than ``limit`` bytes), or ``None`` for a regular file under the cap."""
    if stat.S_ISDIR(status.st_mode):
        return "is a folder, not a file"
    if not stat.S_ISREG(status.st_mode):
        return "not a regular file (a device, a pipe or a socket)"
    if status.st_size > limit:
        return f"{status.st_size / 2**20:.0f} MiB is more than the {limit // 2**20} MiB an input may be"
    return None


def _where(path: Path, label: str) -> str:
    return f"{label}: {path}" if label else str(path)


def parse_json(data: bytes | str, where: str, error: type[BankError]) -> Any:
    """Parse JSON text, or raise ``error`` with ``where`` and the reason in one line."""
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise error(f"{where}: not UTF-8 text (bad byte at offset {exc.start})") from None
    try:
        value = fast_parse(data)
    except json.JSONDecodeError as exc:
        raise error(f"{where}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
    except RecursionError:
        raise error(f"{where}: not valid JSON (nested too deeply)") from None
    except ValueError as exc:  # e.g. an integer of more digits than Python converts
        reason = str(exc).split(";")[0].splitlines()[0]
        raise error(f"{where}: not valid JSON ({reason})") from None
    if _SURROGATE.search(data):
        _refuse_lone_surrogates(value, data, where, error)
    return value


def _refuse_lone_surrogates(value: Any, text: str, where: str, error: type[BankError]) -> None:
    """A ``\\udXXX`` escape that is not half of a pair decodes to a lone surrogate, which no
    Unicode text holds: it cannot be hashed, stored or printed, so the file is refused."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except RecursionError:
        raise error(f"{where}: not valid JSON (nested too deeply)") from None
    except UnicodeEncodeError:
        line = text.count("\n", 0, _lone_surrogate_at(text)) + 1
        raise error(f"{where}: not valid JSON text (line {line}: a lone surrogate escape such as "
                    "\\ud800, which no Unicode text holds)") from None


def _lone_surrogate_at(text: str) -> int:
    """Where the first escape stands that is not half of a high-then-low pair (0 if none)."""
    escapes = list(_SURROGATE.finditer(text))
    paired: set[int] = set()
    for first, second in itertools.pairwise(escapes):
        high = first.group()[2].lower() == "d" and first.group()[3].lower() in "89ab"
        if high and first.start() not in paired and second.start() == first.end() \
                and second.group()[3].lower() in "cdef":
            paired |= {first.start(), second.start()}
    return next((m.start() for m in escapes if m.start() not in paired), 0)
