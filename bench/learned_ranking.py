"""Would a learned ranking pay for itself? A prototype, measured before anything is built.

Usage: python bench/learned_ranking.py [--seeds 5] [--budgets 16,32] [--pool 8192]
                                       [--only splits,next]

Today a tune records only each key's winner; transfer borrows the winners of the nearest known
keys (tuner/search/transfer.py). A learned ranking would need more: every candidate measured,
with its time, for every key tuned (about 500 rows a key at the default budget, where the bank
keeps one). The prototype records exactly that (a default-budget ga search per known Cube key,
every measurement kept), fits one gradient-boosted regressor per family and chip
(scikit-learn's HistGradientBoostingRegressor: features are the key's log2 sizes and each
knob's value; the target is the log of the time over the key's default time), and lets the
model's 3 best of ``--pool`` random candidates that fit the chip (and of the neighbours'
winners) replace the neighbours' winners, the best one guiding the descent:

- ``splits``: the same-chip splits of bench/search_quality.py; each split's new Cube keys at
  budgets 16 and 32, 5 seeds each, with no transfer, with transfer as `bank tune` does it and
  with the ranking, against the exact optimum (bench/optima.json);
- ``next``: every bundled model's next version after its first (as in bench/search_quality.py),
  tuned with the default budget by `bank tune` with transfer as it is and with the ranking
  (same neighbours, same early stop; the model fitted to the first version's keys):
  measurements summed over the seeds and the geomean of the modelled model times.

It needs scikit-learn (pip install -e '.[bench]'), which nothing else here uses. Not a test: it
prints tables and takes minutes.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.search_quality import (  # noqa: E402
    NEXT_VERSIONS,
    SOCS,
    SPLITS,
    Operator,
    _donors,
    _model,
    _ops,
    geomean,
    ours,
    versions,
    with_optima,
)
from tunebank.bank import Bank  # noqa: E402
from tunebank.tuner.flow import tune  # noqa: E402
from tunebank.tuner.measure.space import SearchSpace  # noqa: E402
from tunebank.tuner.model.workload import Workload  # noqa: E402
from tunebank.tuner.options import TuneOptions  # noqa: E402
from tunebank.tuner.search.strategies import Evaluator, make_search  # noqa: E402
from tunebank.tuner.search.transfer import Start, start_from  # noqa: E402

SAME_CHIP = [(donor, target) for donor, target in SPLITS
             if donor.split("@")[1] == target.split("@")[1] and not target.startswith("bert")]


def features(work: Workload, space: SearchSpace, rows: np.ndarray) -> np.ndarray:
    """One row per candidate: the key's sizes (log2 of its workload's integer fields), then each
    knob's value (log2 of value + 1; a labelled knob's index)."""
    sizes = [math.log2(max(1, int(v))) for v in vars(work).values() if not isinstance(v, bool)]
    values = np.column_stack([
        (np.arange(len(k.values)) if k.labels else np.log2(np.asarray(k.values, dtype=float) + 1))[rows[:, i]]
        for i, k in enumerate(space.knobs)])
    return np.column_stack([np.repeat([sizes], len(rows), axis=0), values])


def recorded(op: Operator, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Every candidate a default-budget ga search of ``op`` measured, and log(time / default
    time): what a bank recording more than winners would hold of the key."""
    rows: list[np.ndarray] = []
    times: list[np.ndarray] = []

    def latency(candidates: np.ndarray) -> np.ndarray:
        found = op.latency(candidates)
        rows.append(candidates.copy())
        times.append(found)
        return found

    evaluate = Evaluator(latency, op.fit_check())
    evaluate(np.array([op.group.space.default]))
    make_search("ga", None, np.random.default_rng(seed)).search(op.group.space, evaluate)
    every, spent = np.concatenate(rows), np.concatenate(times)
    keep = np.isfinite(spent)
    return every[keep], np.log(spent[keep] / spent[0])


def fit(ops: Sequence[Operator]) -> tuple[Any, int]:
    """A regressor over every recorded measurement of ``ops`` (one family, one chip), and how
    many rows it learned from."""
    from sklearn.ensemble import HistGradientBoostingRegressor

    xs, ys = [], []
    for op in ops:
        rows, target = recorded(op, seed=0)
        xs.append(features(op.group.work, op.group.space, rows))
        ys.append(target)
    x, y = np.concatenate(xs), np.concatenate(ys)
    model = HistGradientBoostingRegressor(max_iter=300, learning_rate=0.1, random_state=0)
    model.fit(x, y)
    return model, len(y)


def ranked(work: Workload, space: SearchSpace, fits: Callable[[np.ndarray], np.ndarray], model: Any,
           pool: int, extra: Sequence[tuple[int, ...]],
           rng: np.random.Generator) -> tuple[tuple[int, ...], ...]:
    """The model's 3 best candidates that fit the chip, of ``pool`` random ones and ``extra``."""
    dims = [len(k.values) for k in space.knobs]
    rows = rng.integers(0, dims, (pool, len(dims)))
    switches = [i for i, k in enumerate(space.knobs) if k.switch]
    rows[:, switches] = np.asarray(space.default)[switches]
    if extra:
        rows = np.concatenate([np.array(extra), rows])
    rows = np.unique(rows[fits(rows)], axis=0)
    order = np.argsort(model.predict(features(work, space, rows)), kind="stable")[:3]
    return tuple(tuple(int(v) for v in rows[i]) for i in order)


def searched(op: Operator, budget: int, seed: int, borrowed: Sequence[tuple[int, ...]],
             patience: int | None) -> float:
    found_us, _ = ours(op, "ga", budget, seed, borrowed, patience)
    return found_us / op.optimum_us


