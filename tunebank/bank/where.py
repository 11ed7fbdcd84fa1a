"""Field conditions on entries (``--where m=8192 --where 'k>=1024'``): how people find an entry
by what they know of its shape.

A condition names a field of the entry's info_dict (``m``), or of its knowledge with
``knowledge.`` before it (``knowledge.baseM``), an operator (``= != < <= > >=``) and a value
read as JSON (``8192``, ``1.5``, ``true``), or as text when it is not JSON. Numbers compare as
numbers (``1`` equals ``1.0``), never with a bool; ``<`` and the others hold for numbers only. An
entry without the field matches no condition on it, not even ``!=``.
"""

from __future__ import annotations

import json
import operator
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tunebank.bank.errors import BankError

_SHAPE = re.compile(r"^(?P<field>[A-Za-z_][A-Za-z0-9_.]*)\s*(?P<op>!=|<=|>=|=|<|>)\s*(?P<value>.*)$")
_ORDER: dict[str, Callable[[Any, Any], bool]] = {"<": operator.lt, "<=": operator.le,
                                                 ">": operator.gt, ">=": operator.ge}


class WhereError(BankError):
    """A --where condition is not FIELD OP VALUE."""


@dataclass(frozen=True)
class Condition:
    """One ``FIELD OP VALUE``."""

    part: str  # info_dict | knowledge
    name: str
    op: str
    value: Any

    @property
    def column(self) -> str:
        """The column a table shows the field's value in."""
        return self.name if self.part == "info_dict" else f"knowledge.{self.name}"

    def value_of(self, info_dict: Mapping[str, Any], knowledge: Mapping[str, Any]) -> Any:
        """The field's value in an entry (None if the entry lacks it)."""
        return (info_dict if self.part == "info_dict" else knowledge).get(self.name)

    def holds(self, info_dict: Mapping[str, Any], knowledge: Mapping[str, Any]) -> bool:
        """Whether an entry meets the condition (one without the field never does)."""
        source = info_dict if self.part == "info_dict" else knowledge
        if self.name not in source:
            return False
        found = source[self.name]
        if self.op in ("=", "!="):
            return _equal(found, self.value) == (self.op == "=")
        return _number(found) and _ORDER[self.op](found, self.value)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _equal(a: Any, b: Any) -> bool:
    if _number(a) and _number(b):
        return bool(a == b)
    return type(a) is type(b) and a == b


def parse_condition(text: str) -> Condition:
    """One ``--where`` condition.

    Raises:
        WhereError: it is not FIELD OP VALUE, or orders (``<`` ...) by what is not a number.
    """
    match = _SHAPE.match(text.strip())
    if match is None:
        raise WhereError(f"--where: {text!r} is not FIELD=VALUE (or !=, <, <=, >, >=), e.g. m=8192")
    field, op, raw = match["field"], match["op"], match["value"].strip()
    part, _, name = field.partition(".") if field.startswith(("knowledge.", "info_dict.")) \
        else ("info_dict", "", field)
    if not name:
        raise WhereError(f"--where: {text!r} names no field after {part}.")
    try:
        value = json.loads(raw)
    except ValueError:
        value = raw
    if op in _ORDER and not _number(value):
        raise WhereError(f"--where: {text!r}: {op} compares numbers, and {raw!r} is not one")
    return Condition(part, name, op, value)


def parse_conditions(texts: Sequence[str] | None) -> list[Condition]:
    """Every ``--where`` condition (all of them must hold)."""
    return [parse_condition(text) for text in texts or ()]


def all_hold(conditions: Sequence[Condition], info_dict: Mapping[str, Any] | None,
             knowledge: Mapping[str, Any] | None) -> bool:
    """Whether an entry meets every condition."""
    info, known = info_dict or {}, knowledge or {}
    return all(c.holds(info, known) for c in conditions)
