"""The errors the bank raises. Every one carries a one-line message meant for a person."""

from __future__ import annotations


class BankError(Exception):
    """Base class of every error the bank raises on purpose."""


class BankLocationError(BankError):
    """The bank's location is missing, unreadable or cannot be written."""


class OutcomeRuleError(BankError):
    """An append would break the outcome rules; nothing of its batch was written."""


class EventValidationError(BankError):
    """An event is malformed (unknown kind, missing field, bad payload)."""


class WriteError(BankError):
    """A file could not be written (a full disk, a folder that cannot be written); the file
    was left as it was, and nothing of it stays behind."""


class UnknownTaskError(BankError):
    """No task matches the id or prefix given."""


class StoreError(BankError):
    """The database refused an operation (locked, read-only, corrupt, unreachable).

    ``transient`` marks a refusal that the same transaction may not meet again (a lock held by
    another writer, a serialisation failure): the store retries those a bounded number of times.
    """

    def __init__(self, message: str, *, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient


READ_ONLY = "read-only for this user (it can be read, not changed)"
"""How every refusal to write a bank this user may only read ends, whichever check meets it."""
