"""The README's two commands stay true: CI runs the test one, and the main job works."""

from __future__ import annotations

import json
import os
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


def test_main_job_runs_and_a_second_run_measures_nothing(tmp_path: Path) -> None:
    main_job = readme_commands()[0].split(" && ", 1)[1]
    argv = shlex.split(main_job.replace("fixtures/", f"{ROOT}/fixtures/"))
    assert argv[0] == "bank"
    command = [sys.executable, "-c", "from tunebank.cli.main import run; run()", *argv[1:]]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # this checkout, wherever the package is installed
    first = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, check=False)
    assert first.returncode == 0, first.stderr
    assert "process finished. Performance improved by" in first.stdout
    second = subprocess.run([*command, "--json"], cwd=tmp_path, env=env, capture_output=True,
                            text=True, check=True)
    report = json.loads(second.stdout)
    assert report["measurements"] == 0
    assert report["repo_summary"]["repo_hit_num"] == report["repo_summary"]["total_num"]
    assert list(tmp_path.glob("aoe_result_opat_*.json"))


def test_the_python_example_runs(tmp_path: Path) -> None:
    """The README's "From Python" block, run as it stands in a fresh interpreter."""
    text = (ROOT / "README.md").read_text()
    block = text.split("```python\n", 1)[1].split("```", 1)[0]
    env = {key: value for key, value in os.environ.items()
           if key not in ("TUNEBANK_DB", "TUNE_BANK_PATH", "ASCEND_WORK_PATH", "ASCEND_CACHE_PATH")}
    done = subprocess.run([sys.executable, "-c", block], cwd=tmp_path, capture_output=True, text=True,
                          env={**env, "PYTHONPATH": str(ROOT)}, check=False)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout.strip().replace("'", '"'))
    assert summary["repo_unsatisfied_num"] == summary["total_num"] == 1
    assert (tmp_path / "demo.db").is_file()
