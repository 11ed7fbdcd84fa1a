"""Wall times of whole `bank` commands, each in a fresh interpreter, interleaved ROUNDS times:

- ``first tune``: ResNet-50 tuned into a new SQLite bank (the README's main job), here and,
  with ``--baseline TREE``, in another checkout side by side (issue 30: at most 0.65x of the
  tree it was filed against, b717c00, whose packages were top-level: ``cli``, ``bank``, ...);
- ``repeat tune``: the same tune again into that bank (every key known);
- ``summary``, ``tasks``, ``query --limit 1``, ``history``, ``events --limit 1`` on that bank:
  each reading command against ``bank summary`` (issue 30: within 1.3x).

    python bench/command_times.py [--rounds 7] [--baseline /path/to/old/checkout]

Both sides run with the same interpreter and environment (the caller's TUNEBANK_DB and AOE's
variables removed), their bytecode cached under a temporary PYTHONPYCACHEPREFIX as an installed
wheel's would be (compiling every module from source each run, as PYTHONDONTWRITEBYTECODE makes
a checkout do, cost a reading command a third of its time), after one run of each command that
is not counted. Prints one JSON line: per command, the geomean and worst seconds, and the
ratios. Not a test: nothing here asserts.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODEL = ROOT / "fixtures" / "models" / "resnet50.onnx"
TUNE = ["tune", str(MODEL), "--soc-version", "Ascend910B2", "--progress-bar", "off", "-q"]
READERS = {"summary": ["summary", "{task}"], "tasks": ["tasks"], "query": ["query", "--limit", "1"],
           "history": ["history", "--op-type", "Conv"], "events": ["events", "--limit", "1"]}
HERE = "from tunebank.cli.main import run; run()"
# b717c00 had top-level packages and found `sim` through entry points that now name tunebank's
OLD = "import tuner.plugins as p; p.ENTRY_POINTS = 'tunebank.none'; from cli.main import run; run()"


PYCACHE = Path(tempfile.mkdtemp(prefix="tunebank-pycache-"))


def environment(tree: Path | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("TUNEBANK_DB", "TUNE_BANK_PATH", "ASCEND_WORK_PATH", "ASCEND_CACHE_PATH",
                        "PYTHONDONTWRITEBYTECODE")}
    env["PYTHONPATH"] = str(tree or ROOT)
    env["PYTHONPYCACHEPREFIX"] = str(PYCACHE)
    return env


def timed(tree: Path | None, args: list[str], cwd: Path) -> float:
    code = OLD if tree is not None else HERE
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, env=environment(tree),
                   capture_output=True, check=True)
    return time.perf_counter() - started


def stats(times: list[float]) -> dict[str, float]:
    geomean = math.exp(sum(math.log(t) for t in times) / len(times))
    return {"geomean_s": round(geomean, 3), "worst_s": round(max(times), 3)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--baseline", type=Path, default=None)
    options = parser.parse_args()
    times: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for round_ in range(-1, options.rounds):  # round -1 fills the bytecode cache
            sides: list[tuple[str, Path | None]] = [("", None)]
            if options.baseline is not None:
                sides.append(("baseline ", options.baseline))
            for prefix, tree in sides[:: 1 if round_ % 2 == 0 else -1]:  # who goes first alternates
                db = work / f"{prefix.strip() or 'here'}-{round_}.db"
                for name in ("first tune", "repeat tune"):
                    times.setdefault(prefix + name, []).append(timed(tree, [*TUNE, "--db", str(db)], work))
            db = work / f"here-{round_}.db"
            task = json.loads(subprocess.run(
                [sys.executable, "-c", HERE, "tasks", "--db", str(db), "--json"], cwd=work,
                env=environment(None), capture_output=True, check=True, text=True).stdout)[0]["task_id"]
            for name, args in READERS.items():
                argv = [a.replace("{task}", task) for a in args] + ["--db", str(db)]
                times.setdefault(name, []).append(timed(None, argv, work))
    shutil.rmtree(PYCACHE, ignore_errors=True)
    times = {name: values[1:] for name, values in times.items()}  # round -1's are not counted
    out: dict[str, object] = {name: stats(values) for name, values in times.items()}
    summary = math.exp(sum(math.log(t) for t in times["summary"]) / len(times["summary"]))
    out["readers_over_summary"] = {
        name: round(stats(times[name])["geomean_s"] / summary, 2) for name in READERS if name != "summary"}
    if options.baseline is not None:
        out["first_tune_ratio"] = round(stats(times["first tune"])["geomean_s"]
                                        / stats(times["baseline first tune"])["geomean_s"], 2)
        out["repeat_tune_ratio"] = round(stats(times["repeat tune"])["geomean_s"]
                                         / stats(times["baseline repeat tune"])["geomean_s"], 2)
    out["rounds"] = options.rounds
    print(json.dumps(out))


if __name__ == "__main__":
    main()
