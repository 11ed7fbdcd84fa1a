"""Verification and rebuilding: the bank checked, or re-derived, from its log alone."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from tunebank.bank.audit.chain import checked_in_workers, row_problems, workers_for
from tunebank.bank.errors import BankError, OutcomeRuleError
from tunebank.bank.events import GENESIS_HASH, HASH, PREV_HASH, SEQ, EventRow, check_row
from tunebank.bank.projection import PolicyKey, Projection
from tunebank.bank.store import Replay, reads
from tunebank.bank.store.base import EventStore
from tunebank.bank.store.rows import policy_row_of, row_fingerprint
from tunebank.bank.store.schema import statements as sql
from tunebank.bank.store.writes import bulk_job
from tunebank.bank.tasks import TaskView

if TYPE_CHECKING:
    from tunebank.bank.formats.jsonl import Anchor

T = TypeVar("T")

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
    anchor: str | None = None
    """What the anchored link (``--expect-head``) showed: held, and how many events follow it."""
    structure_unchecked: str | None = None
    """Why the database's own integrity check did not run (``None`` when it did)."""
    repair: str | None = None
    """How to repair what was found, when the database's structure is damaged."""

    @property
    def ok(self) -> bool:
        return not self.problems

    def flag(self, seq: int | None, problem: str) -> None:
        """Record a problem; ``seq`` (if any) may become the first bad seq."""
        self.problems.append(problem)
        if seq is not None and (self.first_bad_seq is None or seq < self.first_bad_seq):
            self.first_bad_seq = seq


def check_log(store: EventStore, report: VerifyReport,
              meanwhile: Callable[[ReplayedPolicies], T]) -> tuple[ReplayedPolicies, T]:
    """Walk the log: positions, ids, hash chain and outcome rules, and the database's own
    structure check; return the replayed (compact) projection and what ``meanwhile`` made of
    it. For a long log the ids, links and structure are checked in worker processes while this
    one folds it (:mod:`bank.audit.chain`) and then runs ``meanwhile`` on the fold, before it waits
    for them."""
    head = reads.head(store)[0]
    workers = workers_for(store.url, head)
    with ExitStack() as stack:
        in_workers = stack.enter_context(checked_in_workers(store.url, head, workers)) \
            if workers else None
        if in_workers is None:
            check_structure(store.structure_problems(), report)
        projection = _fold_log(store, report, check_links=in_workers is None)
        made = meanwhile(projection)
        if in_workers is not None:
            problems, structure = in_workers(store)
            for seq, problem in problems:
                report.flag(seq, problem)
            check_structure(structure, report)
    checkpoint, head = reads.checkpoint(store), report.head_seq
    if checkpoint > head:
        report.flag(head + 1, f"the log ends at seq {head} but the projections were made from seq "
                              f"{checkpoint}: events {head + 1}..{checkpoint} are gone from the log")
    elif checkpoint < head:
        report.flag(checkpoint + 1, f"events {checkpoint + 1}..{head} are in the log but the "
                                    "projections never saw them: tunebank did not append them")
    return projection, made


class ReplayedPolicies(Projection):
    """The compact projection verify folds the log into, which also keeps, for each key's
    winning event, the fingerprint of the policy row that event makes (:func:`row_fingerprint`),
    so the stored rows are checked without reading the winning events again."""

    def __init__(self) -> None:
        super().__init__(compact=True)
        self.expected: dict[PolicyKey, bytes | None] = {}
        """Fingerprint of each winner's policy row (``None``: its payload makes no row)."""

    def _won(self, key: PolicyKey, row: EventRow, payload: Mapping[str, Any], info_json: str) -> None:
        try:
            self.expected[key] = row_fingerprint(policy_row_of(row, payload, key[2], info_json))
        except (KeyError, TypeError, ValueError):
            self.expected[key] = None

    def _retired(self, key: PolicyKey) -> None:
        self.expected.pop(key, None)


def _fold_log(store: EventStore, report: VerifyReport, check_links: bool) -> ReplayedPolicies:
    """Fold every row, checking positions and ``prev_hash`` (and, with ``check_links``, each
    row's id and link)."""
    projection = ReplayedPolicies()
    expected_seq, prev, seq, events = 1, GENESIS_HASH, 0, 0
    apply = projection.apply
    for row in reads.event_rows(store):
        seq = row[SEQ]
        try:
            check_row(row)
            events += 1
            if seq != expected_seq:
                report.flag(min(seq, expected_seq),
                            f"seq {expected_seq}: missing (next seq found is {seq})")
            if check_links:
                for bad_seq, problem in row_problems(row):
                    report.flag(bad_seq, problem)
            if row[PREV_HASH] != prev:
                report.flag(seq, f"seq {seq}: prev_hash does not link to the event before it")
            apply(row)
        except OutcomeRuleError as exc:
            report.flag(seq, f"seq {seq}: breaks the outcome rules: {exc}")
        except (BankError, ValueError, TypeError) as exc:
            report.flag(seq, f"seq {seq}: cannot be read ({exc})")
        expected_seq, prev = seq + 1, row[HASH]
    report.events += events
    if events or seq:
        report.head_seq, report.head_hash = seq, prev
    return projection


