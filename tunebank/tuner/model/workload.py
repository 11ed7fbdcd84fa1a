"""What the cost model needs to know of an operator: its family and its sizes.

Three families have search spaces: ``matmul`` (MatMul, Gemm), ``conv`` (Conv, ConvTranspose)
and ``vector`` (element-wise, normalisation, pooling, softmax and data-movement operators).
Every other type is not tunable: listed, never counted in total_num.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tunebank.tuner.model.reading import Operator

ELEMENTWISE_OPS = {  # vector operations per output element (estimates)
    "Add": 1, "Sub": 1, "Mul": 1, "Div": 4, "Sum": 1, "Max": 1, "Min": 1, "Relu": 1,
    "LeakyRelu": 2, "PRelu": 2, "Clip": 2, "Neg": 1, "Abs": 1, "Sigmoid": 6, "Tanh": 6,
    "Erf": 10, "Exp": 4, "Log": 4, "Sqrt": 4, "Pow": 8, "HardSigmoid": 3, "Where": 1,
    "Cast": 1, "BatchNormalization": 2,
}
COPY_OPS = {"Concat", "Slice", "Transpose", "Reshape", "Flatten", "Squeeze", "Unsqueeze",
            "Identity", "Dropout", "Split", "Expand", "Tile"}
ROW_OPS = {"Softmax": 5, "LogSoftmax": 6, "LayerNormalization": 8, "LRN": 6,
           "InstanceNormalization": 8, "ReduceMean": 1, "ReduceSum": 1, "ReduceMax": 1}
POOL_OPS = {"MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool"}
MATMUL_OPS = {"MatMul", "Gemm"}
CONV_OPS = {"Conv", "ConvTranspose"}


@dataclass(frozen=True)
class MatmulWork:
    """batch x (M x K) @ (K x N), fp16 on the cube; ``b_const``: B is a weight."""

    batch: int
    m: int
    k: int
    n: int
    b_const: bool


@dataclass(frozen=True)
class ConvWork:
    """A 2-D convolution as implicit GEMM over each image and group."""

    batch: int  # images x groups
    cin: int  # input channels per group
    hin: int
    win: int
    cout: int  # output channels per group
    hout: int
    wout: int
    kh: int
    kw: int
    sh: int
    dh: int
    transposed: bool


@dataclass(frozen=True)
class VectorWork:
    """A streaming vector operator: elements moved and operations per element."""

    elements: int  # elements streamed through the unit (largest tensor)
    bytes_in: int
    bytes_out: int
    inputs: int  # distinct input streams (UB buffers)
    ops_per_element: float
    row: int  # length a tile must hold whole for one pass (0: none)
    passes_split: int  # passes over the data when a row does not fit a tile


@dataclass(frozen=True)
class FusedStep:
    """One element-wise operator after a subgraph's anchor, fusable into the anchor's kernel."""

    op_type: str
    alone: VectorWork  # the operator as a kernel of its own, when it is not fused
    ops_per_element: float
    extra_bytes: int  # its other inputs that are not constants, read from global memory if fused
    extra_streams: int  # UB buffers those inputs take


@dataclass(frozen=True)
class SubgraphWork:
    """A fusable subgraph (tuner/plan/subgraphs.py): an anchor and the chain of element-wise
    operators after it, each consuming the one before; ``elements`` is the chain's tensor."""

    anchor: MatmulWork | ConvWork | VectorWork
    steps: tuple[FusedStep, ...]
    elements: int
    default_fused: int  # the steps the compiler fuses by its own patterns


Workload = MatmulWork | ConvWork | VectorWork | SubgraphWork


def family_of(op_type: str) -> str | None:
    """The search-space family of an operator type, or ``None`` if it is not tunable."""
    if op_type in MATMUL_OPS:
        return "matmul"
    if op_type in CONV_OPS:
        return "conv"
    if op_type in ELEMENTWISE_OPS or op_type in COPY_OPS or op_type in ROW_OPS or op_type in POOL_OPS:
        return "vector"
    return None


