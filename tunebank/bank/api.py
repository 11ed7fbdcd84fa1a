"""The bank as the tuner, the importers and the tests use it: open, record, look up, audit."""

from __future__ import annotations

import math
import os
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from tunebank.bank.canonical import canonical_json
from tunebank.bank.errors import BankError, BankLocationError, OutcomeRuleError, UnknownTaskError
from tunebank.bank.events import (
    KEYED_KINDS,
    KIND,
    Event,
    EventKind,
    EventRow,
    StoredEvent,
    check_row,
    format_time,
    utc_now,
)
from tunebank.bank.location import (
    BankLocation,
    prepare_for_write,
    remove_stale_staging,
    resolve,
    writable,
)
from tunebank.bank.projection import Policy, Projection
from tunebank.bank.store import AppendResult, EventFilter, PolicyFilter, StreamResult, open_store, reads
from tunebank.bank.store.base import EventStore
from tunebank.bank.store.rows import values_to_policy
from tunebank.bank.store.schema.statements import POLICY_COLUMNS
from tunebank.bank.store.schema.version import check_version
from tunebank.bank.tasks import TaskView

if TYPE_CHECKING:
    from tunebank.bank.audit.verify import RebuildReport, VerifyReport
    from tunebank.bank.formats.jsonl import Anchor
    from tunebank.bank.store.migrate import UpgradeReport


@dataclass(frozen=True)
class Outcome:
    """One tuning outcome of one operator key, as the tuner or an importer reports it.

    ``extra`` holds any further payload fields (cost-model version, measurements, ...).
    """

    kind: EventKind
    repo_key: str
    op_name: str | None = None
    op_type: str | None = None
    info_dict: dict[str, Any] = field(default_factory=dict)
    knowledge: dict[str, Any] | None = None
    performance_before_us: float | None = None
    performance_after_us: float | None = None
    tune_mode: str | None = None
    reason: str | None = None
    backend: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def payload(self) -> dict[str, Any]:
        """The event payload: the named fields that are set, then ``extra``."""
        named = {
            "info_dict": self.info_dict,
            "knowledge": self.knowledge,
            "performance_before_us": self.performance_before_us,
            "performance_after_us": self.performance_after_us,
            "tune_mode": self.tune_mode,
            "reason": self.reason,
            "backend": self.backend,
        }
        return {**{k: v for k, v in named.items() if v is not None}, **self.extra}


R = TypeVar("R")

POLICY_REPO_KEY, POLICY_INFO = POLICY_COLUMNS.index("repo_key"), POLICY_COLUMNS.index("info_dict")
"""Where a stored policy row holds what a lookup compares."""


def _not_a_bank(store: EventStore, location: BankLocation) -> BankLocationError:
    """What is wrong with a database that holds no bank: empty (``bank init`` makes one in
    it), or holding other tables."""
    with store.transaction() as db:
        empty = not store.table_names(db)
    if empty:
        return BankLocationError(f"{location.describe()}: an empty database, not a bank yet; "
                                 "`bank init` with the same --db makes one")
    return BankLocationError(f"{location.describe()}: not a tunebank bank (no events table)")


