"""AOE's bank trees: found and read as AOE and CANN lay them out, and written back.

A tree holds runtime knowledge-bank files (:mod:`bank.formats.runtime_kb`) wherever they sit
under it: AOE's ``{soc}/unified_bank/`` folders, an installed ``opp/built-in/data/op/``, or
CANN's source layout (``*/op_host/config/<chip>/``). The chip, core count and operator come
from each file's name, never from its folder.

Entries that tunebank tuned itself carry no AOE fields (id, version, core count); they are
written with an xxh32 id of their info_dict, version 1 and the chip's core count, and
tunebank keeps what AOE's files cannot hold (the repo_key and the time) beside them in
``tunebank_times.json``. Reading such a tree gives those entries their own repo_key back.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import xxhash

from tunebank.bank.atomic import write_texts_atomic
from tunebank.bank.canonical import canonical_json, finite_number, shown
from tunebank.bank.formats.jsontext import read_bytes, read_json_file
from tunebank.bank.formats.runtime_kb import (
    SUFFIX,
    Gap,
    KbEntry,
    KbFile,
    KbFormatError,
    entry_line,
    read_kb_file,
)
from tunebank.bank.names import is_plain_name, path_inside, why_not_plain
from tunebank.bank.projection import info_digest

TIMES_FILE = "tunebank_times.json"
TUNEBANK_VERSION = 1
"""The ``version`` of an entry tunebank tuned (AOE's shipped entries have 0)."""


def entry_id(info_dict: Mapping[str, Any]) -> int:
    """The id tunebank gives an entry it tuned itself: the xxh32 of the info_dict's canonical
    JSON (AOE's own id hashes packed bytes tunebank does not know)."""
    return int(xxhash.xxh32_intdigest(canonical_json(dict(info_dict)).encode("utf-8")))


def bank_files(root: Path) -> list[Path]:
    """Every ``*_runtime_kb.json`` under ``root``, in path order. Symbolic links to folders
    are not followed (a tree must not lead out of itself)."""
    found = []
    for folder, subfolders, names in os.walk(root, followlinks=False):
        subfolders.sort()
        found += [Path(folder) / name for name in names if name.endswith(SUFFIX)]
    return sorted(found)


@dataclass(frozen=True)
class TreeEntry:
    """One entry of a tree: the file's entry, where it sits, and tunebank's times for it."""

    entry: KbEntry
    file: str  # the file, relative to the tree
    times: Mapping[str, Any] | None = None  # from tunebank_times.json: a tunebank-tuned entry

    @cached_property
    def repo_key(self) -> str:
        return str((self.times or {}).get("repo_key") or self.entry.repo_key)

    @property
    def soc_version(self) -> str:
        return self.entry.scope.soc_version


@dataclass
class TreeRead:
    """What a tree (or one bank file) holds: its entries, in file and line order, and every
    place that holds none."""

    path: str  # as given
    entries: list[TreeEntry] = field(default_factory=list)
    gaps: list[Gap] = field(default_factory=list)
    empty_files: dict[KbFile, str] = field(default_factory=dict)
    """The files that hold no entry, with what they hold (``{}`` or nothing), so an export
    can give them back file for file."""
    digests: dict[KbFile, tuple[str, int]] = field(default_factory=dict)
    """Each bank file's SHA-256 and how many entries it holds: what an import records, so
    that the same bytes imported again need not be parsed (:func:`read_tree`'s ``unchanged``)."""
    skipped: dict[KbFile, int] = field(default_factory=dict)
    """The files not parsed because the bank holds them as they are, with their entry counts."""

    def socs(self) -> list[str]:
        return sorted({e.soc_version for e in self.entries})


UnchangedFiles = Callable[[KbFile, str], int | None]
"""Given a bank file and its SHA-256: how many entries it holds if the bank holds all of them
as they are (the file need not be parsed), else ``None``."""


def read_tree(path: Path, unchanged: UnchangedFiles | None = None) -> TreeRead:
    """Every entry of a tree, or of one bank file (but those of the files ``unchanged`` says the
    bank already holds as they are: only their bytes are read and hashed).

    An entry repeated (the same chip, cores, operator and info_dict) with the same content is
    kept once and the repeat named as a gap; with other content it is refused, as the bank
    could not say which one AOE would use.

    Raises:
        KbFormatError: no bank file there, a file's name or a line is not valid (the message
            names the file and line), or an entry is repeated with other content.
    """
    files = [path] if not path.is_dir() else bank_files(path)
    if not files:
        raise KbFormatError(f"{path}: no bank files (*{SUFFIX}) in it: a tree holds "
                            "{soc}/unified_bank/{soc}_{cores}_AiCore_{op}" + SUFFIX)
    tree = TreeRead(str(path))
    seen: dict[str, TreeEntry] = {}
    times_of: dict[Path, dict[str, Any]] = {}
    root = path if path.is_dir() else path.parent
    for file in files:
        relative = file.name if file == path else file.relative_to(path).as_posix()
        if file != path:
            _check_in_tree(root, file)
        data = read_bytes(file, KbFormatError)
        digest = hashlib.sha256(data).hexdigest()
        scope = KbFile.parse(file.name, str(file))
        known = unchanged(scope, digest) if unchanged is not None else None
        if known is not None:
            tree.digests[scope] = (digest, known)
            tree.skipped[scope] = known
            continue
        read = read_kb_file(file, str(file), data)
        tree.digests[scope] = (digest, len(read.entries))
        tree.gaps += read.gaps
        if not read.entries:
            empty = any(gap.what.startswith("{}") for gap in read.gaps)
            tree.empty_files[read.scope] = "{}" if empty else ""
        folder = file.parent
        if folder not in times_of:
            times_of[folder] = _times(folder / TIMES_FILE, root)
        for entry in read.entries:
            found = TreeEntry(entry, relative, _times_for(times_of[folder], entry, file.name))
            first = seen.get(found.repo_key)
            if first is None:
                seen[found.repo_key] = found
                tree.entries.append(found)
            elif first.entry.line_text() == entry.line_text():
                tree.gaps.append(Gap(str(file), entry.line, f"repeats {first.file}: line "
                                     f"{first.entry.line}, kept once"))
            else:
                raise KbFormatError(
                    f"{file}: line {entry.line}: the same chip, cores, op and info_dict as "
                    f"{_joined(path, first.file)}: line {first.entry.line}, with other content; "
                    "which one holds is not known")
    return tree


def _joined(root: Path, relative: str) -> str:
    return str(root / relative) if root.is_dir() else str(root)


def _times_for(table: Mapping[str, Any], entry: KbEntry, file_name: str) -> Mapping[str, Any] | None:
    """tunebank's times of an entry it wrote itself (its digest in the table, its file named)."""
    if not table or entry.version != TUNEBANK_VERSION:
        return None
    found = table.get(info_digest(entry.info_dict))
    if found is None or found.get("file", file_name) != file_name:
        return None
    return dict(found)


def _check_in_tree(root: Path, file: Path) -> None:
    """Refuse a file of a tree that is a link to a file outside the tree: a shared tree must not
    make tunebank read (and quote in its messages) another of the user's files."""
    base = os.path.realpath(root)
    if os.path.commonpath([base, os.path.realpath(file)]) != base:
        raise KbFormatError(f"{file}: a link to a file outside the tree {root}; a tree is read "
                            "from its own files only")


def _times(path: Path, root: Path) -> dict[str, Any]:
    if not os.path.lexists(path):
        return {}
    _check_in_tree(root, path)
    data = read_json_file(path, KbFormatError)  # a regular file only: never /dev/zero
    table = data.get("entries") if isinstance(data, dict) else None
    if not isinstance(table, dict):
        raise KbFormatError(f"{path}: entries must be an object")
    for digest, entry in table.items():
        _check_times(f"{path}: entries.{digest}", entry)
    return table


def _check_times(where: str, entry: Any) -> None:
    """One entry of tunebank_times.json: an object of a repo_key, a non-negative time
    and text (or nothing) for the mode, the backend and the file."""
    if not isinstance(entry, dict):
        raise KbFormatError(f"{where}: must be an object, not {shown(entry)}")
    key, best = entry.get("repo_key"), entry.get("best_us")
    if key is not None and not (isinstance(key, str) and key):
        raise KbFormatError(f"{where}.repo_key: must be a non-empty string, not {shown(key)}")
    if best is not None and (not finite_number(best) or best < 0):
        raise KbFormatError(f"{where}.best_us: must be a non-negative number, not {shown(best)}")
    for name in ("tune_mode", "backend", "file"):
        if entry.get(name) is not None and not isinstance(entry[name], str):
            raise KbFormatError(f"{where}.{name}: must be a string, not {shown(entry[name])}")


# -- writing ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OutEntry:
    """One entry to write: its file, its line, where it sorts, and tunebank's times for it."""

    scope: KbFile
    line: str
    order: tuple[int, str]  # (line it was read from, repo_key): a tree comes back in its order
    op_type: str
    info_dict: Mapping[str, Any]
    times: Mapping[str, Any] | None = None
    digest: str = ""

    @property
    def identity(self) -> tuple[str, str]:
        """What makes it the same entry as a line of its file (:func:`_identity`)."""
        return _identity(self.op_type, self.info_dict)


def out_entry(soc_version: str, repo_key: str, op_type: str | None, payload: Mapping[str, Any],
              core_num: Mapping[str, int]) -> OutEntry:
    """The line of one policy's winning event (its payload), in the file it belongs to.

    An entry read from an AOE file goes back to its own file with its own id and version;
    one tunebank tuned gets :func:`entry_id`, :data:`TUNEBANK_VERSION` and ``core_num``.

    Raises:
        KbFormatError: the chip or the operator type is not a plain name, or the chip's core
            count is not known.
    """
    info, knowledge = payload.get("info_dict") or {}, payload["knowledge"]
    aoe = payload.get("aoe_entry")
    op = op_type or "unknown"
    for what, name in (("chip", soc_version), ("operator type", op)):
        if not is_plain_name(name):
            raise KbFormatError(f"entry {repo_key}: the {what} {why_not_plain(name)}")
    if isinstance(aoe, dict):
        file_op = aoe.get("file_op") or op
        if not is_plain_name(file_op):
            raise KbFormatError(f"entry {repo_key}: the file's operator type {why_not_plain(file_op)}")
        source = payload.get("source") or {}
        line: int = source["line"] if isinstance(source.get("line"), int) else 0
        return OutEntry(KbFile(soc_version, int(aoe["core_num"]), file_op),
                        entry_line(op, info, knowledge, aoe), (line, repo_key), op, info)
    if soc_version not in core_num:
        raise KbFormatError(f"--core-num: the core count of {soc_version} is not known; give it "
                            "with --core-num")
    scope = KbFile(soc_version, core_num[soc_version], op)
    best = payload.get("performance_after_us")
    times: dict[str, Any] = {"repo_key": repo_key, "file": scope.name}
    if best is not None and math.isfinite(best):
        times.update(best_us=best, tune_mode=payload.get("tune_mode"),
                     backend=payload.get("backend"))
    text = entry_line(op, info, knowledge, {"id": entry_id(info), "version": TUNEBANK_VERSION})
    return OutEntry(scope, text, (0, repo_key), op, info, times, info_digest(info))


@dataclass(frozen=True)
class TreeWrite:
    """What writing a tree did: the bank files written, how many entries went in, and the
    tunebank times files written beside them (one per ``unified_bank`` folder that got an
    entry)."""

    files: list[Path]
    entries: int
    kept: int = 0  # entries of files already there that the bank lacked, kept (--merge)
    times_files: list[Path] = field(default_factory=list)


def _existing(out: Path, scopes: Iterable[KbFile]) -> dict[KbFile, list[KbEntry]]:
    """The entries of the bank files ``out`` already holds among ``scopes``' files."""
    found = {}
    for scope in scopes:
        path = bank_file(out, scope)
        if os.path.lexists(path):
            found[scope] = read_kb_file(path).entries
    return found


def write_tree(out: Path, entries: Iterable[OutEntry], *, merge: bool = False,
               empty_files: Mapping[KbFile, str] | None = None) -> TreeWrite:
    """Write ``entries`` under ``out`` in AOE's layout, a file per chip, cores and operator,
    and each of ``empty_files`` that gets no entry as it was read (``{}`` or nothing).

    A file already there whose entries the bank lacks is refused unless ``merge``: then its
    entries stay, in their order, those the bank holds are replaced in place, and the bank's
    others follow.

    Raises:
        KbFormatError: a file there holds entries the bank lacks (without ``merge``), or is not
            a valid bank file; nothing is written then.
    """
    by_file: dict[KbFile, list[OutEntry]] = defaultdict(list)
    for entry in entries:
        by_file[entry.scope].append(entry)
    there = _existing(out, by_file)
    texts: dict[KbFile, list[str]] = {}
    kept = 0
    for scope, mine in by_file.items():
        mine.sort(key=lambda e: e.order)
        lines = [e.line for e in mine]
        if scope in there:
            ours = {e.identity for e in mine}
            theirs = [e for e in there[scope] if _identity(e.op_type, e.info_dict) not in ours]
            if theirs and not merge:
                raise KbFormatError(
                    f"{bank_file(out, scope)}: holds {len(theirs)} "
                    "entries the bank lacks (the first at line "
                    f"{theirs[0].line}); --merge keeps them, or export into an empty folder")
            if merge:
                kept += len(theirs)
                lines = _merged(there[scope], mine)
        texts[scope] = lines
    for scope, text in (empty_files or {}).items():
        if scope not in texts and not bank_file(out, scope).exists():
            texts[scope] = [text] if text else []
    times: dict[Path, dict[str, Any]] = defaultdict(dict)
    for scope in texts:
        for entry in by_file[scope]:
            if entry.times is not None:
                times[bank_file(out, scope).parent][entry.digest] = \
                    {k: v for k, v in entry.times.items() if v is not None}
    old = {folder: _times(folder / TIMES_FILE, out) if merge else {} for folder in times}
    files = {bank_file(out, scope): "\n".join(lines) + "\n" if lines else ""
             for scope, lines in texts.items()}
    written = sorted(files)
    for folder, table in times.items():
        files[folder / TIMES_FILE] = json.dumps(
            {"format": "tunebank-times", "version": 1, "entries": {**old[folder], **table}},
            indent=2, ensure_ascii=False) + "\n"
    write_texts_atomic(files)  # every file or none: a full disk leaves no half-written tree
    return TreeWrite(written, sum(len(v) for v in by_file.values()), kept,
                     sorted(folder / TIMES_FILE for folder in times))


def bank_file(out: Path, scope: KbFile) -> Path:
    """Where AOE keeps ``scope``'s bank file under ``out``: ``{soc}/unified_bank/{name}``, its
    names checked and the path checked to stay inside ``out`` (see :func:`bank.names.path_inside`).

    Raises:
        UnsafeNameError: a name is not plain, or a link in ``out`` leads elsewhere.
    """
    return path_inside(out, scope.soc_version, "unified_bank", scope.name)


def scope_of(name: str) -> KbFile | None:
    """The chip, cores and operator of a bank file's name, or None if it is not one."""
    try:
        return KbFile.parse(name)
    except KbFormatError:
        return None


def _identity(op_type: str, info_dict: Mapping[str, Any]) -> tuple[str, str]:
    """What makes two lines of one file the same entry: the op and the info_dict."""
    return op_type, canonical_json(dict(info_dict))


def _merged(existing: list[KbEntry], mine: list[OutEntry]) -> list[str]:
    """The file's entries in their order, each replaced by the bank's line for it, then the
    bank's other lines."""
    ours = {e.identity: e.line for e in mine}
    out = [ours.pop(_identity(e.op_type, e.info_dict), e.line_text()) for e in existing]
    return out + list(ours.values())
