"""The event: the one thing the bank stores. Everything else is derived from a sequence of these.

An :class:`Event` is what a caller proposes; its ``event_id`` is derived from its content, so the
same event appended twice is recognised and skipped. A :class:`StoredEvent` is an event the log
accepted: it has a position (``seq``) and a place in the hash chain.

The passes that move events by the thousand (import, merge, verify, rebuild) never build either:
they carry each event as an :data:`EventRow`, the tuple the log's table holds, read by the
column names below, and decode its payload only where the fold reads it (:func:`row_payload`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from json.encoder import encode_basestring
from typing import Any, Generic, TypeVar

from tunebank.bank.canonical import canonical_json, finite_number, parse_json, sha256_hex, shown
from tunebank.bank.errors import EventValidationError

GENESIS_HASH = "0" * 64

EventRow = tuple[Any, ...]
"""One event as the log's ``events`` table holds it, its columns in this order (the names below
index it): the bulk paths' one form of an event. An event not yet placed in a chain has
``None`` for its seq, prev_hash and hash; one read from elsewhere (an events file, another
bank) carries the place it had there."""
(SEQ, EVENT_ID, KIND, SOC_VERSION, REPO_KEY, TASK_ID, OP_NAME, OP_TYPE, RECORDED_AT, ORIGIN,
 PAYLOAD, PREV_HASH, HASH) = range(13)


class EventKind(StrEnum):
    """Every kind of event the log holds."""

    TASK_STARTED = "task_started"
    HIT = "hit"
    ADD = "add"
    UPDATE = "update"
    RESERVED = "reserved"
    UNSATISFIED = "unsatisfied"
    WITHDRAWN = "withdrawn"
    """An entry a bank tree no longer holds (``bank import --mirror``): its untimed knowledge
    recorded up to then is retired. Not one of AOE's outcomes: no repo_summary counts it."""
    TASK_FINISHED = "task_finished"


OUTCOME_KINDS = frozenset(
    {EventKind.HIT, EventKind.ADD, EventKind.UPDATE, EventKind.RESERVED, EventKind.UNSATISFIED}
)
POLICY_KINDS = frozenset({EventKind.ADD, EventKind.UPDATE})
KEYED_KINDS = OUTCOME_KINDS | {EventKind.WITHDRAWN}
"""The kinds that name an operator key (a repo_key), each at most once per key in a task but
for a hit and what follows it."""
TUNE_MODES = ("Format", "Schedule", "Impl")
TASK_STATUSES = ("successful", "failed")


T = TypeVar("T")


class once(Generic[T]):
    """:func:`functools.cached_property` without its lock. Python 3.11's takes an RLock on every
    first read, and an events file's reader reads three of these per event: without the lock
    it reads 100,000 events in 2.18 s instead of 2.35 s (best of 5). An event is built and read
    by one thread, so nothing needs the lock (3.12 dropped it for the same reason)."""

    def __init__(self, compute: Callable[[Any], T]) -> None:
        self.compute = compute
        self.name = compute.__name__
        self.__doc__ = compute.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, instance: object, owner: type | None = None) -> T:
        if instance is None:
            return self  # type: ignore[return-value]  # read on the class: the descriptor
        value = self.compute(instance)
        instance.__dict__[self.name] = value
        return value


def utc_now() -> datetime:
    """The current time in UTC (a single place so tests can freeze it)."""
    return datetime.now(UTC)


