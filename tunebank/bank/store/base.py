"""The recorder contract: what every database a bank can live in provides, and what it
guarantees. One module per database implements the few methods that differ
(:mod:`bank.store.sqlite`, :mod:`bank.store.postgres`); everything else is shared and runs plain
statements through the database's own driver (:mod:`bank.store.driver`).

One place opens transactions, :meth:`EventStore.transaction`. A write takes the database's
write lock first, so seq numbers are gap-free and in commit order and the hash chain never
forks; any error rolls the whole transaction back and comes out as a
:class:`~bank.errors.StoreError`. A write the database refused for a moment (another writer held
the lock past the busy timeout, a serialisation failure) is run again from the start, a bounded
number of times (:data:`RETRY_DELAYS`).

Thread safety: a recorder may be shared by threads; each thread gets its own connection.
Processes: a forked child opens its own connections, never its parent's.
"""

from __future__ import annotations

import logging
import os
import random
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any, Literal, TypeVar

from tunebank.bank.errors import READ_ONLY, StoreError
from tunebank.bank.events import Event, EventRow
from tunebank.bank.location import scrubbed
from tunebank.bank.store import replay, writes
from tunebank.bank.store.driver import Db
from tunebank.bank.store.results import AppendResult, Replay, StreamResult
from tunebank.bank.store.schema import statements as sql
from tunebank.bank.store.schema.creation import create_bank

T = TypeVar("T")
Mode = Literal["read", "write", "snapshot"]

STREAM_CHUNK = 5000
"""Events per chunk of :meth:`EventStore.append_stream`: large enough that the per-chunk
queries cost little, small enough that a chunk's rows take a few megabytes."""
RETRY_DELAYS = (0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 3.2)
"""Seconds to wait (times 1 to 2, at random) before each new attempt of a refused write; each
attempt has already waited out the database's own busy timeout."""
SLOW_LOCK_S = 0.5
"""Write-lock waits longer than this are logged."""

log = logging.getLogger("tunebank.store")


