"""The event store: the log and its inline projections in one SQL database.

One place opens transactions: :meth:`EventStore._session`. A write takes the database's write lock
first, so seq numbers are gap-free and in commit order and the hash chain never forks; any error
rolls the whole batch back and comes out as a :class:`~bank.errors.BankError`. A write the
database refused for a moment (another writer held the lock past the busy timeout, a
serialisation failure) is run again from the start, a bounded number of times.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

from sqlalchemy import Table, delete, func, insert, inspect, update
from sqlalchemy.exc import DBAPIError, SQLAlchemyError
from sqlmodel import Session, SQLModel, col, select

from bank.dialects import (
    WRITE_OPTION,
    describe_url,
    install_triggers,
    is_transient,
    make_engine,
    use_wal,
)
from bank.errors import BankLocationError, StoreError
from bank.events import GENESIS_HASH, Event, StoredEvent, chain_hash
from bank.projection import Policy, PolicyKey, Projection, TaskView
from bank.rows import (
    event_to_row,
    policy_to_row,
    row_to_event,
    row_to_policy,
    row_to_task,
    task_to_row,
)
from bank.schema import (
    SCHEMA_VERSION,
    CheckpointRow,
    EventRow,
    MetaRow,
    PolicyRow,
    TaskKeyRow,
    TaskRow,
)

CHECKPOINT = "projections"
_CHUNK = 500  # values per IN (...) list, well under every database's parameter limit
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
    """The projection rows an append read, so it can tell inserts from updates."""

    tasks: dict[str, TaskView] = field(default_factory=dict)
    key_states: dict[tuple[str, str], str] = field(default_factory=dict)
    policies: dict[PolicyKey, Policy] = field(default_factory=dict)


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
            use_wal(self.engine)

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
        present = self._present_ids(session, [event.event_id for event in unique])
        fresh = [event for event in unique if event.event_id not in present]
        skipped = tuple(e.event_id for e in events if e.event_id in present)
        if not fresh:
            return AppendResult(skipped=skipped)
        seq, prev = self._head(session)
        stored = []
        for event in fresh:
            seq += 1
            content = event.content()
            link = chain_hash(prev, seq, event.event_id, content)
            stored.append(StoredEvent(seq, event.event_id, event, prev, link))
            prev = link
        loaded = self._load_touched(session, fresh)
        projection = Projection(dict(loaded.policies), dict(loaded.tasks), dict(loaded.key_states))
        for item in stored:
            projection.apply(item)
        session.execute(insert(_table(EventRow)), [event_to_row(item) for item in stored])
        self._write_projection(session, projection, loaded)
        self._set_checkpoint(session, seq)
        return AppendResult(appended=tuple(stored), skipped=skipped)

    def head(self) -> tuple[int, str]:
        """The last seq and its hash (``0`` and the genesis hash for an empty log)."""
        with self._session() as session:
            return self._head(session)

    def checkpoint(self) -> int:
        """The last seq the stored projections reflect."""
        with self._session() as session:
            row = session.get(CheckpointRow, CHECKPOINT)
            return row.last_seq if row else 0

    def iter_events(self, where: EventFilter | None = None) -> Iterator[StoredEvent]:
        """Stream events oldest first, a page at a time, so memory does not grow with the log."""
        where = where or EventFilter()
        statement = select(EventRow).where(EventRow.seq > where.since_seq)
        if where.until_seq is not None:
            statement = statement.where(EventRow.seq <= where.until_seq)
        if where.until_time is not None:
            statement = statement.where(EventRow.recorded_at <= where.until_time)
        if where.kinds is not None:
            statement = statement.where(col(EventRow.kind).in_(where.kinds))
        for name in ("repo_key", "op_name", "op_type", "task_id", "soc_version"):
            value = getattr(where, name)
            if value is not None:
                statement = statement.where(getattr(EventRow, name) == value)
        statement = statement.order_by(col(EventRow.seq)).execution_options(yield_per=1000)
        with self._session() as session:
            for row in session.exec(statement):
                yield row_to_event(row)

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
        statement = select(PolicyRow)
        for name in ("soc_version", "op_type", "repo_key", "backend", "cost_model_version"):
            value = getattr(where, name)
            if value is not None:
                statement = statement.where(getattr(PolicyRow, name) == value)
        statement = statement.order_by(col(PolicyRow.soc_version), col(PolicyRow.op_type),
                                       col(PolicyRow.repo_key))
        with self._session() as session:
            return [row_to_policy(row) for row in session.exec(statement)]

    def policies_for_keys(self, soc_version: str, repo_keys: Sequence[str]) -> list[Policy]:
        """Every stored policy of ``soc_version`` whose repo_key is in ``repo_keys``."""
        keys = sorted(set(repo_keys))
        with self._session() as session:
            found: list[Policy] = []
            for part in _chunks(keys):
                statement = select(PolicyRow).where(PolicyRow.soc_version == soc_version,
                                                    col(PolicyRow.repo_key).in_(part))
                found.extend(row_to_policy(row) for row in session.exec(statement))
            return found

    def outcomes_for_keys(self, soc_version: str, kind: str,
                          repo_keys: Sequence[str]) -> list[StoredEvent]:
        """Every ``kind`` event of ``soc_version`` whose repo_key is in ``repo_keys``."""
        keys = sorted(set(repo_keys))
        found: list[StoredEvent] = []
        with self._session() as session:
            for part in _chunks(keys):
                statement = select(EventRow).where(EventRow.soc_version == soc_version,
                                                   EventRow.kind == str(kind),
                                                   col(EventRow.repo_key).in_(part))
                found.extend(row_to_event(row) for row in session.exec(statement))
        return found

    def stored_projection(self) -> Projection:
        """The projection tables as they are, for ``verify`` to compare with a replay."""
        with self._session() as session:
            policies = {p.key: p for p in map(row_to_policy, session.exec(select(PolicyRow)))}
            tasks = {t.task_id: t for t in map(row_to_task, session.exec(select(TaskRow)))}
            states = {(r.task_id, r.repo_key): r.state for r in session.exec(select(TaskKeyRow))}
        return Projection(policies, tasks, states)

    def replace_projection(self, projection: Projection, last_seq: int) -> int:
        """Throw the projection tables away and write ``projection`` (derived up to ``last_seq``),
        first folding in whatever writers appended since, under the write lock; return the seq
        the written projection reflects.

        Raises:
            OutcomeRuleError: the events after ``last_seq`` cannot be folded in.
        """
        return self._write(lambda session: self.derive_projection(session, projection, last_seq))

    def derive_projection(self, session: Session, projection: Projection, last_seq: int) -> int:
        """Within a write transaction: fold the events after ``last_seq`` into ``projection``,
        replace the projection tables with it and return the seq it reflects."""
        caught_up = Projection(dict(projection.policies), dict(projection.tasks),
                               dict(projection.key_states))
        head = last_seq
        later = select(EventRow).where(EventRow.seq > last_seq).order_by(col(EventRow.seq))
        for row in session.exec(later):
            caught_up.apply(row_to_event(row))
            head = row.seq
        for table in (PolicyRow, TaskRow, TaskKeyRow):
            session.execute(delete(table))
        self._write_projection(session, caught_up, _Loaded())
        self._set_checkpoint(session, head)
        return head

    # -- helpers ------------------------------------------------------------------------------

    @staticmethod
    def _head(session: Session) -> tuple[int, str]:
        last = session.exec(select(func.max(EventRow.seq))).one()
        if last is None:
            return 0, GENESIS_HASH
        row = session.get(EventRow, last)
        assert row is not None
        return row.seq, row.hash

    @staticmethod
    def _present_ids(session: Session, ids: Sequence[str]) -> set[str]:
        present: set[str] = set()
        for part in _chunks(ids):
            statement = select(EventRow.event_id).where(col(EventRow.event_id).in_(part))
            present.update(session.exec(statement))
        return present

    @staticmethod
    def _load_touched(session: Session, events: Sequence[Event]) -> _Loaded:
        loaded = _Loaded()
        task_ids = sorted({e.task_id for e in events})
        keys = sorted({e.repo_key for e in events if e.repo_key is not None})
        socs = sorted({e.soc_version for e in events})
        for part in _chunks(task_ids):
            for row in session.exec(select(TaskRow).where(col(TaskRow.task_id).in_(part))):
                loaded.tasks[row.task_id] = row_to_task(row)
        for tasks_part in _chunks(task_ids):
            for keys_part in _chunks(keys):
                statement = select(TaskKeyRow).where(col(TaskKeyRow.task_id).in_(tasks_part),
                                                     col(TaskKeyRow.repo_key).in_(keys_part))
                for state in session.exec(statement):
                    loaded.key_states[(state.task_id, state.repo_key)] = state.state
        for keys_part in _chunks(keys):
            policy_query = select(PolicyRow).where(col(PolicyRow.soc_version).in_(socs),
                                                   col(PolicyRow.repo_key).in_(keys_part))
            for policy in map(row_to_policy, session.exec(policy_query)):
                loaded.policies[policy.key] = policy
        return loaded

    @staticmethod
    def _write_projection(session: Session, projection: Projection, loaded: _Loaded) -> None:
        _upsert(session, TaskRow, projection.tasks, loaded.tasks, task_to_row)
        _upsert(session, PolicyRow, projection.policies, loaded.policies, policy_to_row)
        states = {slot: {"task_id": slot[0], "repo_key": slot[1], "state": state}
                  for slot, state in projection.key_states.items()}
        old_states = {slot: {"task_id": slot[0], "repo_key": slot[1], "state": state}
                      for slot, state in loaded.key_states.items()}
        _upsert(session, TaskKeyRow, states, old_states, dict)

    @staticmethod
    def _set_checkpoint(session: Session, last_seq: int) -> None:
        session.execute(update(CheckpointRow).where(col(CheckpointRow.name) == CHECKPOINT)
                        .values(last_seq=last_seq))


def _upsert(session: Session, table: type[SQLModel], new: dict[Any, T], old: dict[Any, T],
            to_row: Any) -> None:
    """Insert the entries of ``new`` that ``old`` lacks and update those that changed, in bulk."""
    inserts = [to_row(value) for key, value in new.items() if key not in old]
    updates = [to_row(value) for key, value in new.items() if key in old and old[key] != value]
    if inserts:
        session.execute(insert(_table(table)), inserts)
    if updates:
        session.execute(update(table), updates)


def _table(model: type[SQLModel]) -> Table:
    """The Core table of a model: bulk inserts through it skip the ORM's per-row bookkeeping."""
    table = model.__table__  # type: ignore[attr-defined]
    assert isinstance(table, Table)
    return table
