"""Turning what AOE's result files say into events, one task per report.

An import is a pure function of the file's bytes, the soc_version and the model: the task id,
every event id and every time are derived from them, so importing a file twice, or into two
banks that are merged later, adds each event once.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tunebank.bank.canonical import xxh64_key
from tunebank.bank.events import Event, EventKind, EventRow
from tunebank.bank.exchange.tree_imports import TreeCounts, Withdrawal
from tunebank.bank.formats.aoe_repo import UnchangedFiles
from tunebank.bank.formats.aoe_results import ImportedOp, ImportedReport, ImportFormatError

if TYPE_CHECKING:
    from tunebank.bank.api import Bank
    from tunebank.bank.formats.aoe_repo import TreeRead
    from tunebank.bank.formats.jsonl import Anchor

Resolver = Callable[[str], tuple[str, dict[str, Any], str] | None]
"""op name -> (repo_key, info_dict, op_type) from a model, or None if the model lacks it."""

EPOCH = "1970-01-01T00:00:00.000000Z"
"""The time of a report whose content carries none (older OPAT and SGAT files): the file's name
is never read for it, so a renamed copy gives the same events."""


def name_key(op_type: str | None, op_name: str | None) -> tuple[str, dict[str, Any]]:
    """The key of an operator known only by type and name (no model given)."""
    info = {"op_name": op_name, "op_type": op_type}
    return xxh64_key(info), info


@dataclass(frozen=True)
class ImportSource:
    """Where a report came from: the file's digest, the chip and the model it is keyed with."""

    file_sha256: str
    soc_version: str
    model_name: str | None = None
    model_hash: str | None = None

    @property
    def origin(self) -> str:
        return f"aoe-file:{self.file_sha256[:16]}"


def task_id_of(report: ImportedReport, source: ImportSource) -> str:
    """A task id derived from the file, report, chip and model."""
    text = "|".join([source.soc_version, source.file_sha256, report.report_id or "",
                     source.model_hash or ""])
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True)
class _Keyed:
    """One listed outcome and the key it is recorded under."""

    repo_key: str
    info: dict[str, Any]
    op_type: str | None
    op: ImportedOp


def report_events(report: ImportedReport, source: ImportSource,
                  resolve: Resolver | None = None) -> tuple[list[Event], int]:
    """The events of one report, and how many op names the model could not resolve."""
    task_id = task_id_of(report, source)
    when = report.recorded_at or EPOCH

    def event(kind: EventKind, payload: dict[str, Any], key: str | None = None,
              name: str | None = None, op_type: str | None = None) -> Event:
        return Event(kind=kind, soc_version=source.soc_version, task_id=task_id, recorded_at=when,
                     origin=source.origin, payload={k: v for k, v in payload.items() if v is not None},
                     repo_key=key, op_name=name, op_type=op_type)

    events = [event(EventKind.TASK_STARTED, {
        "tuning_name": report.tuning_name, "job_type": report.job_type,
        "model_name": source.model_name, "model_hash": source.model_hash,
        "source_report": report.report_id,
        "result_format": report.result_format})]
    unresolved = 0
    used: set[str] = set()
    for kind in ("add", "update"):
        keyed, missed = _keyed([op for op in report.ops if op.kind == kind], resolve, used,
                               f"{report.file}: {report.report_id or 'OPAT'}")
        unresolved += missed
        for item in keyed:
            events += _named(item, kind, event)
    events += _anonymous(report, event)
    if report.status != "incomplete":
        events.append(event(EventKind.TASK_FINISHED, {
            "status": report.status, "tuning_time_s": report.tuning_time_s,
            "model_baseline_ms": report.model_baseline_ms, "model_result_ms": report.model_result_ms,
            "failed_operators": report.failed_operators}))
    return events, unresolved


def _key_of(op: ImportedOp, resolve: Resolver | None) -> tuple[str, dict[str, Any], str | None, bool]:
    if op.repo_key is not None:  # a subgraph: the file gives its key
        return op.repo_key, {"job_type": "sgat", "repo_key": op.repo_key}, op.op_type or "subgraph", True
    found = resolve(op.name) if resolve and op.name else None
    if found:
        return found[0], found[1], found[2], True
    key, info = name_key(op.op_type, op.name)
    return key, info, op.op_type, resolve is None