class Bank:
    """A tuning knowledge bank: an event log and the projections derived from it.

    Open one with :meth:`open`; use it as a context manager to release the database.
    """

    def __init__(self, store: EventStore, location: BankLocation) -> None:
        self.store = store
        self.location = location
        self._socs: dict[str, str] = {}
        self.bank_id = reads.meta(store, "bank_id") or "unknown"
        self.origin = f"bank:{self.bank_id}"
        """The origin stamped on events made in this bank."""

    # -- opening ------------------------------------------------------------------------------

    @classmethod
    def open(cls, db: str | None = None, *, create: bool = False,
             env: dict[str, str] | None = None) -> Bank:
        """Open the bank at ``db`` (path or URL), else TUNEBANK_DB, else AOE's bank folder.

        Args:
            db: a file path or a database URL (``sqlite:///PATH``, ``postgresql://...``);
                ``None`` resolves from the environment.
            create: make the bank if it does not exist (otherwise that is an error).
            env: the environment to resolve from (defaults to ``os.environ``).

        Raises:
            BankLocationError: no bank there and ``create`` is false, or it cannot be created.
        """
        location = resolve(db, env)
        if not location.exists and not create:
            raise BankLocationError(
                f"no bank at {location.describe()}; `bank init` creates one"
            )
        if create:
            prepare_for_write(location)
            if location.path is not None:  # a write killed before it finished left these
                remove_stale_staging(location.path)
        read_only = not create and location.path is not None and not writable(location.path)
        made = create and location.path is not None and not location.path.exists()
        store = open_store(location.url, read_only=read_only, given=location.given)
        try:
            if create:
                store.initialise(bank_id=uuid.uuid4().hex[:16])
            elif not store.is_initialised():
                raise _not_a_bank(store, location)
            check_version(store.schema_version(), location.describe())
            return cls(store, location)
        except BaseException:
            store.close()
            if made and location.path is not None:
                # a bank this began and could not finish (a full disk) is no bank: no file of
                # it may stay to be read as "an empty database" by every later command
                for end in ("", "-wal", "-shm", "-journal"):
                    Path(f"{location.path}{end}").unlink(missing_ok=True)
            raise

    def close(self) -> None:
        """Release the database."""
        self.store.close()

    def __enter__(self) -> Bank:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    # -- writing ------------------------------------------------------------------------------

    def append(self, events: Sequence[Event]) -> AppendResult:
        """Append prepared events in one transaction (see :meth:`EventStore.append`)."""
        return self.store.append(events)

    def append_stream(self, make_rows: Callable[[], Iterable[EventRow]], *,
                      checked: bool = False) -> StreamResult:
        """Append a stream of events, each as the log's row, of any length, in one transaction,
        with flat memory (see :meth:`EventStore.append_stream`)."""
        return self.store.append_stream(make_rows, checked=checked)

    def start_task(self, soc_version: str, *, tuning_name: str, model_name: str | None = None,
                   model_hash: str | None = None, job_type: str = "opat",
                   search_mode: str | None = None, task_id: str | None = None,
                   extra: dict[str, Any] | None = None) -> str:
        """Record a ``task_started`` event and return the new task's id."""
        task_id = task_id or uuid.uuid4().hex[:16]
        payload = {"tuning_name": tuning_name, "model_name": model_name, "model_hash": model_hash,
                   "job_type": job_type, "search_mode": search_mode, **(extra or {})}
        self.append([self._event(EventKind.TASK_STARTED, soc_version, task_id,
                                 {k: v for k, v in payload.items() if v is not None})])
        self._socs[task_id] = soc_version
        return task_id

    def outcome_events(self, task_id: str, outcomes: Iterable[Outcome]) -> list[Event]:
        """The events that would record ``outcomes`` in ``task_id`` (nothing is written)."""
        soc = self._soc_of(task_id)
        events = []
        for outcome in outcomes:
            kind = EventKind(outcome.kind)
            if kind not in KEYED_KINDS:  # an outcome, or a withdrawal of a key's entries
                raise OutcomeRuleError(f"{kind} is not an outcome kind")
            events.append(self._event(kind, soc, task_id, outcome.payload(), outcome.repo_key,
                                      outcome.op_name, outcome.op_type))
        return events

    def record(self, task_id: str, outcomes: Iterable[Outcome]) -> AppendResult:
        """Record outcomes of a running task, all or nothing.

        Raises:
            OutcomeRuleError: an outcome breaks the rules; nothing is written.
        """
        return self.append(self.outcome_events(task_id, outcomes))

    def finish_task(self, task_id: str, *, status: str = "successful",
                    tuning_time_s: float | None = None, model_baseline_ms: float | None = None,
                    model_result_ms: float | None = None,
                    failed_operators: Sequence[str] = ()) -> AppendResult:
        """Record ``task_finished``; refused while a hit waits for its update or reserved."""
        payload: dict[str, Any] = {"status": status, "tuning_time_s": tuning_time_s,
                                   "model_baseline_ms": model_baseline_ms,
                                   "model_result_ms": model_result_ms,
                                   "failed_operators": list(failed_operators)}
        event = self._event(EventKind.TASK_FINISHED, self._soc_of(task_id), task_id,
                            {k: v for k, v in payload.items() if v is not None})
        return self.append([event])

    def _event(self, kind: EventKind, soc: str, task_id: str, payload: dict[str, Any],
               repo_key: str | None = None, op_name: str | None = None,
               op_type: str | None = None) -> Event:
        return Event.of(kind, soc, task_id, format_time(utc_now()), self.origin, payload, repo_key,
                        op_name, op_type)

    def _soc_of(self, task_id: str) -> str:
        if task_id not in self._socs:
            self._socs[task_id] = self.task(task_id, exact=True).soc_version
        return self._socs[task_id]

    # -- reading ------------------------------------------------------------------------------

    def lookup(self, soc_version: str,
               operators: Iterable[tuple[str, dict[str, Any]]]) -> dict[str, Policy]:
        """The stored policy of each (repo_key, info_dict) that the bank knows, in one query.

        A stored entry is returned only when its info_dict equals the one asked for, so a
        repo_key collision never hands one operator another's policy.
        """
        wanted = {key: info for key, info in operators}
        found = {}
        for row in reads.policy_rows_for_keys(self.store, soc_version, list(wanted)):
            key, stored_info = row[POLICY_REPO_KEY], row[POLICY_INFO]
            info = wanted[key]
            if stored_info == canonical_json(info or {}):  # equal dicts, equal text: undecoded
                found[key] = values_to_policy(row, info_dict=dict(info or {}))
        return found

    def searched_without_gain(self, soc_version: str,
                              operators: Iterable[tuple[str, dict[str, Any]]]) -> dict[str, float | None]:
        """The keys whose search already ended ``unsatisfied`` for lack of gain, in one query,
        with the default policy's time that search measured.

        Such a key has no policy, but the log says searching it found nothing better than the
        default, so a plain re-tune need not measure it again.
        """
        wanted = dict(operators)
        found: dict[str, float | None] = {}
        for stored in reads.outcomes_for_keys(self.store, soc_version, EventKind.UNSATISFIED,
                                              list(wanted)):
            payload = stored.event.payload
            key = stored.event.repo_key
            if key in wanted and payload.get("reason") == "no_gain" \
                    and payload.get("info_dict") == wanted[key]:
                found[key] = payload.get("performance_before_us")
        return found

    def task(self, task_ref: str, *, exact: bool = False) -> TaskView:
        """The task with id ``task_ref``, or the one task whose id starts with it.

        Raises:
            UnknownTaskError: no task, or several, match.
        """
        matches = reads.tasks_by_prefix(self.store, task_ref)
        exact_match = [t for t in matches if t.task_id == task_ref]
        if exact_match:
            return exact_match[0]
        if exact or not matches:
            raise UnknownTaskError(f"task {task_ref!r}: no such task (see `bank tasks`)")
        if len(matches) > 1:
            names = ", ".join(sorted(t.task_id for t in matches)[:5])
            raise UnknownTaskError(f"task {task_ref!r}: ambiguous, matches {names}")
        return matches[0]

    def tasks(self) -> list[TaskView]:
        """Every task, oldest first."""
        return reads.tasks(self.store)

    def policies(self, where: PolicyFilter | None = None, *, at_seq: int | None = None,
                 as_of: str | None = None) -> list[Policy]:
        """The current policies, or with ``at_seq``/``as_of`` the policies as they were then.

        Time travel folds the log's add and update events up to that seq (or recorded_at time)
        afresh, so it needs no stored history of the projection.
        """
        where = where or PolicyFilter()
        if at_seq is None and as_of is None:
            return reads.policies(self.store, where)
        rows = reads.event_rows(self.store, EventFilter(
            until_seq=at_seq, until_time=as_of,
            kinds=(EventKind.ADD, EventKind.UPDATE, EventKind.WITHDRAWN),
            soc_version=where.soc_version, op_type=where.op_type, repo_key=where.repo_key))
        projection = Projection()
        for row in rows:
            check_row(row)
            if row[KIND] == EventKind.WITHDRAWN:
                projection.offer_withdrawal(row)
            else:
                projection.offer_policy(row)
        chosen = [p for p in projection.policies.values()
                  if where.backend in (None, p.backend)
                  and where.cost_model_version in (None, p.cost_model_version)]
        return sorted(chosen, key=lambda p: (p.soc_version, p.op_type or "", p.repo_key))

    def history(self, *, repo_key: str | None = None, op_name: str | None = None,
                op_type: str | None = None, soc_version: str | None = None) -> list[StoredEvent]:
        """Every outcome event (and withdrawal) of a key, an op name or an op type, oldest
        first."""
        kinds = tuple(str(k) for k in KEYED_KINDS)
        where = EventFilter(repo_key=repo_key, op_name=op_name, op_type=op_type,
                            soc_version=soc_version, kinds=kinds)
        found = {stored.seq: stored for stored in reads.events(self.store, where)}
        if op_type is not None:  # withdrawn entries of a bank file of that op type: their keys'
            for gone in reads.events(self.store, EventFilter(   # history ends in the withdrawal
                    kinds=(str(EventKind.WITHDRAWN),), soc_version=soc_version)):
                if gone.event.payload.get("file_op") == op_type and (
                        repo_key in (None, gone.event.repo_key)):
                    found.update((s.seq, s) for s in reads.events(self.store, EventFilter(
                        repo_key=gone.event.repo_key, soc_version=gone.event.soc_version,
                        op_name=op_name, kinds=kinds)))
        return [found[seq] for seq in sorted(found)]

    def events(self, since: int = 0, until: int | None = None, *,
               task_id: str | None = None) -> Iterator[StoredEvent]:
        """The raw log after seq ``since`` (up to ``until``; of one task), streamed oldest first."""
        return reads.events(self.store, EventFilter(since_seq=since, until_seq=until, task_id=task_id))

    def event_rows(self) -> Iterator[tuple[Any, ...]]:
        """The whole log as stored rows (the events table's columns), oldest first, nothing
        decoded: what an export writes."""
        return reads.event_rows(self.store)

    def policy_times(self, soc_version: str | None = None) -> Iterator[tuple[str, str, str | None, float]]:
        """(soc_version, repo_key, op_type, best_us) of every policy (of one chip), nothing
        else decoded."""
        return reads.policy_times(self.store, soc_version)

    def head(self) -> int:
        """The seq of the last event (0 for an empty bank)."""
        return reads.head(self.store)[0]

    # -- auditing -----------------------------------------------------------------------------

    def verify(self, anchor: Anchor | None = None) -> VerifyReport:
        """Check the database, the log and the projections, and with ``anchor`` that the log
        passes through a link recorded elsewhere (see :func:`bank.audit.verify.verify`)."""
        from tunebank.bank.audit.verify import verify  # the audit's modules load only for an audit

        return verify(self.store, anchor)

    def rebuild(self, *, force: bool = False, reindex: bool = False) -> RebuildReport:
        """Re-derive every projection from a log that verifies (any log with ``force``), after a
        REINDEX with ``reindex`` (see :func:`bank.audit.verify.rebuild`).

        Raises:
            BankError: verify finds the log broken and ``force`` is not given.
        """
        from tunebank.bank.audit.verify import rebuild

        return rebuild(self.store, force=force, reindex=reindex)


