"""Reading an ONNX model into the operators the tuner keys and tunes.

Shapes come from ONNX shape inference after ``--input-shape`` has fixed the graph inputs;
initializers and constant-producing nodes count as known. An operator whose shapes are still
unknown stops the run with an error naming the graph input to fix.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tunebank.bank.errors import BankError
from tunebank.bank.formats.jsontext import read_bytes

DTYPE_NAMES = {1: "float32", 2: "uint8", 3: "int8", 5: "int16", 6: "int32", 7: "int64",
               9: "bool", 10: "float16", 11: "float64", 16: "bfloat16"}


MAX_DIM = 2**31 - 1
"""The largest dimension ``--input-shape`` takes: no tensor of a real model comes near it, and
beyond ONNX's int64 a dimension cannot even be stored."""
MAX_MODEL_BYTES = 2 * 1024**3
"""The largest model file read: protobuf's own limit on one message (weights beyond it live in
external data files)."""


class ModelError(BankError):
    """The model cannot be read, or its shapes cannot be known."""


@dataclass(frozen=True)
class TensorInfo:
    """One input or output of an operator: its shape and element type."""

    name: str
    shape: tuple[int, ...]
    dtype: str


@dataclass(frozen=True)
class Operator:
    """One node of the model with everything its key needs."""

    name: str
    op_type: str
    inputs: tuple[TensorInfo, ...]
    outputs: tuple[TensorInfo, ...]
    attrs: Mapping[str, Any]
    index: int


@dataclass(frozen=True)
class Model:
    """A loaded model: its name, content hash and operators in graph order."""

    name: str
    """The model file's name without its suffix (what tasks and tuning names show)."""
    path: Path
    sha256: str
    operators: tuple[Operator, ...]
    proto: Any  # the onnx ModelProto, kept to write the annotated copy


def parse_input_shapes(text: str | None) -> dict[str, tuple[int, ...]]:
    """Parse ``name:1,3,224,224;other:8,128`` into a mapping.

    Raises:
        ModelError: the text is not in that form.
    """
    shapes: dict[str, tuple[int, ...]] = {}
    if not text:
        return shapes
    for part in filter(None, (p.strip() for p in text.split(";"))):
        name, sep, dims = part.rpartition(":")
        try:
            shape = tuple(int(d) for d in dims.split(",") if len(d.strip()) <= 20)
        except ValueError:
            shape = ()
        if not sep or not name or not shape or len(shape) != len(dims.split(",")) or \
                min(shape) < 1 or max(shape) > MAX_DIM:
            raise ModelError(
                f"--input-shape: {part[:80]!r} is not NAME:D1,D2,... with dimensions from 1 to "
                f"{MAX_DIM:,}"
            )
        shapes[name] = shape
    return shapes


def load_model(path: Path, input_shapes: Mapping[str, Sequence[int]] | None = None) -> Model:
    """Load ``path``, fix input shapes, infer every shape and list the operators.

    Raises:
        ModelError: the file is not a readable ONNX model, an ``--input-shape`` name is not a
            graph input, or some operator's shapes stay unknown.
    """
    import onnx

    data = read_bytes(path, ModelError, limit=MAX_MODEL_BYTES)  # a regular file, under the cap
    try:
        proto = onnx.load_from_string(data)
    except Exception as exc:  # onnx raises DecodeError and friends for a corrupt file
        raise ModelError(f"{path}: not an ONNX model ({type(exc).__name__})") from exc
    if not data:
        raise ModelError(f"{path}: is empty (0 bytes), not an ONNX model")
    if not proto.graph.node:
        raise ModelError(f"{path}: the model's graph has no operators; there is nothing to tune")
    _check_names(proto, path)
    _check_external_data(proto, path)
    overridden = _fix_inputs(proto, path, dict(input_shapes or {}))
    try:
        inferred = onnx.shape_inference.infer_shapes(proto, strict_mode=True, data_prop=True)
    except Exception as exc:
        reason = str(exc).strip().splitlines()[-1][:200]
        if overridden:  # the likely cause, in the user's own terms (issue 41)
            name, dim, fixed, given = overridden[0]
            raise ModelError(f"--input-shape: input {name!r}: dimension {dim} is {fixed} in "
                             f"{path}, {given} given, and the model's shapes do not follow "
                             f"({reason[:120]})") from exc
        raise ModelError(f"{path}: shape inference failed: {reason}") from exc
    operators = _operators(inferred, path)
    name = path.stem  # the name its user gave the file: a graph is often "main_graph" or a zoo's
    return Model(name=name, path=path,
                 sha256=hashlib.sha256(data).hexdigest(), operators=operators, proto=inferred)


def _check_external_data(proto: Any, path: Path) -> None:
    """Refuse a model whose weights live in a file outside its own folder: the tuned copy
    (``--output``) reads them, and a model from someone else must not make tunebank read
    ``/etc/shadow`` or ``../../other/secret.bin``. A location is a relative path whose real
    path, links resolved, stays in the model's folder; ONNX's own loader asks the same, only
    later, after the tune was recorded."""
    folder = os.path.realpath(path.parent)
    for tensor in _tensors(proto.graph):
        if tensor.data_location != 1:  # TensorProto.EXTERNAL
            continue
        location = next((entry.value for entry in tensor.external_data if entry.key == "location"), "")
        target = os.path.realpath(os.path.join(folder, location))
        if not location or os.path.isabs(location) or \
                os.path.commonpath([folder, target]) != folder:
            raise ModelError(f"{path}: tensor {tensor.name!a}: its external data "
                             f"{location!a} is not a file in the model's folder")