def _keyed(ops: Sequence[ImportedOp], resolve: Resolver | None, used: set[str],
           where: str) -> tuple[list[_Keyed], int]:
    """The key of every listed outcome, and how many names the model could not resolve. A key
    the task has already used (two ops AOE counts apart that the model keys alike) falls back
    to the op's name, so the derived summary still equals the file's."""
    keyed = []
    missed = 0
    for op in ops:
        key, info, op_type, resolved = _key_of(op, resolve)
        if key in used:
            key, info = name_key(op.op_type, op.name)
            resolved = False
            if key in used:
                raise ImportFormatError(f"{where}: operator {op.name} is listed twice")
        used.add(key)
        missed += 0 if resolved else 1
        keyed.append(_Keyed(key, info, op_type, op))
    return keyed, missed


def _named(item: _Keyed, kind: str, event: Callable[..., Event]) -> list[Event]:
    op = item.op
    common = {"info_dict": item.info, "backend": "aoe", "op_names": [op.name or item.repo_key]}
    outcome = {**common, "knowledge": {}, "performance_before_us": op.before_us,
               "performance_after_us": op.after_us, "tune_mode": op.tune_mode,
               "performance_unknown": True if op.after_us is None else None, "reason": "imported"}
    if kind == "add":
        return [event(EventKind.ADD, outcome, item.repo_key, op.name, item.op_type)]
    hit = {**common, "performance_before_us": op.before_us}
    return [event(EventKind.HIT, hit, item.repo_key, op.name, item.op_type),
            event(EventKind.UPDATE, outcome, item.repo_key, op.name, item.op_type)]


def _anonymous(report: ImportedReport, event: Callable[..., Event]) -> list[Event]:
    """The outcomes the file only counts: reserved hits and unsatisfied keys, without names."""
    events = []
    payload = {"backend": "aoe", "reason": "counted"}
    for n in range(report.summary["repo_reserved_num"]):
        key = f"anonymous-{n + 1}"
        events += [event(EventKind.HIT, payload, key), event(EventKind.RESERVED, payload, key)]
    offset = report.summary["repo_reserved_num"]
    for n in range(report.summary["repo_unsatisfied_num"]):
        events.append(event(EventKind.UNSATISFIED, payload, f"anonymous-{offset + n + 1}"))
    return events


@dataclass
class FileImport:
    """What importing one file (or tree) came to."""

    path: str
    kind: str  # opat-v1 | opat-v2 | sgat | aoe-repo | events
    tasks: int = 0
    tasks_present: int = 0
    events: int = 0
    unresolved: int = 0
    task_ids: list[str] = field(default_factory=list, repr=False)
    head: dict[str, Any] | None = None  # events files: the bank they claim, their last seq and hash
    tree: TreeCounts | None = None  # AOE bank trees: what their entries came to
    gaps: list[str] = field(default_factory=list)  # AOE bank trees: places that hold no entry

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"path": self.path, "kind": self.kind, "tasks": self.tasks,
                               "tasks_present": self.tasks_present, "events": self.events,
                               "unresolved": self.unresolved}
        if self.tree is not None:
            out.update(entries=self.tree.entries, entries_new=self.tree.new,
                       entries_changed=self.tree.changed, entries_unchanged=self.tree.unchanged,
                       entries_outranked=self.tree.outranked, socs=self.tree.socs,
                       gaps=self.gaps)
        return {**out, "head": self.head} if self.head is not None else out


@dataclass
class PreparedImport:
    """Every file read and checked, with the events it comes to; nothing written yet.

    Events files are not held in memory: ``streams`` names them, and :func:`apply_import`
    reads and checks them line by line as it appends (a bad line rolls the import back)."""

    files: list[FileImport]
    events: list[Event]
    streams: list[tuple[FileImport, Path]] = field(default_factory=list)
    expect_head: Anchor | None = None
    trees: list[tuple[FileImport, TreeRead]] = field(default_factory=list)
    """AOE bank trees (and single bank files): their events depend on what the bank holds, so
    :func:`apply_import` derives them in the same transaction as it appends."""


