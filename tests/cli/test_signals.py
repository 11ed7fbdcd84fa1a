"""Signals during `bank import` (issue 29): SIGTERM or SIGINT ends it with one line saying
whether anything was imported, exit code 130, no worker process left and no temporary file
left; SIGKILL leaves no worker either (it dies with its parent)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.workload import events
from tunebank.bank import Bank

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def big_events(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An events file of 40,000 events (about 38 MB): read in a forked worker (over 4 MiB), and
    long enough to import (about 2.5 s) for a signal to land in the middle."""
    folder = tmp_path_factory.mktemp("signals")
    with Bank.open(str(folder / "source.db"), create=True) as bank:
        bank.append_stream(lambda: (event.row() for event in events(40_000)), checked=True)
        with (folder / "big.jsonl").open("w", encoding="utf-8") as handle:
            from tunebank.bank.formats.jsonl import write_event_rows

            write_event_rows(handle, bank.event_rows(), bank.bank_id)
    return folder / "big.jsonl"


def _importers(marker: str) -> list[int]:
    """The processes whose command line holds ``marker`` (the import and its worker)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker in (entry / "cmdline").read_bytes().decode(errors="replace"):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def _start_import(source: Path, db: Path) -> subprocess.Popen[str]:
    command = [sys.executable, "-c", "from tunebank.cli.main import run; run()", "import", str(source),
               "--db", str(db)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)


def _wait_for_worker(marker: str, parent: int) -> None:
    """Until the import has forked its worker (two processes), or 20 s."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and len(_importers(marker)) < 2:
        time.sleep(0.02)
    assert len(_importers(marker)) >= 2, "the import never forked its worker"
    time.sleep(0.3)  # into the appending


def _gone(marker: str) -> bool:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if not _importers(marker):
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_during_an_import_is_one_line_and_leaves_nothing(
        signum: int, big_events: Path, tmp_path: Path) -> None:
    db = tmp_path / f"new-{signum}.db"
    child = _start_import(big_events, db)
    _wait_for_worker(str(db), child.pid)
    child.send_signal(signum)
    _, stderr = child.communicate(timeout=60)
    lines = stderr.strip().splitlines()
    assert child.returncode == 130, stderr
    assert lines == ["bank: interrupted; nothing was imported, the bank is as it was"], stderr
    assert _gone(str(db)), "a worker outlived the import"
    assert sorted(p.name for p in tmp_path.iterdir()) == [], "temporary files were left"


def test_a_sigkill_during_an_import_leaves_no_worker(big_events: Path, tmp_path: Path) -> None:
    db = tmp_path / "killed.db"
    child = _start_import(big_events, db)
    _wait_for_worker(str(db), child.pid)
    child.kill()
    child.communicate(timeout=60)
    assert _gone(str(db)), "the worker outlived its killed parent"


def test_a_sigkilled_imports_staging_files_go_with_the_next_write(big_events: Path,
                                                                  tmp_path: Path) -> None:
    """SIGKILL runs no `finally`: the staging bank of a killed import into a new bank stays,
    until the next write to that bank removes it (its process is gone)."""
    db = tmp_path / "new.db"
    child = _start_import(big_events, db)
    _wait_for_worker(str(db), child.pid)
    child.kill()
    child.communicate(timeout=60)
    assert _gone(str(db))
    assert any(p.name.startswith(".new.db.") for p in tmp_path.iterdir())
    from typer.testing import CliRunner

    from tunebank.cli.main import app

    result = CliRunner().invoke(app, ["init", "--db", str(db)])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new.db"]