def write_to_bank(db: str | None, work: Callable[[Bank], R]) -> R:
    """Run ``work`` (one all-or-nothing write) on the bank at ``db``, made if it does not exist:
    what an import or a merge into a bank that may not exist yet needs.

    A new bank file is made under a temporary name beside it and linked into place only when
    ``work`` succeeded, so a write that fails (a bad line deep in a long events file) leaves no
    bank behind, and no folder this made. The link refuses to replace a file: if another process
    made the bank meanwhile, ``work`` runs again on that bank (``work`` must be repeatable). A
    bank that exists, or a server's, is written as it is: its transaction undoes a failed write.
    """
    location = resolve(db)
    target = location.path
    if target is None or location.exists:
        with Bank.open(db, create=True) as bank:
            return work(bank)
    made = [folder for folder in (target.parent, *target.parent.parents) if not folder.exists()]
    remove_stale_staging(target)
    staging = target.with_name(f".{target.name}.{os.getpid()}.new")
    try:
        try:
            with Bank.open(str(staging), create=True) as bank:
                result = work(bank)
        except BankError as exc:  # named as the user named it, not by its staging name
            raise BankError(str(exc).replace(str(staging), str(target))) from None
        try:
            os.link(staging, target)  # never over a bank another process made meanwhile
        except OSError:  # made meanwhile by another process, or no hard links on this file
            with Bank.open(db, create=True) as bank:  # system: write the bank where it is
                return work(bank)
        return result
    finally:
        for leftover in (staging, Path(f"{staging}-wal"), Path(f"{staging}-shm")):
            leftover.unlink(missing_ok=True)
        if not target.exists():
            for folder in made:  # innermost first
                with suppress(OSError):
                    folder.rmdir()


