"""Transfer: the bank's nearest known keys seed a new key's search (issue 17)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fixtures.model_versions import dilated
from tests.tuner.conftest import BERT_SHAPE, MODELS
from tunebank.bank import Bank
from tunebank.tuner.flow import TuneReport, tune
from tunebank.tuner.measure.costmodel import CostModel
from tunebank.tuner.measure.socs import get_soc
from tunebank.tuner.model.reading import load_model
from tunebank.tuner.options import TuneOptions
from tunebank.tuner.plan.grouping import plan_tune
from tunebank.tuner.plan.selection import TuneSelection
from tunebank.tuner.search.transfer import distance, map_into, repair

RESNET = MODELS / "resnet50.onnx"
CONV = {"op_type": "Conv", "attrs": {"strides": [1, 1]},
        "inputs": [{"shape": [1, 64, 56, 56], "dtype": "float16"},
                   {"shape": [64, 64, 3, 3], "dtype": "float16"}],
        "outputs": [{"shape": [1, 64, 56, 56], "dtype": "float16"}]}


def _with(info: dict[str, Any], **changes: Any) -> dict[str, Any]:
    return {**json.loads(json.dumps(info)), **changes}


def test_distance_is_log2_shape_plus_penalties() -> None:
    assert distance(CONV, CONV) == 0.0
    wider = _with(CONV, outputs=[{"shape": [1, 128, 56, 56], "dtype": "float16"}])
    assert distance(CONV, wider) == 1.0  # one dimension twice as large
    assert distance(CONV, _with(CONV, op_type="ConvTranspose")) == 1.0
    assert distance(CONV, _with(CONV, attrs={"strides": [2, 2]})) == 0.5
    fp32 = _with(CONV, outputs=[{"shape": [1, 64, 56, 56], "dtype": "float32"}])
    assert distance(CONV, fp32) == 2.0
    assert distance(CONV, _with(CONV, op_type="MatMul")) is None  # another family
    relu = {"op_type": "Relu", "inputs": [{"shape": [8, 8], "dtype": "float16"}],
            "outputs": [{"shape": [8, 8], "dtype": "float16"}]}
    assert distance(relu, _with(relu, op_type="Sigmoid")) is None  # another vector operator
    assert distance(relu, {"op_type": "Relu", "op_name": "r"}) is None  # an imported AOE entry
    assert distance(CONV, _with(CONV, inputs=CONV["inputs"][:1])) is None  # another arity
    bias = [*CONV["inputs"], {"shape": [64], "dtype": "float16"}]
    assert distance(CONV, _with(CONV, inputs=bias)) == 0.5  # the tiling is the data's and weights'
    wider_bias = [*CONV["inputs"], {"shape": [4096], "dtype": "float32"}]
    assert distance(_with(CONV, inputs=bias), _with(CONV, inputs=wider_bias)) == 0.0


def _tensor(*shape: int) -> dict[str, Any]:
    return {"shape": list(shape), "dtype": "float16"}


def test_matmuls_of_one_computation_are_neighbours_across_types_and_ranks() -> None:
    """Issue 32: a batched MatMul is a Gemm per batch, and one over a shared B is one taller
    Gemm; compared tensor by tensor, their ranks kept BERT's matmuls from the CNNs' Gemms."""
    gemm = {"op_type": "Gemm", "attrs": {"transB": 1},
            "inputs": [_tensor(512, 128), _tensor(256, 128), _tensor(256)],
            "outputs": [_tensor(512, 256)]}
    shared = {"op_type": "MatMul", "attrs": {}, "inputs": [_tensor(4, 128, 128), _tensor(128, 256)],
              "outputs": [_tensor(4, 128, 256)]}
    assert distance(shared, gemm) == 1.0 + 0.5 + 0.5  # the type, transB, the bias: no size
    batched = {"op_type": "MatMul", "attrs": {},
               "inputs": [_tensor(4, 4, 128, 32), _tensor(4, 4, 32, 128)],
               "outputs": [_tensor(4, 4, 128, 128)]}
    plain = {"op_type": "MatMul", "attrs": {}, "inputs": [_tensor(128, 32), _tensor(32, 128)],
             "outputs": [_tensor(128, 128)]}
    assert distance(batched, plain) == 4.0  # 16 of them: log2 16 apart, the rest alike
    assert distance(batched, _with(gemm, inputs=[_tensor(128, 32), _tensor(128, 32)],
                                   outputs=[_tensor(128, 128)])) == 4.0 + 1.0 + 0.5  # and Gemm's
    assert distance(shared, CONV) is None  # a conv is another computation


def test_a_gemm_that_tiles_the_cube_is_borrowed_one_run_on_the_vector_unit_is_not() -> None:
    """Issue 32: BERT's MatMuls and a Gemm of one computation are neighbours; but a policy run
    on the vector unit says nothing of a Cube tiling (and the search prices the vector unit
    among its first candidates anyway), so only the Gemm that tiles the Cube is borrowed."""
    from tunebank.bank.projection import Policy
    from tunebank.tuner.search.transfer import Donors, borrowed_from

    matmul = {"op_type": "MatMul", "attrs": {}, "inputs": [_tensor(4, 128, 128), _tensor(128, 256)],
              "outputs": [_tensor(4, 128, 256)]}
    gemm = {"op_type": "Gemm", "attrs": {}, "inputs": [_tensor(512, 128), _tensor(128, 256)],
            "outputs": [_tensor(512, 256)]}
    wider = _with(gemm, inputs=[_tensor(512, 128), _tensor(128, 512)], outputs=[_tensor(512, 512)])

    def policy(key: str, info: dict[str, Any], impl: str) -> Policy:
        return Policy.of("Ascend910B2", key, key, "Gemm", info, {"baseM": 128, "impl": impl}, 1.0,
                         1, "t", key, "tune", "ga", "sim", "sim-2")

    cube, vector = policy("cube", wider, "cube"), policy("vector", gemm, "vector")
    assert distance(matmul, gemm) < distance(matmul, wider)  # the vector-run Gemm is nearer
    found = borrowed_from(Donors([cube, vector]), matmul, "Ascend910B2", "mine")
    assert [n.repo_key for n in found] == ["cube"]


def test_bert_after_a_bank_of_cnns_borrows_nothing(tmp_path: Path,
                                                   bert_models: tuple[Path, Path]) -> None:
    """The CNNs' Gemms are their classifiers, one row each: every one runs on the vector unit,
    so BERT's matmuls, whose only neighbours they are, borrow nothing and find what they find
    from an empty bank."""
    db, empty = tmp_path / "bank.db", tmp_path / "empty.db"
    _tune(db, MODELS / "squeezenet.onnx", tmp_path, budget=32)
    _tune(db, MODELS / "vgg19.onnx", tmp_path, budget=32)
    report = _tune(db, bert_models[0], tmp_path, budget=32, input_shapes=BERT_SHAPE)
    _tune(empty, bert_models[0], tmp_path, budget=32, input_shapes=BERT_SHAPE)
    with Bank.open(str(db)) as bank:
        gemms = [p for p in bank.policies() if p.op_type == "Gemm"]
        mine = {p.repo_key for p in bank.policies() if p.op_type == "MatMul"}
    assert gemms and all(p.knowledge["impl"] == "vector" for p in gemms)
    matmuls = [o for o in _outcomes(db, report.task_id) if o["key"] in mine]
    assert matmuls and not any("borrowed_from" in o for o in matmuls)
    with Bank.open(str(db)) as bank, Bank.open(str(empty)) as other:
        assert {(p.repo_key, p.best_us) for p in bank.policies() if p.repo_key in mine} \
            == {(p.repo_key, p.best_us) for p in other.policies() if p.repo_key in mine}


def test_a_conv_with_a_bias_borrows_from_convs_without(tmp_path: Path) -> None:
    """ResNet-50's convolutions have no bias, VGG-19's have one: each is the other's neighbour."""
    from tunebank.tuner.search.transfer import Donors

    db = tmp_path / "bank.db"
    tune(lambda: Bank.open(str(db), create=True),
         TuneOptions(model=RESNET, soc_version="Ascend910B2", work_dir=tmp_path, budget=8))
    with Bank.open(str(db)) as bank:
        donors = Donors(bank.policies())
    vgg = plan_tune(load_model(MODELS / "vgg19.onnx"), get_soc("Ascend910B2"), TuneSelection())
    convs = [g for g in vgg.groups if g.info["op_type"] == "Conv"]
    assert convs and all(len(g.info["inputs"]) == 3 for g in convs)
    assert all(donors.nearest(g.info, "Ascend910B2", g.repo_key) for g in convs)


