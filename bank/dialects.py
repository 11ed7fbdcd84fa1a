"""What differs between the databases a bank can live in: engine set-up, write locks, triggers."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from sqlalchemy import create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError
from sqlalchemy.pool import StaticPool

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection, Engine

WRITE_OPTION = "tunebank_write"
WRITER_LOCK = 727_217_001  # the PostgreSQL advisory lock every tunebank writer takes
BUSY_TIMEOUT_S = 30  # how long SQLite waits for another writer's lock before refusing
CONNECT_TIMEOUT_S = 10  # how long a PostgreSQL connection may take before it is an error
SLOW_LOCK_S = 0.5  # write-lock waits longer than this are logged
CACHE_KIB = 65536
"""SQLite's page cache per connection (its default is 2 MiB): a bank's indexes are hot, and
with 64 MiB a million-event import inserts about a quarter faster (bench/run.py)."""
# PostgreSQL's codes for a refusal the same transaction may not meet again: serialisation
# failure, deadlock, lock not available.
_TRANSIENT_SQLSTATES = frozenset({"40001", "40P01", "55P03"})

log = logging.getLogger("tunebank.store")


def describe_url(url: str) -> str:
    """The database as error messages name it: the file of an SQLite bank, else the URL with any
    password hidden."""
    if url.startswith("sqlite:///"):
        return url.removeprefix("sqlite:///")
    if url.startswith("sqlite:"):
        return "in-memory bank"
    return make_url(url).render_as_string(hide_password=True)


def is_transient(exc: DBAPIError) -> bool:
    """Whether the database refused only for now: SQLite busy or locked, or one of PostgreSQL's
    serialisation codes. A missing file, a corrupt one or a dead server is not transient."""
    orig = exc.orig
    if getattr(orig, "sqlstate", None) in _TRANSIENT_SQLSTATES:
        return True
    text = str(orig).lower()
    return type(orig).__name__ == "OperationalError" and (
        "database is locked" in text or "database is busy" in text or "database table is locked" in text)

_SQLITE_TRIGGERS = (
    "CREATE TRIGGER IF NOT EXISTS events_refuse_update BEFORE UPDATE ON events "
    "BEGIN SELECT RAISE(ABORT, 'the events table is append-only: UPDATE refused'); END",
    "CREATE TRIGGER IF NOT EXISTS events_refuse_delete BEFORE DELETE ON events "
    "BEGIN SELECT RAISE(ABORT, 'the events table is append-only: DELETE refused'); END",
)


def make_engine(url: str, *, read_only: bool = False) -> Engine:
    """An engine for ``url`` set up so that one writer at a time appends, in commit order.

    SQLite: a write transaction starts with ``BEGIN IMMEDIATE`` (it takes the write lock before
    reading the head of the log, so seq numbers and the hash chain never fork), waiting up to
    :data:`BUSY_TIMEOUT_S` for another writer, with ``synchronous=FULL`` so a committed outcome
    survives a machine that loses power. Bank files are in WAL mode (set once, when the bank is
    created: :func:`use_wal`) so readers do not wait for writers; opening a file changes nothing
    in it.
    ``read_only`` opens the file read-only (for a bank file this user cannot write). In-memory
    banks share one connection. PostgreSQL: see :func:`_postgres_engine`.
    """
    if url.startswith("postgresql"):
        return _postgres_engine(url)
    in_memory = url in ("sqlite://", "sqlite:///:memory:")
    kwargs: dict[str, Any] = {"connect_args": {"timeout": BUSY_TIMEOUT_S, "check_same_thread": False}}
    if in_memory:
        kwargs["poolclass"] = StaticPool
    elif read_only:
        path = url.removeprefix("sqlite:///")
        url = "sqlite://"
        kwargs["creator"] = lambda: _sqlite_read_only(path)
    engine = create_engine(url, **kwargs)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None  # transactions are begun below, not by the driver
        cursor = dbapi_conn.cursor()
        try:
            cursor.execute(f"PRAGMA cache_size=-{CACHE_KIB}")
            if not (in_memory or read_only):
                cursor.execute("PRAGMA synchronous=FULL")
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        if conn.get_execution_options().get(WRITE_OPTION, False):
            _timed_lock(conn, "BEGIN IMMEDIATE")
        else:
            conn.exec_driver_sql("BEGIN")

    return engine


def use_wal(engine: Engine) -> None:
    """Put an SQLite file that holds no tables yet in WAL mode (it stays so: the mode is kept in
    the file). A file that already holds tables, or a server database, is left as it is."""
    if engine.dialect.name != "sqlite" or engine.url.database in (None, "", ":memory:"):
        return
    raw = engine.raw_connection()
    try:
        cursor = raw.cursor()
        if cursor.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0:
            cursor.execute("PRAGMA journal_mode=WAL")
        cursor.close()
    finally:
        raw.close()


def _sqlite_read_only(path: str) -> Any:
    """A read-only connection to an SQLite file: ``mode=ro``, or, where this user cannot create
    the WAL's shared-memory file beside it, ``immutable=1``, which reads the file as it was
    last checkpointed (all of it, for a bank tunebank closed)."""
    import sqlite3
    from urllib.parse import quote

    base = f"file:{quote(path)}?mode=ro"
    try:
        conn = sqlite3.connect(base, uri=True, timeout=BUSY_TIMEOUT_S, check_same_thread=False)
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return conn
    except sqlite3.OperationalError:
        return sqlite3.connect(base + "&immutable=1", uri=True, timeout=BUSY_TIMEOUT_S,
                               check_same_thread=False)


def _timed_lock(conn: Connection, statement: str) -> None:
    """Take the write lock, logging a long wait (how contended a shared bank is)."""
    started = time.monotonic()
    conn.exec_driver_sql(statement)
    waited = time.monotonic() - started
    log.debug("write lock after %.3f s", waited)
    if waited > SLOW_LOCK_S:
        log.info("waited %.1f s for the write lock", waited)


def _postgres_engine(url: str) -> Engine:
    """PostgreSQL: a write transaction first takes one advisory lock, so writers append one at a
    time and a reader never sees a later seq commit before an earlier one (no gaps to skip)."""
    engine = create_engine(url, pool_pre_ping=True,
                           connect_args={"connect_timeout": CONNECT_TIMEOUT_S})

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        if conn.get_execution_options().get(WRITE_OPTION, False):
            _timed_lock(conn, f"SELECT pg_advisory_xact_lock({WRITER_LOCK})")

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


STRUCTURE_LINES = 50
"""The most lines of a database's own integrity report that verify lists."""
_TABLES = ("events", "policy", "task", "checkpoint", "bank_meta")


