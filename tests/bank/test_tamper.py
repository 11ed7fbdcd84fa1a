"""A log changed behind the bank's back is found, and the first bad seq is named."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from tests.conftest import oc
from tests.seams import tamper
from tunebank.bank import Bank
from tunebank.cli.main import app


def _bank_with_history(path: Path) -> None:
    with Bank.open(str(path), create=True) as bank:
        for round_ in range(3):
            task = bank.start_task("Ascend310", tuning_name=f"r{round_}")
            bank.record(task, [oc("add", f"{round_}-{k}") for k in range(3)])
            bank.finish_task(task)


def _tampered(tmp_path: Path, statement: str) -> Path:
    """A bank with three finished tasks, changed behind its back by ``statement``."""
    path = tmp_path / "bank.db"
    _bank_with_history(path)
    with Bank.open(str(path)) as bank:
        tamper(bank, statement)
    return path


def test_changed_payload_is_found(tmp_path: Path) -> None:
    path = _tampered(tmp_path, "UPDATE events SET payload = replace(payload, '50.0', '5.0') WHERE seq = 8")
    with Bank.open(str(path)) as bank:
        report = bank.verify()
    assert not report.ok
    assert report.first_bad_seq == 8
    assert any("seq 8: hash does not match" in p for p in report.problems)
    result = CliRunner().invoke(app, ["verify", "--db", str(path)])
    assert result.exit_code == 1
    assert "first bad seq: 8" in result.output


def test_deleted_event_is_found(tmp_path: Path) -> None:
    path = _tampered(tmp_path, "DELETE FROM events WHERE seq = 4")
    with Bank.open(str(path)) as bank:
        report = bank.verify()
    assert report.first_bad_seq == 4
    assert any("seq 4: missing" in p for p in report.problems)


def test_changed_projection_is_found_and_rebuild_repairs_it(tmp_path: Path) -> None:
    path = _tampered(tmp_path, "UPDATE policy SET best_us = 1.0 WHERE repo_key = '1-1'")
    with Bank.open(str(path)) as bank:
        report = bank.verify()
        assert any("policy Ascend310/1-1/" in p for p in report.problems)
        bank.rebuild()
        assert bank.verify().ok


def test_forged_summary_is_found(tmp_path: Path) -> None:
    path = _tampered(tmp_path, "UPDATE task SET add_num = 9")
    with Bank.open(str(path)) as bank:
        problems = bank.verify().problems
    assert sum("stored value differs" in p for p in problems) == 3
