"""Operator keys: a canonical info_dict per operator and its repo_key (xxh64, decimal).

The info_dict holds what decides the kernel: type, input and output shapes, dtypes and formats,
and the attributes that change the computation's shape (never the node's name). Two operators
with equal info_dicts share a key, and so share one tuning and one bank entry.
"""

from __future__ import annotations

from typing import Any

from tunebank.bank.canonical import xxh64_key
from tunebank.tuner.model.reading import Operator

KERNEL_ATTRS = frozenset({
    "auto_pad", "axes", "axis", "ceil_mode", "count_include_pad", "dilations", "group",
    "kernel_shape", "keepdims", "mode", "output_padding", "output_shape", "pads", "perm",
    "size", "split", "storage_order", "strides", "transA", "transB", "broadcast", "starts",
    "ends",
})


def tensor_format(shape: tuple[int, ...]) -> str:
    """The format a tensor arrives in: NCHW for 4-D feature maps, ND otherwise."""
    return "NCHW" if len(shape) == 4 else "ND"


def info_dict(op: Operator) -> dict[str, Any]:
    """The canonical key features of one operator."""
    return {
        "op_type": op.op_type,
        "inputs": [{"shape": list(t.shape), "dtype": t.dtype, "format": tensor_format(t.shape)}
                   for t in op.inputs],
        "outputs": [{"shape": list(t.shape), "dtype": t.dtype, "format": tensor_format(t.shape)}
                    for t in op.outputs],
        "attrs": {k: v for k, v in sorted(op.attrs.items()) if k in KERNEL_ATTRS and v is not None},
    }


def on_cores(info: dict[str, Any], cores: int | None) -> dict[str, Any]:
    """``info`` keyed for ``cores`` AI cores of its chip (AOE's ``--aicore_num``), where that is
    not all of them (``None``): a tiling tuned on 16 cores is not one for 24, so the two are
    two keys; a key of the whole chip stays as it always was."""
    return info if cores is None else {**info, "aicore_num": cores}


def repo_key(info: dict[str, Any]) -> str:
    """xxh64 of the info_dict's canonical bytes, as a decimal string (as AOE writes its keys)."""
    return xxh64_key(info)
