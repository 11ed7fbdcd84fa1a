"""One key's search on one chip, as a job that runs anywhere: in the tuning process, or on a
Dask worker of a campaign.

A :class:`SearchJob` holds everything the search needs and nothing of the bank: the key and
chip, the search settings, the candidates it starts from (a stored policy, a loaded one, or
those borrowed from the bank's nearest keys, all worked out by the process that reads the
bank), and the backend by name. Its random generators come from the seed and the key alone,
so a job gives the same :class:`KeyResult` wherever and whenever it runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from tunebank.tuner.measure.backend import BackendSettings, KeyWork, MeasurementBackend
from tunebank.tuner.measure.plugins import open_backend
from tunebank.tuner.search.strategies import Evaluator, SearchError, make_search

Generation = Callable[[int, int, float], None]
"""A search's progress: generation, generations, best time so far."""


@dataclass(frozen=True)
class SearchJob:
    """One key's search, ready to run."""

    key: KeyWork
    mode: str
    budget: int | None
    """Distinct candidates to measure (``None``: the mode's default)."""
    seed: int
    backend: str
    settings: BackendSettings = field(default_factory=BackendSettings)
    warm: tuple[int, ...] | None = None
    """A candidate to start from: the stored policy of a retuned key, or a loaded one."""
    measure_only: bool = False
    """Measure ``warm`` and keep it, with no search (``--load-tuning-result``)."""
    borrowed: tuple[tuple[int, ...], ...] = ()
    """Candidates mapped from the bank's nearest known keys (transfer)."""
    patience: int | None = None
    """Stop after this many measurements without a gain (``None``: spend the budget)."""


@dataclass(frozen=True)
class KeyResult:
    """What a search found: the default policy's time, the best time and candidate, and the
    measurements spent (an ``error`` when it found nothing that runs)."""

    default_us: float
    found_us: float
    candidate: tuple[int, ...] | None
    measurements: int
    budget: int
    reason: str | None = None
    """``loaded`` when the candidate was measured, not searched."""
    error: str | None = None


def search_budget(mode: str, budget: int | None) -> int:
    """The budget a search of ``mode`` spends when given ``budget`` (its default for ``None``).

    Raises:
        SearchError: ``mode`` is not a known strategy.
    """
    return make_search(mode, budget, np.random.default_rng(0)).budget


def run_search(job: SearchJob, backend: MeasurementBackend | None = None,
               progress: Generation | None = None) -> KeyResult:
    """Run ``job``: measure the compiler's default, then search (or measure ``warm`` alone).

    Args:
        job: the search.
        backend: the backend to measure with, if already open (else opened by name).
        progress: called after each generation, where the search runs in this process.

    Raises:
        BackendError: the backend cannot be opened here.
        MeasurementFailed: the backend raised while measuring.
    """
    backend = backend or open_backend(job.backend, job.settings)
    key = job.key
    rng = np.random.default_rng([job.seed, int(key.repo_key)])
    noise = np.random.default_rng(rng.integers(2**63))
    evaluate = Evaluator(lambda candidates: backend.measure(key, candidates, noise),
                         backend.fit_check(key))
    default_us = float(evaluate(np.array([key.space.default]))[0])
    search = make_search(job.mode, job.budget, rng)
    try:
        if job.measure_only and job.warm is not None:
            found_us, candidate, reason = float(evaluate(np.array([job.warm]))[0]), job.warm, "loaded"
        else:
            result = search.search(key.space, evaluate, job.warm, progress,
                                   borrowed=job.borrowed, patience=job.patience)
            found_us, candidate, reason = result.latency_us, result.candidate, None
        if not np.isfinite(found_us):
            raise SearchError("no feasible candidate")
    except SearchError as exc:
        return KeyResult(default_us, float("inf"), None, evaluate.measurements, search.budget,
                         error=str(exc))
    return KeyResult(default_us, found_us, tuple(candidate), evaluate.measurements,
                     search.budget, reason)
