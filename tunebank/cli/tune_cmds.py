"""Commands that fill the bank: tune, and socs (the chips the cost model knows)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Sequence
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from tunebank.cli.common import (
    DbOption,
    JsonOption,
    fail,
    open_bank,
    print_json,
    print_table,
    say,
    soc_option,
    user_errors,
)
from tunebank.tuner.settings import RESUMED, SETTINGS

if TYPE_CHECKING:
    from tunebank.tuner.campaign.file import CampaignModel
    from tunebank.tuner.flow import Reporter, TuneReport
    from tunebank.tuner.options import TuneOptions
    from tunebank.tuner.search.transfer import Neighbour


class Mode(StrEnum):
    ga = "ga"
    rl = "rl"
    random = "random"
    exhaustive = "exhaustive"


class OnOff(StrEnum):
    on = "on"
    off = "off"


class ResultFormat(StrEnum):
    v1 = "v1"
    v2 = "v2"




_FLAG = {name: setting.flag for name, setting in SETTINGS.items()}
_HELP = {name: setting.help for name, setting in SETTINGS.items()}
"""The search settings' options, as tunebank/tuner/settings.py defines them (one place)."""

RESUME = "what was recorded stays, and the same command with --reload continues the task"
"""What a tune stopped midway (interrupted, or its backend failed) tells the user."""


