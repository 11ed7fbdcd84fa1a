"""Measurement backends: the contract of what measures a key's candidates on a chip.

A backend is a plug-in. A package declares it under the entry point group
``tunebank.backends`` (found by tuner/measure/plugins.py), its name pointing at a factory that takes
:class:`BackendSettings` and returns a :class:`MeasurementBackend`::

    [project.entry-points."tunebank.backends"]
    npu = "my_team.npu:NpuBackend"

and ``bank tune --backend npu`` measures with it, without a fork of tunebank. tunebank's own
``sim`` (tuner/measure/sim.py) is declared the same way. The backend's name and version are recorded
with every outcome (payload ``backend`` and ``cost_model_version``), so the bank always says
what measured a policy. docs/backends.md describes the contract for plug-in writers.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tunebank.bank.errors import BankError

if TYPE_CHECKING:
    import numpy as np

    from tunebank.tuner.measure.socs import SocSpec
    from tunebank.tuner.measure.space import FitCheck, SearchSpace
    from tunebank.tuner.model.workload import Workload
class BackendError(BankError):
    """No backend of that name, or it could not be started."""


class MeasurementFailed(BackendError):
    """A backend raised an error of its own while measuring (a lost device, a plug-in's bug).
    The tune stops there; what it recorded before stays, and ``--reload`` continues it."""


@dataclass(frozen=True)
class BackendSettings:
    """What ``bank tune`` passes a backend's factory."""

    noise: float = 0.0
    """Relative standard deviation of one run, for a backend that simulates noise (``sim``)."""
    run_loop: int = 1
    """Runs per candidate; the backend reports their median (AOE's RUN_LOOP)."""
    delay_s: float = 0.0
    """For ``sim``: the wall time each run of a candidate takes, as a device's would (0: none),
    so a campaign's spread over workers can be measured as it would be on hardware."""
    timeout_s: float = 600.0
    """The longest one batch's ``measure`` may take before the tune stops with one line
    (``--measure-timeout``): a device that compiles and runs a GA generation of 64 candidates
    at a few seconds each stays well inside it, a hung one does not hang the tune."""


@dataclass(frozen=True)
class KeyWork:
    """One key on one chip: what a backend measures candidates of."""

    repo_key: str
    soc: SocSpec
    work: Workload
    """The operator's (or subgraph's) shapes and sizes, as tuner/model/workload.py describes them."""
    space: SearchSpace
    """The key's knobs; a candidate is a row of knob indices into it."""


class MeasurementBackend(ABC):
    """Measures batches of candidates of one key on one chip.

    Attributes:
        name: the name it is declared under; recorded as every outcome's ``backend``.
        version: recorded as every outcome's ``cost_model_version``: a new version says that
            its times are not comparable with the old ones.
        noise: the relative standard deviation of one run, as the backend declares it (0:
            exact, as a deterministic model is).
        repeats: runs per candidate the backend makes; it reports their median.
    """

    name: str = ""
    version: str = ""
    noise: float = 0.0
    repeats: int = 1

    @abstractmethod
    def measure(self, key: KeyWork, candidates: np.ndarray,
                rng: np.random.Generator) -> np.ndarray:
        """One latency in microseconds per row of ``candidates``.

        Args:
            key: the key and chip the candidates belong to.
            candidates: a 2-D int16 array, one row of knob indices into ``key.space`` each.
                The tuner never sends a row twice for one key, and counts every row sent
                against the search's budget.
            rng: the generator a simulated noise is drawn from, seeded from the tune's seed and
                the key, so a run gives the same times wherever it runs. A backend that
                measures real hardware ignores it.

        Returns:
            A float64 array as long as ``candidates``: ``inf`` where a candidate did not
            compile, fit or run (it is never chosen), else a positive time.
        """

    def chips(self) -> frozenset[str] | None:
        """The soc_versions this backend can measure; ``None``: every chip tunebank knows."""
        return None

    def fit_check(self, key: KeyWork) -> FitCheck | None:
        """The compiler's static check of whether candidates fit the chip, without measuring
        them, which searches use to choose what to measure. The default is the check of the
        chip's buffers that tunebank's analytic model makes."""
        from tunebank.tuner.measure.costmodel import CostModel

        return CostModel(key.soc).fit_check(key.work, key.space)
