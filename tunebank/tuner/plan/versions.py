"""Two versions of a model compared key by key (``bank diff --model V1 --model V2``): what a
re-tune of the new version will cost.

Both versions are planned as a tune would plan them (operator or subgraph keys). A key of V2
that V1 lacks is ``new``; one V1 had and V2 lost is ``gone``; the rest are ``kept``. An operator
present in both under the same node name but with another key is ``changed``: its shapes or
attributes moved. With a bank, each new key also says what the bank knows of it, so the total
tells how many keys a plain `bank tune` of V2 would search.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tunebank.bank import Bank
from tunebank.tuner.plan.coverage import KeyCoverage, covered
from tunebank.tuner.plan.grouping import KeyGroup, TunePlan


@dataclass(frozen=True)
class RenamedKey:
    """An operator (or a subgraph, by its first operator) whose key differs between versions."""

    op_name: str
    op_type: str
    v1_key: str
    v2_key: str


@dataclass(frozen=True)
class ModelDiff:
    """The keys of two versions of a model, and what the bank knows of V2's new ones."""

    v1: TunePlan
    v2: TunePlan
    new: tuple[KeyGroup, ...]
    gone: tuple[KeyGroup, ...]
    kept: tuple[KeyGroup, ...]
    changed: tuple[RenamedKey, ...]
    bank_status: dict[str, KeyCoverage] | None  # new key -> what the bank knows, with a bank

    @property
    def to_search(self) -> list[KeyGroup]:
        """The new keys a plain tune of V2 would search: all of them without a bank."""
        if self.bank_status is None:
            return list(self.new)
        return [g for g in self.new if self.bank_status[g.repo_key].status == "new"]

    def total_line(self) -> str:
        """The one-line total."""
        line = (f"V1 {len(self.v1.groups)} keys, V2 {len(self.v2.groups)}: {len(self.kept)} kept, "
                f"{len(self.gone)} gone, {len(self.new)} new ({len(self.changed)} operators changed key)")
        search = self.to_search
        ops = sum(len(g.op_names) for g in search)
        if self.bank_status is not None:
            known = len(self.new) - len(search)
            line += f"; the bank knows {known} of the new keys"
        return line + f"; a tune of V2 searches {len(search)} keys ({ops} operators)"

    def as_json(self) -> dict[str, Any]:
        """The ``--json`` object."""
        def group(g: KeyGroup) -> dict[str, Any]:
            out: dict[str, Any] = {"repo_key": g.repo_key, "op_type": g.op_type, "op_names": g.op_names}
            if self.bank_status is not None and g.repo_key in self.bank_status:
                status = self.bank_status[g.repo_key]
                out.update(bank=status.status, best_us=status.best_us)
            return out

        return {"v1_keys": len(self.v1.groups), "v2_keys": len(self.v2.groups),
                "kept": len(self.kept), "new": [group(g) for g in self.new],
                "gone": [group(g) for g in self.gone],
                "changed": [vars(c) for c in self.changed],
                "to_search": len(self.to_search), "total": self.total_line()}


def diff_models(v1: TunePlan, v2: TunePlan, bank: Bank | None = None,
                soc_version: str | None = None) -> ModelDiff:
    """Compare two versions' plans; with ``bank`` (and the chip), look V2's new keys up in it."""
    keys1 = {g.repo_key: g for g in v1.groups}
    keys2 = {g.repo_key: g for g in v2.groups}
    new = tuple(g for g in v2.groups if g.repo_key not in keys1)
    gone = tuple(g for g in v1.groups if g.repo_key not in keys2)
    kept = tuple(g for g in v2.groups if g.repo_key in keys1)
    key_of1 = {name: g for g in v1.groups for name in g.op_names}
    changed = tuple(RenamedKey(name, g.op_type, key_of1[name].repo_key, g.repo_key)
                    for g in new for name in g.op_names if name in key_of1)
    status = None
    if bank is not None and soc_version is not None:
        status = {c.repo_key: c for c in covered(bank, soc_version, new)}
    return ModelDiff(v1, v2, new, gone, kept, changed, status)
