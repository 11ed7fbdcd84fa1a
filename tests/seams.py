"""Helpers only tests need, kept out of the product: removing the append-only triggers (to
simulate tampering), the projection tables as they are, whole, in memory, and an import of
paths in one call."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from sqlalchemy import Connection

from bank import Bank
from bank.imports import ImportReport, Resolver, apply_import, read_imports
from bank.projection import Projection


def drop_triggers(conn: Connection) -> None:
    """Remove the append-only triggers, as someone tampering with the file could."""
    if conn.dialect.name == "sqlite":
        conn.exec_driver_sql("DROP TRIGGER IF EXISTS events_refuse_update")
        conn.exec_driver_sql("DROP TRIGGER IF EXISTS events_refuse_delete")
    else:
        conn.exec_driver_sql("DROP TRIGGER IF EXISTS events_refuse_change ON events")
        conn.exec_driver_sql("DROP TRIGGER IF EXISTS events_refuse_truncate ON events")


def stored_projection(bank: Bank) -> Projection:
    """The policy and task tables as they are, whole, in memory."""
    return Projection({p.key: p for p in bank.policies()}, {t.task_id: t for t in bank.tasks()})


def import_paths(bank: Bank, paths: Sequence[Path], soc_version: str | None,
                 resolve: Resolver | None = None, model_name: str | None = None,
                 model_hash: str | None = None) -> ImportReport:
    """Read, validate and append every file in one transaction, as `bank import` does."""
    return apply_import(bank, read_imports(paths, soc_version, resolve, model_name, model_hash))