def check_structure(found: tuple[list[str], str | None], report: VerifyReport) -> None:
    """Report the database's own check of its pages and indexes (what
    ``EventStore.structure_problems`` found): a damaged index hides events from the queries
    that use it (a key's history comes back empty) while a replay, which reads the table in seq
    order, still sees them all."""
    problems, unchecked = found
    report.structure_unchecked = unchecked
    for problem in problems:
        report.flag(None, f"database structure: {problem}")
    if problems:
        report.repair = (
            "`bank rebuild --reindex` rebuilds the indexes (REINDEX), which the log does not "
            "need, and derives the projections again" if all(_names_an_index(p) for p in problems)
            else "`bank rebuild --reindex` repairs damaged indexes; if verify still finds damage "
                 "after it, the tables themselves are damaged: restore the bank from a copy, or "
                 "make a new one from an events export")


def _names_an_index(problem: str) -> bool:
    return problem.startswith("index ") or " from index " in problem or " in index " in problem


def compare_tasks(replayed: dict[str, TaskView], stored: dict[str, TaskView],
                  report: VerifyReport) -> None:
    """List every difference between the replayed tasks and the stored ones."""
    _differences("task", replayed, stored, report)


@dataclass
class PolicyDifferences:
    """Where the stored policies and the replay part: the stored rows no winner makes (extra or
    stale), and the winners with no stored row that is theirs (missing or stale), by seq."""

    unmade: list[PolicyKey] = field(default_factory=list)
    unstored: list[int] = field(default_factory=list)


def compare_policies(store: EventStore, replayed: ReplayedPolicies,
                     report: VerifyReport) -> PolicyDifferences:
    """List every difference between the replayed winners and the stored policies: each stored
    policy must be the row its key's winning event makes, and every winner must be stored.
    The replay's ``winners`` are emptied as they are checked; what differs is returned, for a
    rebuild to rewrite only that.

    The stored policies are streamed and held to the fingerprints the fold kept, so memory
    follows the winners' keys and no event is read twice."""
    found = PolicyDifferences()
    listed = 0
    unseen = replayed.winners  # consumed: a copy would double the largest thing verify holds
    expected = replayed.expected
    for row in reads.policy_rows(store):
        key: PolicyKey = (row[0], row[1], row[2])  # sql.POLICY_KEY's columns
        ref = unseen.pop(key, None)
        if ref is None:
            problem = "in the bank but not derived from the log"
        elif ref[1] != row[sql.POLICY_SEQ] or expected.get(key) is None or \
                expected[key] != row_fingerprint(tuple(row)):
            problem = "stored value differs from the log's"
            found.unstored.append(ref[1])
        else:
            continue
        found.unmade.append(key)
        listed += 1
        _list(report, listed, f"policy {_label(key)}: {problem}")
    for key in sorted(unseen):
        found.unstored.append(unseen[key][1])
        listed += 1
        _list(report, listed, f"policy {_label(key)}: in the log but missing from the bank")
    return found


def _list(report: VerifyReport, count: int, problem: str) -> None:
    """Flag the first :data:`MAX_LISTED` differences, then say that more were not listed."""
    if count <= MAX_LISTED:
        report.flag(None, problem)
    elif count == MAX_LISTED + 1:
        report.flag(None, "policy: more differences not listed")


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


def check_anchor(store: EventStore, anchor: Anchor, report: VerifyReport) -> None:
    """Check that the log passes through ``anchor`` (a link recorded elsewhere, as
    ``bank verify --head`` printed it): a cut, or a forged event in place of a real one, moves
    every hash after it, and no one can make the recorded one again."""
    seq = reads.seq_of_hash(store, anchor.hash) if anchor.seq is None else anchor.seq
    if seq is None:  # a bare HASH: it may stand at any seq, and stands at none
        report.flag(None, f"--expect-head: no event of the log has hash {anchor.hash}: the log is "
                          "not the history that was anchored")
        return
    found = reads.hash_at(store, seq)
    if found != anchor.hash:
        what = "is not in the log" if found is None else f"has hash {found}"
        report.flag(seq, f"--expect-head: seq {seq} {what}, not the anchored {anchor.hash}: the log "
                         "is not the history that was anchored")
        return
    report.anchor = f"seq {seq} matches the anchor; {report.head_seq - seq} event(s) follow it"


