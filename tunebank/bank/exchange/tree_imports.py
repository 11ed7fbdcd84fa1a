"""Turning AOE bank trees into events: what each entry adds to the bank as it is now.

A tree is AOE's word for what its chips' banks hold at one moment, without times. Importing it
records, per chip, one task of the entries that are new to the bank (``add``) or differ from
the entry the bank holds for their key (``hit`` then ``update``: knowledge, id, version or
fields changed); an entry the bank already holds as it is adds nothing, so importing the same
tree again adds no event. Each event keeps the entry's AOE fields (``aoe_entry``: id, version,
core count) and where it came from (``source``: the tree as given, the file in it, the line).

The events are stamped with the import's time, each tree of one import a microsecond after
the one before, and entries without a time are ranked by that time (:func:`bank.projection.
standing`): of two trees, the one imported later holds. A team's rule for two machines' banks
is the same: the bank imported (or merged) last wins a key whose knowledge differs, and
``bank merge`` names each such key.
"""

from __future__ import annotations

import hashlib
import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from tunebank.bank.canonical import canonical_json, parse_json
from tunebank.bank.events import Event, EventKind, format_time, utc_now
from tunebank.bank.formats.aoe_repo import TreeEntry, TreeRead, UnchangedFiles
from tunebank.bank.formats.runtime_kb import KbFile
from tunebank.bank.projection import standing
from tunebank.bank.store import reads

if TYPE_CHECKING:
    from tunebank.bank.api import Bank

JOB_TYPE = "aoe-bank"


@dataclass
class TreeCounts:
    """What one tree came to against the bank: per entry new, changed or unchanged."""

    entries: int = 0
    new: int = 0
    changed: int = 0
    unchanged: int = 0
    outranked: int = 0  # changed, but a timed entry of the bank stays current (faster wins)
    socs: list[str] = field(default_factory=list)


def _entry_payload(entry: TreeEntry, path: str) -> dict[str, Any]:
    """The payload of the add or update that records ``entry`` of the tree at ``path``."""
    kb, times = entry.entry, entry.times or {}
    best = times.get("best_us")
    payload = {"info_dict": kb.info_dict, "knowledge": kb.knowledge,
               "performance_after_us": best, "performance_unknown": True if best is None else None,
               "tune_mode": times.get("tune_mode"), "backend": times.get("backend") or "aoe",
               "reason": "imported", "aoe_entry": None if entry.times else kb.aoe,
               "source": {"tree": path, "file": entry.file, "line": kb.line}}
    return {k: v for k, v in payload.items() if v is not None}


def _stored_content(payload: Mapping[str, Any], op_type: str | None) -> str:
    """What an import compares of an entry: its knowledge, AOE fields, time and op (its
    info_dict is its key's), as canonical JSON, where ``1``, ``1.0`` and ``true`` differ."""
    aoe = payload.get("aoe_entry")
    return canonical_json({"knowledge": payload.get("knowledge"),
                           "aoe": aoe if isinstance(aoe, dict) else None,
                           "best_us": payload.get("performance_after_us"), "op": op_type})


def tree_events(bank: Bank, tree: TreeRead, pending: dict[tuple[str, str], str],
                when: datetime | None = None) -> tuple[list[Event], TreeCounts, list[str]]:
    """The events that record ``tree`` in ``bank`` as it is now, its counts and task ids.

    ``pending`` holds the content of keys earlier trees of the same import record (a later
    tree is compared with them, not with the bank), and gains this tree's.
    """
    moment = format_time(when or utc_now())
    skipped = sum(tree.skipped.values())  # files the bank holds as they are: never parsed
    counts = TreeCounts(entries=len(tree.entries) + skipped, unchanged=skipped)
    by_soc: dict[str, list[TreeEntry]] = defaultdict(list)
    for entry in tree.entries:
        by_soc[entry.soc_version].append(entry)
    events: list[Event] = []
    task_ids: list[str] = []
    empty_by_soc: dict[str, dict[str, str]] = defaultdict(dict)
    for scope, text in tree.empty_files.items():
        empty_by_soc[scope.soc_version][scope.name] = text
    known_empty = recorded_empty_files(bank) if empty_by_soc else {}
    counts.socs = sorted(by_soc.keys() | empty_by_soc.keys()
                         | {scope.soc_version for scope in tree.skipped})
    files_by_soc: dict[str, dict[str, list[Any]]] = defaultdict(dict)
    for scope, (sha, entries) in tree.digests.items():
        files_by_soc[scope.soc_version][scope.name] = [sha, entries]
    for soc in sorted(by_soc.keys() | empty_by_soc.keys()):
        changes = _changes(bank, tree.path, soc, by_soc[soc], pending, counts)
        empty = {name: text for name, text in empty_by_soc[soc].items()
                 if known_empty.get(soc, {}).get(name) != text
                 and pending.get((soc, "file:" + name)) != text}
        for name, text in empty.items():
            pending[(soc, "file:" + name)] = text
        if not changes and not empty:
            continue
        digest = hashlib.sha256()
        for _, entry, _, content in changes:
            digest.update(entry.repo_key.encode() + b"|" + content.encode() + b"\n")
        digest.update(canonical_json(empty).encode())
        task_id = hashlib.sha256(f"{soc}|{digest.hexdigest()}|{moment}".encode()).hexdigest()[:16]
        events += _task_events(tree.path, soc, task_id, moment, changes,
                               f"aoe-bank:{digest.hexdigest()[:16]}", empty, files_by_soc[soc])
        task_ids.append(task_id)
    return events, counts, task_ids


