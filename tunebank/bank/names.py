"""Names that come from other people's files (chips, operator types) and end up in file names.

A bank tree is laid out by chip and operator type (``{soc}/unified_bank/{soc}_{cores}_AiCore_
{op}_runtime_kb.json``), and those names arrive in banks, trees, result files and events files
written by someone else. They are data: before one becomes part of a path it must be a plain
name, never a separator, a ``..``, a control character or a name long enough to break a file
system's limit.

Two rules live here, and every door and every writer uses them: a chip name is a plain name
wherever an event comes in (:func:`check_chip`: result files, trees, events files, merges,
tunes), and a path built from names stays inside the folder it was meant for
(:func:`path_inside`), checked after the file system has resolved its links.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from tunebank.bank.canonical import shown
from tunebank.bank.errors import BankError

MAX_NAME = 100
"""The longest chip or operator name put in a file name: AOE's are under 30 characters, and a
bank file's name (chip twice, op, core count, suffix) must stay under the usual 255 bytes."""
MAX_FILE_NAME = 255
"""The longest file name most file systems take (ext4, XFS, NTFS: 255 bytes; the names here
are ASCII)."""
_PLAIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")


def is_plain_name(value: object) -> bool:
    """Whether ``value`` can stand in a file name as it is: ASCII letters, digits and
    ``. _ + -``, starting with a letter or digit (so never ``..`` nor a hidden name), at most
    :data:`MAX_NAME` characters. Every chip and operator name AOE and CANN use is one."""
    return isinstance(value, str) and len(value) <= MAX_NAME and _PLAIN.fullmatch(value) is not None


def why_not_plain(value: object) -> str:
    """What keeps ``value`` from being a plain name, for an error line (``value`` shown escaped)."""
    if not isinstance(value, str):
        return f"must be a string, not {shown(value)}"
    if len(value) > MAX_NAME:
        return f"is {len(value)} characters long, more than the {MAX_NAME} a file name part may be"
    return (f"{value!a} is not a plain name (letters, digits and . _ + -, starting with a "
            "letter or digit): it would not be a safe part of a file name")


class UnsafeNameError(BankError):
    """A name from someone else's data cannot be used where it was going: a chip that is not
    a plain name, or a path that would leave its folder."""


def check_chip(value: object, where: str) -> None:
    """Refuse a chip name that is not a plain name: a chip is a folder of AOE's bank tree, and
    every chip AOE and CANN name is plain. ``where`` names what brought it in.

    Raises:
        UnsafeNameError: ``value`` is not a plain name.
    """
    if not is_plain_name(value):
        raise UnsafeNameError(f"{where}: the chip {why_not_plain(value)}")


def path_inside(root: Path, *names: str) -> Path:
    """``root / names...``, each name checked as a plain name, and the result checked, after
    resolving its links, to lie inside ``root`` resolved: a link planted in ``root`` (a chip
    folder pointing elsewhere) is refused like a ``..``.

    Raises:
        UnsafeNameError: a name is not plain, or the path leads out of ``root``.
    """
    for name in names:  # a file's name holds two names and more: the file system's limit holds
        if isinstance(name, str) and len(name) > MAX_FILE_NAME:
            raise UnsafeNameError(f"{root}: a file name of {len(name)} characters, more than the "
                                  f"{MAX_FILE_NAME} a file system takes")
        if not isinstance(name, str) or not _PLAIN.fullmatch(name):
            raise UnsafeNameError(f"{root}: a file name {why_not_plain(name)}")
    path = root.joinpath(*names)
    base = os.path.realpath(root)
    if os.path.commonpath([base, os.path.realpath(path)]) != base:
        raise UnsafeNameError(f"{path}: leads out of {root} (through a link); nothing is written "
                              "outside the folder given")
    return path


_CONTROL = ({c: f"\\x{c:02x}" for c in (*range(32), *range(127, 160))}
            | {c: f"\\u{c:04x}" for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A))}
            | {10: "\\n", 13: "\\r", 9: "\\t"})
"""C0 and C1 controls (ESC, CSI, a bare CR, OSC 8's opener), and the bidirectional overrides
that make text read otherwise than it is stored."""


def one_line(text: str) -> str:
    """``text`` with its control characters made visible (``\\x1b``, ``\\r``, ``\\u202e``):
    a name from someone else's file (an op name holding a newline, an escape sequence or an
    OSC 8 hyperlink) cannot break a line, move the cursor or restyle a terminal. Every line,
    table cell and CSV cell the CLI prints goes through this; ``--json`` stays exact."""
    return text.translate(_CONTROL)
