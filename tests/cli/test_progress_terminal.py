"""A tune's progress in a real pseudo-terminal, 80 and 120 columns wide: the rows it leaves on
the screen, counted by a terminal emulator (pyte). Issue 31: at 80 columns every redraw of the
hand-written bar left a wrapped row behind (about 420 for ResNet-50)."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pyte
import pytest

MODEL = Path(__file__).resolve().parents[2] / "fixtures" / "models" / "squeezenet.onnx"
ROWS = 50


def on_terminal(args: list[str], columns: int, cwd: Path) -> str:
    """Everything ``bank ARGS`` writes to a terminal ``columns`` wide (stdout and stderr)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, columns, 0, 0))
    env = {k: v for k, v in os.environ.items()
           if k not in ("TUNEBANK_DB", "TUNE_BANK_PATH", "ASCEND_WORK_PATH", "ASCEND_CACHE_PATH",
                        "COLUMNS", "LINES", "NO_COLOR")}
    proc = subprocess.Popen([sys.executable, "-c", "from tunebank.cli.main import run; run()", *args],
                            stdin=slave, stdout=slave, stderr=slave, cwd=cwd,
                            env={**env, "TERM": "xterm-256color"})
    os.close(slave)
    written = bytearray()
    try:
        while True:
            ready, _, _ = select.select([master], [], [], 120)
            assert ready, "the tune wrote nothing for two minutes"
            try:
                data = os.read(master, 1 << 16)
            except OSError:  # EIO: the tune ended and closed the terminal
                break
            if not data:
                break
            written += data
    finally:
        os.close(master)
        assert proc.wait(timeout=60) == 0, written.decode(errors="replace")[-2000:]
    return written.decode("utf-8", errors="replace")


def rows_left(text: str, columns: int) -> list[str]:
    """The non-blank rows the text leaves on a screen ``columns`` wide (tall enough never to
    scroll), as a terminal would show them."""
    screen = pyte.Screen(columns, 1000)
    pyte.Stream(screen).feed(text)
    return [row.rstrip() for row in screen.display if row.strip()]


@pytest.mark.parametrize("columns", [80, 120])
def test_a_tune_leaves_a_handful_of_rows_at_any_width(tmp_path: Path, columns: int) -> None:
    text = on_terminal(["tune", str(MODEL), "--soc-version", "Ascend310", "--db", "b.db",
                        "--budget", "16"], columns, tmp_path)
    rows = rows_left(text, columns)
    closing = next(n for n, row in enumerate(rows) if row.startswith("task "))
    progress = rows[:closing]  # what stderr left above the closing lines (stdout)
    assert len(progress) == 2, rows  # the task's first line, and its finished bar
    assert re.fullmatch(r"squeezenet on Ascend310: 0 key\(s\) known or already recorded; "
                        r"searching \d+", progress[0])
    searched = progress[0].rsplit(" ", 1)[1]
    assert f"{searched}/{searched} keys" in progress[1] and "measurements" in progress[1]
    assert len(rows) <= 15, rows
