"""The recorder for an SQLite bank file (or an in-memory bank), on Python's own sqlite3.

A write transaction starts with ``BEGIN IMMEDIATE``: it takes the write lock before reading
the head of the log, so seq numbers and the hash chain never fork, waiting up to
:data:`BUSY_TIMEOUT_S` for another writer. Commits are ``synchronous=FULL``, so a committed
outcome survives a machine that loses power. Bank files are in WAL mode (set once, when the
bank is created) so readers do not wait for writers; opening a file changes nothing in it.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tunebank.bank.errors import StoreError
from tunebank.bank.store.base import EventStore, Mode
from tunebank.bank.store.driver import Db
from tunebank.bank.store.readonly import read_only_connection

BUSY_TIMEOUT_S = 30
"""How long SQLite waits for another writer's lock before refusing."""
CACHE_KIB = 65536
"""SQLite's page cache per connection (its default is 2 MiB): a bank's indexes are hot, and
with 64 MiB a million-event import inserts about a quarter faster (bench/run.py)."""
STRUCTURE_LINES = 50
"""The most lines of SQLite's integrity report that verify lists."""

_TRIGGERS = (
    "CREATE TRIGGER IF NOT EXISTS events_refuse_update BEFORE UPDATE ON events "
    "BEGIN SELECT RAISE(ABORT, 'the events table is append-only: UPDATE refused'); END",
    "CREATE TRIGGER IF NOT EXISTS events_refuse_delete BEFORE DELETE ON events "
    "BEGIN SELECT RAISE(ABORT, 'the events table is append-only: DELETE refused'); END",
)
_TRANSIENT = ("database is locked", "database is busy", "database table is locked")
_BEGIN = {"read": "BEGIN", "snapshot": "BEGIN", "write": "BEGIN IMMEDIATE"}


def is_memory(url: str) -> bool:
    """Whether ``url`` names an in-memory SQLite bank."""
    return url in ("sqlite://", "sqlite:///:memory:")


