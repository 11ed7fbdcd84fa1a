"""The incremental tune: skip what the bank knows, search the rest, record as it goes.

For every key of the model, looked up in one batch against the bank:

- known, no retune: ``hit`` then ``reserved``, no measurement;
- known, retune: ``hit``, a search warm-started from the stored policy, then ``update`` if
  strictly faster than the stored entry, else ``reserved``;
- unknown: a search, then ``add`` if strictly faster than the default policy, else
  ``unsatisfied``;
- a search that fails: ``unsatisfied`` (or ``reserved`` after a hit), reason ``failed``.

Each key's outcome is appended as soon as it is known, so the log is the progress record and a
killed run resumes (``reload``) without measuring recorded keys again.
"""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from tunebank import tool_version
from tunebank.bank import Bank, Outcome, Policy, TaskView
from tunebank.bank.atomic import write_json_atomic
from tunebank.bank.formats.opat import ReportInfo, TaskOutcomes, opat_v1, opat_v2, sgat, tuning_result
from tunebank.tuner.decisions import MeasuredBy, borrowing_trail, decide, failed, known_outcomes
from tunebank.tuner.errors import TuneError
from tunebank.tuner.measure.backend import BackendError, BackendSettings, KeyWork, MeasurementBackend
from tunebank.tuner.measure.costmodel import CostModel
from tunebank.tuner.measure.plugins import open_backend
from tunebank.tuner.model.annotate import annotated_model
from tunebank.tuner.model.reading import load_model
from tunebank.tuner.options import (
    TuneOptions,
    check_options,
    read_tuning_result,
    resumed_options,
    soc_of,
)
from tunebank.tuner.plan.grouping import KeyGroup, TunePlan, plan_tune
from tunebank.tuner.plan.selection import TuneSelection, load_selection
from tunebank.tuner.plan.subgraphs import plan_subgraphs
from tunebank.tuner.search.executors import Executor
from tunebank.tuner.search.keysearch import KeyResult, SearchJob, run_search, search_budget
from tunebank.tuner.search.transfer import Donors, Neighbour, start_from
from tunebank.tuner.settings import RESUMED, recorded


class Reporter:
    """Progress hooks; the default reports nothing."""

    def task_begins(self, label: str) -> None:
        """A task begins: ``label`` names its model and chip (and its place in a campaign)."""

    def start(self, keys: int, skipped: int) -> None:
        """The run is about to search ``keys`` keys (``skipped`` were known or recorded)."""

    def key_started(self, index: int, total: int, key: KeyGroup) -> None:
        """The search of a key begins."""

    def generation(self, key: KeyGroup, step: int, steps: int, best_us: float) -> None:
        """One generation (or policy update) of a search ended."""

    def key_done(self, index: int, total: int, key: KeyGroup, outcome: Outcome) -> None:
        """A key's final outcome was recorded."""

    def searched(self, done: int, total: int, busy: int) -> None:
        """Searches run elsewhere: ``done`` of ``total`` are recorded, ``busy`` workers search."""


@dataclass
class TuneReport:
    """What a tune did, for the closing lines and ``--json``."""

    task_id: str
    tuning_name: str
    soc_version: str
    status: str
    repo_summary: dict[str, int]
    measurements: int
    model_baseline_ms: float
    model_result_ms: float
    tuning_time_s: float
    result_file: Path
    tuning_result_file: Path | None
    output_model: Path | None
    failed_operators: list[str]
    not_tunable: dict[str, int]
    resumed: bool
    job_type: str = "opat"
    notices: list[str] = field(default_factory=list)

    @property
    def improvement_pct(self) -> float:
        if self.model_result_ms <= 0:
            return 0.0
        return (self.model_baseline_ms - self.model_result_ms) / self.model_result_ms * 100

    def as_json(self) -> dict[str, Any]:
        """The ``--json`` object."""
        return {
            "task_id": self.task_id, "job_type": self.job_type, "tuning_name": self.tuning_name,
            "soc_version": self.soc_version, "repo_summary": self.repo_summary,
            "opat_tuning_result": {"successful": "tuning successful",
                                   "failed": "tuning failed"}.get(self.status, self.status),
            "measurements": self.measurements,
            "model_baseline_ms": round(self.model_baseline_ms, 6),
            "model_result_ms": round(self.model_result_ms, 6),
            "performance_improvement": f"{self.improvement_pct:.2f}%",
            "tuning_time_s": round(self.tuning_time_s, 3),
            "result_file": str(self.result_file),
            "tuning_result_file": str(self.tuning_result_file) if self.tuning_result_file else None,
            "output_model": str(self.output_model) if self.output_model else None,
            "failed_operators": self.failed_operators, "not_tunable": self.not_tunable,
            "resumed": self.resumed, "notices": self.notices,
        }


