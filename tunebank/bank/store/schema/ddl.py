"""Making and changing a bank's tables: the only place the SQLModel tables of
:mod:`bank.store.schema.tables` are turned into DDL, compiled for the database and run through its driver.
Imported only when a bank is created or upgraded, so everyday commands never load SQLAlchemy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy import Index, Table
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Dialect
from sqlalchemy.schema import CreateIndex, CreateTable, DropTable
from sqlmodel import SQLModel

from tunebank.bank.errors import BankLocationError
from tunebank.bank.store.schema import statements as sql
from tunebank.bank.store.schema.tables import (
    SCHEMA_VERSION,
    CheckpointRow,
    EventRow,
    MetaRow,
    PolicyRow,
    TaskRow,
)

if TYPE_CHECKING:
    from tunebank.bank.store.base import EventStore
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


def create_bank(store: EventStore, db: Db, bank_id: str) -> bool:
    """In a write transaction: make a bank in an empty database; return whether one was made
    (``False``: it already holds one).

    Raises:
        BankLocationError: an SQLite file that holds tables of something else.
    """
    tables = store.table_names(db)
    if "events" in tables:
        return False
    if tables and db.dialect == "sqlite":
        raise BankLocationError(f"{store.where}: an SQLite database of something else (tables: "
                                f"{', '.join(sorted(tables)[:5])}); no bank is made in it")
    for model in MODELS:
        create_table(db, model)
    store.install_triggers(db)
    db.run(sql.insert("checkpoint"), (sql.CHECKPOINT, 0, SCHEMA_VERSION))
    db.run_many(sql.insert("bank_meta"), [("bank_id", bank_id),
                                          ("schema_version", str(SCHEMA_VERSION))])
    return True
