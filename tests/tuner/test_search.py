"""Search strategies: reproducible, and ga and rl reach the exhaustive optimum on small spaces."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tunebank.tuner.measure.backend import BackendSettings, KeyWork
from tunebank.tuner.measure.costmodel import CostModel
from tunebank.tuner.measure.sim import SimBackend
from tunebank.tuner.measure.socs import SOCS
from tunebank.tuner.measure.space import SearchSpace, conv_space, matmul_space, vector_space
from tunebank.tuner.model.workload import ConvWork, MatmulWork, VectorWork, Workload
from tunebank.tuner.search.optimum import exact_optimum
from tunebank.tuner.search.strategies import REPAIRS, STRATEGIES, Evaluator, SearchError, make_search

SPEC = SOCS["Ascend910B2"]
MATMUL = MatmulWork(1, 512, 768, 3072, True)
CONV = ConvWork(1, 64, 56, 56, 64, 56, 56, 3, 3, 1, 1, False)
VECTOR = VectorWork(200_000, 400_000, 400_000, 1, 5, 3000, 3)


def small_matmul_space() -> SearchSpace:
    return matmul_space(MATMUL, SPEC).restrict({
        "baseM": [64, 128], "baseN": [64, 128, 256], "baseK": [32, 64], "stepM": [1, 2],
        "stepN": [1, 2], "stepKa": [1], "stepKb": [1], "depthA1": [2, 4], "depthB1": [2],
        "dbL0A": [1], "dbL0B": [0, 1], "dbL0C": [0, 1], "coreSplitM": [1, 4, 8, 24],
        "format": [0, 1], "impl": [0]})


CASES: list[tuple[str, Workload, SearchSpace]] = [
    ("matmul", MATMUL, small_matmul_space()),
    ("conv", CONV, conv_space(CONV, SPEC).restrict({"hoL0": [2, 4], "kL0": [2, 4], "nL0": [2, 4],
                                                     "kAL1": [1], "kBL1": [1, 0], "nDim": [1],
                                                     "unroll": [1, 2]})),
    ("vector", VECTOR, vector_space(VECTOR, SPEC)),
]


def run(mode: str, work: Workload, space: SearchSpace, seed: int = 7, budget: int | None = None,
        noise: float = 0.0, run_loop: int = 1) -> tuple[tuple[int, ...], float, int]:
    backend, key = SimBackend(BackendSettings(noise, run_loop)), KeyWork("1", SPEC, work, space)
    draws = np.random.default_rng(seed + 1)
    evaluate = Evaluator(lambda c: backend.measure(key, c, draws))
    result = make_search(mode, budget, np.random.default_rng(seed)).search(space, evaluate)
    return result.candidate, result.latency_us, result.measurements


@pytest.mark.parametrize("mode", sorted(STRATEGIES))
@pytest.mark.parametrize(("name", "work", "space"), CASES, ids=[c[0] for c in CASES])
def test_same_seed_same_result(mode: str, name: str, work: Workload, space: SearchSpace) -> None:
    assert run(mode, work, space) == run(mode, work, space)


@pytest.mark.parametrize("mode", ["ga", "rl"])
@pytest.mark.parametrize(("name", "work", "space"), CASES[:2], ids=[c[0] for c in CASES[:2]])
def test_finds_the_exhaustive_optimum(mode: str, name: str, work: Workload, space: SearchSpace) -> None:
    optimum = run("exhaustive", work, space)[1]
    found = run(mode, work, space, budget=256)
    assert found[1] == pytest.approx(optimum)
    assert found[2] == 256 < space.size  # the budget spent, and no more


@pytest.mark.parametrize("mode", ["ga", "rl", "random"])
def test_a_space_within_the_budget_is_measured_whole_once(mode: str) -> None:
    _, work, space = CASES[2]
    optimum = run("exhaustive", work, space)[1]
    found = run(mode, work, space, budget=space.size + 50)
    assert found[1] == optimum
    assert found[2] == space.size


@pytest.mark.parametrize("mode", ["ga", "rl", "random"])
@pytest.mark.parametrize("budget", [1, 7, 16, 33, 100])
def test_the_budget_is_spent_exactly(mode: str, budget: int) -> None:
    space = matmul_space(MATMUL, SPEC)
    assert run(mode, MATMUL, space, budget=budget)[2] == budget


def test_ga_improves_on_random_search_on_a_large_space() -> None:
    space = matmul_space(MATMUL, SPEC)
    ga = [run("ga", MATMUL, space, seed=seed, budget=64)[1] for seed in range(5)]
    rand = [run("random", MATMUL, space, seed=seed, budget=64)[1] for seed in range(5)]
    assert sorted(ga)[2] < sorted(rand)[2]


def test_rl_measures_less_than_ga_by_default() -> None:
    space = matmul_space(MATMUL, SPEC)
    assert run("rl", MATMUL, space)[2] < run("ga", MATMUL, space)[2]


def test_under_noise_the_median_of_repeats_stays_close() -> None:
    space = CASES[0][2]
    optimum = run("exhaustive", MATMUL, space)[1]
    candidate, _, _ = run("ga", MATMUL, space, budget=640, noise=0.05, run_loop=15)
    true_time = CostModel(SPEC).evaluate(MATMUL, space, np.array([candidate]))[0]
    assert true_time <= optimum * 1.05


def test_results_are_feasible_and_counted() -> None:
    space = matmul_space(MATMUL, SPEC)
    candidate, latency, measurements = run("random", MATMUL, space, budget=300)
    assert np.isfinite(latency) and 250 <= measurements <= 300
    assert CostModel(SPEC).evaluate(MATMUL, space, np.array([candidate]))[0] == latency


def test_exhaustive_refuses_a_huge_space() -> None:
    with pytest.raises(SearchError, match="narrow it with --tuning-config"):
        run("exhaustive", MATMUL, matmul_space(MATMUL, SPEC))


def test_unknown_mode() -> None:
    with pytest.raises(SearchError, match="--mode: unknown mode 'sa'"):
        make_search("sa", None, np.random.default_rng(0))


# ResNet-50's stride-2 1x1 convolution into 2048 channels: on Ascend910B2 every one-knob move
# from the compiler's default is slower or does not fit (a larger nL0 overflows L1 unless kBL1
# shrinks with it), so a plain descent stays at the default.
STUCK = ConvWork(1, 1024, 14, 14, 2048, 7, 7, 1, 1, 2, 1, False)


def _evaluator(work: Workload, space: SearchSpace, with_fits: bool) -> Evaluator:
    cost = CostModel(SPEC)
    return Evaluator(lambda c: cost.evaluate(work, space, c),
                     fits=cost.fit_check(work, space) if with_fits else None)


def test_a_repaired_move_fits_and_moves_one_more_knob() -> None:
    space = conv_space(STUCK, SPEC)
    dims = np.array([len(k.values) for k in space.knobs])
    knob = [k.name for k in space.knobs].index("nL0")
    best = np.array(space.default)
    search = make_search("ga", 64, np.random.default_rng(0))
    search._evaluate = evaluate = _evaluator(STUCK, space, with_fits=True)
    assert evaluate.fits is not None
    line = search._line(best, knob, dims)
    assert len(line) == dims[knob]
    unfit = 0
    for value, rows in enumerate(line):
        as_is = best.copy()
        as_is[knob] = value
        if evaluate.fits.check(as_is[None, :])[0]:
            assert rows.tolist() == [as_is.tolist()]
            continue
        unfit += 1  # the largest nL0 does not fit as it is: REPAIRS repairs that do instead
        assert len(rows) == REPAIRS and evaluate.fits.check(rows).all()
        for row in rows:
            moved = np.nonzero(row != best)[0].tolist()
            assert knob in moved and len(moved) == 2 and row[knob] == value
    assert unfit


def test_without_a_fit_check_nothing_is_repaired() -> None:
    space = conv_space(STUCK, SPEC)
    dims = np.array([len(k.values) for k in space.knobs])
    search = make_search("ga", 64, np.random.default_rng(0))
    search._evaluate = _evaluator(STUCK, space, with_fits=False)
    line = search._line(np.array(space.default), 3, dims)
    assert [len(rows) for rows in line] == [1] * dims[3]


def test_repaired_moves_take_the_descent_past_a_buffer_limit() -> None:
    space = conv_space(STUCK, SPEC)
    for seed in range(4):
        found = {}
        for with_fits in (False, True):
            evaluate = _evaluator(STUCK, space, with_fits)
            default_us = float(evaluate(np.array([space.default]))[0])
            result = make_search("ga", 32, np.random.default_rng(seed)).search(space, evaluate)
            assert result.measurements == 32  # the check chooses what is measured, costs nothing
            found[with_fits] = result.latency_us / default_us
        assert found[False] == 1.0  # stuck at the default
        assert found[True] < 0.8


def test_patience_waits_for_the_descent_to_end() -> None:
    """Two fruitless measurements in a row do not stop a descent still visiting knobs: the
    search goes on to its best, then stops well before the budget."""
    space = conv_space(STUCK, SPEC)
    known = make_search("ga", 32, np.random.default_rng(9)).search(
        space, _evaluator(STUCK, space, with_fits=True)).candidate  # a neighbour's, say
    for seed in range(4):
        evaluate = _evaluator(STUCK, space, with_fits=True)
        default_us = float(evaluate(np.array([space.default]))[0])
        result = make_search("ga", 128, np.random.default_rng(seed)).search(
            space, evaluate, borrowed=[known], patience=2)
        assert result.latency_us < 0.8 * default_us
        assert 16 < result.measurements < 128


def test_a_neighbour_slower_than_the_default_never_starts_the_search() -> None:
    """At a budget for whole-knob sweeps, the descent starts from the fastest seed: the
    default when the borrowed candidate loses to it, the borrowed one when it wins (and then
    it probes: it starts near its optimum)."""
    space = conv_space(STUCK, SPEC)
    slower = tuple(0 for _ in space.knobs)  # the smallest tiles
    faster = make_search("ga", 64, np.random.default_rng(9)).search(
        space, _evaluator(STUCK, space, with_fits=True)).candidate
    for borrowed, start in ((slower, tuple(space.default)), (faster, faster)):
        measured: list[tuple[int, ...]] = []
        cost = CostModel(SPEC)

        def latency(rows: np.ndarray, measured: list[tuple[int, ...]] = measured,
                    cost: CostModel = cost) -> np.ndarray:
            measured.extend(tuple(int(v) for v in row) for row in rows)
            return cost.evaluate(STUCK, space, rows)

        evaluate = Evaluator(latency, fits=cost.fit_check(STUCK, space))
        evaluate(np.array([space.default]))
        make_search("ga", 512, np.random.default_rng(0)).search(space, evaluate, borrowed=[borrowed])
        assert measured[:2] == [tuple(space.default), borrowed]
        moved = [sum(a != b for a, b in zip(row, start, strict=True)) for row in measured[2:6]]
        assert all(1 <= n <= 2 for n in moved), (borrowed == slower, moved)  # a knob (and a repair)


# ResNet-50's stride-2 1x1 convolution of 512 into 1024 channels on Ascend310P3 (issue 32): from
# the default, splitting N over cores (nDim) gains at once and leads to a basin 1.63x from the
# optimum; holding all of K of the input in L1 (kAL1 = full) gains most, but only at the last
# of its values (1, 2 and 4 price alike).
TWO_BASINS = ConvWork(1, 512, 28, 28, 1024, 14, 14, 1, 1, 2, 1, False)
P3 = SOCS["Ascend310P3"]


def _p3_evaluator(work: Workload, space: SearchSpace) -> Evaluator:
    cost = CostModel(P3)
    return Evaluator(lambda c: cost.evaluate(work, space, c), fits=cost.fit_check(work, space))


def _two_basins_ratios(mode: str, budget: int) -> list[float]:
    """Best found / optimum on :data:`TWO_BASINS` for 5 seeds, the default priced first."""
    space = conv_space(TWO_BASINS, P3)
    optimum = exact_optimum(CostModel(P3), TWO_BASINS, space).latency_us
    ratios = []
    for seed in range(5):
        evaluate = _p3_evaluator(TWO_BASINS, space)
        evaluate(np.array([space.default]))
        result = make_search(mode, budget, np.random.default_rng([seed, 7])).search(space, evaluate)
        ratios.append(result.latency_us / optimum)
    return ratios


def test_a_survey_finds_the_basin_a_first_improvement_misses() -> None:
    ratios = _two_basins_ratios("ga", 64)
    assert max(ratios) < 1.2, ratios  # 1.63x for two seeds in five before


def test_after_a_survey_a_probe_walks_across_a_plateau() -> None:
    space = conv_space(TWO_BASINS, P3)
    names = [k.name for k in space.knobs]
    kal1 = names.index("kAL1")
    assert space.knobs[kal1].values == (1, 2, 4, 0)  # 0: all of K
    dims = np.array([len(k.values) for k in space.knobs])
    start = np.array(space.default)
    line = start[None, :].repeat(4, axis=0)
    line[:, kal1] = range(4)
    cost = CostModel(P3)
    prices = cost.evaluate(TWO_BASINS, space, line)
    assert prices[0] == prices[1] == prices[2] > prices[3]  # the plateau, then the gain
    for walk, reached in ((False, 0), (True, 3)):
        search = make_search("ga", 64, np.random.default_rng(0))
        search._evaluate = evaluate = _p3_evaluator(TWO_BASINS, space)
        search._best, search._start, search._patience, search._settled = None, 0, None, False
        search._walk = walk
        best, _, _ = search._probe(evaluate, start, float(evaluate(start[None, :])[0]), kal1, dims)
        assert best[kal1] == reached


def test_a_survey_joins_moves_that_gain_only_together() -> None:
    """The same convolution on Ascend910B2: from the default, a larger N tile in L0 (nL0),
    taller output rows (hoL0) and N split over two cores (nDim) each gain alone; nL0 with
    either of the others loses against nL0 alone, and all three gain the most. A search that
    adds one move at a time stopped at nL0, 1.33x from the optimum at 32, for every seed."""
    b2 = SOCS["Ascend910B2"]
    space = conv_space(TWO_BASINS, b2)
    names = [k.name for k in space.knobs]
    cost = CostModel(b2)

    def moved(**values: int) -> list[int]:
        row = list(space.default)
        for name, value in values.items():
            row[names.index(name)] = space.knobs[names.index(name)].values.index(value)
        return row

    rows = [moved(), moved(nL0=8), moved(hoL0=8), moved(nDim=2), moved(nL0=8, hoL0=8),
            moved(nL0=8, nDim=2), moved(nL0=8, hoL0=8, nDim=2)]
    default, n_l0, ho_l0, n_dim, n_ho, n_n, joined = cost.evaluate(TWO_BASINS, space, np.array(rows))
    assert max(n_l0, ho_l0, n_dim) < default
    assert min(n_ho, n_n) > n_l0 > joined
    optimum = exact_optimum(cost, TWO_BASINS, space).latency_us
    for seed in range(5):
        evaluate = Evaluator(lambda c: cost.evaluate(TWO_BASINS, space, c),
                             fits=cost.fit_check(TWO_BASINS, space))
        evaluate(np.array([space.default]))
        result = make_search("ga", 32, np.random.default_rng([seed, 7])).search(space, evaluate)
        assert result.latency_us <= joined < 1.05 * optimum, seed


def test_another_implementation_is_priced_once_and_the_tiling_is_searched_on_the_cube() -> None:
    """A small matmul whose vector implementation beats the default tiling: every candidate
    with impl = vector prices the same, so a search measures one and tunes the Cube's."""
    work = MatmulWork(16, 128, 32, 128, False)  # BERT's attention scores, per head
    space = matmul_space(work, P3)
    impl = [k.name for k in space.knobs].index("impl")
    cost = CostModel(P3)
    vector = np.array(space.default)
    vector[impl] = 1
    assert cost.evaluate(work, space, vector[None, :])[0] < cost.evaluate(work, space,
                                                                         np.array([space.default]))[0]
    for mode in ("ga", "rl"):
        for seed in range(3):
            measured: list[np.ndarray] = []

            def latency(rows: np.ndarray, measured: list[np.ndarray] = measured) -> np.ndarray:
                measured.append(rows.copy())
                return cost.evaluate(work, space, rows)

            evaluate = Evaluator(latency, fits=cost.fit_check(work, space))
            result = make_search(mode, 64, np.random.default_rng(seed)).search(space, evaluate)
            rows = np.concatenate(measured)
            assert (rows[:, impl] == 1).sum() == 1, (mode, seed)
            assert result.candidate[impl] == 0  # the tuned Cube tiling beats the vector unit


