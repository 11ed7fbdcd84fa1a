"""Reading JSON Lines: one object per line, errors naming the file and the line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tunebank.bank.errors import BankError
from tunebank.bank.formats.jsontext import parse_json


def json_object(path: Path, number: int, text: str, error: type[BankError]) -> dict[str, Any]:
    """Line ``number`` of ``path`` as a JSON object.

    Raises:
        error: the line is not JSON, or not an object.
    """
    value = parse_json(text, f"{path}: line {number}", error)
    if not isinstance(value, dict):
        raise error(f"{path}: line {number}: must be a JSON object")
    return value
