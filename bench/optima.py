"""The exact optimum of every key the search benchmarks judge, cached in bench/optima.json.

The optimum of a key is found by pricing every candidate of its space that fits the chip
(tuner/search/optimum.py); nothing is left to a long search of the methods being judged. The cache is
keyed by chip and repo_key and stamped with the cost model's version; a stale or missing cache
is made again by one command:

    python bench/optima.py            # every key bench/search_quality.py judges (minutes)

Usage from the benchmarks: :func:`optima` returns the cached entries, pricing what is missing.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tunebank.tuner.measure.costmodel import COST_MODEL_VERSION, CostModel  # noqa: E402
from tunebank.tuner.plan.grouping import KeyGroup  # noqa: E402
from tunebank.tuner.search.optimum import exact_optimum  # noqa: E402

CACHE = ROOT / "bench" / "optima.json"


def _load() -> dict[str, Any]:
    if not CACHE.exists():
        return {}
    data = json.loads(CACHE.read_text())
    return dict(data["entries"]) if data.get("cost_model_version") == COST_MODEL_VERSION else {}


def optima(work: Iterable[tuple[str, KeyGroup, CostModel]], *, save: bool = True) -> dict[str, Any]:
    """The optimum of each (soc, group, cost) by ``soc/repo_key``: from the cache, or priced
    now and added to it."""
    entries = _load()
    added = 0
    for soc, group, cost in work:
        name = f"{soc}/{group.repo_key}"
        if name in entries:
            continue
        started = time.perf_counter()
        found = exact_optimum(cost, group.work, group.space)
        entries[name] = {"optimum_us": found.latency_us, "candidate": list(found.candidate),
                         "priced": found.priced, "space": found.space, "family": group.space.family,
                         "seconds": round(time.perf_counter() - started, 2)}
        added += 1
    if added and save:
        CACHE.write_text(json.dumps({"cost_model_version": COST_MODEL_VERSION,
                                     "entries": dict(sorted(entries.items()))}, indent=1) + "\n")
    return entries


def main() -> None:
    from bench.search_quality import SPLITS, _model, _ops, suites

    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        ops = [op for found in suites(folder).values() for op in found]
        for name, soc in sorted({tuple(target.split("@")) for _, target in SPLITS}):
            path, shapes = _model(name, folder)
            ops += [op for op in _ops(name, path, soc, shapes) if op.family == "cube"]
        work = [(op.soc, op.group, op.cost) for op in ops]
    CACHE.unlink(missing_ok=True)
    entries = optima(work)
    priced = sum(e["priced"] for e in entries.values())
    space = sum(e["space"] for e in entries.values())
    print(f"{len(entries)} keys: {priced:,} of {space:,} candidates priced "
          f"({priced / max(space, 1):.1%}) in {time.perf_counter() - started:.0f} s -> {CACHE}")


if __name__ == "__main__":
    main()
