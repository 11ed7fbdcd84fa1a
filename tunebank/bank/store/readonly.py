"""Reading an SQLite bank without writing beside it, with the standard library alone (the
light read path of bank/quick.py uses it too)."""

from __future__ import annotations

import atexit
import shutil
import sqlite3
import tempfile
from pathlib import Path
from urllib.parse import quote


def read_only_connection(path: str, timeout: float) -> sqlite3.Connection:
    """A read-only connection to an SQLite file that creates no file beside it: a reader that
    cannot write the bank must not leave a -wal or -shm that the bank's owner cannot write
    (every later write would fail with "attempt to write a readonly database").

    - No -wal and no -shm: nothing is pending outside the file (SQLite checkpoints and removes
      them when the last writer closes), so it is read as it is, ``immutable=1``.
    - Both there (a writer has the bank open): ``mode=ro`` reads through them, creating none.
    - A -wal without its -shm (a copied bank, or a writer killed on a machine since rebooted):
      the last writes are only in the -wal, which SQLite cannot read without a -shm it would
      have to create. The two files are copied to a private folder and read there.
    """
    wal, shm = Path(f"{path}-wal"), Path(f"{path}-shm")
    base = f"file:{quote(path)}?mode=ro"
    if not wal.exists() and not shm.exists():
        return _connect_ro(base + "&immutable=1", timeout)
    if shm.exists():
        try:
            conn = _connect_ro(base, timeout)
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
            return conn
        except sqlite3.OperationalError:  # a -shm this user cannot even read
            pass
    if wal.exists() and wal.stat().st_size > 0:
        return _private_copy(path, timeout)
    return _connect_ro(base + "&immutable=1", timeout)


def _connect_ro(uri: str, timeout: float) -> sqlite3.Connection:
    return sqlite3.connect(uri, uri=True, timeout=timeout, check_same_thread=False)


def _private_copy(path: str, timeout: float) -> sqlite3.Connection:
    """The bank and its -wal copied to a folder of this process's own, and opened there: the
    copy's -shm is made in that folder, the original's folder is left untouched. The folder
    goes when the process ends (the connection keeps the files open meanwhile)."""
    folder = Path(tempfile.mkdtemp(prefix="tunebank-read-"))
    atexit.register(shutil.rmtree, folder, True)
    copy = folder / Path(path).name
    shutil.copyfile(path, copy)
    shutil.copyfile(f"{path}-wal", f"{copy}-wal")
    return sqlite3.connect(str(copy), timeout=timeout, check_same_thread=False)