def test_a_borrowed_policy_is_mapped_into_the_space_and_repaired_to_fit() -> None:
    spec = get_soc("Ascend310P3")
    plan = plan_tune(load_model(RESNET), spec, TuneSelection())
    cost = CostModel(spec)
    group = next(g for g in plan.groups if g.space.family == "conv")
    space = group.space
    fitting = space.knowledge(space.default)
    assert map_into(space, fitting, cost, group.work) == tuple(space.default)
    odd = {**fitting, "hoL0": 3, "woL0": 1000, "format": "NCHW", "unknown": 7}
    mapped = map_into(space, odd, cost, group.work)
    names = [k.name for k in space.knobs]
    assert space.knobs[names.index("woL0")].values[mapped[names.index("woL0")]] == max(
        space.knobs[names.index("woL0")].values)
    assert space.knobs[names.index("format")].label(mapped[names.index("format")]) == "NCHW"
    huge = [len(k.values) - 1 for k in space.knobs]  # every knob at its largest: does not fit
    assert np.isinf(cost.evaluate(group.work, space, np.array([huge]))[0])
    fixed = repair(space, huge, cost, group.work)
    assert np.isfinite(cost.evaluate(group.work, space, np.array([fixed]))[0])
    assert fixed != tuple(space.default)  # only as much was put back as the fit needed


