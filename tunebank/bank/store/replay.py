"""The replay path: the log read back oldest first, in keyset pages of seq, and the projections
derived again from it."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from tunebank.bank.errors import BankError
from tunebank.bank.events import check_row, row_payload
from tunebank.bank.projection import PolicyKey, Projection
from tunebank.bank.store.driver import Db, Row, chunks
from tunebank.bank.store.results import EventFilter
from tunebank.bank.store.rows import policy_row_of, task_values
from tunebank.bank.store.schema import statements as sql
from tunebank.bank.store.writes import bulk_job, set_checkpoint
from tunebank.bank.tasks import TaskView

PAGE = 2000
"""Events per page when the log is streamed."""


def event_pages(db: Db, where: EventFilter) -> Iterator[Row]:
    """The events rows ``where`` selects, oldest first, read in keyset pages of seq."""
    clauses: list[str] = ["seq > ?"]
    params: list[Any] = []
    if where.until_seq is not None:
        clauses.append("seq <= ?")
        params.append(where.until_seq)
    if where.until_time is not None:
        clauses.append("recorded_at <= ?")
        params.append(where.until_time)
    if where.kinds is not None:
        clauses.append(f"kind IN ({sql.marks(len(where.kinds))})")
        params.extend(str(kind) for kind in where.kinds)
    for name in ("repo_key", "op_name", "task_id", "soc_version"):
        value = getattr(where, name)
        if value is not None:
            clauses.append(f"{name} = ?")
            params.append(value)
    if where.op_type is not None:  # the entry's own op type, or that of its bank file
        clauses.append("(op_type = ? OR repo_key IN (SELECT repo_key FROM policy WHERE file_op = ?))")
        params += [where.op_type, where.op_type]
    statement = sql.select_events(" AND ".join(clauses), limit=True)
    after = where.since_seq
    while True:
        rows = db.rows(statement, (after, *params, PAGE))
        yield from rows
        if len(rows) < PAGE:
            return
        after = rows[-1][0]


def policy_rows_at(db: Db, seqs: Sequence[int]) -> list[Row]:
    """The policy rows the add or update events at ``seqs`` make (an event whose row cannot be
    read, or whose payload makes no policy, makes none)."""
    made: list[Row] = []
    for part in chunks(sorted(set(seqs)), sql.CHUNK):
        for row in db.rows(sql.select_events(f"seq IN ({sql.marks(len(part))})"), part):
            try:
                check_row(row)
                made.append(policy_row_of(row, row_payload(row)))
            except (BankError, ValueError, KeyError, TypeError):
                continue
    return made


def stored_policy_rows(db: Db) -> Iterator[Row]:
    """Every stored policy row, in pages of the seq index, for verify to compare with a
    replay."""
    page = sql.select_policies("seq > ?") + " ORDER BY seq LIMIT ?"
    after = 0
    while True:
        rows = db.rows(page, (after, PAGE))
        if not rows:
            return
        yield from rows
        after = rows[-1][sql.POLICY_SEQ]
        if len(rows) < PAGE:
            return


def derive_projection(db: Db) -> int:
    """Within a write transaction: fold the whole log into a fresh compact projection, replace
    the projection tables with it and return the seq it reflects. Memory follows the tasks and
    policy keys, not the log: winning policies are read back in pages.

    Raises:
        OutcomeRuleError: the log breaks the outcome rules.
        EventValidationError, ValueError: a stored row is not a valid event.
    """
    projection = Projection(compact=True)
    last = 0
    with bulk_job():
        for row in event_pages(db, EventFilter()):
            check_row(row)
            projection.apply(row)
            last = row[0]
    db.run("DELETE FROM policy")
    seqs = [ref[1] for ref in projection.winners.values()]
    return replace_projection(db, projection.tasks, [], seqs, last)


def replace_projection(db: Db, tasks: dict[str, TaskView], unmade: Sequence[PolicyKey],
                       unstored: Sequence[int], last: int) -> int:
    """Within a write transaction: make the stored projections a replay's: every task row
    replaced by ``tasks``, the policy rows of ``unmade`` keys deleted, and the policies of the
    winning events at ``unstored`` seqs written in their place; return ``last``, the seq the
    projections now reflect."""
    db.run("DELETE FROM task")
    db.insert_rows("task", [task_values(task) for task in tasks.values()])
    db.run_many(sql.DELETE_POLICY, unmade)
    seqs = sorted(unstored)
    for start in range(0, len(seqs), PAGE):
        db.insert_rows("policy", policy_rows_at(db, seqs[start:start + PAGE]))
    set_checkpoint(db, last)
    return last
