"""Merging banks: the union of their events by event_id, and a report of what it changed.

Events keep their event_id, recorded_at and origin and get new local seqs and hashes. The
policy projection's best-wins rule (strictly faster, then the smaller event_id) makes the result
independent of merge order: merging is idempotent, commutative and associative in what the
projection holds (tests/bank/test_merge.py checks all three on random banks).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from bank.api import Bank
from bank.projection import Policy, policy_of


@dataclass(frozen=True)
class Conflict:
    """Two banks held different policies for one operator; the faster one won."""

    soc_version: str
    repo_key: str
    op_type: str | None
    winner: Policy
    loser: Policy

    def as_json(self) -> dict[str, Any]:
        def side(p: Policy) -> dict[str, Any]:
            return {"best_us": p.best_us if math.isfinite(p.best_us) else None,
                    "origin": p.origin, "task_id": p.task_id, "event_id": p.event_id}
        return {"soc_version": self.soc_version, "repo_key": self.repo_key,
                "op_type": self.op_type, "winner": side(self.winner), "loser": side(self.loser)}


@dataclass
class MergeReport:
    """What merging one source did."""

    source: str
    added: int = 0
    present: int = 0
    policies_changed: int = 0
    conflicts: list[Conflict] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {"source": self.source, "events_added": self.added,
                "events_already_present": self.present,
                "policies_changed": self.policies_changed,
                "conflicts": [c.as_json() for c in self.conflicts]}


def merge_into(target: Bank, source: Bank) -> MergeReport:
    """Append every event of ``source`` that ``target`` lacks, in one transaction, streamed.

    Raises:
        OutcomeRuleError: the source's log breaks the outcome rules in the target (nothing is
            written).
    """
    before = target.store.policy_refs()
    theirs = source.store.policy_refs()
    result = target.append_stream(lambda: (stored.event for stored in source.events()))
    after = target.store.policy_refs()
    report = MergeReport(source=str(source.location.path or source.location.url),
                         added=result.appended, present=result.skipped)
    report.policies_changed = sum(1 for key, event_id in after.items() if before.get(key) != event_id)
    contested = [key for key, mine in before.items() if theirs.get(key) not in (None, mine)]
    if not contested:
        return report
    others = source.store.policies_by_key(contested)
    winners = target.store.policies_by_key(contested)
    for key in contested:
        # the target's policy before the merge: still there if it won, else rebuilt from its event
        other, winner = others[key], winners[key]
        mine = winner if winner.event_id == before[key] else _policy_at(target, before[key])
        if mine is None or other.knowledge == mine.knowledge:
            continue
        loser = other if winner.event_id == mine.event_id else mine
        report.conflicts.append(Conflict(key[0], key[1], mine.op_type, winner, loser))
    return report


def _policy_at(bank: Bank, event_id: str) -> Policy | None:
    """The policy the add or update ``event_id`` offered (from the log)."""
    for stored in bank.store.events_by_id([event_id]):
        return policy_of(stored)
    return None
