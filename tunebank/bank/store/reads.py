"""The read path: the queries of the projections and the log, each run in a read transaction
of the store it is given (joining a :meth:`~bank.store.base.EventStore.snapshot` if one is
open), rows turned into the domain's values. These are functions rather than recorder methods so
that the recorder contract (:class:`~bank.store.base.EventStore`) stays what differs between
databases, and :class:`bank.Bank` is the one surface that gives them meaning."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from tunebank.bank.events import EventKind, StoredEvent, decode_payload
from tunebank.bank.projection import Policy, PolicyKey
from tunebank.bank.store import replay, writes
from tunebank.bank.store.driver import Row, chunks
from tunebank.bank.store.results import EventFilter, PolicyFilter
from tunebank.bank.store.rows import values_to_event, values_to_policy, values_to_task
from tunebank.bank.store.schema import statements as sql
from tunebank.bank.tasks import TaskView

if TYPE_CHECKING:
    from tunebank.bank.store.base import EventStore

_POLICY_FIELDS = ("soc_version", "op_type", "repo_key", "backend", "cost_model_version")


# -- the bank itself -------------------------------------------------------------------------

def meta(store: EventStore, name: str) -> str | None:
    """One fact about the bank itself (``bank_id``), or ``None``."""
    with store.transaction() as db:
        value = db.scalar(sql.READ_META, (name,))
        return None if value is None else str(value)


def head(store: EventStore) -> tuple[int, str]:
    """The last seq and its hash (``0`` and the genesis hash for an empty log)."""
    with store.transaction() as db:
        return writes.head(db)


def checkpoint(store: EventStore) -> int:
    """The last seq the stored projections reflect."""
    with store.transaction() as db:
        value = db.scalar(sql.READ_CHECKPOINT, (sql.CHECKPOINT,))
        return int(value) if value is not None else 0


def hash_at(store: EventStore, seq: int) -> str | None:
    """The chain hash of the event at ``seq``, or ``None`` if the log has no such seq."""
    with store.transaction() as db:
        value = db.scalar("SELECT hash FROM events WHERE seq = ?", (seq,))
        return None if value is None else str(value)


def seq_of_hash(store: EventStore, chain_hash: str) -> int | None:
    """The seq of the event whose chain hash is ``chain_hash``, or ``None`` (a scan: the hash
    column has no index, and an audit asks this once)."""
    with store.transaction() as db:
        value = db.scalar("SELECT seq FROM events WHERE hash = ?", (chain_hash,))
        return None if value is None else int(value)


# -- the log ---------------------------------------------------------------------------------

def event_rows(store: EventStore, where: EventFilter | None = None) -> Iterator[Row]:
    """The stored rows of the events ``where`` selects (columns in
    :data:`bank.store.schema.statements.EVENT_COLUMNS` order), oldest first, in keyset pages
    of seq, so memory does not grow with the log."""
    with store.transaction() as db:
        yield from replay.event_pages(db, where or EventFilter())


def events(store: EventStore, where: EventFilter | None = None) -> Iterator[StoredEvent]:
    """:func:`event_rows` as events.

    Raises:
        EventValidationError, ValueError: a stored row is not a valid event.
    """
    for row in event_rows(store, where):
        yield values_to_event(row)


def present_ids(store: EventStore, event_ids: Sequence[str]) -> set[str]:
    """The ids among ``event_ids`` the log holds (nothing decoded)."""
    with store.transaction() as db:
        return writes.present_ids(db, event_ids)


def events_by_id(store: EventStore, event_ids: Sequence[str]) -> list[StoredEvent]:
    """The stored events with these ids, in seq order."""
    found: list[StoredEvent] = []
    with store.transaction() as db:
        for part in chunks(sorted(set(event_ids)), sql.CHUNK):
            statement = sql.select_events(f"event_id IN ({sql.marks(len(part))})")
            found.extend(values_to_event(row) for row in db.rows(statement, part))
    return sorted(found, key=lambda stored: stored.seq)


def outcomes_for_keys(store: EventStore, soc_version: str, kind: str,
                      repo_keys: Sequence[str]) -> list[StoredEvent]:
    """Every ``kind`` event of ``soc_version`` whose repo_key is in ``repo_keys``."""
    found: list[StoredEvent] = []
    with store.transaction() as db:
        for part in chunks(sorted(set(repo_keys)), sql.CHUNK):
            statement = sql.select_events(
                f"soc_version = ? AND kind = ? AND repo_key IN ({sql.marks(len(part))})")
            rows = db.rows(statement, (soc_version, str(EventKind(kind)), *part))
            found.extend(values_to_event(row) for row in rows)
    return found


# -- tasks -----------------------------------------------------------------------------------

def tasks(store: EventStore) -> list[TaskView]:
    """Every task, oldest first."""
    with store.transaction() as db:
        return [values_to_task(row) for row in db.rows(sql.select_tasks() + " ORDER BY first_seq")]


def tasks_by_prefix(store: EventStore, prefix: str) -> list[TaskView]:
    """The tasks whose id starts with ``prefix`` (``%`` and ``_`` in it are literal)."""
    escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    with store.transaction() as db:
        rows = db.rows(sql.select_tasks("task_id LIKE ? ESCAPE '\\'"), (escaped + "%",))
        return [values_to_task(row) for row in rows if str(row[0]).startswith(prefix)]


# -- policies --------------------------------------------------------------------------------

def policies(store: EventStore, where: PolicyFilter | None = None) -> list[Policy]:
    """The current policies matching ``where``, ordered by chip, op type and key."""
    where = where or PolicyFilter()
    names = [name for name in _POLICY_FIELDS if getattr(where, name) is not None]
    # an op type matches the entry's own, or that of the bank file it was read from (issue 41)
    clauses = ["(op_type = ? OR file_op = ?)" if name == "op_type" else f"{name} = ?"
               for name in names]
    params = [value for name in names
              for value in ((where.op_type,) * 2 if name == "op_type" else (getattr(where, name),))]
    statement = sql.select_policies(" AND ".join(clauses))
    statement += " ORDER BY soc_version, op_type, repo_key"
    with store.transaction() as db:
        rows = db.rows(statement, tuple(params))
    return [values_to_policy(row) for row in rows]


def policy_count(store: EventStore) -> int:
    """How many policies the projection holds, counted by the database."""
    with store.transaction() as db:
        return int(db.scalar("SELECT COUNT(*) FROM policy"))


def policy_times(store: EventStore,
                 soc_version: str | None = None) -> Iterator[tuple[str, str, str | None, float]]:
    """(soc_version, repo_key, op_type, best_us) of every current policy (of one chip),
    streamed, nothing else decoded: what a report of a large bank needs, without building a
    Policy per key."""
    where = " WHERE soc_version = ?" if soc_version is not None else ""
    with store.transaction() as db:
        rows = db.stream(f"SELECT soc_version, repo_key, op_type, best_us FROM policy{where}",
                         (soc_version,) if soc_version is not None else ())
        for soc, key, op_type, best_us in rows:
            yield soc, key, op_type, float(best_us)


def untimed_policies(store: EventStore
                     ) -> Iterator[tuple[str, str, str | None, str | None, str, str]]:
    """(soc_version, repo_key, op_type, file_op, event_id, info_dict as canonical JSON) of every
    current policy without a time (a bank tree's entries), streamed."""
    with store.transaction() as db:
        rows = db.stream("SELECT soc_version, repo_key, op_type, file_op, event_id, info_dict "
                         "FROM policy WHERE best_us > ?", (1e308,))
        yield from rows


def chip_events_after(store: EventStore, soc_version: str, seq: int) -> bool:
    """Whether the log holds an event of ``soc_version`` after ``seq`` (a range of the seq key,
    read until the first such event)."""
    with store.transaction() as db:
        return db.one("SELECT 1 FROM events WHERE seq > ? AND soc_version = ? LIMIT 1",
                      (seq, soc_version)) is not None


def op_types(store: EventStore) -> list[str]:
    """Every operator type the current policies name, their own and their bank files', sorted."""
    with store.transaction() as db:
        rows = db.rows("SELECT op_type FROM policy WHERE op_type IS NOT NULL UNION "
                       "SELECT file_op FROM policy WHERE file_op IS NOT NULL")
    return sorted(str(row[0]) for row in rows)


def policy_rows_for_keys(store: EventStore, soc_version: str, repo_keys: Sequence[str]) -> list[Row]:
    """The stored policy rows of ``soc_version`` whose repo_key is in ``repo_keys``
    (:data:`bank.store.schema.statements.POLICY_COLUMNS` order, the JSON columns not decoded)."""
    found: list[Row] = []
    with store.transaction() as db:
        for part in chunks(sorted(set(repo_keys)), sql.CHUNK):
            statement = sql.select_policies(
                f"soc_version = ? AND repo_key IN ({sql.marks(len(part))})")
            found.extend(db.rows(statement, (soc_version, *part)))
    return found


def policies_by_key(store: EventStore, keys: Sequence[PolicyKey]) -> dict[PolicyKey, Policy]:
    """The stored policies of ``keys`` (those that exist)."""
    wanted = set(keys)
    by_soc: dict[str, list[str]] = {}
    for soc, key, _ in wanted:
        by_soc.setdefault(soc, []).append(key)
    found: dict[PolicyKey, Policy] = {}
    for soc, repo_keys in by_soc.items():
        for row in policy_rows_for_keys(store, soc, repo_keys):
            policy = values_to_policy(row)
            if policy.key in wanted:
                found[policy.key] = policy
    return found


def policy_refs(store: EventStore) -> dict[PolicyKey, tuple[str, float]]:
    """The event_id and best time of every stored policy, by key: what a merge compares,
    without decoding the policies themselves."""
    with store.transaction() as db:
        rows = db.stream("SELECT soc_version, repo_key, info_digest, event_id, best_us FROM policy")
        return {(soc, key, digest): (event_id, float(best_us))
                for soc, key, digest, event_id, best_us in rows}


def policy_payloads(store: EventStore) -> Iterator[tuple[str, str, str | None, dict[str, Any]]]:
    """(soc_version, repo_key, op_type, payload) of every policy's winning event, in seq order,
    in one statement, streamed. Only the payload is decoded: an export of the whole bank reads
    this, and building and checking 100,000 StoredEvents cost it more than the rest."""
    with store.transaction() as db:
        rows = db.stream("SELECT soc_version, repo_key, op_type, payload FROM events "
                         "WHERE seq IN (SELECT seq FROM policy) ORDER BY seq")
        for soc, key, op_type, payload in rows:
            yield soc, key, op_type, decode_payload(payload)


def policy_rows(store: EventStore) -> Iterator[Row]:
    """Every stored policy row (columns in :data:`bank.store.schema.statements.POLICY_COLUMNS`
    order), streamed in pages of seq, for ``verify`` to compare with a replay."""
    with store.transaction() as db:
        yield from replay.stored_policy_rows(db)
