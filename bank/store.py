"""The event store: the log and its inline projections in one SQL database.

One place opens transactions: :meth:`EventStore._session`. A write takes the database's write lock
first, so seq numbers are gap-free and in commit order and the hash chain never forks; any error
rolls the whole batch back and comes out as a :class:`~bank.errors.BankError`. A write the
database refused for a moment (another writer held the lock past the busy timeout, a
serialisation failure) is run again from the start, a bounded number of times.
"""

from __future__ import annotations

import gc
import logging
import random
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

from sqlalchemy import delete, insert, inspect, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError, SQLAlchemyError
from sqlmodel import Session, SQLModel, col, select

from bank import sql
from bank.dialects import (
    WRITE_OPTION,
    describe_url,
    enable_structure_check,
    install_triggers,
    is_transient,
    make_engine,
    structure_problems,
    use_wal,
)
from bank.errors import BankError, BankLocationError, StoreError
from bank.events import GENESIS_HASH, OUTCOME_KINDS, POLICY_KINDS, Event, StoredEvent
from bank.projection import Policy, PolicyKey, PolicyRef, Projection, policy_of
from bank.rows import (
    event_values,
    policy_values,
    row_to_task,
    task_values,
    values_to_event,
    values_to_logged,
    values_to_policy,
    values_to_task,
)
from bank.schema import (
    SCHEMA_VERSION,
    CheckpointRow,
    EventRow,
    MetaRow,
    PolicyRow,
    TaskRow,
)
from bank.tasks import TaskView

CHECKPOINT = "projections"
_CHUNK = 500  # values per IN (...) list, well under every database's parameter limit
_PAGE = 2000  # events per page when the log is streamed
STREAM_CHUNK = 5000
"""Events per chunk of :meth:`EventStore.append_stream`: large enough that the per-chunk
queries cost little, small enough that a chunk's rows take a few megabytes."""
_OUTCOMES = tuple(sorted(str(kind) for kind in OUTCOME_KINDS))
RETRY_DELAYS = (0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 3.2)
"""Seconds to wait (times 1 to 2, at random) before each new attempt of a refused write; each
attempt has already waited out the database's own busy timeout."""

log = logging.getLogger("tunebank.store")

T = TypeVar("T")


@dataclass(frozen=True)
class AppendResult:
    """What one append did: the events it wrote and the ids it skipped as already present."""

    appended: tuple[StoredEvent, ...] = ()
    skipped: tuple[str, ...] = ()


@dataclass(frozen=True)
class StreamResult:
    """What one streamed append did: how many events it wrote and skipped, and the head after."""

    appended: int
    skipped: int
    head_seq: int
    head_hash: str


@dataclass(frozen=True)
class EventFilter:
    """Which events to read; every field left ``None`` matches everything."""

    since_seq: int = 0
    until_seq: int | None = None
    until_time: str | None = None
    kinds: tuple[str, ...] | None = None
    repo_key: str | None = None
    op_name: str | None = None
    op_type: str | None = None
    task_id: str | None = None
    soc_version: str | None = None


@dataclass(frozen=True)
class PolicyFilter:
    """Which policies to list."""

    soc_version: str | None = None
    op_type: str | None = None
    repo_key: str | None = None
    backend: str | None = None
    cost_model_version: str | None = None


@dataclass
class _Loaded:
    """The projection rows an append read, so it can tell inserts from updates: tasks whole,
    policies as the (best_us, event_id, seq) they compete with."""

    tasks: dict[str, TaskView] = field(default_factory=dict)
    key_states: dict[str, dict[str, str]] = field(default_factory=dict)
    winners: dict[PolicyKey, PolicyRef] = field(default_factory=dict)


def _batches(items: Iterable[T], size: int) -> Iterator[list[T]]:
    batch: list[T] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def _chunks(values: Sequence[T]) -> Iterator[Sequence[T]]:
    for start in range(0, len(values), _CHUNK):
        yield values[start : start + _CHUNK]


