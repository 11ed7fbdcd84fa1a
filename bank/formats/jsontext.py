"""Reading JSON from files users hand us: every way one can be bad is one line naming it.

Not UTF-8, not JSON, nested deeper than the parser goes, a number too long to convert, too
big to read, a folder where a file was expected: each becomes the caller's own error class
with the file (and line) in its message. NaN and Infinity parse, as Python's json does; the
readers that take numbers reject them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bank.canonical import parse_json as fast_parse
from bank.errors import BankError

MAX_BYTES = 512 * 1024 * 1024
"""The largest JSON input read (a real result file or bank tree is a few MB at most)."""


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


def read_bytes(path: Path, error: type[BankError], label: str = "") -> bytes:
    """The bytes of an input file, or ``error`` naming the file and why it cannot be read."""
    where = _where(path, label)
    try:
        if path.is_dir():
            raise error(f"{where}: is a folder, not a file")
        size = path.stat().st_size
        if size > MAX_BYTES:
            raise error(f"{where}: {size / 2**20:.0f} MiB is more than the {MAX_BYTES // 2**20} MiB "
                        "an input may be")
        return path.read_bytes()
    except OSError as exc:
        raise error(f"{where}: cannot read ({exc.strerror or exc})") from exc


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
        return fast_parse(data)
    except json.JSONDecodeError as exc:
        raise error(f"{where}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
    except RecursionError:
        raise error(f"{where}: not valid JSON (nested too deeply)") from None
    except ValueError as exc:  # e.g. an integer of more digits than Python converts
        reason = str(exc).split(";")[0].splitlines()[0]
        raise error(f"{where}: not valid JSON ({reason})") from None
