"""Search quality on the sim backend, against every key's exact optimum.

Usage: python bench/search_quality.py [--seeds 5] [--budgets 16,32,64,128] [--no-tpe]
                                      [--only scratch,transfer]

The reference of every key is its exact optimum (bench/optima.py, cached in bench/optima.json),
never the best of long runs of the methods judged. Every strategy's budget counts distinct
candidates measured, the compiler's default included, as `bank tune --budget` does.

- ``scratch``: every unique key of ResNet-50 and of the BERT-like encoder on Ascend910B2 and
  Ascend310P3, searched from an empty bank by ga, rl, random and Optuna's TPE (its default
  sampler, and independent per knob; counted per trial, and per distinct point measured).
  Reported per family (Cube: conv and matmul; vector) and budget: the geomean and the worst of
  best-found / optimum over keys x seeds, and the whole-model latency ratio (each key's time
  times its operators, summed, over the same at the optimum; geomean over models, chips and
  seeds).
- ``transfer``: with the bank holding ResNet-50's keys on Ascend910B2 (a default `bank tune`),
  the new Cube keys of DenseNet-121, Inception-v1 and VGG-19 on that chip, searched by ga with
  transfer (the 3 nearest known keys, as `bank tune` borrows them, and its early stop) and
  without, at budgets 16 and 32; and the next versions of ResNet-50 and BERT (bench/end_to_end.py's
  v2s) tuned incrementally with the default budget, against a tune from scratch at 64.

Not a test: it prints JSON and tables, and takes minutes.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.optima import optima  # noqa: E402
from fixtures.make_bert import write as write_bert  # noqa: E402
from fixtures.model_versions import dilated  # noqa: E402
from tunebank.bank import Bank  # noqa: E402
from tunebank.tuner.flow import tune  # noqa: E402
from tunebank.tuner.measure.costmodel import CostModel  # noqa: E402
from tunebank.tuner.measure.socs import get_soc  # noqa: E402
from tunebank.tuner.measure.space import FitCheck  # noqa: E402
from tunebank.tuner.model.reading import load_model  # noqa: E402
from tunebank.tuner.options import TuneOptions  # noqa: E402
from tunebank.tuner.plan.grouping import KeyGroup, plan_tune  # noqa: E402
from tunebank.tuner.plan.selection import TuneSelection  # noqa: E402
from tunebank.tuner.search.strategies import Evaluator, SearchError, make_search  # noqa: E402
from tunebank.tuner.search.transfer import Donors, start_from  # noqa: E402

SOCS = ("Ascend910B2", "Ascend310P3")
TRANSFER_SOC = "Ascend910B2"
BERT_SHAPE = {"input_ids_embedded": (4, 128, 128)}
MODELS = ROOT / "fixtures" / "models"
TRANSFER_MODELS = ("densenet121", "inception_v1", "vgg19")
DISTINCT_TRIALS = 5
"""TPE counted per distinct point runs at most this many trials per point of the budget (the
independent sampler repeats itself: 128 distinct points took it over 11 s on one key)."""


@dataclass(frozen=True)
class Operator:
    """One key of a suite: its group, chip, model and optimum."""

    model: str
    soc: str
    group: KeyGroup
    cost: CostModel
    optimum_us: float = 0.0

    @property
    def family(self) -> str:
        return "vector" if self.group.space.family == "vector" else "cube"

    def latency(self, candidates: np.ndarray) -> np.ndarray:
        return self.cost.evaluate(self.group.work, self.group.space, candidates)

    def fits(self, candidates: np.ndarray) -> np.ndarray:
        return self.cost.fitting(self.group.work, self.group.space, candidates)

    def fit_check(self) -> FitCheck:
        return self.cost.fit_check(self.group.work, self.group.space)


def _ops(name: str, path: Path, soc_name: str, shapes: dict[str, Any] | None = None) -> list[Operator]:
    soc = get_soc(soc_name)
    cost = CostModel(soc)
    plan = plan_tune(load_model(path, shapes), soc, TuneSelection())
    return [Operator(name, soc_name, group, cost) for group in plan.groups]


def suites(folder: Path) -> dict[str, list[Operator]]:
    """The keys each part judges (without their optima)."""
    bert = write_bert(folder / "bert.onnx")
    scratch = [op for soc in SOCS for op in [*_ops("resnet50", MODELS / "resnet50.onnx", soc),
                                             *_ops("bert", bert, soc, BERT_SHAPE)]]
    known = {op.group.repo_key for op in scratch if op.soc == TRANSFER_SOC and op.model == "resnet50"}
    transfer = [op for name in TRANSFER_MODELS for op in _ops(name, MODELS / f"{name}.onnx", TRANSFER_SOC)
                if op.family == "cube" and op.group.repo_key not in known]
    return {"scratch": scratch, "transfer": transfer}


def with_optima(ops: Sequence[Operator]) -> list[Operator]:
    found = optima((op.soc, op.group, op.cost) for op in ops)
    return [Operator(op.model, op.soc, op.group, op.cost,
                     found[f"{op.soc}/{op.group.repo_key}"]["optimum_us"]) for op in ops]


# -- the strategies -------------------------------------------------------------------------------

def ours(op: Operator, mode: str, budget: int, seed: int, borrowed: Sequence[tuple[int, ...]] = (),
         patience: int | None = None) -> tuple[float, int]:
    """Best latency and measurements of one of tunebank's searches, the default priced first
    as `bank tune` does."""
    rng = np.random.default_rng([seed, int(op.group.repo_key)])
    evaluate = Evaluator(op.latency, fits=op.fit_check())
    evaluate(np.array([op.group.space.default]))
    try:
        result = make_search(mode, budget, rng).search(op.group.space, evaluate, borrowed=borrowed,
                                                       patience=patience)
    except SearchError:  # nothing that fits found: counted as failed, never averaged
        return math.inf, evaluate.measurements
    return result.latency_us, result.measurements


def tpe(op: Operator, budget: int, seed: int, multivariate: bool | None,
        distinct: bool) -> float:
    """The best latency Optuna's TPE finds: ``budget`` trials, or (``distinct``) as many trials
    as it takes to measure ``budget`` distinct points (at most :data:`DISTINCT_TRIALS` times as
    many), the default enqueued first."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    space = op.group.space
    evaluate = Evaluator(op.latency)
    kwargs = {} if multivariate is None else {"multivariate": multivariate}
    study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=seed, **kwargs))
    study.enqueue_trial({k.name: v for k, v in zip(space.knobs, space.default, strict=True)})

    def objective(trial: Any) -> float:
        row = [trial.suggest_int(k.name, 0, len(k.values) - 1) for k in space.knobs]
        value = float(evaluate(np.array([row]))[0])
        if distinct and evaluate.measurements >= min(budget, space.size):
            trial.study.stop()
        return value if np.isfinite(value) else 1e30

    study.optimize(objective, n_trials=DISTINCT_TRIALS * budget if distinct else budget)
    return float(study.best_value)


