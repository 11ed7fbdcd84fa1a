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
        by_what = {what: sum(1 for c in self.changed if c.what == what) for what in ("policy", "time")}
        faster = {side: sum(1 for c in self.changed if c.faster == side) for side in ("a", "b")}
        return (f"A {self.a_keys} keys, B {self.b_keys}: {len(self.only_a)} only in A, "
                f"{len(self.only_b)} only in B, {len(self.changed)} differ ({by_what['policy']} "
                f"policy, {by_what['time']} time only; faster in A {faster['a']}, in B "
                f"{faster['b']}), {self.same} the same")

    def as_json(self, tasks: Mapping[str, Mapping[str, str | None]] | None = None) -> dict[str, Any]:
        """The ``--json`` object; ``tasks`` names each side's tasks (``{"a": {task_id: name}}``)."""
        names = tasks or {}

        def entry(policy: Policy, side: str) -> dict[str, Any]:
            return {"best_us": _time(policy.best_us), "knowledge": policy.knowledge,
                    "tune_mode": policy.tune_mode, "origin": policy.origin,
                    "task_id": policy.task_id, "tuning_name": names.get(side, {}).get(policy.task_id),
                    "event_id": policy.event_id}

        def key(policy: Policy) -> dict[str, Any]:
            return {"soc_version": policy.soc_version, "repo_key": policy.repo_key,
                    "op_type": policy.op_type, "info_digest": policy.info_digest}

        return {
            "a_keys": self.a_keys, "b_keys": self.b_keys, "same": self.same,
            "only_a": [{**key(p), "a": entry(p, "a")} for p in self.only_a],
            "only_b": [{**key(p), "b": entry(p, "b")} for p in self.only_b],
            "differ": [{**key(c.a), "what": c.what, "faster": c.faster, "a": entry(c.a, "a"),
                        "b": entry(c.b, "b")} for c in self.changed],
            "total": self.total_line(),
        }


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
