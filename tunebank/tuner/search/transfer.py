"""Transfer: a key the bank has never seen starts its search from what the bank knows of keys
like it.

The donors are the bank's measured policies (backend ``sim``) of the same operator family, read
once when a tune starts, so the keys a tune records itself do not steer its later keys (a tune
from an empty bank searches exactly as it would without transfer). A key's neighbours are
the donors nearest to it by :func:`distance`, same chip first; each neighbour's winning policy
is mapped into the new key's space (each knob to its nearest value there) and repaired until
it fits the chip (knob by knob back to the compiler's default), then measured among the
search's first candidates.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tunebank.tuner.measure.costmodel import FIT_KNOBS, CostModel
from tunebank.tuner.measure.space import SearchSpace, another_implementation
from tunebank.tuner.model.workload import CONV_OPS, MATMUL_OPS, Workload

if TYPE_CHECKING:
    from tunebank.bank import Bank
    from tunebank.bank.projection import Policy

NEIGHBOURS = 8
"""How many of the nearest known keys :meth:`Donors.nearest` looks at by default."""
SAME_CHIP_NEIGHBOURS = 3
"""How many of a new key's nearest known keys on its own chip seed its search."""
OTHER_CHIP = 4.0
"""What a donor on another chip adds to its distance: its times, and some of its knobs'
ranges, are another chip's."""
DTYPE_MISMATCH = 2.0
OP_TYPE_MISMATCH = 1.0
ATTR_MISMATCH = 0.5
EXTRA_INPUT_MISMATCH = 0.5
"""What a Cube key's bias (an input after the first two) adds when only one of the two has it:
the tiling is the data's and the weights', the bias is added on the way out."""


def family(op_type: object) -> str | None:
    """The search-space family of an operator type: ``conv``, ``matmul`` or ``vector`` (None
    for anything that is not a type name, as an info_dict from a hostile file may hold)."""
    if not isinstance(op_type, str):
        return None
    if op_type in CONV_OPS:
        return "conv"
    if op_type in MATMUL_OPS:
        return "matmul"
    return "vector"


def distance(a: Mapping[str, Any], b: Mapping[str, Any]) -> float | None:
    """How far apart two operator keys (info_dicts) are, or ``None`` if one's policy says
    nothing of the other's (another family, another vector operator, another tensor layout).

    The distance is the sum, over every dimension of every input and output compared (a conv
    key's data, weights and output; every tensor of a vector key; a matmul's batch, M, K and N,
    see :func:`_sizes`), of the difference of their log2 sizes (a shape twice as large in one
    dimension is 1 away), plus 2 for each tensor of
    another dtype, 1 for another operator type of the same family (Gemm for MatMul), 0.5 for
    each kernel attribute (strides, dilations, groups, ...) of another value and 0.5 for a
    bias only one of them has.
    """
    if family(a.get("op_type")) is None or family(a.get("op_type")) != family(b.get("op_type")):
        return None
    if family(a.get("op_type")) == "vector" and a.get("op_type") != b.get("op_type"):
        return None
    ta, tb = _tensors(a), _tensors(b)
    sizes_a, sizes_b = _sizes(a), _sizes(b)
    if ta is None or tb is None or sizes_a is None or sizes_b is None \
            or len(ta) != len(tb) or len(sizes_a) != len(sizes_b):
        return None
    total = sum(abs(math.log2(x) - math.log2(y)) for x, y in zip(sizes_a, sizes_b, strict=True))
    total += DTYPE_MISMATCH * sum(da != db for (_, da), (_, db) in zip(ta, tb, strict=True))
    total += OP_TYPE_MISMATCH * (a.get("op_type") != b.get("op_type"))
    attrs_a, attrs_b = a.get("attrs") or {}, b.get("attrs") or {}
    total += ATTR_MISMATCH * sum(attrs_a.get(k) != attrs_b.get(k) for k in set(attrs_a) | set(attrs_b))
    total += EXTRA_INPUT_MISMATCH * abs(_extra_inputs(a) - _extra_inputs(b))
    return float(total)


def _cube(info: Mapping[str, Any]) -> bool:
    return family(info.get("op_type")) in ("conv", "matmul")


def _extra_inputs(info: Mapping[str, Any]) -> int:
    """How many inputs of a Cube key are not compared (a bias): those after the first two."""
    inputs = info.get("inputs")
    return max(0, len(inputs) - 2) if _cube(info) and isinstance(inputs, list) else 0