def structure_problems(conn: Connection) -> tuple[list[str], str | None]:
    """The database's own check of its files and indexes: SQLite's ``PRAGMA integrity_check``
    (every page, and every index against its table), or on PostgreSQL amcheck's
    ``bt_index_check`` with ``heapallindexed`` on the bank's B-tree indexes. Returns the
    problems found and, where the check could not run, why not."""
    if conn.dialect.name == "sqlite":
        rows = conn.exec_driver_sql(f"PRAGMA integrity_check({STRUCTURE_LINES})").fetchall()
        found = [line for row in rows for line in str(row[0]).splitlines()
                 if not line.startswith("*** in database")]  # a header, not a problem
        return ([] if found == ["ok"] else found), None
    return _postgres_index_problems(conn)


def _postgres_index_problems(conn: Connection) -> tuple[list[str], str | None]:
    schema = conn.exec_driver_sql(
        "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace "
        "WHERE e.extname = 'amcheck'").scalar()
    if schema is None:
        return [], ("the amcheck extension is not installed in this database (a superuser's "
                    "CREATE EXTENSION amcheck enables the check)")
    indexes = conn.exec_driver_sql(
        "SELECT c.relname, c.oid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
        "JOIN pg_class t ON t.oid = i.indrelid JOIN pg_am a ON a.oid = c.relam "
        "WHERE a.amname = 'btree' AND t.oid = ANY (CAST(%(tables)s AS regclass[]))",
        {"tables": list(_TABLES)}).fetchall()
    problems = []
    for name, oid in indexes:
        savepoint = conn.begin_nested()
        try:
            conn.exec_driver_sql(f'SELECT "{schema}".bt_index_check(%(oid)s, true)', {"oid": oid})
            savepoint.commit()
        except DBAPIError as exc:
            savepoint.rollback()
            problems.append(f"index {name}: {str(exc.orig or exc).splitlines()[0]}")
    return problems, None


def enable_structure_check(conn: Connection) -> None:
    """On PostgreSQL, install amcheck where this role may (a superuser's bank); elsewhere, and
    where it may not, nothing happens and verify says the check did not run."""
    if conn.dialect.name != "postgresql":
        return
    savepoint = conn.begin_nested()
    try:
        conn.exec_driver_sql("CREATE EXTENSION IF NOT EXISTS amcheck")
        savepoint.commit()
    except DBAPIError:
        savepoint.rollback()