def run_splits(seeds: int, budgets: list[int], pool: int) -> str:
    """The same-chip splits at small budgets, as the module's docstring says."""
    pooled: dict[tuple[str, int], list[float]] = defaultdict(list)
    lines = ["| split (keys) | rows learned | " + " | ".join(
        f"{b} {way}" for b in budgets for way in ("none", "transfer", "ranked")) + " |",
        "|---|---|" + "---|" * (3 * len(budgets))]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for donor, target in SAME_CHIP:
            started = time.perf_counter()
            models, soc = donor.split("@")
            donors, known = _donors(folder, models.split("+"), soc)
            donor_ops = [op for name in models.split("+")
                         for op in _ops(name, _model(name, folder)[0], soc) if op.family == "cube"]
            name, _ = target.split("@")
            path, shapes = _model(name, folder)
            targets = with_optima([op for op in _ops(name, path, soc, shapes)
                                   if op.family == "cube" and (soc, op.group.repo_key) not in known])
            fitted: dict[str, tuple[Any, int]] = {}
            for family in {op.group.space.family for op in targets}:
                fitted[family] = fit([op for op in donor_ops if op.group.space.family == family])
            cells: dict[tuple[str, int], list[float]] = defaultdict(list)
            for op in targets:
                model = fitted[op.group.space.family][0]
                for budget in budgets:
                    start = start_from(donors, op.group.info, op.group.repo_key, op.soc,
                                       op.group.space, op.cost, op.group.work, budget)
                    rng = np.random.default_rng([int(op.group.repo_key) % 2**32, budget])
                    best = ranked(op.group.work, op.group.space, op.fits, model, pool,
                                  start.borrowed, rng)
                    patience = start.patience
                    for seed in range(seeds):
                        cells[("none", budget)].append(searched(op, budget, seed, (), None))
                        cells[("transfer", budget)].append(
                            searched(op, budget, seed, start.borrowed, patience))
                        cells[("ranked", budget)].append(searched(op, budget, seed, best, patience))
            for key, values in cells.items():
                pooled[key] += values
            rows = sum(n for _, n in fitted.values())
            lines.append(f"| {donor} -> {target} ({len(targets)}) | {rows:,} | " + " | ".join(
                f"{geomean(cells[(way, b)]):.4f}" for b in budgets
                for way in ("none", "transfer", "ranked")) + " |")
            print(lines[-1], f"({time.perf_counter() - started:.0f} s)", file=sys.stderr)
    lines.append("| pooled | - | " + " | ".join(
        f"{geomean(pooled[(way, b)]):.4f}" for b in budgets for way in ("none", "transfer", "ranked"))
        + " |")
    return "\n".join(lines)


def run_next(seeds: int, pool: int, names: Sequence[str] = NEXT_VERSIONS) -> str:
    """Each model's next version after its first, with the default budget, as `bank tune`
    runs it: transfer as it is, and with the model's 3 best candidates in place of the
    neighbours' winners (same neighbours, same early stop; a key with no neighbour is left
    alone), the model fitted to what the first version's keys measured."""
    import tunebank.tuner.flow as flow

    real_start = flow.start_from
    lines = ["| next version | transfer: measurements, model ms | ranked: measurements, model ms |",
             "|---|---|---|"]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for soc in SOCS:
            for name in names:
                v1, v2, shapes = versions(name, folder)
                known = [op for op in _ops(name, v1, soc, shapes) if op.family == "cube"]
                models = {family: fit([op for op in known if op.group.space.family == family])[0]
                          for family in {op.group.space.family for op in known}}

                def with_ranking(donors: Any, info: Any, repo_key: str, soc_version: str,
                                 space: SearchSpace, cost: Any, work: Workload, budget: int,
                                 models: dict[str, Any] = models) -> Start:
                    start = real_start(donors, info, repo_key, soc_version, space, cost, work, budget)
                    if not start.borrowed or space.family not in models:
                        return start
                    best = ranked(work, space, lambda rows: cost.fitting(work, space, rows),
                                  models[space.family], pool, start.borrowed,
                                  np.random.default_rng(int(repo_key) % 2**32))
                    return Start(start.neighbours, best, start.patience)

                found: dict[str, list[tuple[int, float]]] = {"transfer": [], "ranked": []}
                for seed in range(seeds):
                    for way in found:
                        flow.start_from = with_ranking if way == "ranked" else real_start  # type: ignore[assignment]
                        db = folder / f"{name}-{soc}-{way}.db"
                        db.unlink(missing_ok=True)
                        reports = [tune(lambda path=db: Bank.open(str(path), create=True),
                                        TuneOptions(model=model, soc_version=soc, work_dir=folder,
                                                    input_shapes=shapes or {}, seed=seed))
                                   for model in (v1, v2)]
                        found[way].append((reports[1].measurements, reports[1].model_result_ms))
                flow.start_from = real_start  # type: ignore[assignment]
                cells = [f"{sum(m for m, _ in runs):,}, {geomean([t for _, t in runs]):.4f}"
                         for runs in found.values()]
                lines.append(f"| {name}@{soc} | {cells[0]} | {cells[1]} |")
                print(lines[-1], file=sys.stderr)
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--budgets", default="16,32")
    parser.add_argument("--pool", type=int, default=8192)
    parser.add_argument("--only", default="splits,next")
    args = parser.parse_args()
    parts = args.only.split(",")
    if "splits" in parts:
        print(run_splits(args.seeds, [int(b) for b in args.budgets.split(",")], args.pool))
    if "next" in parts:
        print(run_next(args.seeds, args.pool))


if __name__ == "__main__":
    main()
