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

    def entries(self) -> list[VersionEntry]:
        """Every difference, one entry each: V2's new keys (with what the bank knows of each),
        V1's gone keys, then each operator whose key changed."""
        status = self.bank_status or {}
        return ([VersionEntry("new", g.op_type, None, g.repo_key, g.op_names, status.get(g.repo_key))
                 for g in self.new]
                + [VersionEntry("gone", g.op_type, g.repo_key, None, g.op_names, None)
                   for g in self.gone]
                + [VersionEntry("changed_key", c.op_type, c.v1_key, c.v2_key, [c.op_name], None)
                   for c in self.changed])

    def counts(self) -> dict[str, int]:
        """The numbers the total line gives, by name (the ``--json`` document's counts)."""
        return {"v1_keys": len(self.v1.groups), "v2_keys": len(self.v2.groups),
                "kept": len(self.kept), "new": len(self.new), "gone": len(self.gone),
                "changed_key": len(self.changed), "to_search": len(self.to_search)}


@dataclass(frozen=True)
class VersionEntry:
    """One difference between two versions: a ``new`` key (``v1_key`` None), a ``gone`` one
    (``v2_key`` None), or an operator whose key changed (``changed_key``, one op_name)."""

    change: str
    op_type: str
    v1_key: str | None
    v2_key: str | None
    op_names: list[str]
    coverage: KeyCoverage | None  # a new key's standing in the bank, when one was asked

    def as_json(self) -> dict[str, Any]:
        """The entry's ``--json`` object; ``bank`` and ``best_us`` only where a bank was asked."""
        out: dict[str, Any] = {"change": self.change, "op_type": self.op_type,
                               "v1_repo_key": self.v1_key, "v2_repo_key": self.v2_key,
                               "op_names": self.op_names}
        if self.coverage is not None:
            out.update(bank=self.coverage.status, best_us=self.coverage.best_us)
        return out


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
