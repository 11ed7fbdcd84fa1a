"""The light read path: one task of an SQLite bank file, read with the standard library alone.

`bank summary` is run by scripts, often once per task; loading SQLAlchemy and SQLModel costs
most of its start-up. Here a bank file is opened read-only with ``sqlite3``, and only when it is
a bank of this schema version and the task is named without doubt is the task returned. Any
other case (a server URL, no file, another version, no or several matching tasks, any database
error) returns ``None``, and the caller goes the full way, which says what is wrong exactly as
every other command does.
"""

from __future__ import annotations

import json
import sqlite3

from tunebank.bank.errors import BankError
from tunebank.bank.location import resolve
from tunebank.bank.store.readonly import read_only_connection
from tunebank.bank.store.schema.version import SCHEMA_VERSION
from tunebank.bank.tasks import TaskView


def quick_task(db: str | None, task_ref: str) -> TaskView | None:
    """The task ``task_ref`` names (its id, or the one id starting with it) in the SQLite bank
    ``db`` resolves to, or ``None`` when the full path must decide."""
    try:
        location = resolve(db)
    except BankError:
        return None
    if location.path is None or not location.exists:
        return None
    try:
        conn = read_only_connection(str(location.path), timeout=5)  # leaves no file beside it
    except (sqlite3.Error, OSError):
        return None
    try:
        version = conn.execute("SELECT value FROM bank_meta WHERE name = 'schema_version'").fetchone()
        if version is None or version[0] != str(SCHEMA_VERSION):
            return None
        escaped = task_ref.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        cursor = conn.execute("SELECT * FROM task WHERE task_id LIKE ? ESCAPE '\\' LIMIT 2",
                              (escaped + "%",))
        names = [column[0] for column in cursor.description]
        rows = cursor.fetchall()
        exact = conn.execute("SELECT * FROM task WHERE task_id = ?", (task_ref,)).fetchone()
    except sqlite3.Error:
        return None
    finally:
        conn.close()
    row = exact if exact is not None else (rows[0] if len(rows) == 1 else None)
    if row is None:
        return None
    values = dict(zip(names, row, strict=True))
    values["failed_operators"] = tuple(json.loads(values["failed_operators"]))
    try:
        return TaskView(**values)
    except TypeError:  # columns this tunebank does not know: let the full path decide
        return None


def quick_socs(db: str | None) -> list[str]:
    """The chips an SQLite bank file holds tasks or policies of, sorted; ``[]`` for anything
    else (a server URL, no file, another schema version, a database error). Shell completion
    asks this on every Tab, so it must be quick and never write or fail."""
    try:
        location = resolve(db)
    except BankError:
        return []
    if location.path is None or not location.exists or not location.path.is_file():
        return []
    try:
        conn = read_only_connection(str(location.path), timeout=1)
    except (sqlite3.Error, OSError):
        return []
    try:
        version = conn.execute("SELECT value FROM bank_meta WHERE name = 'schema_version'").fetchone()
        if version is None or version[0] != str(SCHEMA_VERSION):
            return []
        rows = conn.execute("SELECT soc_version FROM task UNION SELECT soc_version FROM policy"
                            " ORDER BY 1").fetchall()
    except sqlite3.Error:
        return []
    finally:
        conn.close()
    return [row[0] for row in rows]