def _sizes(info: Mapping[str, Any]) -> list[int] | None:
    """The sizes a distance compares: every dimension of every tensor compared, or for a
    matmul its computation, (batch, M, K, N), whatever its operator type and ranks.

    A MatMul of [b, m, k] by a shared [k, n] is the Gemm (b·m, k) by (k, n); one of
    [b1, b2, m, k] by [b1, b2, k, n] is b1·b2 Gemms of (m, k) by (k, n). In those terms BERT's
    matmuls (3-D and 4-D) are as near the CNNs' Gemms (2-D) as their sizes make them; compared
    tensor by tensor, their ranks kept them apart."""
    tensors = _tensors(info)
    if tensors is None:
        return None
    if family(info.get("op_type")) == "matmul":
        return _computation(info, [shape for shape, _ in tensors])
    return [d for shape, _ in tensors for d in shape]


def _computation(info: Mapping[str, Any], shapes: list[list[int]]) -> list[int] | None:
    """(batch, M, K, N) of a matmul key, the way tuner/model/workload.py reads its operator,
    with a batch over a shared B folded into M (the tiling sees one taller matrix)."""
    if len(shapes) < 3:
        return None
    a, b, out = shapes[0], shapes[1], shapes[-1]
    attrs = info.get("attrs") or {}
    if info.get("op_type") == "Gemm":
        if len(a) != 2 or len(b) != 2:
            return None
        m, k = (a[1], a[0]) if attrs.get("transA") else (a[0], a[1])
        n = b[0] if attrs.get("transB") else b[1]
        return [1, m, k, n]
    a2 = [1, *a] if len(a) == 1 else a
    b2 = [*b, 1] if len(b) == 1 else b
    batch = math.prod(out[:-2]) if len(out) > 2 else 1
    if len(b2) == 2:  # every batch against the same B: one matrix of batch·M rows
        return [1, batch * a2[-2], a2[-1], b2[-1]]
    return [batch, a2[-2], a2[-1], b2[-1]]


def _tensors(info: Mapping[str, Any]) -> list[tuple[list[int], Any]] | None:
    """The shape (sizes at least 1) and dtype of every tensor compared: a Cube key's first two
    inputs (data and weights) and its outputs, every input and output of a vector key; or
    ``None`` if the info_dict does not describe tensors (an imported AOE entry, a subgraph)."""
    inputs, outputs = info.get("inputs") or [], info.get("outputs") or []
    if not isinstance(inputs, list) or not isinstance(outputs, list):
        return None
    out = []
    for tensor in [*(inputs[:2] if _cube(info) else inputs), *outputs]:
        shape = tensor.get("shape") if isinstance(tensor, Mapping) else None
        if not isinstance(shape, list) or not all(isinstance(d, int) for d in shape):
            return None
        dtype = tensor.get("dtype")
        if dtype is not None and not isinstance(dtype, str):
            return None
        out.append(([max(1, d) for d in shape], dtype))
    return out or None


@dataclass(frozen=True)
class Neighbour:
    """A known key near a new one: where its policy comes from, and how far it is."""

    repo_key: str
    soc_version: str
    task_id: str
    distance: float
    knowledge: Mapping[str, Any]

    def as_json(self) -> dict[str, Any]:
        """What an outcome records of where its search started."""
        return {"repo_key": self.repo_key, "soc_version": self.soc_version,
                "task_id": self.task_id, "distance": round(self.distance, 3)}