Change = tuple[bool, TreeEntry, dict[str, Any], str]
"""An entry to record: whether its key is new, the entry, its payload and what is compared."""


def _changes(bank: Bank, path: str, soc: str, entries: Sequence[TreeEntry],
             pending: dict[tuple[str, str], str], counts: TreeCounts) -> list[Change]:
    """Each entry the bank lacks or holds otherwise; counts the rest."""
    held = bank.lookup(soc, [(e.repo_key, e.entry.info_dict) for e in entries])
    payloads = {s.event_id: s.event.payload
                for s in reads.events_by_id(bank.store, [p.event_id for p in held.values()])}
    timed = [key for key, policy in held.items() if math.isfinite(policy.best_us)]
    latest_untimed = _latest_untimed(bank, soc, timed)
    changes = []
    for entry in entries:
        payload = _entry_payload(entry, path)
        content = _stored_content(payload, entry.entry.op_type)
        key = (soc, entry.repo_key)
        if key in pending:
            before: str | None = pending[key]
        elif entry.repo_key in held:
            policy = held[entry.repo_key]
            before = _stored_content(payloads.get(policy.event_id, {}), policy.op_type)
            if before != content and entry.repo_key in latest_untimed and entry.times is None:
                before = latest_untimed[entry.repo_key]  # the bank's last word from AOE for it
        else:
            before = None
        if before == content:
            counts.unchanged += 1
            continue
        pending[key] = content
        if before is None:
            counts.new += 1
        else:
            counts.changed += 1
            current = held.get(entry.repo_key)
            counts.outranked += current is not None and math.isfinite(current.best_us) \
                and entry.times is None
        changes.append((before is None, entry, payload, content))
    return changes


def _latest_untimed(bank: Bank, soc: str, keys: Sequence[str]) -> dict[str, str]:
    """For keys whose current entry is timed: the content of the newest untimed entry the log
    holds for each, if any (what an earlier import of a tree recorded)."""
    if not keys:
        return {}
    best: dict[str, tuple[Any, str]] = {}
    for kind in (EventKind.ADD, EventKind.UPDATE):
        for stored in reads.outcomes_for_keys(bank.store, soc, kind, keys):
            payload = stored.event.payload
            if payload.get("performance_after_us") is not None:
                continue
            rank = standing(math.inf, stored.event.recorded_at, stored.event_id)
            key = stored.event.repo_key or ""
            if key not in best or rank < best[key][0]:
                best[key] = (rank, _stored_content(payload, stored.event.op_type))
    return {key: content for key, (_, content) in best.items()}


def _task_events(path: str, soc: str, task_id: str, moment: str,
                 changes: Sequence[Change], origin: str,
                 empty: Mapping[str, str], files: Mapping[str, list[Any]]) -> list[Event]:
    def event(kind: EventKind, payload: dict[str, Any], entry: TreeEntry | None = None) -> Event:
        return Event.of(kind, soc, task_id, moment, origin,
                        {k: v for k, v in payload.items() if v is not None},
                        entry.repo_key if entry else None, None,
                        entry.entry.op_type if entry else None)

    events = [event(EventKind.TASK_STARTED, {"tuning_name": f"import of AOE bank {path}",
                                             "job_type": JOB_TYPE,
                                             "empty_files": dict(empty) or None,
                                             "files": dict(files) or None})]
    for is_new, entry, payload, _ in changes:
        if not is_new:
            events.append(event(EventKind.HIT, {"info_dict": entry.entry.info_dict,
                                                "backend": "aoe", "reason": "imported"}, entry))
        events.append(event(EventKind.ADD if is_new else EventKind.UPDATE, payload, entry))
    events.append(event(EventKind.TASK_FINISHED, {"status": "successful"}))
    return events


def recorded_empty_files(bank: Bank) -> dict[str, dict[str, str]]:
    """The bank files imports found holding no entry, per chip: file name -> what it held
    (``{}`` or nothing), the latest import's word for each."""
    from tunebank.bank.store.results import EventFilter

    found: dict[str, dict[str, str]] = defaultdict(dict)
    for stored in reads.events(bank.store, EventFilter(kinds=(str(EventKind.TASK_STARTED),))):
        payload = stored.event.payload
        if payload.get("job_type") == JOB_TYPE and isinstance(payload.get("empty_files"), dict):
            for name, text in payload["empty_files"].items():
                if isinstance(name, str) and text in ("", "{}"):
                    found[stored.event.soc_version][name] = text
    return found


