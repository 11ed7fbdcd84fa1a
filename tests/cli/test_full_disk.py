"""A full disk (issue 29): each write that meets it is one line naming the bank or the file,
and leaves nothing half-written: no half a tree, no temporary file, no 4 KiB "bank" that
every later command would call an empty database.

The disk is a small tmpfs mounted for the test (root only; under CI=true its absence fails)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path

import pytest
from freezegun import freeze_time
from typer.testing import CliRunner

from fixtures.demo_bank import build
from tunebank.cli.main import app

runner = CliRunner()


@pytest.fixture
def full_disk() -> Iterator[Path]:
    """A 1 MiB tmpfs, filled to its last byte by a filler file the test may remove."""
    folder = Path(tempfile.mkdtemp(prefix="tunebank-full-"))
    mounted = os.geteuid() == 0 and subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(folder)],
        capture_output=True, check=False).returncode == 0
    if not mounted:
        folder.rmdir()
        why = "a tmpfs cannot be mounted here (needs root and mount permission)"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"CI=true: {why}")
        pytest.skip(why)
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=False)
        shutil.rmtree(folder, ignore_errors=True)


def _fill(folder: Path, leave_kib: int = 0) -> None:
    """Fill the disk to its last byte, then give ``leave_kib`` KiB back."""
    with (folder / "filler").open("wb") as handle:
        try:
            while True:
                handle.write(b"\0" * 65536)
                handle.flush()
        except OSError:
            pass
        with suppress(OSError):
            handle.close()
    if leave_kib:
        filler = folder / "filler"
        os.truncate(filler, filler.stat().st_size - leave_kib * 1024)


def _refused(*args: str) -> str:
    result = runner.invoke(app, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code == 1, result.output
    (line,) = result.stderr.strip().splitlines()
    assert (line.startswith("bank: error: ") and "No space left on device" in line) or \
        "disk is full" in line, line
    return line


@pytest.fixture
def bank(tmp_path: Path) -> Path:
    path = tmp_path / "bank.db"
    with freeze_time("2026-12-06 08:00:00"):
        build(str(path))
    return path


def test_a_new_bank_on_a_full_disk_leaves_no_file(full_disk: Path) -> None:
    _fill(full_disk)
    db = full_disk / "b.db"
    line = _refused("init", "--db", str(db))
    assert str(db) in line
    assert sorted(p.name for p in full_disk.iterdir()) == ["filler"]


@pytest.mark.parametrize("free_kib", [20, 40])
def test_a_new_bank_on_a_nearly_full_disk_says_the_disk_is_full(full_disk: Path,
                                                                 free_kib: int) -> None:
    """Issue 41: with a few pages free SQLite makes the file, then fails on the -wal or -shm,
    and said "disk I/O error" (20 KiB) or "database or disk is full" (40 KiB) in its words."""
    _fill(full_disk, free_kib)
    db = full_disk / "b.db"
    line = _refused("init", "--db", str(db))
    assert line.startswith(f"bank: error: bank {db}: its disk is full"), line
    assert sorted(p.name for p in full_disk.iterdir()) == ["filler"]


@pytest.mark.parametrize("export", ["jsonl", "csv", "aoe-repo"])
def test_an_export_to_a_full_disk_leaves_nothing_half_written(export: str, bank: Path,
                                                              full_disk: Path) -> None:
    _fill(full_disk)
    out = full_disk / "deep" / ("tree" if export == "aoe-repo" else f"out.{export}")
    args = ["export", "--format", export, "--out", str(out), "--db", str(bank)]
    if export == "aoe-repo":
        args += ["--core-num", "8"]
    line = _refused(*args)
    assert str(full_disk) in line
    left = sorted(str(p.relative_to(full_disk)) for p in full_disk.rglob("*"))
    assert left == ["filler"], left  # no file, and no folder made for them


def test_a_report_to_a_full_disk_is_one_line(bank: Path, full_disk: Path) -> None:
    _fill(full_disk)
    line = _refused("report", "--out", str(full_disk / "r.html"), "--db", str(bank))
    assert "r.html" in line
    assert sorted(p.name for p in full_disk.iterdir()) == ["filler"]


def test_an_import_into_a_new_bank_on_a_full_disk_names_the_bank(full_disk: Path) -> None:
    source = Path(__file__).resolve().parents[2] / "fixtures" / "aoe"
    files = sorted(str(p) for p in source.glob("*.json"))
    _fill(full_disk)
    db = full_disk / "b.db"
    line = _refused("import", *files, "--soc-version", "Ascend310", "--db", str(db))
    assert str(db) in line and ".new" not in line, line
    assert sorted(p.name for p in full_disk.iterdir()) == ["filler"]


def test_a_bank_on_a_full_disk_is_still_read_and_a_write_says_why_not(full_disk: Path) -> None:
    db = full_disk / "b.db"
    with freeze_time("2026-12-06 08:00:00"):
        build(str(db))
    _fill(full_disk)
    for command in (["tasks"], ["query"], ["verify"]):
        result = runner.invoke(app, [*command, "--db", str(db)])
        assert result.exit_code == 0, result.output
    source = Path(__file__).resolve().parents[2] / "fixtures" / "aoe"
    result = runner.invoke(app, ["import", str(next(source.glob("*.json"))), "--soc-version",
                                 "Ascend310", "--db", str(db)])
    assert result.exit_code == 1
    (line,) = result.stderr.strip().splitlines()
    assert line == f"bank: error: bank {db}: no room on its disk for SQLite's -shm file (a full " \
                   "disk?): it can be read, not changed", line
