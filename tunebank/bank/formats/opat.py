"""AOE's OPAT result files (newer and older format) and tuning_result.json, written from the log.

A tune rewrites its result file after every key; ``bank export --format opat`` regenerates one
for any task. Every file is written atomically (bank.atomic)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tunebank.bank.events import EventKind, StoredEvent

AOE_STATUS_V2 = {"successful": "tuning successful", "failed": "tuning failed",
                 "incomplete": "tuning incomplete"}
AOE_STATUS_V1 = {"successful": "tune success", "failed": "tune failed",
                 "incomplete": "tune incomplete"}


@dataclass
class KeyOutcome:
    """The final outcome of one key in one task, rebuilt from its events."""

    repo_key: str
    kind: str  # add | update | reserved | unsatisfied
    op_type: str | None
    op_names: list[str]
    before_us: float | None = None
    after_us: float | None = None
    knowledge: dict[str, Any] | None = None
    tune_mode: str | None = None
    reason: str | None = None
    measurements: int = 0
    hit: bool = False

    @property
    def modified(self) -> bool:
        return self.kind in ("add", "update")


@dataclass
class TaskOutcomes:
    """Every finished key of a task, in the order recorded."""

    keys: dict[str, KeyOutcome] = field(default_factory=dict)

    def absorb(self, events: Iterable[StoredEvent]) -> None:
        """Fold a task's outcome events in (hits open a key; the final outcome closes it)."""
        for stored in events:
            event, p = stored.event, stored.event.payload
            if event.kind not in (EventKind.ADD, EventKind.UPDATE, EventKind.RESERVED,
                                  EventKind.UNSATISFIED) or event.repo_key is None:
                continue
            self.keys[event.repo_key] = KeyOutcome(
                repo_key=event.repo_key, kind=str(event.kind), op_type=event.op_type,
                op_names=list(p.get("op_names") or [event.op_name or event.repo_key]),
                before_us=p.get("performance_before_us"), after_us=p.get("performance_after_us"),
                knowledge=p.get("knowledge"), tune_mode=p.get("tune_mode"), reason=p.get("reason"),
                measurements=int(p.get("measurements", 0)),
                hit=event.kind in (EventKind.UPDATE, EventKind.RESERVED))

    def changes(self) -> Iterator[KeyOutcome]:
        """The added and updated keys, in the order recorded. A result file lists each once,
        under its first operator's name, so its lists have as many entries as repo_summary
        counts."""
        return (o for o in self.keys.values() if o.modified)

    @property
    def failed_operators(self) -> list[str]:
        return [name for o in self.keys.values() if o.reason == "failed" for name in o.op_names]

    def model_ms(self) -> tuple[float, float]:
        """Sum over every operator instance of the time before and after this task, in ms."""
        before = after = 0.0
        for o in self.keys.values():
            start = o.before_us or 0.0
            end = o.after_us if o.after_us is not None else start
            before += start * len(o.op_names)
            after += end * len(o.op_names)
        return before / 1000, after / 1000


def perf_fields(before_us: float | None, after_us: float | None, unit: str = "us") -> dict[str, Any]:
    """The time fields of one listed entry in ``unit`` (us or ms). A time the log does not know
    (an entry imported without one) is left out, and the improvement with it: never invented."""
    scale, digits = (1.0, 3) if unit == "us" else (1000.0, 6)
    fields: dict[str, Any] = {}
    after = round(after_us / scale, digits) if after_us is not None else None
    before = round(before_us / scale, digits) if before_us is not None else None
    if after is not None:
        fields[f"performance_after_tune({unit})"] = after
    if before is not None:
        fields[f"performance_before_tune({unit})"] = before
    if before is not None and after is not None:  # from the times as written, so a reader
        fields["performance_improvement"] = improvement(before, after)  # can check it
    return fields


def improvement(before: float, after: float) -> str:
    """AOE's performance_improvement: (before - after) / after, as a percent with two decimals."""
    return f"{(before - after) / after * 100:.2f}%" if after > 0 else "0.00%"