@user_errors
def tune(
    ctx: typer.Context,
    models: Annotated[list[Path] | None, typer.Argument(
        exists=True, dir_okay=False, metavar="MODEL...",
        help="The ONNX model; several make a campaign (each key searched once per chip).")] = None,
    soc_versions: Annotated[list[str] | None, soc_option(
        "Chip to tune for (see `bank socs`); repeat it for a campaign.")] = None,
    campaign: Annotated[Path | None, typer.Option(
        "--campaign", exists=True, dir_okay=False,
        help="A campaign file (TOML: models with their inputs and configs, chips, settings; "
             "see docs/tuning.md) instead of MODEL and --soc-version.")] = None,
    db: DbOption = None,
    job_type: Annotated[str, typer.Option(
        "--job-type", metavar="<operator|subgraph|2|1>",
        help="subgraph (AOE's 1: fusion and schedule of fusable subgraphs) or "
             "operator (2: each operator's tiling).")] = "operator",
    workers: Annotated[int | None, typer.Option(
        "--workers", min=1, help="Search on a Dask LocalCluster of N processes started here "
                                 "(needs the cluster extra).")] = None,
    scheduler: Annotated[str | None, typer.Option(
        "--scheduler", help="Search on the running Dask cluster at this address "
                            "(tcp://HOST:PORT; needs the cluster extra).")] = None,
    mode: Annotated[Mode, typer.Option(_FLAG["mode"], help=_HELP["mode"])] = Mode.ga,
    budget: Annotated[int | None, typer.Option(_FLAG["budget"], min=1, help=_HELP["budget"])] = None,
    seed: Annotated[int, typer.Option(_FLAG["seed"], help=_HELP["seed"])] = 0,
    retune: Annotated[bool, typer.Option(_FLAG["retune"], help=_HELP["retune"])] = False,
    reload: Annotated[bool, typer.Option(
        "--reload", help="Resume this model's unfinished task, with its mode, seed and budget.")] = False,
    input_shape: Annotated[str | None, typer.Option(
        "--input-shape", help='Fix input shapes: "name:1,3,224,224;other:8,128".')] = None,
    tuning_config: Annotated[Path | None, typer.Option(
        "--tuning-config", exists=True, dir_okay=False,
        help="JSON: ops_to_tune, tiling_range, impl_options.")] = None,
    tune_ops_file: Annotated[Path | None, typer.Option(
        "--tune-ops-file", exists=True, dir_okay=False,
        help="JSON: tune_ops_name and/or tune_ops_type (their union is tuned).")] = None,
    load_tuning_result: Annotated[Path | None, typer.Option(
        "--load-tuning-result", exists=True, dir_okay=False,
        help="A tuning_result.json whose policies are measured and kept instead of searched.")] = None,
    backend: Annotated[str, typer.Option(_FLAG["backend"], help=_HELP["backend"])] = "sim",
    noise: Annotated[float, typer.Option(_FLAG["noise"], help=_HELP["noise"])] = 0.0,
    run_loop: Annotated[int, typer.Option(_FLAG["run_loop"], help=_HELP["run_loop"])] = 1,
    sim_delay_ms: Annotated[float, typer.Option(_FLAG["sim_delay_s"], help=_HELP["sim_delay_s"])] = 0.0,
    measure_timeout: Annotated[float, typer.Option(
        _FLAG["measure_timeout_s"], metavar="SECONDS", help=_HELP["measure_timeout_s"])] = 600.0,
    tuning_name: Annotated[str | None, typer.Option("--tuning-name", help="Task name.")] = None,
    result_format: Annotated[ResultFormat, typer.Option(
        "--result-format", help="OPAT result file format: v2 (newer) or v1 (older).")] = ResultFormat.v2,
    output: Annotated[Path | None, typer.Option(
        help="Write the annotated model in DIR/aoe_workspace/... .")] = None,
    transfer: Annotated[bool, typer.Option(_FLAG["transfer"], help=_HELP["transfer"])] = True,
    aicore_num: Annotated[int | None, typer.Option(
        _FLAG["aicore_num"], min=1, metavar="N", help=_HELP["aicore_num"])] = None,
    progress_bar: Annotated[OnOff, typer.Option("--progress-bar", help="Progress on stderr.")] = OnOff.on,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress on stderr.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Tune ONNX models into the bank: known keys are reused, new ones searched and recorded.

    Several models or several --soc-version make a campaign: a task per model and chip, each
    key searched once per chip; --workers or --scheduler spread the searches over Dask."""
    from tunebank.tuner.errors import TuneError
    from tunebank.tuner.flow import tune as run_tune
    from tunebank.tuner.model.reading import parse_input_shapes
    from tunebank.tuner.options import TuneOptions, job_type_of

    if workers is not None and scheduler is not None:
        raise TuneError("--workers and --scheduler: give one (a cluster started here, or a "
                        "running one)")
    models, soc_versions = models or [], soc_versions or []
    if campaign is None and not models:
        raise fail("Missing argument 'MODEL'. (see `bank tune --help`)", code=2)
    if campaign is None and not soc_versions:
        raise TuneError("--soc-version: missing (the chip to tune for; see `bank socs`)")
    if campaign is not None and (models or soc_versions):
        raise TuneError(f"--campaign: {campaign} names the models and chips; give no MODEL or "
                        "--soc-version with it")
    options = TuneOptions(
        model=models[0] if models else Path(), soc_version=soc_versions[0] if soc_versions else "",
        job_type=job_type_of(job_type), mode=mode.value,
        budget=budget, seed=seed, retune=retune, reload=reload, input_shapes=parse_input_shapes(input_shape),
        tuning_config=tuning_config, tune_ops_file=tune_ops_file,
        load_tuning_result=load_tuning_result, noise=noise, run_loop=run_loop,
        tuning_name=tuning_name, result_format=result_format.value, work_dir=result_folder(),
        output=output, transfer=transfer, backend=backend, sim_delay_s=sim_delay_ms / 1000,
        measure_timeout_s=measure_timeout, aicore_num=aicore_num,
        given=_given(ctx, RESUMED))
    show = progress_bar == OnOff.on and not as_json and not quiet
    if campaign is not None:
        options, entries, chips = _campaign_file(campaign, options)
        _campaign(options, entries, chips, db, workers, scheduler, show, as_json)
        return
    if len(models) > 1 or len(soc_versions) > 1 or workers is not None or scheduler is not None:
        from tunebank.tuner.campaign.runner import models_of

        _campaign(options, models_of(models, options), soc_versions, db, workers, scheduler,
                  show, as_json)
        return
    from tunebank.tuner.measure.backend import MeasurementFailed

    reporter = _progress() if show else None
    try:
        report = run_tune(lambda: open_bank(db, create=True), options, reporter)
    except KeyboardInterrupt:
        say(f"bank: interrupted; {RESUME}", err=True)
        raise typer.Exit(130) from None
    except MeasurementFailed as exc:
        raise fail(f"{exc}; {RESUME}") from None
    if as_json:
        print_json(report.as_json())
    else:
        _closing_lines(report)


def _campaign_file(path: Path, options: TuneOptions
                   ) -> tuple[TuneOptions, list[CampaignModel], list[str]]:
    """The campaign ``path`` describes: its settings over the options' defaults (an option
    given on the command line that the file sets otherwise is an error), models and chips."""
    from dataclasses import replace

    from tunebank.tuner.campaign.file import read_campaign
    from tunebank.tuner.errors import TuneError

    read = read_campaign(path)
    for name, value in read.settings.items():
        if name in options.given and getattr(options, name) != value:
            raise TuneError(f"--{name.replace('_', '-')}: {getattr(options, name)} differs from "
                            f"{value!r}, which --campaign {path} sets")
    return replace(options, **read.settings), list(read.models), list(read.chips)


def _campaign(options: TuneOptions, models: Sequence[CampaignModel], chips: Sequence[str],
              db: str | None, workers: int | None, scheduler: str | None, show: bool,
              as_json: bool) -> None:
    """Several models, several chips, or searches spread over Dask: one campaign."""
    from tunebank.tuner.campaign.runner import check_campaign, run_campaign
    from tunebank.tuner.measure.backend import MeasurementFailed
    from tunebank.tuner.search.executors import OnDask

    check_campaign(options, models, chips)  # before a cluster is started for nothing
    executor = None if workers is None and scheduler is None \
        else OnDask(workers=workers, scheduler=scheduler)
    try:
        reports = run_campaign(lambda: open_bank(db, create=True), options, models, chips,
                               executor, _progress() if show else None)
    except KeyboardInterrupt:
        say(f"bank: interrupted; {RESUME}", err=True)
        raise typer.Exit(130) from None
    except MeasurementFailed as exc:
        raise fail(f"{exc}; {RESUME}") from None
    finally:
        if executor is not None:
            executor.close()
    if as_json:
        print_json([report.as_json() for report in reports.reports])
        return
    for task in reports.finished_before:
        say(f"task {task.task_id} ({task.tuning_name}, {task.soc_version}) finished "
            "before; not run again")
    for report in reports.reports:
        _closing_lines(report)
        say("")


def _given(ctx: typer.Context, names: Iterable[str]) -> frozenset[str]:
    """The options among ``names`` that the user set, on the command line or through the
    environment, rather than left at their defaults."""
    chosen = ("COMMANDLINE", "ENVIRONMENT")  # by name: typer bundles its own copy of click
    return frozenset(name for name in names
                     if getattr(ctx.get_parameter_source(name), "name", None) in chosen)


def result_folder() -> Path:
    """Where AOE writes its result files: $ASCEND_WORK_PATH, else the working folder."""
    return Path(os.environ.get("ASCEND_WORK_PATH") or Path.cwd())


def _progress() -> Reporter:
    """The tune's progress on stderr: a bar redrawn in place on a terminal, a few lines else."""
    from tunebank.cli.progress import TuneProgress

    return TuneProgress(sys.stderr)


