"""Opening an existing bank to write (what every `bank tune` and `bank import` does) against
opening the same file with sqlite3 and reading its head, each in a fresh interpreter,
interleaved, ROUNDS times.

    python bench/bank_open.py [ROUNDS]

Prints one JSON line: each side's geomean and worst time in ms (only the open and first read,
not the interpreter's start), their ratio, and the target (issue 30: under 10 ms).
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TARGET_MS = 10.0
BANK = """
import time
from tunebank.bank import Bank
start = time.perf_counter()
with Bank.open({db!r}, create=True) as bank:
    bank.head()
print((time.perf_counter() - start) * 1000)
"""
PLAIN = """
import sqlite3, time
start = time.perf_counter()
conn = sqlite3.connect({db!r}, timeout=30, isolation_level=None)
conn.execute("PRAGMA synchronous=FULL")
conn.execute("SELECT COALESCE(MAX(seq), 0) FROM events").fetchone()
conn.close()
print((time.perf_counter() - start) * 1000)
"""


def _run(code: str) -> float:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=ROOT)
    return float(out.stdout.strip().splitlines()[-1])


def _geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def main(rounds: int) -> dict[str, float]:
    from tunebank.bank import Bank

    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp) / "bank.db")
        Bank.open(db, create=True).close()
        bank, plain = [], []
        for _ in range(rounds):  # interleaved: a machine's load falls on both alike
            bank.append(_run(BANK.format(db=db)))
            plain.append(_run(PLAIN.format(db=db)))
    return {"rounds": rounds, "bank_open_ms_geomean": round(_geomean(bank), 2),
            "bank_open_ms_worst": round(max(bank), 2),
            "plain_sqlite3_ms_geomean": round(_geomean(plain), 2),
            "plain_sqlite3_ms_worst": round(max(plain), 2),
            "ratio_geomean": round(_geomean(bank) / _geomean(plain), 2),
            "target_ms": TARGET_MS}


if __name__ == "__main__":
    print(json.dumps(main(int(sys.argv[1]) if len(sys.argv) > 1 else 10)))
