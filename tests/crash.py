"""Killing a running ``bank tune`` with SIGKILL at a chosen moment: a test seam, not product code.

The child runs the real ``bank`` entry point with its progress reporter wrapped: when key
``key`` starts, a timer fires SIGKILL after ``delay_s`` (so the kill lands anywhere in a search,
a record transaction or a result-file rewrite), and at the latest when key ``key + 2`` starts,
so the task is always killed before it finishes.

``kill_tune_at`` forks the child from the test process (its imports are already done, so a kill
costs a fraction of a second); ``python -m tests.crash KEY DELAY -- ARGS`` runs the same child
as a new interpreter.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tunebank.bank import Outcome
    from tunebank.tuner.flow import Reporter
    from tunebank.tuner.plan.grouping import KeyGroup


def _killing_reporter(inner: Reporter, key: int, delay_s: float) -> Reporter:
    from tunebank.tuner.flow import Reporter

    def die() -> None:
        os.kill(os.getpid(), signal.SIGKILL)

    class Killing(Reporter):
        def start(self, keys: int, skipped: int) -> None:
            inner.start(keys, skipped)

        def key_started(self, index: int, total: int, group: KeyGroup) -> None:
            if index == key:
                threading.Timer(delay_s, die).start()
            elif index >= key + 2:
                die()
            inner.key_started(index, total, group)

        def generation(self, group: KeyGroup, step: int, steps: int, best_us: float) -> None:
            inner.generation(group, step, steps, best_us)

        def key_done(self, index: int, total: int, group: KeyGroup, outcome: Outcome) -> None:
            inner.key_done(index, total, group, outcome)

    return Killing()


def run_killed(args: list[str], key: int, delay_s: float) -> int:
    """Run ``bank ARGS`` in this process, to be killed as the module docstring says; return the
    exit code if the tune ended first. ``args`` must leave the progress bar on."""
    from tunebank.cli import tune_cmds
    from tunebank.cli.main import run

    progress = tune_cmds._progress
    tune_cmds._progress = lambda: _killing_reporter(progress(), key, delay_s)  # type: ignore[assignment]
    sys.argv = ["bank", *args]
    try:
        run()
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 1
    return 0


def kill_tune_at(args: list[str], cwd: Path, key: int, delay_s: float) -> int:
    """Fork a child that runs ``bank ARGS`` in ``cwd`` and is killed at the moment given; return
    its exit code as subprocess reports it (-9 when the kill landed)."""
    cwd.mkdir(parents=True, exist_ok=True)
    pid = os.fork()
    if pid == 0:  # the child: never returns into the test run
        code = 70
        try:
            os.chdir(cwd)
            for fd, name in ((1, "stdout"), (2, "stderr")):
                target = os.open(cwd / name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                os.dup2(target, fd)
            code = run_killed(args, key, delay_s)
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    separator = sys.argv.index("--")
    sys.exit(run_killed(sys.argv[separator + 1:], int(sys.argv[1]), float(sys.argv[2])))