def _closing_lines(report: TuneReport) -> None:
    summary = report.repo_summary
    say(f"task {report.task_id} ({report.soc_version}): {report.status}"
        + (" (resumed)" if report.resumed else ""))
    say("repo_summary: " + ", ".join(f"{k}={v}" for k, v in summary.items()))
    say(f"measurements: {report.measurements}")
    say(f"Model performance before tuning: {report.model_baseline_ms:.6f} ms")
    say(f"Model performance after tuning:  {report.model_result_ms:.6f} ms")
    say(f"{report.tuning_name} process finished. "
        f"Performance improved by {report.improvement_pct:.2f}%")
    say(f"Tuning took {report.tuning_time_s:.2f} s")
    say(f"Result file: {report.result_file}")
    if report.tuning_result_file:
        say(f"Tuning result: {report.tuning_result_file}")
    if report.output_model:
        say(f"Tuned model: {report.output_model}")
    if report.not_tunable:
        say(("Not in a fusable subgraph (not counted): " if report.job_type == "sgat"
                    else "Not tunable (no search space, not counted): ")
            + ", ".join(f"{t} x{n}" for t, n in sorted(report.not_tunable.items())))
    if report.failed_operators:
        say("Failed operators: " + ", ".join(report.failed_operators))
    for notice in report.notices:
        say(f"Note: {notice}")


