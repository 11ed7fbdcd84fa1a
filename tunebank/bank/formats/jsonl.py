"""The whole log as JSON Lines: a header with the schema version, then one event per line in
seq order. Reading it back checks every event's id and the hash chain before anything is
appended."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from tunebank.bank.errors import BankError
from tunebank.bank.events import GENESIS_HASH, Event, EventKind, StoredEvent, json_string
from tunebank.bank.formats.jsontext import UNCAPPED, open_regular, parse_json
from tunebank.bank.formats.lines import json_object
from tunebank.bank.names import is_plain_name, why_not_plain

FORMAT = "tunebank-events"
SCHEMA_VERSION = 1


class EventFileError(BankError):
    """An events file is malformed or does not match its own hashes."""


def write_event_rows(handle: IO[str], rows: Iterable[Sequence[Any]], bank_id: str) -> int:
    """Stream events rows (:data:`bank.store.schema.statements.EVENT_COLUMNS` order, as
    :func:`bank.store.reads.event_rows` reads them) to ``handle``, nothing decoded;
    return how many were written."""
    handle.write(header_line(bank_id))
    count = 0
    for row in rows:
        handle.write(event_line(row))
        count += 1
    return count


def header_line(bank_id: str) -> str:
    """The first line of an events file."""
    return json.dumps({"format": FORMAT, "schema_version": SCHEMA_VERSION, "bank_id": bank_id}) + "\n"


def event_line(row: Sequence[Any]) -> str:
    """One stored event (a row in :data:`bank.store.schema.statements.EVENT_COLUMNS` order) as a
    line: a JSON object with sorted keys whose payload is the stored payload text itself,
    spliced in rather than decoded and encoded again (it is already JSON, so the line is too)."""
    (seq, event_id, kind, soc, repo_key, task_id, op_name, op_type, recorded_at, origin, payload,
     prev_hash, link) = row
    return (f'{{"event_id":{json_string(event_id)},"hash":{json_string(link)},"kind":{json_string(kind)},'
            f'"op_name":{json_string(op_name)},"op_type":{json_string(op_type)},"origin":{json_string(origin)},'
            f'"payload":{payload},"prev_hash":{json_string(prev_hash)},'
            f'"recorded_at":{json_string(recorded_at)},"repo_key":{json_string(repo_key)},"seq":{seq:d},'
            f'"soc_version":{json_string(soc)},"task_id":{json_string(task_id)}}}\n')


def is_events_file(path: Path) -> bool:
    """Whether ``path`` starts with this format's header line."""
    try:
        with open_regular(path, EventFileError, limit=UNCAPPED) as handle:
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


@dataclass
class EventsFileInfo:
    """What reading an events file found, filled in as its lines are read."""

    bank_id: str = "unknown"
    events: int = 0
    head_seq: int = 0
    head_hash: str = GENESIS_HASH
    task_ids: set[str] = field(default_factory=set)


@dataclass(frozen=True)
class EventsFile:
    """An events file, checked: its events, the bank it says it comes from, and its head."""

    events: list[Event]
    bank_id: str
    head_seq: int
    head_hash: str


def read_events(path: Path, expect: Anchor | None = None) -> list[Event]:
    """Every event of an events file, checked (see :func:`iter_events_file`)."""
    return read_events_file(path, expect).events


def read_events_file(path: Path, expect: Anchor | None = None) -> EventsFile:
    """An events file, checked, all in memory (see :func:`iter_events_file`, which streams)."""
    info = EventsFileInfo()
    events = [stored.event for stored in iter_events_file(path, expect, info)]
    return EventsFile(events, info.bank_id, info.head_seq, info.head_hash)


