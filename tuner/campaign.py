"""A campaign: several models tuned for several chips in one run, the searches spread over an
executor (tuner/executors.py: this process, or a Dask cluster).

Every model is read and planned, and every chip and the backend checked, before the bank is
opened. Then each (chip, model) pair, chips in the order given and models in that order
within a chip, is one task, tuned as ``bank tune`` would tune that model after the ones
before it: the keys the bank knows by then (those an earlier model of the campaign searched
included) are reused, not measured, and the others are searched, starting from the bank's
nearest known keys as it holds them then. So a key shared by several models is searched once
per chip, each model keeps its own task, repo_summary and result files (in a folder of their
own, named after the model's file and the chip), and the campaign's bank is the bank those
tunes, run one after the other, make.

Within a task the searches are independent jobs (tuner/keysearch.py): each depends on its job
alone, so they give the same outcomes in this process one by one or on eight workers, in
whatever order they complete. Only this process writes to the bank.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from bank import Bank
from tuner.config import load_selection
from tuner.costmodel import CostModel
from tuner.executors import Executor
from tuner.flow import Reporter, TuneReport, backend_for, finish, open_task, tune_keys
from tuner.model import load_model
from tuner.options import TuneError, TuneOptions, check_options
from tuner.plan import plan_tune
from tuner.socs import get_soc


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
                 chips: Sequence[str], executor: Executor | None = None,
                 reporter: Reporter | None = None) -> list[TuneReport]:
    """Tune every model in ``models`` for every chip in ``chips`` into the bank; return each
    task's report, in campaign order.

    Args:
        executor: where the searches run (``None``: in this process, one by one).

    Raises:
        BankError: a bad option, model, config, chip or backend (nothing is written), or a
            store error.
    """
    reporter = reporter or Reporter()
    check_campaign(options, models, chips)
    selection = load_selection(options.tuning_config, options.tune_ops_file)
    loaded = [load_model(path, options.input_shapes) for path in models]
    tasks = []
    for chip in chips:
        soc = get_soc(chip)
        chip_options = replace(options, soc_version=chip)
        check_options(chip_options)
        backend = backend_for(chip_options)
        for path, model in zip(models, loaded, strict=True):
            folder = options.work_dir / f"{path.stem}_{chip}"
            tasks.append((replace(chip_options, model=path, work_dir=folder),
                          plan_tune(model, soc, selection), CostModel(soc), backend, model))
    reports = []
    with bank_opener() as bank:
        for task_options, plan, cost, backend, model in tasks:
            task_options.work_dir.mkdir(parents=True, exist_ok=True)
            run = open_task(bank, task_options, plan, cost, backend, model.name, model.sha256,
                            selection)
            tune_keys(run, {}, reporter, executor)
            reports.append(finish(run))
    return reports
