"""What differs between the databases a bank can live in: engine set-up, write locks, triggers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlalchemy import create_engine, event
from sqlalchemy.pool import StaticPool

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection, Engine

WRITE_OPTION = "tunebank_write"

_SQLITE_TRIGGERS = (
    "CREATE TRIGGER IF NOT EXISTS events_refuse_update BEFORE UPDATE ON events "
    "BEGIN SELECT RAISE(ABORT, 'the events table is append-only: UPDATE refused'); END",
    "CREATE TRIGGER IF NOT EXISTS events_refuse_delete BEFORE DELETE ON events "
    "BEGIN SELECT RAISE(ABORT, 'the events table is append-only: DELETE refused'); END",
)


def make_engine(url: str) -> Engine:
    """An engine for ``url`` set up so that one writer at a time appends, in commit order.

    SQLite: a write transaction starts with ``BEGIN IMMEDIATE`` (it takes the write lock before
    reading the head of the log, so seq numbers and the hash chain never fork); files use WAL so
    readers do not wait for writers. In-memory banks share one connection.
    """
    if not url.startswith("sqlite"):
        return create_engine(url)
    in_memory = url in ("sqlite://", "sqlite:///:memory:")
    kwargs: dict[str, Any] = {"connect_args": {"timeout": 30, "check_same_thread": False}}
    if in_memory:
        kwargs["poolclass"] = StaticPool
    engine = create_engine(url, **kwargs)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None  # transactions are begun below, not by the driver
        cursor = dbapi_conn.cursor()
        if not in_memory:
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        write = conn.get_execution_options().get(WRITE_OPTION, False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")

    return engine


def install_triggers(conn: Connection) -> None:
    """Make the database itself refuse UPDATE and DELETE on the events table."""
    if conn.dialect.name == "sqlite":
        for statement in _SQLITE_TRIGGERS:
            conn.exec_driver_sql(statement)
        return
    raise NotImplementedError(f"append-only triggers for {conn.dialect.name} are not written yet")


def drop_triggers(conn: Connection) -> None:
    """Remove the append-only triggers (only tests that simulate tampering do this)."""
    if conn.dialect.name == "sqlite":
        conn.exec_driver_sql("DROP TRIGGER IF EXISTS events_refuse_update")
        conn.exec_driver_sql("DROP TRIGGER IF EXISTS events_refuse_delete")
