"""Append throughput: one batch per task versus one transaction per outcome (the baseline).

Usage: python bench/append.py [--outcomes N] [--tasks T]

Both runs write the same outcomes to a fresh SQLite file bank and are timed side by side; the
ratio is batched/one-by-one events per second. Not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tunebank.bank import Bank, EventKind, Outcome


def outcomes(task: int, count: int) -> list[Outcome]:
    return [Outcome(EventKind.ADD, f"{task}-{k}", f"op{k}", "MatMul", {"k": k, "t": task},
                    {"baseM": 64}, 100.0, 50.0 + k % 7) for k in range(count)]


def run(folder: Path, tasks: int, count: int, batched: bool) -> tuple[float, int]:
    with Bank.open(str(folder / ("batch.db" if batched else "single.db")), create=True) as bank:
        started = time.perf_counter()
        for t in range(tasks):
            task = bank.start_task("Ascend310", tuning_name=f"b{t}")
            work = outcomes(t, count)
            if batched:
                bank.record(task, work)
            else:
                for outcome in work:
                    bank.record(task, [outcome])
            bank.finish_task(task)
        elapsed = time.perf_counter() - started
        assert bank.verify().ok
        return elapsed, bank.head()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--outcomes", type=int, default=2000, help="outcomes per task")
    parser.add_argument("--tasks", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        single, events = run(Path(tmp), args.tasks, args.outcomes, batched=False)
        batch, _ = run(Path(tmp), args.tasks, args.outcomes, batched=True)
    print(f"events appended per run: {events}")
    print(f"one transaction per outcome (baseline): {events / single:10.0f} events/s")
    print(f"one batch per task:                     {events / batch:10.0f} events/s")
    print(f"ratio batched/baseline: {single / batch:.1f}x")


if __name__ == "__main__":
    main()
