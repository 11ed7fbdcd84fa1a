"""Search spaces in AOE's own knob names, one per operator family and chip.

A candidate is a row of indices, one per knob, into that knob's values; the cost model reads
the decoded values as NumPy columns, so a whole population is scored in one call.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tunebank.tuner.measure.socs import SocSpec
from tunebank.tuner.model.workload import ConvWork, MatmulWork, SubgraphWork, VectorWork, Workload

if TYPE_CHECKING:
    import numpy as np

FORMAT_LABELS = {"matmul": ("ND", "FRACTAL_NZ"), "conv": ("NC1HWC0", "NCHW")}
IMPL_LABELS = ("cube", "vector")
LABELLED = {"format", "impl"}


def another_implementation(knowledge: Mapping[str, Any]) -> bool:
    """Whether a policy runs its operator otherwise than on the Cube (``impl`` other than
    ``cube``, every space's default): its tiling knobs then mean nothing."""
    return bool(knowledge.get("impl", IMPL_LABELS[0]) != IMPL_LABELS[0])


@dataclass(frozen=True)
class FitCheck:
    """A backend's static check of whether candidates fit the chip (without a measurement).

    Args:
        check: whether each candidate row fits.
        knobs: the indices of the knobs ``check`` reads: a candidate that fits still fits
            whatever its other knobs.
    """

    check: Callable[[np.ndarray], np.ndarray]
    knobs: frozenset[int]


@dataclass(frozen=True)
class Knob:
    """One tunable parameter and the values it may take."""

    name: str
    values: tuple[int, ...]
    labels: tuple[str, ...] | None = None
    switch: bool = False
    """Whether a value other than the default stands for another implementation of the
    operator, to which the other knobs do not apply (a matmul on the vector unit has no Cube
    tiling): a search prices each such value once and tunes the others on the default."""

    def label(self, index: int) -> int | str:
        """The value as it goes into the knowledge (labels for format and impl)."""
        return self.labels[self.values[index]] if self.labels else self.values[index]


@dataclass(frozen=True)
class SearchSpace:
    """The knobs of one operator on one chip, and the compiler's default choice among them."""

    family: str
    knobs: tuple[Knob, ...]
    default: tuple[int, ...]

    @property
    def size(self) -> int:
        """How many candidates the space holds (feasible or not)."""
        return math.prod(len(k.values) for k in self.knobs)

    def decode(self, candidates: np.ndarray, names: Collection[str] | None = None) -> dict[str, np.ndarray]:
        """Knob values of an (n, knobs) index matrix, one column array per knob (per knob of
        ``names`` that the space has, if given)."""
        return {knob.name: values[candidates[:, i]]
                for i, (knob, values) in enumerate(zip(self.knobs, self._value_arrays, strict=True))
                if names is None or knob.name in names}

    @functools.cached_property
    def _value_arrays(self) -> tuple[np.ndarray, ...]:
        """Each knob's values as an int64 array, made once per space (decode runs per batch)."""
        import numpy as np

        return tuple(np.asarray(knob.values, dtype=np.int64) for knob in self.knobs)

    def knowledge(self, candidate: Sequence[int]) -> dict[str, Any]:
        """The policy a candidate stands for, as stored in the bank."""
        return {knob.name: knob.label(int(i)) for knob, i in zip(self.knobs, candidate, strict=True)}

    def encode(self, knowledge: Mapping[str, Any]) -> tuple[int, ...] | None:
        """The candidate of a stored policy, or ``None`` if it does not fit this space."""
        indices = []
        for knob in self.knobs:
            value = knowledge.get(knob.name)
            if knob.labels and value in knob.labels:
                value = knob.labels.index(value)
            if value not in knob.values:
                return None
            indices.append(knob.values.index(value))
        return tuple(indices)

    def restrict(self, allowed: Mapping[str, Sequence[int]]) -> SearchSpace:
        """The space with some knobs limited to the given values (the default kept in)."""
        knobs, default = [], []
        for knob, index in zip(self.knobs, self.default, strict=True):
            chosen = knob.values
            if knob.name in allowed:
                keep = set(allowed[knob.name]) | {knob.values[index]}
                chosen = tuple(v for v in knob.values if v in keep)
            knobs.append(Knob(knob.name, chosen, knob.labels, knob.switch))
            default.append(chosen.index(knob.values[index]))
        return SearchSpace(self.family, tuple(knobs), tuple(default))


def _pow2(low: int, high: int) -> tuple[int, ...]:
    return tuple(2**e for e in range(int(math.log2(low)), int(math.log2(high)) + 1))


def _divisor_splits(cores: int) -> tuple[int, ...]:
    return tuple(v for v in (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48) if v <= cores)


def _knobs(spec: Sequence[tuple[str, Sequence[int]]], default: Mapping[str, int],
           labels: Mapping[str, tuple[str, ...]] | None = None,
           switches: Collection[str] = ()) -> tuple[tuple[Knob, ...], tuple[int, ...]]:
    knobs = tuple(Knob(name, tuple(values), (labels or {}).get(name), name in switches)
                  for name, values in spec)
    return knobs, tuple(k.values.index(default[k.name]) for k in knobs)


def matmul_space(work: MatmulWork, soc: SocSpec) -> SearchSpace:
    """baseM/N/K, steps, L1 depths, L0 double buffers, core split, format and implementation."""
    splits = _divisor_splits(soc.ai_cores)
    spec = [("baseM", _pow2(16, 256)), ("baseN", _pow2(16, 256)), ("baseK", _pow2(16, 256)),
            ("stepM", (1, 2, 4)), ("stepN", (1, 2, 4)), ("stepKa", (1, 2, 4)), ("stepKb", (1, 2, 4)),
            ("depthA1", (1, 2, 4, 8)), ("depthB1", (1, 2, 4, 8)), ("dbL0A", (0, 1)),
            ("dbL0B", (0, 1)), ("dbL0C", (0, 1)), ("coreSplitM", splits), ("format", (0, 1)),
            ("impl", (0, 1))]
    tall = work.batch * work.m >= work.n
    default = {"baseM": 64 if work.m > 32 else 16, "baseN": 64, "baseK": 64, "stepM": 1, "stepN": 1,
               "stepKa": 1, "stepKb": 1, "depthA1": 2, "depthB1": 2, "dbL0A": 1, "dbL0B": 1,
               "dbL0C": 0, "coreSplitM": splits[-1] if tall else 1, "format": 0, "impl": 0}
    knobs, index = _knobs(spec, default, {"format": FORMAT_LABELS["matmul"], "impl": IMPL_LABELS},
                          switches={"impl"})
    return SearchSpace("matmul", knobs, index)


def conv_space(work: ConvWork, soc: SocSpec) -> SearchSpace:
    """hoL0/woL0/kL0/nL0, hoL1, kAL1/kBL1, batchDim/nDim, format and loop unroll."""
    splits = _divisor_splits(soc.ai_cores)
    wo_values = tuple(sorted({min(v, work.wout) for v in (1, 2, 4, 8, 16, 32, 64)}))
    spec = [("hoL0", (1, 2, 4, 8, 16)), ("woL0", wo_values), ("kL0", (1, 2, 4, 8)),
            ("nL0", (1, 2, 4, 8)), ("hoL1", (1, 2, 4, 8)), ("kAL1", (1, 2, 4, 0)),
            ("kBL1", (1, 2, 4, 0)), ("batchDim", splits), ("nDim", splits), ("format", (0, 1)),
            ("unroll", (1, 2, 4))]
    batch_dim = max(v for v in splits if v <= max(1, work.batch))
    k_total = math.ceil(work.cin / 16) * 16 * work.kh * work.kw
    weights_fit = 2 * (k_total * 4 * 16 * 2) <= soc.l1_bytes // 2  # one N tile, double-buffered
    ho_l0 = max(v for v in (1, 2, 4) if v <= 2 * max(work.hout, 1))  # 4, or what an output of 1 row fits
    default = {"hoL0": ho_l0, "woL0": min(16, work.wout), "kL0": 4, "nL0": 4, "hoL1": 2, "kAL1": 1,
               "kBL1": 0 if weights_fit else 1, "batchDim": batch_dim, "nDim": 1, "format": 0,
               "unroll": 2}
    knobs, index = _knobs(spec, default, {"format": FORMAT_LABELS["conv"]})
    return SearchSpace("conv", knobs, index)


def vector_space(work: VectorWork, soc: SocSpec) -> SearchSpace:
    """Tile size in elements, double buffering and block dim (cores used). The default double
    buffers the largest tile up to 4096 elements that fits the UB that way, on as many cores as
    there are tiles (all of them at most)."""
    dims = tuple(v for v in (1, 2, 4, 8, 16, 24, 32, 48) if v <= soc.vector_cores)
    spec = [("tile", _pow2(256, 65536)), ("doubleBuffer", (0, 1)), ("blockDim", dims)]
    tiles = _pow2(256, 65536)
    fits = [t for t in tiles if t <= 4096 and t * 2 * (work.inputs + 1) * 2 <= soc.ub_bytes]
    tile = fits[-1] if fits else tiles[0]
    needed = math.ceil(work.elements / tile)  # no more cores than there are tiles
    default = {"tile": tile, "doubleBuffer": 1 if fits else 0,
               "blockDim": next((d for d in dims if d >= needed), dims[-1])}
    knobs, index = _knobs(spec, default)
    return SearchSpace("vector", knobs, index)


FUSED_TILES = _pow2(1024, 65536)


def subgraph_space(work: SubgraphWork, soc: SocSpec) -> SearchSpace:
    """A subgraph's fusion and schedule: how many of the element-wise steps after the anchor
    run inside the anchor's kernel (fuseDepth), and how that fused part runs: the UB tile it
    works in (elements), double buffering, and the cores it is split over. The default is the
    compiler's: the steps its own patterns fuse, a 4096-element tile (or the largest that fits)
    without double buffering, on every core."""
    dims = tuple(v for v in (1, 2, 4, 8, 16, 24, 32, 48) if v <= soc.vector_cores)
    spec = [("fuseDepth", tuple(range(len(work.steps) + 1))), ("ubTile", FUSED_TILES),
            ("doubleBuffer", (0, 1)), ("blockDim", dims)]
    streams = 2 + sum(step.extra_streams for step in work.steps[:work.default_fused])
    fits = [t for t in FUSED_TILES if t <= 4096 and t * 2 * streams <= soc.ub_bytes]
    default = {"fuseDepth": work.default_fused, "ubTile": fits[-1] if fits else FUSED_TILES[0],
               "doubleBuffer": 0, "blockDim": dims[-1]}
    knobs, index = _knobs(spec, default)
    return SearchSpace("subgraph", knobs, index)


def space_for(work: Workload, soc: SocSpec) -> SearchSpace:
    """The full search space of a workload on a chip."""
    if isinstance(work, SubgraphWork):
        return subgraph_space(work, soc)
    if isinstance(work, MatmulWork):
        return matmul_space(work, soc)
    if isinstance(work, ConvWork):
        return conv_space(work, soc)
    return vector_space(work, soc)


ALL_KNOBS = frozenset({
    "baseM", "baseN", "baseK", "stepM", "stepN", "stepKa", "stepKb", "depthA1", "depthB1",
    "dbL0A", "dbL0B", "dbL0C", "coreSplitM", "format", "impl", "hoL0", "woL0", "kL0", "nL0",
    "hoL1", "kAL1", "kBL1", "batchDim", "nDim", "unroll", "tile", "doubleBuffer", "blockDim",
})
