"""Subgraph tuning: the partition, the structure keys, the fusion cost model, and whole tunes
(first version, the same again, and a next version) on the bundled models."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import pytest
from typer.testing import CliRunner

from fixtures.model_versions import dilated
from tunebank.bank import Bank
from tunebank.cli.main import app
from tunebank.tuner.measure.costmodel import CostModel
from tunebank.tuner.measure.socs import get_soc
from tunebank.tuner.model.reading import load_model
from tunebank.tuner.plan.subgraphs import partition, plan_subgraphs

MODELS = Path(__file__).resolve().parents[2] / "fixtures" / "models"
RESNET, SQUEEZENET = MODELS / "resnet50.onnx", MODELS / "squeezenet.onnx"
SOC = "Ascend310P3"
runner = CliRunner()


def test_resnet50_is_cut_into_its_conv_chains() -> None:
    model = load_model(RESNET)
    subgraphs, left_out = partition(model)
    assert Counter(s.pattern for s in subgraphs) == {
        "Conv+BatchNormalization+Relu": 33, "Conv+BatchNormalization+Sum+Relu": 16,
        "Conv+BatchNormalization": 4}
    members = [op.index for s in subgraphs for op in s.ops]
    assert len(members) == len(set(members))  # no operator in two subgraphs
    assert len(members) + len(left_out) == len(model.operators)
    assert {op.op_type for op in left_out} - {"ConstantOfShape"} == {
        "MaxPool", "AveragePool", "Reshape", "Gemm", "Softmax"}
    for s in subgraphs:  # each step consumes the step before it, by the slot recorded
        for before, after, slot in zip(s.ops[:-1], s.ops[1:], s.slots, strict=True):
            assert after.inputs[slot].name == before.outputs[0].name


def test_a_shortcut_sum_reads_its_other_input_from_memory_when_fused() -> None:
    plan = plan_subgraphs(load_model(RESNET), get_soc(SOC))
    group = next(g for g in plan.groups if g.op_type == "Conv+BatchNormalization+Sum+Relu")
    bn, add, relu = group.work.steps  # type: ignore[union-attr]
    assert (bn.extra_streams, add.extra_streams, relu.extra_streams) == (0, 1, 0)
    assert add.extra_bytes == 2 * group.work.elements  # type: ignore[union-attr]
    assert group.work.default_fused == 1  # type: ignore[union-attr]  # BN: the compiler's


def test_keys_ignore_node_names_and_follow_shapes(tmp_path: Path) -> None:
    proto = onnx.load(str(SQUEEZENET))
    for n, node in enumerate(proto.graph.node):
        node.name = f"renamed_{n}"
    renamed = tmp_path / "renamed.onnx"
    onnx.save(proto, str(renamed))
    soc = get_soc(SOC)
    keys = [g.repo_key for g in plan_subgraphs(load_model(SQUEEZENET), soc).groups]
    assert [g.repo_key for g in plan_subgraphs(load_model(renamed), soc).groups] == keys
    for out in proto.graph.output:  # the file fixes batch 1 in its output; let inference decide
        out.type.tensor_type.ClearField("shape")
    onnx.save(proto, str(renamed))
    batch2 = plan_subgraphs(load_model(renamed, {"data_0": (2, 3, 224, 224)}), soc)
    assert not {g.repo_key for g in batch2.groups} & set(keys)


def test_fusion_cost_model() -> None:
    cost = CostModel(get_soc(SOC))
    plan = plan_subgraphs(load_model(RESNET), get_soc(SOC))
    group = next(g for g in plan.groups if g.op_type == "Conv+BatchNormalization+Sum+Relu")
    names = [k.name for k in group.space.knobs]

    def latency(**knobs: int) -> float:
        row = list(group.space.default)
        for name, value in knobs.items():
            row[names.index(name)] = group.space.knobs[names.index(name)].values.index(value)
        return float(cost.evaluate(group.work, group.space, np.array([row]))[0])

    unfused = latency(fuseDepth=0)
    steps = sum(cost.default_us(step.alone) for step in group.work.steps)  # type: ignore[union-attr]
    assert unfused == pytest.approx(cost.default_us(group.work.anchor) + steps)  # type: ignore[union-attr]
    assert latency(fuseDepth=3) < latency(fuseDepth=2) < latency(fuseDepth=1) < unfused
    assert latency(fuseDepth=3, doubleBuffer=1) < latency(fuseDepth=3, doubleBuffer=0)
    assert latency(fuseDepth=3, ubTile=65536, doubleBuffer=1) == float("inf")  # beyond the UB
    assert np.isfinite(latency(fuseDepth=0, ubTile=65536, doubleBuffer=1))  # nothing fused


def tune(db: Path, model: Path, *extra: str) -> dict[str, object]:
    result = runner.invoke(app, ["tune", str(model), "--soc-version", SOC, "--db", str(db),
                                 "--job-type", "subgraph", "--json", *extra])
    assert result.exit_code == 0, result.output
    report: dict[str, object] = json.loads(result.stdout)
    return report


def test_a_subgraph_tune_records_reuses_and_round_trips_its_result_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    db = tmp_path / "bank.db"
    first = tune(db, SQUEEZENET, "--budget", "32")
    summary = first["repo_summary"]
    assert isinstance(summary, dict) and summary["total_num"] == 18 and summary["repo_add_num"] > 0
    assert first["job_type"] == "sgat" and first["tuning_result_file"] is None
    result_file = Path(str(first["result_file"]))
    assert result_file.name.startswith("aoe_result_sgat_")
    sgat = json.loads(result_file.read_text())[1]["SGAT"]
    assert len(sgat["repo_modified_subgraphs"]["add_repo_subgraphs"]) == summary["repo_add_num"]
    with Bank.open(str(db)) as bank:
        task = bank.task(str(first["task_id"]))
        assert task.job_type == "sgat" and not task.invariant_problems()
        events = list(bank.events())
        assert all(len(e.event.payload["subgraphs"][0]) == 2 for e in events  # Conv+Relu
                   if e.event.kind == "add")
        assert bank.verify().ok

    plan = runner.invoke(app, ["plan", str(SQUEEZENET), "--soc-version", SOC, "--db", str(db),
                               "--job-type", "subgraph"])
    assert plan.exit_code == 0, plan.output  # every key: a policy, or searched without gain
    assert plan.stdout.splitlines()[-1] == "18 keys: 18 known to the bank, 0 to tune (0 subgraphs)"
    operators = runner.invoke(app, ["plan", str(SQUEEZENET), "--soc-version", SOC, "--db", str(db)])
    assert operators.stdout.splitlines()[-1] == "38 keys: 0 known to the bank, 38 to tune (66 operators)"

    again = tune(db, SQUEEZENET, "--budget", "32")
    assert again["measurements"] == 0
    assert again["repo_summary"] == {**summary, "repo_add_num": 0, "repo_hit_num": summary["repo_add_num"],
                                     "repo_reserved_num": summary["repo_add_num"]}

    other = tmp_path / "other.db"  # the result file, imported elsewhere, is known there
    imported = runner.invoke(app, ["import", str(result_file), "--db", str(other), "--soc-version", SOC])
    assert imported.exit_code == 0, imported.output
    there = tune(other, SQUEEZENET, "--budget", "32")
    assert there["repo_summary"]["repo_hit_num"] == summary["repo_add_num"]  # type: ignore[index]


def test_a_next_model_version_costs_only_its_new_subgraphs(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    v2 = tmp_path / "resnet50_v2.onnx"
    dilated(RESNET, v2)
    soc = get_soc(SOC)
    old = {g.repo_key for g in plan_subgraphs(load_model(RESNET), soc).groups}
    changed = [g for g in plan_subgraphs(load_model(v2), soc).groups if g.repo_key not in old]
    assert 0 < len(changed) < len(old)
    db = tmp_path / "bank.db"
    tune(db, RESNET, "--budget", "16")
    second = tune(db, v2, "--budget", "16")
    summary = second["repo_summary"]
    assert isinstance(summary, dict)
    assert summary["repo_add_num"] + summary["repo_unsatisfied_num"] - _known_no_gain(db, second) \
        == len(changed)
    assert all(g.space.size > 16 for g in changed)
    assert second["measurements"] == len(changed) * 16  # each: the budget, its default included


def _known_no_gain(db: Path, report: dict[str, object]) -> int:
    """Unsatisfied outcomes of the task that reused an earlier no-gain search (no measurement)."""
    with Bank.open(str(db)) as bank:
        return sum(1 for e in bank.events() if e.event.task_id == report["task_id"]
                   and e.event.kind == "unsatisfied" and e.event.payload["measurements"] == 0)


@pytest.mark.parametrize(("args", "message"), [
    (["--job-type", "3"], "--job-type: '3' is not subgraph (1, sgat) or operator (2, opat)"),
    (["--job-type", "1", "--output", "out"], "--output: applies to operator tuning only"),
])
def test_bad_subgraph_options_write_nothing(tmp_path: Path, args: list[str], message: str) -> None:
    db = tmp_path / "bank.db"
    result = runner.invoke(app, ["tune", str(SQUEEZENET), "--soc-version", SOC, "--db", str(db), *args])
    assert result.exit_code == 1
    assert result.stderr.strip().startswith(f"bank: error: {message}")
    assert not db.exists()


def test_the_operator_bank_tree_leaves_subgraph_policies_out(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    db = tmp_path / "bank.db"
    sub = tune(db, SQUEEZENET, "--budget", "8")
    ops = runner.invoke(app, ["tune", str(SQUEEZENET), "--soc-version", SOC, "--db", str(db),
                              "--budget", "8", "--json"])
    assert ops.exit_code == 0, ops.output
    result = runner.invoke(app, ["export", "--format", "aoe-repo", "--out", "tree", "--db", str(db)])
    assert result.exit_code == 0, result.output
    added = sub["repo_summary"]["repo_add_num"]  # type: ignore[index]
    assert f"{added} subgraph entries left out" in result.stdout
    names = [path.name for path in (tmp_path / "tree").rglob("*_runtime_kb.json")]
    assert names and not [name for name in names if "+" in name]
