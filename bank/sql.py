"""Plain SQL for the hot paths, run through the driver: appending, reading the log, looking up.

Building SQLAlchemy statements and binding parameters per row costs more than SQLite takes to
store the row, so the store sends these statements with tuples straight to the driver's
``executemany``. Column orders come from the SQLModel tables, so the two never drift apart.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

from sqlalchemy import Table
from sqlmodel import SQLModel

from bank.schema import EventRow, PolicyRow, TaskRow


def _table(model: type[SQLModel]) -> Table:
    table = model.__table__  # type: ignore[attr-defined]
    assert isinstance(table, Table)
    return table


def _columns(model: type[SQLModel]) -> tuple[str, ...]:
    return tuple(column.name for column in _table(model).columns)


EVENT_COLUMNS = _columns(EventRow)
POLICY_COLUMNS = _columns(PolicyRow)
TASK_COLUMNS = _columns(TaskRow)
POLICY_KEY = ("soc_version", "repo_key", "info_digest")
TASK_KEY = ("task_id",)


@cache
def mark(paramstyle: str) -> str:
    """One parameter placeholder in the driver's style (sqlite3: ``?``; psycopg: ``%s``)."""
    return "?" if paramstyle == "qmark" else "%s"


def marks(paramstyle: str, count: int) -> str:
    """``count`` placeholders, comma-separated."""
    return ",".join([mark(paramstyle)] * count)


@cache
def insert(table: str, columns: tuple[str, ...], paramstyle: str) -> str:
    """INSERT of one row of ``columns``."""
    return f"INSERT INTO {table} ({','.join(columns)}) VALUES ({marks(paramstyle, len(columns))})"


@cache
def update(table: str, columns: tuple[str, ...], key: tuple[str, ...], paramstyle: str) -> str:
    """UPDATE of every column but ``key`` of the row ``key`` names; the parameters are the row's
    values in ``columns`` order without the key, then the key's."""
    ph = mark(paramstyle)
    sets = ",".join(f"{name}={ph}" for name in columns if name not in key)
    where = " AND ".join(f"{name}={ph}" for name in key)
    return f"UPDATE {table} SET {sets} WHERE {where}"


def update_params(columns: Sequence[str], key: tuple[str, ...],
                  row: tuple[object, ...]) -> tuple[object, ...]:
    """The parameters of :func:`update` for one row of ``columns``."""
    named = dict(zip(columns, row, strict=True))
    return (*(named[c] for c in columns if c not in key), *(named[c] for c in key))


def select_events(where: str = "", paramstyle: str = "qmark", *, limit: bool = False) -> str:
    """SELECT of every events column in seq order, with an optional WHERE clause (and a LIMIT
    placeholder for keyset paging)."""
    clause = f" WHERE {where}" if where else ""
    tail = f" LIMIT {mark(paramstyle)}" if limit else ""
    return f"SELECT {','.join(EVENT_COLUMNS)} FROM events{clause} ORDER BY seq{tail}"


def select_policies(where: str = "") -> str:
    """SELECT of every policy column, with an optional WHERE clause."""
    clause = f" WHERE {where}" if where else ""
    return f"SELECT {','.join(POLICY_COLUMNS)} FROM policy{clause}"
