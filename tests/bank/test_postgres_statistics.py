"""A write transaction that grows a PostgreSQL table renews the planner's statistics of it, so
a long import is not planned from the statistics of empty tables (which made each chunk's
policy lookup scan every policy of the chip: 100,000 events imported at 8.6k/s, 300,000 at
3.9k/s)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.conftest import oc
from tunebank.bank import Bank
from tunebank.bank.store import postgres
from tunebank.bank.store.postgres import ANALYZE_AFTER, CopyingDb


class Recorder:
    """A stand-in psycopg connection: keeps each statement; the statistics know ``known`` rows."""

    def __init__(self, known: float) -> None:
        self.known = known
        self.statements: list[str] = []

    def execute(self, statement: str, params: Any = ()) -> Any:
        self.statements.append(statement)
        known = self.known

        class Rows:
            def fetchone(self) -> tuple[float]:
                return (known,)

        return Rows()

    def cursor(self) -> Any:
        return self

    def executemany(self, statement: str, rows: Any) -> None:
        pass

    def close(self) -> None:
        pass


def analyses(raw: Recorder) -> int:
    return sum(1 for s in raw.statements if s.startswith("ANALYZE"))


@pytest.mark.parametrize("known", [-1.0, 0.0])
def test_a_table_never_analysed_is_analysed_after_the_first_rows_then_as_it_doubles(known: float) -> None:
    raw = Recorder(known)
    db = CopyingDb(raw)
    insert = "INSERT INTO policy (soc_version) VALUES (?)"
    grown, seen = 0, []
    for _ in range(80):
        db.run_many(insert, [("x",)] * 1000)
        grown += 1000
        seen.append(analyses(raw))
    # at 10k rows, then each time the table has doubled since: 20k, 40k, 80k
    assert [seen.index(n) + 1 for n in (1, 2, 3, 4)] == [10, 20, 40, 80]
    assert [s for s in raw.statements if s.startswith("ANALYZE")] == ["ANALYZE policy"] * 4
    assert sum(1 for s in raw.statements if "reltuples" in s) == 1  # asked once per transaction


def test_a_table_the_statistics_know_is_analysed_once_it_has_grown_by_as_much() -> None:
    raw = Recorder(50_000.0)
    db = CopyingDb(raw)
    for _ in range(49):
        db.run_many("INSERT INTO events (seq) VALUES (?)", [(1,)] * 1000)
    assert analyses(raw) == 0
    db.run_many("INSERT INTO events (seq) VALUES (?)", [(1,)] * 1000)
    assert analyses(raw) == 1
    db.run_many("UPDATE policy SET best_us = ? WHERE repo_key = ?", [(1.0, "k")] * ANALYZE_AFTER)
    assert analyses(raw) == 1  # updates do not grow a table


def test_a_recording_that_grows_the_tables_analyses_them_in_its_transaction(
        postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a real server: ANALYZE runs inside the write transaction (PostgreSQL counts the
    transaction's own rows), and the bank is whole afterwards."""
    import psycopg

    from tunebank.bank.store.postgres import conninfo

    monkeypatch.setattr(postgres, "ANALYZE_AFTER", 500)
    with Bank.open(postgres_url, create=True) as bank:
        task = bank.start_task("Ascend310", tuning_name="big")
        bank.record(task, [oc("add", str(n)) for n in range(1_200)])  # one transaction
        bank.finish_task(task)
        assert bank.verify().ok
    with psycopg.connect(conninfo(postgres_url)) as conn:
        deadline = time.monotonic() + 10  # the server publishes a closed session's counts shortly after
        while True:
            counts = dict(conn.execute(
                "SELECT relname, analyze_count FROM pg_stat_user_tables WHERE schemaname = "
                "current_schema() AND relname IN ('events', 'policy')").fetchall())
            conn.rollback()
            if all(counts.get(t, 0) >= 1 for t in ("events", "policy")) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert counts == {"events": 1, "policy": 1}  # the 1,200 rows came in one batch
        rows = conn.execute("SELECT reltuples FROM pg_class WHERE oid = to_regclass('policy')").fetchone()
        assert rows is not None and rows[0] >= 1_000
