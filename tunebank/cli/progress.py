"""A tune's progress on stderr: on a terminal, a bar drawn by rich and sized to the terminal's
width (it redraws in place at any width; a hand-written ``\\r`` line of about 99 characters left
a wrapped row behind at every redraw on an 80-column terminal); elsewhere (a log file, a CI
job) a few plain lines; nothing with ``--quiet``. Each task's first line names the model and
the chip (and its place in a campaign), and the same facts show whether the searches run here
or on Dask."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, TextIO

from tunebank.bank.names import one_line
from tunebank.tuner.flow import Reporter

if TYPE_CHECKING:
    from tunebank.bank import Outcome
    from tunebank.tuner.plan.grouping import KeyGroup

REDRAW_S = 0.1
"""A terminal's bar is redrawn at most this often (and when a key ends)."""
PLAIN_LINES = 4
"""Lines a run writes where stderr is not a terminal, besides its first (at each quarter)."""
WIDTH = 30
"""Characters of the bar in a plain line."""


class TuneProgress(Reporter):
    """The progress of a tune's searches, task by task: keys done, measurements, the best gain
    so far and the time left at the rate so far.

    Args:
        stream: where to write (stderr).
        interactive: draw a live bar (default: whether ``stream`` is a terminal).
        width: the terminal's width, where it cannot be asked (tests); default: asked.
    """

    def __init__(self, stream: TextIO, interactive: bool | None = None,
                 width: int | None = None) -> None:
        self.stream = stream
        self.interactive = stream.isatty() if interactive is None else interactive
        self.width = width
        self.label = ""
        self.total = self.done = self.measurements = 0
        self.best_gain: float | None = None
        self.started = self.drawn = 0.0
        self.busy: int | None = None
        self._bar: Any = None  # rich's Progress while a task's bar is shown
        self._task: Any = None

    def task_begins(self, label: str) -> None:
        self.label = one_line(label)  # a model's name is data: never a terminal's command

    def start(self, keys: int, skipped: int) -> None:
        self._stop()
        self.total, self.done, self.measurements, self.best_gain = keys, 0, 0, None
        self.started, self.busy = time.monotonic(), None
        head = f"{self.label}: " if self.label else ""
        self.stream.write(f"{head}{skipped} key(s) known or already recorded; searching {keys}\n")
        self.stream.flush()
        if self.interactive and keys:
            self._bar, self._task = _live_bar(self.stream, self.width, self.label or "keys", keys)
            self._draw()

    def generation(self, key: KeyGroup, step: int, steps: int, best_us: float) -> None:
        if self._bar is not None and time.monotonic() - self.drawn >= REDRAW_S:
            self._draw()

    def key_done(self, index: int, total: int, key: KeyGroup, outcome: Outcome) -> None:
        measured = outcome.extra.get("measurements")
        self.measurements += measured if isinstance(measured, int) else 0
        before, after = outcome.performance_before_us, outcome.performance_after_us
        if before and after is not None and before > 0:
            gain = (before - after) / before
            self.best_gain = gain if self.best_gain is None else max(self.best_gain, gain)
        self._advance(min(self.done + 1, self.total))

    def searched(self, done: int, total: int, busy: int) -> None:
        self.busy = busy
        self._advance(done)

    def _advance(self, done: int) -> None:
        before, self.done = self.done, done
        if self._bar is not None:
            self._draw()
            if done >= self.total:
                self._stop()
        elif not self.interactive and _quarter(before, self.total) != _quarter(done, self.total):
            self.stream.write(self.line() + "\n")
            self.stream.flush()

    def _draw(self) -> None:
        self._bar.update(self._task, completed=self.done, facts=self.facts())
        self._bar.refresh()
        self.drawn = time.monotonic()

    def _stop(self) -> None:
        """Leave the finished bar as the task's last line."""
        if self._bar is not None:
            self._bar.stop()
            self._bar = self._task = None

    def facts(self) -> str:
        """Measurements, best gain and busy workers so far, as words."""
        parts = []
        if self.measurements:
            parts.append(f"{self.measurements:,} measurements")
        if self.best_gain is not None:
            parts.append(f"best gain {self.best_gain:.1%}")
        if self.busy is not None:
            parts.append(f"{self.busy} worker(s) busy")
        return ", ".join(parts)

    def line(self) -> str:
        """The progress as one plain line (where stderr is not a terminal)."""
        filled = WIDTH * self.done // max(self.total, 1)
        parts = [f"[{'#' * filled}{'.' * (WIDTH - filled)}] {self.done}/{self.total} keys"]
        if self.facts():
            parts.append(self.facts())
        if 0 < self.done < self.total:
            elapsed = time.monotonic() - self.started
            parts.append(f"about {_duration(elapsed / self.done * (self.total - self.done))} left")
        return ", ".join(parts)


def _live_bar(stream: TextIO, width: int | None, label: str, keys: int) -> tuple[Any, Any]:
    """rich's Progress on ``stream``, one line that fits the terminal: the label and the facts
    are cut with an ellipsis before they would wrap, and the bar takes what is left. Drawn only
    when asked (no refresh thread), so a redraw happens where the tune is."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
    from rich.table import Column

    console = Console(file=stream, width=width, highlight=False, force_terminal=True)
    bar = Progress(
        TextColumn("{task.description}", markup=False,
                   table_column=Column(no_wrap=True, overflow="ellipsis", max_width=40)),
        BarColumn(bar_width=None, table_column=Column(ratio=1, min_width=10)),
        MofNCompleteColumn(table_column=Column(no_wrap=True)),
        TextColumn("keys", table_column=Column(no_wrap=True)),
        TextColumn("{task.fields[facts]}", markup=False,
                   table_column=Column(no_wrap=True, overflow="ellipsis")),
        TimeRemainingColumn(table_column=Column(no_wrap=True)),
        console=console, auto_refresh=False, expand=True)
    task = bar.add_task(label, total=keys, facts="")
    bar.start()
    return bar, task


def _quarter(done: int, total: int) -> int:
    return PLAIN_LINES * done // max(total, 1)


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