def verify(store: EventStore, anchor: Anchor | None = None) -> VerifyReport:
    """Replay the whole log into a scratch projection, compare it with the stored one, and check
    the hash chain and every finished task's repo_summary invariants.

    Everything is read in one snapshot, so a bank that writers are appending to verifies as the
    state it was in when the check began.
    """
    return audit(store, anchor)[0]


def audit(store: EventStore, anchor: Anchor | None = None
          ) -> tuple[VerifyReport, dict[str, TaskView], PolicyDifferences]:
    """:func:`verify`, returning with the report the replayed tasks and where the stored
    policies differ from the replay (what a rebuild rewrites)."""
    report = VerifyReport()
    stored = VerifyReport()  # the projections' differences, listed after the log's problems

    def compare(replayed: ReplayedPolicies) -> PolicyDifferences:
        compare_tasks(replayed.tasks, {t.task_id: t for t in reads.tasks(store)}, stored)
        report.policies = len(replayed.winners)
        return compare_policies(store, replayed, stored)

    with store.snapshot(), bulk_job():
        replayed, differences = check_log(store, report, compare)
        if anchor is not None:
            check_anchor(store, anchor, report)
    report.problems.extend(stored.problems)
    for task in replayed.tasks.values():
        if task.finished:
            for problem in task.invariant_problems():
                report.flag(task.last_seq, problem)
    report.tasks = len(replayed.tasks)
    return report, replayed.tasks, differences


@dataclass
class RebuildReport:
    """What ``rebuild`` did: the seq the projections now reflect, and what it overrode."""

    head: int
    log_problems: list[str] = field(default_factory=list)
    """What verify found wrong with the log itself, adopted as it is (only with ``force``)."""
    replaced: list[str] = field(default_factory=list)
    """The stored projections the rebuild threw away or changed, as verify listed them."""
    reindexed: bool = False
    tasks: int = 0
    """How many tasks the rebuilt projection holds."""
    policies: int = 0
    """How many policies it holds (counted by the database: a Policy per key took 927 MB for a
    1,000,000-event bank's 185,340)."""


def _is_projection_problem(problem: str) -> bool:
    return problem.startswith(("task ", "policy ", "task:", "policy:"))


def rebuild(store: EventStore, *, force: bool = False, reindex: bool = False) -> RebuildReport:
    """Replace the stored projections with the ones derived from the log alone, after a full
    verify: a log that verify finds broken (a cut, an edit, events tunebank never appended, a
    damaged database) is not adopted unless ``force``. Verify and rebuild are one write
    transaction (writers wait until it is done), and the log is folded once: the tasks are
    written as verify replayed them, and the policies verify found to differ from the replay
    are rewritten from their winning events (the others are already exactly what the log makes).
    A forced rebuild of a broken log derives everything again from the log as it reads.

    Args:
        force: adopt the log as it is even where verify finds it broken.
        reindex: first rebuild the database's indexes (REINDEX), the repair for damaged ones.

    Raises:
        BankError: verify finds the log broken and ``force`` is not given (nothing is changed),
            or the log cannot be replayed.
    """
    if reindex:
        store.reindex()
    report = RebuildReport(0, reindexed=reindex)

    def replayed() -> Replay | None:  # run with the write lock held: the log cannot move
        verdict, tasks, differences = audit(store)
        report.log_problems = [p for p in verdict.problems if not _is_projection_problem(p)]
        report.replaced = [p for p in verdict.problems if _is_projection_problem(p)]
        if not report.log_problems:
            return Replay(tasks, differences.unmade, differences.unstored, verdict.head_seq)
        if not force:
            repair = f"; repair: {verdict.repair}" if verdict.repair else ""
            raise BankError(f"rebuild refused: the log fails verify ({len(report.log_problems)} "
                            f"problem(s); first: {report.log_problems[0]}); `bank verify` lists "
                            f"them, `bank rebuild --force` adopts the log as it is{repair}")
        return None  # forced: everything derived again from the log as it reads

    try:
        report.head = store.rebuild_projection(replayed)
    except ValueError as exc:
        raise BankError(f"the log cannot be read: {exc}") from exc
    with store.snapshot():
        report.tasks, report.policies = len(reads.tasks(store)), reads.policy_count(store)
    return report
