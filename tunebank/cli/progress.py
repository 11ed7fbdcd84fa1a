"""A tune's progress on stderr: one bar redrawn in place on a terminal, a few plain lines
elsewhere (a log file, a CI job), nothing with ``--quiet``."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, TextIO

from tunebank.tuner.flow import Reporter

if TYPE_CHECKING:
    from tunebank.bank import Outcome
    from tunebank.tuner.plan.grouping import KeyGroup

WIDTH = 30
"""Characters of the bar."""
REDRAW_S = 0.1
"""A terminal's bar is redrawn at most this often (and when a key ends)."""
PLAIN_LINES = 4
"""Lines a run writes where stderr is not a terminal, besides its first (at each quarter)."""


class TuneProgress(Reporter):
    """The progress of one task's searches: keys done, measurements, the best gain so far and
    the time left at the rate so far.

    Args:
        stream: where to write (stderr).
        interactive: redraw one line in place (default: whether ``stream`` is a terminal).
    """

    def __init__(self, stream: TextIO, interactive: bool | None = None) -> None:
        self.stream = stream
        self.interactive = stream.isatty() if interactive is None else interactive
        self.total = self.done = self.measurements = 0
        self.best_gain: float | None = None
        self.started = self.drawn = 0.0
        self.busy: int | None = None

    def start(self, keys: int, skipped: int) -> None:
        self.total, self.done, self.measurements, self.best_gain = keys, 0, 0, None
        self.started, self.busy = time.monotonic(), None
        self.stream.write(f"{skipped} key(s) known or already recorded; searching {keys}\n")
        if self.interactive and keys:
            self._draw()

    def generation(self, key: KeyGroup, step: int, steps: int, best_us: float) -> None:
        if self.interactive and time.monotonic() - self.drawn >= REDRAW_S:
            self._draw()

    def key_done(self, index: int, total: int, key: KeyGroup, outcome: Outcome) -> None:
        measured = outcome.extra.get("measurements")
        self.measurements += measured if isinstance(measured, int) else 0
        before, after = outcome.performance_before_us, outcome.performance_after_us
        if before and after is not None and before > 0:
            gain = (before - after) / before
            self.best_gain = gain if self.best_gain is None else max(self.best_gain, gain)
        self._advance(self.done + 1)

    def searched(self, done: int, total: int, busy: int) -> None:
        self.busy = busy
        self._advance(done)

    def _advance(self, done: int) -> None:
        before, self.done = self.done, done
        if self.interactive:
            self._draw()
            if done >= self.total:
                self.stream.write("\n")
        elif _quarter(before, self.total) != _quarter(done, self.total):
            self.stream.write(self.line() + "\n")
        self.stream.flush()

    def _draw(self) -> None:
        self.stream.write("\r" + self.line() + "\x1b[K")  # the rest of the old line erased
        self.stream.flush()
        self.drawn = time.monotonic()

    def line(self) -> str:
        """The progress as one line."""
        filled = WIDTH * self.done // max(self.total, 1)
        parts = [f"[{'#' * filled}{'.' * (WIDTH - filled)}] {self.done}/{self.total} keys"]
        if self.measurements:
            parts.append(f"{self.measurements:,} measurements")
        if self.best_gain is not None:
            parts.append(f"best gain {self.best_gain:.1%}")
        if self.busy is not None:
            parts.append(f"{self.busy} worker(s) busy")
        if 0 < self.done < self.total:
            elapsed = time.monotonic() - self.started
            parts.append(f"about {_duration(elapsed / self.done * (self.total - self.done))} left")
        return ", ".join(parts)


def _quarter(done: int, total: int) -> int:
    return PLAIN_LINES * done // max(total, 1)


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
