"""The projections and the outcome rules, as one pure fold over the log's rows.

The same :class:`Projection` serves three callers: the append path (loaded with just the rows a
batch touches, so the rules are checked against the bank's real state), ``rebuild`` and ``verify``
(started empty and fed the whole log). Each event comes in as the row the log stores
(:data:`~bank.events.EventRow`), with its payload already decoded where the caller has it; the
fold decodes a payload only where it reads one (task events, adds and updates). Nothing here
touches a database.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from tunebank.bank.canonical import canonical_json, digest
from tunebank.bank.errors import OutcomeRuleError
from tunebank.bank.events import (
    EVENT_ID,
    KIND,
    OP_NAME,
    OP_TYPE,
    ORIGIN,
    PAYLOAD,
    RECORDED_AT,
    REPO_KEY,
    SEQ,
    SOC_VERSION,
    TASK_ID,
    TASK_STATUSES,
    EventKind,
    EventRow,
    decode_payload,
    format_time,
    parse_time,
    row_payload,
)
from tunebank.bank.tasks import TaskView

PolicyKey = tuple[str, str, str]
"""(soc_version, repo_key, info_digest): one policy per operator, collisions kept apart."""

SUMMARY_FIELDS = (
    "repo_add_num",
    "repo_hit_num",
    "repo_reserved_num",
    "repo_unsatisfied_num",
    "repo_update_num",
    "total_num",
)

_COUNTER = {
    EventKind.ADD: "add_num",
    EventKind.HIT: "hit_num",
    EventKind.UPDATE: "update_num",
    EventKind.RESERVED: "reserved_num",
    EventKind.UNSATISFIED: "unsatisfied_num",
}


def info_digest(info_dict: dict[str, Any] | None) -> str:
    """The digest that tells two operators apart when their repo_keys collide."""
    return digest(info_dict or {})[:32]


def digest_of_json(info_json: str) -> str:
    """:func:`info_digest` of an info_dict already in canonical JSON."""
    return hashlib.sha256(info_json.encode("utf-8")).hexdigest()[:32]


_LOG_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z")
_NEWEST_FIRST = str.maketrans("0123456789", "9876543210")
Standing = tuple[float, str, str]
"""Where a candidate stands among the entries of its key, the lowest first (:func:`standing`)."""


def newest_first(recorded_at: str) -> str:
    """Text that sorts later times first: the log's fixed-width UTC time with every digit
    ``d`` turned into ``9 - d``. A time written another way (an events file from elsewhere) is
    put in the log's form first; one that is no time at all sorts after every time (oldest)."""
    if not _LOG_TIME.fullmatch(recorded_at):
        try:
            recorded_at = format_time(parse_time(recorded_at))
        except ValueError:
            return "~"
    return recorded_at.translate(_NEWEST_FIRST)


def standing(best_us: float, recorded_at: str, event_id: str) -> Standing:
    """The rule that picks a key's policy among its candidates (the lowest standing wins):
    the faster entry; among entries without a time (AOE's own banks carry none: ``best_us``
    infinite), the newer one by ``recorded_at``; then the smaller event id. Every part comes
    from the event itself, never from where it sits in one bank's log, so banks merged in any
    order agree on every key."""
    return (best_us, "" if best_us != math.inf else newest_first(recorded_at), event_id)


@dataclass(frozen=True)
class Policy:
    """The best known entry for one operator on one chip."""

    soc_version: str
    repo_key: str
    info_digest: str
    op_type: str | None
    info_dict: dict[str, Any]
    knowledge: dict[str, Any]
    best_us: float
    seq: int
    task_id: str
    event_id: str
    origin: str
    tune_mode: str | None = None
    backend: str | None = None
    cost_model_version: str | None = None
    recorded_at: str = ""
    """When the winning entry was recorded (its event's ``recorded_at``)."""
    info_json: str | None = field(default=None, compare=False, repr=False)
    """``info_dict``'s canonical JSON when it is already known (a cache, not part of the value)."""
    file_op: str | None = None
    """The operator of the AOE bank file the entry came from, where it differs from
    ``op_type`` (the entry's own ``op``)."""

    @classmethod
    def of(cls, soc_version: str, repo_key: str, info_digest: str, op_type: str | None,
           info_dict: dict[str, Any], knowledge: dict[str, Any], best_us: float, seq: int,
           task_id: str, event_id: str, origin: str, tune_mode: str | None,
           backend: str | None, cost_model_version: str | None, recorded_at: str = "",
           info_json: str | None = None, file_op: str | None = None) -> Policy:
        """``Policy(...)`` by position, for reads that build thousands: the same value, without
        the frozen dataclass's per-field ``__setattr__``."""
        policy = object.__new__(cls)
        policy.__dict__.update(
            soc_version=soc_version, repo_key=repo_key, info_digest=info_digest, op_type=op_type,
            info_dict=info_dict, knowledge=knowledge, best_us=best_us, seq=seq, task_id=task_id,
            event_id=event_id, origin=origin, tune_mode=tune_mode, backend=backend,
            cost_model_version=cost_model_version, recorded_at=recorded_at, info_json=info_json,
            file_op=file_op)
        return policy

    @property
    def key(self) -> PolicyKey:
        return (self.soc_version, self.repo_key, self.info_digest)

    @property
    def is_subgraph(self) -> bool:
        """A subgraph's policy (SGAT: its info_dict names the job and key), not an operator's."""
        return self.info_dict.get("job_type") == "sgat"

    @property
    def standing(self) -> Standing:
        """Where this entry stands among its key's (see :func:`standing`)."""
        return standing(self.best_us, self.recorded_at, self.event_id)

    def beats(self, other: Policy) -> bool:
        """Whether this entry wins its key over ``other`` (:func:`standing`), whatever the
        arrival order."""
        return self.standing < other.standing


