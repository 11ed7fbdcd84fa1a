"""One open connection, as the store's modules use it: statements with ``?`` placeholders and
tuples in, tuples out, straight through the database's own DB-API driver."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from functools import cache
from typing import Any

from tunebank.bank.store.schema import statements as sql

Row = tuple[Any, ...]


@cache
def to_format_style(statement: str) -> str:
    """``statement`` with psycopg's ``%s`` placeholders for ``?`` (a literal ``%`` doubled)."""
    return re.sub(r"\?", "%s", statement.replace("%", "%%"))


class Db:
    """A DB-API connection inside one transaction the recorder opened; statements use ``?``
    placeholders (sqlite3's own; :class:`FormatStyleDb` translates them for psycopg).

    Args:
        raw: the driver's connection.
    """

    dialect = "sqlite"

    def __init__(self, raw: Any) -> None:
        self.raw = raw

    def run(self, statement: str, params: Sequence[Any] = ()) -> Any:
        """Execute one statement; return the driver's cursor."""
        return self.raw.execute(statement, params)

    def run_many(self, statement: str, rows: Sequence[Sequence[Any]]) -> None:
        """Execute one statement once per row (the driver's ``executemany``)."""
        if rows:
            self.raw.executemany(statement, rows)

    def insert_rows(self, table: str, rows: Sequence[Sequence[Any]]) -> None:
        """Insert whole rows of ``table`` (every column, in order), the fastest way the
        database has."""
        self.run_many(sql.insert(table), rows)

    def rows(self, statement: str, params: Sequence[Any] = ()) -> list[Row]:
        """Every row a query returns, as tuples."""
        rows: list[Row] = self.run(statement, params).fetchall()  # both drivers give tuples
        return rows

    def one(self, statement: str, params: Sequence[Any] = ()) -> Row | None:
        """The first row a query returns, or ``None``."""
        row: Row | None = self.run(statement, params).fetchone()
        return row

    def scalar(self, statement: str, params: Sequence[Any] = ()) -> Any:
        """The first column of the first row, or ``None``."""
        row = self.one(statement, params)
        return None if row is None else row[0]

    def stream(self, statement: str, params: Sequence[Any] = ()) -> Iterator[Row]:
        """The rows of a query as the driver fetches them."""
        cursor = self.run(statement, params)
        while True:
            batch = cursor.fetchmany(2000)
            if not batch:
                return
            yield from batch


class FormatStyleDb(Db):
    """:class:`Db` for a driver with ``%s`` placeholders and no ``executemany`` on the
    connection (psycopg)."""

    dialect = "postgresql"

    def run(self, statement: str, params: Sequence[Any] = ()) -> Any:
        return self.raw.execute(to_format_style(statement), params)

    def run_many(self, statement: str, rows: Sequence[Sequence[Any]]) -> None:
        if not rows:
            return
        cursor = self.raw.cursor()
        try:
            cursor.executemany(to_format_style(statement), rows)
        finally:
            cursor.close()


def chunks(values: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    """``values`` in consecutive slices of at most ``size``."""
    for start in range(0, len(values), size):
        yield values[start:start + size]


def batches(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    """``items`` gathered into lists of ``size`` (the last may be shorter)."""
    batch: list[Any] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch
