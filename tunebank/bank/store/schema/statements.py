"""The statements the store sends to the driver, written by hand, and the columns they name.

The schema itself is defined once, by the SQLModel tables of :mod:`bank.store.schema.tables`, which are
imported only to create or upgrade a bank. Everything here is plain text and tuples so that a
command that only reads starts without SQLAlchemy; ``tests/bank/test_statements.py`` holds the
columns, types and indexes named here to those tables, so the two cannot drift apart.

Every statement uses ``?`` placeholders; the PostgreSQL recorder turns them into psycopg's
``%s`` (:func:`bank.store.driver.to_format_style`).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

EVENT_COLUMNS = ("seq", "event_id", "kind", "soc_version", "repo_key", "task_id", "op_name",
                 "op_type", "recorded_at", "origin", "payload", "prev_hash", "hash")
POLICY_COLUMNS = ("soc_version", "repo_key", "info_digest", "op_type", "info_dict", "knowledge",
                  "best_us", "seq", "task_id", "event_id", "origin", "tune_mode", "backend",
                  "cost_model_version", "recorded_at", "file_op")
TASK_COLUMNS = ("task_id", "soc_version", "origin", "started_at", "first_seq", "last_seq",
                "tuning_name", "model_name", "model_hash", "job_type", "search_mode", "status",
                "finished_at", "tuning_time_s", "model_baseline_ms", "model_result_ms",
                "failed_operators", "add_num", "hit_num", "update_num", "reserved_num",
                "unsatisfied_num", "open_hits", "withdrawn_num")
CHECKPOINT_COLUMNS = ("name", "last_seq", "schema_version")
META_COLUMNS = ("name", "value")
TABLES = {"events": EVENT_COLUMNS, "policy": POLICY_COLUMNS, "task": TASK_COLUMNS,
          "checkpoint": CHECKPOINT_COLUMNS, "bank_meta": META_COLUMNS}
"""Every table of a bank with its columns, in the order the tables define them."""

INDEXES_RELIED_ON = {
    "ix_policy_seq": ("policy", ("seq",)),
    "ix_events_task_key": ("events", ("task_id", "repo_key")),
    "ix_events_repo_key": ("events", ("repo_key",)),
}
"""The indexes the statements below count on (verify pages the policy table by seq; an append
reads the key states of a task; lookups read a key's history)."""

POLICY_KEY = ("soc_version", "repo_key", "info_digest")
POLICY_SEQ = POLICY_COLUMNS.index("seq")
"""Where a policy row (:data:`POLICY_COLUMNS`) holds its winning event's seq; its key is its
first three columns (:data:`POLICY_KEY`)."""
TASK_KEY = ("task_id",)
CHECKPOINT = "projections"
"""The name of the checkpoint row the projections keep."""

CHUNK = 500
"""Values per ``IN (...)`` list: well under every database's parameter limit."""


def marks(count: int) -> str:
    """``count`` placeholders, comma-separated."""
    return ",".join("?" * count)


@cache
def insert(table: str, columns: tuple[str, ...] | None = None) -> str:
    """INSERT of one row of ``columns`` (by default every column of ``table``)."""
    names = columns or TABLES[table]
    return f"INSERT INTO {table} ({','.join(names)}) VALUES ({marks(len(names))})"


@cache
def update(table: str, key: tuple[str, ...]) -> str:
    """UPDATE of every column but ``key`` of the row ``key`` names; the parameters are the row's
    values in column order without the key, then the key's (:func:`update_params`)."""
    sets = ",".join(f"{name}=?" for name in TABLES[table] if name not in key)
    where = " AND ".join(f"{name}=?" for name in key)
    return f"UPDATE {table} SET {sets} WHERE {where}"


def update_params(table: str, key: tuple[str, ...], row: Sequence[object]) -> tuple[object, ...]:
    """The parameters of :func:`update` for one row of ``table``."""
    named = dict(zip(TABLES[table], row, strict=True))
    return (*(named[c] for c in TABLES[table] if c not in key), *(named[c] for c in key))


def select_events(where: str = "", *, limit: bool = False) -> str:
    """SELECT of every events column in seq order, with an optional WHERE clause (and a LIMIT
    placeholder for keyset paging)."""
    clause = f" WHERE {where}" if where else ""
    tail = " LIMIT ?" if limit else ""
    return f"SELECT {','.join(EVENT_COLUMNS)} FROM events{clause} ORDER BY seq{tail}"


def select_policies(where: str = "") -> str:
    """SELECT of every policy column, with an optional WHERE clause."""
    clause = f" WHERE {where}" if where else ""
    return f"SELECT {','.join(POLICY_COLUMNS)} FROM policy{clause}"


def select_tasks(where: str = "") -> str:
    """SELECT of every task column, with an optional WHERE clause."""
    clause = f" WHERE {where}" if where else ""
    return f"SELECT {','.join(TASK_COLUMNS)} FROM task{clause}"


HEAD = "SELECT seq, hash FROM events ORDER BY seq DESC LIMIT 1"
READ_CHECKPOINT = "SELECT last_seq FROM checkpoint WHERE name = ?"
SET_CHECKPOINT = "UPDATE checkpoint SET last_seq = ? WHERE name = ?"
READ_META = "SELECT value FROM bank_meta WHERE name = ?"
DELETE_POLICY = "DELETE FROM policy WHERE soc_version = ? AND repo_key = ? AND info_digest = ?"
ANY_WITHDRAWAL = "SELECT 1 FROM events WHERE kind = 'withdrawn' LIMIT 1"
"""Whether the log holds any withdrawal (through the index on kind): most banks hold none, and
then an append reads none."""
