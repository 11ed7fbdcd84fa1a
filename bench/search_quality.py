"""Search quality on the sim backend: how close each strategy gets to the optimum per budget.

Usage: python bench/search_quality.py [--seeds 5] [--budgets 16,32,64,128] [--no-tpe]

The suite is every unique operator (key) of ResNet-50 and of the BERT-like fixture on two chips.
For each: the search-space size and the optimum, found by exhaustive search where the space has
at most EXHAUSTIVE_MAX candidates, else the best of long ga, rl and random searches (marked
"long"). Then each
strategy (ga, rl, random, and Optuna's TPE sampler when optuna is installed: `pip install
optuna`, a bench-only extra) runs at each budget with each seed, against a fresh evaluator
(no noise), and the ratio best-found / optimum is kept (1.0 is the optimum). Not a test.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fixtures.make_bert import write as write_bert  # noqa: E402
from tuner.config import TuneSelection  # noqa: E402
from tuner.costmodel import CostModel  # noqa: E402
from tuner.model import load_model  # noqa: E402
from tuner.plan import KeyGroup, plan_tune  # noqa: E402
from tuner.search import Evaluator, ExhaustiveSearch, make_search  # noqa: E402
from tuner.socs import get_soc  # noqa: E402

SOCS = ("Ascend910B2", "Ascend310P3")
BERT_SHAPE = {"input_ids_embedded": (4, 128, 128)}
EXHAUSTIVE_MAX = 200_000
LONG_BUDGET = 4096
LONG_MODES = ("ga", "rl", "random")  # the reference of a large space: the best of these


@dataclass(frozen=True)
class Operator:
    """One operator of the suite: its key's group, chip and optimum."""

    model: str
    soc: str
    group: KeyGroup
    cost: CostModel
    optimum_us: float
    exhaustive: bool

    def latency(self, candidates: np.ndarray) -> np.ndarray:
        return self.cost.evaluate(self.group.work, self.group.space, candidates)


def suite(folder: Path) -> list[Operator]:
    """Every unique operator of both models on both chips, with its optimum."""
    bert = write_bert(folder / "bert.onnx")
    models = [("resnet50", ROOT / "fixtures" / "models" / "resnet50.onnx", None), ("bert", bert, BERT_SHAPE)]
    ops = []
    for name, path, shapes in models:
        model = load_model(path, shapes)
        for soc_name in SOCS:
            soc = get_soc(soc_name)
            cost = CostModel(soc)
            for group in plan_tune(model, soc, TuneSelection()).groups:
                probe = Operator(name, soc_name, group, cost, 0.0, False)
                exhaustive = group.space.size <= EXHAUSTIVE_MAX
                searches = [ExhaustiveSearch(group.space.size, np.random.default_rng(0))] if exhaustive \
                    else [make_search(mode, LONG_BUDGET, np.random.default_rng(0)) for mode in LONG_MODES]
                best = min(search.search(group.space, Evaluator(probe.latency)).latency_us
                           for search in searches)
                ops.append(Operator(name, soc_name, group, cost, best, exhaustive))
    return ops


