"""The read path's queries of the projections and the log, each one statement (or one per
chunk of keys), rows turned into the domain's values."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from tunebank.bank.events import StoredEvent, decode_payload
from tunebank.bank.projection import Policy, PolicyKey
from tunebank.bank.store.driver import Db, Row, chunks
from tunebank.bank.store.results import PolicyFilter
from tunebank.bank.store.rows import values_to_event, values_to_policy, values_to_task
from tunebank.bank.store.schema import statements as sql
from tunebank.bank.tasks import TaskView

_POLICY_FIELDS = ("soc_version", "op_type", "repo_key", "backend", "cost_model_version")


def tasks(db: Db) -> list[TaskView]:
    """Every task, oldest first."""
    return [values_to_task(row) for row in db.rows(sql.select_tasks() + " ORDER BY first_seq")]


def tasks_by_prefix(db: Db, prefix: str) -> list[TaskView]:
    """The tasks whose id starts with ``prefix`` (``%`` and ``_`` in it are literal)."""
    escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    rows = db.rows(sql.select_tasks("task_id LIKE ? ESCAPE '\\'"), (escaped + "%",))
    return [values_to_task(row) for row in rows if str(row[0]).startswith(prefix)]


def policies(db: Db, where: PolicyFilter) -> list[Policy]:
    """The current policies matching ``where``, ordered by chip, op type and key."""
    names = [name for name in _POLICY_FIELDS if getattr(where, name) is not None]
    statement = sql.select_policies(" AND ".join(f"{name} = ?" for name in names))
    statement += " ORDER BY soc_version, op_type, repo_key"
    rows = db.rows(statement, tuple(getattr(where, name) for name in names))
    return [values_to_policy(row) for row in rows]


def policy_times(db: Db, soc_version: str | None) -> Iterator[tuple[str, str, str | None, float]]:
    """(soc_version, repo_key, op_type, best_us) of every current policy, streamed."""
    where = " WHERE soc_version = ?" if soc_version is not None else ""
    rows = db.stream(f"SELECT soc_version, repo_key, op_type, best_us FROM policy{where}",
                     (soc_version,) if soc_version is not None else ())
    for soc, key, op_type, best_us in rows:
        yield soc, key, op_type, float(best_us)


def policy_rows_for_keys(db: Db, soc_version: str, repo_keys: Sequence[str]) -> list[Row]:
    """The policy rows of ``soc_version`` whose repo_key is in ``repo_keys``, undecoded."""
    found: list[Row] = []
    for part in chunks(sorted(set(repo_keys)), sql.CHUNK):
        statement = sql.select_policies(f"soc_version = ? AND repo_key IN ({sql.marks(len(part))})")
        found.extend(db.rows(statement, (soc_version, *part)))
    return found


def outcomes_for_keys(db: Db, soc_version: str, kind: str,
                      repo_keys: Sequence[str]) -> list[StoredEvent]:
    """Every ``kind`` event of ``soc_version`` whose repo_key is in ``repo_keys``."""
    found: list[StoredEvent] = []
    for part in chunks(sorted(set(repo_keys)), sql.CHUNK):
        statement = sql.select_events(
            f"soc_version = ? AND kind = ? AND repo_key IN ({sql.marks(len(part))})")
        found.extend(values_to_event(row) for row in db.rows(statement, (soc_version, kind, *part)))
    return found


def events_by_id(db: Db, event_ids: Sequence[str]) -> list[StoredEvent]:
    """The stored events with these ids, in seq order."""
    found: list[StoredEvent] = []
    for part in chunks(sorted(set(event_ids)), sql.CHUNK):
        statement = sql.select_events(f"event_id IN ({sql.marks(len(part))})")
        found.extend(values_to_event(row) for row in db.rows(statement, part))
    return sorted(found, key=lambda stored: stored.seq)


def policy_payloads(db: Db) -> Iterator[tuple[str, str, str | None, dict[str, Any]]]:
    """(soc_version, repo_key, op_type, payload) of every policy's winning event, in seq order,
    in one statement, streamed. Only the payload is decoded: an export of the whole bank reads
    this, and building and checking 100,000 StoredEvents cost it more than the rest."""
    rows = db.stream("SELECT soc_version, repo_key, op_type, payload FROM events "
                     "WHERE seq IN (SELECT seq FROM policy) ORDER BY seq")
    for soc, key, op_type, payload in rows:
        yield soc, key, op_type, decode_payload(payload)


def policy_refs(db: Db) -> dict[PolicyKey, tuple[str, float]]:
    """The event_id and best time of every stored policy, by key."""
    rows = db.stream("SELECT soc_version, repo_key, info_digest, event_id, best_us FROM policy")
    return {(soc, key, digest): (event_id, float(best_us))
            for soc, key, digest, event_id, best_us in rows}
