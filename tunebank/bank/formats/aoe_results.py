"""Reading AOE's result files: OPAT in the older list format and the newer report format, and
SGAT. Everything is validated before anything is written; a bad file gets one line naming the
file, the place inside it and the rule broken."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tunebank.bank.canonical import finite_number, shown
from tunebank.bank.errors import BankError
from tunebank.bank.formats.jsontext import parse_json, read_json_file

SUMMARY_FIELDS = ("repo_add_num", "repo_hit_num", "repo_reserved_num", "repo_unsatisfied_num",
                  "repo_update_num", "total_num")
STATUS = {"tuning successful": "successful", "tune success": "successful",
          "tuning failed": "failed", "tune failed": "failed",
          "tuning incomplete": "incomplete", "tune tuning incomplete": "incomplete",
          "tune incomplete": "incomplete"}
MODES = ("Format", "Schedule", "Impl")
MAX_OUTCOMES = 100_000
"""The most outcomes one report may count: far above any real tune (a large model has a few
thousand keys), low enough that a forged count cannot make an import write without end."""
TOLERANCE = 0.01  # percentage points allowed between a stated improvement and before/after


class ImportFormatError(BankError):
    """A result file breaks AOE's format or its own invariants."""


@dataclass(frozen=True)
class ImportedOp:
    """One operator (or subgraph) a result file names as added or updated; times in µs
    (``None`` where the file leaves a time out, as tunebank does for a time it never knew)."""

    kind: str  # add | update
    name: str | None
    op_type: str | None
    before_us: float | None
    after_us: float | None
    tune_mode: str | None = None
    repo_key: str | None = None  # SGAT files give it


@dataclass
class ImportedReport:
    """One tuning task as a result file describes it."""

    file: Path
    report_id: str | None
    job_type: str  # opat | sgat
    result_format: str  # v1 | v2 | sgat
    tuning_name: str
    tuning_time_s: float | None
    status: str  # successful | failed | incomplete
    summary: dict[str, int]
    ops: list[ImportedOp] = field(default_factory=list)
    failed_operators: list[str] = field(default_factory=list)
    model_baseline_ms: float | None = None
    model_result_ms: float | None = None
    recorded_at: str | None = None


def load_result_file(path: Path, content: bytes | None = None) -> list[ImportedReport]:
    """Parse and validate an OPAT (v1 or v2) or SGAT result file (``content``: its bytes, if
    the caller has read them already).

    Raises:
        ImportFormatError: the file is unreadable, not JSON, or breaks a rule; the message names
            the file and the place.
    """
    data = read_json_file(path, ImportFormatError) if content is None else \
        parse_json(content, str(path), ImportFormatError)
    if isinstance(data, dict) and data and all(k.startswith("report_") for k in data):
        return [_report(path, key, parts, _stamp_from(key)) for key, parts in data.items()]
    if isinstance(data, list):  # the older layouts carry no time in their content
        return [_report(path, None, data, None)]
    raise ImportFormatError(f"{path}: not an AOE result file (expected a list of sections or "
                            "an object of report_* entries)")


def _stamp_from(text: str) -> str | None:
    """The time in an AOE report id (``report_20240131123045123_...`` or
    ``report_20240131_12304512_...``), as UTC. Only the file's content is read for a report's
    time, never its name: the same report under any file name is the same history."""
    match = re.search(r"(\d{8})_?(\d{6})(\d{0,3})", text)
    if not match:
        return None
    date, clock, millis = match.groups()
    try:
        from datetime import datetime

        moment = datetime.strptime(date + clock, "%Y%m%d%H%M%S")
    except ValueError:
        return None
    micros = int((millis or "0").ljust(3, "0")) * 1000
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{micros:06d}Z"


def _report(path: Path, report_id: str | None, parts: Any, stamp: str | None) -> ImportedReport:
    where = f"{path}: {report_id}" if report_id else str(path)
    if not isinstance(parts, list) or not all(isinstance(p, dict) for p in parts):
        raise ImportFormatError(f"{where}: must be a list of sections")
    sections: dict[str, Any] = {}
    for part in parts:
        sections.update(part)
    basic = sections.get("basic")
    if not isinstance(basic, dict):
        raise ImportFormatError(f"{where}: missing the 'basic' section")
    name = basic.get("tuning_name")
    if not isinstance(name, str) or not name:
        raise ImportFormatError(f"{where}: basic.tuning_name must be a non-empty string")
    time_s = basic.get("tuning_time(s)")
    if time_s is not None:
        _number(time_s, f"{where}: basic.tuning_time(s)")
    if "SGAT" in sections:
        report = _sgat(path, where, report_id, sections["SGAT"], name, time_s)
    elif "OPAT" in sections:
        report = _opat(path, where, report_id, sections["OPAT"], name, time_s)
    else:
        raise ImportFormatError(f"{where}: no 'OPAT' or 'SGAT' section")
    report.recorded_at = stamp
    _check_counts(where, report)
    return report


def _number(value: Any, where: str) -> float:
    if not finite_number(value) or value < 0:
        raise ImportFormatError(f"{where}: must be a non-negative number, not {shown(value)}")
    return float(value)