PolicyRef = tuple[Standing, int]
"""What a compact projection keeps of a winning policy: its :func:`standing` and seq; the rest
is the winning event's, read again from the log when needed."""

_TALLY_FIELDS = ("add_num", "hit_num", "update_num", "reserved_num", "unsatisfied_num",
                 "open_hits", "last_seq", "withdrawn_num")
_TALLY_INDEX = {"add": 0, "hit": 1, "update": 2, "reserved": 3, "unsatisfied": 4, "withdrawn": 7}
"""Each keyed kind's counter in a task's tally (and the keyed kinds themselves)."""
_OPEN, _LAST = 5, 6
_POLICY_KINDS = frozenset({"add", "update"})
Payload = Mapping[str, Any]


def policy_of(row: EventRow, payload: Payload | None = None) -> Policy:
    """The policy an add or update event offers for its key (``payload``: the row's, decoded,
    if the caller has it).

    Raises:
        EventValidationError: the payload makes no policy.
    """
    p = row_payload(row) if payload is None else payload
    info = dict(p.get("info_dict") or {})
    info_json = canonical_json(info)
    return Policy.of(row[SOC_VERSION], row[REPO_KEY], digest_of_json(info_json), row[OP_TYPE], info,
                     dict(p["knowledge"]), float(p.get("performance_after_us", math.inf)),
                     row[SEQ], row[TASK_ID], row[EVENT_ID], row[ORIGIN], p.get("tune_mode"),
                     p.get("backend"), p.get("cost_model_version"), row[RECORDED_AT], info_json,
                     file_op_of(p))
    # performance_after_us missing (performance_unknown): beaten by any time


def file_op_of(payload: Payload) -> str | None:
    """The operator of the bank file an imported entry was read from, where it is not the
    entry's own (recorded in its ``aoe_entry``), or ``None``."""
    aoe = payload.get("aoe_entry")
    op = aoe.get("file_op") if isinstance(aoe, dict) else None
    return op if isinstance(op, str) else None


