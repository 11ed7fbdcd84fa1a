"""End to end: whole models tuned with ga from an empty bank, and a new model version tuned into
the bank its first version filled.

Usage: python bench/end_to_end.py

Each tune is a `bank tune ... --json` process of its own (so its wall time counts start-up,
model reading and keying, as a user's does), into a bank in a temporary folder, run 3 times
(into banks alike) for the median of its times. Reported per
tune: wall seconds, the tuner's own seconds, measurements, keys and the cost model's speed-up of
the whole model. The incremental pairs report v2 against v1 and check, from v2's events, that
no key the bank knew was measured. Not a test: nothing here asserts.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import onnx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.scale import clean_env  # noqa: E402
from fixtures.make_bert import build as build_bert  # noqa: E402
from fixtures.model_versions import dilated  # noqa: E402
from tunebank.tuner.measure.socs import get_soc  # noqa: E402
from tunebank.tuner.model.reading import load_model, parse_input_shapes  # noqa: E402
from tunebank.tuner.plan.grouping import KeyGroup, plan_tune  # noqa: E402
from tunebank.tuner.plan.selection import TuneSelection  # noqa: E402

MODELS = ROOT / "fixtures" / "models"
SOC = "Ascend910B2"
BERT_BASE = {"hidden": 768, "heads": 12, "ffn": 3072, "layers": 12}
BERT_SHAPE = "input_ids_embedded:8,128,768"
"""BERT-base's sizes (hidden 768, 12 heads, FFN 3072, 12 layers), batch 8 of 128 tokens."""
REPEAT = 3  # runs of each tune; times are their medians


@dataclass(frozen=True)
class Model:
    """One model to tune: its file and the input shape it needs (if any)."""

    name: str
    path: Path
    input_shape: str | None = None


def tune(model: Model, db: Path) -> dict[str, Any]:
    """One `bank tune --mode ga --json` run; its report, with its wall time."""
    command = [shutil.which("bank") or "bank", "tune", str(model.path), "--soc-version", SOC,
               "--db", str(db), "--mode", "ga", "--progress-bar", "off", "--json"]
    if model.input_shape:
        command += ["--input-shape", model.input_shape]
    started = time.perf_counter()
    proc = subprocess.run(command, capture_output=True, cwd=db.parent, env=clean_env(), check=False)
    wall_s = time.perf_counter() - started
    if proc.returncode:
        raise SystemExit(f"{' '.join(command)} failed: {proc.stderr.decode()[-500:]}")
    report = json.loads(proc.stdout)
    summary = report["repo_summary"]
    return {"model": model.name, "wall_s": round(wall_s, 2), "tuning_s": report["tuning_time_s"],
            "measurements": report["measurements"], "keys": summary["total_num"],
            "new_keys": summary["repo_add_num"] + summary["repo_unsatisfied_num"],
            "known_keys": summary["repo_hit_num"],
            "speedup": round(report["model_baseline_ms"] / report["model_result_ms"], 3),
            "task_id": report["task_id"]}