class Donors:
    """The bank's measured policies a tune may borrow from, read once when it starts.

    They are kept in groups that can be neighbours of each other (family, vector operator type,
    tensor ranks), each with its log2 dimensions as one NumPy matrix, so finding a key's
    nearest costs one vectorised pass over its group: a lower bound of every distance (all but
    the attribute penalty), then the exact :func:`distance` for the few whose bound can still
    make the nearest."""

    def __init__(self, policies: Iterable[Policy], exclude_task: str | None = None,
                 backend: str = "sim") -> None:
        import numpy as np

        grouped: dict[tuple[Any, ...], list[Policy]] = {}
        for p in policies:
            if p.backend == backend and p.knowledge and p.task_id != exclude_task:
                signature = _signature(p.info_dict)
                if signature is not None:
                    grouped.setdefault(signature, []).append(p)
        self._groups = {signature: _Group(members, np) for signature, members in grouped.items()}
        self._size = sum(len(members) for members in grouped.values())

    @classmethod
    def load(cls, bank: Bank, op_types: Iterable[str | None], soc_version: str | None = None,
             backend: str = "sim", exclude_task: str | None = None) -> Donors:
        """The policies ``backend`` measured on ``soc_version`` (every chip for None) for the
        families of ``op_types`` (times from another backend are not comparable), but those of
        ``exclude_task`` (a resumed tune does not borrow from its own first part, so it
        searches as the uninterrupted tune would have). A tune reads its own chip's only: it
        borrows from no other (:func:`borrowed_from`)."""
        from tunebank.bank import PolicyFilter

        types = set(op_types)
        families = {family(t) for t in types} - {None}
        wanted = ({t for t in types if t} | (set(CONV_OPS) if "conv" in families else set())
                  | (set(MATMUL_OPS) if "matmul" in families else set()))
        return cls((p for op_type in sorted(wanted)
                    for p in bank.policies(PolicyFilter(soc_version=soc_version, op_type=op_type,
                                                        backend=backend))),
                   exclude_task, backend)

    def __len__(self) -> int:
        return self._size

    def nearest(self, info: Mapping[str, Any], soc_version: str, repo_key: str,
                count: int = NEIGHBOURS) -> list[Neighbour]:
        """The ``count`` known keys nearest to ``info`` (itself left out), same chip first
        (another chip's distance is :data:`OTHER_CHIP` more), ties by key."""
        signature = _signature(info)
        group = self._groups.get(signature) if signature is not None else None
        if group is None:
            return []
        found: list[Neighbour] = []
        worst = float("inf")
        for bound, index in group.bounds(info, soc_version):
            if len(found) >= count and bound > worst + 1e-9:
                break  # every later one is at least this far: none can enter the nearest
            policy = group.members[index]
            if policy.repo_key == repo_key and policy.soc_version == soc_version:
                continue
            apart = distance(info, policy.info_dict)
            if apart is None:
                continue
            apart += 0.0 if policy.soc_version == soc_version else OTHER_CHIP
            found.append(Neighbour(policy.repo_key, policy.soc_version, policy.task_id, apart,
                                   policy.knowledge))
            found.sort(key=lambda n: (n.distance, n.soc_version != soc_version, n.repo_key))
            worst = found[min(count, len(found)) - 1].distance
        return found[:count]


def _signature(info: Mapping[str, Any]) -> tuple[Any, ...] | None:
    """What two keys must share to be neighbours: family, the operator type of a vector key,
    and every tensor's rank, but a matmul's, which is compared by its computation (None if the
    info_dict describes no tensors, or a matmul's computation cannot be read)."""
    kind = family(info.get("op_type"))
    tensors = _tensors(info)
    if kind is None or tensors is None or _sizes(info) is None:
        return None
    if kind == "matmul":
        return (kind, None, len(tensors))
    return (kind, info.get("op_type") if kind == "vector" else None,
            tuple(len(shape) for shape, _ in tensors))


class _Group:
    """Donors that can be neighbours of each other: their log2 dimensions, and their dtypes,
    types and chips as codes, one NumPy array each."""

    def __init__(self, members: list[Policy], np: Any) -> None:
        self.members = members
        self._np = np
        rows = [_tensors(p.info_dict) or [] for p in members]
        self._dims = np.array([[math.log2(d) for d in _sizes(p.info_dict) or []] for p in members],
                              dtype=np.float64)
        self._codes: dict[Any, int] = {}
        self._dtypes = np.array([[self._code(dtype) for _, dtype in tensors] for tensors in rows],
                                dtype=np.int64)
        self._types = np.array([self._code(p.op_type) for p in members], dtype=np.int64)
        self._socs = np.array([self._code(p.soc_version) for p in members], dtype=np.int64)

    def _code(self, value: Any) -> int:
        return self._codes.setdefault(value, len(self._codes))

    def bounds(self, info: Mapping[str, Any], soc_version: str) -> Iterator[tuple[float, int]]:
        """Every member's distance to ``info`` but the attribute penalty (a lower bound of
        :func:`distance` plus the chip's), nearest first."""
        np = self._np
        tensors = _tensors(info) or []
        query = np.array([math.log2(d) for d in _sizes(info) or []], dtype=np.float64)
        dtypes = np.array([self._codes.get(dtype, -1) for _, dtype in tensors], dtype=np.int64)
        bound = np.abs(self._dims - query).sum(axis=1) if query.size else np.zeros(len(self.members))
        if dtypes.size:
            bound = bound + DTYPE_MISMATCH * (self._dtypes != dtypes).sum(axis=1)
        bound = bound + OP_TYPE_MISMATCH * (self._types != self._codes.get(info.get("op_type"), -1))
        bound = bound + OTHER_CHIP * (self._socs != self._codes.get(soc_version, -1))
        for i in np.argsort(bound, kind="stable"):
            yield float(bound[i]), int(i)


PATIENCE_MIN = 16
PATIENCE_SHARE = 16
"""A search that borrowed from known keys stops once max(PATIENCE_MIN, B / PATIENCE_SHARE)
measurements in a row found nothing better, B the smaller of its budget and its space (a small
space is then searched rather than measured whole); one that borrowed nothing spends its
budget, or measures its space whole."""


