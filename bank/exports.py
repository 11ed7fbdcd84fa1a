"""A task's AOE result file regenerated from the log (``bank export --format opat|sgat``)."""

from __future__ import annotations

from typing import Any

from bank.api import Bank
from bank.errors import BankError
from bank.events import EventKind
from bank.formats.opat import ReportInfo, TaskOutcomes, opat_v1, opat_v2, sgat


def task_result(bank: Bank, task_ref: str, file_format: str, result_format: str = "v2") -> Any:
    """The OPAT (v1 or v2) or SGAT result file of one task, as a JSON value.

    Raises:
        UnknownTaskError: no such task.
        BankError: the task is of the other job type.
    """
    task = bank.task(task_ref)
    events = bank.task_events(task.task_id)
    started = next(s.event.payload for s in events if s.event.kind == EventKind.TASK_STARTED)
    is_sgat = started.get("job_type") == "sgat"
    if (file_format == "sgat") != is_sgat:
        raise BankError(f"task {task.task_id} is a{' subgraph' if is_sgat else 'n operator'} tuning "
                        f"task; use --format {'sgat' if is_sgat else 'opat'}")
    outcomes = TaskOutcomes()
    outcomes.absorb(events)
    model_ms = None
    if task.model_baseline_ms is not None and task.model_result_ms is not None:
        model_ms = (task.model_baseline_ms, task.model_result_ms)
    info = ReportInfo(task.tuning_name or task.task_id, task.status, task.tuning_time_s,
                      task.repo_summary(), model_ms, task.failed_operators)
    if is_sgat:
        return sgat(info, outcomes)
    if result_format == "v1":
        return opat_v1(info, outcomes)
    stamp = task.started_at[:19].replace("-", "").replace(":", "").replace("T", "_")
    report_id = started.get("source_report") or f"report_{stamp}_0"
    return opat_v2(report_id, info, outcomes)
