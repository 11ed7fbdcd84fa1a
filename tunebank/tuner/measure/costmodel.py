"""The ``sim`` backend: an analytic model of an Ascend AI Core, scoring whole candidate batches.

Every formula is in docs/cost-model.md. Inputs are the decoded knob columns of a population;
the output is one latency in microseconds per candidate, ``inf`` where the candidate does not
fit the chip's buffers (so an infeasible candidate is never "measured" as a real time).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from tunebank.tuner.measure.socs import SocSpec
from tunebank.tuner.measure.space import FitCheck, SearchSpace, space_for
from tunebank.tuner.model.workload import ConvWork, MatmulWork, SubgraphWork, VectorWork, Workload

if TYPE_CHECKING:
    from numpy.typing import NDArray

    Array = NDArray[np.float64]

COST_MODEL_VERSION = "sim-2"
FP16 = 2
FP32 = 4
C0 = 16  # fp16 channels per NC1HWC0 block, and the cube's edge
ND_LOAD_PENALTY = 1.4  # GM->L1 time factor for an ND operand converted on the fly (estimate)
NCHW_LOAD_PENALTY = 2.0  # GM->L1 time factor for a conv input read channel-strided (estimate)
CORE_START_US = 0.01  # per extra core a kernel starts on (estimate)
HANDOFF_CYCLES = 128  # a fused tile handed from the anchor to the vector unit: sync, move set-up (estimate)


def _ceil(a: Array | int, b: Array | int) -> Array:
    return np.ceil(np.true_divide(a, b, dtype=np.float64))


FIT_KNOBS = {
    "matmul": ("baseM", "baseN", "baseK", "stepM", "stepN", "stepKa", "stepKb", "depthA1",
               "depthB1", "dbL0A", "dbL0B", "dbL0C"),
    "conv": ("hoL0", "woL0", "kL0", "nL0", "hoL1", "kAL1", "kBL1", "batchDim", "nDim", "format"),
    "vector": ("tile", "doubleBuffer"),
    "subgraph": ("fuseDepth", "ubTile", "doubleBuffer"),
}
"""The knobs whether a candidate fits the chip depends on, per space family: what
:meth:`CostModel.fits` reads (tests/tuner/test_optimum.py holds it to :meth:`CostModel.evaluate`)."""


@dataclass(frozen=True)
class _ConvGeometry:
    """The tile sizes of a conv tiling, one array each."""

    k_total: Array
    wo_t: Array
    m_pad: Array
    k_l0: Array
    n_l0: Array
    k_tiles: Array
    ka: Array
    kb: Array
    ho_l1: Array
    rows_in: Array


@dataclass(frozen=True)
class CostModel:
    """The analytic model of one chip."""

    soc: SocSpec

    def _gm_us(self, nbytes: Array | float) -> Array:
        return np.asarray(nbytes, dtype=np.float64) / (self.soc.gm_gbps * 1e3)

    def _cycles_us(self, cycles: Array | float) -> Array:
        return np.asarray(cycles, dtype=np.float64) / (self.soc.freq_ghz * 1e3)

    def format_change_us(self, nbytes: float) -> float:
        """A TransData between formats: read and write the tensor once, plus a launch."""
        return float(self._gm_us(2 * nbytes)) + self.soc.launch_us

    def evaluate(self, work: Workload, space: SearchSpace, candidates: np.ndarray) -> Array:
        """Latency in µs of each candidate row (``inf`` where it does not fit)."""
        knobs = space.decode(np.atleast_2d(candidates))
        if isinstance(work, SubgraphWork):
            return self._subgraph(work, knobs)
        if isinstance(work, MatmulWork):
            return self._matmul(work, knobs)
        if isinstance(work, ConvWork):
            return self._conv(work, knobs)
        return self._vector(work, knobs)

    # -- cube: matrix multiply ----------------------------------------------------------------

    def _matmul(self, w: MatmulWork, k: dict[str, np.ndarray]) -> Array:
        soc = self.soc
        bm, bn, bk = k["baseM"], k["baseN"], k["baseK"]
        feasible = self._matmul_fits(w, k)
        core_m = k["coreSplitM"]
        core_n = np.maximum(1, soc.ai_cores // core_m)
        m_tiles, n_tiles, k_tiles = w.batch * _ceil(w.m, bm), _ceil(w.n, bn), _ceil(w.k, bk)
        mt, nt = _ceil(m_tiles, core_m), _ceil(n_tiles, core_n)
        used = np.minimum(core_m, m_tiles) * np.minimum(core_n, n_tiles)
        blocks = mt * nt * k_tiles
        cube = blocks * (bm / C0) * (bn / C0) * (bk / C0)
        l0_load = blocks * (bm * bk + bk * bn) * FP16 / soc.l1_to_l0_bytes_per_cycle
        both_db = (k["dbL0A"] == 1) & (k["dbL0B"] == 1)
        one_db = (k["dbL0A"] + k["dbL0B"]) == 1
        core = np.where(both_db, np.maximum(cube, l0_load),
                        np.where(one_db, cube + 0.5 * l0_load, cube + l0_load))
        out_cycles = mt * nt * bm * bn * FP16 / soc.ub_bytes_per_cycle
        core = core + np.where(k["dbL0C"] == 1, 0.25, 1.0) * out_cycles
        a_bytes = mt * bm * k_tiles * bk * FP16 * _ceil(nt, k["stepN"])
        b_bytes = nt * bn * k_tiles * bk * FP16 * _ceil(mt, k["stepM"])
        dmas = (mt * _ceil(k_tiles, k["stepKa"]) * _ceil(nt, k["stepN"])
                + nt * _ceil(k_tiles, k["stepKb"]) * _ceil(mt, k["stepM"]))
        core = core + (blocks + dmas) * soc.issue_cycles
        nz = k["format"] == 1
        a_penalty = np.where(nz, 1.0, ND_LOAD_PENALTY)
        b_penalty = np.where(nz | w.b_const, 1.0, ND_LOAD_PENALTY)
        gm = self._gm_us(used * (a_bytes * a_penalty + b_bytes * b_penalty)
                         + w.batch * w.m * w.n * FP16)
        l1_db = ((k["depthA1"] >= 2 * k["stepM"] * k["stepKa"])
                 & (k["depthB1"] >= 2 * k["stepN"] * k["stepKb"]))
        core_us = self._cycles_us(core)
        cube_us = np.where(l1_db, np.maximum(core_us, gm), core_us + gm)
        fmt_us = np.where(nz, self._nz_conversion_us(w), 0.0)
        cube_us = cube_us + fmt_us + (used - 1) * CORE_START_US
        vector_us = self._matmul_on_vector(w)
        latency = np.where(k["impl"] == 1, vector_us, cube_us) + soc.launch_us
        return np.where(feasible | (k["impl"] == 1), latency, np.inf)

    def _matmul_fits(self, w: MatmulWork, k: dict[str, np.ndarray]) -> np.ndarray:
        """Whether the Cube tiling fits L0A/L0B/L0C and L1 and its steps divide its depths
        (reads only :data:`FIT_KNOBS` ``["matmul"]``)."""
        soc = self.soc
        bm, bn, bk = k["baseM"], k["baseN"], k["baseK"]
        fits: np.ndarray = (
            (bm * bk * FP16 * (1 + k["dbL0A"]) <= soc.l0a_bytes)
            & (bk * bn * FP16 * (1 + k["dbL0B"]) <= soc.l0b_bytes)
            & (bm * bn * FP32 * (1 + k["dbL0C"]) <= soc.l0c_bytes)
            & (k["depthA1"] % (k["stepM"] * k["stepKa"]) == 0)
            & (k["depthB1"] % (k["stepN"] * k["stepKb"]) == 0)
            & ((k["depthA1"] * bm * bk + k["depthB1"] * bk * bn) * FP16 <= soc.l1_bytes)
        )
        return fits

    def _nz_conversion_us(self, w: MatmulWork) -> float:
        """FRACTAL_NZ operands: the activation (and a non-constant B) and the output convert."""
        a = w.batch * w.m * w.k * FP16
        b = 0 if w.b_const else w.batch * w.k * w.n * FP16
        out = w.batch * w.m * w.n * FP16
        return float(self._gm_us(2 * (a + b + out))) + 2 * self.soc.launch_us

    def _matmul_on_vector(self, w: MatmulWork) -> float:
        macs = w.batch * w.m * w.n * w.k
        cycles = macs / (self.soc.vector_fp16_per_cycle * self.soc.vector_cores)
        nbytes = w.batch * (w.m * w.k + w.k * w.n + w.m * w.n) * FP16
        return max(float(self._cycles_us(cycles)), float(self._gm_us(nbytes)))

    # -- cube: convolution --------------------------------------------------------------------

    def _conv(self, w: ConvWork, k: dict[str, np.ndarray]) -> Array:
        soc = self.soc
        nchw = k["format"] == 1
        g = self._conv_geometry(w, k)
        k_total, wo_t, m_pad, k_l0, n_l0 = g.k_total, g.wo_t, g.m_pad, g.k_l0, g.n_l0
        k_tiles, ka, kb, ho_l1, rows_in = g.k_tiles, g.ka, g.kb, g.ho_l1, g.rows_in
        n_total = _ceil(w.cout, C0) * C0
        feasible = self._conv_fits(w, k, g)
        m_blocks = _ceil(w.hout, k["hoL0"]) * _ceil(w.wout, wo_t)
        n_tiles = _ceil(n_total, n_l0)
        core_m = np.maximum(1, soc.ai_cores // (k["batchDim"] * k["nDim"]))
        per_core_batch = _ceil(w.batch, k["batchDim"])
        per_core_m = _ceil(m_blocks, core_m)
        per_core_n = _ceil(n_tiles, k["nDim"])
        used = (np.minimum(k["batchDim"], w.batch) * np.minimum(k["nDim"], n_tiles)
                * np.minimum(core_m, m_blocks))
        tiles = per_core_batch * per_core_m * per_core_n
        cube = tiles * k_tiles * (m_pad / C0) * k["kL0"] * k["nL0"]
        if w.transposed:  # zero-inserted input: strided positions do no useful work
            cube = cube * w.sh
        l0_load = tiles * k_tiles * (m_pad * k_l0 + k_l0 * n_l0) * FP16 / soc.l1_to_l0_bytes_per_cycle
        unroll = k["unroll"]
        overhead = tiles * k_tiles * soc.issue_cycles / unroll + tiles * (unroll - 1) * 8
        out_cycles = tiles * m_pad * n_l0 * FP16 / soc.ub_bytes_per_cycle
        core_us = self._cycles_us(np.maximum(cube, l0_load) + overhead + 0.25 * out_cycles)
        in_bytes = w.batch * w.hin * w.win * np.where(nchw, w.cin, _ceil(w.cin, C0) * C0) * FP16
        halo = np.maximum(1.0, rows_in / np.maximum(ho_l1 * w.sh, 1))
        a_reload = np.where(ka >= k_tiles, 1.0, per_core_n)
        w_bytes = k_total * n_total * FP16
        b_reload = np.where(kb >= k_tiles, per_core_batch, per_core_batch * _ceil(per_core_m, k["hoL1"]))
        out_bytes = w.batch * w.hout * w.wout * n_total * FP16
        gm_bytes = (in_bytes * halo * a_reload * np.where(nchw, NCHW_LOAD_PENALTY, 1.0)
                    + used * w_bytes * b_reload / np.maximum(k["batchDim"], 1) + out_bytes)
        latency = np.maximum(core_us, self._gm_us(gm_bytes)) + (used - 1) * CORE_START_US
        return np.where(feasible, latency + soc.launch_us, np.inf)

    def _conv_geometry(self, w: ConvWork, k: dict[str, np.ndarray]) -> _ConvGeometry:
        """The tile sizes a conv tiling implies (reads only :data:`FIT_KNOBS` ``["conv"]``)."""
        nchw = k["format"] == 1
        taps = w.kh * w.kw
        k_total = np.where(nchw, _ceil(w.cin * taps, C0) * C0, _ceil(w.cin, C0) * C0 * taps)
        wo_t = np.minimum(k["woL0"], w.wout)
        m_pad = _ceil(k["hoL0"] * wo_t, C0) * C0
        k_l0, n_l0 = k["kL0"] * C0, k["nL0"] * C0
        k_tiles = _ceil(k_total, k_l0)
        ka = np.where(k["kAL1"] == 0, k_tiles, np.minimum(k["kAL1"], k_tiles))
        kb = np.where(k["kBL1"] == 0, k_tiles, np.minimum(k["kBL1"], k_tiles))
        ho_l1 = k["hoL0"] * k["hoL1"]
        rows_in = (ho_l1 - 1) * w.sh + (w.kh - 1) * w.dh + 1
        return _ConvGeometry(k_total, wo_t, m_pad, k_l0, n_l0, k_tiles, ka, kb, ho_l1, rows_in)

    def _conv_fits(self, w: ConvWork, k: dict[str, np.ndarray], g: _ConvGeometry) -> np.ndarray:
        """Whether a conv tiling fits L0 and L1 and its core split the chip and the batch."""
        soc = self.soc
        a_l1 = np.minimum(g.rows_in, w.hin) * w.win * g.ka * g.k_l0 / (w.kh * w.kw) * FP16
        b_l1 = g.kb * g.k_l0 * g.n_l0 * FP16
        fits: np.ndarray = (
            (g.m_pad * g.k_l0 * FP16 * 2 <= soc.l0a_bytes)
            & (g.k_l0 * g.n_l0 * FP16 * 2 <= soc.l0b_bytes)
            & (g.m_pad * g.n_l0 * FP32 * 2 <= soc.l0c_bytes)
            & (2 * (a_l1 + b_l1) <= soc.l1_bytes)
            & (k["batchDim"] * k["nDim"] <= soc.ai_cores)
            & (k["batchDim"] <= max(w.batch, 1))
            & (k["hoL0"] <= max(w.hout, 1) * 2)
        )
        return fits

    def fits(self, work: Workload, knobs: dict[str, np.ndarray]) -> np.ndarray:
        """Whether each candidate fits the chip, from the values of the family's
        :data:`FIT_KNOBS` alone: a candidate this says does not fit is ``inf`` in
        :meth:`evaluate`, whatever its other knobs (a matmul on the vector unit, ``impl`` 1,
        always fits and is not covered)."""
        if isinstance(work, SubgraphWork):
            return self._subgraph_fits(work, knobs)
        if isinstance(work, MatmulWork):
            return self._matmul_fits(work, knobs)
        if isinstance(work, ConvWork):
            return self._conv_fits(work, knobs, self._conv_geometry(work, knobs))
        return self._vector_fits(work, knobs)

    def fit_check(self, work: Workload, space: SearchSpace) -> FitCheck:
        """:meth:`fitting` for one key, with the knobs it reads, as a search takes it."""
        reads = {*FIT_KNOBS[space.family], "impl"}
        return FitCheck(lambda candidates: self.fitting(work, space, candidates),
                        frozenset(i for i, knob in enumerate(space.knobs) if knob.name in reads))

    def fitting(self, work: Workload, space: SearchSpace, candidates: np.ndarray) -> np.ndarray:
        """Whether each candidate row fits the chip, without pricing it: the static check a
        compiler makes before a tiling runs (a matmul on the vector unit always fits)."""
        knobs = space.decode(np.atleast_2d(candidates), (*FIT_KNOBS[space.family], "impl"))
        ok = self.fits(work, knobs)
        return ok | (knobs["impl"] == 1) if "impl" in knobs else ok

    def _vector_fits(self, w: VectorWork, k: dict[str, np.ndarray]) -> np.ndarray:
        fits: np.ndarray = k["tile"] * FP16 * (w.inputs + 1) * (1 + k["doubleBuffer"]) <= self.soc.ub_bytes
        return fits

    def _subgraph_fits(self, w: SubgraphWork, k: dict[str, np.ndarray]) -> np.ndarray:
        streams = np.cumsum([0] + [step.extra_streams for step in w.steps])[k["fuseDepth"]]
        fits: np.ndarray = ((k["ubTile"] * FP16 * (2 + streams) * (1 + k["doubleBuffer"])
                             <= self.soc.ub_bytes) | (k["fuseDepth"] == 0))
        return fits

    # -- vector unit --------------------------------------------------------------------------

    def _vector(self, w: VectorWork, k: dict[str, np.ndarray]) -> Array:
        soc = self.soc
        tile, db, dim = k["tile"], k["doubleBuffer"], k["blockDim"]
        feasible = self._vector_fits(w, k)
        whole_rows = (w.row == 0) | (tile >= w.row)
        useful = np.where((w.row > 0) & whole_rows, np.floor(tile / max(w.row, 1)) * w.row, tile)
        passes = np.where(whole_rows, 1, w.passes_split)
        tiles = _ceil(w.elements, useful) * passes
        per_core = _ceil(tiles, dim)
        bytes_per_elem = (w.bytes_in + w.bytes_out) / max(w.elements, 1)
        mem = tile * bytes_per_elem / soc.ub_bytes_per_cycle
        compute = tile * w.ops_per_element / soc.vector_fp16_per_cycle
        per_tile = np.where(db == 1, np.maximum(mem, compute), mem + compute) + soc.issue_cycles
        core_us = self._cycles_us(per_core * per_tile)
        gm = self._gm_us((w.bytes_in * passes) + w.bytes_out)
        used = np.minimum(dim, tiles)
        latency = np.maximum(core_us, gm) + (used - 1) * CORE_START_US + soc.launch_us
        return np.where(feasible, latency, np.inf)

    # -- subgraphs: fusion of the element-wise steps after an anchor --------------------------

    def default_us(self, work: MatmulWork | ConvWork | VectorWork) -> float:
        """An operator's time as a kernel of its own, at the compiler's default schedule
        (computed once per chip and workload: a subgraph's search asks it every batch)."""
        return _default_us(self, work)

    def _subgraph(self, w: SubgraphWork, k: dict[str, np.ndarray]) -> Array:
        soc = self.soc
        depth, tile, db, dim = k["fuseDepth"], k["ubTile"], k["doubleBuffer"], k["blockDim"]
        anchor_us = self.default_us(w.anchor)
        alone = np.array([self.default_us(step.alone) for step in w.steps])
        ops = np.cumsum([0.0] + [step.ops_per_element for step in w.steps])[depth]
        extra = np.cumsum([0] + [step.extra_bytes for step in w.steps])[depth]
        left = np.concatenate([np.cumsum(alone[::-1])[::-1], [0.0]])[depth]  # steps not fused
        feasible = self._subgraph_fits(w, k)
        tiles = _ceil(w.elements, tile)
        per_core = _ceil(tiles, dim)
        compute = tile * ops / soc.vector_fp16_per_cycle
        mem = tile * (extra / max(w.elements, 1)) / soc.ub_bytes_per_cycle
        per_tile = np.where(db == 1, np.maximum(mem, compute), mem + compute) + soc.issue_cycles
        fused_us = np.maximum(self._cycles_us(per_core * per_tile), self._gm_us(extra)) \
            + (np.minimum(dim, tiles) - 1) * CORE_START_US
        # each tile is handed over from the anchor once; double buffered, the fused steps of
        # one tile overlap the anchor's work on the next, and only the last tile's steps wait
        anchor_side = anchor_us + self._cycles_us(per_core * HANDOFF_CYCLES)
        with_anchor = np.where(db == 1, np.maximum(anchor_side, fused_us) + fused_us / per_core,
                               anchor_side + fused_us)
        latency = np.where(depth > 0, with_anchor, anchor_us) + left
        return np.where(feasible, latency, np.inf)


@functools.lru_cache(maxsize=4096)
def _default_us(cost: CostModel, work: MatmulWork | ConvWork | VectorWork) -> float:
    space = space_for(work, cost.soc)
    return float(cost.evaluate(work, space, np.array([space.default]))[0])
