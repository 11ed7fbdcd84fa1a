"""The store's hand-written SQL held to the SQLModel tables that define the schema: the same
columns in the same order, values of the types the tables declare, the indexes the statements
count on, and every statement the store sends accepted by a database made from those tables."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import oc
from tunebank.bank import Bank
from tunebank.bank.store import reads
from tunebank.bank.store.driver import Db
from tunebank.bank.store.schema import statements
from tunebank.bank.store.schema.creation import ddl_for
from tunebank.bank.store.schema.ddl import MODELS, render, table_of
from tunebank.bank.store.schema.tables import EventRow, PolicyRow, TaskRow

_OF_TABLE = {table_of(model).name: model for model in MODELS}


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql"])
def test_a_new_bank_is_made_with_the_ddl_the_tables_render(dialect: str) -> None:
    """creation.py keeps the DDL as text so that making a bank needs no SQLModel; a column or
    index changed in tables.py without it fails here."""
    assert ddl_for(dialect) == render(dialect)


def _busy_bank(path: Path) -> None:
    """A bank that has been through every path: appends of each kind, a stream, queries,
    lookups, verify, rebuild."""
    with Bank.open(str(path), create=True) as bank:
        task = bank.start_task("Ascend310", tuning_name="t", model_name="m")
        bank.record(task, [oc("add", "1"), oc("unsatisfied", "2", reason="no_gain")])
        bank.finish_task(task)
        again = bank.start_task("Ascend310", tuning_name="t2")
        bank.record(again, [oc("hit", "1"), oc("update", "1", after=1.0)])
        bank.finish_task(again)
        bank.lookup("Ascend310", [("1", {"op": "MatMul", "shape": "1"})])
        bank.searched_without_gain("Ascend310", [("2", {"op": "MatMul", "shape": "2"})])
        bank.task(task[:6])
        bank.policies()
        bank.history(repo_key="1")
        list(bank.policy_times())
        reads.policy_refs(bank.store)
        reads.events_by_id(bank.store, [e.event_id for e in bank.events()])
        assert bank.verify().ok
        bank.rebuild()


@pytest.fixture
def sent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[set[str]]:
    """Every statement the store sent through :class:`Db` while a bank was made and used."""
    seen: set[str] = set()
    run, run_many = Db.run, Db.run_many

    def record_run(self: Db, statement: str, params: Any = ()) -> Any:
        seen.add(statement)
        return run(self, statement, params)

    def record_many(self: Db, statement: str, rows: Any) -> None:
        seen.add(statement)
        run_many(self, statement, rows)

    monkeypatch.setattr(Db, "run", record_run)
    monkeypatch.setattr(Db, "run_many", record_many)
    _busy_bank(tmp_path / "busy.db")
    yield seen


def test_the_columns_are_the_tables_columns_in_order() -> None:
    assert set(statements.TABLES) == set(_OF_TABLE)
    for name, columns in statements.TABLES.items():
        assert columns == tuple(column.name for column in table_of(_OF_TABLE[name]).columns), name


def test_the_indexes_relied_on_are_declared_by_the_tables() -> None:
    for name, (table, columns) in statements.INDEXES_RELIED_ON.items():
        declared = {index.name: tuple(c.name for c in index.columns)
                    for index in table_of(_OF_TABLE[table]).indexes}
        assert declared.get(name) == columns, (name, declared)


def test_stored_values_have_the_declared_types(tmp_path: Path) -> None:
    path = tmp_path / "bank.db"
    _busy_bank(path)
    with sqlite3.connect(path) as conn:
        for model in (EventRow, PolicyRow, TaskRow):
            table = table_of(model)
            rows = conn.execute(f"SELECT * FROM {table.name}").fetchall()
            assert rows, table.name
            for row in rows:
                for column, value in zip(table.columns, row, strict=True):
                    if value is None:
                        assert column.nullable, (table.name, column.name)
                    else:
                        assert isinstance(value, column.type.python_type), (table.name, column.name, value)


def test_every_statement_sent_is_accepted_by_the_tables_schema(sent: set[str], tmp_path: Path) -> None:
    """A typo'd column, a dropped table or a column the tables no longer have fails here, on a
    database made from the SQLModel tables by SQLAlchemy itself (not by the store)."""
    from sqlalchemy import create_engine
    from sqlmodel import SQLModel

    engine = create_engine(f"sqlite:///{tmp_path / 'schema.db'}")
    SQLModel.metadata.create_all(engine)
    engine.dispose()
    conn = sqlite3.connect(tmp_path / "schema.db")
    checked = 0
    for statement in sorted(sent):
        if statement.split()[0].upper() in ("BEGIN", "COMMIT", "ROLLBACK", "PRAGMA", "CREATE",
                                            "REINDEX"):
            continue
        conn.execute(f"EXPLAIN {statement}", (None,) * statement.count("?"))
        checked += 1
    assert checked >= 20, sorted(sent)


def test_verify_pages_the_policy_table_through_its_seq_index(tmp_path: Path) -> None:
    path = tmp_path / "bank.db"
    _busy_bank(path)
    page = statements.select_policies("seq > ?") + " ORDER BY seq LIMIT ?"
    with sqlite3.connect(path) as conn:
        plan = " ".join(str(row[-1]) for row in conn.execute(f"EXPLAIN QUERY PLAN {page}", (0, 10)))
    assert "ix_policy_seq" in plan and "TEMP B-TREE" not in plan, plan