def workload_of(op: Operator, const_names: frozenset[str] = frozenset()) -> Workload | None:
    """The workload of ``op``, or ``None`` when its type (or its rank) has no search space."""
    family = family_of(op.op_type)
    if family == "matmul":
        return _matmul(op, const_names)
    if family == "conv":
        return _conv(op)
    if family == "vector":
        return _vector(op)
    return None


def _numel(shape: tuple[int, ...]) -> int:
    return math.prod(shape) if shape else 1


def _matmul(op: Operator, const_names: frozenset[str]) -> MatmulWork | None:
    a, b = op.inputs[0].shape, op.inputs[1].shape
    if op.op_type == "Gemm":
        if len(a) != 2 or len(b) != 2:
            return None
        m, k = (a[1], a[0]) if op.attrs.get("transA") else a
        n = b[0] if op.attrs.get("transB") else b[1]
        return MatmulWork(1, m, k, n, op.inputs[1].name in const_names)
    if not a or not b:
        return None
    a2 = (1, *a) if len(a) == 1 else a
    b2 = (*b, 1) if len(b) == 1 else b
    out = op.outputs[0].shape if op.outputs else ()
    batch = _numel(out[:-2]) if len(out) > 2 else 1
    return MatmulWork(batch, a2[-2], a2[-1], b2[-1], op.inputs[1].name in const_names)


def _conv(op: Operator) -> ConvWork | None:
    x, w = op.inputs[0].shape, op.inputs[1].shape
    out = op.outputs[0].shape
    if len(x) not in (3, 4) or len(out) != len(x):
        return None
    if len(x) == 3:  # 1-D convolution: height 1
        x, out, w = (x[0], x[1], 1, x[2]), (out[0], out[1], 1, out[2]), (*w[:2], 1, w[2])
    group = int(op.attrs.get("group", 1))
    strides = op.attrs.get("strides") or [1, 1]
    dilations = op.attrs.get("dilations") or [1, 1]
    transposed = op.op_type == "ConvTranspose"
    cin = x[1] // group
    cout = out[1] // group
    return ConvWork(batch=x[0] * group, cin=cin, hin=x[2], win=x[3], cout=cout, hout=out[2],
                    wout=out[3], kh=w[2], kw=w[3], sh=int(strides[0]), dh=int(dilations[0]),
                    transposed=transposed)


def _vector(op: Operator) -> VectorWork:
    sizes = [_numel(t.shape) for t in op.inputs] or [1]
    out_sizes = [_numel(t.shape) for t in op.outputs] or [1]
    elements = max(max(sizes), max(out_sizes))
    bytes_in, bytes_out = 2 * sum(sizes), 2 * sum(out_sizes)  # fp16, as ATC runs by default
    # A copy moves one input at a time; other operators stream every input through the UB.
    streams = 1 if op.op_type in COPY_OPS else max(1, len([s for s in sizes if s > 1]))
    row, passes, ops = 0, 1, 1.0
    if op.op_type in ELEMENTWISE_OPS:
        ops = ELEMENTWISE_OPS[op.op_type]
    elif op.op_type in ROW_OPS:
        ops = ROW_OPS[op.op_type]
        shape = op.inputs[0].shape
        axis = int(op.attrs.get("axis", -1 if op.op_type != "LRN" else 1))
        row = shape[axis] if shape else 1
        if op.op_type == "LRN":
            row = shape[1] * int(op.attrs.get("size", 5))
        passes = 3
    elif op.op_type in POOL_OPS:
        kernel = op.attrs.get("kernel_shape") or list(op.inputs[0].shape[2:])
        ops = float(_numel(tuple(kernel)))
        elements = max(sizes)
        ops = ops * max(out_sizes) / max(elements, 1)
    return VectorWork(elements=elements, bytes_in=bytes_in, bytes_out=bytes_out, inputs=streams,
                      ops_per_element=ops, row=row, passes_split=passes)
