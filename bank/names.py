"""Names that come from other people's files (chips, operator types) and end up in file names.

A bank tree is laid out by chip and operator type (``{soc}/unified_bank/{soc}_{cores}_AiCore_
{op}_runtime_kb.json``), and those names arrive in banks, trees, result files and events files
written by someone else. They are data: before one becomes part of a path it must be a plain
name, never a separator, a ``..``, a control character or a name long enough to break a file
system's limit.
"""

from __future__ import annotations

import re

from bank.formats.jsontext import shown

MAX_NAME = 100
"""The longest chip or operator name put in a file name: AOE's are under 30 characters, and a
bank file's name (chip twice, op, core count, suffix) must stay under the usual 255 bytes."""
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
