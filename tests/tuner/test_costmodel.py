"""Cost-model sanity: deterministic, vectorised, feasible defaults, chips ordered sensibly."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.tuner.conftest import BERT_SHAPE, MODELS
from tunebank.tuner.measure.costmodel import CostModel
from tunebank.tuner.measure.socs import SOCS, UnknownSocError, get_soc
from tunebank.tuner.measure.space import matmul_space, space_for
from tunebank.tuner.model.reading import load_model
from tunebank.tuner.model.workload import ConvWork, MatmulWork, VectorWork
from tunebank.tuner.plan.grouping import plan_tune
from tunebank.tuner.plan.selection import TuneSelection


def _random(space, n: int, seed: int = 0) -> np.ndarray:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(seed)
    return np.stack([rng.integers(0, len(k.values), n) for k in space.knobs], axis=1)


@pytest.mark.parametrize("soc", sorted(SOCS))
@pytest.mark.parametrize("model", ["resnet50.onnx", "vgg19.onnx", "inception_v1.onnx",
                                   "densenet121.onnx", "squeezenet.onnx"])
def test_default_policy_is_always_feasible(soc: str, model: str) -> None:
    spec = SOCS[soc]
    plan = plan_tune(load_model(MODELS / model), spec, TuneSelection())
    cost = CostModel(spec)
    for group in plan.groups:
        latency = cost.evaluate(group.work, group.space, np.array([group.space.default]))
        assert np.isfinite(latency).all() and latency[0] > 0, group.op_names


def test_batch_equals_one_by_one_and_is_deterministic() -> None:
    spec = SOCS["Ascend910B2"]
    plan = plan_tune(load_model(MODELS / "resnet50.onnx"), spec, TuneSelection())
    cost = CostModel(spec)
    for group in plan.groups[:6]:
        candidates = _random(group.space, 200)
        batch = cost.evaluate(group.work, group.space, candidates)
        single = np.array([cost.evaluate(group.work, group.space, row[None, :])[0]
                           for row in candidates])
        np.testing.assert_array_equal(batch, single)
        np.testing.assert_array_equal(batch, cost.evaluate(group.work, group.space, candidates))


def test_overflowing_candidates_are_infeasible() -> None:
    spec = SOCS["Ascend910B2"]
    work = MatmulWork(1, 1024, 1024, 1024, True)
    space = matmul_space(work, spec)
    knobs = space.decode(_random(space, 5000))
    latency = CostModel(spec).evaluate(work, space, _random(space, 5000))
    overflow = knobs["baseM"] * knobs["baseK"] * 2 * (1 + knobs["dbL0A"]) > spec.l0a_bytes
    cube = knobs["impl"] == 0
    assert (overflow & cube).any()
    assert np.isinf(latency[overflow & cube]).all()


@pytest.mark.parametrize(("small", "big"), [("Ascend310", "Ascend310P3"), ("Ascend310P3", "Ascend910A"),
                                            ("Ascend310", "Ascend910B2")])
def test_a_bigger_chip_is_never_slower_on_a_large_matmul(small: str, big: str) -> None:
    work = MatmulWork(1, 4096, 4096, 4096, True)
    best = {}
    for name in (small, big):
        spec = SOCS[name]
        space = matmul_space(work, spec)
        best[name] = CostModel(spec).evaluate(work, space, _random(space, 20000)).min()
    assert best[big] < best[small]


def test_bert_ops_are_all_tunable_types() -> None:
    from fixtures.make_bert import build

    model_path = Path(__file__).parent / "_bert_tmp.onnx"
    import onnx

    onnx.save(build(), str(model_path))
    try:
        plan = plan_tune(load_model(model_path, BERT_SHAPE), SOCS["Ascend310"], TuneSelection())
    finally:
        model_path.unlink()
    types = {g.op_type for g in plan.groups}
    assert {"MatMul", "Softmax", "LayerNormalization", "Erf", "Transpose", "Reshape"} <= types
    assert {op.op_type for op in plan.not_tunable} == {"ConstantOfShape"}


def test_unknown_soc_lists_the_known_ones() -> None:
    with pytest.raises(UnknownSocError,
                       match="known: Ascend310, Ascend310P3, Ascend910A, Ascend910B1, Ascend910B2, "):
        get_soc("Ascend999")


@pytest.mark.parametrize("soc", sorted(SOCS))
@pytest.mark.parametrize("work", [
    VectorWork(1, 2, 2, 1, 1, 0, 1),  # a single element
    VectorWork(10**7, 60 * 2 * 10**7, 2 * 10**7, 60, 1, 0, 1),  # a sum of 60 large tensors
    VectorWork(10**6, 2 * 10**6, 2 * 10**6, 1, 5, 50_000, 3),  # a softmax row larger than any tile
    ConvWork(1, 2048, 7, 7, 2048, 7, 7, 3, 3, 1, 1, False),  # weights far larger than L1
    ConvWork(32, 3, 224, 224, 64, 112, 112, 7, 7, 2, 1, False),  # a batch of 32 images
    MatmulWork(1, 1, 1, 1, False),
], ids=["one-element", "sum-of-60", "huge-row", "conv-2048", "conv-batch-32", "matmul-1x1x1"])
def test_extreme_workloads_have_a_feasible_default(soc: str, work: Any) -> None:
    spec = SOCS[soc]
    space = space_for(work, spec)
    latency = CostModel(spec).evaluate(work, space, np.array([space.default]))
    assert np.isfinite(latency[0]) and latency[0] > 0
