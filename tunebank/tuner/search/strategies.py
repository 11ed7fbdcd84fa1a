"""Search strategies over a :class:`~tuner.measure.space.SearchSpace`: ga, rl, random and exhaustive.

Each strategy is a small class with an explicit random generator; the :class:`Evaluator`
measures candidates in batches through a backend (tuner/measure/backend.py), remembers what it
measured (a candidate is never measured twice) and counts measurements against the budget.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from tunebank.bank.errors import BankError
from tunebank.tuner.measure.space import FitCheck, SearchSpace

EXHAUSTIVE_LIMIT = 2_000_000
Progress = Callable[[int, int, float], None]
Measure = Callable[[np.ndarray], np.ndarray]


REPAIRS = 3
"""A descent move that does not fit is repaired this many ways (see :meth:`BaseSearch._line`)."""
PROBE_BELOW = 8
"""A descent probes and repairs while its budget is under this many full passes over the knobs."""
SURVEY_FROM = 2
"""A probing descent surveys first, and walks across plateaus, when its budget holds this many
measurements per knob (below that the survey would be all it did)."""


class SearchError(BankError):
    """A search could not run or found no feasible candidate."""


@dataclass(frozen=True)
class SearchResult:
    """The best candidate a search found, its measured latency, and the measurements spent."""

    candidate: tuple[int, ...]
    latency_us: float
    measurements: int


class Evaluator:
    """Measures candidates through a backend's latency function, in batches, never the same
    candidate twice, counting what it measured.

    Args:
        latency: one latency per candidate row (a backend's ``measure`` for one key, whose
            noise and repeats are its own).
        fits: the backend's static check of whether candidates fit the chip, if it has one (a
            compiler rejects such a tiling before it runs). Searches use it only to choose
            what to measure; a candidate that is measured counts whether it fits or not.
    """

    def __init__(self, latency: Callable[[np.ndarray], np.ndarray],
                 fits: FitCheck | None = None) -> None:
        self._latency = latency
        self.fits = fits
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

    def unseen(self, candidates: np.ndarray, limit: int) -> np.ndarray:
        """Up to ``limit`` rows of ``candidates`` never measured, duplicates dropped, in order."""
        rows = np.ascontiguousarray(candidates, dtype=np.int16)
        fresh: dict[bytes, int] = {}
        for index, row in enumerate(rows):
            if len(fresh) >= limit:
                break
            key = row.tobytes()
            if key not in self._seen and key not in fresh:
                fresh[key] = index
        return rows[list(fresh.values())] if fresh else rows[:0]

    def _measure(self, batch: np.ndarray) -> np.ndarray:
        return np.asarray(self._latency(batch), dtype=np.float64)


class BaseSearch(ABC):
    """A search strategy. ``budget`` caps the distinct candidates measured for the key, counted
    on the evaluator from its first measurement: the compiler's default, which the tuner
    prices before the search starts, is one of them (``--budget 64`` measures 64)."""

    name = "base"

    def __init__(self, budget: int, rng: np.random.Generator) -> None:
        self.budget = max(1, budget)
        self.rng = rng
        self._lines: dict[tuple[bytes, int], list[np.ndarray]] = {}
        self._frugal = True  # whether the descent probes and repairs (see _descend)
        self._walk = False  # whether a probe walks on across a plateau (see _probe)
        self._switches: list[tuple[int, int]] = []  # (knob, default) of every switch knob

    @abstractmethod
    def run(self, space: SearchSpace, evaluate: Measure, warm_start: tuple[int, ...] | None) -> None:
        """Spend the budget, measuring candidates through ``evaluate`` (and reporting progress
        with :meth:`_tick`)."""

    def search(self, space: SearchSpace, evaluate: Evaluator,
               warm_start: tuple[int, ...] | None = None,
               progress: Progress | None = None, borrowed: Sequence[tuple[int, ...]] = (),
               patience: int | None = None) -> SearchResult:
        """Run the strategy and return the best candidate measured.

        Args:
            borrowed: candidates from known keys like this one (see :mod:`tuner.search.transfer`),
                measured among the first, after the warm start and the default.
            patience: stop once this many measurements in a row found nothing better, counted
                once the descent has ended (ga, rl: a descent still visiting knobs is not
                stopped) and from the start for random (``None``: spend the whole budget).

        Raises:
            SearchError: no candidate measured was feasible.
        """
        self._best: tuple[float, tuple[int, ...]] | None = None
        self._evaluate = evaluate
        self._start = 0  # the budget counts every distinct candidate measured, the default included
        self._switches = [(i, space.default[i]) for i, knob in enumerate(space.knobs) if knob.switch]
        # a borrowed policy of another implementation is priced among the seeds already, and
        # says nothing of this one's knobs: it neither seeds nor guides (see _descent_start)
        self._borrowed = [tuple(int(v) for v in row) for row in borrowed
                          if all(row[i] == default for i, default in self._switches)]
        self._patience = patience
        self._last_gain = 0
        self._settled = self.name == "random"  # early stop waits for the end of the descent
        self._lines = {}
        self._progress: Progress | None = progress
        self._step = self._total = 0
        if space.size <= self.budget and self.name != "exhaustive" and not self._borrowed:
            _enumerate(space, self._scored)  # the whole space costs no more than the budget
        else:
            self.run(space, self._scored, warm_start)
        if progress and self._step:
            self._tick(1, done=True)
        if self._best is None or not np.isfinite(self._best[0]):
            raise SearchError("no feasible candidate found")
        return SearchResult(self._best[1], self._best[0], evaluate.measurements)

    def _scored(self, candidates: np.ndarray) -> np.ndarray:
        latencies = self._evaluate(candidates)
        i = int(np.argmin(latencies))
        found = (float(latencies[i]), tuple(int(v) for v in candidates[i]))
        if self._best is None or found[0] < self._best[0]:
            self._last_gain = self._evaluate.measurements
        if self._best is None or found < self._best:
            self._best = found
        return latencies

    def _random(self, space: SearchSpace, n: int) -> np.ndarray:
        rows: np.ndarray = self.rng.integers(0, [len(k.values) for k in space.knobs], (n, len(space.knobs)))
        return rows

    def _seeds(self, space: SearchSpace, warm_start: tuple[int, ...] | None) -> np.ndarray:
        """The first candidates to measure: the warm start (the policy the bank holds), the
        compiler's default, each other implementation (a :attr:`Knob.switch` value, the rest
        at the default) and the borrowed candidates, as many as the budget allows."""
        seeds = [tuple(warm_start)] if warm_start else []
        others = [(*space.default[:i], value, *space.default[i + 1:])
                  for i, default in self._switches for value in range(len(space.knobs[i].values))
                  if value != default]
        for row in (tuple(space.default), *others, *self._borrowed):
            if row not in seeds:
                seeds.append(row)
        return np.array(seeds[: self.budget])

    def _on_default(self, rows: np.ndarray) -> np.ndarray:
        """Which ``rows`` keep every switch knob at its default: the candidates whose other
        knobs mean something, where a descent can start."""
        keep = np.ones(len(rows), dtype=bool)
        for i, default in self._switches:
            keep &= rows[:, i] == default
        return keep

    def _descent_start(self, space: SearchSpace, seeds: np.ndarray, latency: np.ndarray,
                       dims: np.ndarray) -> tuple[np.ndarray, float, np.ndarray | None]:
        """Where a descent starts, its latency, and the candidate that guides it, if any.

        Commonly the best seed it can start from (:meth:`_on_default`): a borrowed candidate
        slower than the compiler's default never starts a search. A frugal search
        (:meth:`_is_frugal`) that borrowed candidates starts from the default whatever they
        cost, guided by the nearest neighbour's policy: it visits first the knobs that policy
        sets otherwise (:meth:`_descend`). Started from a neighbour's policy, a search of 16
        or 32 measurements ended nearer its neighbour's optimum than its own (DenseNet-121's
        new keys after ResNet-50's: 1.027 of the optimum at 32, against 1.025 from the
        default and 1.021 guided). Guided only by a neighbour that beat the default, it lost
        on DenseNet-121's keys after SqueezeNet's at 16 (1.041 against 1.032 from the
        default): a neighbour slower here still knows which knobs matter."""
        if self._borrowed and self._is_frugal(dims) and \
                tuple(seeds[0]) == tuple(space.default):  # no warm start: a retune has its own
            return seeds[0], float(latency[0]), np.array(self._borrowed[0])
        usable = np.flatnonzero(self._on_default(seeds))
        i = int(usable[np.argmin(latency[usable])]) if len(usable) else int(np.argmin(latency))
        return seeds[i], float(latency[i]), None

    def _is_frugal(self, dims: np.ndarray) -> bool:
        """Whether the budget is under :data:`PROBE_BELOW` full passes over the knobs."""
        return self.budget < PROBE_BELOW * int(dims.sum())

    def _tick(self, unit: int, done: bool = False) -> None:
        """Report progress in steps of ``unit`` measurements (a generation, a round), once a
        step; ``done`` reports the last step."""
        if self._progress is None:
            return
        total = -(-self.budget // unit) if not done else self._total
        step = total if done else min(total, -(-(self.budget - self.left) // unit))
        if step != self._step:
            self._step, self._total = step, total
            self._progress(step, total, self.best_us)

    @property
    def left(self) -> int:
        """Measurements the budget still allows: none once the descent has ended and
        ``patience`` measurements in a row found nothing better."""
        spent = self._evaluate.measurements - self._start
        if self._patience is not None and self._settled and spent - self._last_gain >= self._patience:
            return 0
        return self.budget - spent

    def _fresh(self, space: SearchSpace, candidates: np.ndarray, n: int) -> np.ndarray:
        """``n`` candidates never measured (fewer only if the budget is nearly spent): the
        unseen rows of ``candidates`` first, topped up with random ones."""
        n = min(n, self.left)
        candidates = self._held(candidates)
        rows = self._evaluate.unseen(candidates, n)
        for _ in range(8):
            if len(rows) >= n:
                break
            extra = self._evaluate.unseen(self._held(self._random(space, 4 * (n - len(rows)))),
                                          n - len(rows))
            rows = np.concatenate([rows, extra]) if len(rows) else extra
            rows = self._evaluate.unseen(rows, n)
        return rows

    def _held(self, rows: np.ndarray) -> np.ndarray:
        """``rows`` with every switch knob at its default: its other values were priced once
        among the seeds, and any other candidate of theirs would price the same."""
        if not self._switches:
            return rows
        rows = np.array(rows, copy=True)
        for i, default in self._switches:
            rows[:, i] = default
        return rows

    def _descend(self, evaluate: Measure, best: np.ndarray, best_us: float, dims: np.ndarray,
                 unit: int, passes: int | None = None,
                 guide: np.ndarray | None = None) -> tuple[np.ndarray, float]:
        """Coordinate descent from ``best``; return the best candidate it found and its latency.

        A pass visits every knob once, in random order, the others held. A full pass tries
        every value of a knob in one batch; the descent ends when one improves nothing.

        When the budget is frugal (under :data:`PROBE_BELOW` full passes), passes probe first:
        a knob steps one value at a time away from the best while that is faster (up, then
        down if up gained nothing), a few measurements a knob; once a probing pass improves
        nothing a full pass checks, and probing resumes if it improved. A frugal descent also
        repairs a move that does not fit the chip (:meth:`_line`). With a larger budget the
        genetic search that follows finds as much without either (docs/performance.md), and
        whole-knob batches are what a hardware backend compiles and runs best.

        A frugal budget of :data:`SURVEY_FROM` measurements a knob or more starts with a survey
        (:meth:`_survey`): every knob probed from the start, the moves that gained joined
        (:meth:`_join`), and the passes after it visit the knobs in the order of what they
        gained. Switch knobs (:attr:`Knob.switch`) are never moved: their other values were
        priced among the seeds.
        A ``guide`` (a neighbour's policy) replaces the survey: its first pass visits the knobs
        the guide sets otherwise than ``best`` first.

        It also ends after ``passes`` passes or when the budget is spent.
        """
        self._frugal = self._is_frugal(dims) or tuple(int(v) for v in best) in self._borrowed
        probing, done = self._frugal, 0
        switches = {i for i, _ in self._switches}
        movable = [k for k in range(len(dims)) if k not in switches]
        order = [int(k) for k in self.rng.permutation(len(dims)) if int(k) in movable]
        self._walk = probing and guide is None and self.budget >= SURVEY_FROM * len(movable)
        if guide is not None:
            order = [k for k in order if guide[k] != best[k]] + [k for k in order if guide[k] == best[k]]
        if self._walk:  # not a pass: rl's one pass follows it (alone, 1.127 of the optimum at 32)
            best, best_us, order = self._survey(evaluate, best, best_us, order, dims, unit)
        while passes is None or done < passes:
            if done and not self._walk:  # each pass in a new random order; a survey's is kept
                order = [int(k) for k in self.rng.permutation(len(dims)) if int(k) in movable]
            done += 1
            improved = False
            for knob in order:
                visit = self._probe if probing else self._sweep
                best, best_us, better = visit(evaluate, best, best_us, knob, dims)
                improved = improved or better
                self._tick(unit)
                if self.left <= 0:
                    break
            if self.left <= 0 or not (improved or probing):
                break
            probing = improved and self._frugal
        self._settled = True
        return best, best_us

    def _survey(self, evaluate: Measure, start: np.ndarray, start_us: float, order: list[int],
                dims: np.ndarray, unit: int) -> tuple[np.ndarray, float, list[int]]:
        """Probe every knob from ``start``, each alone, join the moves that gained
        (:meth:`_join`), and return the best candidate found and the knobs ordered by what
        they gained, the most first.

        A descent that takes the first move that gains anything falls into the basin of
        whichever knob it happens to visit first. ResNet-50's stride-2 1x1 convolution of 512
        to 1024 channels on Ascend310P3 showed it: splitting N over two cores (nDim) gains at
        once, and from there every move of up to three knobs loses, 1.63x from the optimum;
        holding all of K of the input in L1 (kAL1 = full) gains the most from the default and
        leads to the optimum, but only after two values that price alike. A survey sees both
        before moving."""
        best, best_us = start, start_us
        gains: dict[int, float] = {}
        moves: dict[int, np.ndarray] = {}
        for knob in order:
            moved, moved_us, better = self._probe(evaluate, start, start_us, knob, dims)
            gains[knob] = start_us - moved_us if better else 0.0
            if better:
                moves[knob] = moved
            if better and moved_us < best_us:
                best, best_us = moved, moved_us
            self._tick(unit)
            if self.left <= 0:
                break
        ranked = sorted(order, key=lambda k: -gains.get(k, 0.0))
        best, best_us = self._join(evaluate, start, best, best_us, [moves[k] for k in ranked if k in moves])
        return best, best_us, ranked

    def _join(self, evaluate: Measure, start: np.ndarray, best: np.ndarray, best_us: float,
              moves: list[np.ndarray]) -> tuple[np.ndarray, float]:
        """Join a survey's gaining ``moves`` (each the candidate a probe reached from
        ``start``, the most gaining first) to ``best``, the first of them; return the best
        candidate and its latency.

        First all of them at once (or as many of the first as fit the chip), then each other
        move added to the best, kept if it gains: a measurement each. Moves that gain only
        together are common: on Ascend910B2 the convolution of :meth:`_survey` gains from a
        larger N tile in L0, from taller output rows and from N split over two cores, each
        alone; the tile with either of the others loses, and all three reach 1.01 of the
        optimum, where adding one move at a time stopped at 1.33. Over the bench's 60 Cube
        keys at 32 measurements the join took ga from 1.059 to 1.043 of the optimum
        (docs/performance.md)."""
        joined = [self._joined(start, moves[:n]) for n in range(len(moves), 2, -1)]
        fits = self._evaluate.fits
        if fits is not None and joined:
            joined = [row for row, ok in zip(joined, np.asarray(fits.check(np.array(joined)), dtype=bool),
                                             strict=True) if ok]
        for moved in [*joined[:1], *moves[1:]]:
            if self.left <= 0:
                break
            row = np.where(moved != start, moved, best)
            if fits is not None and not bool(np.asarray(fits.check(row[None, :]))[0]):
                continue
            if not len(self._evaluate.unseen(row[None, :], 1)):
                continue
            latency = float(evaluate(row[None, :])[0])
            if latency < best_us:
                best, best_us = row, latency
        return best, best_us

    @staticmethod
    def _joined(start: np.ndarray, moves: list[np.ndarray]) -> np.ndarray:
        """``start`` with every one of ``moves`` applied, the first winning where two differ."""
        row = start.copy()
        for moved in reversed(moves):
            row = np.where(moved != start, moved, row)
        return row

    def _probe(self, evaluate: Measure, best: np.ndarray, best_us: float, knob: int,
               dims: np.ndarray) -> tuple[np.ndarray, float, bool]:
        """Step ``knob`` away from its best value while each step is faster (up, then down),
        and, after a survey, on across values that price the same as the best (a plateau: a
        tile held whole in L1 gains only at the last value)."""
        improved = False
        line = self._line(best, knob, dims)
        for direction in (1, -1):
            if improved:
                break
            value = int(best[knob]) + direction
            while 0 <= value < dims[knob] and self.left > 0:
                rows = self._evaluate.unseen(line[value], self.left)
                value += direction
                if not len(rows):
                    continue
                latency = evaluate(rows)
                i = int(np.argmin(latency))
                if latency[i] < best_us:
                    moved = (rows[i] != best).sum() > 1  # a repair: the line is another one
                    best, best_us, improved = rows[i].astype(np.int64), float(latency[i]), True
                    if moved:
                        line = self._line(best, knob, dims)
                elif np.isfinite(latency).any() and (latency[i] > best_us or not self._walk):
                    break
        return best, best_us, improved

    def _sweep(self, evaluate: Measure, best: np.ndarray, best_us: float, knob: int,
               dims: np.ndarray) -> tuple[np.ndarray, float, bool]:
        """Try ``knob`` at every value and keep the fastest."""
        rows = self._evaluate.unseen(np.concatenate(self._line(best, knob, dims)), self.left)
        if not len(rows):
            return best, best_us, False
        latency = evaluate(rows)
        i = int(np.argmin(latency))
        if latency[i] < best_us:
            return rows[i].astype(np.int64), float(latency[i]), True
        return best, best_us, False

    def _line(self, best: np.ndarray, knob: int, dims: np.ndarray) -> list[np.ndarray]:
        """What to measure for each value of ``knob``, the others held at ``best``: that
        candidate if it fits the chip, else its :data:`REPAIRS` nearest repairs that do (one
        other knob moved to the fitting value nearest its own, ties drawn at random; none if
        nothing fits). A one-knob descent cannot follow the buffer limits (a larger nL0
        needs a smaller kBL1 to fit L1); a repaired move can. Without a static fit check, or
        when the descent is not frugal (see :meth:`_descend`), every candidate is measured as
        it is. A line is worked out once per search."""
        known = self._lines.get((best.tobytes(), knob))
        if known is None:
            known = self._lines[best.tobytes(), knob] = self._work_out_line(best, knob, dims)
        return known

    def _work_out_line(self, best: np.ndarray, knob: int, dims: np.ndarray) -> list[np.ndarray]:
        line = np.repeat(best[None, :], dims[knob], axis=0)
        line[:, knob] = np.arange(dims[knob])
        options = [line[value:value + 1] for value in range(dims[knob])]
        fits = self._evaluate.fits
        if fits is None or not self._frugal or knob not in fits.knobs:  # the best fits: so do these
            return options
        broken = np.flatnonzero(~np.asarray(fits.check(line), dtype=bool))
        if not len(broken):
            return options
        others, values = self._moves(knob, dims, fits.knobs)
        moved = np.repeat(line[broken], len(others), axis=0)  # every one-knob repair of each
        at = (np.arange(len(moved)), np.tile(others, len(broken)))
        gap = np.abs(np.tile(values, len(broken)) - moved[at])
        moved[at] = np.tile(values, len(broken))
        whose = np.repeat(broken, len(others))
        order = np.lexsort((self.rng.random(len(moved)), gap, whose))
        order = order[np.asarray(fits.check(moved), dtype=bool)[order]]  # by row, nearest first
        ranked = whose[order]
        place = np.arange(len(order)) - np.searchsorted(ranked, ranked)  # 0 for a row's nearest
        kept = order[place < REPAIRS]
        for value in broken:
            options[value] = moved[kept[whose[kept] == value]]
        return options

    def _moves(self, knob: int, dims: np.ndarray, fit_knobs: frozenset[int]) -> tuple[np.ndarray, np.ndarray]:
        """Every (other knob the fit depends on, value) a repair of a ``knob`` move may set."""
        switches = {i for i, _ in self._switches}  # another implementation is no repair
        others = [other for other in range(len(dims))
                  if other != knob and other in fit_knobs and other not in switches]
        return (np.repeat(others, dims[others]),
                np.concatenate([np.arange(dims[other]) for other in others]))

    @property
    def best_us(self) -> float:
        return self._best[0] if self._best else float("inf")


class RandomSearch(BaseSearch):
    """Uniform random candidates, the default and any warm start among them."""

    name = "random"

    def run(self, space: SearchSpace, evaluate: Measure, warm_start: tuple[int, ...] | None) -> None:
        evaluate(self._seeds(space, warm_start))
        while self.left > 0:
            rows = self._fresh(space, self._random(space, self.left), self.left)
            if not len(rows):
                return
            evaluate(rows)


class ExhaustiveSearch(BaseSearch):
    """Every candidate of the space (the ground truth on small spaces); ignores the budget."""

    name = "exhaustive"

    def run(self, space: SearchSpace, evaluate: Measure, warm_start: tuple[int, ...] | None) -> None:
        if space.size > EXHAUSTIVE_LIMIT:
            raise SearchError(f"--mode exhaustive: the space holds {space.size} candidates, more "
                              f"than {EXHAUSTIVE_LIMIT}; narrow it with --tuning-config")
        _enumerate(space, evaluate)


class GeneticSearch(BaseSearch):
    """A memetic genetic search: coordinate descent from the compiler's default, then a
    (mu + lambda) genetic algorithm on what it found.

    The descent tries each knob at every value with the others held, keeps the best, and
    repeats until a pass improves nothing: on Cube spaces the good candidates are a few knobs
    from the default, and most random ones are infeasible (five in six for ResNet-50's 1x1
    convolutions on Ascend310P3, measured over 5,000). The population (a quarter
    of the budget, 8 to 32) is then the best candidates measured so far, evolved by tournament
    selection, uniform crossover and mutation that mostly steps a knob to a neighbouring value.
    Every generation measures only candidates never measured, until the budget is spent.
    """

    name = "ga"
    population = 32
    tournament = 3
    local_rate = 2.0

    def run(self, space: SearchSpace, evaluate: Measure, warm_start: tuple[int, ...] | None) -> None:
        size = int(np.clip(self.budget // 4, 8, self.population))
        dims = np.array([len(k.values) for k in space.knobs])
        measured: list[np.ndarray] = []
        scores: list[np.ndarray] = []

        def scored(rows: np.ndarray) -> np.ndarray:
            latency = evaluate(rows)
            measured.append(rows)
            scores.append(latency)
            return latency

        seeds = self._seeds(space, warm_start)
        best, best_us, guide = self._descent_start(space, seeds, scored(seeds), dims)
        self._descend(scored, best, best_us, dims, size, guide=guide)
        pool, pool_scores = np.concatenate(measured), np.concatenate(scores)
        keep = np.argsort(pool_scores, kind="stable")[:size]
        pop, fitness = pool[keep], pool_scores[keep]
        if len(pop) < size:
            local = self._mutate(np.repeat(pop[:1], 4 * size, axis=0), dims, self.local_rate)
            extra = self._fresh(space, local, size - len(pop))
            if len(extra):
                pop, fitness = np.concatenate([pop, extra]), np.concatenate([fitness, evaluate(extra)])
        while self.left > 0:
            a = pop[self._tournament(fitness, size)]
            b = pop[self._tournament(fitness, size)]
            children = self._mutate(np.where(self.rng.random(a.shape) < 0.5, a, b), dims, 1.5)
            children = self._fresh(space, children, size)
            if not len(children):
                break
            pool, scores_ = np.concatenate([pop, children]), np.concatenate([fitness, evaluate(children)])
            keep = np.argsort(scores_, kind="stable")[:size]
            pop, fitness = pool[keep], scores_[keep]
            self._tick(size)

    def _mutate(self, rows: np.ndarray, dims: np.ndarray, rate: float) -> np.ndarray:
        """Each knob changes with probability ``rate / knobs``: three times in four a step to a
        neighbouring value, else a random one."""
        change = self.rng.random(rows.shape) < rate / len(dims)
        step = np.clip(rows + self.rng.choice((-1, 1), rows.shape), 0, dims - 1)
        reset = self.rng.integers(0, dims, rows.shape)
        moved = np.where(self.rng.random(rows.shape) < 0.75, step, reset)
        out: np.ndarray = np.where(change, moved, rows)
        return out

    def _tournament(self, fitness: np.ndarray, n: int) -> np.ndarray:
        entrants = self.rng.integers(0, len(fitness), (n, self.tournament))
        winners: np.ndarray = entrants[np.arange(n), np.argmin(fitness[entrants], axis=1)]
        return winners


class PolicySearch(BaseSearch):
    """A learned policy over the knobs: one categorical distribution per knob.

    A first episode tries every value of each knob in turn (one pass of coordinate descent from
    the default); the policy starts concentrated on the best candidate that found. Each round
    then samples a batch of unmeasured candidates from the policy, measures it, and moves every
    knob's distribution toward the values of the best-rewarded candidates (the batch's elite
    plus the best so far), the cross-entropy method of policy search. A small uniform share
    keeps it exploring. Its default budget is half ga's.
    """

    name = "rl"
    batch = 32
    elite = 6
    learning_rate = 0.3
    explore = 0.02
    anchor_weight = 0.8

    def run(self, space: SearchSpace, evaluate: Measure, warm_start: tuple[int, ...] | None) -> None:
        anchors = self._seeds(space, warm_start)
        dims = np.array([len(k.values) for k in space.knobs])
        start, start_us, guide = self._descent_start(space, anchors, evaluate(anchors), dims)
        batch = int(np.clip(self.budget // 4, 8, self.batch))
        best, best_us = self._descend(evaluate, start, start_us, dims, batch, passes=1, guide=guide)
        if self._best is not None and self._best[0] < best_us and \
                self._on_default(np.array([self._best[1]]))[0]:  # a seed beat the guided descent
            best, best_us = np.array(self._best[1]), self._best[0]
        policy = [(1 - self.anchor_weight) / dim + self.anchor_weight * np.eye(dim)[i]
                  for dim, i in zip(dims, best, strict=True)]
        while self.left > 0:
            drawn = np.stack([self.rng.choice(len(p), 4 * batch, p=p) for p in policy], axis=1)
            picks = self._fresh(space, drawn, batch)
            if not len(picks):
                break
            latency = evaluate(picks)
            order = np.argsort(latency, kind="stable")[: self.elite]
            if latency[order[0]] < best_us:
                best, best_us = picks[order[0]], float(latency[order[0]])
            elite = np.vstack([picks[order][np.isfinite(latency[order])], best[None, :]])
            for i, p in enumerate(policy):
                share = np.bincount(elite[:, i], minlength=len(p)) / len(elite)
                mixed = (1 - self.learning_rate) * p + self.learning_rate * share
                policy[i] = (1 - self.explore) * mixed + self.explore / len(p)
            self._tick(batch)


def _enumerate(space: SearchSpace, evaluate: Measure) -> None:
    """Measure every candidate of ``space``, a block at a time."""
    dims = tuple(len(k.values) for k in space.knobs)
    for start in range(0, space.size, 65536):
        flat = np.arange(start, min(space.size, start + 65536))
        evaluate(np.stack(np.unravel_index(flat, dims), axis=1))


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
