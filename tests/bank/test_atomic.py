"""Atomic writes: the old file or the new one, never a torn mix, with ordinary permissions."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tunebank.bank.atomic import atomic_file, write_json_atomic, write_text_atomic


def test_a_new_file_gets_what_the_umask_allows(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        write_json_atomic(tmp_path / "r.json", {"a": 1})
    finally:
        os.umask(old)
    assert (tmp_path / "r.json").stat().st_mode & 0o777 == 0o644
    assert (tmp_path / "r.json").read_text() == '{\n  "a": 1\n}\n'


def test_a_replaced_file_keeps_its_permissions(tmp_path: Path) -> None:
    target = tmp_path / "r.json"
    target.write_text("old")
    target.chmod(0o640)
    write_text_atomic(target, "new")
    assert target.read_text() == "new" and target.stat().st_mode & 0o777 == 0o640


def test_an_error_while_writing_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "r.json"
    target.write_text("old")
    with pytest.raises(RuntimeError), atomic_file(target) as handle:
        handle.write("half of the new")
        raise RuntimeError("killed")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_an_exclusive_write_never_replaces_a_file(tmp_path: Path) -> None:
    import json

    target = tmp_path / "t.json"
    write_json_atomic(target, {"a": 1}, exclusive=True)
    with pytest.raises(FileExistsError):
        write_json_atomic(target, {"a": 2}, exclusive=True)
    assert json.loads(target.read_text()) == {"a": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["t.json"]  # no temporary file left