def _tune(db: Path, model: Path, work: Path, **kwargs: Any) -> TuneReport:
    options = TuneOptions(model=model, soc_version=kwargs.pop("soc_version", "Ascend910B2"),
                          work_dir=work, **kwargs)
    report = tune(lambda: Bank.open(str(db), create=True), options)
    with Bank.open(str(db)) as bank:
        assert bank.verify().ok
    return report


def _outcomes(db: Path, task_id: str) -> list[dict[str, Any]]:
    with Bank.open(str(db)) as bank:
        return [{"kind": s.event.kind, "key": s.event.repo_key, **s.event.payload}
                for s in bank.events() if s.event.task_id == task_id
                and s.event.kind in ("add", "update", "unsatisfied")]


def _policies(db: Path) -> dict[str, tuple[float, Any]]:
    with Bank.open(str(db)) as bank:
        return {p.repo_key: (p.best_us, p.knowledge) for p in bank.policies()}


def test_an_empty_bank_tunes_alike_with_or_without_transfer(tmp_path: Path) -> None:
    on = _tune(tmp_path / "on.db", MODELS / "squeezenet.onnx", tmp_path, budget=48)
    off = _tune(tmp_path / "off.db", MODELS / "squeezenet.onnx", tmp_path, budget=48, transfer=False)
    assert on.measurements == off.measurements
    assert _policies(tmp_path / "on.db") == _policies(tmp_path / "off.db")
    assert not any("borrowed_from" in o for o in _outcomes(tmp_path / "on.db", on.task_id))