@dataclass
class ImportReport:
    """What a whole import did: per file, and the events written or skipped."""

    files: list[FileImport]
    appended: int
    skipped: int
    withdrawn: list[Withdrawal] = field(default_factory=list)
    """With ``mirror``: the entries the trees no longer hold, retired by this import."""
    dry_run: bool = False
    """Nothing was written: the counts and withdrawals say what the import would do."""

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"files": [f.as_json() for f in self.files],
                               "events_added": self.appended, "events_already_present": self.skipped}
        if self.withdrawn or self.dry_run:
            out["withdrawn"] = [{"soc_version": w.soc_version, "repo_key": w.repo_key,
                                 "op_type": w.op_type, "file": w.file} for w in self.withdrawn]
        return {**out, "dry_run": True} if self.dry_run else out


def read_imports(paths: Sequence[Path], soc_version: str | None, resolve: Resolver | None = None,
                 model_name: str | None = None, model_hash: str | None = None,
                 expect_head: Anchor | None = None,
                 unchanged: UnchangedFiles | None = None) -> PreparedImport:
    """Read and validate every file and derive its events, touching no bank: an import that
    fails here has written nothing anywhere. ``expect_head`` is a link every events file's
    chain must pass through (see :class:`bank.formats.jsonl.Anchor`); ``unchanged`` names the
    bank files of trees that need not be parsed (:func:`~bank.exchange.tree_imports.
    unchanged_files`, checked again when the import is applied).

    Raises:
        BankError: a file is malformed, an option is missing, or an events file's history is
            not the anchored one.
    """
    from tunebank.bank.errors import BankError
    from tunebank.bank.formats.aoe_repo import read_tree
    from tunebank.bank.formats.aoe_results import ImportFormatError, load_result_file
    from tunebank.bank.formats.jsonl import is_events_file
    from tunebank.bank.formats.jsontext import read_bytes
    from tunebank.bank.formats.runtime_kb import SUFFIX
    from tunebank.bank.store.writes import bulk_job

    events: list[Event] = []
    files: list[FileImport] = []
    streams: list[tuple[FileImport, Path]] = []
    trees: list[tuple[FileImport, TreeRead]] = []
    for path in paths:
        if path.is_dir() or path.name.endswith(SUFFIX):
            with bulk_job():
                tree = read_tree(path, unchanged)
            socs = sorted({*tree.socs(), *(scope.soc_version for scope in tree.skipped)})
            if soc_version is not None and socs not in ([], [soc_version]):
                raise BankError(f"{path}: holds banks of {', '.join(socs)}, not only "
                                f"--soc-version {soc_version}")
            info = FileImport(str(path), "aoe-repo", gaps=[str(gap) for gap in tree.gaps])
            trees.append((info, tree))
            files.append(info)
            continue
        if is_events_file(path):
            info = FileImport(str(path), "events")
            streams.append((info, path))
            files.append(info)
            continue
        else:
            if soc_version is None:
                raise BankError(f"{path}: --soc-version is required to import an AOE result file")
            content = read_bytes(path, ImportFormatError)  # regular, under the cap, read once
            source = ImportSource(hashlib.sha256(content).hexdigest(), soc_version, model_name,
                                  model_hash)
            built, info = [], FileImport(str(path), "")
            for report in load_result_file(path, content):
                info.kind = "sgat" if report.job_type == "sgat" else f"opat-{report.result_format}"
                report_built, missed = report_events(report, source, resolve)
                built += report_built
                info.task_ids.append(task_id_of(report, source))
                info.unresolved += missed
            info.tasks, info.events = len(info.task_ids), len(built)
        events += built
        files.append(info)
    if expect_head is not None and not any(f.kind == "events" for f in files):
        raise BankError("--expect-head: checks the chain of an events file, and none is imported")
    return PreparedImport(files, events, streams, expect_head, trees)


def _settle_skipped(bank: Bank, prepared: PreparedImport) -> None:
    """Read again, whole, a tree some of whose files were skipped as unchanged when the bank
    has changed since that was decided (another writer came between the read and this write),
    or when another tree of the same import holds banks of the same chip (the later given wins
    a key both hold, so neither may be taken for the bank's word unread)."""
    from collections import Counter

    from tunebank.bank.exchange.tree_imports import unchanged_files
    from tunebank.bank.formats.aoe_repo import read_tree

    if not any(tree.skipped for _, tree in prepared.trees):
        return
    unchanged = unchanged_files(bank)
    chips = Counter(soc for _, tree in prepared.trees for soc in {s.soc_version for s in tree.digests})
    for n, (info, tree) in enumerate(prepared.trees):
        shared = any(chips[scope.soc_version] > 1 for scope in tree.skipped)
        if shared or any(unchanged(scope, tree.digests[scope][0]) != count
                         for scope, count in tree.skipped.items()):
            prepared.trees[n] = (info, read_tree(Path(tree.path), None if shared else unchanged))