def unchanged_files(bank: Bank) -> UnchangedFiles:
    """What a tree import need not parse: a bank file whose SHA-256 is the one the chip's latest
    tree import recorded for a file of that name, when no event of that chip has come since
    (a tune, another import, a merge or a withdrawal could have changed what the bank holds for
    its keys). Its entries are then exactly the bank's word for them, and importing them again
    would add nothing (issue 41: a no-op re-import parsed, keyed and compared every entry)."""
    from tunebank.bank.store.results import EventFilter

    latest: dict[str, tuple[int, str, dict[str, Any]]] = {}
    for stored in reads.events(bank.store, EventFilter(kinds=(str(EventKind.TASK_STARTED),))):
        files = stored.event.payload.get("files")
        if stored.event.payload.get("job_type") == JOB_TYPE and isinstance(files, dict):
            latest[stored.event.soc_version] = (stored.seq, stored.event.task_id, files)
    tasks = {task.task_id: task for task in bank.tasks()} if latest else {}
    settled: dict[str, dict[str, Any]] = {}
    for soc, (_, task_id, files) in latest.items():
        task = tasks.get(task_id)
        if task is not None and task.finished and not reads.chip_events_after(
                bank.store, soc, task.last_seq):
            settled[soc] = files

    def unchanged(scope: KbFile, sha: str) -> int | None:
        record = settled.get(scope.soc_version, {}).get(scope.name)
        if isinstance(record, list) and len(record) == 2 and record[0] == sha \
                and isinstance(record[1], int) and not isinstance(record[1], bool):
            return record[1]
        return None

    return unchanged


def tree_moments(count: int, now: datetime | None = None) -> list[datetime]:
    """The times of ``count`` trees imported together: a microsecond apart, the last given
    the newest, so it wins a key two of them hold otherwise."""
    start = now or utc_now()
    return [start + timedelta(microseconds=n) for n in range(count)]


@dataclass(frozen=True)
class Withdrawal:
    """An entry of the bank that the trees of a mirror import no longer hold."""

    soc_version: str
    repo_key: str
    op_type: str | None
    file: str | None
    """The bank file it was last read from, as its import recorded it."""


def withdrawal_events(bank: Bank, trees: Sequence[TreeRead], when: datetime | None = None
                      ) -> tuple[list[Event], list[Withdrawal]]:
    """The events that retire every entry of the bank the ``trees`` (together: the whole new
    state of the bank's AOE knowledge) do not hold, and what they retire: one task a chip, of
    one ``withdrawn`` event an entry, stamped ``when`` (the newest tree's moment).

    Only entries without a time are withdrawn: a tree is AOE's knowledge, and a time measured
    here (a tune, a result file) is the team's own, which no release takes back. A key is held
    when a tree holds an entry of its chip and repo_key (the repo_key is a digest of the
    chip's core count, the operator and the whole info_dict).
    """
    held = {(entry.soc_version, entry.repo_key) for tree in trees for entry in tree.entries}
    moment = format_time(when or utc_now())
    gone: dict[str, list[tuple[str, str, str | None, str, str | None]]] = defaultdict(list)
    for soc, key, op_type, file_op, event_id, info_json in reads.untimed_policies(bank.store):
        if (soc, key) not in held:
            gone[soc].append((key, event_id, op_type, info_json, file_op))
    sources = {s.event_id: s.event.payload.get("source") for s in reads.events_by_id(
        bank.store, [item[1] for items in gone.values() for item in items])}
    paths = [tree.path for tree in trees]
    events: list[Event] = []
    withdrawn: list[Withdrawal] = []
    for soc in sorted(gone):
        items = sorted(gone[soc])
        digest = hashlib.sha256(canonical_json([soc, [i[:2] for i in items], paths]).encode())
        task_id = hashlib.sha256(f"{soc}|withdrawn|{digest.hexdigest()}|{moment}".encode()) \
            .hexdigest()[:16]
        origin = f"aoe-bank:{digest.hexdigest()[:16]}"

        def event(kind: EventKind, payload: dict[str, Any], key: str | None = None,
                  op_type: str | None = None, soc: str = soc, task_id: str = task_id,
                  origin: str = origin) -> Event:
            return Event.of(kind, soc, task_id, moment, origin, payload, key, None, op_type)

        events.append(event(EventKind.TASK_STARTED, {
            "tuning_name": f"withdrawals of mirror import of {', '.join(paths)}",
            "job_type": JOB_TYPE}))
        for key, event_id, op_type, info_json, file_op in items:
            source = sources.get(event_id)
            file = source.get("file") if isinstance(source, dict) else None
            events.append(event(EventKind.WITHDRAWN, {
                "info_dict": parse_json(info_json), "reason": "withdrawn", "backend": "aoe",
                "withdrawn_event": event_id, **({"file_op": file_op} if file_op else {}),
                "source": {"tree": paths[-1], "mirror": paths,
                           **({"file": file} if isinstance(file, str) else {})}}, key, op_type))
            withdrawn.append(Withdrawal(soc, key, op_type, file if isinstance(file, str) else None))
        events.append(event(EventKind.TASK_FINISHED, {"status": "successful"}))
    return events, withdrawn
