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

from tunebank.bank.api import Bank
from tunebank.bank.projection import Policy, PolicyKey, policy_of
from tunebank.bank.store import reads

_PAGE = 2000


@dataclass(frozen=True)
class PolicySide:
    """One side of a conflict: what the report says of a policy (not the policy itself, so a
    merge of two large banks that disagree on every key holds summaries, not policies)."""

    best_us: float
    origin: str
    task_id: str
    event_id: str

    @classmethod
    def of(cls, policy: Policy) -> PolicySide:
        return cls(policy.best_us, policy.origin, policy.task_id, policy.event_id)

    def as_json(self) -> dict[str, Any]:
        return {"best_us": self.best_us if math.isfinite(self.best_us) else None,
                "origin": self.origin, "task_id": self.task_id, "event_id": self.event_id}


@dataclass(frozen=True)
class Conflict:
    """Two banks held different knowledge for one operator; the rule of
    :func:`bank.projection.standing` chose one: the faster, or of two without a time (AOE's
    own entries) the newer, or of equals the smaller event id (``rule`` says which)."""

    soc_version: str
    repo_key: str
    op_type: str | None
    winner: PolicySide
    loser: PolicySide
    rule: str = "faster"

    def as_json(self) -> dict[str, Any]:
        return {"soc_version": self.soc_version, "repo_key": self.repo_key,
                "op_type": self.op_type, "rule": self.rule, "winner": self.winner.as_json(),
                "loser": self.loser.as_json()}


def rule_of(winner: Policy, loser: Policy) -> str:
    """Which part of the rule decided between two entries: faster, newer or tie."""
    if winner.best_us != loser.best_us:
        return "faster"
    if not math.isfinite(winner.best_us) and winner.recorded_at != loser.recorded_at:
        return "newer"
    return "tie"


@dataclass
class MergeReport:
    """What merging one source did in this run, key by key (a source policy whose event the
    target already held, from an earlier merge, is not counted again): ``new_keys`` the target
    did not hold,
    ``faster`` ones whose source policy was strictly faster, ``newer`` ones both held without a
    time (AOE's own entries) with other knowledge, where the source's entry was recorded later
    and so holds now (``untimed_switched`` counts every key without a time whose record the
    source's replaced, the same knowledge or not), and
    ``ties``, keys both held with different measured records of the same time. The best-wins
    rule breaks a tie by the smaller event_id, which holds task ids and times, so which record
    stands (``ties_switched`` counts the source's wins) varies between two runs of the same
    tunes; the counts do not, and no tie makes a key faster or slower. ``withdrawn`` counts the
    keys the target held that the source's withdrawals (``bank import --mirror``) retired."""

    source: str
    added: int = 0
    present: int = 0
    new_keys: int = 0
    faster: int = 0
    newer: int = 0
    untimed_switched: int = 0
    ties: int = 0
    ties_switched: int = 0
    withdrawn: int = 0
    conflicts: list[Conflict] = field(default_factory=list)

    @property
    def policies_changed(self) -> int:
        """Every key whose winning event changed: new, faster, newer, or a tie the source won."""
        return self.new_keys + self.faster + self.untimed_switched + self.ties_switched

    def as_json(self) -> dict[str, Any]:
        return {"source": self.source, "events_added": self.added,
                "events_already_present": self.present,
                "policies_new": self.new_keys, "policies_faster": self.faster,
                "policies_newer": self.newer, "untimed_switched": self.untimed_switched,
                "policies_tied": self.ties,
                "ties_switched": self.ties_switched,
                "policies_changed": self.policies_changed,
                "policies_withdrawn": self.withdrawn,
                "conflicts": [c.as_json() for c in self.conflicts]}

    def count_changes(self, before: Refs, theirs: Refs, after: Refs) -> None:
        """Sort the keys by what the merge did to them (see the class docstring)."""
        self.withdrawn += sum(1 for key in before if key not in after)
        for key, (event_id, best_us) in after.items():
            was, other = before.get(key), theirs.get(key)
            if was is None:
                self.new_keys += 1
            elif best_us < was[1]:
                self.faster += 1
            elif not math.isfinite(best_us) and other is not None and other[0] != was[0]:
                self.untimed_switched += event_id != was[0]  # untimed: the later recorded holds
            elif other is not None and other[0] != was[0] and other[1] == was[1]:
                self.ties += 1
                self.ties_switched += event_id != was[0]


Refs = dict[PolicyKey, tuple[str, float]]
"""Each key's winning event_id and best time, as :func:`bank.store.reads.policy_refs` reads them."""


def merge_into(target: Bank, source: Bank) -> MergeReport:
    """Append every event of ``source`` that ``target`` lacks, in one transaction, streamed.

    Raises:
        OutcomeRuleError: the source's log breaks the outcome rules in the target (nothing is
            written).
    """
    before = reads.policy_refs(target.store)
    theirs = reads.policy_refs(source.store)
    # only what this run brings: a source policy whose event the target holds already (an
    # earlier merge of the same banks) was weighed then, and is no tie or conflict of this run
    known = reads.present_ids(target.store, [event_id for event_id, _ in theirs.values()])
    theirs = {key: ref for key, ref in theirs.items() if ref[0] not in known}
    result = target.append_stream(source.event_rows)  # ids and links made again here
    after = reads.policy_refs(target.store)
    report = MergeReport(source=source.location.shown,
                         added=result.appended, present=result.skipped)
    report.count_changes(before, theirs, after)
    contested = [key for key, (mine, _) in before.items() if theirs.get(key, (mine,))[0] != mine]
    if not contested:
        return report
    for start in range(0, len(contested), _PAGE):  # a page of keys at a time: memory stays flat
        part = contested[start:start + _PAGE]
        others = reads.policies_by_key(source.store, part)
        winners = reads.policies_by_key(target.store, part)
        # the target's policy before the merge: still there if it won, else made again from its
        # event, read for the whole page in one query
        lost = sorted({before[key][0] for key in part if winners[key].event_id != before[key][0]})
        formerly = {stored.event_id: policy_of(stored.row(), stored.event.payload)
                    for stored in reads.events_by_id(target.store, lost)}
        for key in part:
            other, winner = others[key], winners[key]
            mine = winner if winner.event_id == before[key][0] else formerly.get(before[key][0])
            if mine is None or other.knowledge == mine.knowledge:
                continue
            loser = other if winner.event_id == mine.event_id else mine
            rule = rule_of(winner, loser)
            report.newer += rule == "newer" and winner.event_id == other.event_id
            report.conflicts.append(Conflict(key[0], key[1], mine.op_type, PolicySide.of(winner),
                                             PolicySide.of(loser), rule))
    return report
