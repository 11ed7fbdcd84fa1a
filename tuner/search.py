"""Search strategies over a :class:`~tuner.space.SearchSpace`: ga, rl, random and exhaustive.

Each strategy is a small class with an explicit random generator; the :class:`Evaluator`
measures candidates in batches, remembers what it measured (a candidate is never measured
twice) and counts measurements against the budget.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from bank.errors import BankError
from tuner.space import SearchSpace

EXHAUSTIVE_LIMIT = 2_000_000
Progress = Callable[[int, int, float], None]
Measure = Callable[[np.ndarray], np.ndarray]


class SearchError(BankError):
    """A search could not run or found no feasible candidate."""


@dataclass(frozen=True)
class SearchResult:
    """The best candidate a search found, its measured latency, and the measurements spent."""

    candidate: tuple[int, ...]
    latency_us: float
    measurements: int


class Evaluator:
    """Measures candidates through a latency function, with noise and repeats if asked.

    Args:
        latency: the cost model, one latency per candidate row.
        noise: relative standard deviation of one run's measurement (0: exact).
        run_loop: runs per candidate; the median is kept (AOE's RUN_LOOP).
        rng: the generator the noise is drawn from.
    """

    def __init__(self, latency: Callable[[np.ndarray], np.ndarray], noise: float = 0.0,
                 run_loop: int = 1, rng: np.random.Generator | None = None) -> None:
        self._latency = latency
        self._noise = noise
        self._run_loop = max(1, run_loop)
        self._rng = rng or np.random.default_rng(0)
        self._seen: dict[bytes, float] = {}
        self.measurements = 0

    def __call__(self, candidates: np.ndarray) -> np.ndarray:
        """Latencies of the rows of ``candidates``; only unseen rows are measured."""
        candidates = np.ascontiguousarray(candidates, dtype=np.int16)
        keys = [row.tobytes() for row in candidates]
        fresh_rows = {}
        for key, row in zip(keys, candidates, strict=True):
            if key not in self._seen and key not in fresh_rows:
                fresh_rows[key] = row
        if fresh_rows:
            batch = np.stack(list(fresh_rows.values()))
            measured = self._measure(batch)
            self._seen.update(zip(fresh_rows, measured.tolist(), strict=True))
            self.measurements += len(fresh_rows)
        return np.array([self._seen[key] for key in keys], dtype=np.float64)

    def _measure(self, batch: np.ndarray) -> np.ndarray:
        exact = np.asarray(self._latency(batch), dtype=np.float64)
        if self._noise <= 0:
            return exact
        runs = 1.0 + self._noise * self._rng.standard_normal((self._run_loop, len(batch)))
        return np.median(exact * np.clip(runs, 0.05, None), axis=0)


class BaseSearch(ABC):
    """A search strategy. ``budget`` caps the measurements it may spend."""

    name = "base"

    def __init__(self, budget: int, rng: np.random.Generator) -> None:
        self.budget = max(1, budget)
        self.rng = rng

    @abstractmethod
    def run(self, space: SearchSpace, evaluate: Measure, warm_start: tuple[int, ...] | None,
            progress: Progress | None = None) -> None:
        """Spend the budget, measuring candidates through ``evaluate``."""

    def search(self, space: SearchSpace, evaluate: Evaluator,
               warm_start: tuple[int, ...] | None = None,
               progress: Progress | None = None) -> SearchResult:
        """Run the strategy and return the best candidate measured.

        Raises:
            SearchError: no candidate measured was feasible.
        """
        self._best: tuple[float, tuple[int, ...]] | None = None
        self._evaluate = evaluate
        self.run(space, self._scored, warm_start, progress)
        if self._best is None or not np.isfinite(self._best[0]):
            raise SearchError("no feasible candidate found")
        return SearchResult(self._best[1], self._best[0], evaluate.measurements)

    def _scored(self, candidates: np.ndarray) -> np.ndarray:
        latencies = self._evaluate(candidates)
        i = int(np.argmin(latencies))
        found = (float(latencies[i]), tuple(int(v) for v in candidates[i]))
        if self._best is None or found < self._best:
            self._best = found
        return latencies

    def _random(self, space: SearchSpace, n: int) -> np.ndarray:
        return np.stack([self.rng.integers(0, len(k.values), n) for k in space.knobs], axis=1)

    @property
    def best_us(self) -> float:
        return self._best[0] if self._best else float("inf")


class RandomSearch(BaseSearch):
    """Uniform random candidates, the default and any warm start among them."""

    name = "random"

    def run(self, space: SearchSpace, evaluate: Measure, warm_start: tuple[int, ...] | None,
            progress: Progress | None = None) -> None:
        seeds = [space.default] + ([warm_start] if warm_start else [])
        evaluate(np.array(seeds))
        evaluate(self._random(space, max(0, self.budget - len(seeds))))


class ExhaustiveSearch(BaseSearch):
    """Every candidate of the space (the ground truth on small spaces); ignores the budget."""

    name = "exhaustive"

    def run(self, space: SearchSpace, evaluate: Measure, warm_start: tuple[int, ...] | None,
            progress: Progress | None = None) -> None:
        if space.size > EXHAUSTIVE_LIMIT:
            raise SearchError(f"--mode exhaustive: the space holds {space.size} candidates, more "
                              f"than {EXHAUSTIVE_LIMIT}; narrow it with --tuning-config")
        dims = tuple(len(k.values) for k in space.knobs)
        for start in range(0, space.size, 65536):
            flat = np.arange(start, min(space.size, start + 65536))
            evaluate(np.stack(np.unravel_index(flat, dims), axis=1))


class GeneticSearch(BaseSearch):
    """Population, tournament selection, uniform crossover, mutation and elitism."""

    name = "ga"
    population = 32
    elite = 2
    tournament = 3

    def run(self, space: SearchSpace, evaluate: Measure, warm_start: tuple[int, ...] | None,
            progress: Progress | None = None) -> None:
        size = min(self.population, self.budget)
        generations = max(1, self.budget // size)
        seeds = [space.default] + ([warm_start] if warm_start else [])
        pop = np.concatenate([np.array(seeds), self._random(space, size - len(seeds))])[:size]
        dims = np.array([len(k.values) for k in space.knobs])
        for generation in range(1, generations + 1):
            fitness = evaluate(pop)
            if progress:
                progress(generation, generations, self.best_us)
            if generation == generations:
                break
            order = np.argsort(fitness, kind="stable")
            elite = pop[order[: self.elite]]
            parents_a = pop[self._tournament(fitness, size - self.elite)]
            parents_b = pop[self._tournament(fitness, size - self.elite)]
            mask = self.rng.random(parents_a.shape) < 0.5
            children = np.where(mask, parents_a, parents_b)
            mutate = self.rng.random(children.shape) < 1.5 / len(dims)
            children = np.where(mutate, self.rng.integers(0, dims, children.shape), children)
            pop = np.concatenate([elite, children])

    def _tournament(self, fitness: np.ndarray, n: int) -> np.ndarray:
        entrants = self.rng.integers(0, len(fitness), (n, self.tournament))
        winners: np.ndarray = entrants[np.arange(n), np.argmin(fitness[entrants], axis=1)]
        return winners


class PolicySearch(BaseSearch):
    """A learned policy over the knobs: one categorical distribution per knob.

    Each round samples a batch from the policy, measures it, and moves every knob's distribution
    toward the values of the best-rewarded candidates (the batch's elite plus the best so far),
    the cross-entropy method of policy search. A small uniform share keeps it exploring. It
    concentrates on good regions quickly, so it spends fewer measurements than ga.
    """

    name = "rl"
    batch = 32
    elite = 6
    learning_rate = 0.3
    explore = 0.02

    def run(self, space: SearchSpace, evaluate: Measure, warm_start: tuple[int, ...] | None,
            progress: Progress | None = None) -> None:
        policy = [np.full(len(k.values), 1.0 / len(k.values)) for k in space.knobs]
        anchors = [space.default] + ([warm_start] if warm_start else [])
        for anchor, weight in zip(anchors, (0.2, 0.4), strict=False):
            policy = [(1 - weight) * p + weight * np.eye(len(p))[i]
                      for p, i in zip(policy, anchor, strict=True)]
        latencies = evaluate(np.array(anchors))
        best = np.array(anchors[int(np.argmin(latencies))])
        best_us = float(np.min(latencies))
        rounds = max(1, (self.budget - len(anchors)) // self.batch)
        for round_ in range(1, rounds + 1):
            picks = np.stack([self.rng.choice(len(p), self.batch, p=p) for p in policy], axis=1)
            latency = evaluate(picks)
            order = np.argsort(latency, kind="stable")[: self.elite]
            if latency[order[0]] < best_us:
                best, best_us = picks[order[0]], float(latency[order[0]])
            elite = np.vstack([picks[order][np.isfinite(latency[order])], best[None, :]])
            for i, p in enumerate(policy):
                share = np.bincount(elite[:, i], minlength=len(p)) / len(elite)
                mixed = (1 - self.learning_rate) * p + self.learning_rate * share
                policy[i] = (1 - self.explore) * mixed + self.explore / len(p)
            if progress:
                progress(round_, rounds, self.best_us)


STRATEGIES: dict[str, type[BaseSearch]] = {
    cls.name: cls for cls in (GeneticSearch, PolicySearch, RandomSearch, ExhaustiveSearch)
}
DEFAULT_BUDGET = {"ga": 512, "rl": 256, "random": 512, "exhaustive": 0}


def make_search(mode: str, budget: int | None, rng: np.random.Generator) -> BaseSearch:
    """The strategy named ``mode`` with its budget (the mode's default when ``None``).

    Raises:
        SearchError: ``mode`` is not a known strategy.
    """
    if mode not in STRATEGIES:
        raise SearchError(f"--mode: unknown mode {mode!r}; choose one of {', '.join(STRATEGIES)}")
    return STRATEGIES[mode](budget if budget is not None else DEFAULT_BUDGET[mode], rng)
