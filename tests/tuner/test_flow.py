"""The incremental flow end to end, through the Python API."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest

from tests.tuner.conftest import BERT_SHAPE, MODELS
from tunebank.bank import Bank, BankError
from tunebank.tuner.flow import TuneReport, tune
from tunebank.tuner.measure.costmodel import CostModel
from tunebank.tuner.options import TuneOptions
from tunebank.tuner.plan.coverage import coverage

ROOT = Path(__file__).resolve().parents[2]
VGG = MODELS / "vgg19.onnx"


def run_tune(db: Path, work: Path, model: Path = VGG, **kwargs: Any) -> TuneReport:
    kwargs.setdefault("budget", 64)
    options = TuneOptions(model=model, soc_version=kwargs.pop("soc_version", "Ascend310"),
                          work_dir=work, **kwargs)
    report = tune(lambda: Bank.open(str(db), create=True), options)
    with Bank.open(str(db)) as bank:
        verdict = bank.verify()
    assert verdict.ok, verdict.problems
    summary = report.repo_summary
    assert summary["repo_hit_num"] == summary["repo_update_num"] + summary["repo_reserved_num"]
    assert summary["total_num"] == (summary["repo_add_num"] + summary["repo_hit_num"]
                                    + summary["repo_unsatisfied_num"])
    return report


def policies(db: Path) -> dict[tuple[str, str], tuple[float, dict[str, Any]]]:
    with Bank.open(str(db)) as bank:
        return {(p.repo_key, p.info_digest): (p.best_us, p.knowledge) for p in bank.policies()}


def test_second_run_is_all_hits_with_no_measurement(tmp_path: Path) -> None:
    first = run_tune(tmp_path / "b.db", tmp_path)
    assert first.repo_summary["repo_add_num"] + first.repo_summary["repo_unsatisfied_num"] == 26
    assert first.measurements > 0 and first.model_result_ms < first.model_baseline_ms
    second = run_tune(tmp_path / "b.db", tmp_path)
    added = first.repo_summary["repo_add_num"]
    assert second.repo_summary == {"repo_add_num": 0, "repo_hit_num": added,
                                   "repo_reserved_num": added, "repo_unsatisfied_num": 26 - added,
                                   "repo_update_num": 0, "total_num": 26}
    assert second.measurements == 0


def test_unsatisfied_keys_are_searched_again_and_known_keys_are_not(tmp_path: Path) -> None:
    run_tune(tmp_path / "b.db", tmp_path)
    with Bank.open(str(tmp_path / "b.db")) as bank:
        known = {p.repo_key for p in bank.policies()}
        second = run_tune(tmp_path / "b.db", tmp_path)
        outcome_keys = {s.event.repo_key for s in bank.history(op_type="Relu")
                        if s.event.task_id == second.task_id and s.event.payload["measurements"] > 0}
    assert not outcome_keys & known


def test_retune_never_makes_an_entry_slower(tmp_path: Path) -> None:
    run_tune(tmp_path / "b.db", tmp_path, mode="random", budget=8, seed=1)
    before = policies(tmp_path / "b.db")
    report = run_tune(tmp_path / "b.db", tmp_path, retune=True, budget=128, seed=2)
    after = policies(tmp_path / "b.db")
    assert report.repo_summary["repo_update_num"] > 0
    assert report.repo_summary["repo_hit_num"] == len(before)
    for key, (best, _) in before.items():
        assert after[key][0] <= best
    assert any(after[key][0] < best for key, (best, _) in before.items())


def test_next_model_version_measures_only_new_keys(tmp_path: Path,
                                                   bert_models: tuple[Path, Path]) -> None:
    from tunebank.tuner.measure.socs import get_soc
    from tunebank.tuner.model.reading import load_model
    from tunebank.tuner.plan.grouping import plan_tune
    from tunebank.tuner.plan.selection import TuneSelection

    v1, v2 = bert_models
    soc = get_soc("Ascend310")
    keys_v1 = {g.repo_key for g in plan_tune(load_model(v1, BERT_SHAPE), soc, TuneSelection()).groups}
    keys_v2 = {g.repo_key for g in plan_tune(load_model(v2, BERT_SHAPE), soc, TuneSelection()).groups}
    new = keys_v2 - keys_v1
    assert 0 < len(new) < len(keys_v2)
    run_tune(tmp_path / "b.db", tmp_path, model=v1, input_shapes=BERT_SHAPE)
    with Bank.open(str(tmp_path / "b.db")) as bank:
        with_policy = {p.repo_key for p in bank.policies()}
        planned = coverage(bank, v2, "Ascend310", BERT_SHAPE)
    assert {k.repo_key for k in planned if k.status == "new"} == new
    assert {k.repo_key for k in planned if k.status == "known"} == keys_v2 & with_policy
    second = run_tune(tmp_path / "b.db", tmp_path, model=v2, input_shapes=BERT_SHAPE)
    with Bank.open(str(tmp_path / "b.db")) as bank:
        measured = {s.event.repo_key for s in bank.events()
                    if s.event.task_id == second.task_id and s.event.payload.get("measurements")}
    assert measured == new
    summary = second.repo_summary
    assert summary["repo_hit_num"] == summary["repo_reserved_num"] == len(keys_v2 & with_policy)
    assert summary["total_num"] == len(keys_v2)


def test_a_new_input_shape_is_new_keys(tmp_path: Path, bert_models: tuple[Path, Path]) -> None:
    v1, _ = bert_models
    run_tune(tmp_path / "b.db", tmp_path, model=v1, input_shapes=BERT_SHAPE)
    second = run_tune(tmp_path / "b.db", tmp_path, model=v1,
                      input_shapes={"input_ids_embedded": (1, 32, 128)})
    assert second.measurements > 0
    assert second.repo_summary["repo_add_num"] + second.repo_summary["repo_unsatisfied_num"] > 0


def test_a_new_run_beside_an_unfinished_task_says_so(tmp_path: Path) -> None:
    with Bank.open(str(tmp_path / "b.db"), create=True) as bank:
        from tunebank.tuner.model.reading import load_model

        digest = load_model(VGG).sha256
        stale = bank.start_task("Ascend310", tuning_name="stale", model_hash=digest)
    report = run_tune(tmp_path / "b.db", tmp_path)
    assert report.notices == [f"task {stale} of this model is unfinished; --reload would have "
                              "continued it"]
    (tmp_path / "tuning_result.json").unlink()  # the first run's: not this test's matter
    assert run_tune(tmp_path / "c.db", tmp_path).notices == []


def test_reload_without_an_unfinished_task(tmp_path: Path) -> None:
    with pytest.raises(BankError, match="--reload: no unfinished task"):
        run_tune(tmp_path / "b.db", tmp_path, reload=True)


def test_tune_ops_file_and_tuning_config_narrow_the_tune(tmp_path: Path) -> None:
    ops = tmp_path / "ops.json"
    ops.write_text(json.dumps({"tune_ops_name": ["n0"], "tune_ops_type": ["Gemm"]}))
    report = run_tune(tmp_path / "a.db", tmp_path, tune_ops_file=ops)
    assert report.repo_summary["total_num"] == 4  # conv n0 and three distinct Gemm keys
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"ops_to_tune": ["n38"], "tiling_range": {"block_m": [16],
                                  "block_n": [64, 128], "block_k": [64]}, "impl_options": ["cube"]}))
    report = run_tune(tmp_path / "b.db", tmp_path, tuning_config=config, mode="exhaustive")
    assert report.repo_summary["total_num"] == 1
    with Bank.open(str(tmp_path / "b.db")) as bank:
        (policy,) = bank.policies()
    assert policy.knowledge["baseM"] == 16 and policy.knowledge["baseN"] in (64, 128)
    assert policy.knowledge["impl"] == "cube"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", r": not valid JSON \(line 1"),
        ('{"ops_to_tune": "n0"}', "ops_to_tune must be a list"),
        ('{"tiling_range": {"block_q": [16]}}', "tiling_range names no knob 'block_q'"),
        ('{"tiling_range": {"block_m": [-1]}}', "tiling_range.block_m must be"),
        ('{"impl_options": ["gpu"]}', "impl_options must be"),
        ('{"colour": 1}', "unknown field 'colour'"),
    ],
)
def test_bad_tuning_config_writes_nothing(tmp_path: Path, content: str, message: str) -> None:
    config = tmp_path / "config.json"
    config.write_text(content)
    with pytest.raises(BankError, match=message):
        tune(lambda: Bank.open(str(tmp_path / "b.db"), create=True),
             TuneOptions(model=VGG, soc_version="Ascend310", tuning_config=config, work_dir=tmp_path))
    assert not (tmp_path / "b.db").exists()


def test_load_tuning_result_reuses_policies_without_search(tmp_path: Path) -> None:
    run_tune(tmp_path / "a.db", tmp_path / "a")
    loaded = tmp_path / "a" / "tuning_result.json"
    report = run_tune(tmp_path / "b.db", tmp_path / "b", load_tuning_result=loaded)
    assert policies(tmp_path / "b.db") == policies(tmp_path / "a.db")
    added = report.repo_summary["repo_add_num"]
    assert report.measurements < 26 * 2 + (26 - added) * 64
    with Bank.open(str(tmp_path / "b.db")) as bank:
        reasons = {s.event.payload.get("reason") for s in bank.events() if s.event.kind == "add"}
    assert reasons == {"loaded"}


def test_a_failed_search_is_unsatisfied_and_fails_the_task(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    real = CostModel.evaluate

    def broken_softmax(self: CostModel, work: Any, space: Any, candidates: np.ndarray) -> Any:
        latency = real(self, work, space, candidates)
        if getattr(work, "row", 0) == 1000:  # the Softmax over 1000 classes
            latency = np.where(np.arange(len(latency)) >= 0, np.inf, latency)
        return latency

    monkeypatch.setattr(CostModel, "evaluate", broken_softmax)
    report = run_tune(tmp_path / "b.db", tmp_path)
    assert report.status == "failed" and report.failed_operators == ["n45"]
    content = json.loads(report.result_file.read_text())
    (opat,) = [part["OPAT"] for part in next(iter(content.values())) if "OPAT" in part]
    assert opat["opat_tuning_result"] == "tuning failed"
    assert opat["tuning_failed_operators"] == ["n45"]


def test_result_files_in_both_formats(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    report = run_tune(tmp_path / "b.db", tmp_path / "work", output=tmp_path / "out")
    assert report.result_file.parent == tmp_path / "work"
    assert report.result_file.name.startswith("aoe_result_opat_")
    content = json.loads(report.result_file.read_text())
    ((report_id, parts),) = content.items()
    assert report_id.startswith("report_")
    basic, opat = parts[0]["basic"], parts[1]["OPAT"]
    assert basic["tuning_name"] == "vgg19_Ascend310" and "tuning_time(s)" in basic
    assert opat["repo_summary"] == report.repo_summary
    modified = opat["repo_modified_operators"]
    assert {m["tune_performance"][next(iter(m["tune_performance"]))]["update_mode"]
            for m in modified} == {"add"}
    assert len(modified) >= report.repo_summary["repo_add_num"]  # shared keys list every op
    tuning = json.loads(report.tuning_result_file.read_text())["op_tuning"]
    assert {m["op_name"] for m in modified} <= set(tuning)
    model = onnx.load(str(report.output_model))
    tagged = [n for n in model.graph.node if any(p.key == "tunebank.policy" for p in n.metadata_props)]
    assert len(tagged) == len(tuning)
    v1 = run_tune(tmp_path / "c.db", tmp_path, result_format="v1")
    old = json.loads(v1.result_file.read_text())
    opat1 = old[1]["OPAT"]
    assert opat1["opat_tune_result"] == "tune success"
    assert len(opat1["repo_modified_operators"]["add_repo_operators"]) >= v1.repo_summary["repo_add_num"]
    assert opat1["model_baseline_performance(ms)"] == pytest.approx(v1.model_baseline_ms, abs=1e-6)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"soc_version": "Ascend999"}, "unknown soc_version 'Ascend999'"),
        ({"mode": "sa"}, "--mode: unknown mode"),
        ({"input_shapes": {"x": (1,)}}, "has no input 'x'"),
        ({"run_loop": 0}, "--run-loop"),
    ],
)
def test_bad_options_leave_no_bank(tmp_path: Path, options: dict[str, Any], message: str) -> None:
    kwargs: dict[str, Any] = {"soc_version": "Ascend310", **options}
    with pytest.raises(BankError, match=message):
        tune(lambda: Bank.open(str(tmp_path / "b.db"), create=True),
             TuneOptions(model=VGG, work_dir=tmp_path, **kwargs))
    assert not (tmp_path / "b.db").exists()
    assert not list(tmp_path.glob("aoe_result_*"))


def test_the_result_file_is_rewritten_as_keys_double_not_per_key(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import itertools
    import math

    import tunebank.tuner.flow as flow

    sizes: list[int] = []
    real = flow.write_json_atomic

    def counting(path: Path, content: Any, pretty: bool = False, exclusive: bool = False) -> None:
        real(path, content, pretty=pretty, exclusive=exclusive)
        if path.name.startswith("aoe_result_opat_"):
            ((_, parts),) = json.loads(path.read_text()).items()
            sizes.append(parts[1]["OPAT"]["repo_summary"]["total_num"])

    monkeypatch.setattr(flow, "write_json_atomic", counting)
    monkeypatch.setattr(flow, "RESULT_FILE_EVERY_S", math.inf)  # keys alone decide
    report = run_tune(tmp_path / "b.db", tmp_path, budget=4)
    keys = report.repo_summary["total_num"]
    assert keys > 8
    assert sizes[-1] == keys  # the final rewrite holds every key
    assert len(sizes) <= math.log2(keys) + 3  # one per doubling, and the last
    assert all(later >= 2 * earlier for earlier, later in itertools.pairwise(sizes[:-1]))


def test_reload_continues_an_unfinished_task_of_its_own_job_type(tmp_path: Path) -> None:
    from tunebank.tuner.model.reading import load_model

    db = tmp_path / "b.db"
    with Bank.open(str(db), create=True) as bank:
        stale = bank.start_task("Ascend310", tuning_name="subgraphs", model_hash=load_model(VGG).sha256,
                                job_type="sgat", search_mode="ga")
    with pytest.raises(BankError, match="--reload: no unfinished task"):  # not an operator task
        run_tune(db, tmp_path, reload=True)
    resumed = run_tune(db, tmp_path, reload=True, job_type="sgat")
    assert resumed.task_id == stale and resumed.job_type == "sgat" and resumed.resumed
    assert resumed.result_file.name.startswith("aoe_result_sgat_")
    assert resumed.repo_summary["total_num"] == 11  # VGG-19's subgraph keys


@pytest.mark.parametrize("mode", ["ga", "rl", "random"])
def test_the_budget_counts_every_distinct_candidate_the_default_included(mode: str,
                                                                         tmp_path: Path) -> None:
    """`--budget 16` measures 16 candidates of a key whose space is larger (the compiler's
    default, priced first, is one of them), and the whole space of a smaller one."""
    from tunebank.tuner.measure.socs import get_soc
    from tunebank.tuner.model.reading import load_model
    from tunebank.tuner.plan.grouping import plan_tune
    from tunebank.tuner.plan.selection import TuneSelection

    report = run_tune(tmp_path / "b.db", tmp_path, budget=16, mode=mode)
    plan = plan_tune(load_model(VGG), get_soc("Ascend310"), TuneSelection())
    assert report.measurements == sum(min(16, g.space.size) for g in plan.groups)


def test_reload_continues_on_the_task_s_core_count_or_says_which(tmp_path: Path) -> None:
    """Issue 42: a task started with --aicore-num 16 was planned on 16 cores; --reload without
    it would plan 24-core keys, so it says to give the count, and with it continues the task."""
    from tunebank.tuner.model.reading import load_model

    db = tmp_path / "b.db"
    with Bank.open(str(db), create=True) as bank:
        stale = bank.start_task("Ascend910_9382", tuning_name="part", job_type="opat",
                                model_hash=load_model(VGG).sha256, search_mode="ga",
                                extra={"seed": 0, "aicore_num": 16})
    with pytest.raises(BankError, match="runs on 16 AI cores; give --aicore-num 16 with --reload"):
        run_tune(db, tmp_path, reload=True, soc_version="Ascend910_9382")
    resumed = run_tune(db, tmp_path, reload=True, soc_version="Ascend910_9382", aicore_num=16,
                       given=frozenset({"aicore_num"}))
    assert resumed.task_id == stale and resumed.resumed
