"""Conversions between table rows and the domain's frozen values."""

from __future__ import annotations

import json
from dataclasses import fields
from typing import Any

from bank.canonical import canonical_json
from bank.events import Event, EventKind, StoredEvent, decode_payload
from bank.projection import Policy, TaskView
from bank.schema import EventRow, PolicyRow, TaskRow


def event_to_row(stored: StoredEvent) -> dict[str, Any]:
    """The column values of one stored event, ready for a bulk insert."""
    event = stored.event
    return {
        "seq": stored.seq,
        "event_id": stored.event_id,
        "kind": str(event.kind),
        "soc_version": event.soc_version,
        "repo_key": event.repo_key,
        "task_id": event.task_id,
        "op_name": event.op_name,
        "op_type": event.op_type,
        "recorded_at": event.recorded_at,
        "origin": event.origin,
        "payload": event.payload_json,
        "prev_hash": stored.prev_hash,
        "hash": stored.hash,
    }


def row_to_event(row: EventRow) -> StoredEvent:
    """Rebuild the domain value of a stored row, exactly as it is (no re-derivation of ids)."""
    event = Event(
        kind=EventKind(row.kind),
        soc_version=row.soc_version,
        task_id=row.task_id,
        recorded_at=row.recorded_at,
        origin=row.origin,
        payload=decode_payload(row.payload),
        repo_key=row.repo_key,
        op_name=row.op_name,
        op_type=row.op_type,
    )
    return StoredEvent(seq=row.seq, event_id=row.event_id, event=event,
                       prev_hash=row.prev_hash, hash=row.hash)


def policy_to_row(policy: Policy) -> dict[str, Any]:
    """The column values of one policy."""
    values = _shallow(policy)
    values["info_dict"] = canonical_json(policy.info_dict)
    values["knowledge"] = canonical_json(policy.knowledge)
    return values


def row_to_policy(row: PolicyRow) -> Policy:
    """The domain value of one policy row."""
    values = row.model_dump()
    values["info_dict"] = json.loads(row.info_dict)
    values["knowledge"] = json.loads(row.knowledge)
    return Policy(**values)


def task_to_row(task: TaskView) -> dict[str, Any]:
    """The column values of one task."""
    values = _shallow(task)
    values["failed_operators"] = canonical_json(list(task.failed_operators))
    return values


def row_to_task(row: TaskRow) -> TaskView:
    """The domain value of one task row."""
    values = row.model_dump()
    values["failed_operators"] = tuple(json.loads(row.failed_operators))
    return TaskView(**values)


def _shallow(value: Any) -> dict[str, Any]:
    """A dataclass's fields as a dict, without ``asdict``'s deep copy."""
    return {f.name: getattr(value, f.name) for f in fields(value)}
