"""Conversions between table rows and the domain's frozen values.

The store reads and writes plain tuples in the column order of :mod:`bank.store.statements`;
these turn them into the domain's values and back.
"""

from __future__ import annotations

import json
from dataclasses import fields
from typing import Any

from bank.canonical import canonical_json, parse_json
from bank.events import Event, LoggedEvent, StoredEvent
from bank.projection import Policy
from bank.store.statements import TASK_COLUMNS
from bank.tasks import TaskView


def event_values(stored: StoredEvent) -> tuple[Any, ...]:
    """The column values of one stored event, in :data:`bank.store.statements.EVENT_COLUMNS` order."""
    event = stored.event
    return (stored.seq, stored.event_id, str(event.kind), event.soc_version, event.repo_key,
            event.task_id, event.op_name, event.op_type, event.recorded_at, event.origin,
            event.payload_json, stored.prev_hash, stored.hash)


def values_to_event(row: tuple[Any, ...]) -> StoredEvent:
    """The domain value of an events row, exactly as it is stored (no re-derivation of ids).

    Raises:
        EventValidationError, ValueError: the row is not a valid event.
    """
    (seq, event_id, kind, soc, repo_key, task_id, op_name, op_type, recorded_at, origin,
     payload, prev_hash, link) = row
    event = Event.stored(kind, soc, task_id, recorded_at, origin, payload, repo_key, op_name,
                         op_type)
    return StoredEvent(seq, event_id, event, prev_hash, link)


def values_to_logged(row: tuple[Any, ...]) -> StoredEvent:
    """:func:`values_to_event` for whole-log passes: a :class:`~bank.events.LoggedEvent`, its
    payload decoded only if read.

    Raises:
        EventValidationError, ValueError: the row is not a valid event.
    """
    (seq, event_id, kind, soc, repo_key, task_id, op_name, op_type, recorded_at, origin,
     payload, prev_hash, link) = row
    event = LoggedEvent.from_row(kind, soc, task_id, recorded_at, origin, payload, repo_key,
                                 op_name, op_type)
    return StoredEvent(seq, event_id, event, prev_hash, link)


def policy_values(policy: Policy) -> tuple[Any, ...]:
    """The column values of one policy, in :data:`bank.store.statements.POLICY_COLUMNS` order."""
    info = policy.info_json if policy.info_json is not None else canonical_json(policy.info_dict)
    return (policy.soc_version, policy.repo_key, policy.info_digest, policy.op_type,
            info, canonical_json(policy.knowledge), policy.best_us,
            policy.seq, policy.task_id, policy.event_id, policy.origin, policy.tune_mode,
            policy.backend, policy.cost_model_version)


def values_to_policy(row: tuple[Any, ...], info_dict: dict[str, Any] | None = None) -> Policy:
    """The domain value of a policy row read in :data:`bank.store.statements.POLICY_COLUMNS` order
    (``info_dict``: the row's info_dict, already known, so it is not decoded again)."""
    (soc, key, digest, op_type, info, knowledge, best_us, seq, task_id, event_id, origin, mode,
     backend, cost_model_version) = row
    return Policy(soc, key, digest, op_type, parse_json(info) if info_dict is None else info_dict,
                  parse_json(knowledge),
                  float(best_us), seq, task_id, event_id, origin, mode, backend,
                  cost_model_version, info)


def task_values(task: TaskView) -> tuple[Any, ...]:
    """The column values of one task, in :data:`bank.store.statements.TASK_COLUMNS` order."""
    values = {f.name: getattr(task, f.name) for f in fields(task)}
    values["failed_operators"] = canonical_json(list(task.failed_operators))
    return tuple(values[name] for name in TASK_COLUMNS)


def values_to_task(row: tuple[Any, ...]) -> TaskView:
    """The domain value of a task row read in :data:`bank.store.statements.TASK_COLUMNS` order."""
    values = dict(zip(TASK_COLUMNS, row, strict=True))
    values["failed_operators"] = tuple(json.loads(values["failed_operators"]))
    return TaskView(**values)

