"""Reading JSON Lines: one object per line, errors naming the file and the line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bank.errors import BankError


def json_object(path: Path, number: int, text: str, error: type[BankError]) -> dict[str, Any]:
    """Line ``number`` of ``path`` as a JSON object.

    Raises:
        error: the line is not JSON, or not an object.
    """
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise error(f"{path}: line {number}: not valid JSON ({exc.msg})") from exc
    if not isinstance(value, dict):
        raise error(f"{path}: line {number}: must be a JSON object")
    return value