def _percent(value: Any, where: str) -> float:
    if not isinstance(value, str) or not re.fullmatch(r"-?\d+(\.\d+)?%", value.strip()):
        raise ImportFormatError(f"{where}: must be a percentage like \"35.35%\", not {shown(value)}")
    return float(value.strip().rstrip("%"))


def _check_improvement(stated: Any, before: float | None, after: float | None, where: str) -> None:
    if before is None or after is None:  # an unknown time has no improvement to check
        return
    claimed = _percent(stated, f"{where}.performance_improvement")
    if after <= 0:
        return
    actual = (before - after) / after * 100
    if abs(claimed - actual) > TOLERANCE + 0.005:
        raise ImportFormatError(f"{where}: performance_improvement {stated} but before/after give "
                                f"{actual:.2f}%")


def _summary(value: Any, where: str) -> dict[str, int]:
    if not isinstance(value, dict):
        raise ImportFormatError(f"{where}: repo_summary is missing or not an object")
    out = {}
    for name in SUMMARY_FIELDS:
        count = value.get(name)
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ImportFormatError(f"{where}: repo_summary.{name} must be a non-negative integer")
        out[name] = count
    if out["total_num"] > MAX_OUTCOMES:
        raise ImportFormatError(f"{where}: repo_summary.total_num {out['total_num']} is more than the "
                                f"{MAX_OUTCOMES} outcomes one report can hold")
    if out["repo_hit_num"] != out["repo_update_num"] + out["repo_reserved_num"]:
        raise ImportFormatError(
            f"{where}: repo_summary: repo_hit_num {out['repo_hit_num']} != repo_update_num "
            f"{out['repo_update_num']} + repo_reserved_num {out['repo_reserved_num']}")
    if out["total_num"] != out["repo_add_num"] + out["repo_hit_num"] + out["repo_unsatisfied_num"]:
        raise ImportFormatError(
            f"{where}: repo_summary: total_num {out['total_num']} != repo_add_num "
            f"{out['repo_add_num']} + repo_hit_num {out['repo_hit_num']} + repo_unsatisfied_num "
            f"{out['repo_unsatisfied_num']}")
    return out


def _status(value: Any, where: str, time_s: Any) -> str:
    if value is None:
        return "incomplete" if time_s is None else "successful"
    if not isinstance(value, str) or value not in STATUS:
        raise ImportFormatError(f"{where}: unknown tuning result {shown(value)} "
                                f"(expected one of {', '.join(sorted(STATUS))})")
    return STATUS[value]


def _model_times(body: dict[str, Any], where: str) -> tuple[float | None, float | None]:
    if "model_baseline_performance(ms)" not in body:
        return None, None
    before = _number(body["model_baseline_performance(ms)"], f"{where}.model_baseline_performance(ms)")
    after = _number(body.get("model_result_performance(ms)"), f"{where}.model_result_performance(ms)")
    if "model_performance_improvement" in body:
        _check_model(body, before, after, where)
    return before, after


def _check_model(body: dict[str, Any], before: float, after: float, where: str) -> None:
    claimed = _percent(body["model_performance_improvement"], f"{where}.model_performance_improvement")
    if after > 0 and abs(claimed - (before - after) / after * 100) > TOLERANCE + 0.005:
        raise ImportFormatError(f"{where}: model_performance_improvement {claimed:.2f}% but the "
                                f"model times give {(before - after) / after * 100:.2f}%")


def _op(entry: Any, where: str, kind: str, scale: float, mode: str | None = None) -> ImportedOp:
    if not isinstance(entry, dict):
        raise ImportFormatError(f"{where}: must be an object")
    unit = "us" if scale == 1 else "ms"
    before, after = (_optional_time(entry, f"performance_{when}_tune({unit})", where)
                     for when in ("before", "after"))
    _check_improvement(entry.get("performance_improvement"), before, after, where)
    name = entry.get("op_name")
    op_type = _op_type(entry.get("op_type"), where)
    key = entry.get("repo_key")
    if scale != 1 and (not isinstance(key, str | int) or not str(key).isdigit()):
        raise ImportFormatError(f"{where}.repo_key: must be a decimal key, not {shown(key)}")
    if scale == 1:
        _op_name(name, where)
    return ImportedOp(kind, name, op_type,
                      None if before is None else before * scale,
                      None if after is None else after * scale, mode,
                      str(key) if key is not None else None)


def _op_type(value: Any, where: str) -> str | None:
    """An operator's op_type: a string, or AOE's list of a fused operator's types (joined)."""
    if isinstance(value, list) and all(isinstance(t, str) for t in value):
        return "+".join(value)
    if value is not None and not isinstance(value, str):
        raise ImportFormatError(f"{where}.op_type: must be a string or a list of strings, not "
                                f"{shown(value)}")
    return value


def _op_name(value: Any, where: str) -> None:
    if not isinstance(value, str) or not value:
        raise ImportFormatError(f"{where}.op_name: must be a non-empty string")


