"""The README's tour is what docs/tour.sh prints (issue 31: no test ran the docs' examples, and
the README had drifted from the commands it quotes). Both tours run for real in a temporary
folder, with `bank` this checkout's, and each README transcript must equal their output once
what the README says may differ between two runs is masked: task and bank ids, times, file
names' stamps and hashes. A count or a modelled time that changes fails."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import CALLER_ENV

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = next((p for p in (ROOT.parent / "shared" / "aoe-banks", Path("/work/shared/aoe-banks"))
                if p.is_dir()), None)

MASKS = (
    (re.compile(r"\b[0-9a-f]{64}\b"), "HASH"),
    (re.compile(r"\b[0-9a-f]{16}\b"), "ID"),
    (re.compile(r"\b\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\b"), "TIME"),
    (re.compile(r"_\d{17}_\d+\.json\b"), "_STAMP.json"),
    (re.compile(r"\btook \d+\.\d+ s\b"), "took S s"),
    (re.compile(r"(?m)^(\$ bank summary )[0-9a-f]{6}\b"), r"\1PREFIX"),
)


def masked(text: str) -> list[str]:
    """``text``'s lines with what may differ between two runs replaced by a placeholder (and
    the padding of table columns it changes evened out)."""
    for pattern, placeholder in MASKS:
        text = pattern.sub(placeholder, text)
    return [re.sub(r"  +", "  ", line).rstrip() for line in text.strip().splitlines()]


def transcript(number: int) -> str:
    """The README's ``number``-th ```console block (0: the tour, 1: the real banks')."""
    return (ROOT / "README.md").read_text(encoding="utf-8").split("```console\n")[number + 1] \
        .split("```", 1)[0]


def run_tour(tmp_path: Path, *args: str) -> str:
    shims = tmp_path / "bin"  # `bank` and `python` as this checkout and this interpreter
    shims.mkdir()
    (shims / "bank").write_text(
        f'#!/bin/sh\nexec "{sys.executable}" -c "from tunebank.cli.main import run; run()" "$@"\n')
    (shims / "bank").chmod(0o755)
    # a script, not a link: a link to a venv's interpreter outside the venv's folder starts the
    # base interpreter, without the venv's packages (issue 41)
    (shims / "python").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    (shims / "python").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in CALLER_ENV}
    env.update(PATH=f"{shims}{os.pathsep}{env.get('PATH', '')}", PYTHONPATH=str(ROOT),
               PYTHONDONTWRITEBYTECODE="1", TMPDIR=str(tmp_path), COLUMNS="200")
    done = subprocess.run(["bash", str(ROOT / "docs" / "tour.sh"), *args], env=env,
                          capture_output=True, text=True, check=False, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_readme_tour_is_what_tour_sh_prints(tmp_path: Path) -> None:
    assert masked(run_tour(tmp_path)) == masked(transcript(0))


@pytest.mark.skipif(SAMPLES is None, reason="the real AOE banks are not on this machine")
def test_the_readme_real_banks_tour_is_what_tour_sh_real_prints(tmp_path: Path) -> None:
    assert masked(run_tour(tmp_path, "real")) == masked(transcript(1))