@dataclass
class TaskRun:
    """The state of one tune while it runs."""

    bank: Bank
    options: TuneOptions
    plan: TunePlan
    cost: CostModel
    """The chip's analytic model: its static fit check, for mapping borrowed policies."""
    backend: MeasurementBackend
    task_id: str
    tuning_name: str
    stamp: str
    result_file: Path
    outcomes: TaskOutcomes
    started: float
    measurements: int = 0
    notices: list[str] = field(default_factory=list)
    donors: Donors | None = None
    """The bank's policies the keys of this tune may borrow from, read once before the first
    search (None: transfer is off)."""
    written_keys: int = 0
    written_at: float = 0.0
    start: dict[str, tuple[Neighbour, ...]] = field(default_factory=dict)
    """The known keys each searched key's search started from (transfer), by repo_key."""

    @property
    def by(self) -> MeasuredBy:
        """What every outcome of this run records as its backend."""
        return MeasuredBy(self.backend.name, self.backend.version)


RESULT_FILE_EVERY_S = 10.0
"""While a tune runs, its result file is rewritten when the keys finished have doubled since the
last rewrite, or this many seconds have passed: a rewrite per key would write O(keys^2) bytes
(8,000 keys of a large model: gigabytes), doubling writes at most twice the final file."""


def tune(bank_opener: Callable[[], Bank], options: TuneOptions,
         reporter: Reporter | None = None) -> TuneReport:
    """Tune ``options.model`` into the bank; every input is checked before the bank is touched.

    Args:
        bank_opener: opens (creating if needed) the bank, called only once inputs are valid.
        options: what to tune and how.
        reporter: progress hooks.

    Raises:
        BankError: a bad option, model, config or chip (nothing is written), or a store error.
    """
    reporter = reporter or Reporter()
    check_options(options)
    soc = soc_of(options)
    selection = load_selection(options.tuning_config, options.tune_ops_file)
    model = load_model(options.model, options.input_shapes)
    plan = plan_subgraphs(model, soc) if options.job_type == "sgat" else plan_tune(model, soc, selection)
    loaded = read_tuning_result(options.load_tuning_result)
    backend = backend_for(options) if not options.reload else None  # a resumed task's is its own
    with bank_opener() as bank:
        run = open_task(bank, options, plan, CostModel(soc), backend, model.name, model.sha256,
                         selection)
        tune_keys(run, loaded, reporter)
        return finish(run)


def settings_of(options: TuneOptions) -> BackendSettings:
    """What ``options`` pass their backend."""
    return BackendSettings(options.noise, options.run_loop, options.sim_delay_s,
                           options.measure_timeout_s)


def backend_for(options: TuneOptions) -> MeasurementBackend:
    """The backend ``options`` name, made with their noise and run loop, and able to measure
    their chip.

    Raises:
        BackendError: no such backend, it failed to start, or it cannot measure the chip.
    """
    backend = open_backend(options.backend, settings_of(options))
    chips = backend.chips()
    if chips is not None and options.soc_version not in chips:
        raise BackendError(f"--backend: {backend.name} cannot measure {options.soc_version} "
                           f"(it measures {', '.join(sorted(chips)) or 'no chip'})")
    return backend


