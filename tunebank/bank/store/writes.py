"""The write path: a batch of new events checked against the bank's state, chained, folded into
the projections it touches, and written with one ``executemany`` per statement.

Every function here runs inside a write transaction the recorder opened (its write lock held),
so the head it reads cannot move under it.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

from tunebank.bank.events import GENESIS_HASH, OUTCOME_KINDS, POLICY_KINDS, Event, StoredEvent
from tunebank.bank.names import check_chip
from tunebank.bank.projection import PolicyKey, PolicyRef, Projection, policy_of, standing
from tunebank.bank.store.driver import Db, batches, chunks
from tunebank.bank.store.results import AppendResult, StreamResult
from tunebank.bank.store.rows import event_values, policy_values, task_values, values_to_task
from tunebank.bank.store.schema import statements as sql
from tunebank.bank.tasks import TaskView

T = TypeVar("T")
_OUTCOMES = tuple(sorted(str(kind) for kind in OUTCOME_KINDS))

Write = tuple[str, list[tuple[Any, ...]]]
"""One statement and the rows it is run with (``executemany``), or a table's name and whole
rows to insert (:meth:`~bank.store.driver.Db.insert_rows`: COPY on PostgreSQL)."""


@dataclass
class _Loaded:
    """The projection rows a batch touches, read before it is folded, so inserts can be told
    from updates: tasks whole, key states per task, policies as the standing and seq they
    compete with."""

    tasks: dict[str, TaskView] = field(default_factory=dict)
    key_states: dict[str, dict[str, str]] = field(default_factory=dict)
    winners: dict[PolicyKey, PolicyRef] = field(default_factory=dict)


def head(db: Db) -> tuple[int, str]:
    """The last seq and its hash (``0`` and the genesis hash for an empty log)."""
    row = db.one(sql.HEAD)
    return (0, GENESIS_HASH) if row is None else (int(row[0]), str(row[1]))


def set_checkpoint(db: Db, last_seq: int) -> None:
    """Record that the projections reflect the log up to ``last_seq``."""
    db.run(sql.SET_CHECKPOINT, (last_seq, sql.CHECKPOINT))


def append(db: Db, events: Sequence[Event]) -> AppendResult:
    """Append one batch (events already in the log are skipped) and move the checkpoint."""
    unique = list({event.event_id: event for event in events}.values())
    result, writes = prepare(db, events, unique)
    run_writes(db, writes)
    if result.appended:
        set_checkpoint(db, result.appended[-1].seq)
    return result


def append_stream(db: Db, make_events: Callable[[], Iterable[Event]], chunk: int) -> StreamResult:
    """Append every event of a stream, ``chunk`` at a time; each chunk reads the state the
    earlier ones left (the transaction sees its own writes)."""
    appended = skipped = 0
    with bulk_job():
        for part in batches(make_events(), chunk):
            unique = list({event.event_id: event for event in part}.values())
            result, writes = prepare(db, part, unique)
            run_writes(db, writes)
            appended += len(result.appended)
            skipped += len(result.skipped)
    last = head(db)
    set_checkpoint(db, last[0])
    return StreamResult(appended, skipped, *last)


def prepare(db: Db, events: Sequence[Event], unique: Sequence[Event]) -> tuple[AppendResult, list[Write]]:
    """Check, chain and fold a batch against the bank's state; return what it comes to and the
    statements that write it (nothing is written here).

    Raises:
        OutcomeRuleError: an event breaks the outcome rules.
        UnsafeNameError: an event's chip is not a plain name (every door comes through here).
    """
    present = _present_ids(db, [event.event_id for event in unique])
    fresh = [event for event in unique if event.event_id not in present]
    skipped = tuple(e.event_id for e in events if e.event_id in present)
    if not fresh:
        return AppendResult(skipped=skipped), []
    for chip, event in {event.soc_version: event for event in fresh}.items():
        check_chip(chip, f"{event.kind} event of task {event.task_id} (from {event.origin})")
    seq, prev = head(db)
    stored = []
    for event in fresh:
        seq += 1
        link = event.link_hash(prev, seq)
        stored.append(StoredEvent(seq, event.event_id, event, prev, link))
        prev = link
    loaded = _load_touched(db, fresh)
    projection = Projection(None, loaded.tasks, loaded.key_states, compact=True)
    projection.winners.update(loaded.winners)
    for item in stored:
        projection.apply(item)
    writes: list[Write] = [("events", [event_values(item) for item in stored])]
    writes += _upserts("task", sql.TASK_KEY, projection.tasks, loaded.tasks, task_values)
    writes += _policy_writes(stored, projection.winners, loaded.winners)
    return AppendResult(appended=tuple(stored), skipped=skipped), writes


def run_writes(db: Db, writes: Sequence[Write]) -> None:
    """Run each statement with its rows (a bare table name: insert the rows whole)."""
    for statement, rows in writes:
        if " " in statement:
            db.run_many(statement, rows)
        else:
            db.insert_rows(statement, rows)


def _policy_writes(stored: Sequence[StoredEvent], winners: dict[PolicyKey, PolicyRef],
                   before: dict[PolicyKey, PolicyRef]) -> list[Write]:
    """The policy rows a batch changed: each new winner is an event of the batch, whose policy
    is built only now (the losers never become Policy values)."""
    first = stored[0].seq
    inserts, updates = [], []
    for key, ref in winners.items():
        held = before.get(key)
        if held == ref:
            continue
        row = policy_values(policy_of(stored[ref[1] - first]))
        if held is None:
            inserts.append(row)
        else:
            updates.append(sql.update_params("policy", sql.POLICY_KEY, row))
    return [(sql.insert("policy"), inserts), (sql.update("policy", sql.POLICY_KEY), updates)]


def _upserts(table: str, key: tuple[str, ...], new: dict[Any, T], old: dict[Any, T],
             to_row: Callable[[T], tuple[Any, ...]]) -> list[Write]:
    """The inserts of the entries of ``new`` that ``old`` lacks and the updates of those that
    changed, each one ``executemany``."""
    inserts = [to_row(value) for name, value in new.items() if name not in old]
    updates = [sql.update_params(table, key, to_row(value)) for name, value in new.items()
               if name in old and old[name] != value]
    return [(sql.insert(table), inserts), (sql.update(table, key), updates)]


def _present_ids(db: Db, ids: Sequence[str]) -> set[str]:
    present: set[str] = set()
    for part in chunks(ids, sql.CHUNK):
        statement = f"SELECT event_id FROM events WHERE event_id IN ({sql.marks(len(part))})"
        present.update(row[0] for row in db.rows(statement, part))
    return present


def _load_touched(db: Db, events: Sequence[Event]) -> _Loaded:
    """The task rows, key states and policies a batch touches, read in a few queries."""
    loaded = _Loaded()
    for part in chunks(sorted({e.task_id for e in events}), sql.CHUNK):
        for row in db.rows(sql.select_tasks(f"task_id IN ({sql.marks(len(part))})"), part):
            task = values_to_task(row)
            loaded.tasks[task.task_id] = task
    touched: dict[str, set[str]] = {}
    for event in events:
        known = loaded.tasks.get(event.task_id)
        if event.repo_key is not None and known is not None and not known.finished:
            touched.setdefault(event.task_id, set()).add(event.repo_key)
    kinds = sql.marks(len(_OUTCOMES))
    for task_id, wanted in touched.items():
        states = loaded.key_states.setdefault(task_id, {})
        for part in chunks(sorted(wanted), sql.CHUNK):
            statement = (f"SELECT repo_key, kind FROM events WHERE task_id = ? AND repo_key IN "
                         f"({sql.marks(len(part))}) AND kind IN ({kinds}) ORDER BY seq")
            for key, kind in db.rows(statement, (task_id, *part, *_OUTCOMES)):
                states[key] = kind
    keys = sorted({e.repo_key for e in events if e.kind in POLICY_KINDS and e.repo_key})
    socs = sorted({e.soc_version for e in events})
    for part in chunks(keys, sql.CHUNK):
        statement = (f"SELECT soc_version, repo_key, info_digest, best_us, recorded_at, event_id, "
                     f"seq FROM policy WHERE soc_version IN ({sql.marks(len(socs))}) AND "
                     f"repo_key IN ({sql.marks(len(part))})")
        for soc, key, digest, best_us, recorded_at, event_id, seq in db.rows(statement,
                                                                             (*socs, *part)):
            loaded.winners[(soc, key, digest)] = (standing(float(best_us), recorded_at, event_id),
                                                  seq)
    return loaded


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
