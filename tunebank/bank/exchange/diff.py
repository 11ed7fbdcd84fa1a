"""Two banks compared policy by policy (``bank diff A B``): what a user reads before a merge.

Policies are matched by their key (soc_version, repo_key, info_digest). A key held by one bank
only is listed with its side; a key both hold is the same when the two policies are (the same
winning event, or equal knowledge and time), and otherwise differs in its ``policy`` (the
knowledge) or only in its ``time``. Nothing here touches a database.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tunebank.bank.projection import Policy, PolicyKey, info_digest

if TYPE_CHECKING:
    from tunebank.bank.formats.aoe_repo import TreeRead


@dataclass(frozen=True)
class PolicyChange:
    """A key both banks hold with different policies."""

    a: Policy
    b: Policy

    @property
    def what(self) -> str:
        """``policy`` when the knowledge differs, else ``time``."""
        return "policy" if self.a.knowledge != self.b.knowledge else "time"

    @property
    def faster(self) -> str:
        """Which side's entry is faster: ``a``, ``b`` or ``equal``; an entry without a time is
        slower than any with one (as the bank's own best-wins rule has it)."""
        if self.a.best_us == self.b.best_us:
            return "equal"
        return "a" if self.a.best_us < self.b.best_us else "b"


@dataclass(frozen=True)
class BankDiff:
    """Every difference between the policies of bank A and bank B."""

    a_keys: int
    b_keys: int
    only_a: tuple[Policy, ...]
    only_b: tuple[Policy, ...]
    changed: tuple[PolicyChange, ...]
    same: int

    @property
    def identical(self) -> bool:
        return not (self.only_a or self.only_b or self.changed)

    def total_line(self) -> str:
        """The one-line total."""
        n = self.counts()
        return (f"A {n['a_keys']} keys, B {n['b_keys']}: {n['only_a']} only in A, {n['only_b']} "
                f"only in B, {n['differ']} differ ({n['policy']} policy, {n['time']} time only; "
                f"faster in A {n['faster_a']}, in B {n['faster_b']}), {n['same']} the same")

    def entries(self) -> list[DiffEntry]:
        """Every difference, one entry a key: the keys only in A, then only in B, then those
        that differ, each part in the order the diff keeps (chip, operator type, key)."""
        return ([DiffEntry("only_a", p, None) for p in self.only_a]
                + [DiffEntry("only_b", None, p) for p in self.only_b]
                + [DiffEntry("differ", c.a, c.b) for c in self.changed])

    def counts(self) -> dict[str, int]:
        """The numbers the total line gives, by name (the ``--json`` document's counts)."""
        return {"a_keys": self.a_keys, "b_keys": self.b_keys, "only_a": len(self.only_a),
                "only_b": len(self.only_b), "differ": len(self.changed),
                "policy": sum(1 for c in self.changed if c.what == "policy"),
                "time": sum(1 for c in self.changed if c.what == "time"),
                "faster_a": sum(1 for c in self.changed if c.faster == "a"),
                "faster_b": sum(1 for c in self.changed if c.faster == "b"), "same": self.same}


@dataclass(frozen=True)
class DiffEntry:
    """One key's difference: ``change`` is ``only_a`` (``b`` is None), ``only_b`` (``a`` is
    None) or ``differ`` (both)."""

    change: str
    a: Policy | None
    b: Policy | None

    @property
    def either(self) -> Policy:
        """The side that names the key (A's when both hold it)."""
        found = self.a or self.b
        assert found is not None
        return found

    @property
    def what(self) -> str | None:
        """For a key that differs, ``policy`` or ``time`` (see :class:`PolicyChange`)."""
        return PolicyChange(self.a, self.b).what if self.a and self.b else None

    @property
    def faster(self) -> str | None:
        """For a key that differs, ``a``, ``b`` or ``equal`` (see :class:`PolicyChange`)."""
        return PolicyChange(self.a, self.b).faster if self.a and self.b else None

    def as_json(self, tasks: Mapping[str, Mapping[str, str | None]] | None = None) -> dict[str, Any]:
        """The entry's ``--json`` object; ``tasks`` names each side's tasks
        (``{"a": {task_id: name}}``). A side that lacks the key is null."""
        names = tasks or {}

        def side(policy: Policy | None, which: str) -> dict[str, Any] | None:
            if policy is None:
                return None
            return {"best_us": _time(policy.best_us), "knowledge": policy.knowledge,
                    "tune_mode": policy.tune_mode, "origin": policy.origin,
                    "task_id": policy.task_id,
                    "tuning_name": names.get(which, {}).get(policy.task_id),
                    "event_id": policy.event_id}

        key = self.either
        return {"change": self.change, "soc_version": key.soc_version, "repo_key": key.repo_key,
                "op_type": key.op_type, "info_digest": key.info_digest, "what": self.what,
                "faster": self.faster, "a": side(self.a, "a"), "b": side(self.b, "b")}


def diff_policies(a: Iterable[Policy], b: Iterable[Policy]) -> BankDiff:
    """Compare two banks' policies (each bank's current best per key)."""
    left: dict[PolicyKey, Policy] = {p.key: p for p in a}
    right: dict[PolicyKey, Policy] = {p.key: p for p in b}
    only_a = tuple(left[k] for k in sorted(left.keys() - right.keys(), key=_order(left)))
    only_b = tuple(right[k] for k in sorted(right.keys() - left.keys(), key=_order(right)))
    changed, same = [], 0
    for k in sorted(left.keys() & right.keys(), key=_order(left)):
        pa, pb = left[k], right[k]
        if pa.event_id == pb.event_id or (pa.knowledge == pb.knowledge and pa.best_us == pb.best_us):
            same += 1
        else:
            changed.append(PolicyChange(pa, pb))
    return BankDiff(len(left), len(right), only_a, only_b, tuple(changed), same)


def _order(policies: Mapping[PolicyKey, Policy]) -> Any:
    """Sort keys by chip, operator type, then key."""
    return lambda k: (k[0], policies[k].op_type or "", k[1], k[2])


def _time(value: float) -> float | None:
    return value if math.isfinite(value) else None


def tree_policies(tree: TreeRead, soc_version: str | None = None) -> list[Policy]:
    """An AOE bank tree's entries as the policies a bank that imported only it would hold, so
    two trees (or a tree and a bank) compare as two banks do. Each is named by its file and
    line (``task_id``) and the tree (``origin``)."""
    found = []
    for entry in tree.entries:
        if soc_version not in (None, entry.soc_version):
            continue
        kb, best = entry.entry, (entry.times or {}).get("best_us")
        place = f"{entry.file}:{kb.line}"
        found.append(Policy.of(entry.soc_version, entry.repo_key, info_digest(kb.info_dict),
                               kb.op_type, kb.info_dict, kb.knowledge,
                               math.inf if best is None else float(best), kb.line, place,
                               f"{tree.path}|{place}", tree.path, None, "aoe", None))
    return found