def open_task(bank: Bank, options: TuneOptions, plan: TunePlan, cost: CostModel,
              backend: MeasurementBackend | None, model_name: str, model_hash: str,
              selection: TuneSelection, resume: TaskView | None = None) -> TaskRun:
    """Start the model's task, or with ``options.reload`` continue its unfinished one (or the
    unfinished task ``resume``, which a campaign found)."""
    outcomes = TaskOutcomes()
    notices: list[str] = []
    tuning_name = options.tuning_name or f"{model_name}_{options.soc_version}"
    if options.reload or resume is not None:
        task = resume or _unfinished_task(bank, options.soc_version, model_hash, options.job_type)
        events = list(bank.events(task_id=task.task_id))
        planned = cost.soc.ai_cores
        options = replace(resumed_options(options, events[0].event.payload), reload=True)
        if options.aicore_num not in (None, planned):  # the keys were planned on other cores
            raise TuneError(f"--aicore-num: the unfinished task {task.task_id} runs on "
                            f"{options.aicore_num} AI cores; give --aicore-num "
                            f"{options.aicore_num} with --reload to continue it")
        backend = backend_for(options)
        outcomes.absorb(events)
        task_id, tuning_name = task.task_id, task.tuning_name or tuning_name
        stamp = _stamp(datetime.fromisoformat(task.started_at.replace("Z", "+00:00")))
    else:
        assert backend is not None  # made by tune() for a new task
        for task in _unfinished_tasks(bank, options.soc_version, model_hash, options.job_type)[:1]:
            notices.append(f"task {task.task_id} of this model is unfinished; "
                           "--reload would have continued it")
        settings = {name: getattr(options, name) for name in RESUMED if name != "mode"}
        settings["aicore_num"] = cost.soc.ai_cores  # the count the keys were planned on
        extra = {**recorded({**settings, "backend": backend.name}),  # search_mode: its own field
                 "cost_model_version": backend.version,
                 "tool_version": tool_version(), "selected": sorted(selection.op_names)}
        if options.campaign is not None:
            extra["campaign"] = options.campaign
        task_id = bank.start_task(options.soc_version, tuning_name=tuning_name,
                                  model_name=model_name, model_hash=model_hash,
                                  job_type=options.job_type,
                                  search_mode=options.mode, extra=extra)
        stamp = _stamp(datetime.now())
    result_file = options.work_dir / f"aoe_result_{options.job_type}_{stamp}_{os.getpid()}.json"
    return TaskRun(bank=bank, options=options, plan=plan, cost=cost, backend=backend,
                   task_id=task_id, tuning_name=tuning_name, stamp=stamp, result_file=result_file,
                   outcomes=outcomes, started=time.monotonic(), notices=notices)


def _stamp(moment: datetime) -> str:
    return moment.strftime("%Y%m%d%H%M%S") + f"{moment.microsecond // 1000:03d}"


def _unfinished_task(bank: Bank, soc_version: str, model_hash: str, job_type: str) -> TaskView:
    for task in _unfinished_tasks(bank, soc_version, model_hash, job_type):
        return task
    raise TuneError(f"--reload: no unfinished task for this model on {soc_version}; "
                    "run without --reload to start one")


def _unfinished_tasks(bank: Bank, soc_version: str, model_hash: str, job_type: str) -> list[TaskView]:
    """This model's incomplete tasks of this job type on this chip, newest first."""
    return [task for task in reversed(bank.tasks())
            if task.status == "incomplete" and task.soc_version == soc_version
            and task.model_hash == model_hash and (task.job_type or "opat") == job_type]


def reuse_known(run: TaskRun) -> tuple[list[KeyGroup], dict[str, Policy]]:
    """Record the outcomes of the task's keys the bank already answers (a known policy, or a
    search that found no gain), unless it retunes; return the keys left to search (not yet
    recorded) and the stored policies of the known ones."""
    todo = [g for g in run.plan.groups if g.repo_key not in run.outcomes.keys]
    known = run.bank.lookup(run.options.soc_version, [(g.repo_key, g.info) for g in todo])
    if not run.options.retune:
        asked = [(g.repo_key, g.info) for g in todo if g.repo_key not in known]
        fruitless = run.bank.searched_without_gain(run.options.soc_version, asked)
        reused = [g for g in todo if g.repo_key in known or g.repo_key in fruitless]
        record(run, [o for g in reused
                     for o in known_outcomes(run.by, g, known.get(g.repo_key),
                                             fruitless.get(g.repo_key))])
        todo = [g for g in todo if g not in reused]
    return todo, known


