"""Verification and rebuilding: the bank checked, or re-derived, from its log alone."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bank.errors import BankError, OutcomeRuleError
from bank.events import GENESIS_HASH, StoredEvent
from bank.projection import PolicyKey, PolicyRef, Projection, TaskView, policy_of
from bank.rows import values_to_logged
from bank.store import EventStore, bulk_job

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
    """Walk the log: positions, ids, hash chain and outcome rules; return the replayed (compact)
    projection."""
    projection = Projection(compact=True)
    expected_seq, prev = 1, GENESIS_HASH
    last_seq = 0
    for row in store.iter_event_rows():
        seq = row[0]
        try:
            stored = values_to_logged(row)
            report.events += 1
            _check_link(stored, expected_seq, prev, report)
            projection.apply(stored)
        except OutcomeRuleError as exc:
            report.flag(seq, f"seq {seq}: breaks the outcome rules: {exc}")
        except (BankError, ValueError) as exc:
            report.flag(seq, f"seq {seq}: cannot be read ({exc})")
        expected_seq, prev, last_seq = seq + 1, row[12], seq
        report.head_seq, report.head_hash = seq, row[12]
    checkpoint = store.checkpoint()
    if checkpoint != last_seq:
        report.flag(None, f"projections checkpoint is at seq {checkpoint}, the log ends at {last_seq}")
    return projection


def _check_link(stored: StoredEvent, expected_seq: int, prev: str, report: VerifyReport) -> None:
    seq = stored.seq
    if seq != expected_seq:
        report.flag(min(seq, expected_seq), f"seq {expected_seq}: missing (next seq found is {seq})")
    event = stored.event
    if event.event_id != stored.event_id:
        report.flag(seq, f"seq {seq}: event_id does not match the event's content")
    if stored.prev_hash != prev:
        report.flag(seq, f"seq {seq}: prev_hash does not link to the event before it")
    if event.link_hash(stored.prev_hash, seq, stored.event_id) != stored.hash:
        report.flag(seq, f"seq {seq}: hash does not match the event's content")


def compare_tasks(replayed: dict[str, TaskView], stored: dict[str, TaskView],
                  report: VerifyReport) -> None:
    """List every difference between the replayed tasks and the stored ones."""
    _differences("task", replayed, stored, report)


def compare_policies(store: EventStore, winners: dict[PolicyKey, PolicyRef],
                     report: VerifyReport) -> None:
    """List every difference between the replayed winners and the stored policies: each stored
    policy must be the one its key's winning event makes, and every winner must be stored.
    ``winners`` is emptied as it is checked.

    The stored policies are streamed with their events, so memory follows the winners' keys."""
    listed = 0
    unseen = winners  # consumed: a copy would double the largest thing verify holds
    for policy, event in store.iter_stored_policies():
        ref = unseen.pop(policy.key, None)
        if ref is None:
            problem = "in the bank but not derived from the log"
        elif ref[2] != policy.seq or event is None or policy_of(event) != policy:
            problem = "stored value differs from the log's"
        else:
            continue
        listed += 1
        if listed > MAX_LISTED:
            report.flag(None, "policy: more differences not listed")
            return
        report.flag(None, f"policy {_label(policy.key)}: {problem}")
    for key in sorted(unseen):
        listed += 1
        if listed > MAX_LISTED:
            report.flag(None, "policy: more differences not listed")
            return
        report.flag(None, f"policy {_label(key)}: in the log but missing from the bank")


def _differences(name: str, want: dict[Any, Any], have: dict[Any, Any],
                 report: VerifyReport) -> None:
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
    with store.snapshot(), bulk_job():
        replayed = check_log(store, report)
        compare_tasks(replayed.tasks, {t.task_id: t for t in store.tasks()}, report)
        report.policies = len(replayed.winners)
        compare_policies(store, replayed.winners, report)
    for task in replayed.tasks.values():
        if task.finished:
            for problem in task.invariant_problems():
                report.flag(task.last_seq, problem)
    report.tasks = len(replayed.tasks)
    return report


def rebuild(store: EventStore) -> int:
    """Replace the stored projections with the ones derived from the log alone; return the seq
    they reflect. It runs in one write transaction: writers wait until it is done.

    Raises:
        BankError: the log cannot be replayed (it breaks the outcome rules or cannot be read).
    """
    try:
        return store.rebuild_projection()
    except ValueError as exc:
        raise BankError(f"the log cannot be read: {exc}") from exc
