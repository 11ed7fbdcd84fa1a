"""What ``bank report`` shows, gathered from a bank in one pass over its log.

Per soc_version: every task in the order it started (its repo_summary, model times and the
measurements its outcomes spent), every key's default time against its best, and the policy
changes last appended (the audit trail). Rendering is report/html.py's job.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from bank.events import GENESIS_HASH, OUTCOME_KINDS, EventKind, StoredEvent
from bank.tasks import TaskView

if TYPE_CHECKING:
    from bank.api import Bank

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
class BankReport:
    """The whole report: the bank's identity and head, and one section per chip."""

    bank_id: str
    head_seq: int
    head_hash: str
    chips: tuple[ChipReport, ...]


def gather(bank: Bank, soc_version: str | None = None, trail: int = TRAIL) -> BankReport:
    """Read what the report needs: the tasks and the policies' times (two queries) and one
    streamed pass over the log for measurements, default times and the latest changes."""
    chips: dict[str, ChipReport] = {}

    def chip(soc: str) -> ChipReport:
        return chips.setdefault(soc, ChipReport(soc))

    for task in bank.tasks():
        if soc_version in (None, task.soc_version):
            chip(task.soc_version).tasks.append(task)
    before: dict[tuple[str, str], float] = {}
    recent: dict[str, deque[Change]] = {}
    head, link = 0, GENESIS_HASH
    for stored in bank.events():
        head, link = stored.seq, stored.hash  # the report shows the log up to this link
        event = stored.event
        if event.kind not in OUTCOME_KINDS or soc_version not in (None, event.soc_version):
            continue
        payload = event.payload
        spent = payload.get("measurements")
        if isinstance(spent, int) and not isinstance(spent, bool):
            counts = chip(event.soc_version).measurements
            counts[event.task_id] = counts.get(event.task_id, 0) + spent
        key = (event.soc_version, str(event.repo_key))
        first = _time(payload.get("performance_before_us"))
        if key not in before and first is not None and event.kind in (EventKind.ADD, EventKind.UNSATISFIED):
            before[key] = first
        if event.kind in (EventKind.ADD, EventKind.UPDATE):
            recent.setdefault(event.soc_version, deque(maxlen=trail)).append(_change(stored))
    for soc, repo_key, op_type, best_us in bank.policy_times(soc_version):
        chip(soc).keys.append(KeyTimes(repo_key, op_type, before.get((soc, repo_key)), _time(best_us)))
    for soc, changes in recent.items():
        chip(soc).changes = list(reversed(changes))
    for each in chips.values():  # an imported task keeps the time it started on its own machine
        each.tasks.sort(key=lambda t: (t.started_at, t.first_seq))
    return BankReport(bank.bank_id, head, link, tuple(chips[s] for s in sorted(chips)))


def _change(stored: StoredEvent) -> Change:
    event = stored.event
    return Change(stored.seq, event.recorded_at, str(event.kind), str(event.repo_key), event.op_type,
                  _time(event.payload.get("performance_before_us")),
                  _time(event.payload.get("performance_after_us")), event.task_id, event.origin,
                  borrowed_summary(event.payload.get("borrowed_from")))


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
