"""A campaign: several models tuned for several chips in one run, every key searched once per
chip, the searches spread over an executor (tuner/executors.py: this process, or Dask).

The plan is made once, before anything is measured:

- each (chip, model) pair, chips in the order given and models in the order given within a
  chip, gets its own task, as a tune of that model would, and its own folder for its result
  files (MODEL_CHIP under the work folder);
- the keys the bank already knows are recorded at once, as a tune records them;
- every other key is searched once per chip: the first model that has it (in that order)
  records the search's outcome; each later model records what a tune run after it would
  (:func:`tuner.decisions.after_another`), without measuring again.

Every search starts from the bank as it was when the campaign started (its stored policies
and, for transfer, its nearest keys), and its generators come from the seed and the key, so
the same campaign records the same outcomes whether its searches run here one by one or on
eight workers, in whatever order they complete. Only this process writes to the bank, one
batch per task as results arrive.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from bank import Bank, Outcome, Policy
from tuner.config import load_selection
from tuner.costmodel import CostModel
from tuner.decisions import after_another
from tuner.executors import Executor
from tuner.flow import (
    TaskRun,
    TuneReport,
    backend_for,
    finish,
    open_task,
    outcomes_of,
    record,
    reuse_known,
    search_job,
)
from tuner.keysearch import KeyResult, SearchJob
from tuner.model import load_model
from tuner.options import TuneError, TuneOptions, check_options
from tuner.plan import KeyGroup, plan_tune
from tuner.socs import get_soc
from tuner.transfer import Donors


@dataclass(frozen=True)
class _Holder:
    """A task that has a searched key, with that key's group in its model."""

    run: TaskRun
    group: KeyGroup
    stored: Policy | None


class Progress:
    """A campaign's progress hooks; the default reports nothing."""

    def planned(self, searches: int, tasks: int) -> None:
        """``searches`` (chip, key) searches will run for ``tasks`` tasks."""

    def searched(self, done: int, searches: int, busy: int) -> None:
        """``done`` of ``searches`` are recorded; ``busy`` workers are searching."""


def check_campaign(options: TuneOptions, models: Sequence[Path], chips: Sequence[str]) -> None:
    """Refuse what a campaign does not take, before anything is read or written.

    Raises:
        TuneError: an option that names one model's inputs or resumes one task.
    """
    if options.job_type != "opat":
        raise TuneError("--job-type: a campaign tunes operators; tune subgraphs one model at a time")
    several = len(models) > 1
    for flag, given in (("--input-shape", bool(options.input_shapes)),
                        ("--load-tuning-result", options.load_tuning_result is not None),
                        ("--output", options.output is not None)):
        if given and several:
            raise TuneError(f"{flag}: names one model's operators or inputs; give it with one "
                            "model at a time")
    if options.reload:
        raise TuneError("--reload: continues one model's task; give one model and one "
                        "--soc-version")
    if len(set(chips)) != len(chips) or len({m.resolve() for m in models}) != len(models):
        raise TuneError("a campaign names each model and each --soc-version once")


def run_campaign(bank_opener: Callable[[], Bank], options: TuneOptions, models: Sequence[Path],
                 chips: Sequence[str], executor: Executor,
                 progress: Progress | None = None) -> list[TuneReport]:
    """Tune every model in ``models`` for every chip in ``chips`` into the bank.

    Raises:
        BankError: a bad option, model, config, chip or backend (nothing is written), or a
            store error.
    """
    progress = progress or Progress()
    check_campaign(options, models, chips)
    selection = load_selection(options.tuning_config, options.tune_ops_file)
    loaded = [load_model(path, options.input_shapes) for path in models]
    pairs = []
    for chip in chips:
        soc = get_soc(chip)
        chip_options = replace(options, soc_version=chip)
        check_options(chip_options)
        backend = backend_for(chip_options)
        for path, model in zip(models, loaded, strict=True):
            folder = options.work_dir / f"{model.name}_{chip}"  # a task's files apart
            pairs.append((replace(chip_options, model=path, work_dir=folder),
                          plan_tune(model, soc, selection), CostModel(soc), backend, model))
    with bank_opener() as bank:
        for opts, *_ in pairs:
            opts.work_dir.mkdir(parents=True, exist_ok=True)
        runs = [open_task(bank, opts, plan, cost, backend, model.name, model.sha256, selection)
                for opts, plan, cost, backend, model in pairs]
        jobs, holders = _plan_searches(bank, runs, options)
        progress.planned(len(jobs), len(runs))
        done = 0
        for batch in executor.run(jobs):
            _record_batch(batch, holders)
            done += len(batch)
            progress.searched(done, len(jobs), executor.busy())
        return [finish(run) for run in runs]


def _plan_searches(bank: Bank, runs: Sequence[TaskRun], options: TuneOptions
                   ) -> tuple[list[SearchJob], list[list[_Holder]]]:
    """Record every task's known keys, and list the searches left: one job per (chip, key),
    with every task that has that key, the first one first."""
    donors = None
    if options.transfer:
        op_types = {g.op_type for run in runs for g in run.plan.groups}
        donors = Donors.load(bank, op_types, runs[0].backend.name) if runs else None
    jobs: list[SearchJob] = []
    holders: list[list[_Holder]] = []
    index: dict[tuple[str, str], int] = {}
    for run in runs:  # every lookup reads the bank before the campaign records an outcome
        run.donors = donors
    plans = [(run, *reuse_known(run)) for run in runs]
    for run, todo, known in plans:
        for group in todo:
            where = (run.options.soc_version, group.repo_key)
            stored = known.get(group.repo_key)
            if where in index and holders[index[where]][0].group.info == group.info:
                holders[index[where]].append(_Holder(run, group, stored))
                continue
            index.setdefault(where, len(jobs))
            jobs.append(search_job(run, group, stored, {}))
            holders.append([_Holder(run, group, stored)])
    return jobs, holders


def _record_batch(batch: list[tuple[int, KeyResult]], holders: list[list[_Holder]]) -> None:
    """Record a batch of results: one ``record`` per task, its outcomes in job order."""
    per_task: dict[str, tuple[TaskRun, list[Outcome]]] = {}
    for index, result in sorted(batch, key=lambda item: item[0]):
        first, *later = holders[index]
        outcomes = outcomes_of(first.run, first.group, first.stored, result)
        per_task.setdefault(first.run.task_id, (first.run, []))[1].extend(outcomes)
        for holder in later:
            reused = after_another(holder.run.by, holder.group, outcomes)
            per_task.setdefault(holder.run.task_id, (holder.run, []))[1].extend(reused)
    for run, outcomes in per_task.values():
        record(run, outcomes)
