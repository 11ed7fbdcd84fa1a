"""A campaign: several models tuned for several chips in one run, the searches spread over an
executor (tuner/search/executors.py: this process, or a Dask cluster).

Every model is read and planned, and every chip and the backend checked, before the bank is
opened. Then each (chip, model) pair, chips in the order given and models in that order
within a chip, is one task, tuned as ``bank tune`` would tune that model after the ones
before it: the keys the bank knows by then (those an earlier model of the campaign searched
included) are reused, not measured, and the others are searched, starting from the bank's
nearest known keys as it holds them then. So a key shared by several models is searched once
per chip, each model keeps its own task, repo_summary and result files (in a folder of their
own, named after the model's file and the chip), and the campaign's bank is the bank those
tunes, run one after the other, make.

Within a task the searches are independent jobs (tuner/search/keysearch.py): each depends on its job
alone, so they give the same outcomes in this process one by one or on eight workers, in
whatever order they complete. Only this process writes to the bank.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from tunebank.bank import Bank, TaskView
from tunebank.bank.canonical import digest
from tunebank.tuner.campaign.file import CampaignModel
from tunebank.tuner.errors import TuneError
from tunebank.tuner.flow import Reporter, TuneReport, backend_for, finish, open_task, tune_keys
from tunebank.tuner.measure.costmodel import CostModel
from tunebank.tuner.model.reading import load_model
from tunebank.tuner.options import TuneOptions, check_options, soc_of
from tunebank.tuner.plan.grouping import plan_tune
from tunebank.tuner.plan.selection import load_selection
from tunebank.tuner.search.executors import Executor
from tunebank.tuner.settings import RESUMED


def models_of(paths: Sequence[Path], options: TuneOptions) -> list[CampaignModel]:
    """The campaign's models named on the command line, each with the options' inputs and
    tuning configs."""
    return [CampaignModel(path, dict(options.input_shapes), options.tuning_config,
                          options.tune_ops_file) for path in paths]


def check_campaign(options: TuneOptions, models: Sequence[CampaignModel],
                   chips: Sequence[str]) -> None:
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
    if len(set(chips)) != len(chips) or len({m.path.resolve() for m in models}) != len(models):
        raise TuneError("a campaign names each model and each --soc-version once")


@dataclass
class CampaignReport:
    """What a campaign did: the report of each task it ran, in campaign order, and the tasks
    a ``--reload`` found finished and did not run again."""

    reports: list[TuneReport] = field(default_factory=list)
    finished_before: list[TaskView] = field(default_factory=list)


def campaign_id(models: Sequence[tuple[CampaignModel, str]], chips: Sequence[str],
                options: TuneOptions) -> str:
    """The id of a campaign: the same models (by content, with the same inputs and tuning
    configs), chips and search settings, in the same order, give the same id, so
    ``--reload`` finds its tasks."""
    settings = {name: getattr(options, name) for name in RESUMED
                if name != "aicore_num" or options.aicore_num is not None}  # ids from before it
    return digest({"models": [[sha256, {k: list(v) for k, v in m.input_shapes.items()},
                               str(m.tuning_config or ""), str(m.tune_ops_file or "")]
                              for m, sha256 in models],
                   "chips": list(chips), "settings": settings})[:16]


def run_campaign(bank_opener: Callable[[], Bank], options: TuneOptions,
                 models: Sequence[CampaignModel], chips: Sequence[str],
                 executor: Executor | None = None,
                 reporter: Reporter | None = None) -> CampaignReport:
    """Tune every model in ``models`` for every chip in ``chips`` into the bank.

    Each task records the campaign's id and its place in it when it starts. With
    ``options.reload`` a campaign that was stopped goes on where it stopped: its finished
    tasks are not run again, its unfinished one continues (nothing it recorded is measured
    again), and the rest start.

    Args:
        executor: where the searches run (``None``: in this process, one by one).

    Raises:
        BankError: a bad option, model, config, chip or backend (nothing is written), or a
            store error.
    """
    reporter = reporter or Reporter()
    check_campaign(options, models, chips)
    read = [(entry, load_selection(entry.tuning_config, entry.tune_ops_file),
             load_model(entry.path, entry.input_shapes)) for entry in models]
    tasks = []
    for chip in chips:
        chip_options = replace(options, soc_version=chip)
        check_options(chip_options)
        soc = soc_of(chip_options)
        backend = backend_for(chip_options)
        for entry, selection, model in read:
            folder = options.work_dir / f"{entry.path.stem}_{chip}"
            task_options = replace(chip_options, model=entry.path, work_dir=folder,
                                   input_shapes=entry.input_shapes,
                                   tuning_config=entry.tuning_config,
                                   tune_ops_file=entry.tune_ops_file)
            tasks.append((task_options, plan_tune(model, soc, selection), CostModel(soc),
                          backend, model, selection))
    if executor is not None:
        executor.check_chips(chips)
    cid = campaign_id([(entry, model.sha256) for entry, _, model in read], chips, options)
    done = CampaignReport()
    with bank_opener() as bank:
        for place, (task_options, plan, cost, backend, model, selection) in enumerate(tasks):
            task_options = replace(task_options, campaign=f"{cid}/{place}", reload=False)
            found = _task_of(bank, task_options, model.sha256) if options.reload else None
            if found is not None and found.finished:
                done.finished_before.append(found)
                continue
            task_options.work_dir.mkdir(parents=True, exist_ok=True)
            run = open_task(bank, task_options, plan, cost, backend, model.name, model.sha256,
                            selection, resume=found)
            tune_keys(run, {}, reporter, executor, (place + 1, len(tasks)))
            done.reports.append(finish(run))
    return done


def _task_of(bank: Bank, options: TuneOptions, model_hash: str) -> TaskView | None:
    """The task the campaign started for this place, if it started one."""
    for task in bank.tasks():
        if task.soc_version == options.soc_version and task.model_hash == model_hash:
            started = next(bank.events(task_id=task.task_id)).event.payload
            if started.get("campaign") == options.campaign:
                return task
    return None
