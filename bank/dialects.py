"""What differs between the databases a bank can live in: engine set-up, write locks, triggers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlalchemy import create_engine, event
from sqlalchemy.pool import StaticPool

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection, Engine

WRITE_OPTION = "tunebank_write"
WRITER_LOCK = 727_217_001  # the PostgreSQL advisory lock every tunebank writer takes

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
    readers do not wait for writers. In-memory banks share one connection. PostgreSQL: see
    :func:`_postgres_engine`.
    """
    if url.startswith("postgresql"):
        return _postgres_engine(url)
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


def _postgres_engine(url: str) -> Engine:
    """PostgreSQL: a write transaction first takes one advisory lock, so writers append one at a
    time and a reader never sees a later seq commit before an earlier one (no gaps to skip)."""
    engine = create_engine(url, pool_pre_ping=True)

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        if conn.get_execution_options().get(WRITE_OPTION, False):
            conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({WRITER_LOCK})")

    return engine


_POSTGRES_TRIGGERS = (
    "CREATE OR REPLACE FUNCTION tunebank_refuse_change() RETURNS trigger AS $$ BEGIN "
    "RAISE EXCEPTION USING MESSAGE = 'the events table is append-only: ' || TG_OP || ' refused'; "
    "END; $$ LANGUAGE plpgsql",
    "CREATE OR REPLACE TRIGGER events_refuse_change BEFORE UPDATE OR DELETE ON events "
    "FOR EACH ROW EXECUTE FUNCTION tunebank_refuse_change()",
    "CREATE OR REPLACE TRIGGER events_refuse_truncate BEFORE TRUNCATE ON events "
    "FOR EACH STATEMENT EXECUTE FUNCTION tunebank_refuse_change()",
)


def install_triggers(conn: Connection) -> None:
    """Make the database itself refuse UPDATE and DELETE (and TRUNCATE) on the events table."""
    statements = _SQLITE_TRIGGERS if conn.dialect.name == "sqlite" else _POSTGRES_TRIGGERS
    for statement in statements:
        conn.exec_driver_sql(statement)


def drop_triggers(conn: Connection) -> None:
    """Remove the append-only triggers (only tests that simulate tampering do this)."""
    if conn.dialect.name == "sqlite":
        conn.exec_driver_sql("DROP TRIGGER IF EXISTS events_refuse_update")
        conn.exec_driver_sql("DROP TRIGGER IF EXISTS events_refuse_delete")
    else:
        conn.exec_driver_sql("DROP TRIGGER IF EXISTS events_refuse_change ON events")
        conn.exec_driver_sql("DROP TRIGGER IF EXISTS events_refuse_truncate ON events")