def _tensors(graph: Any) -> Iterator[Any]:
    """Every tensor of ``graph`` and its subgraphs: initializers (sparse ones too) and tensor
    attributes."""
    yield from graph.initializer
    for sparse in graph.sparse_initializer:
        yield from (sparse.values, sparse.indices)
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.HasField("t"):
                yield attribute.t
            yield from attribute.tensors
            for sub in (*([attribute.g] if attribute.HasField("g") else []), *attribute.graphs):
                yield from _tensors(sub)


def _check_names(proto: Any, path: Path) -> None:
    """Refuse a model whose names are not UTF-8 text: protobuf hands such a string field over as
    bytes, which no key, message or bank column can hold."""
    graph = proto.graph
    named = [("graph", graph.name)]
    for kind, values in (("input", graph.input), ("output", graph.output),
                         ("value_info", graph.value_info), ("initializer", graph.initializer)):
        named += [(f"a graph {kind}", value.name) for value in values]
    for index, node in enumerate(graph.node):
        where = f"node {index}"
        named += [(f"{where}'s name", node.name), (f"{where}'s op_type", node.op_type),
                  (f"{where}'s domain", node.domain)]
        named += [(f"an input of {where}", name) for name in node.input]
        named += [(f"an output of {where}", name) for name in node.output]
        named += [(f"an attribute name of {where}", attr.name) for attr in node.attribute]
    for what, value in named:
        if not isinstance(value, str):
            raise ModelError(f"{path}: {what} is not valid UTF-8 text ({bytes(value)[:40]!r})")


Overridden = list[tuple[str, int, int, int]]
"""Each fixed dimension ``--input-shape`` changed: the input, the dimension (from 0), the
model's value and the value given."""


def _fix_inputs(proto: Any, path: Path,
                shapes: dict[str, tuple[int, ...]] | dict[str, Any]) -> Overridden:
    """Give the graph inputs the shapes asked for, and say which fixed dimensions that changed.

    Raises:
        ModelError: a name is no graph input, a rank differs, or an input the model leaves
            dynamic is not given.
    """
    overridden: Overridden = []
    initializers = {init.name for init in proto.graph.initializer}
    graph_inputs = {i.name: i for i in proto.graph.input if i.name not in initializers}
    for name in shapes:
        if name not in graph_inputs:
            known = ", ".join(sorted(graph_inputs)) or "none"
            raise ModelError(f"--input-shape: {path} has no input {name!r} (inputs: {known})")
    for name, tensor in graph_inputs.items():
        dims = tensor.type.tensor_type.shape.dim
        if name in shapes:
            wanted = shapes[name]
            if dims and len(dims) != len(wanted):
                raise ModelError(f"--input-shape: input {name!r} has rank {len(dims)}, "
                                 f"not {len(wanted)}")
            overridden += [(name, n, d.dim_value, int(value)) for n, (d, value)
                           in enumerate(zip(dims, wanted, strict=False))
                           if d.dim_value > 0 and d.dim_value != value]
            del dims[:]
            for value in wanted:
                dims.add().dim_value = int(value)
        elif any(d.dim_value <= 0 for d in dims) or not tensor.type.tensor_type.HasField("shape"):
            raise ModelError(f"{path}: input {name!r} has a dynamic or missing dimension; "
                             f"give it with --input-shape \"{name}:D1,D2,...\"")
    return overridden


def _operators(proto: Any, path: Path) -> tuple[Operator, ...]:
    from onnx import helper

    graph = proto.graph
    infos: dict[str, TensorInfo] = {}
    for value in [*graph.input, *graph.value_info, *graph.output]:
        tensor_type = value.type.tensor_type
        if tensor_type.HasField("shape") and all(d.HasField("dim_value") for d in tensor_type.shape.dim):
            infos[value.name] = TensorInfo(value.name, tuple(d.dim_value for d in tensor_type.shape.dim),
                                           DTYPE_NAMES.get(tensor_type.elem_type, "unknown"))
    for init in graph.initializer:
        infos[init.name] = TensorInfo(init.name, tuple(init.dims), DTYPE_NAMES.get(init.data_type, "unknown"))
    used = {name for node in graph.node for name in node.input} | {o.name for o in graph.output}
    weights = {init.name for init in graph.initializer}
    fixable = ", ".join(i.name for i in graph.input if i.name not in weights) or "none"
    operators = []
    for index, node in enumerate(graph.node):
        name = node.name or f"{node.op_type}_{index}"
        tensors = []
        outputs = [t for t in node.output if t and (t in used or t in infos)]  # drop unused masks
        for tensor_name in [*node.input, *outputs]:
            if not tensor_name:
                continue
            if tensor_name not in infos:
                raise ModelError(f"{path}: shape of {tensor_name!r} (operator {name}, {node.op_type}) "
                                 f"is unknown; fix the input(s) it depends on with --input-shape "
                                 f"(model inputs: {fixable})")
            tensors.append(infos[tensor_name])
        n_in = len([t for t in node.input if t])
        for n, tensor in enumerate(tensors):
            if any(d < 0 for d in tensor.shape) or (n >= n_in and any(d == 0 for d in tensor.shape)):
                raise ModelError(f"{path}: operator {name!a} ({node.op_type}): tensor "
                                 f"{tensor.name!a} has shape {list(tensor.shape)}; every "
                                 "dimension must be positive (a kernel larger than its input?)")
        attrs = {a.name: _attr_value(helper.get_attribute_value(a)) for a in node.attribute}
        operators.append(Operator(name=name, op_type=node.op_type, inputs=tuple(tensors[:n_in]),
                                  outputs=tuple(tensors[n_in:]), attrs=attrs, index=index))
    return tuple(operators)


def _attr_value(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, list | tuple):
        return [_attr_value(v) for v in value]
    if isinstance(value, int | float | str):
        return value
    return None  # tensors and graphs: never part of a kernel key
