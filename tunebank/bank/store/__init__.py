"""Storage: the event log and its projections in one SQL database, on the database's own driver.

- :mod:`bank.store.base`: the recorder contract (:class:`~bank.store.base.EventStore`), what
  every database guarantees and raises, and the transactions;
- :mod:`bank.store.sqlite`, :mod:`bank.store.postgres`: one recorder per database;
- :mod:`bank.store.writes` (append) and :mod:`bank.store.replay` (read back, re-derive), the two
  paths apart; :mod:`bank.store.reads`, the queries of the projections;
- :mod:`bank.store.rows`: rows to the domain's values and back;
- :mod:`bank.store.migrate`: the schema versions a bank moves through (``bank upgrade``);
- :mod:`bank.store.schema`: the SQLModel tables, the DDL rendered from them, the hand-written
  SQL held to them by a test, and the schema version.

Nothing outside :mod:`bank` uses this package: everything goes through :class:`bank.Bank`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tunebank.bank.store.results import AppendResult, EventFilter, PolicyFilter, Replay, StreamResult

if TYPE_CHECKING:
    from tunebank.bank.store.base import EventStore


def open_store(url: str, *, read_only: bool = False, given: str | None = None) -> EventStore:
    """The recorder for the bank at ``url``: PostgreSQL for ``postgresql...`` URLs, else SQLite
    (nothing is connected until the first transaction). Its errors name the database as
    ``given`` (the user's spelling of the URL), if given."""
    # imported here, not above, so that an SQLite bank never loads psycopg and a PostgreSQL one
    # never loads sqlite3's recorder
    if url.startswith("postgresql"):
        from tunebank.bank.store.postgres import PostgresStore

        return PostgresStore(url, read_only=read_only, given=given)
    from tunebank.bank.store.sqlite import SQLiteStore

    return SQLiteStore(url, read_only=read_only, given=given)


__all__ = ["AppendResult", "EventFilter", "PolicyFilter", "Replay", "StreamResult", "open_store"]
