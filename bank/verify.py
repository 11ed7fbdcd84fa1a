"""Verification and rebuilding: the bank checked, or re-derived, from its log alone."""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any

from bank.chain import checked_in_workers, row_problems, workers_for
from bank.errors import BankError, OutcomeRuleError
from bank.events import GENESIS_HASH, StoredEvent
from bank.projection import PolicyKey, PolicyRef, Projection, policy_of
from bank.rows import policy_values, values_to_logged
from bank.store import EventStore, bulk_job
from bank.tasks import TaskView

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
    projection. A long log's ids and links are checked in worker processes while this one
    folds it (:mod:`bank.chain`)."""
    head = store.head()[0]
    workers = workers_for(store.url, head)
    with ExitStack() as stack:
        in_workers = stack.enter_context(checked_in_workers(store.url, head, workers)) \
            if workers else None
        projection = _fold_log(store, report, check_links=in_workers is None)
        if in_workers is not None:
            for seq, problem in in_workers():
                report.flag(seq, problem)
    checkpoint = store.checkpoint()
    if checkpoint != report.head_seq:
        report.flag(None, f"projections checkpoint is at seq {checkpoint}, the log ends at "
                          f"{report.head_seq}")
    return projection


def _fold_log(store: EventStore, report: VerifyReport, check_links: bool) -> Projection:
    """Fold every row, checking positions and ``prev_hash`` (and, with ``check_links``, each
    row's id and link)."""
    projection = Projection(compact=True)
    expected_seq, prev = 1, GENESIS_HASH
    for row in store.iter_event_rows():
        seq = row[0]
        try:
            stored = values_to_logged(row)
            report.events += 1
            if seq != expected_seq:
                report.flag(min(seq, expected_seq),
                            f"seq {expected_seq}: missing (next seq found is {seq})")
            if check_links:
                for bad_seq, problem in row_problems(row):
                    report.flag(bad_seq, problem)
            if row[11] != prev:
                report.flag(seq, f"seq {seq}: prev_hash does not link to the event before it")
            projection.apply(stored)
        except OutcomeRuleError as exc:
            report.flag(seq, f"seq {seq}: breaks the outcome rules: {exc}")
        except (BankError, ValueError, TypeError) as exc:
            report.flag(seq, f"seq {seq}: cannot be read ({exc})")
        expected_seq, prev = seq + 1, row[12]
        report.head_seq, report.head_hash = seq, row[12]
    return projection


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
    for row, event in store.iter_stored_policy_rows():
        key: PolicyKey = (row[0], row[1], row[2])
        ref = unseen.pop(key, None)
        if ref is None:
            problem = "in the bank but not derived from the log"
        elif ref[2] != row[7] or not _makes(event, row):
            problem = "stored value differs from the log's"
        else:
            continue
        listed += 1
        if listed > MAX_LISTED:
            report.flag(None, "policy: more differences not listed")
            return
        report.flag(None, f"policy {_label(key)}: {problem}")
    for key in sorted(unseen):
        listed += 1
        if listed > MAX_LISTED:
            report.flag(None, "policy: more differences not listed")
            return
        report.flag(None, f"policy {_label(key)}: in the log but missing from the bank")


def _makes(event: StoredEvent | None, row: tuple[Any, ...]) -> bool:
    """Whether ``event`` makes exactly the stored policy ``row``, column for column (the JSON
    columns compared as the canonical text the bank writes)."""
    if event is None:
        return False
    try:
        return policy_values(policy_of(event)) == row
    except (BankError, ValueError, KeyError, TypeError):
        return False


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
