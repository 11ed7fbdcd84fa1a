"""Verification and rebuilding: the bank checked, or re-derived, from its log alone."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bank.errors import BankError, OutcomeRuleError
from bank.events import GENESIS_HASH, StoredEvent, chain_hash, event_id_of
from bank.projection import Projection
from bank.store import EventStore

MAX_LISTED = 50  # problems listed per projection; a wholesale mismatch need not print thousands


@dataclass
class VerifyReport:
    """What ``verify`` found: counts, and every problem (empty when the bank is sound)."""

    events: int = 0
    tasks: int = 0
    policies: int = 0
    problems: list[str] = field(default_factory=list)
    first_bad_seq: int | None = None
    head_seq: int = 0
    head_hash: str = GENESIS_HASH
    """The last link of the chain as read (what a team anchors elsewhere)."""

    @property
    def ok(self) -> bool:
        return not self.problems

    def flag(self, seq: int | None, problem: str) -> None:
        """Record a problem; ``seq`` (if any) may become the first bad seq."""
        self.problems.append(problem)
        if seq is not None and (self.first_bad_seq is None or seq < self.first_bad_seq):
            self.first_bad_seq = seq


def check_log(store: EventStore, report: VerifyReport) -> Projection:
    """Walk the log: positions, ids, hash chain and outcome rules; return the replayed projection."""
    projection = Projection()
    expected_seq, prev = 1, GENESIS_HASH
    last_seq = 0
    try:
        for stored in store.iter_events():
            report.events += 1
            _check_link(stored, expected_seq, prev, report)
            try:
                projection.apply(stored)
            except OutcomeRuleError as exc:
                report.flag(stored.seq, f"seq {stored.seq}: breaks the outcome rules: {exc}")
            expected_seq, prev, last_seq = stored.seq + 1, stored.hash, stored.seq
            report.head_seq, report.head_hash = stored.seq, stored.hash
    except (BankError, ValueError) as exc:
        report.flag(last_seq + 1, f"event after seq {last_seq}: cannot be read ({exc})")
    checkpoint = store.checkpoint()
    if checkpoint != last_seq:
        report.flag(None, f"projections checkpoint is at seq {checkpoint}, the log ends at {last_seq}")
    return projection


def _check_link(stored: StoredEvent, expected_seq: int, prev: str, report: VerifyReport) -> None:
    seq = stored.seq
    if seq != expected_seq:
        report.flag(min(seq, expected_seq), f"seq {expected_seq}: missing (next seq found is {seq})")
    content = stored.event.content()
    if event_id_of(content) != stored.event_id:
        report.flag(seq, f"seq {seq}: event_id does not match the event's content")
    if stored.prev_hash != prev:
        report.flag(seq, f"seq {seq}: prev_hash does not link to the event before it")
    if chain_hash(stored.prev_hash, seq, stored.event_id, content) != stored.hash:
        report.flag(seq, f"seq {seq}: hash does not match the event's content")


def compare(replayed: Projection, stored: Projection, report: VerifyReport) -> None:
    """List every difference between the replayed projection and the stored one."""
    sections: tuple[tuple[str, dict[Any, Any], dict[Any, Any]], ...] = (
        ("policy", replayed.policies, stored.policies),
        ("task", replayed.tasks, stored.tasks),
        ("task key state", replayed.key_states, stored.key_states),
    )
    for name, want, have in sections:
        listed = 0
        for key in sorted(set(want) | set(have), key=str):
            if want.get(key) == have.get(key):
                continue
            listed += 1
            if listed > MAX_LISTED:
                report.flag(None, f"{name}: more differences not listed")
                break
            if key not in have:
                report.flag(None, f"{name} {_label(key)}: in the log but missing from the bank")
            elif key not in want:
                report.flag(None, f"{name} {_label(key)}: in the bank but not derived from the log")
            else:
                report.flag(None, f"{name} {_label(key)}: stored value differs from the log's")


def _label(key: object) -> str:
    return "/".join(key) if isinstance(key, tuple) else str(key)


def verify(store: EventStore) -> VerifyReport:
    """Replay the whole log into a scratch projection, compare it with the stored one, and check
    the hash chain and every finished task's repo_summary invariants.

    Everything is read in one snapshot, so a bank that writers are appending to verifies as the
    state it was in when the check began.
    """
    report = VerifyReport()
    with store.snapshot():
        replayed = check_log(store, report)
        compare(replayed, store.stored_projection(), report)
    for task in replayed.tasks.values():
        if task.finished:
            for problem in task.invariant_problems():
                report.flag(task.last_seq, problem)
    report.tasks = len(replayed.tasks)
    report.policies = len(replayed.policies)
    return report


def rebuild(store: EventStore) -> int:
    """Replay the log and replace the stored projections with the result; return the seq they
    reflect (events appended during the replay are folded in under the write lock).

    Raises:
        BankError: the log cannot be replayed (it breaks the outcome rules or cannot be read).
    """
    projection = Projection()
    last_seq = 0
    for stored in store.iter_events():
        projection.apply(stored)
        last_seq = stored.seq
    return store.replace_projection(projection, last_seq)
