"""The whole log as JSON Lines: a header with the schema version, then one event per line in
seq order. Reading it back checks every event's id and the hash chain before anything is
appended."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
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


@dataclass(frozen=True)
class Anchor:
    """A link of a hash chain someone recorded elsewhere: the hash at ``seq`` (any seq if None)."""

    hash: str
    seq: int | None = None

    @classmethod
    def parse(cls, text: str) -> Anchor:
        """``HASH`` or ``SEQ:HASH``, as ``bank verify --head`` prints them.

        Raises:
            EventFileError: the text is neither.
        """
        seq, _, digest = text.strip().rpartition(":")
        if not re.fullmatch(r"[0-9a-f]{64}", digest) or (seq and not seq.isdigit()):
            raise EventFileError(f"--expect-head: {text!r} is not HASH or SEQ:HASH (64 hex digits)")
        return cls(digest, int(seq) if seq else None)


@dataclass(frozen=True)
class EventsFile:
    """An events file, checked: its events, the bank it says it comes from, and its head."""

    events: list[Event]
    bank_id: str
    head_seq: int
    head_hash: str


def read_events(path: Path, expect: Anchor | None = None) -> list[Event]:
    """Every event of an events file, checked (see :func:`read_events_file`)."""
    return read_events_file(path, expect).events


def read_events_file(path: Path, expect: Anchor | None = None) -> EventsFile:
    """An events file, checked: ids match contents, the hash chain holds and, with ``expect``,
    the chain passes through that link, so its history up to there is the one anchored.

    Raises:
        EventFileError: the header, a line, an id or a link is wrong (the message names the
            line), or the chain does not pass through ``expect``.
    """
    header, events = _checked(path)
    stored = list(events)
    head_seq, head_hash = (stored[-1].seq, stored[-1].hash) if stored else (0, GENESIS_HASH)
    if expect is not None:
        _check_anchor(path, stored, expect)
    return EventsFile([s.event for s in stored], str(header.get("bank_id", "unknown")),
                      head_seq, head_hash)


def _check_anchor(path: Path, stored: list[StoredEvent], expect: Anchor) -> None:
    if expect.seq is None:
        if any(s.hash == expect.hash for s in stored):
            return
        raise EventFileError(f"{path}: no event's hash is the expected head {expect.hash[:16]}...; "
                             "this is not the history that was anchored")
    if expect.seq > len(stored):
        raise EventFileError(f"{path}: ends at seq {len(stored)}, before the expected head's seq "
                             f"{expect.seq}")
    found = stored[expect.seq - 1].hash if expect.seq else GENESIS_HASH
    if found != expect.hash:
        raise EventFileError(f"{path}: at seq {expect.seq} the hash is {found[:16]}..., not the "
                             f"expected {expect.hash[:16]}...; its history differs from the anchored one")


def _checked(path: Path) -> tuple[dict[str, Any], Iterator[StoredEvent]]:
    lines = read_text(path, EventFileError).splitlines()
    header = json_object(path, 1, lines[0] if lines else "", EventFileError)
    if header.get("format") != FORMAT:
        raise EventFileError(f"{path}: line 1: not a tunebank events file")
    if header.get("schema_version") != SCHEMA_VERSION:
        raise EventFileError(f"{path}: line 1: schema_version {header.get('schema_version')!r} "
                             f"is not {SCHEMA_VERSION}, the version this tunebank reads")
    return header, _links(path, lines)


def _links(path: Path, lines: list[str]) -> Iterator[StoredEvent]:
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
