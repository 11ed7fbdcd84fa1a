"""What the checks issue 16 added cost: the database's own integrity check inside `bank verify`,
and the verify that `bank rebuild` now runs before it adopts a log.

Builds the bench workload's bank of N events (an events file imported by `bank import`), then
times, in this process, each side by side with what it is part of:

- ``structure``: ``EventStore.structure_problems`` alone (SQLite's ``PRAGMA integrity_check``);
- ``verify``: the whole ``Bank.verify`` (structure, chain, replay, projections);
- ``derive``: the projections derived again from the log (``EventStore.rebuild_projection``,
  all that ``bank rebuild`` did before);
- ``rebuild``: ``Bank.rebuild`` now (verify, then derive).

Usage: python bench/structure.py [EVENTS ...]   (default 100000); prints one JSON line per size.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.scale import write_events_file
from tunebank.bank import Bank
from tunebank.bank.exchange.imports import apply_import, read_imports


def timed(work: object) -> float:
    started = time.perf_counter()
    work()  # type: ignore[operator]
    return time.perf_counter() - started


def measure(count: int) -> dict[str, float | int]:
    with tempfile.TemporaryDirectory() as tmp:
        events = Path(tmp) / "events.jsonl"
        write_events_file(events, count)
        db = str(Path(tmp) / "bank.db")
        with Bank.open(db, create=True) as bank:
            apply_import(bank, read_imports([events], None))
        with Bank.open(db) as bank:
            structure = timed(bank.store.structure_problems)
            verify = timed(bank.verify)
            derive = timed(bank.store.rebuild_projection)
            rebuild = timed(bank.rebuild)
    return {"events": count, "structure_s": round(structure, 2), "verify_s": round(verify, 2),
            "structure_share": round(structure / verify, 3), "derive_s": round(derive, 2),
            "rebuild_s": round(rebuild, 2), "rebuild_over_derive": round(rebuild / derive, 2)}


def main() -> None:
    for count in [int(arg) for arg in sys.argv[1:]] or [100_000]:
        print(json.dumps(measure(count)))


if __name__ == "__main__":
    main()