def format_time(moment: datetime) -> str:
    """Render a time as the log stores it: ISO 8601 in UTC with microseconds and a ``Z``."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    text = moment.astimezone(UTC).isoformat(timespec="microseconds")  # a quarter of strftime's cost
    return text.removesuffix("+00:00") + "Z"


def parse_time(text: str) -> datetime:
    """Parse a time given by a user or stored in the log; naive times are taken as UTC.

    Raises:
        ValueError: ``text`` is not an ISO 8601 date or time.
    """
    moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


@dataclass(frozen=True)
class Event:
    """A proposed event: its content, and an ``event_id`` derived from that content.

    ``repo_key`` and ``op_name`` are ``None`` for task events; ``payload`` is any JSON object.
    """

    kind: EventKind
    soc_version: str
    task_id: str
    recorded_at: str
    origin: str
    payload: Mapping[str, Any] = field(default_factory=dict)
    repo_key: str | None = None
    op_name: str | None = None
    op_type: str | None = None

    def __post_init__(self) -> None:
        _validate(self)
        try:
            self.payload_json  # noqa: B018 - computing it (and caching it) is the check
        except (TypeError, ValueError, RecursionError) as exc:
            raise EventValidationError(f"{self.kind} event: payload is not JSON-serialisable "
                                       f"({exc})") from exc

    @classmethod
    def of(cls, kind: EventKind, soc_version: str, task_id: str, recorded_at: str, origin: str,
           payload: Mapping[str, Any], repo_key: str | None = None, op_name: str | None = None,
           op_type: str | None = None) -> Event:
        """``Event(...)`` by position, for the paths that make events by the thousand: the same
        checks, without the frozen dataclass's per-field ``__setattr__``.

        Raises:
            EventValidationError: a field is missing or wrong, or the payload is not JSON.
        """
        event = object.__new__(cls)
        event.__dict__.update(kind=kind, soc_version=soc_version, task_id=task_id,
                              recorded_at=recorded_at, origin=origin, payload=payload,
                              repo_key=repo_key, op_name=op_name, op_type=op_type)
        event.__post_init__()
        return event

    @classmethod
    def stored(cls, kind: str, soc_version: str, task_id: str, recorded_at: str, origin: str,
               payload_json: str, repo_key: str | None = None, op_name: str | None = None,
               op_type: str | None = None) -> Event:
        """An event as a log holds it, its payload text kept byte for byte (the hashes cover
        those bytes, not a re-encoding): the fields are checked, nothing is encoded again.

        Raises:
            EventValidationError: a field is missing or wrong, or the payload is not an object.
            ValueError: ``kind`` is not an event kind.
        """
        event = object.__new__(cls)
        event.__dict__.update(kind=EventKind(kind), soc_version=soc_version, task_id=task_id,
                              recorded_at=recorded_at, origin=origin,
                              payload=decode_payload(payload_json), repo_key=repo_key,
                              op_name=op_name, op_type=op_type, payload_json=payload_json)
        _validate(event)
        return event

    @once
    def payload_json(self) -> str:
        """The payload as the log stores it (canonical JSON)."""
        return canonical_json(dict(self.payload))

    @once
    def info_json(self) -> str:
        """The canonical JSON of ``payload.info_dict`` (``{}`` if it has none): what a policy
        stores and what its info_digest is taken over, encoded once."""
        return canonical_json(dict(self.payload.get("info_dict") or {}))

    def content(self) -> dict[str, Any]:
        """The fields the event_id is computed over (everything but position and chain)."""
        return {
            "kind": str(self.kind),
            "soc_version": self.soc_version,
            "repo_key": self.repo_key,
            "task_id": self.task_id,
            "op_name": self.op_name,
            "op_type": self.op_type,
            "recorded_at": self.recorded_at,
            "origin": self.origin,
            "payload": self.payload_json,
        }

    @once
    def _halves(self) -> tuple[str, str]:
        return content_halves(str(self.kind), self.soc_version, self.repo_key, self.task_id,
                              self.op_name, self.op_type, self.recorded_at, self.origin,
                              self.payload_json)

    @once
    def event_id(self) -> str:
        """32 hex digits of the SHA-256 of the event's canonical content."""
        head, tail = self._halves
        return hashlib.sha256((head + tail).encode("utf-8")).hexdigest()[:32]

    def link_hash(self, prev_hash: str, seq: int, event_id: str | None = None) -> str:
        """:func:`chain_hash` of this event at ``seq`` after ``prev_hash`` (with its own id unless
        ``event_id`` is given), from the content JSON built once."""
        head, tail = self._halves
        return link_hash(prev_hash, seq, self.event_id if event_id is None else event_id, head, tail)

    def row(self, seq: int | None = None, prev_hash: str | None = None,
            link: str | None = None) -> EventRow:
        """The event as the log stores it, at ``seq`` after ``prev_hash`` with ``link`` (all
        ``None`` for an event not yet placed in a chain)."""
        return (seq, self.event_id, str(self.kind), self.soc_version, self.repo_key, self.task_id,
                self.op_name, self.op_type, self.recorded_at, self.origin, self.payload_json,
                prev_hash, link)


