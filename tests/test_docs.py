"""The docs' examples run as they are written: the campaign file of docs/tuning.md (issue 31: its
input name was not the bundled model's, so it did not run), the transcript of `bank diff` in
docs/exchange.md, and every option the synopses name (tests/test_tour.py runs the README's
tour)."""

from __future__ import annotations

import json
import os
import re
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


def synopses() -> list[tuple[str, str]]:
    """Every `bank COMMAND ...` line of a code block in the README and docs/, with its indented
    continuation lines joined on, and the file it is in."""
    found = []
    for document in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        blocks = document.read_text(encoding="utf-8").split("```")[1::2]
        for block in blocks:
            lines: list[str] = []
            for line in block.splitlines():
                if line.startswith((" ", "\t")) and lines:
                    lines[-1] += " " + line.strip()
                elif line.removeprefix("$ ").startswith("bank "):
                    lines.append(line.removeprefix("$ "))
            found += [(document.name, line) for line in lines]
    return found


def test_every_option_the_docs_name_is_an_option_of_that_command() -> None:
    """A synopsis cannot run as written (it names placeholders), so its options are held to the
    command's own: each `--option` is one, and each `--option a|b` choice is accepted."""
    from typer.main import get_command

    commands = get_command(app).commands  # type: ignore[attr-defined]
    checked = 0
    for document, line in synopses():
        name = line.split()[1]
        assert name in commands, f"{document}: `{line}` names no command {name!r}"
        params = {opt: p for p in commands[name].params for opt in [*p.opts, *p.secondary_opts]}
        for option in re.findall(r"(?<![\w-])--[a-z][a-z-]*", line):
            assert option in params, f"{document}: `bank {name}` has no {option}"
            checked += 1
        for option, choices in re.findall(r"(--[a-z-]+) ([a-z0-9-]+(?:\|[a-z0-9-]+)+)\b", line):
            param = params[option]  # a Choice, or a string checked in the command (AOE's 1|2)
            allowed = getattr(param.type, "choices", None) or \
                (param.metavar or "").strip("<>[]{}").split("|")
            assert set(choices.split("|")) <= set(allowed), f"{document}: {option} {choices}"
    assert checked > 100  # the README's tour and the docs' synopses were all found