def tune_keys(run: TaskRun, loaded: dict[str, dict[str, Any]], reporter: Reporter,
              executor: Executor | None = None, place: tuple[int, int] | None = None) -> None:
    """Record the task's known keys, then search the others: one by one in this process, or
    as jobs an ``executor`` runs (a Dask cluster), recorded in batches as they complete. Each
    search depends on its job alone, so both ways record the same outcomes. ``place``: the
    task's number in a campaign and the campaign's tasks, for the progress."""
    where = f", task {place[0]}/{place[1]}" if place is not None else ""
    reporter.task_begins(f"{run.options.model.stem} on {run.options.soc_version}{where}")
    todo, known = reuse_known(run)
    if run.options.transfer and todo and run.options.job_type == "opat":
        run.donors = Donors.load(run.bank, {g.op_type for g in todo}, run.options.soc_version,
                                 run.backend.name, exclude_task=run.task_id)
    reporter.start(len(todo), len(run.plan.groups) - len(todo))
    if executor is not None:
        _tune_on(executor, run, todo, known, loaded, reporter)
        return
    for index, group in enumerate(todo, 1):
        reporter.key_started(index, len(todo), group)
        outcomes = _search_key(run, group, known.get(group.repo_key), loaded, reporter)
        record(run, outcomes)
        reporter.key_done(index, len(todo), group, outcomes[-1])


def _tune_on(executor: Executor, run: TaskRun, todo: list[KeyGroup], known: dict[str, Policy],
             loaded: dict[str, dict[str, Any]], reporter: Reporter) -> None:
    jobs = [search_job(run, group, known.get(group.repo_key), loaded) for group in todo]
    done = 0
    for batch in executor.run(jobs):
        outcomes: list[Outcome] = []
        finals: list[tuple[int, KeyGroup, Outcome]] = []
        for index, found in sorted(batch, key=lambda item: item[0]):
            group = todo[index]
            made = outcomes_of(run, group, known.get(group.repo_key), found)
            outcomes += made
            finals.append((index + 1, group, made[-1]))
        record(run, outcomes)
        for index, group, final in finals:  # the same facts as a search run here
            reporter.key_done(index, len(jobs), group, final)
        done += len(batch)
        reporter.searched(done, len(jobs), executor.busy())


def record(run: TaskRun, outcomes: list[Outcome]) -> None:
    if not outcomes:
        return
    result = run.bank.record(run.task_id, outcomes)
    run.outcomes.absorb(result.appended)
    if len(run.outcomes.keys) >= 2 * run.written_keys \
            or time.monotonic() - run.written_at >= RESULT_FILE_EVERY_S:
        _write_result_file(run, "incomplete", None)


def _search_key(run: TaskRun, group: KeyGroup, stored: Policy | None,
                loaded: dict[str, dict[str, Any]], reporter: Reporter) -> list[Outcome]:
    job = search_job(run, group, stored, loaded)
    found = run_search(job, run.backend, lambda g, n, best: reporter.generation(group, g, n, best))
    return outcomes_of(run, group, stored, found)


def outcomes_of(run: TaskRun, group: KeyGroup, stored: Policy | None,
                found: KeyResult) -> list[Outcome]:
    """What ``run`` records for its search of ``group``'s key (its measurements counted)."""
    run.measurements += found.measurements
    if found.error is not None or found.candidate is None:
        return failed(run.by, group, stored, found.default_us, found.measurements,
                      found.error or "no feasible candidate")
    neighbours = run.start.get(group.repo_key, ())
    trail = borrowing_trail(neighbours, found.budget, found.measurements, group.space.size)
    return decide(run.by, group, stored, found.default_us, found.found_us, found.candidate,
                  found.measurements, found.reason, trail)


def search_job(run: TaskRun, group: KeyGroup, stored: Policy | None,
               loaded: dict[str, dict[str, Any]]) -> SearchJob:
    """The job that searches ``group``'s key: warm-started from its stored policy (a retune),
    or measuring a loaded policy alone, or starting from the bank's nearest keys' policies."""
    options = run.options
    warm = group.space.encode(stored.knowledge) if stored else _loaded_candidate(group, loaded)
    start = start_from(run.donors if stored is None else None,  # a known key warm-starts instead
                       group.info, group.repo_key, options.soc_version, group.space, run.cost,
                       group.work, search_budget(options.mode, options.budget))
    run.start[group.repo_key] = start.neighbours
    return SearchJob(KeyWork(group.repo_key, run.cost.soc, group.work, group.space),
                     options.mode, options.budget, options.seed, run.backend.name,
                     settings_of(options), warm,
                     measure_only=stored is None and warm is not None,
                     borrowed=start.borrowed, patience=start.patience)


