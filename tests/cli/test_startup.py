"""Reading commands on an SQLite bank start without SQLAlchemy and SQLModel: the store speaks
sqlite3 itself, and the tables are imported only to upgrade a bank."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import oc
from tunebank.bank import Bank

READING = [["tasks"], ["query"], ["query", "--at-seq", "3"], ["history", "--repo-key", "k"],
           ["events"], ["summary", "abc1"], ["verify"]]
_HEAVY = ("sqlalchemy", "sqlmodel", "numpy", "onnx")


def _bank(tmp_path: Path) -> Path:
    db = tmp_path / "b.db"
    with Bank.open(str(db), create=True) as bank:
        bank.start_task("A", tuning_name="t", task_id="abc1")
        bank.record("abc1", [oc("add", "k"), oc("unsatisfied", "u")])
        bank.finish_task("abc1")
    return db


def _loaded_by(args: list[str], cwd: Path) -> list[str]:
    """Which of the heavy packages a command loaded (it runs in a fresh interpreter)."""
    probe = ("import sys; from tunebank.cli.main import app\n"
             f"try:\n    app({args!r}, standalone_mode=False)\n"
             "except SystemExit:\n    pass\n"
             f"import json; print(json.dumps(sorted(m for m in {_HEAVY!r} if m in sys.modules)))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[2])
    loaded: list[str] = json.loads(out.stdout.strip().splitlines()[-1])
    return loaded


@pytest.mark.parametrize("command", READING, ids=lambda c: " ".join(c))
def test_a_reading_command_starts_without_the_orm(tmp_path: Path, command: list[str]) -> None:
    db = _bank(tmp_path)
    assert _loaded_by([*command, "--db", str(db)], tmp_path) == []


def test_making_a_bank_loads_no_tables(tmp_path: Path) -> None:
    """Issue 30: `bank init` (and the first tune into a new file) ran the DDL SQLAlchemy compiled
    from the SQLModel tables; it now runs the DDL rendered once (bank/store/schema/creation.py),
    which tests/bank/test_statements.py holds equal to SQLAlchemy's."""
    assert _loaded_by(["init", "--db", str(tmp_path / "new.db")], tmp_path) == []
    assert (tmp_path / "new.db").is_file()


def test_upgrading_a_bank_is_what_loads_them(tmp_path: Path) -> None:
    """The probe can see them: `bank upgrade` changes tables through SQLAlchemy's DDL."""
    assert "sqlalchemy" in _loaded_by(["upgrade", "--db", str(_bank(tmp_path))], tmp_path)


def test_opening_an_existing_bank_to_write_loads_no_tables(tmp_path: Path) -> None:
    """Issue 30: `Bank.open(create=True)`, as every tune and import opens its bank, imported
    SQLModel, SQLAlchemy and pydantic (about half a second) and took the write lock before
    looking whether the bank was there."""
    db = _bank(tmp_path)
    probe = ("import sys; from tunebank.bank import Bank\n"
             f"Bank.open({str(db)!r}, create=True).close()\n"
             "print(sorted(m for m in ('sqlalchemy', 'sqlmodel', 'pydantic') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[2])
    assert out.stdout.strip() == "[]", out.stdout
