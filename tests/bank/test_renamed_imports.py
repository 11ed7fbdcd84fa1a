"""The same report is the same history, whatever its file is called (issue 16).

A report's events (ids, times, task id) are derived from its content alone: a renamed copy of
a result file, or of a bank tree, imports to the very same events, adds nothing the second
time, and two banks that each imported one of the names merge to one copy.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.seams import import_paths
from tunebank.bank import Bank
from tunebank.bank.exchange.merge import merge_into
from tunebank.bank.formats.jsonl import write_event_rows

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "aoe"
NAMES = sorted(p.name for p in FIXTURES.glob("*.json"))


def _ids(bank: Bank) -> list[tuple[str, str, str]]:
    return [(s.event_id, s.event.recorded_at, s.event.task_id) for s in bank.events()]


@pytest.mark.parametrize("name", NAMES)
def test_a_renamed_copy_gives_the_same_events(name: str, tmp_path: Path) -> None:
    renamed = tmp_path / "what a colleague called it.json"
    shutil.copyfile(FIXTURES / name, renamed)
    with Bank.open(str(tmp_path / "a.db"), create=True) as a, \
            Bank.open(str(tmp_path / "b.db"), create=True) as b:
        import_paths(a, [FIXTURES / name], "Ascend310")
        import_paths(b, [renamed], "Ascend310")
        assert _ids(a) == _ids(b) and _ids(a)


@pytest.mark.parametrize("name", NAMES)
def test_importing_a_renamed_copy_adds_nothing_and_says_so(name: str, tmp_path: Path) -> None:
    renamed = tmp_path / "copy.json"
    shutil.copyfile(FIXTURES / name, renamed)
    with Bank.open(str(tmp_path / "bank.db"), create=True) as bank:
        first = import_paths(bank, [FIXTURES / name], "Ascend310")
        head = bank.head()
        again = import_paths(bank, [renamed], "Ascend310")
        assert first.appended == head > 0
        assert again.appended == 0 and again.skipped == head
        assert again.files[0].tasks == 0 and again.files[0].tasks_present == first.files[0].tasks
        assert bank.head() == head and bank.verify().ok


def test_two_banks_that_imported_the_two_names_merge_to_one_copy(tmp_path: Path) -> None:
    name = "aoe_result_opat_20240315143005123_4711.json"
    renamed = tmp_path / "resnet.json"
    shutil.copyfile(FIXTURES / name, renamed)
    a, b = str(tmp_path / "a.db"), str(tmp_path / "b.db")
    with Bank.open(a, create=True) as bank:
        import_paths(bank, [FIXTURES / name], "Ascend310")
        head = bank.head()
    with Bank.open(b, create=True) as bank:
        import_paths(bank, [renamed], "Ascend310")
    with Bank.open(a) as bank, Bank.open(b) as other:
        report = merge_into(bank, other)
        assert report.added == 0 and report.present == head and bank.head() == head
        assert len(bank.tasks()) == 1 and bank.verify().ok
    with Bank.open(b) as bank:  # and one bank takes the other's events export
        export = tmp_path / "b.jsonl"
        with export.open("w", encoding="utf-8") as handle:
            write_event_rows(handle, bank.event_rows(), bank.bank_id)
    with Bank.open(a) as bank:
        taken = import_paths(bank, [export], None)
        assert taken.appended == 0 and bank.head() == head


def test_a_report_time_comes_from_its_content_never_its_name(tmp_path: Path) -> None:
    with Bank.open("sqlite://", create=True) as bank:
        import_paths(bank, sorted(FIXTURES.glob("*.json")), "Ascend310")
        started = {t.tuning_name: t.started_at for t in bank.tasks()}
    # a newer OPAT file dates each report by its own id (report_{timestamp}_{tid}) ...
    assert started["bert_tune_2"].startswith("2024-03-15T14:31:00")
    # ... the older layouts carry no time, whatever the file name says
    assert started["resnet_tune"] == "1970-01-01T00:00:00.000000Z"


def test_a_renamed_bank_tree_adds_nothing_to_a_bank_that_holds_it(tmp_path: Path) -> None:
    """A tree's events name the tree they came from (issue 27), so a renamed copy is compared
    entry by entry with what the bank holds: it adds nothing."""
    with Bank.open(str(tmp_path / "src.db"), create=True) as bank:
        import_paths(bank, [FIXTURES / "aoe_result_opat_20240315143005123_4711.json"], "Ascend310")
    from typer.testing import CliRunner

    from tunebank.cli.main import app

    out = tmp_path / "banks"
    result = CliRunner().invoke(app, ["export", "--format", "aoe-repo", "--out", str(out), "--db",
                                      str(tmp_path / "src.db")])
    assert result.exit_code == 0, result.output
    moved = tmp_path / "another name"
    shutil.copytree(out, moved)
    with Bank.open(str(tmp_path / "a.db"), create=True) as a:
        first = import_paths(a, [out], None)
        again = import_paths(a, [moved], None)
        assert first.appended > 0 and again.appended == 0
        assert again.files[0].tree is not None and again.files[0].tree.unchanged == first.files[0].tree.new
