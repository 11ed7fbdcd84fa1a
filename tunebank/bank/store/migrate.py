"""Schema versions: ``bank upgrade`` brings an older bank to this tunebank's.

A bank records the schema version it was written with (:data:`bank.store.schema.version.SCHEMA_VERSION`);
opening one of another version is refused by :func:`bank.store.schema.version.check_version`. An upgrade
runs in one write transaction: it changes what each step names, re-derives the projections
from the log when a step changed them, and records the new version. No event is ever touched
(versions 4 and 5 change indexes; 6 adds a policy column and derives the policies again).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tunebank.bank.store.base import schema_version_in
from tunebank.bank.store.driver import Db
from tunebank.bank.store.replay import derive_projection
from tunebank.bank.store.schema import statements as sql
from tunebank.bank.store.schema.ddl import create_index, create_table, drop_table, index_named
from tunebank.bank.store.schema.tables import EventRow, PolicyRow, TaskRow
from tunebank.bank.store.schema.version import SCHEMA_VERSION, SchemaVersionError, check_version

if TYPE_CHECKING:
    from tunebank.bank.store.base import EventStore

__all__ = ["STEPS", "SchemaVersionError", "UpgradeReport", "upgrade"]


def _rederive(db: Db) -> None:
    """Replace the projection tables with this version's and derive them from the log."""
    db.run("DROP TABLE IF EXISTS task_key")
    for model in (PolicyRow, TaskRow):
        drop_table(db, model)
        create_table(db, model)


def _nothing_else(db: Db) -> None:
    """Version 3 only records the schema version in bank_meta, which every upgrade does."""


def _key_states_from_the_log(db: Db) -> None:
    """Version 4 drops the task_key projection and indexes the log on (task_id, repo_key)."""
    db.run("DROP TABLE IF EXISTS task_key")
    db.run("DROP INDEX IF EXISTS ix_events_task_id")
    create_index(db, index_named(EventRow, "ix_events_task_key"))


def _policy_by_seq(db: Db) -> None:
    """Version 5 indexes the policy table on seq, the order verify reads it in."""
    create_index(db, index_named(PolicyRow, "ix_policy_seq"))


@dataclass(frozen=True)
class Step:
    """The change from ``version`` to ``version + 1``."""

    version: int
    change: Callable[[Db], None]
    rederive: bool  # whether the projections must be derived again from the log
    what: str


STEPS = (
    Step(1, _rederive, True, "policy gains cost_model_version; projections derived again"),
    Step(2, _nothing_else, False, "the schema version is kept in bank_meta"),
    Step(3, _key_states_from_the_log, False,
         "task_key dropped: key states are read from the log, indexed on (task_id, repo_key)"),
    Step(4, _policy_by_seq, False, "policy indexed on seq, the order verify reads it in"),
    Step(5, _rederive, True, "policy gains recorded_at: among entries without a time the newer "
                             "wins; projections derived again"),
    Step(6, _rederive, True, "policy gains file_op (an entry's bank file's operator, where it "
                             "is not the entry's own) and task withdrawn_num: withdrawals may be "
                             "recorded; projections derived again"),
)


@dataclass(frozen=True)
class UpgradeReport:
    """What ``bank upgrade`` did."""

    from_version: int
    to_version: int
    steps: tuple[str, ...]
    last_seq: int

    def as_json(self) -> dict[str, object]:
        return {"from_version": self.from_version, "to_version": self.to_version,
                "steps": list(self.steps), "events": self.last_seq}


def upgrade(store: EventStore, where: str) -> UpgradeReport:
    """Bring the bank to :data:`SCHEMA_VERSION`, all in one write transaction.

    Raises:
        SchemaVersionError: the bank is newer than this tunebank.
        BankError: the log cannot be replayed into the new projections (nothing is changed).
    """
    def work(db: Db) -> UpgradeReport:
        found = schema_version_in(db)  # under the write lock: one upgrade at a time
        if found > SCHEMA_VERSION:
            check_version(found, where)
        steps = [step for step in STEPS if step.version >= found]
        for step in steps:
            step.change(db)
        head = int(db.scalar(sql.READ_CHECKPOINT, (sql.CHECKPOINT,)) or 0)
        if any(step.rederive for step in steps):
            head = derive_projection(db)
        db.run("UPDATE checkpoint SET schema_version = ?", (SCHEMA_VERSION,))
        if found < SCHEMA_VERSION:
            _set_meta(db, "schema_version", str(SCHEMA_VERSION))
        return UpgradeReport(found, SCHEMA_VERSION, tuple(step.what for step in steps), head)

    return store.write_transaction(work)


def _set_meta(db: Db, name: str, value: str) -> None:
    if db.one(sql.READ_META, (name,)) is None:
        db.run(sql.insert("bank_meta"), (name, value))
    else:
        db.run("UPDATE bank_meta SET value = ? WHERE name = ?", (value, name))