def strategies(with_tpe: bool) -> dict[str, Callable[[Operator, int, int], float]]:
    found: dict[str, Callable[[Operator, int, int], float]] = {
        mode: (lambda op, b, s, m=mode: ours(op, m, b, s)[0]) for mode in ("ga", "rl", "random")}
    if with_tpe:
        for name, multivariate in (("tpe", None), ("tpe-independent", False)):
            found[name] = lambda op, b, s, mv=multivariate: tpe(op, b, s, mv, False)
            found[f"{name} (distinct)"] = lambda op, b, s, mv=multivariate: tpe(op, b, s, mv, True)
    return found


# -- summaries ------------------------------------------------------------------------------------

def geomean(values: Sequence[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def summary(ratios: Sequence[float]) -> dict[str, float]:
    """Geomean and worst of best-found / optimum (1.0 is the optimum) over the searches that
    found a candidate that fits, and how many did not."""
    found = [r for r in ratios if math.isfinite(r)]
    return {"geomean": round(geomean(found), 4) if found else math.inf,
            "worst": round(max(found), 4) if found else math.inf, "n": len(ratios),
            "failed": len(ratios) - len(found)}


def run_scratch(ops: list[Operator], seeds: int, budgets: list[int], with_tpe: bool,
                tpe_seeds: int = 1) -> dict[str, Any]:
    ratios: dict[tuple[str, str, int], list[float]] = defaultdict(list)
    model_time: dict[tuple[str, int, str, str, int], list[float]] = defaultdict(lambda: [0.0, 0.0])
    seconds: dict[str, float] = defaultdict(float)
    for name, strategy in strategies(with_tpe).items():
        for op in ops:
            if name.startswith("tpe") and op.family != "cube":
                continue  # TPE judged where search matters: the Cube's large spaces
            for budget in budgets:
                for seed in range(tpe_seeds if name.startswith("tpe") else seeds):
                    started = time.perf_counter()
                    found = strategy(op, budget, seed)
                    seconds[name] += time.perf_counter() - started
                    ratios[(name, op.family, budget)].append(found / op.optimum_us)
                    whole = model_time[(name, budget, op.model, op.soc, seed)]
                    whole[0] += found * len(op.group.ops)
                    whole[1] += op.optimum_us * len(op.group.ops)
    by_family = {f"{name} {family} {budget}": summary(values)
                 for (name, family, budget), values in sorted(ratios.items())}
    models: dict[tuple[str, int], list[float]] = defaultdict(list)
    for (name, budget, *_), (found_us, best_us) in model_time.items():
        if not name.startswith("tpe"):
            models[(name, budget)].append(found_us / best_us)
    return {"keys": len(ops), "cube_keys": sum(op.family == "cube" for op in ops), "seeds": seeds,
            "tpe_seeds": tpe_seeds,
            "ratio": by_family,
            "model_latency_ratio": {f"{n} {b}": round(geomean(v), 4) for (n, b), v in sorted(models.items())},
            "seconds": {k: round(v, 1) for k, v in seconds.items()}}


def _donors(folder: Path, model: Path, soc: str, shapes: dict[str, Any] | None = None) -> tuple[Donors, Path]:
    """The policies a default `bank tune` of ``model`` leaves in a new bank."""
    db = folder / f"{model.stem}-{soc}.db"
    db.unlink(missing_ok=True)
    tune(lambda: Bank.open(str(db), create=True),
         TuneOptions(model=model, soc_version=soc, work_dir=folder, input_shapes=shapes or {}))
    with Bank.open(str(db)) as bank:
        return Donors(bank.policies()), db


def transferred(op: Operator, donors: Donors, budget: int, seed: int) -> tuple[float, int]:
    """ga with transfer, as `bank tune` runs it for a new key."""
    start = start_from(donors, op.group.info, op.group.repo_key, op.soc, op.group.space, op.cost,
                       op.group.work, budget)
    return ours(op, "ga", budget, seed, start.borrowed, start.patience)


def run_transfer(ops: list[Operator], seeds: int, folder: Path) -> dict[str, Any]:
    donors, _ = _donors(folder, MODELS / "resnet50.onnx", TRANSFER_SOC)
    out: dict[str, Any] = {"keys": len(ops), "donors": len(donors), "by_budget": {}}
    for budget in (16, 32):
        with_t, without, spent = [], [], []
        for op in ops:
            for seed in range(seeds):
                found, used = transferred(op, donors, budget, seed)
                with_t.append(found / op.optimum_us)
                spent.append(used)
                without.append(ours(op, "ga", budget, seed)[0] / op.optimum_us)
        out["by_budget"][str(budget)] = {"transfer": summary(with_t), "no transfer": summary(without),
                                         "mean measurements with transfer": round(float(np.mean(spent)), 1)}
    out["incremental"] = incremental(folder)
    return out


def incremental(folder: Path) -> dict[str, Any]:
    """The next versions of ResNet-50 and BERT tuned after the first (default budget, transfer
    on): their measurements against the first tune's, and their new keys' distance from the
    optimum against a ga search from scratch at 64."""
    bert_v1 = write_bert(folder / "bert_v1.onnx")
    bert_v2 = write_bert(folder / "bert_v2.onnx", ffn_last=384)
    resnet_v2 = folder / "resnet50_v2.onnx"
    dilated(MODELS / "resnet50.onnx", resnet_v2)
    out = {}
    for name, v1, v2, shapes in (("resnet50", MODELS / "resnet50.onnx", resnet_v2, None),
                                 ("bert", bert_v1, bert_v2, BERT_SHAPE)):
        db = folder / f"incremental-{name}.db"
        db.unlink(missing_ok=True)
        reports = [tune(lambda path=db: Bank.open(str(path), create=True),
                        TuneOptions(model=model, soc_version=TRANSFER_SOC, work_dir=folder,
                                    input_shapes=shapes or {})) for model in (v1, v2)]
        with Bank.open(str(db)) as bank:
            added = {p.repo_key: p.best_us for p in bank.policies() if p.task_id == reports[1].task_id}
            new = [s.event.repo_key for s in bank.events() if s.event.task_id == reports[1].task_id
                   and s.event.kind in ("add", "unsatisfied")]
        ops = with_optima([op for op in _ops(name, v2, TRANSFER_SOC, shapes) if op.group.repo_key in new])
        ours_ratio = [(added.get(op.group.repo_key) or ours(op, "ga", 1, 0)[0]) / op.optimum_us for op in ops]
        scratch = [ours(op, "ga", 64, seed)[0] / op.optimum_us for op in ops for seed in range(3)]
        out[name] = {"v1_measurements": reports[0].measurements, "v2_measurements": reports[1].measurements,
                     "share": round(reports[1].measurements / reports[0].measurements, 4),
                     "new_keys": len(ops), "v2 new keys vs optimum": summary(ours_ratio),
                     "ga from scratch at 64": summary(scratch)}
    return out


def has_optuna() -> bool:
    """Whether the TPE baseline can run (optuna is a bench-only extra: pip install -e '.[bench]')."""
    try:
        import optuna  # noqa: F401
    except ImportError:
        print("optuna is not installed: TPE left out (pip install -e '.[bench]')")
        return False
    return True


def run(seeds: int, budgets: list[int], with_tpe: bool,
        parts: Sequence[str] = ("scratch", "transfer"), tpe_seeds: int = 1) -> dict[str, Any]:
    """Every part asked for (see the module's docstring)."""
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        found = suites(folder)
        if "scratch" in parts:
            results["scratch"] = run_scratch(with_optima(found["scratch"]), seeds, budgets, with_tpe,
                                             tpe_seeds)
        if "transfer" in parts:
            results["transfer"] = run_transfer(with_optima(found["transfer"]), seeds, folder)
    return results


def table(results: dict[str, Any]) -> str:
    """The results as Markdown: geomean / worst per strategy and budget, Cube and vector keys
    apart; the whole-model latency ratio; transfer and incremental re-tunes."""
    lines: list[str] = []
    scratch = results.get("scratch")
    if scratch:
        cells: dict[tuple[str, str], dict[str, str]] = defaultdict(dict)
        for label, value in scratch["ratio"].items():
            *name, family, budget = label.split(" ")
            cells[(" ".join(name), family)][budget] = f"{value['geomean']:.3f} / {value['worst']:.3f}"
        budgets = sorted({b for row in cells.values() for b in row}, key=int)
        for family in ("cube", "vector"):
            lines += ["", f"{family.capitalize()} keys, from an empty bank: geomean / worst of "
                      "best-found / optimum over keys x seeds", "",
                      "| strategy | " + " | ".join(f"budget {b}" for b in budgets) + " |",
                      "|---" * (len(budgets) + 1) + "|"]
            lines += [f"| {name} | " + " | ".join(row.get(b, "-") for b in budgets) + " |"
                      for (name, fam), row in sorted(cells.items()) if fam == family]
        lines += ["", "Whole-model latency / at the optimum (geomean over models, chips, seeds): "
                  + ", ".join(f"{k} {v:.3f}" for k, v in scratch["model_latency_ratio"].items())]
    part = results.get("transfer")
    if part:
        lines += ["", f"New Cube keys of {', '.join(TRANSFER_MODELS)} on {TRANSFER_SOC} ({part['keys']}), "
                  f"the bank holding ResNet-50's ({part['donors']} policies): ga, geomean / worst", "",
                  "| budget | with transfer | without | measurements with transfer (mean) |",
                  "|---|---|---|---|"]
        for budget, row in part["by_budget"].items():
            lines.append(f"| {budget} | {row['transfer']['geomean']:.3f} / {row['transfer']['worst']:.3f} | "
                         f"{row['no transfer']['geomean']:.3f} / {row['no transfer']['worst']:.3f} | "
                         f"{row['mean measurements with transfer']} |")
        lines += ["", "| next version | measurements (share of v1's) | new keys | their geomean / worst "
                  "| ga from scratch at 64 |", "|---|---|---|---|---|"]
        for name, row in part["incremental"].items():
            mine, scratch = row["v2 new keys vs optimum"], row["ga from scratch at 64"]
            lines.append(f"| {name} v2 | {row['v2_measurements']:,} ({row['share']:.1%} of "
                         f"{row['v1_measurements']:,}) | {row['new_keys']} | {mine['geomean']:.3f} / "
                         f"{mine['worst']:.3f} | {scratch['geomean']:.3f} / {scratch['worst']:.3f} |")
    return "\n".join(lines).strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--budgets", default="16,32,64,128")
    parser.add_argument("--no-tpe", action="store_true")
    parser.add_argument("--only", default="scratch,transfer")
    parser.add_argument("--tpe-seeds", type=int, default=1,
                        help="seeds for TPE (its 4 variants take 100 times ga's time)")
    args = parser.parse_args()
    results = run(args.seeds, [int(b) for b in args.budgets.split(",")],
                  not args.no_tpe and has_optuna(), args.only.split(","), args.tpe_seeds)
    print(json.dumps(results, indent=1))
    print(table(results))


if __name__ == "__main__":
    main()
