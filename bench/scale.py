"""The bank at scale: append, lookup, rebuild, verify, export, summary and merge, each timed
against a baseline doing the same job the plainest way, on the same data, in the same run.

Each tunebank measurement runs in a child process (bench/child.py), so its peak memory is its
own (the kernel's maximum resident set size, from wait4) and nothing one step cached helps the
next. Used by bench/run.py; not a test.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(ROOT))

from bench.workload import events  # noqa: E402
from tunebank.bank.events import GENESIS_HASH, StoredEvent  # noqa: E402
from tunebank.bank.formats.jsonl import event_line, header_line  # noqa: E402
from tunebank.bank.store.rows import event_values  # noqa: E402


@dataclass
class Child:
    """What a child process reported: its result, the seconds of the job itself (start-up and
    imports not counted) and its peak resident memory."""

    result: dict[str, Any]
    seconds: float
    peak_mb: float


def child(*args: str) -> Child:
    """Run ``bench/child.py ARGS`` and read what it reports."""
    proc = subprocess.run([sys.executable, str(BENCH / "child.py"), *args], capture_output=True,
                          cwd=ROOT, env=clean_env(), check=False)
    if proc.returncode:
        raise SystemExit(f"bench/child.py {' '.join(args)} failed ({proc.returncode}): "
                         f"{proc.stderr.decode()[-500:]}")
    report = json.loads(proc.stdout.decode().strip().splitlines()[-1])
    return Child(report["result"], report["seconds"], report["peak_mb"])


def wall(*args: str, repeat: int = 5) -> float:
    """The median wall time of a command, start-up included."""
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        subprocess.run(list(args), capture_output=True, cwd=ROOT, env=clean_env(), check=True)
        times.append(time.perf_counter() - started)
    return sorted(times)[len(times) // 2]


def clean_env() -> dict[str, str]:
    """This environment without the variables that name a bank or AOE's folders, with the
    repository on PYTHONPATH."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("TUNEBANK_DB", "TUNE_BANK_PATH", "ASCEND_WORK_PATH", "ASCEND_CACHE_PATH")}
    env["PYTHONPATH"] = str(ROOT)
    return env


# -- data ------------------------------------------------------------------------------------


def write_events_file(path: Path, count: int, seed: int = 0) -> int:
    """The workload as an events file, chained as a bank would hold it; return its events."""
    prev, seq = GENESIS_HASH, 0
    with path.open("w", encoding="utf-8") as handle:
        handle.write(header_line("bench"))
        for event in events(count, seed):
            seq += 1
            link = event.link_hash(prev, seq)
            handle.write(event_line(event_values(StoredEvent(seq, event.event_id, event, prev, link))))
            prev = link
    return seq


def event_rows(path: Path) -> list[tuple[Any, ...]]:
    """The rows of an events file, as the events table holds them."""
    rows = []
    with path.open(encoding="utf-8") as handle:
        next(handle)
        for line in handle:
            d = json.loads(line)
            rows.append((d["seq"], d["event_id"], d["kind"], d["soc_version"], d["repo_key"],
                         d["task_id"], d["op_name"], d["op_type"], d["recorded_at"], d["origin"],
                         json.dumps(d["payload"], sort_keys=True, separators=(",", ":"),
                                    ensure_ascii=False), d["prev_hash"], d["hash"]))
    return rows


# -- baselines -------------------------------------------------------------------------------


def events_schema() -> list[str]:
    """The DDL of tunebank's events table and its indexes, as a new bank holds them."""
    import tempfile

    from tunebank.bank import Bank

    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "schema.db"
        Bank.open(str(db), create=True).close()
        with sqlite3.connect(db) as conn:
            return [row[0] for row in conn.execute(
                "SELECT sql FROM sqlite_master WHERE tbl_name = 'events' AND sql IS NOT NULL "
                "AND type IN ('table', 'index') ORDER BY type DESC")]