@dataclass(frozen=True)
class Start:
    """Where a new key's search starts: the neighbours it borrows from, their policies as
    candidates of its space (they guide a frugal search rather than start it: see
    :meth:`tuner.search.strategies.BaseSearch._descent_start`), and when it may stop early
    (None: it spends its budget)."""

    neighbours: tuple[Neighbour, ...]
    borrowed: tuple[tuple[int, ...], ...]
    patience: int | None


def borrowed_from(donors: Donors | None, info: Mapping[str, Any], soc_version: str,
                  repo_key: str) -> tuple[Neighbour, ...]:
    """The known keys a new key's search borrows from: the :data:`SAME_CHIP_NEIGHBOURS`
    nearest of its own chip (see :func:`start_from`) whose policies tile the Cube, nearest
    first.

    A policy run on the vector unit (:func:`another_implementation`) says nothing of a
    tiling, and the search prices the vector unit among its first candidates anyway. Such are
    the policies of the CNNs' classifier Gemms (one row each), the only neighbours BERT's
    matmuls have in a bank of CNNs: as guides they left BERT's new keys on Ascend310P3 at 1.182
    of the optimum at 16 measurements and 1.096 at 32, against 1.169 and 1.081 from scratch."""
    found = donors.nearest(info, soc_version, repo_key) if donors is not None else []
    return tuple(n for n in found if n.soc_version == soc_version
                 and not another_implementation(n.knowledge))[:SAME_CHIP_NEIGHBOURS]


def start_from(donors: Donors | None, info: Mapping[str, Any], repo_key: str, soc_version: str,
               space: SearchSpace, cost: CostModel, work: Workload, budget: int) -> Start:
    """How `bank tune` starts a new key's search from ``donors`` (none: from the default): from
    the :data:`SAME_CHIP_NEIGHBOURS` nearest known keys of its own chip.

    Another chip's policies are not borrowed: tuned to other buffers and core counts, they
    cost more than they gave at every budget measured (docs/performance.md). At 16
    measurements, over six splits of one model's keys after another's on the other chip, they
    left the geomean where it was (1.0556 of the optimum against 1.0554) and lost on two; at 32
    Inception-v1's new keys on Ascend310P3 after DenseNet-121's on Ascend910B2 ended at 1.034
    against 1.031; and a default tune of ResNet-50 on Ascend310P3 after its Ascend910B2 keys
    measured 74% less but gave a model 1.5% slower."""
    neighbours = borrowed_from(donors, info, soc_version, repo_key)
    borrowed = tuple(map_into(space, n.knowledge, cost, work) for n in neighbours)
    patience = max(PATIENCE_MIN, min(budget, space.size) // PATIENCE_SHARE) if borrowed else None
    return Start(neighbours, borrowed, patience)


def map_into(space: SearchSpace, knowledge: Mapping[str, Any], cost: CostModel,
             work: Workload) -> tuple[int, ...]:
    """A policy of another key as a candidate of ``space``: each knob at its value there, or the
    nearest value (in log2) where the space lacks it, the compiler's default where the policy
    has no such knob; then knobs the fit depends on put back to their defaults, one at a time,
    until the candidate fits the chip."""
    candidate = [_nearest_index(knob.values, knob.labels, knowledge.get(knob.name), default)
                 for knob, default in zip(space.knobs, space.default, strict=True)]
    return repair(space, candidate, cost, work)


def _nearest_index(values: Sequence[int], labels: Sequence[str] | None, value: Any,
                   default: int) -> int:
    if labels is not None:
        return list(labels).index(value) if value in labels else default
    if isinstance(value, bool) or not isinstance(value, int | float):
        return default
    if value in values:
        return list(values).index(int(value))
    return min(range(len(values)),
               key=lambda i: (abs(math.log2(values[i] + 1) - math.log2(max(value, 0) + 1)), i))


def repair(space: SearchSpace, candidate: Sequence[int], cost: CostModel,
           work: Workload) -> tuple[int, ...]:
    """``candidate`` made to fit the chip: the knobs the fit depends on are set back to the
    compiler's default one at a time, in the space's order, until it fits (the default
    always does). A matmul on the vector unit always fits as it is."""
    import numpy as np

    names = [knob.name for knob in space.knobs]
    row = list(candidate)

    def fits() -> bool:
        return bool(cost.fitting(work, space, np.array([row]))[0])

    for i, name in enumerate(names):
        if fits():
            break
        if name in FIT_KNOBS[space.family]:
            row[i] = space.default[i]
    return tuple(row)
