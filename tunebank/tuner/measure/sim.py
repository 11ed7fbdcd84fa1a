"""The ``sim`` measurement backend: tunebank's analytic model of the chip
(tuner/measure/costmodel.py), with a simulated measurement noise.

A real measurement varies from run to run; ``sim`` draws each run's time as the model's time
times ``1 + noise * N(0, 1)`` and reports the median of ``run_loop`` runs, as AOE keeps the
median of its RUN_LOOP runs. With ``noise`` 0 it is exact and deterministic. ``delay_s`` makes
each run take that long in wall time, as on a device; the times it reports do not change.
"""

from __future__ import annotations

import functools
import time

import numpy as np

from tunebank.tuner.measure.backend import BackendSettings, KeyWork, MeasurementBackend
from tunebank.tuner.measure.costmodel import COST_MODEL_VERSION, CostModel
from tunebank.tuner.measure.socs import SocSpec

FASTEST_RUN = 0.05
"""A simulated run is never faster than this share of the model's time."""


class SimBackend(MeasurementBackend):
    """The analytic model as a backend (name ``sim``, version the cost model's)."""

    name = "sim"
    version = COST_MODEL_VERSION

    def __init__(self, settings: BackendSettings | None = None) -> None:
        settings = settings or BackendSettings()
        self.noise = settings.noise
        self.repeats = max(1, settings.run_loop)
        self.delay_s = settings.delay_s

    def measure(self, key: KeyWork, candidates: np.ndarray,
                rng: np.random.Generator) -> np.ndarray:
        if self.delay_s > 0:
            time.sleep(self.delay_s * self.repeats * len(candidates))
        exact = np.asarray(_model(key.soc).evaluate(key.work, key.space, candidates),
                           dtype=np.float64)
        if self.noise <= 0:
            return exact
        runs = 1.0 + self.noise * rng.standard_normal((self.repeats, len(candidates)))
        times: np.ndarray = np.median(exact * np.clip(runs, FASTEST_RUN, None), axis=0)
        return times


@functools.cache
def _model(soc: SocSpec) -> CostModel:
    return CostModel(soc)
