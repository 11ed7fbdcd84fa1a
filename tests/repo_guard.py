"""A snapshot of the repository folder, so the suite can prove it wrote nothing there."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# What Python, pip and the linters keep beside the code; the tests' own files are not in here.
TOOL_DIRS = {".git", "__pycache__", ".mypy_cache", ".ruff_cache", "tunebank.egg-info"}


@dataclass(frozen=True)
class RepoSnapshot:
    """Every file under the repository folder with its size and modification time."""

    files: dict[str, tuple[int, int]]

    @classmethod
    def take(cls, root: Path = ROOT) -> RepoSnapshot:
        files: dict[str, tuple[int, int]] = {}
        for folder, dirs, names in os.walk(root):
            dirs[:] = [d for d in dirs if d not in TOOL_DIRS]
            for name in names:
                path = Path(folder) / name
                try:
                    stat = path.stat()
                except FileNotFoundError:
                    continue
                files[str(path.relative_to(root))] = (stat.st_size, stat.st_mtime_ns)
        return cls(files)

    def changes(self, root: Path = ROOT) -> list[str]:
        """The files added, removed or modified since the snapshot, sorted."""
        now = RepoSnapshot.take(root).files
        return sorted(name for name in set(now) | set(self.files)
                      if now.get(name) != self.files.get(name))