class EventStore:
    """An append-only event log with its projections, in one SQL database.

    Args:
        url: an SQLAlchemy URL (``sqlite:///path/bank.db``, ``sqlite://`` for memory).
    """

    def __init__(self, url: str, *, read_only: bool = False) -> None:
        self.url = url
        self.where = describe_url(url)
        self.read_only = read_only
        self.engine = make_engine(url, read_only=read_only)
        self._pinned = threading.local()

    def close(self) -> None:
        """Release the database connections."""
        self.engine.dispose()

    # -- transactions -------------------------------------------------------------------------

    @contextmanager
    def _session(self, write: bool = False) -> Iterator[Session]:
        pinned: Session | None = getattr(self._pinned, "session", None)
        if pinned is not None and not write:  # inside snapshot(): every read sees one state
            yield pinned
            return
        try:
            with self.engine.connect() as conn:
                if write:
                    conn.execution_options(**{WRITE_OPTION: True})
                with conn.begin(), Session(bind=conn) as session:
                    yield session
        except DBAPIError as exc:
            reason = str(exc.orig).splitlines()[0] if exc.orig else str(exc).splitlines()[0]
            raise StoreError(f"database {self.where}: {reason}", transient=is_transient(exc)) from exc
        except SQLAlchemyError as exc:
            raise StoreError(f"database {self.where}: {str(exc).splitlines()[0]}") from exc

    def _write(self, work: Callable[[Session], T]) -> T:
        """Run ``work`` in one write transaction, again from the start if the database refused it
        for a moment (see :data:`RETRY_DELAYS`); any other error, or the last refusal, is raised."""
        if self.read_only:
            raise StoreError(f"{self.where}: read-only for this user (it can be read, not changed)")
        for attempt, delay in enumerate((*RETRY_DELAYS, None), 1):
            try:
                with self._session(write=True) as session:
                    return work(session)
            except StoreError as exc:
                if not exc.transient:
                    raise
                if delay is None:
                    raise StoreError(f"{exc} (gave up after {attempt} attempts; another writer "
                                     "holds the bank)") from exc
                log.info("write refused (%s); attempt %d again", exc, attempt + 1)
                time.sleep(delay * (1 + random.random()))
        raise AssertionError("unreachable")

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """Every read in the block (in this thread) sees the bank as one state, whatever writers
        commit meanwhile: one read transaction (REPEATABLE READ on PostgreSQL, a WAL read
        transaction on SQLite)."""
        if getattr(self._pinned, "session", None) is not None:
            yield
            return
        with self._session(write=False) as session:
            if session.connection().dialect.name == "postgresql":
                session.connection().exec_driver_sql(
                    "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            self._pinned.session = session
            try:
                yield
            finally:
                self._pinned.session = None

    def initialise(self, bank_id: str) -> bool:
        """Create the tables, the append-only triggers, the checkpoint and the bank's id, unless
        the database already holds a bank; return whether it was created."""
        if not self.read_only:
            try:
                use_wal(self.engine)
            except (DBAPIError, sqlite3.Error) as exc:  # a file that is not a database
                reason = str(getattr(exc, "orig", None) or exc).splitlines()[0]
                raise StoreError(f"database {self.where}: {reason}") from exc

        def work(session: Session) -> bool:
            conn = session.connection()
            tables = inspect(conn).get_table_names()
            if EventRow.__tablename__ in tables:
                return False
            if tables and conn.dialect.name == "sqlite":
                raise BankLocationError(f"{self.where}: an SQLite database of something else "
                                        f"(tables: {', '.join(sorted(tables)[:5])}); no bank is "
                                        "made in it")
            SQLModel.metadata.create_all(conn)
            install_triggers(conn)
            enable_structure_check(conn)
            session.execute(insert(CheckpointRow).values(name=CHECKPOINT, last_seq=0,
                                                         schema_version=SCHEMA_VERSION))
            session.execute(insert(MetaRow), [{"name": "bank_id", "value": bank_id},
                                              {"name": "schema_version", "value": str(SCHEMA_VERSION)}])
            return True

        return self._write(work)

    def write_transaction(self, work: Callable[[Session], T]) -> T:
        """Run ``work(session)`` in one write transaction, the write lock held, retried like
        every write (for schema upgrades)."""
        return self._write(work)

    def schema_version(self) -> int:
        """The schema version the bank was written with (see :data:`bank.schema.SCHEMA_VERSION`)."""
        with self._session() as session:
            return self.schema_version_in(session)

    @staticmethod
    def schema_version_in(session: Session) -> int:
        """:meth:`schema_version`, read in an open transaction. Versions 1 and 2 kept it in the
        checkpoint; from 3 it is in bank_meta."""
        row = session.get(MetaRow, "schema_version")
        if row is not None:
            try:
                return int(row.value)
            except ValueError:
                raise StoreError(f"bank_meta.schema_version is {row.value!r}, not a number") from None
        checkpoint = session.get(CheckpointRow, CHECKPOINT)
        return checkpoint.schema_version if checkpoint else 1

    def structure_problems(self) -> tuple[list[str], str | None]:
        """The database's own integrity check of the bank's pages and indexes (see
        :func:`bank.dialects.structure_problems`): the problems it found, and why it could not
        run where it could not."""
        with self._session() as session:
            return structure_problems(session.connection())

    def reindex(self) -> None:
        """Rebuild every index of the bank's tables from the tables (REINDEX), in one write
        transaction: the repair for an index the database's own check finds damaged."""

        def work(session: Session) -> None:
            conn = session.connection()
            if conn.dialect.name == "sqlite":
                conn.exec_driver_sql("REINDEX")
            else:
                for table in ("events", "policy", "task", "checkpoint", "bank_meta"):
                    conn.exec_driver_sql(f"REINDEX TABLE {table}")

        self._write(work)

    def hash_at(self, seq: int) -> str | None:
        """The chain hash of the event at ``seq``, or ``None`` if the log has no such seq."""
        with self._session() as session:
            conn = session.connection()
            statement = f"SELECT hash FROM events WHERE seq = {sql.mark(conn.dialect.paramstyle)}"
            row = conn.exec_driver_sql(statement, (seq,)).first()
            return None if row is None else str(row[0])

    def seq_of_hash(self, chain_hash: str) -> int | None:
        """The seq of the event whose chain hash is ``chain_hash``, or ``None`` (a scan: the
        hash column has no index, and an audit asks this once)."""
        with self._session() as session:
            conn = session.connection()
            statement = f"SELECT seq FROM events WHERE hash = {sql.mark(conn.dialect.paramstyle)}"
            row = conn.exec_driver_sql(statement, (chain_hash,)).first()
            return None if row is None else int(row[0])

    def is_initialised(self) -> bool:
        """Whether the database already holds a bank's tables."""
        with self._session() as session:
            return bool(inspect(session.connection()).has_table(EventRow.__tablename__))

    def meta(self, name: str) -> str | None:
        """One fact about the bank itself (``bank_id``), or ``None``."""
        with self._session() as session:
            row = session.get(MetaRow, name)
            return row.value if row else None

    # -- the log ------------------------------------------------------------------------------

    def append(self, events: Sequence[Event]) -> AppendResult:
        """Append a batch in one transaction; events already in the log are skipped.

        Every new event is checked against the outcome rules with the bank's current state, then
        inserted with one bulk statement, and the projections move forward in the same
        transaction.

        Raises:
            OutcomeRuleError: an event breaks the outcome rules; nothing of the batch is written.
            StoreError: the database refused the write.
        """
        unique = list({event.event_id: event for event in events}.values())
        return self._write(lambda session: self._append(session, events, unique))

    def _append(self, session: Session, events: Sequence[Event], unique: Sequence[Event]) -> AppendResult:
        conn = session.connection()
        result, writes = self._prepare(conn, events, unique)
        _run_writes(conn, writes)
        if result.appended:
            self._set_checkpoint(session, result.appended[-1].seq)
        return result

    def _prepare(self, conn: Connection, events: Sequence[Event],
                 unique: Sequence[Event]) -> tuple[AppendResult, list[_Write]]:
        """Check, chain and fold a batch against the bank's state; return what it comes to and
        the statements that write it (nothing is written here)."""
        present = self._present_ids(conn, [event.event_id for event in unique])
        fresh = [event for event in unique if event.event_id not in present]
        skipped = tuple(e.event_id for e in events if e.event_id in present)
        if not fresh:
            return AppendResult(skipped=skipped), []
        seq, prev = self._head(conn)
        stored = []
        for event in fresh:
            seq += 1
            link = event.link_hash(prev, seq)
            stored.append(StoredEvent(seq, event.event_id, event, prev, link))
            prev = link
        loaded = self._load_touched(conn, fresh)
        projection = Projection(None, loaded.tasks, loaded.key_states, compact=True)
        projection.winners.update(loaded.winners)
        for item in stored:
            projection.apply(item)
        style = conn.dialect.paramstyle
        writes = [(sql.insert("events", sql.EVENT_COLUMNS, style), [event_values(i) for i in stored])]
        writes += _upserts(style, "task", sql.TASK_COLUMNS, sql.TASK_KEY, projection.tasks,
                           loaded.tasks, task_values)
        writes += self._policy_writes(style, stored, projection.winners, loaded.winners)
        return AppendResult(appended=tuple(stored), skipped=skipped), writes

    @staticmethod
    def _policy_writes(style: str, stored: Sequence[StoredEvent], winners: dict[PolicyKey, PolicyRef],
                       before: dict[PolicyKey, PolicyRef]) -> list[_Write]:
        """The policy rows a batch changed: each new winner is an event of the batch, whose
        policy is built only now (the losers never become Policy values)."""
        first = stored[0].seq
        inserts, updates = [], []
        for key, ref in winners.items():
            held = before.get(key)
            if held == ref:
                continue
            row = policy_values(policy_of(stored[ref[2] - first]))
            if held is None:
                inserts.append(row)
            else:
                updates.append(sql.update_params(sql.POLICY_COLUMNS, sql.POLICY_KEY, row))
        return [(sql.insert("policy", sql.POLICY_COLUMNS, style), inserts),
                (sql.update("policy", sql.POLICY_COLUMNS, sql.POLICY_KEY, style), updates)]

    def append_stream(self, make_events: Callable[[], Iterable[Event]],
                      chunk: int = STREAM_CHUNK) -> StreamResult:
        """Append every event ``make_events()`` yields, in one transaction, ``chunk`` events at a
        time, so memory stays flat however long the stream: each chunk is checked, chained,
        folded and written like a batch of :meth:`append`, and the next chunk reads the state
        the earlier ones left (the transaction sees its own writes). Any error rolls the whole
        stream back. ``make_events`` is called again from the start if the database refused the
        write for a moment, so it must give the same events each time.

        Raises:
            OutcomeRuleError: an event breaks the outcome rules; nothing is written.
            BankError: the source raised it (a bad line of a file); nothing is written.
            StoreError: the database refused the write.
        """
        def work(session: Session) -> StreamResult:
            conn = session.connection()
            appended = skipped = 0
            with bulk_job():
                for part in _batches(make_events(), chunk):
                    unique = list({event.event_id: event for event in part}.values())
                    result, writes = self._prepare(conn, part, unique)
                    _run_writes(conn, writes)
                    appended += len(result.appended)
                    skipped += len(result.skipped)
            head = self._head(conn)
            self._set_checkpoint(session, head[0])
            return StreamResult(appended, skipped, *head)

        return self._write(work)

    def head(self) -> tuple[int, str]:
        """The last seq and its hash (``0`` and the genesis hash for an empty log)."""
        with self._session() as session:
            return self._head(session.connection())

    def checkpoint(self) -> int:
        """The last seq the stored projections reflect."""
        with self._session() as session:
            row = session.get(CheckpointRow, CHECKPOINT)
            return row.last_seq if row else 0

    def iter_events(self, where: EventFilter | None = None) -> Iterator[StoredEvent]:
        """Stream events oldest first, a page at a time, so memory does not grow with the log.

        Raises:
            EventValidationError, ValueError: a stored row is not a valid event.
        """
        for row in self.iter_event_rows(where):
            yield values_to_event(row)

    def iter_event_rows(self, where: EventFilter | None = None) -> Iterator[tuple[Any, ...]]:
        """The raw rows of :meth:`iter_events` (columns in :data:`bank.sql.EVENT_COLUMNS`
        order), read in keyset pages of seq so every database streams them alike."""
        with self._session() as session:
            yield from _event_pages(session.connection(), where or EventFilter())

    # -- projections --------------------------------------------------------------------------

    def tasks(self) -> list[TaskView]:
        """Every task, oldest first."""
        with self._session() as session:
            rows = session.exec(select(TaskRow).order_by(col(TaskRow.first_seq)))
            return [row_to_task(row) for row in rows]

    def tasks_by_prefix(self, prefix: str) -> list[TaskView]:
        """The tasks whose id starts with ``prefix``."""
        with self._session() as session:
            statement = select(TaskRow).where(col(TaskRow.task_id).startswith(prefix, autoescape=True))
            return [row_to_task(row) for row in session.exec(statement)]

    def policies(self, where: PolicyFilter | None = None) -> list[Policy]:
        """The current policies matching ``where``, ordered by chip, op type and key."""
        where = where or PolicyFilter()
        with self._session() as session:
            conn = session.connection()
            ph = sql.mark(conn.dialect.paramstyle)
            names = [name for name in ("soc_version", "op_type", "repo_key", "backend",
                                       "cost_model_version") if getattr(where, name) is not None]
            statement = sql.select_policies(" AND ".join(f"{name} = {ph}" for name in names))
            statement += " ORDER BY soc_version, op_type, repo_key"
            rows = conn.exec_driver_sql(statement, tuple(getattr(where, name) for name in names))
            return [values_to_policy(tuple(row)) for row in rows]

    def policy_count(self) -> int:
        """How many policies the projection holds, counted by the database."""
        with self._session() as session:
            return int(session.connection().exec_driver_sql("SELECT COUNT(*) FROM policy").scalar_one())

    def policy_times(self, soc_version: str | None = None) -> Iterator[tuple[str, str, str | None, float]]:
        """(soc_version, repo_key, op_type, best_us) of every current policy, streamed, nothing
        decoded: what a report of a large bank needs, without building a Policy per key (their
        decoded info_dicts took 927 MB for the 185,340 keys of a 1,000,000-event bank)."""
        with self._session() as session:
            conn = session.connection()
            ph = sql.mark(conn.dialect.paramstyle)
            where = f" WHERE soc_version = {ph}" if soc_version is not None else ""
            rows = conn.exec_driver_sql(
                f"SELECT soc_version, repo_key, op_type, best_us FROM policy{where}",
                (soc_version,) if soc_version is not None else ())
            for soc, key, op_type, best_us in rows:
                yield soc, key, op_type, float(best_us)

    def policies_for_keys(self, soc_version: str, repo_keys: Sequence[str]) -> list[Policy]:
        """Every stored policy of ``soc_version`` whose repo_key is in ``repo_keys``."""
        return [values_to_policy(row) for row in self.policy_rows_for_keys(soc_version, repo_keys)]

    def policy_rows_for_keys(self, soc_version: str,
                             repo_keys: Sequence[str]) -> list[tuple[Any, ...]]:
        """:meth:`policies_for_keys` as raw rows (:data:`bank.sql.POLICY_COLUMNS` order, the
        JSON columns not decoded), for the tuner's lookup to decode only what matches."""
        keys = sorted(set(repo_keys))
        with self._session() as session:
            conn = session.connection()
            style = conn.dialect.paramstyle
            found: list[tuple[Any, ...]] = []
            for part in _chunks(keys):
                statement = sql.select_policies(
                    f"soc_version = {sql.mark(style)} AND repo_key IN ({sql.marks(style, len(part))})")
                found.extend(tuple(row) for row in conn.exec_driver_sql(statement, (soc_version, *part)))
            return found

    def outcomes_for_keys(self, soc_version: str, kind: str,
                          repo_keys: Sequence[str]) -> list[StoredEvent]:
        """Every ``kind`` event of ``soc_version`` whose repo_key is in ``repo_keys``."""
        keys = sorted(set(repo_keys))
        found: list[StoredEvent] = []
        with self._session() as session:
            conn = session.connection()
            style = conn.dialect.paramstyle
            ph = sql.mark(style)
            for part in _chunks(keys):
                statement = sql.select_events(f"soc_version = {ph} AND kind = {ph} AND repo_key IN "
                                              f"({sql.marks(style, len(part))})")
                rows = conn.exec_driver_sql(statement, (soc_version, str(kind), *part))
                found.extend(values_to_event(tuple(row)) for row in rows)
        return found

    def events_by_id(self, event_ids: Sequence[str]) -> list[StoredEvent]:
        """The stored events with these ids, in seq order."""
        found: list[StoredEvent] = []
        with self._session() as session:
            conn = session.connection()
            style = conn.dialect.paramstyle
            for part in _chunks(sorted(set(event_ids))):
                statement = sql.select_events(f"event_id IN ({sql.marks(style, len(part))})")
                rows = conn.exec_driver_sql(statement, tuple(part))
                found.extend(values_to_event(tuple(row)) for row in rows)
        return sorted(found, key=lambda stored: stored.seq)

    def policy_refs(self) -> dict[PolicyKey, tuple[str, float]]:
        """The event_id and best time of every stored policy, by key: what a merge compares,
        without decoding the policies themselves."""
        with self._session() as session:
            rows = session.connection().exec_driver_sql(
                "SELECT soc_version, repo_key, info_digest, event_id, best_us FROM policy")
            return {(soc, key, digest): (event_id, float(best_us))
                    for soc, key, digest, event_id, best_us in rows}

    def policies_by_key(self, keys: Sequence[PolicyKey]) -> dict[PolicyKey, Policy]:
        """The stored policies of ``keys`` (those that exist)."""
        found: dict[PolicyKey, Policy] = {}
        wanted = set(keys)
        by_soc: dict[str, list[str]] = {}
        for soc, key, _ in wanted:
            by_soc.setdefault(soc, []).append(key)
        for soc, repo_keys in by_soc.items():
            for policy in self.policies_for_keys(soc, repo_keys):
                if policy.key in wanted:
                    found[policy.key] = policy
        return found

    def iter_stored_policy_rows(self) -> Iterator[tuple[tuple[Any, ...], StoredEvent | None]]:
        """Every stored policy row (in :data:`bank.sql.POLICY_COLUMNS` order) with the event its
        seq names (``None`` if there is none or it cannot be read), streamed in pages, for
        ``verify`` to compare with a replay."""
        with self._session() as session:
            conn = session.connection()
            style = conn.dialect.paramstyle
            ph = sql.mark(style)
            page = sql.select_policies(f"seq > {ph}") + f" ORDER BY seq LIMIT {ph}"
            after = 0
            while True:
                rows = [tuple(row) for row in conn.exec_driver_sql(page, (after, _PAGE))]
                if not rows:
                    return
                events = self._events_at(conn, [row[7] for row in rows])
                for row in rows:
                    yield row, events.get(row[7])
                after = rows[-1][7]
                if len(rows) < _PAGE:
                    return

    @staticmethod
    def _events_at(conn: Connection, seqs: Sequence[int]) -> dict[int, StoredEvent | None]:
        """The events at ``seqs`` (one whose row cannot be read maps to ``None``; payloads are
        decoded, and checked, when read)."""
        style = conn.dialect.paramstyle
        found: dict[int, StoredEvent | None] = {}
        for part in _chunks(sorted(set(seqs))):
            statement = sql.select_events(f"seq IN ({sql.marks(style, len(part))})")
            for row in conn.exec_driver_sql(statement, tuple(part)):
                try:
                    found[row[0]] = values_to_logged(tuple(row))
                except (BankError, ValueError):
                    found[row[0]] = None
        return found

    def rebuild_projection(self) -> int:
        """Throw the projection tables away and derive them again from the whole log, in one
        write transaction (writers wait meanwhile); return the seq they reflect.

        Raises:
            OutcomeRuleError: the log breaks the outcome rules (nothing is changed).
            EventValidationError, ValueError: a stored row is not a valid event.
        """
        return self._write(self.derive_projection)

    def derive_projection(self, session: Session) -> int:
        """Within a write transaction: fold the whole log into a fresh compact projection,
        replace the projection tables with it and return the seq it reflects. Memory follows
        the tasks and policy keys, not the log: winning policies are read back in pages."""
        conn = session.connection()
        projection = Projection(compact=True)
        head = 0
        with bulk_job():
            for row in _event_pages(conn, EventFilter()):
                projection.apply(values_to_logged(row))
                head = row[0]
        for table in (PolicyRow, TaskRow):
            session.execute(delete(table))
        style = conn.dialect.paramstyle
        tasks = [task_values(task) for task in projection.tasks.values()]
        if tasks:
            conn.exec_driver_sql(sql.insert("task", sql.TASK_COLUMNS, style), tasks)
        seqs = sorted(ref[2] for ref in projection.winners.values())
        insert_policy = sql.insert("policy", sql.POLICY_COLUMNS, style)
        for start in range(0, len(seqs), _PAGE):
            events = self._events_at(conn, seqs[start:start + _PAGE])
            rows = [policy_values(policy_of(stored)) for stored in events.values() if stored]
            if rows:
                conn.exec_driver_sql(insert_policy, rows)
        self._set_checkpoint(session, head)
        return head

    # -- helpers ------------------------------------------------------------------------------

    @staticmethod
    def _head(conn: Connection) -> tuple[int, str]:
        row = conn.exec_driver_sql("SELECT seq, hash FROM events ORDER BY seq DESC LIMIT 1").first()
        return (0, GENESIS_HASH) if row is None else (row[0], row[1])

    @staticmethod
    def _present_ids(conn: Connection, ids: Sequence[str]) -> set[str]:
        present: set[str] = set()
        style = conn.dialect.paramstyle
        for part in _chunks(ids):
            statement = f"SELECT event_id FROM events WHERE event_id IN ({sql.marks(style, len(part))})"
            present.update(row[0] for row in conn.exec_driver_sql(statement, tuple(part)))
        return present

    @staticmethod
    def _load_touched(conn: Connection, events: Sequence[Event]) -> _Loaded:
        """The task rows, key states and policies a batch touches, read in a few queries."""
        loaded = _Loaded()
        style = conn.dialect.paramstyle
        ph = sql.mark(style)
        task_ids = sorted({e.task_id for e in events})
        for part in _chunks(task_ids):
            statement = (f"SELECT {','.join(sql.TASK_COLUMNS)} FROM task WHERE task_id IN "
                         f"({sql.marks(style, len(part))})")
            for row in conn.exec_driver_sql(statement, tuple(part)):
                task = values_to_task(tuple(row))
                loaded.tasks[task.task_id] = task
        touched: dict[str, set[str]] = {}
        for event in events:
            known = loaded.tasks.get(event.task_id)
            if event.repo_key is not None and known is not None and not known.finished:
                touched.setdefault(event.task_id, set()).add(event.repo_key)
        kinds = sql.marks(style, len(_OUTCOMES))
        for task_id, wanted in touched.items():
            states = loaded.key_states.setdefault(task_id, {})
            for part in _chunks(sorted(wanted)):
                statement = (f"SELECT repo_key, kind FROM events WHERE task_id = {ph} AND repo_key "
                             f"IN ({sql.marks(style, len(part))}) AND kind IN ({kinds}) ORDER BY seq")
                for key, kind in conn.exec_driver_sql(statement, (task_id, *part, *_OUTCOMES)):
                    states[key] = kind
        keys = sorted({e.repo_key for e in events if e.kind in POLICY_KINDS and e.repo_key})
        socs = sorted({e.soc_version for e in events})
        for part in _chunks(keys):
            statement = (f"SELECT soc_version, repo_key, info_digest, best_us, event_id, seq FROM "
                         f"policy WHERE soc_version IN ({sql.marks(style, len(socs))}) AND "
                         f"repo_key IN ({sql.marks(style, len(part))})")
            for soc, key, digest, best_us, event_id, seq in conn.exec_driver_sql(
                    statement, (*socs, *part)):
                loaded.winners[(soc, key, digest)] = (float(best_us), event_id, seq)
        return loaded

    @staticmethod
    def _set_checkpoint(session: Session, last_seq: int) -> None:
        session.execute(update(CheckpointRow).where(col(CheckpointRow.name) == CHECKPOINT)
                        .values(last_seq=last_seq))


def _event_pages(conn: Connection, where: EventFilter) -> Iterator[tuple[Any, ...]]:
    """The events rows ``where`` selects, oldest first, read in keyset pages of seq."""
    style = conn.dialect.paramstyle
    ph = sql.mark(style)
    clauses: list[str] = [f"seq > {ph}"]
    params: list[Any] = []
    if where.until_seq is not None:
        clauses.append(f"seq <= {ph}")
        params.append(where.until_seq)
    if where.until_time is not None:
        clauses.append(f"recorded_at <= {ph}")
        params.append(where.until_time)
    if where.kinds is not None:
        clauses.append(f"kind IN ({sql.marks(style, len(where.kinds))})")
        params.extend(str(kind) for kind in where.kinds)
    for name in ("repo_key", "op_name", "op_type", "task_id", "soc_version"):
        value = getattr(where, name)
        if value is not None:
            clauses.append(f"{name} = {ph}")
            params.append(value)
    statement = sql.select_events(" AND ".join(clauses), style, limit=True)
    after = where.since_seq
    while True:
        rows = conn.exec_driver_sql(statement, (after, *params, _PAGE)).all()
        for row in rows:
            yield tuple(row)
        if len(rows) < _PAGE:
            return
        after = rows[-1][0]


_Write = tuple[str, list[tuple[Any, ...]]]
"""One statement and the rows it is run with (``executemany``)."""


def _run_writes(conn: Connection, writes: Sequence[_Write]) -> None:
    for statement, rows in writes:
        if rows:
            conn.exec_driver_sql(statement, rows)


def _upserts(style: str, table: str, columns: tuple[str, ...], key: tuple[str, ...],
             new: dict[Any, T], old: dict[Any, T],
             to_row: Callable[[T], tuple[Any, ...]]) -> list[_Write]:
    """The inserts of the entries of ``new`` that ``old`` lacks and the updates of those that
    changed, each one ``executemany``."""
    inserts = [to_row(value) for name, value in new.items() if name not in old]
    updates = [sql.update_params(columns, key, to_row(value)) for name, value in new.items()
               if name in old and old[name] != value]
    return [(sql.insert(table, columns, style), inserts),
            (sql.update(table, columns, key, style), updates)]


@contextmanager
def bulk_job() -> Iterator[None]:
    """No cyclic garbage collection while a bulk job runs: it allocates millions of objects
    that die young, and each full collection walks every live object, so a long import spent
    close to half its time collecting. Reference counting still frees everything as it goes;
    the collector runs again when the job ends."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
