"""tunebank's knowledge bank: an append-only log of tuning outcomes and what is derived from it."""

from __future__ import annotations

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
from bank.projection import SUMMARY_FIELDS, Policy, Projection, TaskView
from bank.store import AppendResult, EventFilter, PolicyFilter
from bank.verify import VerifyReport

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
