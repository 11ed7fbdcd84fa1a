"""The guard that fails a test run which leaves, removes or changes a file in the repository."""

from __future__ import annotations

import os
from pathlib import Path

from tests.repo_guard import RepoSnapshot


def test_snapshot_sees_new_removed_and_changed_files_but_not_tool_caches(tmp_path: Path) -> None:
    (tmp_path / "kept.txt").write_text("a")
    (tmp_path / "gone.txt").write_text("b")
    (tmp_path / "edited.txt").write_text("c")
    before = RepoSnapshot.take(tmp_path)
    assert before.changes(tmp_path) == []
    (tmp_path / "gone.txt").unlink()
    (tmp_path / "edited.txt").write_text("cc")
    (tmp_path / "new").mkdir()
    (tmp_path / "new" / "stray.json").write_text("{}")
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "__pycache__" / "x.pyc").write_bytes(b"")
    os.utime(tmp_path / "kept.txt", ns=(1, (tmp_path / "kept.txt").stat().st_mtime_ns))
    assert before.changes(tmp_path) == ["edited.txt", "gone.txt", "new/stray.json"]