class Projection:
    """Policies, tasks and the key states of running tasks, folded event by event.

    ``key_states`` maps a running task's id to the last outcome kind of each key in it; ``hit``
    means the key is open, waiting for its ``update`` or ``reserved``. A finished task takes no
    more events, so its key states are dropped when it finishes: memory follows the tasks still
    running, not the log.

    A ``compact`` projection keeps only a :data:`PolicyRef` per policy key (in ``winners``):
    appends compare a batch with the stored refs and build a Policy only for a new winner, and
    folds over a whole log (verify, rebuild) keep memory from growing with the policies'
    contents; ``policies`` then stays empty.

    Counters are kept in place while events are folded and the :class:`TaskView` values are
    built when ``tasks`` is read, once per task rather than once per event.
    """

    def __init__(self, policies: dict[PolicyKey, Policy] | None = None,
                 tasks: dict[str, TaskView] | None = None,
                 key_states: dict[str, dict[str, str]] | None = None, *,
                 compact: bool = False) -> None:
        self.policies: dict[PolicyKey, Policy] = dict(policies or {})
        self.winners: dict[PolicyKey, PolicyRef] = {}
        self.key_states: dict[str, dict[str, str]] = {
            task: dict(states) for task, states in (key_states or {}).items()}
        self.withdrawn: dict[PolicyKey, tuple[str, int]] = {}
        """Each withdrawn key's latest withdrawal: its time in :func:`newest_first` form and its
        seq. An untimed entry recorded at or before it is retired (:meth:`retired`)."""
        self.compact = compact
        self.trusted = False
        """Whether the rows folded were checked before they came (an append's): their payloads
        are then decoded without being checked again."""
        self._tasks: dict[str, TaskView] = dict(tasks or {})
        self._tally: dict[str, list[int]] = {}
        self._running: tuple[str, str, dict[str, str], list[int]] | None = None
        """The task of the last outcome folded, with its key states and tally: outcomes come in
        runs of one task, and the next of the run needs no checks of the task again (any task
        event, and reading ``tasks``, forgets it)."""

    @property
    def tasks(self) -> dict[str, TaskView]:
        """Every task folded so far, by id."""
        self._running = None
        for task_id, (add, hit, update, reserved, unsatisfied, open_hits, last,
                      withdrawn) in self._tally.items():
            self._tasks[task_id] = replace(
                self._tasks[task_id], add_num=add, hit_num=hit, update_num=update,
                reserved_num=reserved, unsatisfied_num=unsatisfied, open_hits=open_hits,
                last_seq=last, withdrawn_num=withdrawn)
        self._tally.clear()
        return self._tasks

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Projection):
            return NotImplemented
        return (self.policies, self.winners, self.tasks, self.key_states, self.withdrawn) == (
            other.policies, other.winners, other.tasks, other.key_states, other.withdrawn)

    __hash__ = None  # type: ignore[assignment]  # mutable: not hashable

    def apply(self, row: EventRow, payload: Payload | None = None) -> None:
        """Fold one event in (``payload``: its payload, decoded, if the caller has it; read from
        the row otherwise, and only by the kinds that need it).

        Raises:
            OutcomeRuleError: the event breaks the outcome rules given the state so far.
            EventValidationError: a payload the fold reads is not valid.
        """
        kind = row[KIND]
        if kind in _TALLY_INDEX:
            self._outcome(row)
            if kind in _POLICY_KINDS:
                self.offer_policy(row, payload)
            elif kind == "withdrawn":
                self.offer_withdrawal(row, payload)
        elif kind == "task_started":
            self._start(row, decode_payload(row[PAYLOAD]) if payload is None else payload)
        elif kind == "task_finished":
            self._finish(row, decode_payload(row[PAYLOAD]) if payload is None else payload)

    def _task(self, row: EventRow) -> TaskView:
        task_id = row[TASK_ID]
        task = self._tasks.get(task_id)
        if task is None:
            raise OutcomeRuleError(f"{row[KIND]} for task {task_id}: the task was never started")
        if task.finished:
            raise OutcomeRuleError(
                f"{row[KIND]} for task {task_id}: the task already finished ({task.status})")
        if row[SOC_VERSION] != task.soc_version:
            raise OutcomeRuleError(
                f"{row[KIND]} for task {task_id}: soc_version {row[SOC_VERSION]} differs from the "
                f"task's {task.soc_version}")
        return task

    def _start(self, row: EventRow, p: Payload) -> None:
        self._running = None
        task_id = row[TASK_ID]
        if task_id in self._tasks:
            raise OutcomeRuleError(f"task_started for task {task_id}: the task already exists")
        self._tasks[task_id] = TaskView(
            task_id=task_id,
            soc_version=row[SOC_VERSION],
            origin=row[ORIGIN],
            started_at=row[RECORDED_AT],
            first_seq=row[SEQ],
            last_seq=row[SEQ],
            tuning_name=p.get("tuning_name"),
            model_name=p.get("model_name"),
            model_hash=p.get("model_hash"),
            job_type=p.get("job_type"),
            search_mode=p.get("search_mode"),
        )

    def _finish(self, row: EventRow, p: Payload) -> None:
        self._running = None
        self._task(row)
        task = self.tasks[row[TASK_ID]]  # with its counters up to date
        if task.open_hits:
            raise OutcomeRuleError(
                f"task_finished for task {task.task_id}: {task.open_hits} hit(s) still wait for "
                "their update or reserved"
            )
        status = p.get("status")
        if status not in TASK_STATUSES:
            raise OutcomeRuleError(
                f"task_finished for task {task.task_id}: payload.status must be one of "
                f"{', '.join(TASK_STATUSES)}, not {status!r}"
            )
        self._tasks[task.task_id] = replace(
            task,
            status=status,
            finished_at=row[RECORDED_AT],
            last_seq=row[SEQ],
            tuning_time_s=p.get("tuning_time_s"),
            model_baseline_ms=p.get("model_baseline_ms"),
            model_result_ms=p.get("model_result_ms"),
            failed_operators=tuple(p.get("failed_operators") or ()),
        )
        self.key_states.pop(task.task_id, None)

    def _outcome(self, row: EventRow) -> None:
        running = self._running
        if running is not None and running[0] == row[TASK_ID] and running[1] == row[SOC_VERSION]:
            states, tally = running[2], running[3]  # the task of the outcome before: checked then
        else:
            task = self._task(row)
            states = self.key_states.setdefault(task.task_id, {})
            kept = self._tally.get(task.task_id)
            if kept is None:
                kept = self._tally[task.task_id] = [getattr(task, name) for name in _TALLY_FIELDS]
            tally = kept
            self._running = (task.task_id, task.soc_version, states, tally)
        repo_key = row[REPO_KEY]
        state = states.get(repo_key)
        kind = row[KIND]
        if kind == "update" or kind == "reserved":
            if state != "hit":
                why = "without a hit before it" if state is None else f"after its {state}"
                raise OutcomeRuleError(f"{self._where(row)}: {why}")
            tally[_OPEN] -= 1
        else:
            if state is not None:
                raise OutcomeRuleError(f"{self._where(row)}: the key already has its {state} "
                                       "in this task")
            if kind == "hit":
                tally[_OPEN] += 1
        tally[_TALLY_INDEX[kind]] += 1  # a withdrawal's: outside the repo_summary
        tally[_LAST] = row[SEQ]
        states[repo_key] = kind

    @staticmethod
    def _where(row: EventRow) -> str:
        return (f"{row[KIND]} of key {row[REPO_KEY]} ({row[OP_NAME] or 'unnamed'}) in task "
                f"{row[TASK_ID]}")

    def offer_policy(self, row: EventRow, payload: Payload | None = None) -> None:
        """Let an add or update compete for its key's policy (no task rules: used for time
        travel).

        Raises:
            EventValidationError: its payload makes no policy.
        """
        if not self.compact:
            candidate = policy_of(row, payload)
            current = self.policies.get(candidate.key)
            if self.retired(candidate.key, candidate.standing):
                return
            if current is None or candidate.beats(current):
                self.policies[candidate.key] = candidate
            return
        p = (decode_payload(row[PAYLOAD]) if self.trusted else row_payload(row)) \
            if payload is None else payload
        info = p.get("info_dict")
        info_json = canonical_json(info) if info else "{}"
        key = (row[SOC_VERSION], row[REPO_KEY], digest_of_json(info_json))
        ref = (standing(float(p.get("performance_after_us", math.inf)), row[RECORDED_AT],
                        row[EVENT_ID]), row[SEQ])
        if self.withdrawn and self.retired(key, ref[0]):
            return
        held = self.winners.get(key)
        if held is None or ref[0] < held[0]:
            self.winners[key] = ref
            self._won(key, row, p, info_json)

    def retired(self, key: PolicyKey, rank: Standing) -> bool:
        """Whether an entry of ``key`` standing at ``rank`` was withdrawn: it has no time (a
        bank tree's) and was recorded at or before the key's latest withdrawal. A timed entry
        (measured by a tune, or read from a result file) is never withdrawn by a tree. Like
        :func:`standing`, this reads only the events themselves, so banks merged in any order
        agree on it."""
        withdrawal = self.withdrawn.get(key)
        return withdrawal is not None and rank[0] == math.inf and rank[1] >= withdrawal[0]

    def offer_withdrawal(self, row: EventRow, payload: Payload | None = None) -> None:
        """Retire a key's untimed entries recorded up to a withdrawal: the current one too, if
        it is such an entry, leaving the key with no policy until a newer or a timed entry comes
        (no task rules: time travel folds it too).

        Raises:
            EventValidationError: its payload is not a JSON object.
        """
        p = decode_payload(row[PAYLOAD]) if payload is None else payload
        info = p.get("info_dict")
        key = (row[SOC_VERSION], row[REPO_KEY], info_digest(info if isinstance(info, dict) else None))
        at = newest_first(row[RECORDED_AT])
        held = self.withdrawn.get(key)
        if held is None or at < held[0]:  # the later withdrawal (newest_first: smaller is later)
            self.withdrawn[key] = (at, row[SEQ])
        if self.compact:
            ref = self.winners.get(key)
            if ref is not None and self.retired(key, ref[0]):
                del self.winners[key]
                self._retired(key)
        else:
            current = self.policies.get(key)
            if current is not None and self.retired(key, current.standing):
                del self.policies[key]

    def _won(self, key: PolicyKey, row: EventRow, payload: Payload, info_json: str) -> None:
        """A hook: ``row`` (its payload decoded, its info_dict's canonical JSON made) has just
        become the winner of ``key`` in a compact projection."""

    def _retired(self, key: PolicyKey) -> None:
        """A hook: ``key``'s winner in a compact projection has just been withdrawn."""


def replay(rows: Iterable[EventRow]) -> Projection:
    """Fold a whole log's rows, oldest first, into a fresh projection."""
    projection = Projection()
    for row in rows:
        projection.apply(row)
    return projection
