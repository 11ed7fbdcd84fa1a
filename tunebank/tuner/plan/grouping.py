"""From a model to the work of one tune: operators grouped by key, each with its search space."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tunebank.tuner.measure.socs import SocSpec, full_cores
from tunebank.tuner.measure.space import ALL_KNOBS, SearchSpace, space_for
from tunebank.tuner.model.keys import info_dict, on_cores, repo_key
from tunebank.tuner.model.reading import Model, Operator
from tunebank.tuner.model.workload import Workload, workload_of
from tunebank.tuner.plan.selection import ConfigError, TuneSelection

CONSTANT_OPS = {"Constant", "ConstantOfShape"}


@dataclass(frozen=True)
class KeyGroup:
    """The operators of a model that share one key: tuned once, outcome shared."""

    repo_key: str
    info: dict[str, Any]
    op_type: str
    ops: tuple[Operator, ...]
    work: Workload
    space: SearchSpace
    members: tuple[tuple[str, ...], ...] = ()
    """For a subgraph key, the operator names of each subgraph that has it (``ops`` holds their
    first operators); empty for an operator key."""

    @property
    def op_names(self) -> list[str]:
        return [op.name for op in self.ops]


@dataclass(frozen=True)
class TunePlan:
    """Every key to tune, in graph order, and the operators with no search space."""

    groups: tuple[KeyGroup, ...]
    not_tunable: tuple[Operator, ...]
    not_selected: tuple[Operator, ...]


def constant_tensors(model: Model) -> frozenset[str]:
    """Names of tensors known before run time: initializers and outputs of constant nodes."""
    graph = model.proto.graph
    names = {init.name for init in graph.initializer}
    names.update(out for node in graph.node if node.op_type in CONSTANT_OPS for out in node.output)
    return frozenset(names)


def part_of(soc: SocSpec) -> int | None:
    """The AI cores ``soc`` runs on where that is part of its chip (``--aicore-num``), else
    ``None``: what goes into the keys (:func:`~tuner.model.keys.on_cores`)."""
    return soc.ai_cores if soc.ai_cores != full_cores(soc) else None


def plan_tune(model: Model, soc: SocSpec, selection: TuneSelection) -> TunePlan:
    """Group the model's tunable operators by key and build each key's (narrowed) space.

    Raises:
        ConfigError: the selection names operators or knobs the model does not have.
    """
    consts = constant_tensors(model)
    grouped: dict[str, list[Operator]] = {}
    meta: dict[str, tuple[dict[str, Any], Workload]] = {}
    not_tunable, not_selected = [], []
    for op in model.operators:
        work = workload_of(op, consts)
        if work is None or op.op_type in CONSTANT_OPS:
            not_tunable.append(op)
            continue
        if not selection.selects(op.name, op.op_type):
            not_selected.append(op)
            continue
        info = on_cores(info_dict(op), part_of(soc))
        key = repo_key(info)
        grouped.setdefault(key, []).append(op)
        meta.setdefault(key, (info, work))
    _check_selection(model, selection)
    groups = []
    for key, ops in grouped.items():
        info, work = meta[key]
        space = space_for(work, soc)
        allowed = {k: v for k, v in selection.knob_values.items()
                   if k in {knob.name for knob in space.knobs}}
        groups.append(KeyGroup(key, info, ops[0].op_type, tuple(ops), work,
                               space.restrict(allowed) if allowed else space))
    return TunePlan(tuple(groups), tuple(not_tunable), tuple(not_selected))


def _check_selection(model: Model, selection: TuneSelection) -> None:
    names = {op.name for op in model.operators}
    missing = sorted(selection.op_names - names)
    if missing and not (selection.op_names & names) and not selection.op_types:
        raise ConfigError(f"no operator of {model.path} is named {missing[0]!r}")
    unknown = sorted(set(selection.knob_values) - ALL_KNOBS)
    if unknown:
        raise ConfigError(f"--tuning-config: tiling_range names no knob {unknown[0]!r} "
                          f"(knobs: {', '.join(sorted(ALL_KNOBS))}; aliases block_m/n/k)")


def groups_by_name(groups: Sequence[KeyGroup]) -> Mapping[str, KeyGroup]:
    """Each operator name's group."""
    return {name: group for group in groups for name in group.op_names}