def tpe(op: Operator, budget: int, seed: int) -> float:
    """The best latency Optuna's TPE sampler finds in ``budget`` trials."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    space = op.group.space
    evaluate = Evaluator(op.latency)

    def objective(trial: Any) -> float:
        row = [trial.suggest_int(k.name, 0, len(k.values) - 1) for k in space.knobs]
        value = float(evaluate(np.array([row]))[0])
        return value if np.isfinite(value) else 1e30

    study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=seed))
    study.enqueue_trial({k.name: v for k, v in zip(space.knobs, space.default, strict=True)})
    study.optimize(objective, n_trials=budget)
    return float(study.best_value)


def ours(op: Operator, mode: str, budget: int, seed: int) -> float:
    rng = np.random.default_rng([seed, int(op.group.repo_key)])
    return make_search(mode, budget, rng).search(op.group.space, Evaluator(op.latency)).latency_us


def run(seeds: int, budgets: list[int], with_tpe: bool) -> dict[str, Any]:
    """Every strategy at every budget and seed on every operator of the suite."""
    strategies = ["ga", "rl", "random"] + (["tpe"] if with_tpe else [])
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        ops = suite(Path(tmp))
        suite_s = time.perf_counter() - started
    ratios: dict[str, dict[str, dict[int, list[float]]]] = {
        unit: {s: {b: [] for b in budgets} for s in strategies} for unit in ("all", *UNITS)}
    seconds = {s: 0.0 for s in strategies}
    for op in ops:
        unit = unit_of(op)
        for strategy in strategies:
            for budget in budgets:
                for seed in range(seeds):
                    started = time.perf_counter()
                    found = tpe(op, budget, seed) if strategy == "tpe" else ours(op, strategy, budget, seed)
                    seconds[strategy] += time.perf_counter() - started
                    for group in ("all", unit):
                        ratios[group][strategy][budget].append(found / op.optimum_us)
    sizes = [op.group.space.size for op in ops]
    return {
        "operators": len(ops), "exhaustive": sum(op.exhaustive for op in ops),
        "space_sizes": _sizes(sizes),
        "suite_seconds": round(suite_s, 1), "seeds": seeds,
        "strategy_seconds": {s: round(v, 1) for s, v in seconds.items()},
        "ratio": _summary(ratios["all"]),
        "by_unit": {unit: {"operators": sum(unit_of(op) == unit for op in ops),
                           "space_sizes": _sizes([op.group.space.size for op in ops if unit_of(op) == unit]),
                           "ratio": _summary(ratios[unit])} for unit in UNITS},
        "per_operator": [{"model": op.model, "soc": op.soc, "op_type": op.group.op_type,
                          "space": op.group.space.size, "optimum_us": round(op.optimum_us, 4),
                          "optimum": "exhaustive" if op.exhaustive else f"long search ({LONG_BUDGET})"}
                         for op in ops],
    }


UNITS = ("cube", "vector")


def unit_of(op: Operator) -> str:
    """The unit an operator runs on: the Cube (convolutions, matrix multiplies) or the vector
    unit (everything else), whose spaces differ by five orders of magnitude."""
    return "vector" if op.group.space.family == "vector" else "cube"


def _summary(per: dict[str, dict[int, list[float]]]) -> dict[str, dict[str, dict[str, float]]]:
    return {s: {str(b): {"median": round(statistics.median(v), 4), "worst": round(max(v), 4),
                         "mean": round(statistics.fmean(v), 4)}
                for b, v in budgets.items() if v} for s, budgets in per.items()}


def _sizes(sizes: list[int]) -> dict[str, int]:
    return {"min": min(sizes), "median": int(statistics.median(sizes)), "max": max(sizes)}


def _ratio_table(ratio: dict[str, Any]) -> list[str]:
    budgets = list(next(iter(ratio.values())))
    lines = ["| strategy | " + " | ".join(f"budget {b}" for b in budgets) + " |",
             "|---" * (len(budgets) + 1) + "|"]
    for strategy, per in ratio.items():
        cells = [f"{per[b]['median']:.3f} / {per[b]['worst']:.3f}" for b in budgets]
        lines.append(f"| {strategy} | " + " | ".join(cells) + " |")
    return lines


def table(results: dict[str, Any]) -> str:
    """Median and worst best-found / optimum per strategy and budget: all operators, then the
    Cube's and the vector unit's apart."""
    lines = _ratio_table(results["ratio"])
    for unit, part in results.get("by_unit", {}).items():
        sizes = part["space_sizes"]
        lines += ["", f"{unit.capitalize()} operators only ({part['operators']}; spaces "
                  f"{sizes['min']:,} to {sizes['max']:,}, median {sizes['median']:,}):", "",
                  *_ratio_table(part["ratio"])]
    sizes = results["space_sizes"]
    return ("\n".join(lines) + f"\n\nMedian / worst of best-found / optimum over {results['operators']} "
            f"operators x {results['seeds']} seeds (1.000 is the optimum; {results['exhaustive']} "
            f"optima exhaustive, the rest the best of {LONG_BUDGET}-measurement ga, rl and random "
            f"searches). "
            f"Space sizes: {sizes['min']:,} to {sizes['max']:,}, median {sizes['median']:,}.")


def has_optuna() -> bool:
    """Whether the TPE baseline can run (optuna is a bench-only extra: pip install -e '.[bench]')."""
    try:
        import optuna  # noqa: F401
    except ImportError:
        print("optuna is not installed: TPE left out (pip install -e '.[bench]')")
        return False
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--budgets", default="16,32,64,128")
    parser.add_argument("--no-tpe", action="store_true")
    args = parser.parse_args()
    with_tpe = not args.no_tpe and has_optuna()
    results = run(args.seeds, [int(b) for b in args.budgets.split(",")], with_tpe)
    print(json.dumps({k: v for k, v in results.items() if k != "per_operator"}, indent=2))
    print(table(results))


if __name__ == "__main__":
    main()
