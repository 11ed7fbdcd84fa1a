"""The bulk paths' cost per event, this tree side by side with another checkout (issue 30: one
per-event form on import, verify, rebuild and lookup), each against its plain baseline, all on
the same data in the same run, interleaved ROUNDS times, each measurement in a process of its own.

- ``import``: `bank import` of an events file of N events into a new bank (the API call, the
  file read in a forked worker as the command reads it), against plain sqlite3 executemany of
  the same rows into the same events table with the bank's PRAGMAs (bench/scale.py), one
  transaction; issue 30's target: >= 0.5x the plain insert's events/s at 1M, on a quiet machine;
- ``fold``: verify's fold of that bank's log (the rows read into memory first, so only the fold
  is timed); target: at least 1.5x faster than the baseline tree's;
- ``lookup``: `Bank.lookup` of 10,000 keys (half known) against a plain indexed query of the
  same keys (bench/scale.py); target: <= 1.6x the plain query. Where the tree can say, its
  parts are timed apart in the same process: the query, the check that each stored info_dict
  is the one asked for (its canonical JSON), and the Policy values built.

    python bench/per_event.py [--events 100000] [--rounds 5] [--baseline /path/to/checkout]

The baseline checkout is any tree with the ``tunebank`` package (040dbd4, before this change,
has it). Prints one JSON line per round as it goes, then a summary line: per measurement and
tree, the geomean and the worst of the rounds, and the ratios. The one-minute load average at
the start and end is printed too: a busy machine moves every figure. Not a test.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(ROOT))

from bench.scale import clean_env, event_rows, plain_insert, plain_lookup, write_events_file  # noqa: E402

LOOKUP_KEYS = 10_000
CHILD = r'''
import gc, json, sys, time
from pathlib import Path
job, db, source = sys.argv[1], sys.argv[2], sys.argv[3]
from tunebank.bank import Bank
try:
    from tunebank.bank.exchange.imports import apply_import, read_imports
except ImportError:  # a tree from before the rooms
    from tunebank.bank.imports import apply_import, read_imports
if job == "import":
    with Bank.open(db, create=True) as bank:
        started = time.perf_counter()
        apply_import(bank, read_imports([Path(source)], None))
        print(json.dumps({"seconds": time.perf_counter() - started, "events": bank.head()}))
elif job == "fold":
    try:
        import tunebank.bank.audit.verify as verify
        from tunebank.bank.store import reads
        with Bank.open(db) as bank:
            rows = list(reads.event_rows(bank.store))
        verify.reads = type("Rows", (), {"event_rows": staticmethod(lambda store: iter(rows))})
        store = None
    except ImportError:
        import tunebank.bank.verify as verify
        with Bank.open(db) as bank:
            rows = list(bank.store.iter_event_rows())
        store = type("Store", (), {"iter_event_rows": staticmethod(lambda: iter(rows))})()
    from tunebank.bank.store.writes import bulk_job
    with bulk_job():
        started = time.perf_counter()
        folded = verify._fold_log(store, verify.VerifyReport(), check_links=False)
        print(json.dumps({"seconds": time.perf_counter() - started, "winners": len(folded.winners)}))
else:  # lookup
    wanted = [(key, info) for key, info in json.loads(Path(source).read_text())]
    with Bank.open(db) as bank:
        started = time.perf_counter()
        found = bank.lookup("Ascend910B2", wanted)
        result = {"seconds": time.perf_counter() - started, "found": len(found)}
        try:  # what the lookup is made of, where this tree can say (the floor's evidence)
            from tunebank.bank.canonical import canonical_json
            from tunebank.bank.store import reads
            from tunebank.bank.store.rows import values_to_policy
        except ImportError:
            reads = None
        if reads is not None:
            asked = dict(wanted)
            started = time.perf_counter()
            rows = reads.policy_rows_for_keys(bank.store, "Ascend910B2", list(asked))
            result["query_s"] = time.perf_counter() - started
            started = time.perf_counter()
            same = [row for row in rows if row[4] == canonical_json(asked[row[1]] or {})]
            result["compare_s"] = time.perf_counter() - started
            started = time.perf_counter()
            made = [values_to_policy(row, info_dict=dict(asked[row[1]] or {})) for row in same]
            result["build_s"] = time.perf_counter() - started
        print(json.dumps(result))
'''


def run_child(tree: Path, *args: str) -> dict[str, float]:
    env = clean_env()
    env["PYTHONPATH"] = str(tree)
    done = subprocess.run([sys.executable, "-c", CHILD, *args], capture_output=True, text=True,
                          env=env, cwd=tree, check=False)
    if done.returncode:
        raise SystemExit(f"{tree}: {' '.join(args[:1])} failed: {done.stderr[-800:]}")
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--baseline", type=Path, default=None)
    options = parser.parse_args()
    trees = {"here": ROOT, **({"baseline": options.baseline} if options.baseline else {})}
    print(json.dumps({"load_1min_start": os.getloadavg()[0], "events": options.events}), flush=True)
    seconds: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        source = folder / "events.jsonl"
        write_events_file(source, options.events)
        rows = event_rows(source)
        for round_ in range(options.rounds):
            line: dict[str, float] = {"round": round_}
            line["plain insert"] = plain_insert(folder / f"plain-{round_}.db", rows)
            order = list(trees.items()) if round_ % 2 == 0 else list(trees.items())[::-1]
            for name, tree in order:
                db = folder / f"{name}-{round_}.db"
                line[f"{name} import"] = run_child(tree, "import", str(db), str(source))["seconds"]
                line[f"{name} fold"] = run_child(tree, "fold", str(db), "")["seconds"]
            db = folder / f"here-{round_}.db"
            import sqlite3
            with sqlite3.connect(db) as conn:
                known = conn.execute("SELECT repo_key, info_dict FROM policy WHERE soc_version = ? "
                                     "LIMIT ?", ("Ascend910B2", LOOKUP_KEYS // 2)).fetchall()
            wanted = [(key, json.loads(info)) for key, info in known]
            wanted += [(f"unknown-{n}", {"op_type": "Add"}) for n in range(LOOKUP_KEYS - len(wanted))]
            keys_file = folder / "wanted.json"
            keys_file.write_text(json.dumps(wanted))
            for name, tree in order:
                looked = run_child(tree, "lookup", str(db), str(keys_file))
                line[f"{name} lookup"] = looked["seconds"]
                for part in ("query_s", "compare_s", "build_s"):
                    if part in looked:
                        line[f"{name} lookup {part[:-2]}"] = looked[part]
            line["plain lookup"] = plain_lookup(db, "Ascend910B2", [key for key, _ in wanted])
            for name, value in line.items():
                if name != "round":
                    seconds.setdefault(name, []).append(value)
            print(json.dumps({k: round(v, 4) for k, v in line.items()}), flush=True)
            for stale in folder.glob(f"*-{round_}.db*"):
                stale.unlink()
    summary: dict[str, object] = {
        name: {"geomean_s": round(geomean(values), 4), "worst_s": round(max(values), 4)}
        for name, values in seconds.items()}
    ratios: dict[str, float] = {}
    for name in trees:
        per_round = [p / i for p, i in zip(seconds["plain insert"], seconds[f"{name} import"], strict=True)]
        ratios[f"{name} import over plain (speed)"] = round(geomean(per_round), 3)
        ratios[f"{name} import over plain, worst round"] = round(min(per_round), 3)
        looked = [lk / p for lk, p in zip(seconds[f"{name} lookup"], seconds["plain lookup"], strict=True)]
        ratios[f"{name} lookup over plain (time)"] = round(geomean(looked), 3)
        ratios[f"{name} lookup over plain, worst round"] = round(max(looked), 3)
    if "baseline" in trees:
        faster = [b / h for b, h in zip(seconds["baseline fold"], seconds["here fold"], strict=True)]
        ratios["fold speed-up over baseline"] = round(geomean(faster), 3)
        ratios["fold speed-up, worst round"] = round(min(faster), 3)
    summary["ratios"] = ratios
    summary["load_1min_end"] = os.getloadavg()[0]
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