def _loaded_candidate(group: KeyGroup, loaded: dict[str, dict[str, Any]]) -> tuple[int, ...] | None:
    for name in group.op_names:
        if name in loaded:
            return group.space.encode(loaded[name])
    return None


def _write_result_file(run: TaskRun, status: str, tuning_time: float | None) -> None:
    """Rewrite the result file: compact while the run goes on, indented once it ends."""
    task = run.bank.task(run.task_id, exact=True)
    info = ReportInfo(run.tuning_name, status, tuning_time, task.repo_summary())
    if run.options.job_type == "sgat":
        content: Any = sgat(info, run.outcomes)
    elif run.options.result_format == "v1":
        content = opat_v1(info, run.outcomes)
    else:
        content = opat_v2(f"report_{run.stamp}_{threading.get_native_id()}", info, run.outcomes)
    write_json_atomic(run.result_file, content, pretty=status != "incomplete")
    run.written_keys, run.written_at = len(run.outcomes.keys), time.monotonic()


def finish(run: TaskRun) -> TuneReport:
    failed = run.outcomes.failed_operators
    status = "failed" if failed else "successful"
    elapsed = time.monotonic() - run.started
    before_ms, after_ms = run.outcomes.model_ms()
    run.bank.finish_task(run.task_id, status=status, tuning_time_s=round(elapsed, 3),
                         model_baseline_ms=before_ms, model_result_ms=after_ms,
                         failed_operators=failed)
    _write_result_file(run, status, elapsed)
    tuning_file, output_model = None, None
    if run.options.job_type == "opat":  # tuning_result.json and the model hold operator policies
        asked = [(g.repo_key, g.info) for g in run.plan.groups]
        policies = run.bank.lookup(run.options.soc_version, asked)
        knowledge = {key: p.knowledge for key, p in policies.items()}
        names = {g.repo_key: g.op_names for g in run.plan.groups}
        output_model = _write_output(run, knowledge, names)
        if output_model is not None:  # as AOE: tuning_result.json with the model, in --output
            tuning_file = output_model.parent / "tuning_result.json"
        else:
            tuning_file = _write_tuning_result(run, tuning_result(knowledge, names))
    return TuneReport(
        task_id=run.task_id, tuning_name=run.tuning_name, soc_version=run.options.soc_version,
        status=status, repo_summary=run.bank.task(run.task_id).repo_summary(), measurements=run.measurements,
        model_baseline_ms=before_ms, model_result_ms=after_ms, tuning_time_s=elapsed,
        result_file=run.result_file, tuning_result_file=tuning_file, output_model=output_model,
        failed_operators=failed, not_tunable=dict(Counter(op.op_type for op in run.plan.not_tunable)),
        resumed=run.options.reload, job_type=run.options.job_type, notices=run.notices)


def _write_tuning_result(run: TaskRun, content: dict[str, Any]) -> Path:
    """tuning_result.json beside the result file, unless one is there already (another tune's,
    in the same folder): then this tune's takes the result file's stamp, and a notice says so.
    Never an overwrite, even of a file another tune writes at the same moment."""
    target = run.result_file.parent / "tuning_result.json"
    try:
        write_json_atomic(target, content, exclusive=True)
        return target
    except FileExistsError:
        own = target.with_name(f"tuning_result_{run.stamp}_{os.getpid()}.json")
        write_json_atomic(own, content)
        run.notices.append(f"{target.name} was there already (another tune's, left as it was); "
                           f"this tune's is {own.name}")
        return own


def _write_output(run: TaskRun, knowledge: dict[str, dict[str, Any]],
                  names: dict[str, list[str]]) -> Path | None:
    if run.options.output is None:
        return None
    stem = f"{run.options.model.stem}_{run.stamp}"
    result_dir = run.options.output / "aoe_workspace" / stem / "tunespace" / "result"
    by_name = {name: (key, knowledge[key]) for key, ops in names.items() if key in knowledge
               for name in ops}
    target = result_dir / f"{stem}_tune.onnx"
    annotated_model(run.options.model, by_name, target)
    write_json_atomic(result_dir / "tuning_result.json", tuning_result(knowledge, names))
    return target
