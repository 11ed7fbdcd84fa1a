"""Helpers only tests need, kept out of the product: SQL run behind the bank's back (with the
append-only triggers removed, to simulate tampering), the projection tables as they are, whole,
in memory, and an import of paths in one call."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from tunebank.bank import Bank
from tunebank.bank.exchange.imports import ImportReport, Resolver, apply_import, read_imports
from tunebank.bank.projection import Projection

_DROP_TRIGGERS = {
    "sqlite": ("DROP TRIGGER IF EXISTS events_refuse_update",
               "DROP TRIGGER IF EXISTS events_refuse_delete"),
    "postgresql": ("DROP TRIGGER IF EXISTS events_refuse_change ON events",
                   "DROP TRIGGER IF EXISTS events_refuse_truncate ON events"),
}


def run_sql(bank: Bank, *statements: str, drop_triggers: bool = False) -> None:
    """Run ``statements`` behind the bank's back, in one transaction; with ``drop_triggers``,
    first remove the append-only triggers, as someone tampering with the database could."""
    store = bank.store
    with store.transaction("write") as db:
        if drop_triggers:
            for statement in _DROP_TRIGGERS[store.dialect]:
                db.run(statement)
        for statement in statements:
            db.run(statement)


def tamper(bank: Bank, *statements: str) -> None:
    """:func:`run_sql` with the append-only triggers removed first."""
    run_sql(bank, *statements, drop_triggers=True)


def stored_projection(bank: Bank) -> Projection:
    """The policy and task tables as they are, whole, in memory."""
    return Projection({p.key: p for p in bank.policies()}, {t.task_id: t for t in bank.tasks()})


def import_paths(bank: Bank, paths: Sequence[Path], soc_version: str | None,
                 resolve: Resolver | None = None, model_name: str | None = None,
                 model_hash: str | None = None) -> ImportReport:
    """Read, validate and append every file in one transaction, as `bank import` does."""
    return apply_import(bank, read_imports(paths, soc_version, resolve, model_name, model_hash))
