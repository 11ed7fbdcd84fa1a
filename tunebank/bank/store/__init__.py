"""Storage: the event log and its projections in one SQL database, on the database's own driver.

- :mod:`bank.store.base`: the recorder contract (:class:`EventStore`), what every database
  guarantees and raises, and the transactions;
- :mod:`bank.store.sqlite`, :mod:`bank.store.postgres`: one recorder per database;
- :mod:`bank.store.writes` (append) and :mod:`bank.store.replay` (read back, re-derive), the two
  paths apart; :mod:`bank.store.reads`, the queries of the projections;
- :mod:`bank.store.statements`: the hand-written SQL, held to :mod:`bank.schema`'s tables by a
  test; :mod:`bank.store.create`: the only module that turns those tables into DDL.

Nothing outside :mod:`bank` uses this package: everything goes through :class:`bank.Bank`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from tunebank.bank.store.results import AppendResult, EventFilter, PolicyFilter, Replay, StreamResult

if TYPE_CHECKING:
    from tunebank.bank.store.base import EventStore
    from tunebank.bank.store.writes import bulk_job

_LATER = {"EventStore": "tunebank.bank.store.base", "bulk_job": "tunebank.bank.store.writes"}
"""Names imported when first used, so the conversions the store's modules share
(:mod:`bank.rows`) can import :mod:`bank.store.statements` without a cycle."""


def __getattr__(name: str) -> Any:
    if name not in _LATER:
        raise AttributeError(f"module 'tunebank.bank.store' has no attribute {name!r}")
    return getattr(importlib.import_module(_LATER[name]), name)


def open_store(url: str, *, read_only: bool = False, given: str | None = None) -> EventStore:
    """The recorder for the bank at ``url``: PostgreSQL for ``postgresql...`` URLs, else SQLite
    (nothing is connected until the first transaction). Its errors name the database as
    ``given`` (the user's spelling of the URL), if given."""
    if url.startswith("postgresql"):
        from tunebank.bank.store.postgres import PostgresStore

        return PostgresStore(url, read_only=read_only, given=given)
    from tunebank.bank.store.sqlite import SQLiteStore

    return SQLiteStore(url, read_only=read_only, given=given)


__all__ = ["AppendResult", "EventFilter", "EventStore", "PolicyFilter", "Replay", "StreamResult",
           "bulk_job", "open_store"]
