"""Streamed appends: chunks of one transaction fold exactly as one batch, and a stream that
fails anywhere writes nothing; an events file is read line by line."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.conftest import oc
from tests.seams import stored_projection
from tunebank.bank import Bank
from tunebank.bank.api import write_to_bank
from tunebank.bank.errors import BankError, OutcomeRuleError
from tunebank.bank.events import Event
from tunebank.bank.formats.jsonl import write_event_rows
from tunebank.cli.main import app

runner = CliRunner()


def _workload(seed: int) -> list[Event]:
    """Interleaved tasks (so chunk borders fall inside running tasks), hits resolved later."""
    rng = random.Random(seed)
    with Bank.open("sqlite://", create=True) as scratch:
        open_tasks = [scratch.start_task(rng.choice(["A", "B"]), tuning_name=f"t{n}",
                                         task_id=f"task{n}") for n in range(6)]
        for task in open_tasks:
            keys = rng.sample(range(40), 25)
            outcomes = []
            for key in keys:
                kind = rng.choice(["add", "hit", "unsatisfied"])
                outcomes.append(oc(kind, str(key), after=float(rng.randint(1, 90))))
                if kind == "hit":
                    outcomes.append(oc(rng.choice(["update", "reserved"]), str(key),
                                       after=float(rng.randint(1, 90))))
            scratch.record(task, outcomes)
            scratch.finish_task(task)
        return [stored.event for stored in scratch.events()]


@pytest.mark.parametrize("chunk", [1, 7, 64, 10_000])
def test_a_stream_in_chunks_folds_as_one_batch(chunk: int) -> None:
    events = _workload(3)
    with Bank.open("sqlite://", create=True) as whole, Bank.open("sqlite://", create=True) as streamed:
        whole.append(events)
        result = streamed.store.append_stream(lambda: (e.row() for e in events), chunk=chunk)
        assert (result.appended, result.skipped) == (len(events), 0)
        assert stored_projection(streamed) == stored_projection(whole)
        assert [s.hash for s in streamed.events()] == [s.hash for s in whole.events()]
        assert streamed.verify().ok
        again = streamed.store.append_stream(lambda: (e.row() for e in events), chunk=chunk)
        assert (again.appended, again.skipped) == (0, len(events))


def test_a_stream_that_breaks_a_rule_late_writes_nothing() -> None:
    events = _workload(4)
    with Bank.open("sqlite://", create=True) as scratch:
        task = scratch.start_task("A", tuning_name="bad", task_id="task-bad")
        bad = scratch.outcome_events(task, [oc("reserved", "never-hit")])
        start = [s.event for s in scratch.events()]
    with Bank.open("sqlite://", create=True) as bank:
        with pytest.raises(OutcomeRuleError, match="without a hit before it"):
            bank.store.append_stream(lambda: (e.row() for e in [*events, *start, *bad]), chunk=16)
        assert bank.head() == 0 and bank.tasks() == []


def _events_file(tmp_path: Path, events: list[Event]) -> Path:
    with Bank.open("sqlite://", create=True) as source:
        source.append(events)
        path = tmp_path / "log.jsonl"
        with path.open("w", encoding="utf-8") as handle:
            write_event_rows(handle, source.event_rows(), source.bank_id)
    return path


def test_a_bad_last_line_of_a_long_file_leaves_no_new_bank(tmp_path: Path) -> None:
    path = _events_file(tmp_path, _workload(5))
    lines = path.read_text(encoding="utf-8").splitlines()
    lines[-1] = lines[-1].replace('"seq":', '"seq": 1e9, "x":', 1)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    folder = tmp_path / "new"
    folder.mkdir()
    result = runner.invoke(app, ["import", str(path), "--db", str(folder / "b.db")])
    assert result.exit_code == 1
    assert f"line {len(lines)}" in result.stderr and "Traceback" not in result.output
    assert list(folder.iterdir()) == []


def test_a_bad_line_leaves_an_existing_bank_as_it_was(tmp_path: Path) -> None:
    path = _events_file(tmp_path, _workload(6))
    text = path.read_text(encoding="utf-8")
    path.write_text(text + "not json\n", encoding="utf-8")
    db = tmp_path / "b.db"
    with Bank.open(str(db), create=True) as bank:
        task = bank.start_task("A", tuning_name="mine")
        bank.record(task, [oc("add", "mine")])
        head, before = bank.head(), stored_projection(bank)
    result = runner.invoke(app, ["import", str(path), "--db", str(db)])
    assert result.exit_code == 1 and "not valid JSON" in result.stderr
    with Bank.open(str(db)) as bank:
        assert bank.head() == head and stored_projection(bank) == before


def test_a_bank_made_meanwhile_by_another_process_is_written_not_replaced(tmp_path: Path) -> None:
    target = tmp_path / "b.db"
    calls = []

    def work(bank: Bank) -> int:
        calls.append(str(bank.location.path))
        if len(calls) == 1:  # another process makes the bank while this one stages its own
            with Bank.open(str(target), create=True) as other:
                other.start_task("A", tuning_name="theirs", task_id="theirs")
        task = bank.start_task("A", tuning_name="mine", task_id="mine")
        return len(bank.record(task, [oc("add", "k")]).appended)

    assert write_to_bank(str(target), work) == 1
    assert len(calls) == 2 and calls[1] == str(target)
    with Bank.open(str(target)) as bank:
        assert {t.task_id for t in bank.tasks()} == {"theirs", "mine"} and bank.verify().ok
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.db"]


def test_an_unreadable_source_is_a_bank_error_not_a_traceback(tmp_path: Path) -> None:
    from tunebank.bank.formats.jsonl import iter_events_file

    with pytest.raises(BankError, match="cannot read"):
        list(iter_events_file(tmp_path / "missing.jsonl"))
