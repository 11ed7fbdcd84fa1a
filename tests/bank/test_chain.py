"""The chain checked in worker processes finds what the check in one process finds."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tunebank.bank.audit.chain
import tunebank.bank.audit.verify
from tests.bank.test_tamper import _bank_with_history, _tampered
from tunebank.bank import Bank
from tunebank.bank.audit.chain import Chunks, check_chunks, checked_in_workers, row_problems, workers_for
from tunebank.bank.audit.verify import VerifyReport
from tunebank.bank.errors import BankError
from tunebank.bank.events import check_row, readable_row
from tunebank.bank.store import reads

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="workers fork: Linux only")


def _report(path: Path, workers: int, monkeypatch: pytest.MonkeyPatch) -> VerifyReport:
    monkeypatch.setattr(tunebank.bank.audit.verify, "workers_for", lambda url, events: workers)
    with Bank.open(str(path)) as opened:
        return opened.verify()


@pytest.mark.parametrize("statement", [
    "UPDATE events SET payload = replace(payload, '50.0', '5.0') WHERE seq = 8",
    "UPDATE events SET event_id = CASE WHEN event_id LIKE '0%' THEN '1' ELSE '0' END "
    "|| substr(event_id, 2) WHERE seq = 3",
    "UPDATE events SET hash = CASE WHEN hash LIKE '0%' THEN '1' ELSE '0' END || substr(hash, 2) "
    "WHERE seq = 12",
    "DELETE FROM events WHERE seq = 5",
    "UPDATE events SET kind = 'bogus' WHERE seq = 4",
])
def test_workers_report_what_one_process_reports(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 statement: str) -> None:
    path = _tampered(tmp_path, statement)
    alone = _report(path, 0, monkeypatch)
    assert not alone.ok
    for workers in (1, 3):
        shared = _report(path, workers, monkeypatch)
        assert not shared.ok
        assert sorted(shared.problems) == sorted(alone.problems)
        assert shared.first_bad_seq == alone.first_bad_seq


def test_a_sound_bank_is_sound_in_workers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "bank.db"
    _bank_with_history(path)
    report = _report(path, 2, monkeypatch)
    assert report.ok and report.events == 15


def _seen(found: object) -> list[tuple[int, str]]:
    """A stand-in for rows_problems: every row it is given comes back as a problem."""
    return [(row[0], "seen") for row in found]  # type: ignore[attr-defined]


@pytest.mark.parametrize("workers", [1, 4])
def test_ranges_cover_every_seq_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                     workers: int) -> None:
    path = tmp_path / "bank.db"
    _bank_with_history(path)
    monkeypatch.setattr(tunebank.bank.audit.chain, "CHUNK", 2)  # many ranges for workers and parent to share
    monkeypatch.setattr(tunebank.bank.audit.chain, "rows_problems", _seen)  # forked workers see it too
    with Bank.open(str(path)) as opened:
        rows = list(reads.event_rows(opened.store))
        with checked_in_workers(f"sqlite:///{path}", len(rows), workers) as results:
            seen, structure = results(opened.store)
    assert [seq for seq, _ in seen] == [row[0] for row in rows]
    assert structure == ([], None)  # the database's own check ran in a worker too


def test_one_process_alone_takes_every_range(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "bank.db"
    _bank_with_history(path)
    monkeypatch.setattr(tunebank.bank.audit.chain, "rows_problems", _seen)
    with Bank.open(str(path)) as opened:
        rows = list(reads.event_rows(opened.store))
        seen = check_chunks(opened.store, Chunks(len(rows), 4))
    assert [seq for seq, _ in seen] == [row[0] for row in rows]


def test_row_problems_names_the_seq(tmp_path: Path) -> None:
    path = tmp_path / "bank.db"
    _bank_with_history(path)
    with Bank.open(str(path)) as opened:
        row = next(iter(reads.event_rows(opened.store)))
    assert row_problems(row) == []
    assert row_problems((*row[:12], "0" * 64)) == [(1, "seq 1: hash does not match the event's content")]


def test_no_workers_for_a_short_log_or_a_bank_in_memory() -> None:
    assert workers_for("sqlite:///bank.db", tunebank.bank.audit.chain.PARALLEL_FROM - 1) == 0
    assert workers_for("sqlite://", 10**7) == 0
    assert workers_for("sqlite:///:memory:", 10**7) == 0


_BAD = [None, "", 0, 1, b"x", "bogus", "{x", "x}"]


def _column(*good: str) -> st.SearchStrategy[object]:
    """A column's value: mostly one a reader accepts, else one it may not."""
    return st.one_of(st.sampled_from(good), st.sampled_from(good), st.sampled_from(_BAD))


@settings(max_examples=600, deadline=None)
@given(kind=_column("add", "hit", "task_started"), soc=_column("Ascend910B2"),
       repo_key=_column("123"), task_id=_column("t1"), recorded_at=_column("2026-12-05T00:00:00Z"),
       origin=_column("here"), payload=_column("{}", '{"a":1}'))
def test_readable_row_agrees_with_reading_the_row(kind: object, soc: object, repo_key: object,
                                                  task_id: object, recorded_at: object,
                                                  origin: object, payload: object) -> None:
    """The workers skip exactly the rows the fold refuses to read (and reports as unreadable)."""
    row = (1, "e" * 32, kind, soc, repo_key, task_id, None, None, recorded_at, origin, payload,
           "0" * 64, "1" * 64)
    try:
        check_row(row)
        reads = True
    except (BankError, ValueError, TypeError, AttributeError):
        reads = False
    assert readable_row(row) is reads