def iter_events_file(path: Path, expect: Anchor | None = None,
                     info: EventsFileInfo | None = None) -> Iterator[StoredEvent]:
    """Stream the events of an events file, each as the file places it (its seq, prev_hash and
    hash there) and checked before it is yielded: ids match
    contents, the hash chain holds and, with ``expect``, the chain passes through that link, so
    its history up to there is the one anchored (checked at that link, or at the end). ``info``
    is filled in as the lines are read. One line at a time is in memory.

    Raises:
        EventFileError: the header, a line, an id or a link is wrong (the message names the
            line), or the chain does not pass through ``expect``.
    """
    info = info if info is not None else EventsFileInfo()
    handle = open_regular(path, EventFileError, limit=UNCAPPED)  # streamed: any length
    with handle:
        header = json_object(path, 1, _line(path, 1, handle), EventFileError)
        if header.get("format") != FORMAT:
            raise EventFileError(f"{path}: line 1: not a tunebank events file")
        if header.get("schema_version") != SCHEMA_VERSION:
            raise EventFileError(f"{path}: line 1: schema_version {header.get('schema_version')!r} "
                                 f"is not {SCHEMA_VERSION}, the version this tunebank reads")
        info.bank_id = str(header.get("bank_id", "unknown"))
        anchored = expect is None or (expect.seq == 0 and _at_anchor(path, 0, GENESIS_HASH, expect))
        prev, seq, number = GENESIS_HASH, 0, 1
        while True:
            number += 1
            text = _line(path, number, handle)
            if not text:
                break
            if not text.strip():
                continue
            stored = _stored(path, number, json_object(path, number, text, EventFileError))
            seq += 1
            where = f"{path}: line {number} (seq {stored.seq})"
            event = stored.event
            if not is_plain_name(event.soc_version):
                raise EventFileError(f"{where}: the chip {why_not_plain(event.soc_version)}")
            if stored.seq != seq or stored.prev_hash != prev:
                raise EventFileError(f"{where}: does not follow the event before it")
            if event.event_id != stored.event_id:
                raise EventFileError(f"{where}: event_id does not match the event's content")
            if event.link_hash(prev, seq, stored.event_id) != stored.hash:
                raise EventFileError(f"{where}: hash does not match the event's content")
            prev = stored.hash
            if expect is not None and not anchored:
                anchored = _at_anchor(path, seq, prev, expect)
            info.events, info.head_seq, info.head_hash = seq, seq, prev
            info.task_ids.add(event.task_id)
            yield stored
    if expect is not None and not anchored:
        if expect.seq is None:
            raise EventFileError(f"{path}: no event's hash is the expected head {expect.hash[:16]}...; "
                                 "this is not the history that was anchored")
        raise EventFileError(f"{path}: ends at seq {seq}, before the expected head's seq "
                             f"{expect.seq}")


MAX_LINE = 64 << 20
"""The longest line an events file may have (one event; tunebank's own are about a kilobyte)."""


def _line(path: Path, number: int, handle: IO[bytes]) -> str:
    data = handle.readline(MAX_LINE + 1)
    if len(data) > MAX_LINE:
        raise EventFileError(f"{path}: line {number}: longer than {MAX_LINE >> 20} MiB")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise EventFileError(f"{path}: line {number}: not UTF-8 text (bad byte at offset "
                             f"{exc.start})") from None


def _at_anchor(path: Path, seq: int, link: str, expect: Anchor) -> bool:
    """Whether the link at ``seq`` is the anchor (raises if it is the anchor's seq but not its
    hash)."""
    if expect.seq is None:
        return link == expect.hash
    if seq != expect.seq:
        return False
    if link != expect.hash:
        raise EventFileError(f"{path}: at seq {seq} the hash is {link[:16]}..., not the "
                             f"expected {expect.hash[:16]}...; its history differs from the anchored one")
    return True


def _stored(path: Path, number: int, row: dict[str, Any]) -> StoredEvent:
    try:
        event = Event.of(EventKind(row["kind"]), row["soc_version"], row["task_id"],
                         row["recorded_at"], row["origin"], row["payload"], row.get("repo_key"),
                         row.get("op_name"), row.get("op_type"))
        return StoredEvent(int(row["seq"]), str(row["event_id"]), event, str(row["prev_hash"]),
                           str(row["hash"]))
    except (KeyError, ValueError, TypeError, BankError) as exc:
        raise EventFileError(f"{path}: line {number}: not an event ({exc})") from exc