def test_a_next_version_borrows_from_the_first_and_costs_a_tenth(tmp_path: Path) -> None:
    v2 = tmp_path / "resnet50_v2.onnx"
    dilated(RESNET, v2)
    db, scratch = tmp_path / "bank.db", tmp_path / "scratch.db"
    first = _tune(db, RESNET, tmp_path, budget=128)
    _tune(scratch, RESNET, tmp_path, budget=128)
    second = _tune(db, v2, tmp_path, budget=128)
    alone = _tune(scratch, v2, tmp_path, budget=128, transfer=False)
    assert second.measurements <= first.measurements // 10 < alone.measurements
    assert second.model_result_ms <= alone.model_result_ms * 1.01
    searched = _outcomes(db, second.task_id)
    assert searched and all(o["borrowed_from"] for o in searched)
    with Bank.open(str(db)) as bank:
        first_keys = {p.repo_key for p in bank.policies() if p.task_id == first.task_id}
    for outcome in searched:
        assert {b["task_id"] for b in outcome["borrowed_from"]} == {first.task_id}
        assert all(b["repo_key"] in first_keys for b in outcome["borrowed_from"])
        assert outcome["measurements"] <= outcome["budget"]
    assert any(o["stopped_early"] for o in searched)


@pytest.mark.parametrize("mode", ["ga", "rl", "random"])
def test_transfer_is_deterministic_for_every_mode(mode: str, tmp_path: Path,
                                                  bert_models: tuple[Path, Path]) -> None:
    v1, v2 = bert_models
    runs = []
    for name in ("a", "b"):
        db = tmp_path / f"{name}.db"
        _tune(db, v1, tmp_path, budget=32, mode=mode, input_shapes=BERT_SHAPE)
        runs.append((_tune(db, v2, tmp_path, budget=32, mode=mode, input_shapes=BERT_SHAPE)
                     .measurements, _policies(db)))
    assert runs[0] == runs[1]


def test_the_nearest_keys_are_what_comparing_every_donor_finds(tmp_path: Path) -> None:
    """The grouped, bounded search for neighbours gives exactly the brute force's answer."""
    from tunebank.tuner.search.transfer import NEIGHBOURS, OTHER_CHIP, Donors

    db = tmp_path / "donors.db"
    for model, soc in (("vgg19.onnx", "Ascend910B2"), ("squeezenet.onnx", "Ascend910B2"),
                       ("vgg19.onnx", "Ascend310P3")):
        _tune(db, MODELS / model, tmp_path, budget=8, soc_version=soc)
    with Bank.open(str(db)) as bank:
        policies = bank.policies()
    donors = Donors(policies)
    plan = plan_tune(load_model(MODELS / "inception_v1.onnx"), get_soc("Ascend910B2"), TuneSelection())
    compared = 0
    for group in plan.groups:
        brute = []
        for p in policies:
            apart = distance(group.info, p.info_dict)
            if apart is None or not p.knowledge or (p.repo_key == group.repo_key
                                                    and p.soc_version == "Ascend910B2"):
                continue
            apart += 0.0 if p.soc_version == "Ascend910B2" else OTHER_CHIP
            brute.append((apart, p.soc_version != "Ascend910B2", p.repo_key, p.soc_version))
        expected = [(d, key, soc) for d, _, key, soc in sorted(brute)[:NEIGHBOURS]]
        found = donors.nearest(group.info, "Ascend910B2", group.repo_key)
        assert [(n.distance, n.repo_key, n.soc_version) for n in found] == expected, group.op_names
        compared += bool(found)
    assert compared > 20


@pytest.mark.parametrize("odd", [
    {"op_type": ["Conv"], "inputs": [{"shape": [1], "dtype": "float16"}]},
    {"op_type": "Conv", "inputs": 5},
    {"op_type": "Conv", "inputs": {"shape": [1]}},
    {"op_type": "Conv", "inputs": [{"shape": "1x3"}]},
    {"op_type": None},
    {"op_type": "Conv", "inputs": [{"shape": [1, 2], "dtype": ["float16"]}]},
])
def test_an_info_dict_from_a_hostile_file_is_no_neighbour(odd: dict[str, Any]) -> None:
    """Imported banks may hold any JSON object as an info_dict: it is never a neighbour, and
    comparing with it raises nothing."""
    from tunebank.tuner.search.transfer import Donors

    assert distance(CONV, odd) is None and distance(odd, CONV) is None
    assert Donors([]).nearest(odd, "Ascend310", "k") == []


