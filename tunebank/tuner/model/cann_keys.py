"""CANN's own bank key of a matmul: the ``MatMulV3InputArgs`` info_dict its runtime bank holds.

CANN's MatMulV3 tiling builds the key it looks its bank up by from the operator
(``MatmulV3BaseTiling::GetTilingInputArgs`` in CANN's ops-nn, matmul_v3_base_tiling.cpp;
../shared/research/cann-runtime-bank.md summarises it): M and N rounded up to a multiple of 16,
K to 8 for fp32 inputs and to 16 otherwise, a flag per size saying whether it already was; the
operands' dtypes with BF16 written as FLOAT16; formats, transposes and bias; everything else
fixed. The shipped banks write its 34 fields in alphabetical order, in the JSON types below
(``1.0`` for the struct's floats, ``true``/``false`` for its bools), and CANN's loader needs
every one in its type. An entry this module builds is equal, field for field and type for
type, to the one CANN ships for the same operator (tests/tuner/test_cann_keys.py holds it to
every ND entry of ../shared/aoe-banks).

What is inferred, not read: a MatMul whose second operand is 2-D reaches MatMulV3 with the
first operand's batch folded into M (graph fusion does this before tiling); a MatMul batched
on both sides is BatchMatMulV3, another bank, and gets no MatMulV3 key here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from tunebank.tuner.model.reading import Operator

MATMUL_V3 = "MatMulV3"
DTYPES = {"float32": 0, "float16": 1, "bfloat16": 1, "int8": 2, "int32": 3}
"""ge::DataType's numbers for the operand types a MatMulV3 takes, BF16 keyed as FLOAT16."""
FORMAT_ND, FORMAT_FRACTAL_NZ = 2, 29
"""ge::Format's numbers: plain tensors, and a weight kept in the Cube's NZ layout."""
FIXED: dict[str, Any] = {
    **{f"batch_{side}{n}": 1 for side in "ab" for n in range(1, 5)},
    "l1_fused_num": 0.0, "fused_double_operand_num": 0.0,
    "aub_double_num": 1.0, "bub_double_num": 1.0,
    "reserved_bool": False, **{f"reserved_params{n}": 0 for n in range(1, 7)},
}
"""The fields MatMulV3 fills the same for every operator."""
FIELDS = tuple(sorted((*FIXED, "m", "k", "n", "m_align_flag", "k_align_flag", "n_align_flag",
                       "a_dtype", "b_dtype", "out_dtype", "a_format", "b_format", "out_format",
                       "trans_a_flag", "trans_b_flag", "bias_flag")))
"""The 34 fields of ``MatMulV3InputArgs``, in the order CANN's banks write them."""


@dataclass(frozen=True)
class MatmulArgs:
    """What CANN's MatMulV3 tiling reads of an operator: the sizes as the operator has them
    (before any rounding), the operand types and formats, transposes and bias."""

    m: int
    k: int
    n: int
    a_dtype: str
    b_dtype: str
    out_dtype: str
    trans_a: bool = False
    trans_b: bool = False
    bias: bool = False
    a_format: int = FORMAT_ND
    b_format: int = FORMAT_ND
    out_format: int = FORMAT_ND


def _rounded(value: int, multiple: int) -> int:
    return math.ceil(value / multiple) * multiple


def matmul_v3_info(args: MatmulArgs) -> dict[str, Any]:
    """The MatMulV3 bank key of ``args``, its fields in CANN's order and JSON types.

    Raises:
        KeyError: an operand type MatMulV3 does not take.
    """
    reduce = 8 if args.a_dtype == "float32" else 16  # K aligned to 32 bytes of the A type
    m, k, n = _rounded(args.m, 16), _rounded(args.k, reduce), _rounded(args.n, 16)
    made: dict[str, Any] = {
        **FIXED, "m": m, "k": k, "n": n, "m_align_flag": m == args.m,
        "k_align_flag": k == args.k, "n_align_flag": n == args.n,
        "a_dtype": DTYPES[args.a_dtype], "b_dtype": DTYPES[args.b_dtype],
        "out_dtype": DTYPES[args.out_dtype], "a_format": args.a_format,
        "b_format": args.b_format, "out_format": args.out_format,
        "trans_a_flag": args.trans_a, "trans_b_flag": args.trans_b, "bias_flag": args.bias,
    }
    return {name: made[name] for name in FIELDS}


def matmul_args(op: Operator) -> MatmulArgs | None:
    """What MatMulV3 reads of an ONNX MatMul or Gemm, or ``None`` where the operator is no
    MatMulV3 (batched on both sides: BatchMatMulV3; a 1-D operand; a type MatMulV3 does not
    take).

    A Gemm is ``alpha * op(A) @ op(B) + beta * C``: its transA and transB are the key's
    transposes and a C its bias. A MatMul has neither; a batch of its first operand over a 2-D
    second one is folded into M.
    """
    if op.op_type not in ("MatMul", "Gemm") or len(op.inputs) < 2 or not op.outputs:
        return None
    a, b, out = op.inputs[0], op.inputs[1], op.outputs[0]
    if not {a.dtype, b.dtype, out.dtype} <= DTYPES.keys():
        return None
    if op.op_type == "Gemm":
        if len(a.shape) != 2 or len(b.shape) != 2:
            return None
        trans_a, trans_b = bool(op.attrs.get("transA")), bool(op.attrs.get("transB"))
        m, k = (a.shape[1], a.shape[0]) if trans_a else a.shape
        n = b.shape[0] if trans_b else b.shape[1]
        return MatmulArgs(m, k, n, a.dtype, b.dtype, out.dtype, trans_a, trans_b,
                          len(op.inputs) > 2)
    if len(a.shape) < 2 or len(b.shape) != 2:
        return None  # 1-D operands, or a batch on both sides (BatchMatMulV3)
    return MatmulArgs(math.prod(a.shape[:-1]), a.shape[-1], b.shape[1], a.dtype, b.dtype,
                      out.dtype)
