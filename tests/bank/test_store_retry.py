"""A write the database refuses for a moment is tried again; one it keeps refusing fails clearly."""

from __future__ import annotations

import logging
import sqlite3
import threading
from pathlib import Path

import pytest

from tests.conftest import oc
from tunebank.bank import Bank, StoreError


@pytest.fixture
def impatient(monkeypatch: pytest.MonkeyPatch) -> None:
    """A busy timeout of 50 ms and short pauses, so the retries happen within a second."""
    monkeypatch.setattr("tunebank.bank.store.sqlite.BUSY_TIMEOUT_S", 0.05)
    monkeypatch.setattr("tunebank.bank.store.base.RETRY_DELAYS", (0.05, 0.1, 0.2, 0.4))


def _hold_write_lock(path: Path) -> sqlite3.Connection:
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")
    return other


@pytest.mark.usefixtures("impatient")
def test_a_write_waits_out_another_writer(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "b.db"
    with Bank.open(str(path), create=True) as bank:
        task = bank.start_task("Ascend310", tuning_name="t")
        other = _hold_write_lock(path)
        release = threading.Timer(0.3, other.rollback)
        release.start()
        with caplog.at_level(logging.INFO, logger="tunebank.store"):
            result = bank.record(task, [oc("add", "1")])
        release.join()
        assert len(result.appended) == 1
        assert any(r.getMessage().startswith("write refused") for r in caplog.records)
        assert bank.verify().ok


@pytest.mark.usefixtures("impatient")
def test_a_lock_held_for_good_is_one_clear_line_and_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "b.db"
    with Bank.open(str(path), create=True) as bank:
        task = bank.start_task("Ascend310", tuning_name="t")
        other = _hold_write_lock(path)
        try:
            with pytest.raises(StoreError) as caught:
                bank.record(task, [oc("add", "1")])
        finally:
            other.rollback()
        message = str(caught.value)
        assert "\n" not in message
        assert message.startswith(f"database {path}: database is locked")
        assert "gave up after 5 attempts" in message
        assert bank.head() == 1


def test_only_lock_refusals_are_retried(tmp_path: Path) -> None:
    """A file that is not a database is an error at once, not after the retries."""
    bad = tmp_path / "not-a-bank.db"
    bad.write_bytes(b"this is not an SQLite file, it only has the name of one" * 100)
    with pytest.raises(StoreError) as caught:
        Bank.open(str(bad))
    assert not caught.value.transient
    assert "file is not a database" in str(caught.value)
