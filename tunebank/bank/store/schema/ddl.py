"""Changing a bank's tables: the only place the SQLModel tables of :mod:`bank.store.schema.tables`
are compiled into DDL for the database and run through its driver. Imported only by ``bank
upgrade`` (:mod:`bank.store.migrate`) and by the test that holds the DDL a new bank is made with
(:mod:`bank.store.schema.creation`) equal to :func:`render`'s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy import Index, Table
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Dialect
from sqlalchemy.schema import CreateIndex, CreateTable, DropTable
from sqlmodel import SQLModel

from tunebank.bank.store.schema.tables import (
    CheckpointRow,
    EventRow,
    MetaRow,
    PolicyRow,
    TaskRow,
)

if TYPE_CHECKING:
    from tunebank.bank.store.driver import Db

MODELS: tuple[type[SQLModel], ...] = (EventRow, PolicyRow, TaskRow, CheckpointRow, MetaRow)


def table_of(model: type[SQLModel]) -> Table:
    """The SQLAlchemy table a SQLModel table class defines."""
    table = model.__table__  # type: ignore[attr-defined]
    assert isinstance(table, Table)
    return table


def dialect_of(db: Db) -> Dialect:
    """The SQLAlchemy dialect DDL is compiled for."""
    made: Dialect = sqlite.dialect() if db.dialect == "sqlite" else postgresql.dialect()  # type: ignore[no-untyped-call]
    return made


def create_table(db: Db, model: type[SQLModel]) -> None:
    """CREATE TABLE for ``model`` with every index it declares."""
    table = table_of(model)
    db.run(str(CreateTable(table).compile(dialect=dialect_of(db))))
    for index in sorted(table.indexes, key=lambda index: str(index.name)):
        create_index(db, index)


def create_index(db: Db, index: Index) -> None:
    """CREATE INDEX IF NOT EXISTS for one index a table declares."""
    db.run(str(CreateIndex(index, if_not_exists=True).compile(dialect=dialect_of(db))))


def drop_table(db: Db, model: type[SQLModel]) -> None:
    """DROP TABLE IF EXISTS for ``model`` (its indexes go with it)."""
    db.run(str(DropTable(table_of(model), if_exists=True).compile(dialect=dialect_of(db))))


def index_named(model: type[SQLModel], name: str) -> Index:
    """The index ``name`` that ``model`` declares."""
    return next(index for index in table_of(model).indexes if index.name == name)


def render(dialect: str) -> tuple[str, ...]:
    """Every table's CREATE TABLE and CREATE INDEX, in the order a bank makes them, compiled for
    ``dialect`` (``sqlite`` or ``postgresql``), laid out as :mod:`bank.store.schema.creation`
    keeps them."""
    compiled: Dialect = sqlite.dialect() if dialect == "sqlite" else postgresql.dialect()  # type: ignore[no-untyped-call]
    statements = []
    for model in MODELS:
        table = table_of(model)
        text = str(CreateTable(table).compile(dialect=compiled)).strip()
        statements.append(text.replace("\n\t", "\n    ").replace(", \n", ",\n"))
        statements += [str(CreateIndex(index, if_not_exists=True).compile(dialect=compiled))
                       for index in sorted(table.indexes, key=lambda index: str(index.name))]
    return tuple(statements)


if __name__ == "__main__":  # the text to paste into creation.py when the tables change
    for statement in render("sqlite"):
        print(repr(statement) + ",")
