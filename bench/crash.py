"""Killed and resumed tunes against one uninterrupted tune: where the kills landed, what was lost.

Usage: python bench/crash.py [--kills N]

The kills are those of tests/tuner/test_crash.py (SqueezeNet, rl, seed 5, budget 16, kill
moments drawn with the same seed): each `bank tune` is SIGKILLed at a random moment and resumed
with --reload. Printed per kill: the keys and measurements the killed run had recorded, what the
resume measured, and the total against the uninterrupted run's (the baseline). Not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from typer.testing import CliRunner

from tests.crash import kill_tune_at
from tunebank.bank import Bank
from tunebank.cli.main import app

ROOT = Path(__file__).resolve().parent.parent
MODEL = str(ROOT / "fixtures" / "models" / "squeezenet.onnx")
SEARCH = ["--soc-version", "Ascend310", "--mode", "rl", "--seed", "5", "--budget", "16"]
runner = CliRunner()


def tune(db: Path, *extra: str) -> dict[str, object]:
    result = runner.invoke(app, ["tune", MODEL, "--soc-version", "Ascend310", "--db", str(db),
                                 "--progress-bar", "off", "--json", *extra])
    if result.exit_code != 0:
        sys.exit(result.output)
    return dict(json.loads(result.stdout))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tunebank-crash-") as tmp:
        folder = Path(tmp)
        os.chdir(folder)
        whole = tune(folder / "whole.db", *SEARCH[2:])
        keys, measured = int(whole["repo_summary"]["total_num"]), int(whole["measurements"])  # type: ignore[index]
        print(f"uninterrupted: {keys} keys, {measured} measurements\n")
        print(f"{'kill':>4}  {'key':>3}  {'delay_ms':>8}  {'recorded':>8}  {'measured_before':>15}  "
              f"{'measured_by_reload':>18}  {'total/baseline':>14}  {'reload_s':>8}")
        rng = random.Random(20261203)
        totals = []
        for n in range(args.kills):
            key, delay = rng.randint(1, keys - 2), rng.uniform(0.0, 0.02)
            db = folder / f"k{n}.db"
            kill_tune_at(["tune", MODEL, *SEARCH, "--db", str(db)], folder / f"w{n}", key, delay)
            with Bank.open(str(db)) as bank:
                events = list(bank.events())
            recorded = sum(1 for e in events if e.event.kind in ("add", "unsatisfied"))
            before = sum(int(e.event.payload.get("measurements", 0)) for e in events)
            started = time.perf_counter()
            resumed = tune(db, "--reload")
            seconds = time.perf_counter() - started
            total = before + int(resumed["measurements"])  # type: ignore[call-overload]
            totals.append(total / measured)
            print(f"{n:>4}  {key:>3}  {delay * 1000:>8.2f}  {recorded:>8}  {before:>15}  "
                  f"{resumed['measurements']:>18}  {total / measured:>14.3f}  {seconds:>8.2f}")
        print(f"\nevery kill resumed; measurements over the baseline: min {min(totals):.3f}, "
              f"max {max(totals):.3f}")


if __name__ == "__main__":
    main()
