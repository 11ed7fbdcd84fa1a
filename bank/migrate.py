"""Schema versions: which banks this tunebank opens, and ``bank upgrade`` for older ones.

A bank records the schema version it was written with (:data:`bank.schema.SCHEMA_VERSION`).
Opening one of another version is an error that says what to do: an older bank is upgraded
explicitly, a newer one needs a newer tunebank. An upgrade runs in one write transaction: it
changes what each step names, re-derives the projections from the log when a step changed
them, and records the new version. No event is ever touched (versions 4 and 5 change indexes).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import Table, insert, update
from sqlmodel import Session, SQLModel, col

from bank.errors import BankError
from bank.schema import SCHEMA_VERSION, CheckpointRow, EventRow, MetaRow, PolicyRow, TaskRow

if TYPE_CHECKING:
    from bank.store import EventStore


class SchemaVersionError(BankError):
    """The bank was written with a schema version this tunebank does not open as it is."""


def check_version(store: EventStore, where: str) -> None:
    """Refuse a bank of another schema version, saying what to do about it.

    Raises:
        SchemaVersionError: the bank is older (run ``bank upgrade``) or newer than this tunebank.
    """
    found = store.schema_version()
    if found > SCHEMA_VERSION:
        raise SchemaVersionError(
            f"{where}: bank schema {found} is newer than this tunebank reads (up to "
            f"{SCHEMA_VERSION}); install a newer tunebank to use it")
    if found < SCHEMA_VERSION:
        raise SchemaVersionError(
            f"{where}: bank schema {found} is older than this tunebank's {SCHEMA_VERSION}; run "
            "`bank upgrade` on it first (the log is kept as it is)")


def _rederive(session: Session) -> None:
    """Replace the projection tables with this version's and derive them from the log."""
    tables = [_table(model) for model in (PolicyRow, TaskRow)]
    conn = session.connection()
    conn.exec_driver_sql("DROP TABLE IF EXISTS task_key")
    SQLModel.metadata.drop_all(conn, tables=tables)
    SQLModel.metadata.create_all(conn, tables=tables)


def _nothing_else(session: Session) -> None:
    """Version 3 only records the schema version in bank_meta, which every upgrade does."""


def _key_states_from_the_log(session: Session) -> None:
    """Version 4 drops the task_key projection and indexes the log on (task_id, repo_key)."""
    conn = session.connection()
    conn.exec_driver_sql("DROP TABLE IF EXISTS task_key")
    conn.exec_driver_sql("DROP INDEX IF EXISTS ix_events_task_id")
    for index in _table(EventRow).indexes:
        if index.name == "ix_events_task_key":
            index.create(conn, checkfirst=True)


def _policy_by_seq(session: Session) -> None:
    """Version 5 indexes the policy table on seq, the order verify reads it in."""
    conn = session.connection()
    for index in _table(PolicyRow).indexes:
        if index.name == "ix_policy_seq":
            index.create(conn, checkfirst=True)


@dataclass(frozen=True)
class Step:
    """The change from ``version`` to ``version + 1``."""

    version: int
    change: Callable[[Session], None]
    rederive: bool  # whether the projections must be derived again from the log
    what: str


STEPS = (
    Step(1, _rederive, True, "policy gains cost_model_version; projections derived again"),
    Step(2, _nothing_else, False, "the schema version is kept in bank_meta"),
    Step(3, _key_states_from_the_log, False,
         "task_key dropped: key states are read from the log, indexed on (task_id, repo_key)"),
    Step(4, _policy_by_seq, False, "policy indexed on seq, the order verify reads it in"),
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
    def work(session: Session) -> UpgradeReport:
        found = store.schema_version_in(session)  # under the write lock: one upgrade at a time
        if found > SCHEMA_VERSION:
            check_version(store, where)
        steps = [step for step in STEPS if step.version >= found]
        for step in steps:
            step.change(session)
        head = _head_seq(session)
        if any(step.rederive for step in steps):
            head = store.derive_projection(session)
        session.execute(update(CheckpointRow).values(schema_version=SCHEMA_VERSION))
        if found < SCHEMA_VERSION:
            _set_meta(session, "schema_version", str(SCHEMA_VERSION))
        return UpgradeReport(found, SCHEMA_VERSION, tuple(step.what for step in steps), head)

    return store.write_transaction(work)


def _set_meta(session: Session, name: str, value: str) -> None:
    if session.get(MetaRow, name) is None:
        session.execute(insert(MetaRow).values(name=name, value=value))
    else:
        session.execute(update(MetaRow).where(col(MetaRow.name) == name).values(value=value))


def _head_seq(session: Session) -> int:
    row = session.get(CheckpointRow, "projections")
    return row.last_seq if row else 0


def _table(model: type[SQLModel]) -> Table:
    table = model.__table__  # type: ignore[attr-defined]
    assert isinstance(table, Table)
    return table
