"""AOE's own bank layout (unified_bank), written from the policy projection and read back.

``DIR/{soc}/unified_bank/{soc}_{core_num}_AiCore_{optype}_runtime_kb.json`` holds JSON Lines
``{"id", "op", "version", "info_dict", "knowledge"}``, one line per key, the best entry only.
AOE's files carry no times, so tunebank writes them beside the bank files in
``tunebank_times.json`` (info digest -> repo_key, best time, mode, backend); a tree without it
imports with the times unknown, which every measured entry beats.
"""

from __future__ import annotations

import json
import math
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import xxhash

from bank.atomic import write_json_atomic, write_text_atomic
from bank.canonical import canonical_json
from bank.errors import BankError
from bank.formats.jsontext import finite_number, read_json_file, read_text, shown
from bank.formats.lines import json_object
from bank.projection import Policy, info_digest

TIMES_FILE = "tunebank_times.json"
ENTRY_VERSION = 1
_FILE = re.compile(r"^(?P<soc>.+)_(?P<cores>\d+)_AiCore_(?P<op>.+)_runtime_kb\.json$")


class RepoFormatError(BankError):
    """A unified_bank tree or one of its files is malformed."""


def entry_id(info_dict: Mapping[str, Any]) -> int:
    """The uint32 hash AOE files an entry under (xxh32 of the key's canonical bytes)."""
    return int(xxhash.xxh32_intdigest(canonical_json(dict(info_dict)).encode("utf-8")))


def file_name(soc_version: str, core_num: int, op_type: str) -> str:
    """The bank file of one chip, core count and operator type."""
    return f"{soc_version}_{core_num}_AiCore_{op_type}_runtime_kb.json"


def write_tree(out: Path, policies: Iterable[Policy], core_num: Mapping[str, int]) -> list[Path]:
    """Write every policy into ``out`` in AOE's layout; return the files written."""
    by_file: dict[Path, list[str]] = defaultdict(list)
    times: dict[Path, dict[str, Any]] = defaultdict(dict)
    for policy in policies:
        op_type = policy.op_type or "unknown"
        folder = out / policy.soc_version / "unified_bank"
        line = {"id": entry_id(policy.info_dict), "op": op_type, "version": ENTRY_VERSION,
                "info_dict": policy.info_dict, "knowledge": policy.knowledge}
        by_file[folder / file_name(policy.soc_version, core_num[policy.soc_version], op_type)].append(
            json.dumps(line, sort_keys=True, ensure_ascii=False))
        if math.isfinite(policy.best_us):
            times[folder][policy.info_digest] = {"repo_key": policy.repo_key, "best_us": policy.best_us,
                                                 "tune_mode": policy.tune_mode,
                                                 "backend": policy.backend}
    for path, lines in by_file.items():
        write_text_atomic(path, "\n".join(lines) + "\n")
    for folder, table in times.items():
        write_json_atomic(folder / TIMES_FILE, {"format": "tunebank-times", "version": 1,
                                                "entries": table})
    return sorted(by_file)


@dataclass(frozen=True)
class RepoEntry:
    """One entry read back from a unified_bank file."""

    soc_version: str
    op_type: str
    info_dict: dict[str, Any]
    knowledge: dict[str, Any]
    times: Mapping[str, Any] | None  # from tunebank_times.json, when present
    file: Path


def read_tree(root: Path) -> list[RepoEntry]:
    """Every entry under ``root`` (a folder holding ``{soc}/unified_bank/``).

    Raises:
        RepoFormatError: no bank files there, or a line is not a valid entry.
    """
    files = sorted(root.glob("*/unified_bank/*_runtime_kb.json"))
    if not files:
        raise RepoFormatError(f"{root}: no {{soc}}/unified_bank/*_runtime_kb.json files")
    entries = []
    for path in files:
        match = _FILE.match(path.name)
        if not match:
            raise RepoFormatError(f"{path}: name is not {{soc}}_{{cores}}_AiCore_{{op}}_runtime_kb.json")
        times = _times(path.parent / TIMES_FILE)
        for number, text in enumerate(read_text(path, RepoFormatError).splitlines(), 1):
            if text.strip():
                entries.append(_entry(path, number, text, match["soc"], times))
    return entries


def _times(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    data = read_json_file(path, RepoFormatError)
    table = data.get("entries") if isinstance(data, dict) else None
    if not isinstance(table, dict):
        raise RepoFormatError(f"{path}: entries must be an object")
    for digest, entry in table.items():
        _check_times(f"{path}: entries.{digest}", entry)
    return table


def _check_times(where: str, entry: Any) -> None:
    """One entry of tunebank_times.json: an object of a repo_key, a non-negative time
    and text (or nothing) for the mode and the backend."""
    if not isinstance(entry, dict):
        raise RepoFormatError(f"{where}: must be an object, not {shown(entry)}")
    key, best = entry.get("repo_key"), entry.get("best_us")
    if key is not None and not (isinstance(key, str) and key):
        raise RepoFormatError(f"{where}.repo_key: must be a non-empty string, not {shown(key)}")
    if best is not None and (not finite_number(best) or best < 0):
        raise RepoFormatError(f"{where}.best_us: must be a non-negative number, not {shown(best)}")
    for name in ("tune_mode", "backend"):
        if entry.get(name) is not None and not isinstance(entry[name], str):
            raise RepoFormatError(f"{where}.{name}: must be a string, not {shown(entry[name])}")


def _entry(path: Path, number: int, text: str, soc: str, times: Mapping[str, Any]) -> RepoEntry:
    where = f"{path}: line {number}"
    line = json_object(path, number, text, RepoFormatError)
    for name in ("info_dict", "knowledge"):
        if not isinstance(line.get(name), dict):
            raise RepoFormatError(f"{where}: field {name} must be an object")
    if not isinstance(line.get("op"), str):
        raise RepoFormatError(f"{where}: field op must be a string")
    if line.get("id") != entry_id(line["info_dict"]):
        raise RepoFormatError(f"{where}: id {line.get('id')} does not match its info_dict")
    known = times.get(info_digest(line["info_dict"]))
    return RepoEntry(soc, line["op"], line["info_dict"], line["knowledge"], known, path)
