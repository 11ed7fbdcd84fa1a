"""Trials, not features: do a ranking model or repaired moves bring ga closer to the optimum?

Usage: python bench/search_trials.py [--seeds 3] [--fits]

Issue 17 asked whether a simple model should rank candidates before they are measured. This
runs, on the 60 Cube keys of bench/search_quality.py's scratch suite against their exact optima,
four searches with the same budget rule as `bank tune` (distinct candidates, default included):

- ``ga``: tunebank's GeneticSearch as shipped, its descent repairing the moves that do not fit
  the chip (:meth:`tuner.search.strategies.BaseSearch._line`); ``ga-no-repair``, the same without;
- ``ga+rank``: the same descent, then each generation breeds 16 times the children it needs and
  measures those a ridge regression ranks best (log latency on a one-hot and a log2 value per
  knob, fitted to every candidate measured so far), a quarter drawn at random to keep exploring;
- ``local+rank``: no descent; each step proposes every one-knob change of the best candidate
  and 400 two-knob changes of each of the three best, and measures the 4 the model ranks best;

``--fits`` gives every search the chip's static fit check for free: a candidate that does not
fit the buffers is never measured nor counted (what a compiler's tiling check would reject).
It prints the geomean and the worst of best-found / optimum per budget. Seconds, not minutes.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.search_quality import Operator, geomean, suites, with_optima  # noqa: E402
from tunebank.tuner.measure.space import SearchSpace  # noqa: E402
from tunebank.tuner.search.strategies import Evaluator, GeneticSearch, Measure  # noqa: E402

RIDGE = 1.0
PICK = 4


def features(space: SearchSpace, rows: np.ndarray) -> np.ndarray:
    """A constant, then per knob with a choice: its one-hot value and the log2 of its value."""
    cols = [np.ones((len(rows), 1))]
    for i, knob in enumerate(space.knobs):
        if len(knob.values) < 2:
            continue
        cols.append(np.eye(len(knob.values))[rows[:, i]])
        cols.append(np.log2(np.maximum(np.asarray(knob.values, float), 1))[rows[:, i], None])
    return np.hstack(cols)


def rank(space: SearchSpace, measured: np.ndarray, latency: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Order of ``rows`` by the ridge model's predicted log latency, best first; candidates
    measured as not fitting are fitted at the worst finite latency plus one (e-fold)."""
    ok = np.isfinite(latency)
    if ok.sum() < 4:
        return np.arange(len(rows))
    y = np.where(ok, np.log(np.where(ok, latency, 1.0)), np.log(latency[ok].max()) + 1.0)
    x = features(space, measured)
    w = np.linalg.solve(x.T @ x + RIDGE * np.eye(x.shape[1]), x.T @ (y - y.mean()))
    order: np.ndarray = np.argsort(features(space, rows) @ w, kind="stable")
    return order


