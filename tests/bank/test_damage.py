"""verify and rebuild hide no damage (issue 16): a damaged index, a cut log, a forged task.

A damaged SQLite index hides events from the queries that use it; verify asks the database to
check itself and names the repair. A log shorter than the projections (its last events cut),
or longer (a task appended behind tunebank's back with correct hashes), is refused by rebuild
unless forced, and then rebuild lists what it threw away. A head anchored elsewhere catches a
cut and a rewritten history.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.conftest import oc
from tests.seams import tamper
from tunebank.bank import Bank, BankError
from tunebank.bank.audit.verify import VerifyReport
from tunebank.bank.formats.jsonl import Anchor
from tunebank.cli.main import app

runner = CliRunner()
INDEX = "ix_events_repo_key"


def _bank(path: Path, tasks: int = 3) -> None:
    with Bank.open(str(path), create=True) as bank:
        for round_ in range(tasks):
            task = bank.start_task("Ascend310", tuning_name=f"r{round_}")
            bank.record(task, [oc("add", f"{round_}-{k}") for k in range(30)])
            bank.finish_task(task)


def _integrity(path: Path) -> list[str]:
    with sqlite3.connect(path) as conn:
        return [row[0] for row in conn.execute("PRAGMA integrity_check")]


def _damage_index(path: Path) -> None:
    """Flip 8 bytes in a page of the repo_key index, at the first place (from the page's end,
    where its cells are) that SQLite's own check reports as rows missing from that index."""
    with sqlite3.connect(path) as conn:
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (INDEX,)).fetchone()[0]
    original = path.read_bytes()
    for back in range(16, page_size, 8):
        data = bytearray(original)
        at = (root - 1) * page_size + page_size - back
        data[at:at + 8] = bytes(b ^ 0x01 for b in data[at:at + 8])
        path.write_bytes(bytes(data))
        try:
            found = _integrity(path)
        except sqlite3.DatabaseError:
            continue
        if any(f"missing from index {INDEX}" in line for line in found):
            return
    raise AssertionError("no flip of the index page damaged it")


def test_a_damaged_index_is_found_named_and_repaired(tmp_path: Path) -> None:
    path = tmp_path / "bank.db"
    _bank(path)
    keys = {}
    with Bank.open(str(path)) as bank:
        for stored in bank.events():
            if stored.event.repo_key:
                keys[stored.event.repo_key] = keys.get(stored.event.repo_key, 0) + 1
    _damage_index(path)
    with Bank.open(str(path)) as bank:
        hidden = [k for k, n in keys.items() if len(bank.history(repo_key=k)) != n]
        report = bank.verify()
    assert hidden, "the damage hides no key's history: the test damaged nothing that matters"
    assert not report.ok
    assert any(p.startswith("database structure:") and INDEX in p for p in report.problems)
    assert report.repair is not None and "bank rebuild --reindex" in report.repair
    refused = runner.invoke(app, ["rebuild", "--db", str(path)])
    assert refused.exit_code == 1 and "rebuild refused" in refused.stderr
    assert "--reindex" in refused.stderr
    shown = runner.invoke(app, ["verify", "--db", str(path)])
    assert shown.exit_code == 1 and "repair: `bank rebuild --reindex`" in shown.stdout
    repaired = runner.invoke(app, ["rebuild", "--reindex", "--db", str(path)])
    assert repaired.exit_code == 0, repaired.output
    with Bank.open(str(path)) as bank:
        assert bank.verify().ok
        assert all(len(bank.history(repo_key=k)) == n for k, n in keys.items())


def test_every_backend_checks_its_own_structure(bank: Bank) -> None:
    task = bank.start_task("Ascend310", tuning_name="t")
    bank.record(task, [oc("add", "1")])
    report = bank.verify()
    assert report.ok and report.structure_unchecked is None, report.structure_unchecked


def _cut_last_event(path: Path) -> None:
    with Bank.open(str(path)) as bank:
        tamper(bank, "DELETE FROM events WHERE seq = (SELECT MAX(seq) FROM events)")


