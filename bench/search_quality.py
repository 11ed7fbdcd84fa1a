"""Search quality on the sim backend, against every key's exact optimum.

Usage: python bench/search_quality.py [--seeds 5] [--budgets 16,32,64,128] [--no-tpe]
                                      [--only scratch,transfer,heldout]

The reference of every key is its exact optimum (bench/optima.py, cached in bench/optima.json),
never the best of long runs of the methods judged. Every strategy's budget counts distinct
candidates measured, the compiler's default included, as `bank tune --budget` does.

- ``scratch``: every unique key of ResNet-50 and of the BERT-like encoder on Ascend910B2 and
  Ascend310P3, searched from an empty bank by ga, rl, random and Optuna's TPE (multivariate,
  labelled knobs as categories; counted per trial, and per distinct point measured). Every
  seed s is `bank tune --seed s`'s (ga, rl and random run through run_search, as a tune runs
  them; TPE's sampler seed is drawn from the same generator). Reported per family (Cube: conv
  and matmul; vector) and budget: the geomean and the worst of best-found / optimum over keys x
  seeds, and the whole-model latency ratio (each key's time times its operators, summed, over
  the same at the optimum; geomean over models, chips and seeds).
- ``heldout``: ga alone, as in ``scratch``, on the Cube keys of the other bundled CNNs
  (:data:`HELD_OUT`), on which no search setting was chosen (not run by default: 294 keys, a
  minute).
- ``transfer``: for each split of :data:`SPLITS` (the bank holding default `bank tune`s of
  the donor models on the donor chip), the target model's Cube keys the bank lacks, searched
  by ga with transfer (:func:`tunebank.tuner.search.transfer.start_from`, as `bank tune` starts
  them: its own chip's 3 nearest known keys, and its early stop) and without, at budgets 16
  and 32: geomean per split, and pooled over the splits. Then every bundled model's next
  version (fixtures.model_versions) and BERT's tuned after their first version with the
  default budget, against the next version tuned with the default budget and --no-transfer:
  measurements (and their share of the first tune's) and modelled model time.

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
from tunebank.tuner.measure.backend import BackendSettings, KeyWork  # noqa: E402
from tunebank.tuner.measure.costmodel import CostModel  # noqa: E402
from tunebank.tuner.measure.sim import SimBackend  # noqa: E402
from tunebank.tuner.measure.socs import get_soc  # noqa: E402
from tunebank.tuner.measure.space import FitCheck  # noqa: E402
from tunebank.tuner.model.reading import load_model  # noqa: E402
from tunebank.tuner.options import TuneOptions  # noqa: E402
from tunebank.tuner.plan.grouping import KeyGroup, plan_tune  # noqa: E402
from tunebank.tuner.plan.selection import TuneSelection  # noqa: E402
from tunebank.tuner.search.keysearch import SearchJob, run_search  # noqa: E402
from tunebank.tuner.search.strategies import Evaluator  # noqa: E402
from tunebank.tuner.search.transfer import Donors, start_from  # noqa: E402

SOCS = ("Ascend910B2", "Ascend310P3")
BERT_SHAPE = {"input_ids_embedded": (4, 128, 128)}
MODELS = ROOT / "fixtures" / "models"
SIM = SimBackend(BackendSettings())
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


HELD_OUT = ("inception_v1", "vgg19", "densenet121", "squeezenet")
"""The bundled models whose keys no search setting was chosen on (the ``heldout`` part)."""


def suites(folder: Path) -> dict[str, list[Operator]]:
    """The keys the scratch and heldout parts judge (without their optima)."""
    bert = write_bert(folder / "bert.onnx")
    scratch = [op for soc in SOCS for op in [*_ops("resnet50", MODELS / "resnet50.onnx", soc),
                                             *_ops("bert", bert, soc, BERT_SHAPE)]]
    held_out = [op for soc in SOCS for name in HELD_OUT
                for op in _ops(name, MODELS / f"{name}.onnx", soc) if op.family == "cube"]
    return {"scratch": scratch, "heldout": held_out}


def with_optima(ops: Sequence[Operator]) -> list[Operator]:
    found = optima((op.soc, op.group, op.cost) for op in ops)
    return [Operator(op.model, op.soc, op.group, op.cost,
                     found[f"{op.soc}/{op.group.repo_key}"]["optimum_us"]) for op in ops]


# -- the strategies -------------------------------------------------------------------------------

def ours(op: Operator, mode: str, budget: int, seed: int, borrowed: Sequence[tuple[int, ...]] = (),
         patience: int | None = None) -> tuple[float, int]:
    """Best latency and measurements of one of tunebank's searches, run as `bank tune --seed
    SEED` runs it (tuner/search/keysearch.run_search: the same generator, its draw for the
    noise included, and the default priced first)."""
    job = SearchJob(KeyWork(op.group.repo_key, op.cost.soc, op.group.work, op.group.space), mode,
                    budget, seed, "sim", borrowed=tuple(borrowed), patience=patience)
    found = run_search(job, SIM)
    return (found.found_us if found.error is None else math.inf), found.measurements


def tpe(op: Operator, budget: int, seed: int, distinct: bool) -> float:
    """The best latency Optuna's TPE finds, as strong as Optuna makes it: multivariate, the
    labelled knobs (format, impl) as categories and the others as ordered integers, its seed
    drawn as `bank tune --seed SEED` draws a search's; ``budget`` trials, or (``distinct``) as
    many trials as it takes to measure ``budget`` distinct points (at most
    :data:`DISTINCT_TRIALS` times as many), the default enqueued first."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    space = op.group.space
    evaluate = Evaluator(op.latency)
    sampler_seed = int(np.random.default_rng([seed, int(op.group.repo_key)]).integers(2**31))
    study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=sampler_seed,
                                                                   multivariate=True))
    study.enqueue_trial({k.name: v for k, v in zip(space.knobs, space.default, strict=True)})

    def objective(trial: Any) -> float:
        row = [trial.suggest_categorical(k.name, list(range(len(k.values)))) if k.labels
               else trial.suggest_int(k.name, 0, len(k.values) - 1) for k in space.knobs]
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
        found["tpe"] = lambda op, b, s: tpe(op, b, s, False)
        found["tpe (distinct)"] = lambda op, b, s: tpe(op, b, s, True)
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


SPLITS = (
    ("resnet50@Ascend910B2", "densenet121@Ascend910B2"),
    ("resnet50@Ascend910B2", "inception_v1@Ascend910B2"),
    ("resnet50@Ascend910B2", "vgg19@Ascend910B2"),
    ("squeezenet@Ascend910B2", "densenet121@Ascend910B2"),
    ("resnet50@Ascend310P3", "densenet121@Ascend310P3"),
    ("inception_v1@Ascend310P3", "vgg19@Ascend310P3"),
    ("resnet50@Ascend910B2", "resnet50@Ascend310P3"),
    ("densenet121@Ascend910B2", "inception_v1@Ascend310P3"),
    ("resnet50+vgg19+densenet121+inception_v1@Ascend910B2", "bert@Ascend910B2"),
    ("resnet50+vgg19+densenet121+inception_v1@Ascend310P3", "bert@Ascend310P3"),
)
"""(donor models @ chip, target model @ chip): same chip and another, and BERT after CNNs."""
NEXT_VERSIONS = ("resnet50", "inception_v1", "vgg19", "densenet121", "squeezenet", "bert")


def _model(name: str, folder: Path) -> tuple[Path, dict[str, Any] | None]:
    """A model of the suites by name, and its input shapes."""
    if name == "bert":
        return write_bert(folder / "bert.onnx"), BERT_SHAPE
    return MODELS / f"{name}.onnx", None


def versions(name: str, folder: Path) -> tuple[Path, Path, dict[str, Any] | None]:
    """A model of the suites by name, its next version (fixtures.model_versions: 3x3
    convolutions dilated; BERT's last feed-forward layer wider), and its input shapes."""
    v1, shapes = _model(name, folder)
    v2 = folder / f"{name}_v2.onnx"
    if name == "bert":
        write_bert(v2, ffn_last=384)
    else:
        dilated(v1, v2)
    return v1, v2, shapes


def _donors(folder: Path, models: Sequence[str], soc: str) -> tuple[Donors, set[tuple[str, str]]]:
    """The policies default `bank tune`s of ``models`` leave in a new bank, and their keys."""
    db = folder / f"{'+'.join(models)}-{soc}.db"
    db.unlink(missing_ok=True)
    for name in models:
        path, shapes = _model(name, folder)
        tune(lambda: Bank.open(str(db), create=True),
             TuneOptions(model=path, soc_version=soc, work_dir=folder, input_shapes=shapes or {}))
    with Bank.open(str(db)) as bank:
        policies = list(bank.policies())
    return Donors(policies), {(p.soc_version, p.repo_key) for p in policies}


def transferred(op: Operator, donors: Donors, budget: int, seed: int) -> tuple[float, int]:
    """ga with transfer, as `bank tune` runs it for a new key."""
    start = start_from(donors, op.group.info, op.group.repo_key, op.soc, op.group.space, op.cost,
                       op.group.work, budget)
    return ours(op, "ga", budget, seed, start.borrowed, start.patience)


def run_transfer(seeds: int, folder: Path, splits: Sequence[tuple[str, str]] = SPLITS) -> dict[str, Any]:
    out: dict[str, Any] = {"splits": {}, "pooled": {}}
    pooled: dict[int, tuple[list[float], list[float]]] = {16: ([], []), 32: ([], [])}
    for donor, target in splits:
        models, soc = donor.split("@")
        donors, known = _donors(folder, models.split("+"), soc)
        name, target_soc = target.split("@")
        path, shapes = _model(name, folder)
        ops = with_optima([op for op in _ops(name, path, target_soc, shapes)
                           if op.family == "cube" and (target_soc, op.group.repo_key) not in known])
        row: dict[str, Any] = {"keys": len(ops)}
        for budget, (with_all, without_all) in pooled.items():
            with_t = [transferred(op, donors, budget, s)[0] / op.optimum_us
                      for op in ops for s in range(seeds)]
            without = [ours(op, "ga", budget, s)[0] / op.optimum_us for op in ops for s in range(seeds)]
            with_all += with_t
            without_all += without
            row[str(budget)] = {"transfer": summary(with_t), "no transfer": summary(without)}
        out["splits"][f"{donor} -> {target}"] = row
    for budget, (with_all, without_all) in pooled.items():
        out["pooled"][str(budget)] = {"transfer": summary(with_all), "no transfer": summary(without_all)}
    out["next_versions"] = next_versions(folder, seeds=seeds)
    return out


def next_versions(folder: Path, names: Sequence[str] = NEXT_VERSIONS, seeds: int = 1) -> dict[str, Any]:
    """Each model's next version tuned after its first with the default budget (transfer on),
    against the next version tuned alone after its first with --no-transfer, on each chip,
    with ``seeds`` seeds (`bank tune --seed`): measurements summed over the seeds, modelled
    model times as their geomean, and the seeds on which transfer gave the slower model."""
    out = {}
    for soc in SOCS:
        for name in names:
            v1, v2, shapes = versions(name, folder)
            row: dict[str, Any] = defaultdict(float)
            times: dict[bool, list[float]] = {True: [], False: []}
            slower = []
            for seed in range(seeds):
                runs = {}
                for transfer in (True, False):
                    db = folder / f"next-{name}-{soc}-{transfer}.db"
                    db.unlink(missing_ok=True)
                    runs[transfer] = [tune(lambda path=db: Bank.open(str(path), create=True),
                                           TuneOptions(model=model, soc_version=soc, work_dir=folder,
                                                       input_shapes=shapes or {}, transfer=transfer,
                                                       seed=seed))
                                      for model in (v1, v2)]
                first, second = runs[True]
                alone = runs[False][1]
                row["v1_measurements"] += first.measurements
                row["v2_measurements"] += second.measurements
                row["alone_measurements"] += alone.measurements
                times[True].append(second.model_result_ms)
                times[False].append(alone.model_result_ms)
                if second.model_result_ms > alone.model_result_ms:
                    slower.append(seed)
            out[f"{name}@{soc}"] = {
                **{k: int(v) for k, v in row.items()},
                "share": round(row["v2_measurements"] / row["v1_measurements"], 4),
                "v2_model_ms": round(geomean(times[True]), 6),
                "alone_model_ms": round(geomean(times[False]), 6),
                "slower_seeds": slower, "seeds": seeds}
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
        if "heldout" in parts:
            results["heldout"] = run_heldout(with_optima(found["heldout"]), seeds, budgets)
        if "transfer" in parts:
            results["transfer"] = run_transfer(seeds, folder)
    return results


def run_heldout(ops: list[Operator], seeds: int, budgets: list[int]) -> dict[str, Any]:
    """ga from an empty bank on keys no setting was chosen on: is a gain on the scratch part
    this suite's alone?"""
    return {"keys": len(ops), "seeds": seeds, "ratio": {
        str(budget): summary([ours(op, "ga", budget, seed)[0] / op.optimum_us
                              for op in ops for seed in range(seeds)]) for budget in budgets}}


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
    held = results.get("heldout")
    if held:
        lines += ["", f"Held out ({', '.join(HELD_OUT)}; {held['keys']} Cube keys, "
                  f"{held['seeds']} seeds), ga from an empty bank: geomean / worst of best-found "
                  "/ optimum", "", "| budget | " + " | ".join(held["ratio"]) + " |",
                  "|---|" + "---|" * len(held["ratio"]),
                  "| ga | " + " | ".join(f"{r['geomean']:.4f} / {r['worst']:.3f}"
                                         for r in held["ratio"].values()) + " |"]
    part = results.get("transfer")
    if part:
        def cell(value: dict[str, Any]) -> str:
            return f"{value['geomean']:.4f} / {value['worst']:.3f}"

        lines += ["", "Transfer: the target's Cube keys the bank lacks, ga with and without transfer, "
                  "geomean / worst of best-found / optimum", "",
                  "| donors -> target (keys) | 16 with | 16 without | 32 with | 32 without |",
                  "|---|---|---|---|---|"]
        for split, row in [*part["splits"].items(), ("pooled", {"keys": "-", **part["pooled"]})]:
            lines.append(f"| {split} ({row['keys']}) | {cell(row['16']['transfer'])} | "
                         f"{cell(row['16']['no transfer'])} | {cell(row['32']['transfer'])} | "
                         f"{cell(row['32']['no transfer'])} |")
        seeds = next(iter(part["next_versions"].values()), {}).get("seeds", 1)
        lines += ["", f"Next versions, {seeds} seed(s): measurements summed over the seeds, model "
                  "times their geomean.", "",
                  "| next version | measurements (share of v1's) | model ms | with --no-transfer: "
                  "measurements, model ms | seeds where transfer is slower |", "|---|---|---|---|---|"]
        for name, row in part["next_versions"].items():
            lines.append(f"| {name} | {row['v2_measurements']:,} ({row['share']:.1%} of "
                         f"{row['v1_measurements']:,}) | {row['v2_model_ms']:.4f} | "
                         f"{row['alone_measurements']:,}, {row['alone_model_ms']:.4f} | "
                         f"{', '.join(map(str, row['slower_seeds'])) or 'none'} |")
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