def test_another_chip_s_policies_are_not_borrowed(tmp_path: Path) -> None:
    """Issue 32: ResNet-50's keys on Ascend310P3 seeded from its Ascend910B2 policies ended
    worse than from the default; a bank holding only another chip's keys tunes as an empty
    one does."""
    db, empty = tmp_path / "bank.db", tmp_path / "empty.db"
    _tune(db, MODELS / "squeezenet.onnx", tmp_path, budget=32)
    moved = _tune(db, MODELS / "squeezenet.onnx", tmp_path, budget=32, soc_version="Ascend310P3")
    alone = _tune(empty, MODELS / "squeezenet.onnx", tmp_path, budget=32, soc_version="Ascend310P3")
    assert moved.measurements == alone.measurements
    assert not any("borrowed_from" in o for o in _outcomes(db, moved.task_id))
    with Bank.open(str(db)) as bank, Bank.open(str(empty)) as other:
        assert {(p.repo_key, p.best_us) for p in bank.policies() if p.soc_version == "Ascend310P3"} \
            == {(p.repo_key, p.best_us) for p in other.policies()}


def test_a_frugal_search_starts_from_the_default_guided_by_its_nearest_neighbour() -> None:
    """The borrowed policy is priced, but the descent probes from the default, the knobs the
    neighbour set otherwise first."""
    from tunebank.tuner.measure.space import conv_space
    from tunebank.tuner.model.workload import ConvWork
    from tunebank.tuner.search.strategies import Evaluator, make_search

    spec = get_soc("Ascend910B2")
    work = ConvWork(1, 256, 28, 28, 256, 28, 28, 3, 3, 1, 1, False)
    space, cost = conv_space(work, spec), CostModel(spec)
    neighbour = list(space.default)
    for name, value in (("nL0", 1), ("hoL1", 3)):  # indices: a neighbour's own choice
        neighbour[[k.name for k in space.knobs].index(name)] = value
    guide = map_into(space, dict(zip([k.name for k in space.knobs],
                                     [k.values[i] for k, i in zip(space.knobs, neighbour, strict=True)],
                                     strict=True)),
                     cost, work)
    differs = {i for i, (a, b) in enumerate(zip(guide, space.default, strict=True)) if a != b}
    assert differs
    for seed in range(4):
        measured: list[tuple[int, ...]] = []

        def latency(rows: np.ndarray, measured: list[tuple[int, ...]] = measured) -> np.ndarray:
            measured.extend(tuple(int(v) for v in row) for row in rows)
            return cost.evaluate(work, space, rows)

        evaluate = Evaluator(latency, fits=cost.fit_check(work, space))
        evaluate(np.array([space.default]))
        make_search("ga", 32, np.random.default_rng(seed)).search(space, evaluate, borrowed=[guide])
        assert measured[:2] == [tuple(space.default), guide]
        first_probe = {i for i, (a, b) in enumerate(zip(measured[2], space.default, strict=True)) if a != b}
        assert first_probe & differs, seed  # a move from the default, on a knob the guide set


def test_vgg19_s_next_version_costs_under_8_percent_at_the_default_budget(tmp_path: Path) -> None:
    """Issue 32: the costliest bundled model to re-tune (10.2% of its first tune before: a
    search started from a neighbour swept whole knobs, and waited 64 measurements for a gain)."""
    vgg = MODELS / "vgg19.onnx"
    v2 = tmp_path / "vgg19_v2.onnx"
    dilated(vgg, v2)
    first = _tune(tmp_path / "bank.db", vgg, tmp_path)
    second = _tune(tmp_path / "bank.db", v2, tmp_path)
    alone = _tune(tmp_path / "alone.db", v2, tmp_path, transfer=False)
    assert second.measurements <= 0.08 * first.measurements
    assert second.model_result_ms <= alone.model_result_ms
