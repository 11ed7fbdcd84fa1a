"""The event: the one thing the bank stores. Everything else is derived from a sequence of these.

An :class:`Event` is what a caller proposes; its ``event_id`` is derived from its content, so the
same event appended twice is recognised and skipped. A :class:`StoredEvent` is an event the log
accepted: it has a position (``seq``) and a place in the hash chain.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from functools import cached_property
from typing import Any

from bank.canonical import canonical_json, sha256_hex
from bank.errors import EventValidationError

GENESIS_HASH = "0" * 64


class EventKind(StrEnum):
    """Every kind of event the log holds."""

    TASK_STARTED = "task_started"
    HIT = "hit"
    ADD = "add"
    UPDATE = "update"
    RESERVED = "reserved"
    UNSATISFIED = "unsatisfied"
    TASK_FINISHED = "task_finished"


OUTCOME_KINDS = frozenset(
    {EventKind.HIT, EventKind.ADD, EventKind.UPDATE, EventKind.RESERVED, EventKind.UNSATISFIED}
)
POLICY_KINDS = frozenset({EventKind.ADD, EventKind.UPDATE})
TUNE_MODES = ("Format", "Schedule", "Impl")
TASK_STATUSES = ("successful", "failed")


def utc_now() -> datetime:
    """The current time in UTC (a single place so tests can freeze it)."""
    return datetime.now(UTC)


def format_time(moment: datetime) -> str:
    """Render a time as the log stores it: ISO 8601 in UTC with microseconds and a ``Z``."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


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

    @cached_property
    def payload_json(self) -> str:
        """The payload as the log stores it (canonical JSON)."""
        return canonical_json(dict(self.payload))

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

    @cached_property
    def event_id(self) -> str:
        """32 hex digits of the SHA-256 of the event's canonical content."""
        return event_id_of(self.content())


@dataclass(frozen=True)
class StoredEvent:
    """An event as the log holds it: content plus position and hash chain."""

    seq: int
    event_id: str
    event: Event
    prev_hash: str
    hash: str

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready view of the stored event, payload decoded."""
        out = self.event.content()
        out["payload"] = dict(self.event.payload)
        return {"seq": self.seq, "event_id": self.event_id, **out,
                "prev_hash": self.prev_hash, "hash": self.hash}


def event_id_of(content: Mapping[str, Any]) -> str:
    """The event id for a content mapping as returned by :meth:`Event.content`."""
    return sha256_hex(canonical_json(dict(content)))[:32]


def chain_hash(prev_hash: str, seq: int, event_id: str, content: Mapping[str, Any]) -> str:
    """The hash of one link: SHA-256 over the previous hash and the event's canonical JSON."""
    body = canonical_json({"seq": seq, "event_id": event_id, **content})
    return sha256_hex(prev_hash + body)


def decode_payload(text: str) -> dict[str, Any]:
    """Decode a stored payload; a payload that is not a JSON object becomes an error."""
    value = json.loads(text)
    if not isinstance(value, dict):
        raise EventValidationError("payload: must be a JSON object")
    return value


def _validate(event: Event) -> None:
    where = f"{event.kind} event"
    if not isinstance(event.kind, EventKind):
        raise EventValidationError(f"kind: unknown event kind {event.kind!r}")
    for name in ("soc_version", "task_id", "recorded_at", "origin"):
        if not isinstance(getattr(event, name), str) or not getattr(event, name):
            raise EventValidationError(f"{where}: field {name} must be a non-empty string")
    if event.kind in OUTCOME_KINDS:
        if not event.repo_key:
            raise EventValidationError(f"{where}: field repo_key is required for outcomes")
        _validate_outcome_payload(where, event.payload, event.kind in POLICY_KINDS)
    try:
        event.payload_json  # noqa: B018 - computing it (and caching it) is the check
    except (TypeError, ValueError) as exc:
        raise EventValidationError(f"{where}: payload is not JSON-serialisable ({exc})") from exc


def _validate_outcome_payload(where: str, payload: Mapping[str, Any], sets_policy: bool) -> None:
    info = payload.get("info_dict")
    if info is not None and not isinstance(info, dict):
        raise EventValidationError(f"{where}: payload.info_dict must be an object")
    for name in ("performance_before_us", "performance_after_us"):
        value = payload.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise EventValidationError(f"{where}: payload.{name} must be a finite number")
        if value < 0:
            raise EventValidationError(f"{where}: payload.{name} must not be negative")
    mode = payload.get("tune_mode")
    if mode is not None and mode not in TUNE_MODES:
        raise EventValidationError(
            f"{where}: payload.tune_mode must be one of {', '.join(TUNE_MODES)}, not {mode!r}"
        )
    if sets_policy:
        if not isinstance(payload.get("knowledge"), dict):
            raise EventValidationError(f"{where}: payload.knowledge (the policy) is required")
        if payload.get("performance_after_us") is None and payload.get("performance_unknown") is not True:
            raise EventValidationError(f"{where}: payload.performance_after_us is required "
                                       "(or performance_unknown: true)")
