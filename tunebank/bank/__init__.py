"""tunebank's knowledge bank: an append-only log of tuning outcomes and what is derived from it.

The names below are imported when first used (PEP 562), so a command that only reads a task
from an SQLite bank (bank/quick.py) starts without loading SQLAlchemy and SQLModel.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tunebank.bank.api import Bank, Outcome, op_types, policy_json, task_json, upgrade_bank
    from tunebank.bank.audit.verify import VerifyReport
    from tunebank.bank.errors import (
        BankError,
        BankLocationError,
        EventValidationError,
        OutcomeRuleError,
        StoreError,
        UnknownTaskError,
    )
    from tunebank.bank.events import Event, EventKind, StoredEvent
    from tunebank.bank.projection import SUMMARY_FIELDS, Policy, Projection
    from tunebank.bank.store import AppendResult, EventFilter, PolicyFilter
    from tunebank.bank.tasks import TaskView

_HOMES = {
    "tunebank.bank.api": ("Bank", "Outcome", "op_types", "policy_json", "task_json", "upgrade_bank"),
    "tunebank.bank.errors": ("BankError", "BankLocationError", "EventValidationError", "OutcomeRuleError",
                    "StoreError", "UnknownTaskError"),
    "tunebank.bank.events": ("Event", "EventKind", "StoredEvent"),
    "tunebank.bank.projection": ("SUMMARY_FIELDS", "Policy", "Projection"),
    "tunebank.bank.tasks": ("TaskView",),
    "tunebank.bank.store": ("AppendResult", "EventFilter", "PolicyFilter"),
    "tunebank.bank.audit.verify": ("VerifyReport",),
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
    "op_types",
    "policy_json",
    "task_json",
    "upgrade_bank",
]