def apply_import(bank: Bank, prepared: PreparedImport, *, mirror: bool = False,
                 dry_run: bool = False) -> ImportReport:
    """Append a prepared import in one transaction: all of it or none of it. Tasks the bank
    already holds are counted as present (their events, derived alike, are skipped).

    Args:
        mirror: the bank trees, together, are the whole new state of the bank's AOE knowledge:
            every untimed entry of the bank they do not hold is withdrawn
            (:func:`~bank.exchange.tree_imports.withdrawal_events`).
        dry_run: derive the trees' events and withdrawals and report them, writing nothing
            (bank trees only: result and events files are refused by the caller).

    Raises:
        BankError: the events break the outcome rules in this bank, or the store refused.
    """
    from tunebank.bank.store.writes import bulk_job

    with bulk_job():  # a tree of 100,000 entries is a million short-lived objects
        return _apply_import(bank, prepared, mirror, dry_run)


def _apply_import(bank: Bank, prepared: PreparedImport, mirror: bool, dry_run: bool) -> ImportReport:
    from tunebank.bank.exchange.tree_imports import tree_events, tree_moments, withdrawal_events
    from tunebank.bank.formats.forked import stream_events_file
    from tunebank.bank.formats.jsonl import EventsFileInfo

    present = {t.task_id for t in bank.tasks()}
    _settle_skipped(bank, prepared)
    pending: dict[tuple[str, str], str] = {}
    from_trees: list[Event] = []
    moments = tree_moments(len(prepared.trees))
    for (info, tree), moment in zip(prepared.trees, moments, strict=True):
        built, info.tree, info.task_ids = tree_events(bank, tree, pending, moment)
        info.events = len(built)
        from_trees += built
    withdrawn: list[Withdrawal] = []
    if mirror and prepared.trees:
        retiring, withdrawn = withdrawal_events(bank, [tree for _, tree in prepared.trees],
                                                moments[-1])
        from_trees += retiring
        last = prepared.trees[-1][0]
        last.events += len(retiring)
        last.task_ids += sorted({event.task_id for event in retiring})
    if dry_run:
        for info, _ in prepared.trees:
            info.tasks = len(info.task_ids)
        return ImportReport(prepared.files, len(from_trees), 0, withdrawn, dry_run=True)
    prepared = PreparedImport(prepared.files, prepared.events + from_trees, prepared.streams,
                              prepared.expect_head, prepared.trees)
    if prepared.streams:
        found = {id(info): EventsFileInfo() for info, _ in prepared.streams}

        def rows() -> Iterator[EventRow]:
            for event in prepared.events:
                yield event.row()
            for info, path in prepared.streams:
                found[id(info)] = EventsFileInfo()
                yield from stream_events_file(path, prepared.expect_head, found[id(info)])

        # checked: an Event's id is its content's, and every row of a file was checked as read
        streamed = bank.append_stream(rows, checked=True)
        appended, skipped = streamed.appended, streamed.skipped
        for info, _ in prepared.streams:
            read = found[id(info)]
            info.task_ids, info.events = sorted(read.task_ids), read.events
            info.head = {"bank_id": read.bank_id, "seq": read.head_seq, "hash": read.head_hash,
                         "anchored": prepared.expect_head is not None}
    else:
        # a report whose task the bank holds is skipped whole: its id comes from the report's
        # content, so that content is already here, even if an older tunebank dated it otherwise
        fresh = [event for event in prepared.events if event.task_id not in present]
        result = bank.append(fresh)
        appended = len(result.appended)
        skipped = len(result.skipped) + len(prepared.events) - len(fresh)
    for info in prepared.files:  # counted afresh each time: a retried import reports alike
        info.tasks_present = sum(1 for task in info.task_ids if task in present)
        info.tasks = len(info.task_ids) - info.tasks_present
    return ImportReport(prepared.files, appended, skipped, withdrawn)

