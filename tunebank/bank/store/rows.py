"""Conversions between table rows and the domain's frozen values.

The store reads and writes plain tuples in the column order of :mod:`bank.store.schema.statements`;
these turn them into the domain's values and back.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import fields
from typing import Any

import orjson

from tunebank.bank.canonical import canonical_json, parse_json
from tunebank.bank.events import (
    EVENT_ID,
    OP_TYPE,
    ORIGIN,
    RECORDED_AT,
    REPO_KEY,
    SEQ,
    SOC_VERSION,
    TASK_ID,
    Event,
    EventRow,
    StoredEvent,
)
from tunebank.bank.projection import Policy, digest_of_json, file_op_of
from tunebank.bank.store.schema.statements import TASK_COLUMNS
from tunebank.bank.tasks import TaskView


def event_values(stored: StoredEvent) -> EventRow:
    """The column values of one stored event, in :data:`bank.store.schema.statements.EVENT_COLUMNS`
    order (:meth:`~bank.events.StoredEvent.row`)."""
    return stored.row()


def values_to_event(row: EventRow) -> StoredEvent:
    """The domain value of an events row, exactly as it is stored (no re-derivation of ids).

    Raises:
        EventValidationError, ValueError: the row is not a valid event.
    """
    (seq, event_id, kind, soc, repo_key, task_id, op_name, op_type, recorded_at, origin,
     payload, prev_hash, link) = row
    event = Event.stored(kind, soc, task_id, recorded_at, origin, payload, repo_key, op_name,
                         op_type)
    return StoredEvent(seq, event_id, event, prev_hash, link)


def policy_values(policy: Policy) -> tuple[Any, ...]:
    """The column values of one policy, in :data:`bank.store.schema.statements.POLICY_COLUMNS` order."""
    info = policy.info_json if policy.info_json is not None else canonical_json(policy.info_dict)
    return (policy.soc_version, policy.repo_key, policy.info_digest, policy.op_type,
            info, canonical_json(policy.knowledge), policy.best_us,
            policy.seq, policy.task_id, policy.event_id, policy.origin, policy.tune_mode,
            policy.backend, policy.cost_model_version, policy.recorded_at, policy.file_op)


def policy_row_of(row: EventRow, payload: Mapping[str, Any], info_digest: str | None = None,
                  info_json: str | None = None) -> tuple[Any, ...]:
    """The policy row an add or update event makes: ``policy_values(policy_of(row, payload))``
    built straight from the event's row and decoded payload, with no
    :class:`~bank.projection.Policy` in between (for passes over the whole log).
    ``info_digest`` and ``info_json``: the digest and canonical JSON of its info_dict, if known.

    Raises:
        KeyError, TypeError, ValueError: the event's payload makes no policy.
    """
    p = payload
    if info_json is None:
        info_json = canonical_json(dict(p.get("info_dict") or {}))
    if info_digest is None:
        info_digest = digest_of_json(info_json)
    return (row[SOC_VERSION], row[REPO_KEY], info_digest, row[OP_TYPE], info_json,
            canonical_json(dict(p["knowledge"])), float(p.get("performance_after_us", math.inf)),
            row[SEQ], row[TASK_ID], row[EVENT_ID], row[ORIGIN], p.get("tune_mode"),
            p.get("backend"), p.get("cost_model_version"), row[RECORDED_AT], file_op_of(p))


def row_fingerprint(row: tuple[Any, ...]) -> bytes:
    """A 128-bit digest (SHA-256, cut) of a policy row's values: equal for equal rows, so a
    replay can keep a fingerprint of each row it expects instead of the row.

    The values are encoded by orjson as a JSON array, which tells text from numbers from null
    and an integer from a float; ``best_us`` (column 6) goes in as its ``repr``, since JSON
    has no infinity or NaN. A value orjson refuses (text with a lone surrogate) sends the whole
    row through ``repr`` instead."""
    try:
        data = orjson.dumps((*row[:6], repr(row[6]), *row[7:]))
    except (orjson.JSONEncodeError, IndexError):
        data = b"repr:" + repr(row).encode("utf-8", "surrogatepass")
    return hashlib.sha256(data).digest()[:16]


def values_to_policy(row: tuple[Any, ...], info_dict: dict[str, Any] | None = None) -> Policy:
    """The domain value of a policy row read in :data:`bank.store.schema.statements.POLICY_COLUMNS` order
    (``info_dict``: the row's info_dict, already known, so it is not decoded again)."""
    (soc, key, digest, op_type, info, knowledge, best_us, seq, task_id, event_id, origin, mode,
     backend, cost_model_version, recorded_at, file_op) = row
    return Policy.of(soc, key, digest, op_type, parse_json(info) if info_dict is None else info_dict,
                     parse_json(knowledge), float(best_us), seq, task_id, event_id, origin, mode,
                     backend, cost_model_version, recorded_at, info, file_op)


def task_values(task: TaskView) -> tuple[Any, ...]:
    """The column values of one task, in :data:`bank.store.schema.statements.TASK_COLUMNS` order."""
    values = {f.name: getattr(task, f.name) for f in fields(task)}
    values["failed_operators"] = canonical_json(list(task.failed_operators))
    return tuple(values[name] for name in TASK_COLUMNS)


def values_to_task(row: tuple[Any, ...]) -> TaskView:
    """The domain value of a task row read in :data:`bank.store.schema.statements.TASK_COLUMNS` order."""
    values = dict(zip(TASK_COLUMNS, row, strict=True))
    values["failed_operators"] = tuple(json.loads(values["failed_operators"]))
    return TaskView(**values)

