"""A large events file is read in a forked worker: the bank it makes is the one reading it here
makes, and a bad line anywhere is the same one-line error with nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

import tunebank.bank.formats.forked as forked
from tests.bank.test_streams import _events_file, _workload
from tests.seams import stored_projection
from tunebank.bank import Bank
from tunebank.bank.formats.jsonl import EventFileError, EventsFileInfo, iter_events_file
from tunebank.cli.main import app

runner = CliRunner()


@pytest.fixture
def always_fork(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fork for any file, however small (the tests' files are kilobytes)."""
    monkeypatch.setattr(forked, "FORK_FROM_BYTES", 0)
    monkeypatch.setattr(forked, "BATCH", 7)  # many messages, the last one short


def test_the_worker_gives_the_events_and_what_it_found(tmp_path: Path, always_fork: None) -> None:
    path = _events_file(tmp_path, _workload(3))
    here, there = EventsFileInfo(), EventsFileInfo()
    read_here = list(iter_events_file(path, None, here))
    read_there = list(forked.stream_events_file(path, None, there))
    assert forked.forks(path)
    assert read_there == [stored.row() for stored in read_here]  # every column, as the file has it
    assert there == here and there.events == len(read_here) > 100


def test_an_import_through_the_worker_makes_the_same_bank(tmp_path: Path, always_fork: None) -> None:
    path = _events_file(tmp_path, _workload(4))
    assert runner.invoke(app, ["import", str(path), "--db", str(tmp_path / "forked.db")]).exit_code == 0
    forked.FORK_FROM_BYTES = 1 << 60  # the same file read in this process
    assert runner.invoke(app, ["import", str(path), "--db", str(tmp_path / "here.db")]).exit_code == 0
    with Bank.open(str(tmp_path / "forked.db")) as one, Bank.open(str(tmp_path / "here.db")) as two:
        assert one.head() == two.head() and stored_projection(one) == stored_projection(two)
        assert [s.hash for s in one.events()] == [s.hash for s in two.events()]
        assert one.verify().ok


def test_a_bad_line_in_the_middle_is_the_same_error_and_writes_nothing(
        tmp_path: Path, always_fork: None) -> None:
    path = _events_file(tmp_path, _workload(5))
    lines = path.read_text(encoding="utf-8").splitlines()
    lines[len(lines) // 2] = lines[len(lines) // 2].replace('"hash":"', '"hash":"0', 1)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(EventFileError) as here:
        list(iter_events_file(path))
    with pytest.raises(EventFileError) as there:
        list(forked.stream_events_file(path, None, EventsFileInfo()))
    assert str(there.value) == str(here.value) and f"line {len(lines) // 2 + 1}" in str(here.value)
    db = tmp_path / "b.db"
    Bank.open(str(db), create=True).close()
    result = runner.invoke(app, ["import", str(path), "--db", str(db)])
    assert result.exit_code == 1 and str(here.value) in result.stderr.replace("\n", " ")
    with Bank.open(str(db)) as bank:
        assert bank.head() == 0


def test_a_fold_that_stops_early_stops_the_worker(tmp_path: Path, always_fork: None) -> None:
    path = _events_file(tmp_path, _workload(6))
    stream = forked.stream_events_file(path, None, EventsFileInfo())
    next(stream)
    stream.close()  # as when the append fails on the first event: no worker, no thread left
    import threading

    assert [t for t in threading.enumerate() if t.name.startswith("Thread") and t.daemon] == []