@dataclass(frozen=True)
class ReportInfo:
    """What the result file says about the task as a whole."""

    tuning_name: str
    status: str  # successful | failed | incomplete
    tuning_time_s: float | None
    repo_summary: Mapping[str, int]
    model_ms: tuple[float, float] | None = None  # baseline, result; else summed from outcomes
    failed_operators: tuple[str, ...] | None = None  # else the outcomes with reason "failed"

    def basic(self) -> dict[str, Any]:
        """The ``basic`` section: the name, and the time unless the run was interrupted."""
        basic: dict[str, Any] = {"tuning_name": self.tuning_name}
        if self.tuning_time_s is not None:
            basic["tuning_time(s)"] = round(self.tuning_time_s)
        return basic

    def failed(self, outcomes: TaskOutcomes) -> list[str]:
        """The failed operators to list."""
        if self.failed_operators is not None:
            return list(self.failed_operators)
        return outcomes.failed_operators


def opat_v2(report_id: str, info: ReportInfo, outcomes: TaskOutcomes) -> dict[str, Any]:
    """The newer format: reports keyed ``report_{ts}_{tid}``, per-operator tune_performance."""
    basic = info.basic()
    modified = []
    for o in outcomes.changes():
        perf = {**perf_fields(o.before_us, o.after_us), "update_mode": o.kind}
        modified.append({"op_name": o.op_names[0], "op_type": o.op_type,
                         "tune_performance": {o.tune_mode or "Schedule": perf}})
    opat: dict[str, Any] = {"opat_tuning_result": AOE_STATUS_V2[info.status],
                            "repo_modified_operators": modified,
                            "repo_summary": dict(info.repo_summary)}
    if info.status == "failed":
        opat["tuning_failed_operators"] = info.failed(outcomes)
    return {report_id: [{"basic": basic}, {"OPAT": opat}]}


def opat_v1(info: ReportInfo, outcomes: TaskOutcomes) -> list[dict[str, Any]]:
    """The older list format, with the model's times and add/update lists."""
    basic = info.basic()
    lists: dict[str, list[dict[str, Any]]] = {"add_repo_operators": [], "update_repo_operators": []}
    for o in outcomes.changes():
        lists[f"{o.kind}_repo_operators"].append({
            "op_name": o.op_names[0], "op_type": o.op_type, **perf_fields(o.before_us, o.after_us)})
    opat: dict[str, Any] = {
        **_model_times(info, outcomes),
        "opat_tune_result": AOE_STATUS_V1[info.status],
        "repo_modified_operators": lists,
        "repo_summary": dict(info.repo_summary),
    }
    if info.status == "failed":
        opat["tune_failed_operators"] = info.failed(outcomes)
    return [{"basic": basic}, {"OPAT": opat}]


def sgat(info: ReportInfo, outcomes: TaskOutcomes) -> list[dict[str, Any]]:
    """A subgraph-tuning result file: per subgraph its repo_key and times in ms."""
    basic = info.basic()
    lists: dict[str, list[dict[str, Any]]] = {"add_repo_subgraphs": [], "update_repo_subgraphs": []}
    for o in outcomes.changes():
        lists[f"{o.kind}_repo_subgraphs"].append({**perf_fields(o.before_us, o.after_us, "ms"),
                                                  "repo_key": o.repo_key})
    body: dict[str, Any] = {
        **_model_times(info, outcomes),
        "repo_modified_subgraphs": lists,
        "repo_summary": dict(info.repo_summary),
    }
    return [{"basic": basic}, {"SGAT": body}]


def _model_times(info: ReportInfo, outcomes: TaskOutcomes) -> dict[str, Any]:
    """The model's time before and after, and AOE's improvement between them."""
    before, after = info.model_ms or outcomes.model_ms()
    return {"model_baseline_performance(ms)": round(before, 6),
            "model_performance_improvement": improvement(before, after),
            "model_result_performance(ms)": round(after, 6)}


def tuning_result(policies: Mapping[str, dict[str, Any]], op_names: Mapping[str, Sequence[str]]
                  ) -> dict[str, Any]:
    """``{"op_tuning": {op_name: knowledge}}`` for every operator whose key has a policy."""
    op_tuning = {name: policies[key] for key, names in op_names.items() if key in policies
                 for name in names}
    return {"op_tuning": op_tuning}