def _append_behind_its_back(path: Path, scratch: Path) -> int:
    """Append a whole task to the log with correct ids and hashes, as a forger with the bank
    file would: made by tunebank in a copy, then its rows copied over, projections untouched.
    Returns how many rows were forged."""
    twin = scratch / "twin.db"
    shutil.copyfile(path, twin)
    with Bank.open(str(twin)) as bank:
        head = bank.head()
        task = bank.start_task("Ascend310", tuning_name="forged")
        bank.record(task, [oc("add", "0-0", after=1.0)])
        bank.finish_task(task)
    with sqlite3.connect(twin) as source:
        rows = source.execute("SELECT * FROM events WHERE seq > ? ORDER BY seq", (head,)).fetchall()
    with sqlite3.connect(path) as target:
        target.executemany(f"INSERT INTO events VALUES ({','.join('?' * len(rows[0]))})", rows)
    return len(rows)


def _anchored(tmp_path: Path) -> tuple[Path, VerifyReport, str]:
    """A bank, its verify report, and its head as `bank verify --head` prints it."""
    path = tmp_path / "bank.db"
    _bank(path)
    with Bank.open(str(path)) as bank:
        before = bank.verify()
    return path, before, f"{before.head_seq}:{before.head_hash}"


def test_a_cut_log_is_refused_by_rebuild_unless_forced_and_caught_by_the_anchor(
        tmp_path: Path) -> None:
    path, before, anchor = _anchored(tmp_path)
    _cut_last_event(path)
    with Bank.open(str(path)) as bank:
        report = bank.verify()
        assert any(f"events {before.head_seq}..{before.head_seq} are gone from the log" in p
                   for p in report.problems)
        with pytest.raises(BankError, match="rebuild refused"):
            bank.rebuild()
        assert not bank.verify(Anchor.parse(anchor)).ok
        assert not bank.verify(Anchor.parse(before.head_hash)).ok  # a bare hash stands nowhere
    forced = runner.invoke(app, ["rebuild", "--force", "--db", str(path)])
    assert forced.exit_code == 0, forced.output
    assert "adopted despite verify (--force): the log ends at seq" in forced.stdout
    assert "replaced: task " in forced.stdout  # the cut task_finished: the task is open again
    # verify is clean again, but the anchor still says this is not the history it was
    assert runner.invoke(app, ["verify", "--db", str(path)]).exit_code == 0
    caught = runner.invoke(app, ["verify", "--expect-head", anchor, "--db", str(path)])
    assert caught.exit_code == 1 and "is not in the log" in caught.stdout


def test_a_forged_task_is_refused_by_rebuild_and_the_anchor_says_what_follows_it(
        tmp_path: Path) -> None:
    path, before, anchor = _anchored(tmp_path)
    forged = _append_behind_its_back(path, tmp_path)
    with Bank.open(str(path)) as bank:
        report = bank.verify(Anchor.parse(anchor))
        assert any("tunebank did not append them" in p for p in report.problems)
        assert report.anchor == f"seq {before.head_seq} matches the anchor; {forged} event(s) follow it"
        assert bank.verify(Anchor.parse(before.head_hash)).anchor == report.anchor
        with pytest.raises(BankError, match="rebuild refused"):
            bank.rebuild()
        assert bank.verify().problems == report.problems  # the refusal changed nothing


def test_a_forged_task_in_place_of_a_cut_one_fails_the_anchor(tmp_path: Path) -> None:
    path, before, anchor = _anchored(tmp_path)
    _cut_last_event(path)
    assert runner.invoke(app, ["rebuild", "--force", "--db", str(path)]).exit_code == 0
    _append_behind_its_back(path, tmp_path)  # the log is as long as the anchored one again
    assert runner.invoke(app, ["rebuild", "--force", "--db", str(path)]).exit_code == 0
    assert runner.invoke(app, ["verify", "--db", str(path)]).exit_code == 0  # self-consistent
    caught = runner.invoke(app, ["verify", "--expect-head", anchor, "--db", str(path)])
    assert caught.exit_code == 1
    assert f"--expect-head: seq {before.head_seq} has hash" in caught.stdout
