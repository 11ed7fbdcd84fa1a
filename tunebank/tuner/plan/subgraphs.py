"""Subgraph tuning (AOE's SGAT, ``--job-type subgraph`` or 1): a model cut into fusable
subgraphs, each keyed by its structure and searched for how much of it to fuse and how.

A subgraph is an anchor (a convolution, a matrix multiply, or an element-wise operator) and the
chain of element-wise operators after it, each the only consumer of the one before, with the
same shape and no other input from inside the chain. Such a chain can run as one kernel: the
anchor's output stays in the unified buffer while the steps after it are applied, instead of
going to global memory and back once per operator. Operators in no chain of two or more are
left out (listed, not counted), as AOE leaves them to operator tuning.

A subgraph's key is the xxh64 of its canonical structure: each operator's type, input and
output shapes, dtypes and kernel attributes, which of its inputs are constants, and the edges
of the chain by position. Node names are not in it, so a renamed model keeps its keys.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tunebank.bank.canonical import xxh64_key
from tunebank.tuner.measure.socs import SocSpec
from tunebank.tuner.measure.space import space_for
from tunebank.tuner.model.keys import info_dict, on_cores
from tunebank.tuner.model.reading import Model, Operator
from tunebank.tuner.model.workload import (
    CONV_OPS,
    ELEMENTWISE_OPS,
    MATMUL_OPS,
    FusedStep,
    SubgraphWork,
    VectorWork,
    workload_of,
)
from tunebank.tuner.plan.grouping import KeyGroup, TunePlan, constant_tensors, part_of

FUSABLE_OPS = frozenset(ELEMENTWISE_OPS)
"""Operator types that can follow an anchor inside its kernel."""

ANCHOR_OPS = FUSABLE_OPS | MATMUL_OPS | CONV_OPS
"""Operator types a subgraph can start with."""

COMPILER_FUSED = frozenset({"BatchNormalization", "Relu"})
"""The steps the graph compiler fuses into an anchor by its own patterns (the default), as long
as they come first in the chain."""


@dataclass(frozen=True)
class Subgraph:
    """One fusable chain of a model: its operators in order, and for each operator after the
    first the input slot by which the chain's tensor enters it."""

    ops: tuple[Operator, ...]
    slots: tuple[int, ...]

    @property
    def pattern(self) -> str:
        """The operator types in order, e.g. ``Conv+BatchNormalization+Relu``."""
        return "+".join(op.op_type for op in self.ops)


def partition(model: Model) -> tuple[list[Subgraph], list[Operator]]:
    """The model's fusable subgraphs in graph order, and the operators in none of them."""
    consts = constant_tensors(model)
    consumers: dict[str, list[tuple[Operator, int]]] = {}
    for op in model.operators:
        for slot, tensor in enumerate(op.inputs):
            consumers.setdefault(tensor.name, []).append((op, slot))
    graph_outputs = {out.name for out in model.proto.graph.output}
    taken: set[int] = set()
    subgraphs, left_out = [], []
    for op in model.operators:
        if op.index in taken:
            continue
        chain, slots = [op], []
        if op.op_type in ANCHOR_OPS and workload_of(op, consts) is not None:
            inside = {t.name for t in op.outputs}
            while (step := _next_step(chain[-1], consumers, graph_outputs, inside, taken)) is not None:
                chain.append(step[0])
                slots.append(step[1])
                inside.update(t.name for t in step[0].outputs)
        if len(chain) < 2:
            left_out.append(op)
            continue
        taken.update(member.index for member in chain)
        subgraphs.append(Subgraph(tuple(chain), tuple(slots)))
    return subgraphs, left_out


def _next_step(last: Operator, consumers: dict[str, list[tuple[Operator, int]]],
               graph_outputs: set[str], inside: set[str], taken: set[int]) -> tuple[Operator, int] | None:
    """The operator that can extend a chain ending at ``last``, and its input slot, if any."""
    if len(last.outputs) != 1:
        return None
    tensor = last.outputs[0]
    users = consumers.get(tensor.name, [])
    if tensor.name in graph_outputs or len(users) != 1:
        return None
    op, slot = users[0]
    if op.op_type not in FUSABLE_OPS or op.index in taken or len(op.outputs) != 1 \
            or op.outputs[0].shape != tensor.shape:
        return None
    if any(t.name in inside for i, t in enumerate(op.inputs) if i != slot):
        return None  # the chain's tensor would come in twice (a diamond): not a chain
    return op, slot


def structure(subgraph: Subgraph, consts: frozenset[str]) -> dict[str, Any]:
    """The canonical structure a subgraph's key is taken over (no node names)."""
    return {
        "job_type": "sgat",
        "ops": [{**info_dict(op), "const_inputs": [i for i, t in enumerate(op.inputs) if t.name in consts]}
                for op in subgraph.ops],
        "edges": [[i, i + 1, slot] for i, slot in enumerate(subgraph.slots)],
    }


def subgraph_key(subgraph: Subgraph, consts: frozenset[str], cores: int | None = None) -> str:
    """The subgraph's repo_key: xxh64 of its structure (on ``cores`` AI cores where that is part
    of the chip), in decimal (as AOE writes SGAT keys)."""
    return xxh64_key(on_cores(structure(subgraph, consts), cores))


def subgraph_info(key: str) -> dict[str, Any]:
    """The info_dict of a subgraph policy: its key, as an imported SGAT result file gives it
    (bank/exchange/imports.py), so a subgraph learnt from a file is known to a tune and the other way."""
    return {"job_type": "sgat", "repo_key": key}


def subgraph_work(subgraph: Subgraph, consts: frozenset[str]) -> SubgraphWork:
    """What the cost model needs of a subgraph: its anchor's workload and each step's."""
    anchor = workload_of(subgraph.ops[0], consts)
    if anchor is None or isinstance(anchor, SubgraphWork):
        raise ValueError(f"{subgraph.ops[0].name}: an anchor needs a workload")
    steps = []
    for op, slot in zip(subgraph.ops[1:], subgraph.slots, strict=True):
        alone = workload_of(op, consts)
        assert isinstance(alone, VectorWork)  # every fusable type is a vector operator
        extra = [t for i, t in enumerate(op.inputs) if i != slot and t.name not in consts]
        steps.append(FusedStep(op.op_type, alone, float(ELEMENTWISE_OPS[op.op_type]),
                               2 * sum(_numel(t.shape) for t in extra), len(extra)))
    default = 0
    while default < len(steps) and steps[default].op_type in COMPILER_FUSED:
        default += 1
    return SubgraphWork(anchor, tuple(steps), _numel(subgraph.ops[0].outputs[0].shape), default)


def plan_subgraphs(model: Model, soc: SocSpec) -> TunePlan:
    """Every subgraph key of the model with its space, in graph order; the operators in no
    subgraph are the plan's ``not_tunable``."""
    consts = constant_tensors(model)
    subgraphs, left_out = partition(model)
    grouped: dict[str, list[Subgraph]] = {}
    cores = part_of(soc)
    for subgraph in subgraphs:
        grouped.setdefault(subgraph_key(subgraph, consts, cores), []).append(subgraph)
    groups = []
    for key, same in grouped.items():
        work = subgraph_work(same[0], consts)
        groups.append(KeyGroup(key, subgraph_info(key), same[0].pattern,
                               tuple(s.ops[0] for s in same), work, space_for(work, soc),
                               members=tuple(tuple(op.name for op in s.ops) for s in same)))
    return TunePlan(tuple(groups), tuple(left_out), ())


def _numel(shape: Sequence[int]) -> int:
    return math.prod(shape) if shape else 1
