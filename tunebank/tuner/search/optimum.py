"""The exact optimum of a key under the sim model: every candidate that fits, and none that
provably does not.

A space is split into the knobs whether a candidate fits depends on (the family's
:data:`~tuner.measure.costmodel.FIT_KNOBS`) and the rest. The fitting part is enumerated first, in
blocks, through :meth:`CostModel.fits` alone (a few comparisons a row); only the combinations
that fit are crossed with every value of the other knobs and priced in full. A matmul on the
vector unit (``impl`` 1) always fits and its time does not depend on the tiling, so one such
candidate stands for all of them. ResNet-50's largest Cube space (46.7M candidates) is thus
priced on the few million that fit.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from tunebank.tuner.measure.costmodel import FIT_KNOBS, CostModel
from tunebank.tuner.measure.space import SearchSpace
from tunebank.tuner.model.workload import Workload

BLOCK = 1 << 18
"""Candidates priced (or fit-checked) in one NumPy call."""


@dataclass(frozen=True)
class Optimum:
    """The best candidate of a space, its time, and how much of the space was priced."""

    candidate: tuple[int, ...]
    latency_us: float
    priced: int
    space: int


def exact_optimum(cost: CostModel, work: Workload, space: SearchSpace) -> Optimum:
    """The candidate of ``space`` with the lowest time under ``cost``, found by pricing every
    candidate that fits (see the module's docstring); of equal times, the first priced wins.

    Raises:
        ValueError: no candidate of the space fits the chip.
    """
    best_us, best, priced = np.inf, None, 0
    for block in fitting_candidates(cost, work, space):
        latency = cost.evaluate(work, space, block)
        priced += len(block)
        i = int(np.argmin(latency))
        if latency[i] < best_us:
            best_us, best = float(latency[i]), tuple(int(v) for v in block[i])
    if best is None:
        raise ValueError("no candidate of the space fits the chip")
    return Optimum(best, best_us, priced, space.size)


def fitting_candidates(cost: CostModel, work: Workload, space: SearchSpace) -> Iterator[np.ndarray]:
    """Every candidate of ``space`` that :meth:`CostModel.fits` does not rule out, in blocks of
    index rows (one matmul candidate on the vector unit stands for all of them)."""
    names = [knob.name for knob in space.knobs]
    fit_names = set(FIT_KNOBS[space.family])
    impl = names.index("impl") if space.family == "matmul" and "impl" in names else None
    outer = [i for i, name in enumerate(names) if name in fit_names]
    inner = [i for i in range(len(names)) if i not in outer and i != impl]
    dims = np.array([len(knob.values) for knob in space.knobs])
    inner_grid = _grid(dims[inner])
    if impl is not None:
        vector_only = np.array([space.default], dtype=np.int64)
        vector_on = space.knobs[impl].values.index(1) if 1 in space.knobs[impl].values else None
        cube_at = space.knobs[impl].values.index(0) if 0 in space.knobs[impl].values else None
        if vector_on is not None:
            vector_only[0, impl] = vector_on
            yield vector_only
        if cube_at is None:
            return
    for outer_rows in _blocks(dims[outer]):
        knobs = {names[i]: np.asarray(space.knobs[i].values)[outer_rows[:, j]]
                 for j, i in enumerate(outer)}
        fitting = outer_rows[cost.fits(work, knobs)]
        if not len(fitting):
            continue
        step = max(1, BLOCK // max(1, len(inner_grid)))
        for start in range(0, len(fitting), step):
            part = fitting[start:start + step]
            rows = np.empty((len(part) * len(inner_grid), len(names)), dtype=np.int64)
            rows[:, outer] = np.repeat(part, len(inner_grid), axis=0)
            rows[:, inner] = np.tile(inner_grid, (len(part), 1))
            if impl is not None and cube_at is not None:
                rows[:, impl] = cube_at
            yield rows


def _grid(dims: np.ndarray) -> np.ndarray:
    """Every index row of a grid of ``dims`` (one empty row for no knobs)."""
    size = int(np.prod(dims)) if len(dims) else 1
    if not len(dims):
        return np.zeros((1, 0), dtype=np.int64)
    return np.stack(np.unravel_index(np.arange(size), tuple(dims)), axis=1).astype(np.int64)


def _blocks(dims: np.ndarray) -> Iterator[np.ndarray]:
    """The index rows of a grid of ``dims``, :data:`BLOCK` rows at a time."""
    size = int(np.prod(dims)) if len(dims) else 1
    for start in range(0, size, BLOCK):
        flat = np.arange(start, min(size, start + BLOCK))
        yield np.stack(np.unravel_index(flat, tuple(dims)), axis=1).astype(np.int64)
