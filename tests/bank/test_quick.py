"""The light read path gives what the full one gives, and steps aside whenever it is unsure."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

from tests.conftest import oc
from tunebank.bank import Bank
from tunebank.bank.quick import quick_task


def _bank(tmp_path: Path) -> Path:
    db = tmp_path / "b.db"
    with Bank.open(str(db), create=True) as bank:
        for task_id in ("abc1", "abc2", "xyz_%"):
            bank.start_task("A", tuning_name=task_id, task_id=task_id)
            bank.record(task_id, [oc("add", f"k-{task_id}"), oc("hit", "h"), oc("reserved", "h")])
            bank.finish_task(task_id, failed_operators=["op9"])
    return db


def test_it_reads_the_task_the_full_path_reads(tmp_path: Path) -> None:
    db = _bank(tmp_path)
    with Bank.open(str(db)) as bank:
        for ref in ("abc1", "xyz", "xyz_%"):
            assert quick_task(str(db), ref) == bank.task(ref)


def test_it_steps_aside_when_unsure(tmp_path: Path) -> None:
    db = _bank(tmp_path)
    assert quick_task(str(db), "abc") is None  # two tasks match: the full path says so
    assert quick_task(str(db), "none") is None
    assert quick_task(str(tmp_path / "missing.db"), "abc1") is None
    assert quick_task("postgresql://u@127.0.0.1:1/x", "abc1") is None
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE bank_meta SET value = '3' WHERE name = 'schema_version'")
    assert quick_task(str(db), "abc1") is None


def test_bank_summary_starts_without_the_orm(tmp_path: Path) -> None:
    db = _bank(tmp_path)
    probe = ("import sys; from tunebank.cli.main import app\n"
             f"app(['summary', 'abc1', '--db', {str(db)!r}], standalone_mode=False)\n"
             "print(sorted(m for m in ('sqlalchemy', 'sqlmodel') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[2])
    assert out.stdout.strip().splitlines()[-1] == "[]"