@user_errors
def plan(
    model: Annotated[Path, typer.Argument(exists=True, dir_okay=False, metavar="MODEL",
                                          help="The ONNX model.")],
    soc_version: Annotated[str, soc_option("Chip to check against.")],
    input_shape: Annotated[str | None, typer.Option(
        "--input-shape", help='Fix input shapes: "name:1,3,224,224;other:8,128".')] = None,
    db: DbOption = None,
    job_type: Annotated[str, typer.Option(
        "--job-type", metavar="<operator|subgraph|2|1>",
        help="subgraph (1): the model's subgraph keys; operator (2): its operator keys.")]
    = "operator",
    aicore_num: Annotated[int | None, typer.Option(
        "--aicore-num", min=1, metavar="N",
        help="The keys of a tune on N AI cores (default: all of the chip's).")] = None,
    as_json: JsonOption = False,
) -> None:
    """Show what a model still needs tuned: each key known, known to gain nothing, or new."""
    from tunebank.tuner.model.reading import parse_input_shapes
    from tunebank.tuner.options import job_type_of
    from tunebank.tuner.plan.coverage import coverage

    kind = job_type_of(job_type)
    with open_bank(db) as bank:
        keys = coverage(bank, model, soc_version, parse_input_shapes(input_shape), kind,
                        aicore_num)
    if as_json:
        print_json([k.as_json() for k in keys])
        return
    print_table(["repo_key", "op_type", "ops", "status", "best_us", "nearest known (distance)",
                 "op_names"],
                [[k.repo_key, k.op_type, len(k.op_names), k.status, k.best_us,
                  _nearest_cell(k.nearest),
                  ", ".join(k.op_names[:3]) + (" ..." if len(k.op_names) > 3 else "")]
                 for k in keys])
    new = [k for k in keys if k.status == "new"]
    say(f"{len(keys)} keys: {len(keys) - len(new)} known to the bank, {len(new)} to tune "
        f"({sum(len(k.op_names) for k in new)} {'subgraphs' if kind == 'sgat' else 'operators'})")


def _nearest_cell(nearest: Sequence[Neighbour]) -> str | None:
    """A new key's two nearest known keys of its chip, with their distance."""
    return ", ".join(f"{n.repo_key} ({n.distance:g})" for n in nearest[:2]) or None


@user_errors
def socs(as_json: JsonOption = False) -> None:
    """List the chips the sim cost model knows, with their parameters."""
    from tunebank.tuner.measure.socs import SOCS, SocSpec

    if as_json:
        print_json([spec.as_dict() for spec in SOCS.values()])
        return
    columns = {"ai_cores": 1, "vector_cores": 1, "freq_ghz": 1, "l0a_bytes": 1024,
               "l0b_bytes": 1024, "l0c_bytes": 1024, "l1_bytes": 1024, "ub_bytes": 1024,
               "gm_gbps": 1}  # each field shown, and what it is divided by

    def cell(spec: SocSpec, name: str) -> str:
        value = f"{getattr(spec, name) / columns[name]:g}"
        return f"{value}*" if name in spec.estimates else value

    print_table(
        ["soc_version", "ai_cores", "vector_cores", "GHz", "L0A KiB", "L0B KiB", "L0C KiB",
         "L1 KiB", "UB KiB", "GM GB/s", "fp16 TFLOPS"],
        [[s.soc_version, *(cell(s, name) for name in columns), round(s.peak_tflops(), 1)]
         for s in SOCS.values()],
    )
    say("* an estimate: the chip's published figures do not give it (docs/cost-model.md); "
        "`bank socs --json` lists each chip's estimates")


__all__ = ["plan", "socs", "tune"]
