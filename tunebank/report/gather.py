"""What ``bank report`` shows, gathered from a bank in one pass over its log.

Per soc_version: every task in the order it started (its repo_summary, model times and the
measurements its outcomes spent), every key's default time against its best, and the policy
changes last appended (the audit trail). Rendering is report/html.py's job.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tunebank.bank.canonical import parse_json
from tunebank.bank.events import (
    GENESIS_HASH,
    HASH,
    KIND,
    OP_TYPE,
    ORIGIN,
    OUTCOME_KINDS,
    PAYLOAD,
    RECORDED_AT,
    REPO_KEY,
    SEQ,
    SOC_VERSION,
    TASK_ID,
    EventKind,
    EventRow,
)
from tunebank.bank.tasks import TaskView

if TYPE_CHECKING:
    from tunebank.bank.api import Bank

TRAIL = 50
"""Policy changes (adds and updates) the audit trail keeps per chip, the last appended first."""


@dataclass(frozen=True)
class KeyTimes:
    """One key's time before any tuning (the default the first search measured) and its best."""

    repo_key: str
    op_type: str | None
    before_us: float | None
    best_us: float | None


@dataclass(frozen=True)
class Change:
    """One policy change of the audit trail."""

    seq: int
    recorded_at: str
    kind: str
    repo_key: str
    op_type: str | None
    before_us: float | None
    after_us: float | None
    task_id: str
    origin: str
    borrowed: str | None = None
    """The known keys its search started from (transfer): the nearest, and how many."""


@dataclass
class ChipReport:
    """Everything the report shows of one soc_version."""

    soc_version: str
    tasks: list[TaskView] = field(default_factory=list)
    measurements: dict[str, int] = field(default_factory=dict)  # task_id -> measurements spent
    keys: list[KeyTimes] = field(default_factory=list)
    changes: list[Change] = field(default_factory=list)  # the last appended first


@dataclass(frozen=True)
class ModelVersion:
    """One content of a model under its name: version 1 is the first content tuned under that
    name (in the whole bank, by start time), 2 the next, and so on."""

    name: str
    version: int
    model_hash: str
    tasks: tuple[TaskView, ...]
    """Its tasks the report shows, on every chip, in the order they started."""

    @property
    def label(self) -> str:
        return f"{self.name} v{self.version}"


@dataclass(frozen=True)
class BankReport:
    """The whole report: the bank's identity and head, one section per chip, and the model
    versions tuned (to set each model beside itself across chips)."""

    bank_id: str
    head_seq: int
    head_hash: str
    chips: tuple[ChipReport, ...]
    models: tuple[ModelVersion, ...] = ()

    def version_of(self) -> dict[str, ModelVersion]:
        """Each task's model version, by task id (tasks without a model have none)."""
        return {task.task_id: model for model in self.models for task in model.tasks}


def gather(bank: Bank, soc_version: str | None = None, trail: int = TRAIL) -> BankReport:
    """Read what the report needs: the tasks and the policies' times (two queries) and one
    streamed pass over the log for measurements, default times and the latest changes."""
    chips: dict[str, ChipReport] = {}

    def chip(soc: str) -> ChipReport:
        found = chips.get(soc)
        if found is None:
            found = chips[soc] = ChipReport(soc)
        return found

    every = bank.tasks()
    for task in every:
        if soc_version in (None, task.soc_version):
            chip(task.soc_version).tasks.append(task)
    before: dict[tuple[str, str], float] = {}
    recent: dict[str, deque[tuple[EventRow, dict[str, Any]]]] = {}
    head, link = 0, GENESIS_HASH
    outcomes = frozenset(str(kind) for kind in OUTCOME_KINDS)
    firsts, trail_kinds = frozenset((EventKind.ADD, EventKind.UNSATISFIED)), (EventKind.ADD, EventKind.UPDATE)
    for row in bank.event_rows():  # stored tuples: a million events need no object each
        kind, soc, task_id, link = row[KIND], row[SOC_VERSION], row[TASK_ID], row[HASH]
        head = row[SEQ]  # the report shows the log up to this link
        if kind not in outcomes or soc_version not in (None, soc):
            continue
        payload = parse_json(row[PAYLOAD])
        spent = payload.get("measurements")
        if isinstance(spent, int) and not isinstance(spent, bool):
            counts = chip(soc).measurements
            counts[task_id] = counts.get(task_id, 0) + spent
        key = (soc, str(row[REPO_KEY]))
        if kind in firsts and key not in before:
            first = _time(payload.get("performance_before_us"))
            if first is not None:
                before[key] = first
        if kind in trail_kinds:
            trail_of = recent.get(soc)
            if trail_of is None:
                trail_of = recent[soc] = deque(maxlen=trail)
            trail_of.append((row, payload))
    for soc, repo_key, op_type, best_us in bank.policy_times(soc_version):
        chip(soc).keys.append(KeyTimes(repo_key, op_type, before.get((soc, repo_key)), _time(best_us)))
    for soc, changes in recent.items():
        chip(soc).changes = [_change(row, payload) for row, payload in reversed(changes)]
    for each in chips.values():  # an imported task keeps the time it started on its own machine
        each.tasks.sort(key=lambda t: (t.started_at, t.first_seq))
    shown = {task.task_id for each in chips.values() for task in each.tasks}
    return BankReport(bank.bank_id, head, link, tuple(chips[s] for s in sorted(chips)),
                      model_versions(every, shown))


def model_versions(tasks: Iterable[TaskView],
                   shown: Collection[str] | None = None) -> tuple[ModelVersion, ...]:
    """The model versions of ``tasks``, numbered per name in the order their contents were first
    tuned; each keeps those of its tasks whose ids are in ``shown`` (all when None). Numbering
    over every task keeps a version's number the same in a report of one chip."""
    ordered = sorted((t for t in tasks if t.model_name), key=lambda t: (t.started_at, t.first_seq))
    found: dict[tuple[str, str], list[TaskView]] = {}
    for task in ordered:
        found.setdefault((str(task.model_name), task.model_hash or ""), []).append(task)
    count: dict[str, int] = {}
    versions = []
    for (name, model_hash), of_version in found.items():  # insertion order: first tuned first
        count[name] = count.get(name, 0) + 1
        kept = tuple(t for t in of_version if shown is None or t.task_id in shown)
        if kept:
            versions.append(ModelVersion(name, count[name], model_hash, kept))
    return tuple(sorted(versions, key=lambda m: (m.name, m.version)))


def _change(row: EventRow, payload: dict[str, Any]) -> Change:
    """The audit trail's line for an events row."""
    return Change(row[SEQ], row[RECORDED_AT], str(row[KIND]), str(row[REPO_KEY]), row[OP_TYPE],
                  _time(payload.get("performance_before_us")),
                  _time(payload.get("performance_after_us")), row[TASK_ID], row[ORIGIN],
                  borrowed_summary(payload.get("borrowed_from")))


def borrowed_summary(donors: object) -> str | None:
    """An outcome's ``borrowed_from`` (the known keys its search started from) in a few words:
    the nearest key, its task and distance, and how many more there were."""
    if not isinstance(donors, list) or not donors or not isinstance(donors[0], dict):
        return None
    first = donors[0]
    more = f" +{len(donors) - 1}" if len(donors) > 1 else ""
    return f"{first.get('repo_key')} of {first.get('task_id')} ({first.get('distance')}){more}"


def _time(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)