def test_a_borrowed_policy_of_another_implementation_neither_seeds_nor_guides() -> None:
    """A CNN's classifier Gemm (one row) wins on the vector unit; as BERT's neighbour its
    policy says nothing of a Cube tiling, and the vector unit is priced among the seeds anyway:
    the search runs as it would with nothing borrowed (with it as a guide, 1.41x from the
    optimum at 16 where a search from scratch was at 1.26x)."""
    work = MatmulWork(16, 128, 32, 128, False)
    space = matmul_space(work, P3)
    impl = [k.name for k in space.knobs].index("impl")
    cost = CostModel(P3)
    vector = list(space.default)
    vector[0], vector[impl] = 0, 1  # another tiling too: what the mapped policy of a Gemm holds

    def measured_rows(borrowed: list[tuple[int, ...]]) -> list[tuple[int, ...]]:
        rows: list[tuple[int, ...]] = []

        def latency(candidates: np.ndarray) -> np.ndarray:
            rows.extend(tuple(int(v) for v in row) for row in candidates)
            return cost.evaluate(work, space, candidates)

        evaluate = Evaluator(latency, fits=cost.fit_check(work, space))
        evaluate(np.array([space.default]))
        make_search("ga", 16, np.random.default_rng(3)).search(space, evaluate, borrowed=borrowed)
        return rows

    with_vector = measured_rows([tuple(vector)])
    assert tuple(vector) not in with_vector
    assert with_vector == measured_rows([])


