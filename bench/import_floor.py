"""Where an import's time goes, for the floor issue 30's import target meets: the seconds each
SQL statement of `bank import` takes (timed around the store's driver calls, in this process),
beside the seconds the events file's reader takes alone to parse and check every line (what
the forked worker does, here in one process, garbage collection off as the import has it).

    python bench/import_floor.py [EVENTS]      (default 100000)

Prints one JSON line: the import's wall seconds, the database's seconds by statement (largest
first), their sum, plain executemany of the same rows (bench/scale.py), and the reader's seconds
(best of 3). Not a test.
"""

from __future__ import annotations

import collections
import gc
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.scale import event_rows, plain_insert, write_events_file
from tunebank.bank import Bank
from tunebank.bank.exchange.imports import apply_import, read_imports
from tunebank.bank.formats.jsonl import EventsFileInfo, iter_events_file
from tunebank.bank.store import driver

spent: collections.Counter[str] = collections.Counter()


def timed(name: str) -> None:
    """Wrap Db.NAME so each statement's seconds add up under its first words."""
    original = getattr(driver.Db, name)

    def wrapper(self: driver.Db, statement: str, *args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return original(self, statement, *args, **kwargs)
        finally:
            spent[" ".join(statement.split()[:4])[:48]] += time.perf_counter() - started

    setattr(driver.Db, name, wrapper)


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    for name in ("rows", "run", "run_many", "one", "scalar"):  # insert_rows runs run_many
        timed(name)
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "events.jsonl"
        write_events_file(source, count)
        plain = plain_insert(Path(tmp) / "plain.db", event_rows(source))
        with Bank.open(str(Path(tmp) / "bank.db"), create=True) as bank:
            spent.clear()
            started = time.perf_counter()
            apply_import(bank, read_imports([source], None))
            wall = time.perf_counter() - started
        statements = dict(spent.most_common())
        gc.disable()
        reader = []
        for _ in range(3):
            started = time.perf_counter()
            for stored in iter_events_file(source, None, EventsFileInfo()):
                stored.row()
            reader.append(time.perf_counter() - started)
        gc.enable()
    print(json.dumps({"events": count, "import_s": round(wall, 3),
                      "database_s": round(sum(statements.values()), 3),
                      "by_statement_s": {k: round(v, 3) for k, v in statements.items()},
                      "plain_executemany_s": round(plain, 3),
                      "reader_alone_s": round(min(reader), 3)}))


if __name__ == "__main__":
    main()