def plain_connect(target: Path | str, read_only: bool = False) -> sqlite3.Connection:
    """A plain sqlite3 connection with the PRAGMAs a bank's own connection gets
    (bank/store/sqlite.py): its page cache, and synchronous=FULL where it writes. A baseline run
    with sqlite3's default 2 MiB cache against the bank's 64 MiB flattered neither side."""
    from tunebank.bank.store.sqlite import CACHE_KIB

    conn = sqlite3.connect(f"file:{target}?mode=ro", uri=True) if read_only \
        else sqlite3.connect(target, isolation_level=None)
    conn.execute(f"PRAGMA cache_size=-{CACHE_KIB}")
    if not read_only:
        conn.execute("PRAGMA synchronous=FULL")
    return conn


def plain_insert(db: Path, rows: list[tuple[Any, ...]]) -> float:
    """Seconds for plain sqlite3 to executemany ``rows`` into a file with the same events table
    and indexes, WAL, cache and synchronous=FULL as tunebank's, in one transaction."""
    return _plain_batches(db, [rows])


def plain_insert_by_task(db: Path, rows: list[tuple[Any, ...]]) -> float:
    """Seconds for plain sqlite3 to insert ``rows`` in the transactions `Bank.record` uses for
    them: per task, its task_started alone, its outcomes in one batch, its task_finished alone
    (same table, indexes and PRAGMAs as :func:`plain_insert`)."""
    alone = ("task_started", "task_finished")
    batches: list[list[tuple[Any, ...]]] = []
    for row in rows:  # columns 2 and 5: kind and task_id
        if row[2] in alone or not batches or batches[-1][0][2] in alone or batches[-1][0][5] != row[5]:
            batches.append([])
        batches[-1].append(row)
    return _plain_batches(db, batches)


def _plain_batches(db: Path, batches: list[list[tuple[Any, ...]]]) -> float:
    """Seconds to executemany each batch in a transaction of its own into a new events file."""
    conn = plain_connect(db)
    conn.execute("PRAGMA journal_mode=WAL")
    for statement in events_schema():
        conn.execute(statement)
    marks = ",".join("?" * 13)
    started = time.perf_counter()
    for batch in batches:
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(f"INSERT INTO events VALUES ({marks})", batch)
        conn.execute("COMMIT")
    elapsed = time.perf_counter() - started
    conn.close()
    return elapsed


def plain_lookup(db: Path, soc: str, keys: list[str]) -> float:
    """Seconds for a plain indexed query of ``keys`` in the policy table (500 per IN list)."""
    conn = plain_connect(db, read_only=True)
    started = time.perf_counter()
    found = 0
    for start in range(0, len(keys), 500):
        part = keys[start:start + 500]
        found += len(conn.execute(
            f"SELECT * FROM policy WHERE soc_version = ? AND repo_key IN ({','.join('?' * len(part))})",
            (soc, *part)).fetchall())
    elapsed = time.perf_counter() - started
    conn.close()
    return elapsed


def plain_merge(target: Path, source: Path) -> float:
    """Seconds for ATTACH + INSERT ... SELECT of the source's events the target lacks (new seqs,
    no hashing, no projections: the floor a merge cannot go below)."""
    conn = plain_connect(target)
    started = time.perf_counter()
    conn.execute("ATTACH DATABASE ? AS other", (str(source),))
    conn.execute("BEGIN IMMEDIATE")
    offset = conn.execute("SELECT coalesce(max(seq), 0) FROM main.events").fetchone()[0]
    columns = "event_id, kind, soc_version, repo_key, task_id, op_name, op_type, recorded_at, " \
              "origin, payload, prev_hash, hash"
    conn.execute(f"INSERT INTO main.events (seq, {columns}) SELECT seq + ?, {columns} FROM "
                 "other.events WHERE event_id NOT IN (SELECT event_id FROM main.events) ORDER BY seq",
                 (offset,))
    conn.execute("COMMIT")
    elapsed = time.perf_counter() - started
    conn.close()
    return elapsed