def upgrade_bank(db: str | None = None, *, env: dict[str, str] | None = None) -> UpgradeReport:
    """Bring the bank at ``db`` to this tunebank's schema version (see :mod:`bank.store.migrate`):
    the one way to open a bank of an older schema, which :meth:`Bank.open` refuses.

    Raises:
        BankLocationError: there is no bank there.
        SchemaVersionError: the bank is newer than this tunebank.
    """
    from tunebank.bank.store.migrate import (
        upgrade,  # the tables' DDL: SQLModel is loaded only here
    )

    location = resolve(db, env)
    if not location.exists:
        raise BankLocationError(f"no bank at {location.describe()}")
    prepare_for_write(location)
    store = open_store(location.url, given=location.given)
    try:
        if not store.is_initialised():
            raise _not_a_bank(store, location)
        return upgrade(store, location.describe())
    finally:
        store.close()


def op_types(bank: Bank) -> list[str]:
    """Every operator type ``bank``'s policies name (their own and their bank files'), sorted:
    what a search that found nothing tells the user the bank does hold."""
    return reads.op_types(bank.store)


def policy_json(policy: Policy) -> dict[str, Any]:
    """A JSON-ready view of one policy."""
    return {
        "soc_version": policy.soc_version,
        "repo_key": policy.repo_key,
        "op_type": policy.op_type,
        "best_us": policy.best_us if math.isfinite(policy.best_us) else None,
        "info_dict": policy.info_dict,
        "knowledge": policy.knowledge,
        "tune_mode": policy.tune_mode,
        "backend": policy.backend,
        "cost_model_version": policy.cost_model_version,
        "task_id": policy.task_id,
        "seq": policy.seq,
        "event_id": policy.event_id,
        "origin": policy.origin,
        **({"file_op": policy.file_op} if policy.file_op else {}),
    }


def task_json(task: TaskView) -> dict[str, Any]:
    """A JSON-ready view of one task, its repo_summary under AOE's names."""
    return {
        "task_id": task.task_id,
        "soc_version": task.soc_version,
        "tuning_name": task.tuning_name,
        "model_name": task.model_name,
        "model_hash": task.model_hash,
        "job_type": task.job_type,
        "search_mode": task.search_mode,
        "status": task.status,
        "started_at": task.started_at,
        "finished_at": task.finished_at,
        "tuning_time_s": task.tuning_time_s,
        "model_baseline_ms": task.model_baseline_ms,
        "model_result_ms": task.model_result_ms,
        "failed_operators": list(task.failed_operators),
        "origin": task.origin,
        "repo_summary": task.repo_summary(),
        "withdrawn_num": task.withdrawn_num,
    }


__all__ = ["Bank", "Outcome", "policy_json", "task_json", "upgrade_bank", "write_to_bank"]
