"""The recorder for a bank a team shares in PostgreSQL, on psycopg (version 3).

A write transaction first takes one advisory lock (:data:`WRITER_LOCK`), so writers append one
at a time and a reader never sees a later seq commit before an earlier one (no gaps to skip).
A snapshot is a REPEATABLE READ transaction. Bulk imports of new events go through COPY.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tunebank.bank.location import masked
from tunebank.bank.store.base import EventStore, Mode
from tunebank.bank.store.driver import Db, FormatStyleDb
from tunebank.bank.store.schema import statements as sql

WRITER_LOCK = 727_217_001
"""The PostgreSQL advisory lock every tunebank writer takes."""
CONNECT_TIMEOUT_S = 10
"""How long a connection may take before it is an error."""
TABLES = ("events", "policy", "task", "checkpoint", "bank_meta")
ANALYZE_AFTER = 10_000
"""Rows a write transaction inserts into a table before it renews the table's statistics."""

_TRANSIENT_SQLSTATES = frozenset({"40001", "40P01", "55P03"})
"""Codes of a refusal the same transaction may not meet again: serialisation failure,
deadlock, lock not available."""
_TRIGGERS = (
    "CREATE OR REPLACE FUNCTION tunebank_refuse_change() RETURNS trigger AS $$ BEGIN "
    "RAISE EXCEPTION USING MESSAGE = 'the events table is append-only: ' || TG_OP || ' refused'; "
    "END; $$ LANGUAGE plpgsql",
    "CREATE OR REPLACE TRIGGER events_refuse_change BEFORE UPDATE OR DELETE ON events "
    "FOR EACH ROW EXECUTE FUNCTION tunebank_refuse_change()",
    "CREATE OR REPLACE TRIGGER events_refuse_truncate BEFORE TRUNCATE ON events "
    "FOR EACH STATEMENT EXECUTE FUNCTION tunebank_refuse_change()",
)
_BEGIN = {"read": "BEGIN", "write": "BEGIN",
          "snapshot": "BEGIN ISOLATION LEVEL REPEATABLE READ"}


def conninfo(url: str) -> str:
    """The libpq URI of a bank URL (``postgresql+psycopg://`` becomes ``postgresql://``)."""
    return "postgresql://" + url.split("://", 1)[1]


class PostgresStore(EventStore):
    """A bank in a PostgreSQL database (``postgresql+psycopg://USER@HOST/DB``)."""

    dialect = "postgresql"

    @staticmethod
    def describe(url: str) -> str:
        return masked(url)

    def _connect(self) -> Any:
        import psycopg

        return psycopg.connect(conninfo(self.url), autocommit=True,
                               connect_timeout=CONNECT_TIMEOUT_S)

    def _is_closed(self, raw: Any) -> bool:
        return bool(raw.closed or raw.broken)

    def _begin(self, db: Db, mode: Mode) -> None:
        db.run(_BEGIN[mode])
        if mode == "write":
            self._timed_lock(db, f"SELECT pg_advisory_xact_lock({WRITER_LOCK})")

    def _is_transient(self, exc: Exception) -> bool:
        return getattr(exc, "sqlstate", None) in _TRANSIENT_SQLSTATES

    def _driver_errors(self) -> tuple[type[Exception], ...]:
        import psycopg

        return (psycopg.Error,)

    def table_names(self, db: Db) -> list[str]:
        return [str(row[0]) for row in db.rows(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")]

    def install_triggers(self, db: Db) -> None:
        """The append-only triggers, and amcheck where this role may install it (a superuser's
        bank); elsewhere verify says the structure check did not run."""
        for statement in _TRIGGERS:
            db.run(statement)
        db.run("SAVEPOINT amcheck")
        try:
            db.run("CREATE EXTENSION IF NOT EXISTS amcheck")
            db.run("RELEASE SAVEPOINT amcheck")
        except self._driver_errors():
            db.run("ROLLBACK TO SAVEPOINT amcheck")

    def structure_problems(self) -> tuple[list[str], str | None]:
        """amcheck's ``bt_index_check`` with ``heapallindexed`` on the bank's B-tree indexes."""
        with self.transaction() as db:
            schema = db.scalar(
                "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON "
                "n.oid = e.extnamespace WHERE e.extname = 'amcheck'")
            if schema is None:
                return [], ("the amcheck extension is not installed in this database (a "
                            "superuser's CREATE EXTENSION amcheck enables the check)")
            return self._index_problems(db, str(schema)), None

    def _index_problems(self, db: Db, schema: str) -> list[str]:
        indexes = db.rows(
            "SELECT c.relname, c.oid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "JOIN pg_class t ON t.oid = i.indrelid JOIN pg_am a ON a.oid = c.relam "
            "WHERE a.amname = 'btree' AND t.oid = ANY (CAST(? AS regclass[]))", (list(TABLES),))
        problems = []
        for name, oid in indexes:
            db.run("SAVEPOINT index_check")
            try:
                db.run(f'SELECT "{schema}".bt_index_check(?, true)', (oid,))
                db.run("RELEASE SAVEPOINT index_check")
            except self._driver_errors() as exc:
                db.run("ROLLBACK TO SAVEPOINT index_check")
                problems.append(f"index {name}: {str(exc).splitlines()[0]}")
        return problems

    def reindex(self) -> None:
        def work(db: Db) -> None:
            for table in TABLES:
                db.run(f"REINDEX TABLE {table}")

        self._write(work)

    def _db(self, raw: Any) -> Db:
        return CopyingDb(raw)


class CopyingDb(FormatStyleDb):
    """psycopg's connection, whole rows inserted with COPY ... FROM STDIN, PostgreSQL's bulk
    load (several times faster than an INSERT per row).

    A transaction that grows a table renews the planner's statistics of it (``ANALYZE``, which
    counts the transaction's own rows) each time it has inserted :data:`ANALYZE_AFTER` rows or
    as many as the statistics knew, whichever is more: a few times in a long import. Without
    it, an import into a new bank is planned from the statistics of empty tables, and each
    chunk's lookup of the policies it touches scans every policy of the chip (a bitmap scan on
    soc_version alone), so the import slowed as the table grew.
    """

    def __init__(self, raw: Any) -> None:
        super().__init__(raw)
        self._added: dict[str, int] = {}
        self._known: dict[str, float] = {}

    def insert_rows(self, table: str, rows: Sequence[Sequence[Any]]) -> None:
        if not rows:
            return
        columns = ",".join(sql.TABLES[table])
        cursor = self.raw.cursor()
        try:
            with cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
        finally:
            cursor.close()
        self._grew(table, len(rows))

    def run_many(self, statement: str, rows: Sequence[Sequence[Any]]) -> None:
        super().run_many(statement, rows)
        if rows and statement.startswith("INSERT INTO "):
            self._grew(statement.split(maxsplit=3)[2], len(rows))

    def _grew(self, table: str, count: int) -> None:
        known = self._known.get(table)
        if known is None:  # the rows the statistics counted (-1: never analysed)
            row = self.run("SELECT reltuples FROM pg_class WHERE oid = to_regclass(?)", (table,)).fetchone()
            known = self._known[table] = max(float(row[0]) if row else 0.0, 0.0)
        added = self._added.get(table, 0) + count
        if added >= max(ANALYZE_AFTER, known):
            self.run(f"ANALYZE {table}")
            self._known[table], added = known + added, 0
        self._added[table] = added
