"""One of AOE's runtime knowledge-bank files, read as CANN and AOE write them and written back.

A file ``{soc}_{cores}_AiCore_{op}_runtime_kb.json`` holds the entries of one chip, core count
and operator type, one JSON object a line: ``{"id", "info_dict", "knowledge", "op",
"version"}``. What real files show (the samples in ../shared/aoe-banks, CANN's ops-nn):

- ``id`` is AOE's own hash of the key's packed bytes. tunebank cannot compute it, many entries
  of a file share one (a hash bucket; AOE compares the key itself), and some exceed 32 bits:
  it is kept as it is, never checked.
- ``version`` is 0 in every shipped file; kept as it is.
- ``info_dict`` and ``knowledge`` differ per operator type; their values are ints, floats
  (``1.0`` stays ``1.0``) and bools, kept exactly (compared as canonical JSON, where ``1``,
  ``1.0`` and ``true`` differ).
- A file may start with a UTF-8 BOM, end without a newline, hold blank lines, be empty, or be
  a bare ``{}``: those hold no entry, and are reported as such (:class:`Gap`), never dropped
  without a word.
- The chip is the file name up to the first ``_<digits>_AiCore_`` (as CANN's build takes it):
  ``Ascend910_9382_16_AiCore_MatMulV3`` is chip ``Ascend910_9382``, 16 cores. The core count
  is part of an entry's identity: the same info_dict can have other knowledge on 16 cores.

An entry's identity in tunebank (its repo_key) is the xxh64 of the canonical JSON of chip, core
count, operator type and info_dict: tunebank's own digest, so two core counts never collide and
re-reading the same entry gives the same key.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import orjson

from tunebank.bank.canonical import shown, xxh64_key
from tunebank.bank.errors import BankError
from tunebank.bank.formats.jsontext import read_text
from tunebank.bank.formats.lines import json_object
from tunebank.bank.names import is_plain_name, why_not_plain

SUFFIX = "_runtime_kb.json"
_FILE = re.compile(r"^(?P<soc>.+?)_(?P<cores>\d+)_AiCore_(?P<op>.+)_runtime_kb\.json$")
LINE_FIELDS = ("id", "info_dict", "knowledge", "op", "version")


class KbFormatError(BankError):
    """A runtime knowledge-bank file (or a tree of them) is malformed."""


@dataclass(frozen=True)
class KbFile:
    """What a bank file's name says: the chip, the core count and the operator type."""

    soc_version: str
    core_num: int
    op_type: str

    @classmethod
    def parse(cls, name: str, where: str | None = None) -> KbFile:
        """The chip, cores and operator of a file name; ``where`` names the file in errors.

        Raises:
            KbFormatError: the name is not ``{soc}_{cores}_AiCore_{op}_runtime_kb.json`` with a
                plain chip and operator name.
        """
        where = where or ascii(name)
        match = _FILE.match(name)
        if match is None:
            raise KbFormatError(f"{where}: name is not {{soc}}_{{cores}}_AiCore_{{op}}{SUFFIX}")
        for what, value in (("chip", match["soc"]), ("operator type", match["op"])):
            if not is_plain_name(value):
                raise KbFormatError(f"{where}: the {what} in the name {why_not_plain(value)}")
        return cls(match["soc"], int(match["cores"]), match["op"])

    @property
    def name(self) -> str:
        """The file's name."""
        return file_name(self.soc_version, self.core_num, self.op_type)


def file_name(soc_version: str, core_num: int, op_type: str) -> str:
    """The bank file of one chip, core count and operator type (names checked by the caller)."""
    return f"{soc_version}_{core_num}_AiCore_{op_type}{SUFFIX}"


def entry_key(soc_version: str, core_num: int, op_type: str, info_dict: Mapping[str, Any]) -> str:
    """An AOE entry's repo_key: the xxh64 (decimal) of chip, cores, operator type and info_dict."""
    return xxh64_key({"core_num": core_num, "info_dict": dict(info_dict), "op_type": op_type,
                      "soc_version": soc_version})


@dataclass(frozen=True)
class KbEntry:
    """One entry of a bank file, every field as the file holds it."""

    scope: KbFile
    op_type: str  # the line's own "op" (the file name's, in every real file)
    aoe_id: int
    version: int
    info_dict: dict[str, Any]
    knowledge: dict[str, Any]
    line: int
    extra: dict[str, Any] = field(default_factory=dict)  # fields beyond the five, kept

    @cached_property
    def repo_key(self) -> str:
        return entry_key(self.scope.soc_version, self.scope.core_num, self.op_type, self.info_dict)

    @cached_property
    def aoe(self) -> dict[str, Any]:
        """What the event keeps of the entry beyond info_dict and knowledge, to write it back
        (worked out once: treat it as read-only)."""
        fields: dict[str, Any] = {"id": self.aoe_id, "version": self.version,
                                  "core_num": self.scope.core_num}
        if self.op_type != self.scope.op_type:
            fields["file_op"] = self.scope.op_type
        if self.extra:
            fields["extra"] = self.extra
        order = {name: list(value) for name, value in (("info_dict", self.info_dict),
                                                        ("knowledge", self.knowledge))
                 if list(value) != sorted(value)}
        if order:  # the log keeps objects as canonical JSON, keys sorted: the file's order is kept here
            fields["order"] = order
        return fields

    def line_text(self) -> str:
        """The entry as :func:`entry_line` writes it back."""
        return entry_line(self.op_type, self.info_dict, self.knowledge, self.aoe)


