"""The tune's search settings, each defined once: the `bank tune` option that sets it and its
help, the campaign-file field that sets it and the TOML types it takes, its bounds, and the
task_started field it is recorded under (what ``--reload`` and a campaign's id read back).

A new setting is one :class:`Setting` here, a field of
:class:`~tunebank.tuner.options.TuneOptions`, a parameter of ``bank tune`` that takes its flag
and help from here, and the code that uses it. Imported by the command line at start-up, so it
imports nothing heavy: the choices of ``mode`` and ``backend`` are looked up only when checked.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tunebank.bank.canonical import shown
from tunebank.tuner.errors import TuneError

MAX_BUDGET = 100_000
"""The most measurements a tune may spend on one operator: 200 times the GA default (512) and
more than any search space of the built-in cost model needs, while a budget of 2**63 would run
for days and hold every measurement in memory."""


@dataclass(frozen=True)
class Setting:
    """One search setting of a tune."""

    name: str
    """Its field of TuneOptions (and name in a campaign file)."""
    flag: str
    """The `bank tune` option that sets it."""
    help: str
    kinds: tuple[type, ...] = ()
    """The TOML types a campaign file may give it; none: a campaign file does not set it."""
    bounds: tuple[float, float, str] | None = None
    """The lowest and highest value, and the unit they are in: what a user would accept, and what
    keeps a tune from running for days or failing deep inside."""
    recorded: str | None = None
    """The task_started field it is recorded under: ``--reload`` continues a task with it, and
    it is part of a campaign's id."""

    def check(self, value: Any, label: str) -> None:
        """Refuse ``value`` outside the bounds or the choices; ``label`` names where it was given
        (``--budget``, or a campaign file and field).

        Raises:
            TuneError: the value is out of bounds, or not one of the choices.
        """
        if value is None:
            return
        if self.bounds is not None:
            low, high, unit = self.bounds
            if not low <= value <= high:
                text = f"{value:.4g}" if isinstance(value, float) else shown(value)
                raise TuneError(f"{label}: {text} is out of bounds: must be between {_bound(low)} "
                                f"and {_bound(high)}{' ' + unit if unit else ''}")
        choices = _choices(self.name)
        if choices is not None and value not in choices:
            if self.name == "backend":
                raise TuneError(f"{label}: no measurement backend {shown(value, 60)} is installed "
                                f"(installed: {', '.join(choices)})")
            raise TuneError(f"{label}: unknown mode {shown(value, 60)}; choose one of {', '.join(choices)}")


def _choices(name: str) -> list[str] | None:
    if name == "mode":
        from tunebank.tuner.search.strategies import STRATEGIES  # numpy: only when checked

        return list(STRATEGIES)
    if name == "backend":
        from tunebank.tuner.measure.plugins import backend_names

        return backend_names()
    return None


SETTINGS: dict[str, Setting] = {setting.name: setting for setting in (
    Setting("mode", "--mode", "Search mode: ga, rl, random or exhaustive.", (str,),
            recorded="search_mode"),
    Setting("budget", "--budget", "Measurements per operator (default: per mode).", (int,),
            (1, MAX_BUDGET, "measurements per operator"), recorded="budget"),
    Setting("seed", "--seed", "Random seed: same seed, same result.", (int,), (0, 2**63 - 1, ""),
            recorded="seed"),
    Setting("retune", "--retune", "Search known keys again, warm-started.", (bool,),
            recorded="retune"),
    Setting("transfer", "--transfer/--no-transfer",
            "Start a new key's search from the policies of the bank's nearest known keys, and "
            "stop it early once it stops improving.", (bool,), recorded="transfer"),
    Setting("backend", "--backend",
            "Measurement backend, by name (sim, or a plug-in; see docs/backends.md).", (str,),
            recorded="backend"),
    Setting("noise", "--noise", "Relative measurement noise of the sim backend.", (float, int),
            (0, 0.999, "(a relative standard deviation)"), recorded="noise"),
    Setting("run_loop", "--run-loop", "Runs per candidate; the median is kept.", (int,),
            (1, 2048, "(AOE's RUN_LOOP range)"), recorded="run_loop"),
    Setting("measure_timeout_s", "--measure-timeout",
            "Stop the tune, resumable, when one batch of measurements takes longer than this "
            "many seconds (a hung device or plug-in).", (float, int), (0.001, 86_400, "seconds")),
    Setting("aicore_num", "--aicore-num",
            "AI cores the operators run on (AOE's --aicore_num; default: all of the chip's). "
            "A key tuned on part of a chip is its own key.", (int,), (1, 64, "AI cores"),
            recorded="aicore_num"),
    Setting("sim_delay_s", "--sim-delay-ms",
            "sim backend: wall time of each run of a candidate, in milliseconds, as a device's "
            "(times recorded do not change).", bounds=(0, 10, "seconds")),
)}
"""Every search setting, by its TuneOptions field."""

RESUMED = {s.name: s.recorded for s in SETTINGS.values() if s.recorded is not None}
"""The settings --reload takes from the unfinished task: TuneOptions field -> task_started field."""
IN_CAMPAIGN_FILES = {s.name: s.kinds for s in SETTINGS.values() if s.kinds}
"""The settings a campaign file may hold, with the TOML types each takes."""


def check_settings(values: Mapping[str, Any], label: str | None = None) -> None:
    """Check each setting in ``values`` (by TuneOptions field): labelled by its option, or, with
    ``label`` (a campaign file), by ``label: name``.

    Raises:
        TuneError: a value is out of bounds or not one of its choices.
    """
    for name, value in values.items():
        setting = SETTINGS[name]
        where = setting.flag.split("/")[0] if label is None else f"{label}: {name}"
        if name == "sim_delay_s" and label is None:
            where = "--sim-delay-ms (in seconds)"
        setting.check(value, where)


def recorded(values: Mapping[str, Any]) -> dict[str, Any]:
    """The task_started fields that record the settings in ``values`` (by TuneOptions field)."""
    return {SETTINGS[name].recorded or name: value for name, value in values.items()
            if SETTINGS[name].recorded is not None}


def _bound(value: float) -> str:
    return f"{value:,}" if isinstance(value, int) else f"{value:g}"