def median_tune(model: Model, dbs: list[Path]) -> dict[str, Any]:
    """:func:`tune` into each of ``dbs`` (banks alike): the first report, with the median wall
    and tuner seconds (this machine's timings vary by a third from run to run)."""
    runs = [tune(model, db) for db in dbs]
    first = dict(runs[0])
    for name in ("wall_s", "tuning_s"):
        first[name] = sorted(run[name] for run in runs)[len(runs) // 2]
    return first


def measured_known_keys(db: Path, task_id: str) -> int:
    """Measurements the task spent on keys the bank already knew (its hits): should be 0."""
    proc = subprocess.run([shutil.which("bank") or "bank", "events", "--db", str(db), "--json"],
                          capture_output=True, env=clean_env(), check=True)
    spent = 0
    for line in proc.stdout.decode().splitlines():
        event = json.loads(line)
        if event["task_id"] == task_id and event["kind"] == "hit":
            spent += int(event["payload"].get("measurements", 0))
    return spent


def incremental(v1: Model, v2: Model, folder: Path) -> dict[str, Any]:
    """v1 into an empty bank, then v2 into the same bank: v2's cost as a share of v1's."""
    db = folder / f"incremental-{v1.name}.db"
    first = median_tune(v1, [db] + [folder / f"incremental-{v1.name}-{n}.db" for n in range(1, REPEAT)])
    copies = [folder / f"incremental-{v1.name}-v2-{n}.db" for n in range(REPEAT)]
    for copy in copies:
        shutil.copyfile(db, copy)
    second = median_tune(v2, copies)
    return {"v1": first, "v2": second, **changed_nodes(v1, v2),
            "new_key_share": round(second["new_keys"] / second["keys"], 3),
            "measurement_ratio": round(second["measurements"] / first["measurements"], 3),
            "tuning_time_ratio": round(second["tuning_s"] / max(first["tuning_s"], 1e-3), 3),
            "wall_ratio": round(second["wall_s"] / first["wall_s"], 3),
            "measured_known_keys": measured_known_keys(copies[0], second["task_id"])}


def changed_nodes(v1: Model, v2: Model) -> dict[str, int]:
    """Tunable operators of v2 (as the tuner groups them) and those whose key v1 lacks."""
    def groups(model: Model) -> tuple[KeyGroup, ...]:
        loaded = load_model(model.path, parse_input_shapes(model.input_shape))
        return plan_tune(loaded, get_soc(SOC), TuneSelection()).groups
    known = {group.repo_key for group in groups(v1)}
    ops = [(group.repo_key, op) for group in groups(v2) for op in group.ops]
    return {"nodes_changed": sum(1 for key, _ in ops if key not in known), "nodes_tunable": len(ops)}


def run() -> dict[str, Any]:
    """Every end-to-end figure."""
    with tempfile.TemporaryDirectory(prefix="tunebank-e2e-") as tmp:
        folder = Path(tmp)
        bert_v1, bert_v2 = folder / "bert_base.onnx", folder / "bert_base_v2.onnx"
        onnx.save(build_bert(**BERT_BASE), str(bert_v1))
        onnx.save(build_bert(**BERT_BASE, ffn_last=4096), str(bert_v2))
        models = [Model("resnet50", MODELS / "resnet50.onnx"),
                  Model("densenet121", MODELS / "densenet121.onnx"),
                  Model("bert_base", bert_v1, BERT_SHAPE)]
        empty = [median_tune(model, [folder / f"empty-{model.name}-{n}.db" for n in range(REPEAT)])
                 for model in models]
        resnet_v2 = folder / "resnet50_v2.onnx"
        dilated(MODELS / "resnet50.onnx", resnet_v2)
        pairs = [
            {"change": "every 3x3 convolution dilated (2), shapes kept",
             **incremental(models[0], Model("resnet50_v2", resnet_v2), folder)},
            {"change": "last layer's feed-forward width 3072 -> 4096",
             **incremental(models[2], Model("bert_base_v2", bert_v2, BERT_SHAPE), folder)},
        ]
    return {"empty_bank": empty, "incremental": pairs}


def table(results: dict[str, Any]) -> str:
    """The Markdown tables of docs/performance.md's end-to-end section."""
    lines = ["| model (ga, empty bank) | keys | measurements | wall s | tuner s | modelled speed-up |",
             "|---|---|---|---|---|---|"]
    for r in results["empty_bank"]:
        lines.append(f"| {r['model']} | {r['keys']} | {r['measurements']:,} | {r['wall_s']} | "
                     f"{r['tuning_s']} | {r['speedup']:.2f}x |")
    lines += ["", "| v1 -> v2 | nodes changed | v2 keys new | measurements v2/v1 | tuner s v2/v1 "
              "| wall s v2/v1 | measurements on known keys |", "|---|---|---|---|---|---|---|"]
    for p in results["incremental"]:
        v1, v2 = p["v1"], p["v2"]
        lines.append(
            f"| {v1['model']} -> {v2['model']}: {p['change']} | {p['nodes_changed']} of "
            f"{p['nodes_tunable']} ({p['nodes_changed'] / p['nodes_tunable']:.0%}) | "
            f"{v2['new_keys']} of {v2['keys']} ({p['new_key_share']:.0%}) | "
            f"{v2['measurements']:,} / {v1['measurements']:,} ({p['measurement_ratio']:.0%}) | "
            f"{v2['tuning_s']} / {v1['tuning_s']} ({p['tuning_time_ratio']:.0%}) | "
            f"{v2['wall_s']} / {v1['wall_s']} ({p['wall_ratio']:.0%}) | {p['measured_known_keys']} |")
    return "\n".join(lines)


def main() -> None:
    results = run()
    print(json.dumps(results, indent=2))
    print(table(results))


if __name__ == "__main__":
    main()
