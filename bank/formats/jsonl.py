"""The whole log as JSON Lines: a header with the schema version, then one event per line in
seq order. Reading it back checks every event's id and the hash chain before anything is
appended."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from bank.errors import BankError
from bank.events import GENESIS_HASH, Event, EventKind, StoredEvent, chain_hash, event_id_of
from bank.formats.jsontext import parse_json, read_text
from bank.formats.lines import json_object

FORMAT = "tunebank-events"
SCHEMA_VERSION = 1


class EventFileError(BankError):
    """An events file is malformed or does not match its own hashes."""


def write_events(handle: IO[str], events: Iterable[StoredEvent], bank_id: str) -> int:
    """Stream ``events`` to ``handle``; return how many were written."""
    handle.write(json.dumps({"format": FORMAT, "schema_version": SCHEMA_VERSION,
                             "bank_id": bank_id}) + "\n")
    count = 0
    for stored in events:
        handle.write(json.dumps(stored.as_dict(), ensure_ascii=False, sort_keys=True) + "\n")
        count += 1
    return count


def is_events_file(path: Path) -> bool:
    """Whether ``path`` starts with this format's header line."""
    try:
        with path.open("rb") as handle:
            first = parse_json(handle.readline(1 << 16) or b"null", str(path), EventFileError)
    except (OSError, BankError):
        return False
    return isinstance(first, dict) and first.get("format") == FORMAT


def read_events(path: Path) -> list[Event]:
    """Every event of an events file, checked: ids match contents and the hash chain holds.

    Raises:
        EventFileError: the header, a line, an id or a link is wrong; the message names the line.
    """
    return [stored.event for stored in _checked(path)]


def _checked(path: Path) -> Iterator[StoredEvent]:
    lines = read_text(path, EventFileError).splitlines()
    header = json_object(path, 1, lines[0] if lines else "", EventFileError)
    if header.get("format") != FORMAT:
        raise EventFileError(f"{path}: line 1: not a tunebank events file")
    if header.get("schema_version") != SCHEMA_VERSION:
        raise EventFileError(f"{path}: line 1: schema_version {header.get('schema_version')!r} "
                             f"is not {SCHEMA_VERSION}, the version this tunebank reads")
    prev, seq = GENESIS_HASH, 0
    for number, text in enumerate(lines[1:], 2):
        if not text.strip():
            continue
        stored = _stored(path, number, json_object(path, number, text, EventFileError))
        seq += 1
        where = f"{path}: line {number} (seq {stored.seq})"
        content = stored.event.content()
        if stored.seq != seq or stored.prev_hash != prev:
            raise EventFileError(f"{where}: does not follow the event before it")
        if event_id_of(content) != stored.event_id:
            raise EventFileError(f"{where}: event_id does not match the event's content")
        if chain_hash(prev, stored.seq, stored.event_id, content) != stored.hash:
            raise EventFileError(f"{where}: hash does not match the event's content")
        prev = stored.hash
        yield stored


def _stored(path: Path, number: int, row: dict[str, Any]) -> StoredEvent:
    try:
        event = Event(kind=EventKind(row["kind"]), soc_version=row["soc_version"],
                      task_id=row["task_id"], recorded_at=row["recorded_at"], origin=row["origin"],
                      payload=row["payload"], repo_key=row.get("repo_key"),
                      op_name=row.get("op_name"), op_type=row.get("op_type"))
        return StoredEvent(int(row["seq"]), str(row["event_id"]), event, str(row["prev_hash"]),
                           str(row["hash"]))
    except (KeyError, ValueError, TypeError, BankError) as exc:
        raise EventFileError(f"{path}: line {number}: not an event ({exc})") from exc