def _optional_time(entry: dict[str, Any], name: str, where: str) -> float | None:
    """A listed time: AOE always writes it; tunebank leaves out a time it does not know."""
    if name not in entry:
        return None
    return _number(entry[name], f"{where}.{name}")


def _opat(path: Path, where: str, report_id: str | None, body: Any, name: str,
          time_s: Any) -> ImportedReport:
    where = f"{where}: OPAT"
    if not isinstance(body, dict):
        raise ImportFormatError(f"{where}: must be an object")
    v2 = "opat_tuning_result" in body or isinstance(body.get("repo_modified_operators"), list)
    status_field = "opat_tuning_result" if v2 else "opat_tune_result"
    status = _status(body.get(status_field), f"{where}.{status_field}", time_s)
    report = ImportedReport(path, report_id, "opat", "v2" if v2 else "v1", name,
                            float(time_s) if time_s is not None else None, status,
                            _summary(body.get("repo_summary"), where))
    report.model_baseline_ms, report.model_result_ms = _model_times(body, where)
    modified = body.get("repo_modified_operators", [] if v2 else {})
    if v2:
        if not isinstance(modified, list):
            raise ImportFormatError(f"{where}.repo_modified_operators: must be a list")
        report.ops = [_v2_op(entry, f"{where}.repo_modified_operators[{i}]")
                      for i, entry in enumerate(modified)]
    else:
        report.ops = _listed(modified, f"{where}.repo_modified_operators", "operators", 1.0)
    failed = body.get("tuning_failed_operators" if v2 else "tune_failed_operators", [])
    if not isinstance(failed, list) or not all(isinstance(f, str) for f in failed):
        raise ImportFormatError(f"{where}: the failed operators must be a list of op names")
    report.failed_operators = failed
    return report


def _v2_op(entry: Any, where: str) -> ImportedOp:
    if not isinstance(entry, dict) or not isinstance(entry.get("tune_performance"), dict) \
            or not entry["tune_performance"]:
        raise ImportFormatError(f"{where}: needs op_name, op_type and a tune_performance object")
    _op_name(entry.get("op_name"), where)  # they sit beside tune_performance, not in it
    _op_type(entry.get("op_type"), where)
    found = []
    for mode, perf in entry["tune_performance"].items():
        if mode not in MODES:
            raise ImportFormatError(f"{where}.tune_performance: unknown mode {shown(mode)} "
                                    f"(expected {', '.join(MODES)})")
        kind = perf.get("update_mode") if isinstance(perf, dict) else None
        if kind not in ("add", "update"):
            raise ImportFormatError(f"{where}.tune_performance.{mode}.update_mode: must be add or "
                                    f"update, not {shown(kind)}")
        op = _op({**perf, "op_name": entry.get("op_name"), "op_type": entry.get("op_type")},
                 f"{where}.tune_performance.{mode}", kind, 1.0, mode)
        found.append(op)
    if len({op.kind for op in found}) > 1:
        raise ImportFormatError(f"{where}: its modes disagree on update_mode")
    return min(found, key=lambda op: math.inf if op.after_us is None else op.after_us)


def _sgat(path: Path, where: str, report_id: str | None, body: Any, name: str,
          time_s: Any) -> ImportedReport:
    where = f"{where}: SGAT"
    if not isinstance(body, dict):
        raise ImportFormatError(f"{where}: must be an object")
    report = ImportedReport(path, report_id, "sgat", "sgat", name,
                            float(time_s) if time_s is not None else None,
                            "successful" if time_s is not None else "incomplete",
                            _summary(body.get("repo_summary"), where))
    report.model_baseline_ms, report.model_result_ms = _model_times(body, where)
    report.ops = _listed(body.get("repo_modified_subgraphs", {}), f"{where}.repo_modified_subgraphs",
                         "subgraphs", 1000.0)
    return report


def _listed(modified: Any, where: str, noun: str, scale: float) -> list[ImportedOp]:
    """The ``add_repo_{noun}`` and ``update_repo_{noun}`` lists of the older layouts."""
    if not isinstance(modified, dict):
        raise ImportFormatError(f"{where}: must be an object")
    ops = []
    for kind in ("add", "update"):
        entries = modified.get(f"{kind}_repo_{noun}", [])
        if not isinstance(entries, list):
            raise ImportFormatError(f"{where}.{kind}_repo_{noun}: must be a list")
        ops += [_op(e, f"{where}.{kind}_repo_{noun}[{i}]", kind, scale) for i, e in enumerate(entries)]
    return ops


def _check_counts(where: str, report: ImportedReport) -> None:
    """Each list names exactly the outcomes its summary counts: one entry per added or updated
    policy (tunebank writes one per key, as AOE does), so a list that disagrees is a bad file."""
    for kind in ("add", "update"):
        listed = sum(1 for op in report.ops if op.kind == kind)
        count = report.summary[f"repo_{kind}_num"]
        if listed != count:
            raise ImportFormatError(f"{where} ({report.tuning_name}): lists {listed} {kind} "
                                    f"operator(s) but repo_summary.repo_{kind}_num is {count}")