def test_rl_s_one_descent_pass_follows_its_survey() -> None:
    """rl descends one pass before its policy takes over; a survey is not that pass (taken
    alone, the survey's one move left this key 1.55x from its optimum at 32)."""
    ratios = _two_basins_ratios("rl", 32)
    assert max(ratios) < 1.2, ratios


@settings(max_examples=60, deadline=None)
@given(mode=st.sampled_from(["ga", "rl"]), family=st.sampled_from(["conv", "matmul"]),
       budget=st.one_of(st.integers(20, 32), st.integers(1, 160)),  # a survey from 22 (conv), 28
       seed=st.integers(0, 2**16),
       borrowed=st.lists(st.lists(st.integers(0, 8), min_size=15, max_size=15), max_size=3))
def test_every_search_keeps_the_budget_measures_nothing_twice_and_returns_its_best(
        mode: str, family: str, budget: int, seed: int, borrowed: list[list[int]]) -> None:
    """The laws a search keeps whatever path it takes (probes, repairs, a survey and its join,
    a guide, the genetic phase): it measures exactly its budget, never a candidate twice, and
    returns the fastest candidate it measured."""
    work: Workload = TWO_BASINS if family == "conv" else MatmulWork(16, 128, 32, 128, False)
    space = conv_space(TWO_BASINS, P3) if family == "conv" else matmul_space(work, P3)  # type: ignore[arg-type]
    dims = [len(k.values) for k in space.knobs]
    cost = CostModel(P3)
    measured: list[tuple[tuple[int, ...], float]] = []

    def latency(rows: np.ndarray) -> np.ndarray:
        found = cost.evaluate(work, space, rows)
        measured.extend((tuple(int(v) for v in row), float(t)) for row, t in zip(rows, found, strict=True))
        return found

    evaluate = Evaluator(latency, fits=cost.fit_check(work, space))
    evaluate(np.array([space.default]))
    seeds = [tuple(v % d for v, d in zip(row, dims, strict=False)) for row in borrowed]
    result = make_search(mode, budget, np.random.default_rng(seed)).search(space, evaluate, borrowed=seeds)
    rows = [row for row, _ in measured]
    assert len(rows) == len(set(rows)) == result.measurements == budget
    assert result.latency_us == min(t for _, t in measured)
    assert (result.candidate, result.latency_us) in measured


@pytest.mark.parametrize("mode", ["ga", "rl"])
@pytest.mark.parametrize("family", ["conv", "matmul"])
def test_a_survey_cut_short_by_the_budget_measures_no_more(mode: str, family: str) -> None:
    """Budgets at the survey's threshold (2 measurements a knob: 22 for a convolution, 28 for
    a matmul), where the survey can spend the budget before its join: exactly the budget."""
    work: Workload = TWO_BASINS if family == "conv" else MatmulWork(16, 128, 32, 128, False)
    space = conv_space(TWO_BASINS, P3) if family == "conv" else matmul_space(work, P3)  # type: ignore[arg-type]
    cost = CostModel(P3)
    for budget in range(20, 34):
        for seed in range(3):
            evaluate = Evaluator(lambda c: cost.evaluate(work, space, c), fits=cost.fit_check(work, space))
            evaluate(np.array([space.default]))
            result = make_search(mode, budget, np.random.default_rng(seed)).search(space, evaluate)
            assert result.measurements == budget, (budget, seed)
