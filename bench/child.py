"""One measured job, run alone in this process by bench/scale.py: prints one JSON line with
the job's result, the seconds the job itself took and this process's peak resident memory.

Usage: python bench/child.py JOB ARGS...   (jobs: init, import, record, verify, rebuild, export,
lookup, plain-lookup, summary, merge, report)
"""

from __future__ import annotations

import json
import resource
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def cli(*args: str) -> dict[str, Any]:
    """Run one `bank` command in this process; its exit code must be 0."""
    from tunebank.cli.main import app

    try:
        app([*args], standalone_mode=False)
    except SystemExit as exc:
        if exc.code:
            raise
    return {}


def record(db: str, count: str) -> dict[str, Any]:
    """The workload's outcomes recorded through the API, one batch per task."""
    from bench.workload import plan
    from tunebank.bank import Bank

    tasks = list(plan(int(count)))
    Bank.open(db, create=True).close()  # made before the clock starts, as the baseline's table is
    started = time.perf_counter()
    with Bank.open(db) as bank:
        for task in tasks:
            task_id = bank.start_task(task.soc_version, tuning_name=task.tuning_name,
                                      task_id=task.task_id)
            bank.record(task_id, task.outcomes)
            bank.finish_task(task_id)
        head = bank.head()
    return {"events": head, "record_seconds": time.perf_counter() - started}


def lookup(db: str, count: str) -> dict[str, Any]:
    """The tuner's batched lookup of ``count`` keys (half known, half not) on one chip."""
    import sqlite3

    from tunebank.bank import Bank

    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        rows = conn.execute("SELECT repo_key, info_dict FROM policy WHERE soc_version = ? LIMIT ?",
                            ("Ascend910B2", int(count) // 2)).fetchall()
    wanted = [(key, json.loads(info)) for key, info in rows]
    wanted += [(f"unknown-{n}", {"op_type": "Add"}) for n in range(int(count) - len(wanted))]
    with Bank.open(db) as bank:
        started = time.perf_counter()
        found = bank.lookup("Ascend910B2", wanted)
        elapsed = time.perf_counter() - started
    return {"keys": len(wanted), "found": len(found), "lookup_seconds": elapsed,
            "known": [key for key, _ in wanted]}


def plain_lookup(db: str, keys_file: str) -> dict[str, Any]:
    """The baseline of :func:`lookup`, in a process of its own as the lookup is: a plain
    indexed query of the keys in ``keys_file`` (a JSON list)."""
    from bench.scale import plain_lookup as query

    keys = json.loads(Path(keys_file).read_text(encoding="utf-8"))
    return {"lookup_seconds": query(Path(db), "Ascend910B2", keys)}


def summary(db: str) -> dict[str, Any]:
    """One task's repo_summary through the API, the bank opened and closed."""
    from tunebank.bank import Bank

    with Bank.open(db) as bank:
        task = bank.tasks()[len(bank.tasks()) // 2].task_id
    started = time.perf_counter()
    with Bank.open(db) as bank:
        counts = bank.task(task).repo_summary()
    return {"task": task, "summary_seconds": time.perf_counter() - started, "counts": counts}


JOBS = {
    "init": lambda db: cli("init", "--db", db),
    "import": lambda path, db: cli("import", path, "--db", db),
    "record": record,
    "verify": lambda db: cli("verify", "--db", db),
    "rebuild": lambda db: cli("rebuild", "--db", db),
    "export": lambda db, out: cli("export", "--format", "jsonl", "--db", db, "--out", out),
    "lookup": lookup,
    "plain-lookup": plain_lookup,
    "summary": summary,
    "merge": lambda target, source: cli("merge", source, "--db", target),
    "report": lambda db, out: cli("report", "--db", db, "--out", out),
}


def peak_mb() -> float:
    """This process's peak resident memory: VmHWM, the high-water mark of its own address space.
    (getrusage's ru_maxrss is not used: Linux carries it over from the parent across fork and
    exec, so a child of a large parent reports the parent's size.)"""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    job, *args = sys.argv[1:]
    import tunebank.bank.api
    import tunebank.cli.main  # noqa: F401

    started = time.perf_counter()
    result = JOBS[job](*args)
    seconds = time.perf_counter() - started
    peak = peak_mb()
    sys.stdout.flush()
    print(json.dumps({"result": result, "seconds": seconds, "peak_mb": peak}))


if __name__ == "__main__":
    main()
