"""What a model still needs tuned: each of its keys against the bank, without measuring."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tunebank.bank import Bank
from tunebank.tuner.measure.socs import get_soc, with_cores
from tunebank.tuner.model.reading import load_model
from tunebank.tuner.plan.grouping import KeyGroup, TunePlan, plan_tune
from tunebank.tuner.plan.selection import TuneSelection
from tunebank.tuner.plan.subgraphs import plan_subgraphs
from tunebank.tuner.search.transfer import Donors, Neighbour, borrowed_from


@dataclass(frozen=True)
class KeyCoverage:
    """One key of the model: what the bank knows of it."""

    repo_key: str
    op_type: str
    op_names: list[str]
    status: str  # known | no_gain | new
    best_us: float | None
    nearest: tuple[Neighbour, ...] = ()
    """For a new key, the known keys a tune would borrow from (nearest first)."""

    def as_json(self) -> dict[str, Any]:
        return {"repo_key": self.repo_key, "op_type": self.op_type, "op_names": self.op_names,
                "status": self.status, "best_us": self.best_us,
                "nearest": [n.as_json() for n in self.nearest]}


def coverage(bank: Bank, model: Path, soc_version: str,
             input_shapes: dict[str, tuple[int, ...]] | None = None,
             job_type: str = "opat", aicore_num: int | None = None) -> list[KeyCoverage]:
    """Every tunable key of ``model`` (its operators, or its subgraphs with ``job_type`` sgat):
    ``known`` (a policy), ``no_gain`` (searched before, nothing beat the default) or ``new`` (a
    plain `bank tune` would search it). Two queries in all."""
    plan = plan_of(model, soc_version, input_shapes, job_type, aicore_num)
    found = covered(bank, soc_version, plan.groups)
    if job_type != "opat" or not any(k.status == "new" for k in found):
        return found
    groups = {g.repo_key: g for g in plan.groups}
    donors = Donors.load(bank, {k.op_type for k in found if k.status == "new"}, soc_version)
    return [replace(k, nearest=borrowed_from(donors, groups[k.repo_key].info, soc_version, k.repo_key))
            if k.status == "new" else k for k in found]


def plan_of(model: Path, soc_version: str, input_shapes: dict[str, tuple[int, ...]] | None = None,
            job_type: str = "opat", aicore_num: int | None = None) -> TunePlan:
    """The keys a plain `bank tune` of ``model`` would take, operators' or subgraphs', on
    ``aicore_num`` of the chip's AI cores (all of them by default)."""
    loaded, soc = load_model(model, input_shapes), with_cores(get_soc(soc_version), aicore_num)
    return plan_subgraphs(loaded, soc) if job_type == "sgat" else plan_tune(loaded, soc, TuneSelection())


def covered(bank: Bank, soc_version: str, groups: Sequence[KeyGroup]) -> list[KeyCoverage]:
    """What the bank knows of each key group, in two queries."""
    asked = [(g.repo_key, g.info) for g in groups]
    known = bank.lookup(soc_version, asked)
    fruitless = bank.searched_without_gain(soc_version, [a for a in asked if a[0] not in known])
    result = []
    for group in groups:
        policy = known.get(group.repo_key)
        status = "known" if policy else "no_gain" if group.repo_key in fruitless else "new"
        best = policy.best_us if policy and policy.best_us != float("inf") else None
        result.append(KeyCoverage(group.repo_key, group.op_type, group.op_names, status, best))
    return result
