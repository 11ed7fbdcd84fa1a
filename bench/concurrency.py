"""Many writers on one bank: 8 writer processes at once against the same 8 one after another.

Usage: python bench/concurrency.py [--backend sqlite|postgresql|both]

The writers are those of tests/test_concurrency.py (4 tunes, 2 of them of one model, 2 imports
of AOE result files, 2 imports of one events export) with 2 readers following and verifying
the log. Each backend runs the scenario twice on fresh banks, concurrent and serial, and prints
them side by side. PostgreSQL runs on a private server started from Debian's binaries. Not a
test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.concurrency import ScenarioResult, run_scenario
from tests.postgres import Cluster, server_bin
from tunebank.bank import Bank


def figures(db: str, result: ScenarioResult) -> dict[str, float]:
    with Bank.open(db) as bank:
        events, ok = bank.head(), bank.verify().ok
    waits = [w.stats.get("max_lock_wait_s", 0.0) for w in result.writers]
    return {
        "events": events, "seconds": result.seconds, "events_per_s": events / result.seconds,
        "failed_writers": sum(w.returncode != 0 for w in result.writers),
        "transactions": sum(w.stats.get("transactions", 0) for w in result.writers),
        "retries": sum(w.stats.get("retries", 0) for w in result.writers),
        "max_lock_wait_s": max(waits), "reader_verifies": sum(r["verifies"] for r in result.readers),
        "reader_problems": sum(len(r["problems"]) for r in result.readers), "verify_ok": ok,
    }


def bench(name: str, make_db: list[str], folder: Path) -> None:
    rows = {}
    for (mode, serial), db in zip((("concurrent", False), ("serial", True)), make_db, strict=True):
        rows[mode] = figures(db, run_scenario(db, folder / f"{name}-{mode}", serial=serial))
    print(f"\n{name}: 8 writers + 2 live readers")
    print(f"{'':22}{'concurrent':>12}{'serial':>12}")
    for key in rows["concurrent"]:
        a, b = rows["concurrent"][key], rows["serial"][key]
        print(f"{key:22}{a:>12.3f}{b:>12.3f}" if isinstance(a, float) else f"{key:22}{a!s:>12}{b!s:>12}")
    ratio = rows["serial"]["seconds"] / rows["concurrent"]["seconds"]
    print(f"wall time serial / concurrent: {ratio:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=["sqlite", "postgresql", "both"], default="both")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tunebank-bench-") as tmp:
        folder = Path(tmp)
        if args.backend in ("sqlite", "both"):
            bench("sqlite", [str(folder / "concurrent.db"), str(folder / "serial.db")], folder)
        if args.backend in ("postgresql", "both"):
            bin_dir = server_bin()
            if bin_dir is None:
                sys.exit("postgresql: no server binaries (install Debian's postgresql package)")
            clusters = [Cluster(bin_dir), Cluster(bin_dir)]
            for cluster in clusters:
                cluster.start()
            try:
                bench("postgresql", [c.url for c in clusters], folder)
            finally:
                for cluster in clusters:
                    cluster.stop()


if __name__ == "__main__":
    main()
