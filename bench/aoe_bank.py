"""Real-shaped AOE banks in and out (issue 27): import a tree of N entries into a new SQLite bank
(target under 5 s for 100,000), import it again (adds nothing), and export it back (target under
3 s), each side by side with a baseline that does only the unavoidable part of the same job.

The tree is fixtures/aoe_banks.big_tree: MatMulV3 entries with the fields of CANN's shipped
banks (about 1 KB a line), over four chip/core-count files.

Baselines, with the bank's settings (WAL, synchronous=FULL, the same cache size, one
transaction):
- import: read every file, parse every line (orjson, as the bank does), and insert (chip,
  line) rows with one executemany into a table of a new database;
- export: read those rows back and write each file's lines;
- import again (issue 41: at most 2x): read every file and parse every line, nothing stored,
  against the bank's import of the same tree into the bank that holds it (which adds nothing).

The import is also timed in its three stages (read and check the files; key the entries and
derive their events against the bank; append them), each run alone on a bank of its own, and
beside them the storage floor: the same events and policy rows inserted with one executemany
per table into a bank's schema (same indexes, triggers and PRAGMAs), nothing else done.

The bank's import also keys each entry (xxh64 of its canonical JSON), compares it with what the
bank holds, builds an event per entry (SHA-256 id, hash chain) and the policy projection; its
export decodes each winning event. The ratio is what that costs over the floor.

Usage: python bench/aoe_bank.py [ENTRIES ...]   (default 100000); prints one JSON line per size.
"""

from __future__ import annotations

import json
import sqlite3
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import orjson

from fixtures.aoe_banks import big_tree
from tunebank.bank import Bank
from tunebank.bank.exchange.exports import export_tree
from tunebank.bank.exchange.imports import apply_import, read_imports
from tunebank.bank.exchange.tree_imports import tree_events, unchanged_files
from tunebank.bank.formats.aoe_repo import bank_files, read_tree
from tunebank.bank.store.sqlite import CACHE_KIB
from tunebank.bank.store.writes import bulk_job


def _seconds(work: Any) -> tuple[float, Any]:
    started = time.perf_counter()
    value = work()
    return time.perf_counter() - started, value


def baseline_import(tree: Path, db: Path) -> int:
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute(f"PRAGMA cache_size=-{CACHE_KIB}")
    conn.execute("CREATE TABLE entry (file TEXT, line TEXT)")
    rows = []
    for path in bank_files(tree):
        for text in path.read_text(encoding="utf-8-sig").splitlines():
            if text.strip() and orjson.loads(text):
                rows.append((path.name, text))
    conn.execute("BEGIN")
    conn.executemany("INSERT INTO entry VALUES (?, ?)", rows)
    conn.execute("COMMIT")
    conn.close()
    return len(rows)


def baseline_read_parse(tree: Path) -> int:
    """Read every file and parse every line: what a re-import that adds nothing must do at
    least, before the bank says every entry is already there."""
    count = 0
    for path in bank_files(tree):
        for text in path.read_text(encoding="utf-8-sig").splitlines():
            count += bool(text.strip() and orjson.loads(text))
    return count


def baseline_export(db: Path, out: Path) -> int:
    conn = sqlite3.connect(db)
    by_file: dict[str, list[str]] = defaultdict(list)
    for file, line in conn.execute("SELECT file, line FROM entry"):
        by_file[file].append(line)
    conn.close()
    out.mkdir(parents=True, exist_ok=True)
    for file, lines in by_file.items():
        (out / file).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return sum(len(v) for v in by_file.values())


def storage_floor(staged: Path, db: Path) -> float:
    """Seconds to write the rows an import stores (its events and policy rows, taken from a bank
    that imported the tree) into a new bank with the same schema, indexes, triggers and
    PRAGMAs, with one executemany per table in one transaction: what storing these bytes
    costs, before any checking, hashing or projecting."""
    with Bank.open(str(db), create=True):
        pass  # the schema, made as the bank makes it
    source = sqlite3.connect(staged)
    tables = {name: source.execute(f"SELECT * FROM {name}").fetchall() for name in ("events", "policy")}
    source.close()
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute(f"PRAGMA cache_size=-{CACHE_KIB}")
    started = time.perf_counter()
    conn.execute("BEGIN IMMEDIATE")
    for name, rows in tables.items():
        conn.executemany(f"INSERT INTO {name} VALUES ({','.join('?' * len(rows[0]))})", rows)
    conn.execute("COMMIT")
    seconds = time.perf_counter() - started
    conn.close()
    return seconds


def measure(entries: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        tree = big_tree(entries).write(root / "tree")
        size = sum(p.stat().st_size for p in bank_files(tree))
        base_in, _ = _seconds(lambda: baseline_import(tree, root / "base.db"))
        base_out, _ = _seconds(lambda: baseline_export(root / "base.db", root / "base-out"))
        # where the time goes, stage by stage, without garbage collection as bank import runs
        with Bank.open(str(root / "staged.db"), create=True) as bank, bulk_job():
            read_s, read = _seconds(lambda: read_tree(tree))
            derive_s, (events, _, _) = _seconds(lambda: tree_events(bank, read, {}))
            append_s, _ = _seconds(lambda: bank.append(events))
        floor_s = storage_floor(root / "staged.db", root / "floor.db")
        with Bank.open(str(root / "bank.db"), create=True) as bank:
            bank_in, report = _seconds(lambda: apply_import(bank, read_imports([tree], None)))
            again, second = _seconds(lambda: apply_import(bank, read_imports(
                [tree], None, unchanged=unchanged_files(bank))))  # as `bank import` reads it
            base_again, _ = _seconds(lambda: baseline_read_parse(tree))
            bank_out, done = _seconds(lambda: export_tree(bank, root / "out", {}))
            assert report.appended > entries and second.appended == 0
            assert done.written.entries == entries
    return {"entries": entries, "tree_mb": round(size / 2**20, 1),
            "import_s": round(bank_in, 2), "baseline_import_s": round(base_in, 2),
            "import_ratio": round(bank_in / base_in, 1), "import_target_s": 5.0,
            "stage_read_s": round(read_s, 2), "stage_derive_events_s": round(derive_s, 2),
            "stage_append_s": round(append_s, 2), "storage_floor_s": round(floor_s, 2),
            "reimport_s": round(again, 2), "baseline_read_parse_s": round(base_again, 2),
            "reimport_ratio": round(again / base_again, 2), "reimport_target_ratio": 2.0,
            "export_s": round(bank_out, 2), "baseline_export_s": round(base_out, 2),
            "export_ratio": round(bank_out / base_out, 1), "export_target_s": 3.0}


def main() -> None:
    for count in [int(arg) for arg in sys.argv[1:]] or [100_000]:
        print(json.dumps(measure(count)))


if __name__ == "__main__":
    main()
