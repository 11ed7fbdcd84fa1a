"""Where a bank lives: --db, TUNEBANK_DB, then AOE's folders, and clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from tunebank.bank import Bank, BankLocationError
from tunebank.bank.location import resolve


def test_explicit_beats_environment(tmp_path: Path) -> None:
    env = {"TUNEBANK_DB": str(tmp_path / "env.db"), "TUNE_BANK_PATH": str(tmp_path / "tb")}
    assert resolve(str(tmp_path / "x.db"), env).path == tmp_path / "x.db"
    assert resolve(None, env).path == tmp_path / "env.db"


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"TUNE_BANK_PATH": "/banks", "ASCEND_CACHE_PATH": "/cache", "HOME": "/h"},
         "/banks/bank.db"),
        ({"ASCEND_CACHE_PATH": "/cache", "HOME": "/h"}, "/cache/aoe_data/bank.db"),
        ({"HOME": "/h"}, "/h/Ascend/latest/data/aoe/custom/bank.db"),
    ],
)
def test_aoe_folder_order(env: dict[str, str], expected: str) -> None:
    assert str(resolve(None, env).path) == expected


def test_folder_given_as_db_holds_bank_db(tmp_path: Path) -> None:
    assert resolve(str(tmp_path)).path == tmp_path / "bank.db"


def test_unsupported_scheme() -> None:
    with pytest.raises(BankLocationError, match="scheme 'mysql' is not supported"):
        resolve("mysql://x/y")


def test_missing_bank_is_not_created_by_readers(tmp_path: Path) -> None:
    with pytest.raises(BankLocationError, match="no bank at"):
        Bank.open(str(tmp_path / "absent.db"))
    assert not (tmp_path / "absent.db").exists()


def test_created_on_first_write_in_aoe_folder(tmp_path: Path) -> None:
    env = {"ASCEND_CACHE_PATH": str(tmp_path / "cache")}
    with Bank.open(create=True, env=env) as bank:
        assert bank.location.path == tmp_path / "cache" / "aoe_data" / "bank.db"
    assert (tmp_path / "cache" / "aoe_data" / "bank.db").exists()


def test_folder_that_cannot_be_made(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(BankLocationError, match="cannot be created"):
        Bank.open(create=True, env={"ASCEND_CACHE_PATH": str(blocker / "sub")})


@pytest.mark.parametrize("source", ["--db", "TUNEBANK_DB", "TUNE_BANK_PATH"])
def test_a_folder_a_user_named_is_never_made(source: str, tmp_path: Path) -> None:
    missing = tmp_path / "no" / "such"
    db = str(missing / "x.db") if source == "--db" else None
    env = {"TUNEBANK_DB": str(missing / "x.db")} if source == "TUNEBANK_DB" else \
        {"TUNE_BANK_PATH": str(missing)}
    with pytest.raises(BankLocationError, match=f"bank folder {missing} \\(from {source}\\) does "
                                                "not exist"):
        Bank.open(db, create=True, env=env)
    assert not (tmp_path / "no").exists()


def test_file_that_is_not_a_bank(tmp_path: Path) -> None:
    other = tmp_path / "other.db"
    import sqlite3

    sqlite3.connect(other).execute("CREATE TABLE t (x)").connection.close()
    with pytest.raises(BankLocationError, match="not a tunebank bank"):
        Bank.open(str(other))


def test_postgresql_urls_use_psycopg() -> None:
    for text in ("postgresql://u@h/db", "postgres://u@h/db", "postgresql+psycopg://u@h/db"):
        location = resolve(text)
        assert location.url == "postgresql+psycopg://u@h/db" and location.path is None


def test_a_new_bank_file_is_in_wal_mode_and_opening_one_changes_nothing(tmp_path: Path) -> None:
    import hashlib
    import sqlite3

    path = tmp_path / "b.db"
    with Bank.open(str(path), create=True):
        pass
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    with Bank.open(str(path)) as bank:
        bank.verify()
    with Bank.open(str(path), create=True) as bank:
        bank.tasks()
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before


@pytest.mark.parametrize("kind", ["sqlite-file", "postgresql"])
def test_an_empty_database_points_to_bank_init(kind: str, tmp_path: Path,
                                               request: pytest.FixtureRequest) -> None:
    from tunebank.bank import Bank
    from tunebank.bank.errors import BankLocationError

    if kind == "sqlite-file":
        url = str(tmp_path / "empty.db")
        Path(url).write_bytes(b"")
    else:
        url = str(request.getfixturevalue("postgres_url"))
    with pytest.raises(BankLocationError, match="an empty database, not a bank yet; `bank init` "
                                                "with the same --db makes one"):
        Bank.open(url)