class SQLiteStore(EventStore):
    """A bank in one SQLite file (``sqlite:///path``), or in memory (``sqlite://``): one
    connection then, shared by every transaction."""

    dialect = "sqlite"

    def __init__(self, url: str, *, read_only: bool = False, given: str | None = None) -> None:
        super().__init__(url, read_only=read_only, given=given)
        self.path = None if is_memory(url) else url.removeprefix("sqlite:///")
        self._shared: sqlite3.Connection | None = None

    @staticmethod
    def describe(url: str) -> str:
        return "in-memory bank" if is_memory(url) else url.removeprefix("sqlite:///")

    def _connect(self) -> sqlite3.Connection:
        if self.path is None:
            conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        elif self.read_only:
            conn = read_only_connection(self.path, BUSY_TIMEOUT_S)
        else:
            conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None,
                                   check_same_thread=False)
            if _no_room_for_wal_index(conn):  # a full disk: it can still be read
                conn.close()
                conn = read_only_connection(self.path, BUSY_TIMEOUT_S)
                self.read_only = True
                self.read_only_reason = ("no room on its disk for SQLite's -shm file (a full "
                                         "disk?): it can be read, not changed")
        conn.isolation_level = None  # transactions are begun by _begin, not by the driver
        conn.execute(f"PRAGMA cache_size=-{CACHE_KIB}")
        if self.path is not None and not self.read_only:
            conn.execute("PRAGMA synchronous=FULL")
        return conn

    def _checkout(self) -> Any:
        if self.path is not None:
            return super()._checkout()
        if self._shared is None:
            self._shared = self._connect()
            self._open.append(self._shared)
        return self._shared

    def _checkin(self, raw: Any) -> None:
        if self.path is not None:
            super()._checkin(raw)

    @contextmanager
    def transaction(self, mode: Mode = "read") -> Iterator[Db]:
        """In memory, where every transaction shares one connection, a read opened inside a
        write joins it (it sees the write's state, as a read elsewhere would while the write
        lock is held)."""
        shared = self._shared
        if mode != "write" and shared is not None and shared.in_transaction:
            yield self._db(shared)
            return
        with super().transaction(mode) as db:
            yield db

    def close(self) -> None:
        super().close()
        self._shared = None

    def _begin(self, db: Db, mode: Mode) -> None:
        if mode == "write":
            self._timed_lock(db, _BEGIN[mode])
        else:
            db.run(_BEGIN[mode])

    def _is_transient(self, exc: Exception) -> bool:
        text = str(exc).lower()
        return isinstance(exc, sqlite3.OperationalError) and any(t in text for t in _TRANSIENT)

    def _driver_errors(self) -> tuple[type[Exception], ...]:
        return (sqlite3.Error,)

    def _store_error(self, exc: Exception) -> StoreError:
        """SQLite's words for a full disk are "database or disk is full" (SQLITE_FULL) or, when
        a write of the -wal or -shm file fails, "disk I/O error": either is said as the other
        full-disk paths say it, naming the bank (issue 41)."""
        if self.path is not None and _disk_full(exc, os.path.dirname(os.path.abspath(self.path))):
            reason = (str(exc).strip().splitlines() or ["full"])[0]
            return StoreError(f"bank {self.where}: its disk is full (No space left on device; "
                              f"SQLite: {reason})")
        return super()._store_error(exc)

    def _prepare_file(self) -> None:
        """Put a file that holds no tables yet in WAL mode (kept in the file from then on)."""
        if self.path is None:
            return
        try:
            raw = self._checkout()
        except sqlite3.Error as exc:  # a file that is not a database
            raise self._store_error(exc) from exc
        try:
            if raw.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0:
                raw.execute("PRAGMA journal_mode=WAL")
        except sqlite3.Error as exc:
            raise self._store_error(exc) from exc
        finally:
            self._checkin(raw)

    def table_names(self, db: Db) -> list[str]:
        return [str(row[0]) for row in db.rows(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")]

    def install_triggers(self, db: Db) -> None:
        for statement in _TRIGGERS:
            db.run(statement)

    def structure_problems(self) -> tuple[list[str], str | None]:
        """SQLite's ``PRAGMA integrity_check``: every page, and every index against its table."""
        with self.transaction() as db:
            rows = db.rows(f"PRAGMA integrity_check({STRUCTURE_LINES})")
        found = [line for row in rows for line in str(row[0]).splitlines()
                 if not line.startswith("*** in database")]  # a header, not a problem
        return ([] if found == ["ok"] else found), None

    def reindex(self) -> None:
        self._write(lambda db: db.run("REINDEX"))


FULL_DISK_FREE = 1 << 20
"""A disk with less free than this (1 MiB) whose write failed with SQLite's "disk I/O error" is
taken for full: SQLite does not pass on the errno it met, and every page it writes is 4 KiB."""


def _disk_full(exc: Exception, folder: str) -> bool:
    """Whether ``exc`` is SQLite meeting a full disk under ``folder``."""
    name = getattr(exc, "sqlite_errorname", "")
    if name == "SQLITE_FULL":
        return True
    if not name.startswith("SQLITE_IOERR"):
        return False
    try:
        found = os.statvfs(folder)
    except OSError:
        return False
    return found.f_bavail * found.f_frsize < FULL_DISK_FREE


def _no_room_for_wal_index(conn: sqlite3.Connection) -> bool:
    """Whether the first read of a WAL bank fails because its -shm cannot be made or grown (a
    full disk): then it is opened read-only, which needs no -shm where none is pending, so the
    reading commands still work and every write says why it cannot be made."""
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.OperationalError as exc:
        return "disk i/o error" in str(exc).lower()
    except sqlite3.Error:  # not a database, and the like: the caller's own reads say so
        return False
    return False

