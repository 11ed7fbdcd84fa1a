"""What the bank writes back in AOE's formats: a task's result file (``bank export --format
opat|sgat``) and the whole operator bank as a tree (``--format aoe-repo``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tunebank.bank.api import Bank
from tunebank.bank.errors import BankError
from tunebank.bank.events import EventKind
from tunebank.bank.formats.aoe_repo import TreeWrite
from tunebank.bank.formats.opat import ReportInfo, TaskOutcomes, opat_v1, opat_v2, sgat
from tunebank.bank.store import reads


@dataclass(frozen=True)
class TreeExport:
    """What an export of the bank as a tree wrote, and what it left out."""

    written: TreeWrite
    socs: list[str]
    subgraphs: int  # AOE keeps those in its subgraph bank, not in a tree


def export_tree(bank: Bank, out: Path, chip_cores: Mapping[str, int], core_num: int | None = None,
                *, merge: bool = False) -> TreeExport:
    """Write every operator entry of the bank under ``out`` in AOE's layout: an entry read from
    an AOE file into its own file with its own id and version; one tunebank tuned with its
    chip's core count (``chip_cores``, or ``core_num`` for every chip); and the files imports
    found empty, as they were.

    Raises:
        KbFormatError: a chip or operator name is not a plain name, a chip's core count is not
            known, or ``out`` holds entries the bank lacks (without ``merge``); nothing is
            written then.
    """
    from tunebank.bank.store.writes import bulk_job

    with bulk_job():  # 100,000 entries are a million short-lived objects
        return _export_tree(bank, out, chip_cores, core_num, merge)


def _export_tree(bank: Bank, out: Path, chip_cores: Mapping[str, int], core_num: int | None,
                 merge: bool) -> TreeExport:
    from tunebank.bank.exchange.tree_imports import recorded_empty_files
    from tunebank.bank.formats.aoe_repo import out_entry, scope_of, write_tree

    cores = {soc: core_num or count for soc, count in chip_cores.items()}
    entries, subgraphs, socs = [], 0, set()
    for soc, repo_key, op_type, payload in reads.policy_payloads(bank.store):
        if (payload.get("info_dict") or {}).get("job_type") == "sgat":
            subgraphs += 1
            continue
        if core_num is not None:
            cores.setdefault(soc, core_num)
        entries.append(out_entry(soc, repo_key, op_type, payload, cores))
        socs.add(soc)
    empty = {scope: text for soc, files in recorded_empty_files(bank).items()
             for name, text in files.items()
             if (scope := scope_of(name)) is not None and scope.soc_version == soc}
    written = write_tree(out, entries, merge=merge, empty_files=empty)
    return TreeExport(written, sorted(socs | {scope.soc_version for scope in empty}), subgraphs)


def task_result(bank: Bank, task_ref: str, file_format: str, result_format: str = "v2") -> Any:
    """The OPAT (v1 or v2) or SGAT result file of one task, as a JSON value.

    Raises:
        UnknownTaskError: no such task.
        BankError: the task is of the other job type.
    """
    task = bank.task(task_ref)
    events = list(bank.events(task_id=task.task_id))
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
