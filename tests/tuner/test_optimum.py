"""The exact optimum: the fit check prunes only what the cost model rejects, and the pruned
enumeration finds what pricing the whole space finds."""

from __future__ import annotations

import numpy as np
import pytest

from tests.tuner.conftest import BERT_SHAPE, MODELS
from tunebank.tuner.measure.costmodel import FIT_KNOBS, CostModel
from tunebank.tuner.measure.socs import SOCS
from tunebank.tuner.model.reading import load_model
from tunebank.tuner.plan.grouping import KeyGroup, plan_tune
from tunebank.tuner.plan.selection import TuneSelection
from tunebank.tuner.plan.subgraphs import plan_subgraphs
from tunebank.tuner.search.optimum import exact_optimum, fitting_candidates


def _groups(soc: str, bert: object) -> list[KeyGroup]:
    spec = SOCS[soc]
    resnet = load_model(MODELS / "resnet50.onnx")
    groups = list(plan_tune(resnet, spec, TuneSelection()).groups)
    groups += list(plan_tune(load_model(bert, BERT_SHAPE), spec, TuneSelection()).groups)  # type: ignore[arg-type]
    groups += list(plan_subgraphs(resnet, spec).groups)
    return groups


def _random(space, n: int, seed: int) -> np.ndarray:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(seed)
    return np.stack([rng.integers(0, len(k.values), n) for k in space.knobs], axis=1)


@pytest.mark.parametrize("soc", ["Ascend910B2", "Ascend310P3"])
def test_what_the_fit_check_rules_out_the_cost_model_rejects(
        soc: str, bert_models: tuple[object, object]) -> None:
    """On 4,000 random candidates of every key: a candidate ``fits`` rules out is ``inf``, and
    one it keeps is priced as it would be anyway (``fits`` reads only FIT_KNOBS)."""
    cost = CostModel(SOCS[soc])
    checked = ruled_out = 0
    for n, group in enumerate(_groups(soc, bert_models[0])):
        rows = _random(group.space, 4000, n)
        decoded = group.space.decode(rows)
        fits = cost.fits(group.work, {name: decoded[name] for name in FIT_KNOBS[group.space.family]})
        latency = cost.evaluate(group.work, group.space, rows)
        vector = decoded["impl"] == 1 if "impl" in decoded else np.zeros(len(rows), dtype=bool)
        assert np.isinf(latency[~fits & ~vector]).all(), group.op_names
        assert np.isfinite(latency[fits]).all() or group.space.family != "vector", group.op_names
        checked += len(rows)
        ruled_out += int((~fits & ~vector).sum())
    assert ruled_out > checked // 10  # the check prunes something real


def test_the_pruned_enumeration_finds_what_pricing_every_candidate_finds(
        bert_models: tuple[object, object]) -> None:
    """On spaces small enough to price whole (narrowed Cube spaces, every vector and subgraph
    space), the same optimum, and every candidate that fits is priced exactly once."""
    cost = CostModel(SOCS["Ascend910B2"])
    narrow = {"baseM": (16, 64, 256), "baseN": (32, 128), "baseK": (16, 64), "stepKb": (1, 2),
              "depthB1": (2, 4), "hoL0": (1, 4, 16), "kL0": (2, 4), "nL0": (1, 4), "hoL1": (1, 4),
              "kAL1": (1, 0), "kBL1": (2, 0), "nDim": (1, 2, 24)}
    compared = 0
    for group in _groups("Ascend910B2", bert_models[0]):
        space = group.space.restrict(narrow) if group.space.family in ("conv", "matmul") \
            else group.space
        if space.size > 400_000:
            continue
        dims = tuple(len(k.values) for k in space.knobs)
        every = np.stack(np.unravel_index(np.arange(space.size), dims), axis=1)
        latency = cost.evaluate(group.work, space, every)
        found = exact_optimum(cost, group.work, space)
        assert found.latency_us == float(latency.min()), group.op_names
        assert found.priced <= space.size
        rows = np.concatenate(list(fitting_candidates(cost, group.work, space)))
        assert len({row.tobytes() for row in rows}) == len(rows)  # none priced twice
        compared += 1
    assert compared > 40


def test_the_optimum_of_a_large_cube_space_beats_every_sample() -> None:
    spec = SOCS["Ascend310P3"]
    plan = plan_tune(load_model(MODELS / "resnet50.onnx"), spec, TuneSelection())
    cost = CostModel(spec)
    group = max((g for g in plan.groups if g.space.family == "matmul"), key=lambda g: g.space.size)
    found = exact_optimum(cost, group.work, group.space)
    sampled = cost.evaluate(group.work, group.space, _random(group.space, 200_000, 1))
    assert found.latency_us <= float(sampled.min())
    assert found.priced < group.space.size
