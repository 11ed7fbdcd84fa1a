"""A reader never blocks a writer (issue 29): a user who may read a bank but not write it
opens it without leaving a -wal or -shm beside it (which the bank's owner could not write), and
still sees writes that are only in a -wal."""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from freezegun import freeze_time

from fixtures.demo_bank import build
from tunebank.bank import Bank
from tunebank.bank.store.readonly import read_only_connection

NOBODY = 65534


def _as_nobody(work: Callable[[], int]) -> int:
    """``work()`` run in a forked child as the user nobody; its result (an exit code < 256)."""
    pid = os.fork()
    if pid == 0:  # the child: everything it needs is imported already
        code = 1
        try:
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            code = work()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


@pytest.fixture
def shared_folder() -> Iterator[Path]:
    """A folder everyone may write (as /tmp is), holding a bank only root may write."""
    if os.geteuid() != 0:
        pytest.skip("needs root, to act as another user")
    folder = Path(tempfile.mkdtemp(prefix="tunebank-shared-"))
    folder.chmod(0o1777)
    with freeze_time("2026-12-06 08:00:00"):
        build(str(folder / "bank.db"))
    (folder / "bank.db").chmod(0o644)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _count_tasks(path: Path) -> Callable[[], int]:
    def work() -> int:
        conn = read_only_connection(str(path), timeout=5)
        try:
            return int(conn.execute("SELECT COUNT(*) FROM task").fetchone()[0])
        finally:
            conn.close()

    return work


def test_a_reader_who_cannot_write_the_bank_leaves_no_file_beside_it(shared_folder: Path) -> None:
    bank = shared_folder / "bank.db"
    assert _as_nobody(_count_tasks(bank)) == 2
    assert sorted(p.name for p in shared_folder.iterdir()) == ["bank.db"]
    with Bank.open(str(bank)) as opened:  # the owner still writes
        opened.rebuild()
        assert opened.verify().ok


def test_a_reader_reads_through_a_writers_wal_without_making_files(shared_folder: Path) -> None:
    bank = shared_folder / "bank.db"
    writer = sqlite3.connect(bank, isolation_level=None)
    try:
        writer.execute("BEGIN")
        writer.execute("SELECT COUNT(*) FROM task").fetchone()  # holds -wal and -shm open
        made = sorted(p.name for p in shared_folder.iterdir())
        assert _as_nobody(_count_tasks(bank)) == 2
        assert sorted(p.name for p in shared_folder.iterdir()) == made
        writer.execute("COMMIT")
    finally:
        writer.close()


def test_a_copied_bank_whose_last_writes_are_only_in_its_wal_reads_whole(tmp_path: Path) -> None:
    """The -wal copied without its -shm, into a folder the reader cannot write: SQLite could
    not read the -wal (it would need to make a -shm), and `immutable` would read the file as
    last checkpointed. The reader copies both to a folder of its own."""
    if os.geteuid() != 0:
        pytest.skip("needs root, to act as another user")
    source = tmp_path / "source.db"
    with freeze_time("2026-12-06 08:00:00"):
        build(str(source))
    writer = sqlite3.connect(source, isolation_level=None)
    writer.execute("PRAGMA wal_autocheckpoint=0")
    writer.execute("INSERT INTO bank_meta (name, value) VALUES ('probe', 'only in the wal')")
    folder = Path(tempfile.mkdtemp(prefix="tunebank-copied-"))
    try:
        shutil.copyfile(source, folder / "bank.db")
        shutil.copyfile(f"{source}-wal", folder / "bank.db-wal")
        folder.chmod(0o755)  # nobody may read, not write

        def probe() -> int:
            conn = read_only_connection(str(folder / "bank.db"), timeout=5)
            try:
                row = conn.execute("SELECT value FROM bank_meta WHERE name = 'probe'").fetchone()
                return 0 if row == ("only in the wal",) else 3
            finally:
                conn.close()

        assert _as_nobody(probe) == 0
        assert sorted(p.name for p in folder.iterdir()) == ["bank.db", "bank.db-wal"]
    finally:
        writer.close()
        shutil.rmtree(folder, ignore_errors=True)