@dataclass(frozen=True)
class StoredEvent:
    """An event as the log holds it: content plus position and hash chain."""

    seq: int
    event_id: str
    event: Event
    prev_hash: str
    hash: str

    @classmethod
    def of(cls, seq: int, event_id: str, event: Event, prev_hash: str, link: str) -> StoredEvent:
        """``StoredEvent(...)`` for the passes that read a whole log: the same value, without
        the frozen dataclass's per-field ``__setattr__``."""
        stored = object.__new__(cls)
        stored.__dict__.update(seq=seq, event_id=event_id, event=event, prev_hash=prev_hash,
                               hash=link)
        return stored

    def row(self) -> EventRow:
        """The stored event as the log's table holds it."""
        return self.event.row(self.seq, self.prev_hash, self.hash)

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready view of the stored event, payload decoded."""
        out = self.event.content()
        out["payload"] = dict(self.event.payload)
        return {"seq": self.seq, "event_id": self.event_id, **out,
                "prev_hash": self.prev_hash, "hash": self.hash}


_KIND_NAMES = frozenset(str(kind) for kind in EventKind)
_OUTCOME_NAMES = frozenset(str(kind) for kind in KEYED_KINDS)
_POLICY_NAMES = frozenset(str(kind) for kind in POLICY_KINDS)


def readable_row(row: EventRow) -> bool:
    """Whether :func:`check_row` passes ``row``, with no message made (for the chain
    workers, which only need to know)."""
    try:
        check_row(row)
    except (EventValidationError, ValueError, TypeError, AttributeError):
        return False
    return True


def check_row(row: EventRow) -> None:
    """Check what a whole-log pass reads of a stored row before it folds it: a known kind, the
    required fields, a payload shaped as a JSON object (decoded, and an add's or update's
    checked, only when the fold reads it: :func:`row_payload`).

    Raises:
        EventValidationError: a required field is empty, or the payload is not an object.
        ValueError: the kind is not an event kind.
    """
    kind = row[KIND]
    if kind not in _KIND_NAMES:
        raise ValueError(f"{shown(kind)} is not a valid EventKind")
    if not (row[SOC_VERSION] and row[TASK_ID] and row[RECORDED_AT] and row[ORIGIN]) or \
            (kind in _OUTCOME_NAMES and not row[REPO_KEY]):
        raise EventValidationError(f"{kind} event: a required field is empty")
    payload = row[PAYLOAD]  # shaped as an object; decoded only when a fold reads it
    if not (isinstance(payload, str) and payload.startswith("{") and payload.endswith("}")):
        raise EventValidationError(f"{kind} event: payload must be a JSON object")


def row_payload(row: EventRow) -> dict[str, Any]:
    """A stored row's payload, decoded; an add's or update's is checked as an Event's would be
    (the fold reads its policy from it).

    Raises:
        EventValidationError: the payload is not a JSON object, or not a valid policy.
    """
    value = decode_payload(row[PAYLOAD])
    if row[KIND] in _POLICY_NAMES:
        _validate_outcome_payload(f"{row[KIND]} event", value, True)
    return value


def json_string(value: str | None) -> str:
    """A string (or ``None``) as JSON, exactly as :func:`canonical_json` writes it."""
    return "null" if value is None else encode_basestring(value)


def content_halves(kind: str, soc_version: str, repo_key: str | None, task_id: str,
                   op_name: str | None, op_type: str | None, recorded_at: str, origin: str,
                   payload_json: str) -> tuple[str, str]:
    """The canonical JSON of an event's content, split where the chain's ``seq`` goes.

    ``head + tail`` is exactly ``canonical_json(content)`` (the keys in sorted order, each value
    encoded once); the chain body puts ``event_id`` first and ``seq`` between the two. Built by
    hand because it runs for every event written, read or verified; tests/bank/test_encoding.py
    holds it equal to :func:`canonical_json` on arbitrary content.
    """
    head = (f'{{"kind":{json_string(kind)},"op_name":{json_string(op_name)},"op_type":{json_string(op_type)},'
            f'"origin":{json_string(origin)},"payload":{json_string(payload_json)},'
            f'"recorded_at":{json_string(recorded_at)},"repo_key":{json_string(repo_key)},')
    tail = f'"soc_version":{json_string(soc_version)},"task_id":{json_string(task_id)}}}'
    return head, tail


def link_hash(prev_hash: str, seq: int, event_id: str, head: str, tail: str) -> str:
    """:func:`chain_hash` from the halves :func:`content_halves` made."""
    body = f'{{"event_id":{json_string(event_id)},{head[1:]}"seq":{seq:d},{tail}'
    return hashlib.sha256((prev_hash + body).encode("utf-8")).hexdigest()


def event_id_of(content: Mapping[str, Any]) -> str:
    """The event id for a content mapping as returned by :meth:`Event.content` (the reference
    definition; the write path builds the same bytes with :func:`content_halves`)."""
    return sha256_hex(canonical_json(dict(content)))[:32]


def chain_hash(prev_hash: str, seq: int, event_id: str, content: Mapping[str, Any]) -> str:
    """The hash of one link: SHA-256 over the previous hash and the event's canonical JSON (the
    reference definition; see :func:`link_hash`)."""
    body = canonical_json({"seq": seq, "event_id": event_id, **content})
    return sha256_hex(prev_hash + body)


def decode_payload(text: str) -> dict[str, Any]:
    """Decode a stored payload; a payload that is not a JSON object becomes an error."""
    try:
        value = parse_json(text)
    except (TypeError, ValueError) as exc:
        raise EventValidationError(f"payload: not JSON ({exc})") from exc
    if not isinstance(value, dict):
        raise EventValidationError("payload: must be a JSON object")
    return value


def _validate(event: Event) -> None:
    kind, payload = event.kind, event.payload
    soc, task, at, origin = event.soc_version, event.task_id, event.recorded_at, event.origin
    repo_key, op_name, op_type = event.repo_key, event.op_name, event.op_type
    if not (isinstance(kind, EventKind) and isinstance(payload, Mapping)
            and type(soc) is str and soc and type(task) is str and task
            and type(at) is str and at and type(origin) is str and origin
            and (repo_key is None or type(repo_key) is str)
            and (op_name is None or type(op_name) is str)
            and (op_type is None or type(op_type) is str)):
        _refuse_fields(event)  # every field checked in one test above; this names the bad one
    if kind in KEYED_KINDS:
        if not repo_key:
            raise EventValidationError(f"{kind} event: field repo_key is required for outcomes")
        _validate_outcome_payload(f"{kind} event", payload, kind in POLICY_KINDS)


def _refuse_fields(event: Event) -> None:
    """Raise the error that names the first field of ``event`` that is wrong."""
    where = f"{event.kind} event"
    if not isinstance(event.kind, EventKind):
        raise EventValidationError(f"kind: unknown event kind {shown(event.kind)}")
    if not isinstance(event.payload, Mapping):
        raise EventValidationError(f"{where}: payload must be a JSON object")
    for name in ("soc_version", "task_id", "recorded_at", "origin"):
        if not isinstance(getattr(event, name), str) or not getattr(event, name):
            raise EventValidationError(f"{where}: field {name} must be a non-empty string")
    for name in ("repo_key", "op_name", "op_type"):
        if getattr(event, name) is not None and not isinstance(getattr(event, name), str):
            raise EventValidationError(f"{where}: field {name} must be a string or null, not "
                                       f"{shown(getattr(event, name))}")


def _validate_outcome_payload(where: str, payload: Mapping[str, Any], sets_policy: bool) -> None:
    info = payload.get("info_dict")
    if info is not None and not isinstance(info, dict):
        raise EventValidationError(f"{where}: payload.info_dict must be an object")
    for name in ("performance_before_us", "performance_after_us"):
        value = payload.get(name)
        if value is None:
            continue
        if not finite_number(value):
            raise EventValidationError(f"{where}: payload.{name} must be a finite number")
        if value < 0:
            raise EventValidationError(f"{where}: payload.{name} must not be negative")
    mode = payload.get("tune_mode")
    if mode is not None and (not isinstance(mode, str) or mode not in TUNE_MODES):
        raise EventValidationError(
            f"{where}: payload.tune_mode must be one of {', '.join(TUNE_MODES)}, not {shown(mode)}"
        )
    for name in ("backend", "cost_model_version"):  # policy columns: text, or nothing
        if payload.get(name) is not None and not isinstance(payload[name], str):
            raise EventValidationError(f"{where}: payload.{name} must be a string, not "
                                       f"{shown(payload[name])}")
    if sets_policy:
        if not isinstance(payload.get("knowledge"), dict):
            raise EventValidationError(f"{where}: payload.knowledge (the policy) is required")
        if payload.get("performance_after_us") is None and payload.get("performance_unknown") is not True:
            raise EventValidationError(f"{where}: payload.performance_after_us is required "
                                       "(or performance_unknown: true)")