def entry_line(op_type: str, info_dict: Mapping[str, Any], knowledge: Mapping[str, Any],
               aoe: Mapping[str, Any]) -> str:
    """An entry as a line of its bank file: ``id``, ``info_dict``, ``knowledge``, ``op``,
    ``version`` (the order of every real file), then any extra fields it came with; no spaces
    (as CANN's MatMulV3 files are written). info_dict and knowledge keep the order of fields
    the entry was read with (``aoe["order"]``), else the order they are held in (sorted, for
    an entry from the log)."""
    order = aoe.get("order") or {}
    line = {"id": aoe["id"], "info_dict": _ordered(info_dict, order.get("info_dict")),
            "knowledge": _ordered(knowledge, order.get("knowledge")), "op": op_type,
            "version": aoe["version"], **(aoe.get("extra") or {})}
    try:  # orjson keeps the keys' order and writes a 1 KB line ten times faster than json
        return orjson.dumps(line).decode("utf-8")
    except (orjson.JSONEncodeError, TypeError):  # an integer beyond 64 bits: json writes it
        return _LINE.encode(line)


_LINE = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _ordered(value: Mapping[str, Any], order: list[str] | None) -> Mapping[str, Any]:
    """``value`` with its keys in ``order`` (then any others, sorted); without an order, as it
    is (an entry read from the log has its keys sorted, as canonical JSON holds them)."""
    if not order:
        return value
    out = {name: value[name] for name in order if name in value}
    if len(out) < len(value):
        out.update(sorted((name, item) for name, item in value.items() if name not in out))
    return out


@dataclass(frozen=True)
class Gap:
    """A place in a bank file that holds no entry: an empty file, a blank line, a bare ``{}``,
    or a line repeating an entry already read."""

    file: str
    line: int | None
    what: str

    def __str__(self) -> str:
        place = self.file if self.line is None else f"{self.file}: line {self.line}"
        return f"{place}: {self.what}"


@dataclass
class KbRead:
    """What one bank file holds: its entries and the places that hold none."""

    scope: KbFile
    entries: list[KbEntry] = field(default_factory=list)
    gaps: list[Gap] = field(default_factory=list)


def read_kb_file(path: Path, shown_as: str | None = None, data: bytes | None = None) -> KbRead:
    """Every entry of one bank file, as it is; ``shown_as`` names the file in messages, and
    ``data`` is its bytes where the caller has read them already.

    Raises:
        KbFormatError: the file cannot be read, its name is not a bank file's, or a line is
            not an entry (the message names the file and the line).
    """
    where = shown_as or str(path)
    scope = KbFile.parse(path.name, where)
    read = KbRead(scope)
    text = (read_text(path, KbFormatError) if data is None
            else decoded(data, where)).removeprefix("\ufeff")
    if not text.strip():
        read.gaps.append(Gap(where, None, "empty file, no entry"))
        return read
    for number, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            read.gaps.append(Gap(where, number, "blank line"))
            continue
        line = json_object(Path(where), number, raw, KbFormatError)
        if not line:
            read.gaps.append(Gap(where, number, "{} holds no entry"))
            continue
        read.entries.append(_entry(line, scope, f"{where}: line {number}", number, raw))
    return read


def decoded(data: bytes, where: str) -> str:
    """A bank file's bytes as text, or the error naming the file."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise KbFormatError(f"{where}: not UTF-8 text (bad byte at offset {exc.start})") from None


def _entry(line: dict[str, Any], scope: KbFile, where: str, number: int, raw: str) -> KbEntry:
    missing = [name for name in LINE_FIELDS if name not in line]
    if missing:
        raise KbFormatError(f"{where}: no {', '.join(missing)} (an entry has {', '.join(LINE_FIELDS)})")
    for name in ("id", "version"):
        if isinstance(line[name], bool) or not isinstance(line[name], int):
            raise KbFormatError(f"{where}: {name} must be a whole number, not {shown(line[name])}")
    for name in ("info_dict", "knowledge"):
        if not isinstance(line[name], dict):
            raise KbFormatError(f"{where}: {name} must be an object, not {shown(line[name])}")
    if not is_plain_name(line["op"]):
        raise KbFormatError(f"{where}: op {why_not_plain(line['op'])}")
    if "NaN" in raw or "Infinity" in raw:  # only the slow parser lets them through
        _refuse_non_finite(line, where)
    extra = {name: value for name, value in line.items() if name not in LINE_FIELDS}
    return KbEntry(scope, line["op"], line["id"], line["version"], line["info_dict"],
                   line["knowledge"], number, extra)


def _refuse_non_finite(value: Any, where: str, path: str = "") -> None:
    """NaN or an infinity has no JSON form in a bank: the line is refused, naming the field."""
    if isinstance(value, float) and not math.isfinite(value):
        raise KbFormatError(f"{where}: {path or 'a value'} is {value}, which a bank cannot hold")
    if isinstance(value, dict):
        for name, item in value.items():
            _refuse_non_finite(item, where, f"{path}.{name}" if path else str(name))
    elif isinstance(value, list):
        for n, item in enumerate(value):
            _refuse_non_finite(item, where, f"{path}[{n}]")
