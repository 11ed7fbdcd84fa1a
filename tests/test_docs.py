"""The docs' examples run as they are written: the campaign file of docs/tuning.md (issue 31: its
input name was not the bundled model's, so it did not run) and the transcript of `bank diff` in
docs/exchange.md."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.cli.test_diff import bank_with
from tunebank.cli.main import app

ROOT = Path(__file__).resolve().parent.parent


def block_after(document: Path, marker: str, language: str) -> str:
    """The first ```LANGUAGE block after ``marker`` in ``document``."""
    text = document.read_text(encoding="utf-8").split(marker, 1)[1]
    return text.split(f"```{language}\n", 1)[1].split("```", 1)[0]


def test_the_campaign_file_of_tuning_md_runs(tmp_path: Path) -> None:
    campaign = block_after(ROOT / "docs" / "tuning.md", "**A campaign file**", "toml")
    (tmp_path / "campaign.toml").write_text(  # its paths, from the repository's top as the doc says
        campaign.replace('"fixtures/', f'"{ROOT}/fixtures/'), encoding="utf-8")
    env = {k: v for k, v in os.environ.items()
           if k not in ("TUNEBANK_DB", "TUNE_BANK_PATH", "ASCEND_WORK_PATH", "ASCEND_CACHE_PATH")}
    done = subprocess.run(
        [sys.executable, "-c", "from tunebank.cli.main import run; run()", "tune", "--campaign",
         "campaign.toml", "--db", "campaign.db", "-q", "--json"],
        cwd=tmp_path, env={**env, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
        check=False)
    assert done.returncode == 0, done.stderr
    reports = json.loads(done.stdout)
    assert [(r["soc_version"], r["tuning_name"].rsplit("_", 1)[0]) for r in reports] == [
        ("Ascend310", "squeezenet"), ("Ascend310", "inception_v1"),
        ("Ascend910B2", "squeezenet"), ("Ascend910B2", "inception_v1")]


def test_the_diff_transcript_of_exchange_md_is_what_the_command_prints(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    block = block_after(ROOT / "docs" / "exchange.md", "Either kind prints one table", "")
    command, *printed = block.splitlines()
    monkeypatch.chdir(tmp_path)  # the banks of tests/cli/test_diff.py's two_banks, named as shown
    bank_with(tmp_path / "a.db", "alice", [("1", 50.0, None), ("2", 40.0, None), ("3", 30.0, None),
                                           ("5", 25.0, None)])
    bank_with(tmp_path / "b.db", "bob", [("2", 40.0, None), ("3", 20.0, {"baseM": 128}),
                                         ("4", 10.0, None), ("5", 35.0, None)])
    bank_with(tmp_path / "b.db", "bob-910", [("9", 5.0, None)], soc="Ascend910B2")
    result = CliRunner().invoke(app, command.removeprefix("$ bank ").split())
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == printed