class RankedGA(GeneticSearch):
    """GeneticSearch's descent, then generations chosen by the ranking model."""

    def run(self, space: SearchSpace, evaluate: Measure, warm_start: tuple[int, ...] | None) -> None:
        dims = np.array([len(k.values) for k in space.knobs])
        size = int(np.clip(self.budget // 4, 8, self.population))
        seen: list[tuple[np.ndarray, np.ndarray]] = []

        def scored(rows: np.ndarray) -> np.ndarray:
            latency = evaluate(rows)
            seen.append((rows.astype(np.int64), latency))
            return latency

        seeds = self._seeds(space, warm_start)
        first = scored(seeds)
        self._descend(scored, seeds[int(np.argmin(first))], float(first.min()), dims, size)
        gen = max(4, size // 2)
        while self.left > 0:
            measured = np.concatenate([r for r, _ in seen])
            latency = np.concatenate([s for _, s in seen])
            keep = np.argsort(latency, kind="stable")[:size]
            pop, fitness = measured[keep], latency[keep]
            a, b = (pop[self._tournament(fitness, 16 * gen)] for _ in range(2))
            kids = self._mutate(np.where(self.rng.random(a.shape) < 0.5, a, b), dims, 1.5)
            kids = self._evaluate.unseen(kids, 16 * gen).astype(np.int64)
            if len(kids) > gen:
                order = rank(space, measured, latency, kids)
                explore = gen // 4
                pick = np.concatenate([order[: gen - explore],
                                       self.rng.choice(order[gen - explore:], explore, replace=False)])
                kids = kids[pick]
            kids = self._fresh(space, kids, gen)
            if not len(kids):
                return
            scored(kids)


class RankedLocal(GeneticSearch):
    """A local search around the best candidates, the next few chosen by the ranking model."""

    def run(self, space: SearchSpace, evaluate: Measure, warm_start: tuple[int, ...] | None) -> None:
        dims = np.array([len(k.values) for k in space.knobs])
        measured, latency = self._seeds(space, warm_start).astype(np.int64), np.empty(0)
        latency = evaluate(measured)
        while self.left > 0:
            centres = measured[np.argsort(latency, kind="stable")[:3]]
            proposals = []
            for knob, dim in enumerate(dims):
                rows = np.repeat(centres[:1], dim, axis=0)
                rows[:, knob] = np.arange(dim)
                proposals.append(rows)
            for centre in centres:
                rows = np.repeat(centre[None, :], 400, axis=0)
                for _ in range(2):
                    knob = self.rng.integers(0, len(dims), 400)
                    rows[np.arange(400), knob] = self.rng.integers(0, dims[knob])
                proposals.append(rows)
            rows = self._evaluate.unseen(np.concatenate(proposals), 10**6).astype(np.int64)
            rows = rows[rank(space, measured, latency, rows)[:PICK]] if len(rows) else rows
            rows = self._fresh(space, rows, PICK).astype(np.int64)
            if not len(rows):
                return
            measured, latency = np.concatenate([measured, rows]), np.concatenate([latency, evaluate(rows)])


class FreeFitCheck(Evaluator):
    """An evaluator that prices nothing that does not fit: such a candidate is remembered as
    ``inf`` without a measurement."""

    def __init__(self, op: Operator) -> None:
        super().__init__(op.latency, fits=op.fit_check())
        self._op = op

    def __call__(self, candidates: np.ndarray) -> np.ndarray:
        rows = np.ascontiguousarray(candidates, dtype=np.int16)
        for row in rows[~self._op.fits(rows)]:
            self._seen.setdefault(row.tobytes(), math.inf)
        return super().__call__(rows)


def best_found(op: Operator, cls: type[GeneticSearch], budget: int, seed: int, free_fits: bool,
               repair: bool = True) -> float:
    """The best latency one search finds on one key, the default priced first; ``repair``
    gives the search the static fit check its descent repairs moves with."""
    checked = op.fit_check() if repair else None
    evaluate = FreeFitCheck(op) if free_fits else Evaluator(op.latency, fits=checked)
    evaluate(np.array([op.group.space.default]))
    rng = np.random.default_rng([seed, int(op.group.repo_key)])
    return cls(budget, rng).search(op.group.space, evaluate).latency_us


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--fits", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        ops = [op for op in with_optima(suites(Path(folder))["scratch"]) if op.family == "cube"]
    searches: dict[str, tuple[type[GeneticSearch], bool]] = {
        "ga": (GeneticSearch, True), "ga-no-repair": (GeneticSearch, False),
        "ga+rank": (RankedGA, True), "local+rank": (RankedLocal, True)}
    print(f"{len(ops)} Cube keys x {args.seeds} seeds, free fit check: {args.fits}")
    print("search      " + "".join(f"{b:>16}" for b in (16, 32, 64, 128)))
    for name, (cls, repair) in searches.items():
        cells = []
        for budget in (16, 32, 64, 128):
            ratios = [best_found(op, cls, budget, s, args.fits, repair) / op.optimum_us
                      for op in ops for s in range(args.seeds)]
            cells.append(f"{geomean(ratios):.3f} / {max(ratios):.3f}")
        print(f"{name:<12}" + "".join(f"{c:>16}" for c in cells))


if __name__ == "__main__":
    main()
