"""What ``bank tune`` takes: its options, their checks, and the settings a resumed task keeps
(each search setting is defined in :mod:`tunebank.tuner.settings`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tunebank.tuner.errors import TuneError
from tunebank.tuner.measure.socs import SocSpec, get_soc, with_cores
from tunebank.tuner.plan.selection import ConfigError, read_json
from tunebank.tuner.settings import RESUMED, SETTINGS, check_settings

JOB_TYPES = {"operator": "opat", "opat": "opat", "2": "opat",
             "subgraph": "sgat", "sgat": "sgat", "1": "sgat"}
"""``--job-type`` values: AOE's numbers (1 subgraph, 2 operator) and names, to the job_type a
task records."""

OPERATOR_ONLY = {"tuning_config": "--tuning-config", "tune_ops_file": "--tune-ops-file",
                 "load_tuning_result": "--load-tuning-result", "output": "--output"}
"""Options that name operators or write an operator-tuned model: not for a subgraph tune."""

@dataclass(frozen=True)
class TuneOptions:
    """Everything ``bank tune`` takes."""

    model: Path
    soc_version: str
    job_type: str = "opat"
    mode: str = "ga"
    budget: int | None = None
    seed: int = 0
    retune: bool = False
    reload: bool = False
    input_shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    tuning_config: Path | None = None
    tune_ops_file: Path | None = None
    load_tuning_result: Path | None = None
    noise: float = 0.0
    run_loop: int = 1
    tuning_name: str | None = None
    result_format: str = "v2"
    work_dir: Path = Path(".")
    output: Path | None = None
    transfer: bool = True
    """Start a new key's search from the policies of the bank's nearest known keys."""
    backend: str = "sim"
    """The measurement backend, by the name it is declared under (tuner/measure/backend.py)."""
    sim_delay_s: float = 0.0
    """For ``sim``: the wall time each measurement takes (see BackendSettings.delay_s)."""
    measure_timeout_s: float = 600.0
    """The longest one batch of measurements may take (see BackendSettings.timeout_s)."""
    aicore_num: int | None = None
    """The AI cores the operators run on (``None``: all of the chip's)."""
    campaign: str | None = None
    """The campaign this task is part of, as ``CAMPAIGN_ID/INDEX`` (recorded when it starts,
    so ``--reload`` finds the campaign's tasks)."""
    given: frozenset[str] = frozenset()
    """The options the user set (not left at their defaults): with ``reload``, one that differs
    from the unfinished task's setting is an error rather than silently overridden."""

def soc_of(options: TuneOptions) -> SocSpec:
    """The chip ``options`` tune for, on the AI cores they give (all by default).

    Raises:
        UnknownSocError: the chip is not known, or has fewer cores than ``aicore_num``.
    """
    return with_cores(get_soc(options.soc_version), options.aicore_num)


def job_type_of(text: str) -> str:
    """The job_type ``--job-type`` names: ``sgat`` (subgraph, 1) or ``opat`` (operator, 2).

    Raises:
        TuneError: ``text`` names neither.
    """
    try:
        return JOB_TYPES[text.strip().lower()]
    except KeyError:
        raise TuneError(f"--job-type: {text!r} is not subgraph (1, sgat) or operator (2, opat)") from None

def check_options(options: TuneOptions) -> None:
    """Refuse options that cannot make a tune, each naming its option.

    Raises:
        TuneError: an option is out of its bounds or choices, or does not fit the job type.
    """
    if options.job_type not in ("opat", "sgat"):
        raise TuneError(f"--job-type: {options.job_type!r} is not sgat or opat")
    if options.job_type == "sgat":
        for name, flag in OPERATOR_ONLY.items():
            if getattr(options, name) is not None:
                raise TuneError(f"{flag}: applies to operator tuning only, not --job-type subgraph")
    if options.result_format not in ("v1", "v2"):
        raise TuneError(f"--result-format: {options.result_format!r} is not v1 or v2")
    check_settings({name: getattr(options, name) for name in SETTINGS})


def read_tuning_result(path: Path | None) -> dict[str, dict[str, Any]]:
    if path is None:
        return {}
    data = read_json(path, "--load-tuning-result")
    table = data.get("op_tuning")
    if not isinstance(table, dict) or not all(isinstance(v, dict) for v in table.values()):
        raise ConfigError(f"--load-tuning-result: {path}: op_tuning must map op names to objects")
    return table

def resumed_options(options: TuneOptions, started: Mapping[str, Any]) -> TuneOptions:
    """``options`` with the search settings of the unfinished task (its task_started payload),
    so the resumed keys are searched exactly as the killed run would have searched them.

    Raises:
        TuneError: the user set an option to another value than the task's.
    """
    if "seed" not in started:  # a task from before tunebank recorded its settings
        return options
    recorded: dict[str, Any] = {name: started.get(field) for name, field in RESUMED.items()}
    recorded["mode"] = recorded["mode"] or options.mode
    for name, value in recorded.items():
        if value is None and name != "budget":
            recorded[name] = getattr(options, name)  # not recorded by that version
        elif name in options.given and getattr(options, name) != value:
            flag = "--" + name.replace("_", "-")
            raise TuneError(f"{flag}: {getattr(options, name)} differs from the unfinished task's "
                            f"{value if value is not None else 'default'}; leave it out to continue "
                            "the task as it started")
    return replace(options, **recorded)
