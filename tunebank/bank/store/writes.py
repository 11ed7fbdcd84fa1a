"""The write path: a batch of new events checked against the bank's state, chained, folded into
the projections it touches, and written with one ``executemany`` per statement.

Every function here runs inside a write transaction the recorder opened (its write lock held),
so the head it reads cannot move under it.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

from tunebank.bank.events import (
    EVENT_ID,
    GENESIS_HASH,
    HASH,
    KEYED_KINDS,
    KIND,
    OP_NAME,
    OP_TYPE,
    ORIGIN,
    PAYLOAD,
    POLICY_KINDS,
    PREV_HASH,
    RECORDED_AT,
    REPO_KEY,
    SEQ,
    SOC_VERSION,
    TASK_ID,
    Event,
    EventRow,
    StoredEvent,
    content_halves,
    link_hash,
)
from tunebank.bank.names import check_chip
from tunebank.bank.projection import PolicyKey, PolicyRef, Projection, standing
from tunebank.bank.store.driver import Db, batches, chunks
from tunebank.bank.store.results import AppendResult, StreamResult
from tunebank.bank.store.rows import policy_row_of, task_values, values_to_task
from tunebank.bank.store.schema import statements as sql
from tunebank.bank.tasks import TaskView

T = TypeVar("T")
_OUTCOMES = tuple(sorted(str(kind) for kind in KEYED_KINDS))
_POLICY_KINDS = frozenset(str(kind) for kind in POLICY_KINDS)
_WITHDRAWN = "withdrawn"
_POLICY_TOUCHING = _POLICY_KINDS | {_WITHDRAWN}

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
    withdrawn: dict[PolicyKey, tuple[str, int]] = field(default_factory=dict)


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
    rows, writes = prepare(db, [event.row() for event in unique], [event.payload for event in unique],
                           checked=True)
    run_writes(db, writes)
    placed = {row[EVENT_ID]: row for row in rows}
    skipped = tuple(event.event_id for event in events if event.event_id not in placed)
    by_id = {event.event_id: event for event in unique}
    appended = tuple(StoredEvent.of(row[SEQ], row[EVENT_ID], by_id[row[EVENT_ID]], row[PREV_HASH],
                                    row[HASH]) for row in rows)
    if appended:
        set_checkpoint(db, appended[-1].seq)
    return AppendResult(appended=appended, skipped=skipped)


def append_stream(db: Db, make_rows: Callable[[], Iterable[EventRow]], chunk: int, *,
                  checked: bool) -> StreamResult:
    """Append every event of a stream of rows, ``chunk`` at a time; each chunk reads the state
    the earlier ones left (the transaction sees its own writes). ``checked``: see
    :func:`prepare`; a row that is not is first checked as an Event is and given the id its
    content makes (a row from another bank is trusted for neither)."""
    appended = offered = 0
    with bulk_job():
        for part in batches(make_rows(), chunk):
            payloads: list[Mapping[str, Any]] | None = None
            if not checked:
                events = [Event.stored(row[KIND], row[SOC_VERSION], row[TASK_ID], row[RECORDED_AT],
                                       row[ORIGIN], row[PAYLOAD], row[REPO_KEY], row[OP_NAME],
                                       row[OP_TYPE]) for row in part]
                part = [(row[SEQ], event.event_id, *row[KIND:])
                        for row, event in zip(part, events, strict=True)]
                payloads = [event.payload for event in events]
            seen: dict[str, int] = {}
            for n, row in enumerate(part):
                seen.setdefault(row[EVENT_ID], n)
            first = list(seen.values())  # each id's first row, in stream order
            rows, writes = prepare(db, [part[n] for n in first],
                                   None if payloads is None else [payloads[n] for n in first],
                                   checked=checked)
            run_writes(db, writes)
            appended += len(rows)
            offered += len(part)
    last = head(db)
    set_checkpoint(db, last[0])
    return StreamResult(appended, offered - appended, *last)


def prepare(db: Db, unique: Sequence[EventRow], payloads: Sequence[Mapping[str, Any]] | None, *,
            checked: bool) -> tuple[list[EventRow], list[Write]]:
    """Check, chain and fold a batch of rows (ids unique) against the bank's state; return the
    rows it appends, placed in this bank's chain, and the statements that write them (nothing
    is written here). ``payloads``: each row's payload, decoded, where the caller has them.

    ``checked``: each row's id is the one its content makes, and a row that lands at the seq
    and after the prev_hash it carries keeps its hash (an events file's rows, every one checked
    as it was read). Otherwise the link is computed.

    Raises:
        OutcomeRuleError: an event breaks the outcome rules.
        UnsafeNameError: an event's chip is not a plain name (every door comes through here).
    """
    present = present_ids(db, [row[EVENT_ID] for row in unique])
    fresh = [n for n, row in enumerate(unique) if row[EVENT_ID] not in present]
    if not fresh:
        return [], []
    for chip, n in {unique[n][SOC_VERSION]: n for n in fresh}.items():
        row = unique[n]
        check_chip(chip, f"{row[KIND]} event of task {row[TASK_ID]} (from {row[ORIGIN]})")
    seq, prev = head(db)
    rows: list[EventRow] = []
    for n in fresh:
        row = unique[n]
        seq += 1
        if checked and row[SEQ] == seq and row[PREV_HASH] == prev:
            link = row[HASH]
        else:
            head_half, tail_half = content_halves(*(row[i] for i in _CONTENT))
            link = link_hash(prev, seq, row[EVENT_ID], head_half, tail_half)
        rows.append((seq, *row[EVENT_ID:PREV_HASH], prev, link))
        prev = link
    loaded = _load_touched(db, rows)
    projection = _BatchFold(loaded)
    fresh_payloads = [payloads[n] for n in fresh] if payloads is not None else None
    for n, row in enumerate(rows):
        projection.apply(row, fresh_payloads[n] if fresh_payloads is not None else None)
    writes: list[Write] = [("events", rows)]
    writes += _upserts("task", sql.TASK_KEY, projection.tasks, loaded.tasks, task_values)
    writes += _policy_writes(projection, loaded.winners)
    return rows, writes


class _BatchFold(Projection):
    """A batch folded over the projection rows it touches (trusted: every row was checked
    before it came), keeping each new winner's row and decoded payload, so its policy row is
    made without decoding it again."""

    def __init__(self, loaded: _Loaded) -> None:
        super().__init__(None, loaded.tasks, loaded.key_states, compact=True)
        self.trusted = True
        self.winners.update(loaded.winners)
        self.withdrawn.update(loaded.withdrawn)
        self.won: dict[PolicyKey, tuple[EventRow, Mapping[str, Any], str]] = {}

    def _won(self, key: PolicyKey, row: EventRow, payload: Mapping[str, Any], info_json: str) -> None:
        self.won[key] = (row, payload, info_json)

    def _retired(self, key: PolicyKey) -> None:
        self.won.pop(key, None)


_CONTENT = (KIND, SOC_VERSION, REPO_KEY, TASK_ID, OP_NAME, OP_TYPE, RECORDED_AT, ORIGIN, PAYLOAD)
"""The columns an event's id and link are computed over, in :func:`content_halves`' order."""


def run_writes(db: Db, writes: Sequence[Write]) -> None:
    """Run each statement with its rows (a bare table name: insert the rows whole)."""
    for statement, rows in writes:
        if " " in statement:
            db.run_many(statement, rows)
        else:
            db.insert_rows(statement, rows)


def _policy_writes(fold: _BatchFold, before: dict[PolicyKey, PolicyRef]) -> list[Write]:
    """The policy rows a batch changed: each new winner is an event of the batch, whose policy
    row is made only now (the losers never make one)."""
    inserts, updates = [], []
    gone = [key for key in before if key not in fold.winners]  # withdrawn in this batch
    for key, ref in fold.winners.items():
        held = before.get(key)
        if held == ref:
            continue
        row, payload, info_json = fold.won[key]
        values = policy_row_of(row, payload, key[2], info_json)
        if held is None:
            inserts.append(values)
        else:
            updates.append(sql.update_params("policy", sql.POLICY_KEY, values))
    return [(sql.DELETE_POLICY, gone), (sql.insert("policy"), inserts),
            (sql.update("policy", sql.POLICY_KEY), updates)]


def _upserts(table: str, key: tuple[str, ...], new: dict[Any, T], old: dict[Any, T],
             to_row: Callable[[T], tuple[Any, ...]]) -> list[Write]:
    """The inserts of the entries of ``new`` that ``old`` lacks and the updates of those that
    changed, each one ``executemany``."""
    inserts = [to_row(value) for name, value in new.items() if name not in old]
    updates = [sql.update_params(table, key, to_row(value)) for name, value in new.items()
               if name in old and old[name] != value]
    return [(sql.insert(table), inserts), (sql.update(table, key), updates)]


def present_ids(db: Db, ids: Sequence[str]) -> set[str]:
    """The ids among ``ids`` the log holds, in one query per chunk (nothing decoded)."""
    present: set[str] = set()
    for part in chunks(ids, sql.CHUNK):
        statement = f"SELECT event_id FROM events WHERE event_id IN ({sql.marks(len(part))})"
        present.update(row[0] for row in db.rows(statement, part))
    return present


def _load_touched(db: Db, rows: Sequence[EventRow]) -> _Loaded:
    """The task rows, key states and policies a batch touches, read in a few queries."""
    loaded = _Loaded()
    for part in chunks(sorted({row[TASK_ID] for row in rows}), sql.CHUNK):
        for found in db.rows(sql.select_tasks(f"task_id IN ({sql.marks(len(part))})"), part):
            task = values_to_task(found)
            loaded.tasks[task.task_id] = task
    touched: dict[str, set[str]] = {}
    for row in rows:
        known = loaded.tasks.get(row[TASK_ID])
        if row[REPO_KEY] is not None and known is not None and not known.finished:
            touched.setdefault(row[TASK_ID], set()).add(row[REPO_KEY])
    kinds = sql.marks(len(_OUTCOMES))
    for task_id, wanted in touched.items():
        states = loaded.key_states.setdefault(task_id, {})
        for part in chunks(sorted(wanted), sql.CHUNK):
            statement = (f"SELECT repo_key, kind FROM events WHERE task_id = ? AND repo_key IN "
                         f"({sql.marks(len(part))}) AND kind IN ({kinds}) ORDER BY seq")
            for key, kind in db.rows(statement, (task_id, *part, *_OUTCOMES)):
                states[key] = kind
    keys = sorted({row[REPO_KEY] for row in rows if row[KIND] in _POLICY_TOUCHING and row[REPO_KEY]})
    socs = sorted({row[SOC_VERSION] for row in rows})
    if keys and (any(row[KIND] == _WITHDRAWN for row in rows) or db.one(sql.ANY_WITHDRAWAL)):
        loaded.withdrawn = withdrawals(db, socs, keys)
    for part in chunks(keys, sql.CHUNK):
        statement = (f"SELECT soc_version, repo_key, info_digest, best_us, recorded_at, event_id, "
                     f"seq FROM policy WHERE soc_version IN ({sql.marks(len(socs))}) AND "
                     f"repo_key IN ({sql.marks(len(part))})")
        for soc, key, digest, best_us, recorded_at, event_id, seq in db.rows(statement,
                                                                             (*socs, *part)):
            loaded.winners[(soc, key, digest)] = (standing(float(best_us), recorded_at, event_id),
                                                  seq)
    return loaded


def withdrawals(db: Db, socs: Sequence[str], keys: Sequence[str]) -> dict[PolicyKey, tuple[str, int]]:
    """The latest withdrawal the log holds of each key of ``keys`` on ``socs`` (read from the
    log through its repo_key index, as key states are: withdrawals are few, and a projection
    table of them would be one more thing to rebuild and verify)."""
    fold = Projection(compact=True)
    for part in chunks(keys, sql.CHUNK):
        statement = sql.select_events(f"kind = ? AND soc_version IN ({sql.marks(len(socs))}) AND "
                                      f"repo_key IN ({sql.marks(len(part))})")
        for row in db.rows(statement, (_WITHDRAWN, *socs, *part)):
            fold.offer_withdrawal(row)
    return fold.withdrawn


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
