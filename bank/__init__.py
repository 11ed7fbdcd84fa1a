"""tunebank's knowledge bank: an append-only log of tuning outcomes and what is derived from it.

The names below are imported when first used (PEP 562), so a command that only reads a task
from an SQLite bank (bank/quick.py) starts without loading SQLAlchemy and SQLModel.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bank.api import Bank, Outcome, policy_json, task_json
    from bank.errors import (
        BankError,
        BankLocationError,
        EventValidationError,
        OutcomeRuleError,
        StoreError,
        UnknownTaskError,
    )
    from bank.events import Event, EventKind, StoredEvent
    from bank.projection import SUMMARY_FIELDS, Policy, Projection
    from bank.store import AppendResult, EventFilter, PolicyFilter
    from bank.tasks import TaskView
    from bank.verify import VerifyReport

_HOMES = {
    "bank.api": ("Bank", "Outcome", "policy_json", "task_json"),
    "bank.errors": ("BankError", "BankLocationError", "EventValidationError", "OutcomeRuleError",
                    "StoreError", "UnknownTaskError"),
    "bank.events": ("Event", "EventKind", "StoredEvent"),
    "bank.projection": ("SUMMARY_FIELDS", "Policy", "Projection"),
    "bank.tasks": ("TaskView",),
    "bank.store": ("AppendResult", "EventFilter", "PolicyFilter"),
    "bank.verify": ("VerifyReport",),
}
_HOME_OF = {name: module for module, names in _HOMES.items() for name in names}


def __getattr__(name: str) -> Any:
    module = _HOME_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'bank' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "SUMMARY_FIELDS",
    "AppendResult",
    "Bank",
    "BankError",
    "BankLocationError",
    "Event",
    "EventFilter",
    "EventKind",
    "EventValidationError",
    "Outcome",
    "OutcomeRuleError",
    "Policy",
    "PolicyFilter",
    "Projection",
    "StoreError",
    "StoredEvent",
    "TaskView",
    "UnknownTaskError",
    "VerifyReport",
    "policy_json",
    "task_json",
]