class EventStore(ABC):
    """An append-only event log with its projections, in one SQL database.

    Open one with :func:`bank.store.open_store`. Every method may raise
    :class:`~bank.errors.StoreError` when the database refuses or cannot be reached.

    Args:
        url: the bank's URL (``sqlite:///path``, ``sqlite://`` for memory,
            ``postgresql+psycopg://...``).
        read_only: open it for reading only (every write raises StoreError).
        given: the URL as the user gave it, which errors name (default: ``url``).
    """

    dialect: str = ""

    def __init__(self, url: str, *, read_only: bool = False, given: str | None = None) -> None:
        self.url = url
        self.where = self.describe(given or url)
        self.read_only = read_only
        self.read_only_reason = READ_ONLY
        """What a write is told when ``read_only`` (a store may find itself read-only later)."""
        self._local = threading.local()
        self._open: list[Any] = []  # every connection opened, to close them all
        self._guard = threading.Lock()

    # -- what each database provides ---------------------------------------------------------

    @staticmethod
    @abstractmethod
    def describe(url: str) -> str:
        """The database as error messages name it (never with a password)."""

    @abstractmethod
    def _connect(self) -> Any:
        """A new driver connection in autocommit mode, set up for the bank (PRAGMAs, timeouts);
        transactions are begun explicitly by :meth:`_begin`."""

    @abstractmethod
    def _begin(self, db: Db, mode: Mode) -> None:
        """Begin a transaction: ``write`` takes the bank's write lock before anything is read;
        ``snapshot`` sees one state for every read in it."""

    @abstractmethod
    def _is_transient(self, exc: Exception) -> bool:
        """Whether the database refused only for now (busy, locked, a serialisation failure)."""

    @abstractmethod
    def _driver_errors(self) -> tuple[type[Exception], ...]:
        """The driver's exception classes, which :meth:`transaction` turns into StoreError."""

    @abstractmethod
    def table_names(self, db: Db) -> list[str]:
        """The tables of the database (its default schema)."""

    @abstractmethod
    def install_triggers(self, db: Db) -> None:
        """Make the database itself refuse UPDATE and DELETE (and TRUNCATE) on the events
        table, and install what its structure check needs where this role may."""

    @abstractmethod
    def structure_problems(self) -> tuple[list[str], str | None]:
        """The database's own check of the bank's pages and indexes: the problems it found (an
        empty list when sound), and why it could not run where it could not."""

    @abstractmethod
    def reindex(self) -> None:
        """Rebuild every index of the bank's tables from the tables, in one write transaction:
        the repair for an index the structure check finds damaged."""

    def _db(self, raw: Any) -> Db:
        """The statement runner for one of this database's connections."""
        return Db(raw)

    def _prepare_file(self) -> None:  # noqa: B027 - a hook most databases do not need
        """Before a bank is created: set what only an empty database can take (SQLite's WAL)."""

    # -- transactions ------------------------------------------------------------------------

    def close(self) -> None:
        """Release every connection this recorder opened."""
        with self._guard:
            opened, self._open = self._open, []
        for raw in opened:
            with suppress(Exception):  # a connection the server already dropped
                raw.close()
        self._local = threading.local()

    def _idle(self) -> list[Any]:
        """This thread's connections not in a transaction (none after a fork: a child never
        uses its parent's)."""
        if getattr(self._local, "pid", None) != os.getpid():
            self._local.idle, self._local.pid = [], os.getpid()
        idle: list[Any] = self._local.idle
        return idle

    def _checkout(self) -> Any:
        """A connection for one transaction: an idle one of this thread, else a new one (a
        transaction opened inside another gets its own, as a pool would give it)."""
        idle = self._idle()
        while idle:
            raw = idle.pop()
            if not self._is_closed(raw):
                return raw
            self._drop(raw)
        raw = self._connect()
        with self._guard:
            self._open.append(raw)
        return raw

    def _checkin(self, raw: Any) -> None:
        self._idle().append(raw)

    def _is_closed(self, raw: Any) -> bool:
        """Whether a kept connection can no longer be used (the server dropped it)."""
        return False

    def _drop(self, raw: Any) -> None:
        with self._guard:
            if raw in self._open:
                self._open.remove(raw)
        with suppress(Exception):  # already broken
            raw.close()

    @contextmanager
    def transaction(self, mode: Mode = "read") -> Iterator[Db]:
        """One transaction: committed when the block ends, rolled back on any error; the
        driver's errors come out as StoreError. Inside :meth:`snapshot`, reads join the
        snapshot's transaction."""
        pinned: Db | None = getattr(self._local, "pinned", None)
        if pinned is not None and mode == "read":
            yield pinned
            return
        errors = self._driver_errors()
        try:
            raw = self._checkout()
        except errors as exc:
            raise self._store_error(exc) from exc
        db = self._db(raw)
        try:
            self._begin(db, mode)
        except errors as exc:
            self._settle(raw, "ROLLBACK")
            raise self._store_error(exc) from exc
        try:
            yield db
        except BaseException as exc:
            self._settle(raw, "ROLLBACK")
            if isinstance(exc, errors):
                raise self._store_error(exc) from exc
            raise
        try:
            raw.execute("COMMIT")
        except errors as exc:
            self._settle(raw, "ROLLBACK")
            raise self._store_error(exc) from exc
        self._checkin(raw)

    def _settle(self, raw: Any, statement: str) -> None:
        """End a failed transaction; a connection the server dropped is closed, not kept."""
        with suppress(Exception):  # no transaction was open, or the connection is gone
            raw.execute(statement)
        if self._is_closed(raw):
            self._drop(raw)
        else:
            self._checkin(raw)

    def _store_error(self, exc: Exception) -> StoreError:
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return StoreError(f"database {self.where}: {scrubbed(reason, self.url)}",
                          transient=self._is_transient(exc))

    def _write(self, work: Callable[[Db], T]) -> T:
        """Run ``work`` in one write transaction, again from the start if the database refused it
        for a moment (see :data:`RETRY_DELAYS`); any other error, or the last refusal, is raised."""
        if self.read_only:
            raise StoreError(f"bank {self.where}: {self.read_only_reason}")
        for attempt, delay in enumerate((*RETRY_DELAYS, None), 1):
            try:
                with self.transaction("write") as db:
                    return work(db)
            except StoreError as exc:
                if not exc.transient:
                    raise
                if delay is None:
                    raise StoreError(f"{exc} (gave up after {attempt} attempts; another writer "
                                     "holds the bank)") from exc
                log.info("write refused (%s); attempt %d again", exc, attempt + 1)
                time.sleep(delay * (1 + random.random()))
        raise AssertionError("unreachable")

    @staticmethod
    def _timed_lock(db: Db, statement: str) -> None:
        """Take the write lock, logging a long wait (how contended a shared bank is)."""
        started = time.monotonic()
        db.run(statement)
        waited = time.monotonic() - started
        log.debug("write lock after %.3f s", waited)
        if waited > SLOW_LOCK_S:
            log.info("waited %.1f s for the write lock", waited)

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """Every read in the block (in this thread) sees the bank as one state, whatever writers
        commit meanwhile."""
        if getattr(self._local, "pinned", None) is not None:
            yield
            return
        with self.transaction("snapshot") as db:
            self._local.pinned = db
            try:
                yield
            finally:
                self._local.pinned = None

    def write_transaction(self, work: Callable[[Db], T]) -> T:
        """Run ``work(db)`` in one write transaction, the write lock held, retried like every
        write (for schema upgrades)."""
        return self._write(work)

    # -- the bank itself ---------------------------------------------------------------------

    def initialise(self, bank_id: str) -> bool:
        """Create the tables, the append-only triggers, the checkpoint and the bank's id, unless
        the database already holds a bank; return whether it was created.

        Raises:
            BankLocationError: the database holds tables of something else.
        """
        if not self.read_only:
            self._prepare_file()
        if self.is_initialised():  # an existing bank: no write lock
            return False
        return self._write(lambda db: create_bank(self, db, bank_id))  # checks again, locked

    def is_initialised(self) -> bool:
        """Whether the database already holds a bank's tables."""
        with self.transaction() as db:
            return "events" in self.table_names(db)

    def schema_version(self) -> int:
        """The schema version the bank was written with (see
        :data:`bank.store.schema.version.SCHEMA_VERSION`)."""
        with self.transaction() as db:
            return schema_version_in(db)

    # -- the log -----------------------------------------------------------------------------

    def append(self, events: Sequence[Event]) -> AppendResult:
        """Append a batch in one transaction; events already in the log are skipped.

        Every new event is checked against the outcome rules with the bank's current state, then
        inserted with one bulk statement, and the projections move forward in the same
        transaction.

        Raises:
            OutcomeRuleError: an event breaks the outcome rules; nothing of the batch is written.
            StoreError: the database refused the write.
        """
        return self._write(lambda db: writes.append(db, events))

    def append_stream(self, make_rows: Callable[[], Iterable[EventRow]], chunk: int = STREAM_CHUNK,
                      *, checked: bool = False) -> StreamResult:
        """Append every event ``make_rows()`` yields, each as the log's row
        (:data:`~bank.events.EventRow`), in one transaction, ``chunk`` at a time, so memory
        stays flat however long the stream. Any error rolls the whole stream back.
        ``make_rows`` is called again from the start if the database refused the write for a
        moment, so it must give the same rows each time.

        ``checked``: the rows were checked as they were read and their ids and links made from
        their content (an events file's); otherwise each is checked as an Event is and given
        the id its content makes, and every link is computed here.

        Raises:
            OutcomeRuleError: an event breaks the outcome rules; nothing is written.
            EventValidationError: a row that is not ``checked`` is not a valid event.
            BankError: the source raised it (a bad line of a file); nothing is written.
            StoreError: the database refused the write.
        """
        return self._write(lambda db: writes.append_stream(db, make_rows, chunk, checked=checked))

    def rebuild_projection(self, replayed: Callable[[], Replay | None] | None = None) -> int:
        """Make the projection tables what the log makes, in one write transaction (writers
        wait meanwhile); return the seq they reflect. ``replayed`` runs first with the write
        lock held, so the log cannot move under it: the :class:`Replay` it returns is written
        (only what differs); without one, every projection is derived again from the log.

        Raises:
            OutcomeRuleError: the log breaks the outcome rules (nothing is changed).
            EventValidationError, ValueError: a stored row is not a valid event.
            Whatever ``replayed`` raises (nothing is changed).
        """
        def work(db: Db) -> int:
            found = None if replayed is None else replayed()
            if found is None:
                return replay.derive_projection(db)
            return replay.replace_projection(db, found.tasks, found.unmade, found.unstored,
                                             found.head)

        return self._write(work)


def schema_version_in(db: Db) -> int:
    """The bank's schema version, read in an open transaction. Versions 1 and 2 kept it in the
    checkpoint; from 3 it is in bank_meta."""
    value = db.scalar(sql.READ_META, ("schema_version",))
    if value is not None:
        try:
            return int(value)
        except ValueError:
            raise StoreError(f"bank_meta.schema_version is {value!r}, not a number") from None
    row = db.one("SELECT schema_version FROM checkpoint WHERE name = ?", (sql.CHECKPOINT,))
    return int(row[0]) if row else 1
