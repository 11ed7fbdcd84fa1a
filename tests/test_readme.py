"""The README's two commands stay true: CI runs the test one, and the main job works."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    block = text.split("```sh\n", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.strip()]


def test_readme_starts_with_exactly_two_commands() -> None:
    commands = readme_commands()
    assert len(commands) == 2
    assert all(c.startswith("pip install -e ") for c in commands)


def test_ci_runs_the_readme_test_command() -> None:
    test_command = readme_commands()[1].split(" && ", 1)[1]
    assert test_command in (ROOT / ".ci" / "run").read_text()


def test_main_job_runs(tmp_path: Path) -> None:
    main_job = readme_commands()[0].split(" && ", 1)[1]
    db = tmp_path / "demo.db"
    for step in main_job.split(" && "):
        argv = shlex.split(step.replace("demo.db", str(db)))
        if argv[0] == "python":
            argv[0] = sys.executable
        elif argv[0] == "bank":
            argv = [sys.executable, "-c", "from cli.main import run; run()", *argv[1:]]
        done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stderr
    assert "demo_v2" in done.stdout
    listed = subprocess.run(
        [sys.executable, "-c", "from cli.main import run; run()", "tasks", "--db", str(db), "--json"],
        cwd=ROOT, capture_output=True, text=True, check=True)
    assert len(json.loads(listed.stdout)) == 2
