"""Reading models: shapes inferred, inputs fixed, and clear errors for what cannot be known."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.tuner.conftest import BERT_SHAPE, MODELS
from tunebank.tuner.model.keys import info_dict, repo_key
from tunebank.tuner.model.reading import ModelError, load_model, parse_input_shapes


@pytest.mark.parametrize("name", ["resnet50.onnx", "vgg19.onnx", "inception_v1.onnx", "squeezenet.onnx"])
def test_every_bundled_model_loads_with_known_shapes(name: str) -> None:
    model = load_model(MODELS / name)
    assert model.operators
    for op in model.operators:
        assert all(t.shape is not None for t in op.inputs)


def test_parse_input_shapes() -> None:
    assert parse_input_shapes("a:1,3,224,224; b:8") == {"a": (1, 3, 224, 224), "b": (8,)}
    assert parse_input_shapes("scope/x:0:1,2") == {"scope/x:0": (1, 2)}
    for bad in ("a", "a:", "a:1,x", "a:0,3", ":1,2"):
        with pytest.raises(ModelError, match="--input-shape"):
            parse_input_shapes(bad)


def test_dynamic_input_needs_a_shape(bert_models: tuple[Path, Path]) -> None:
    v1, _ = bert_models
    with pytest.raises(ModelError, match="input 'input_ids_embedded' has a dynamic"):
        load_model(v1)
    with pytest.raises(ModelError, match="has no input 'nope'"):
        load_model(v1, {"nope": (1,)})
    with pytest.raises(ModelError, match=r"rank 3, not 2"):
        load_model(v1, {"input_ids_embedded": (1, 64)})
    model = load_model(v1, BERT_SHAPE)
    matmuls = [op for op in model.operators if op.op_type == "MatMul"]
    assert matmuls[0].outputs[0].shape == (1, 64, 128)


def test_a_file_that_is_not_a_model(tmp_path: Path) -> None:
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"\x00\x01 definitely not protobuf \xff" * 10)
    with pytest.raises(ModelError, match=r"junk\.onnx"):
        load_model(junk)
    with pytest.raises(ModelError, match="cannot read"):
        load_model(tmp_path / "absent.onnx")


def test_repeated_blocks_share_keys_and_names_do_not_count() -> None:
    model = load_model(MODELS / "resnet50.onnx")
    convs = [op for op in model.operators if op.op_type == "Conv"]
    keys = {repo_key(info_dict(op)) for op in convs}
    assert len(keys) < len(convs)
    first = convs[0]
    renamed = type(first)(name="other", op_type=first.op_type, inputs=first.inputs,
                          outputs=first.outputs, attrs=first.attrs, index=first.index)
    assert repo_key(info_dict(renamed)) == repo_key(info_dict(first))
    strided = type(first)(name=first.name, op_type=first.op_type, inputs=first.inputs,
                          outputs=first.outputs, attrs={**first.attrs, "strides": [1, 1]},
                          index=first.index)
    assert repo_key(info_dict(strided)) != repo_key(info_dict(first))
    assert repo_key(info_dict(first)).isdigit()


def test_an_operator_whose_shape_stays_unknown(tmp_path: Path) -> None:
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Reshape", ["x", "s"], ["r"], name="rs"),
         helper.make_node("Relu", ["r"], ["y"], name="relu")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8]),
         helper.make_tensor_value_info("s", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    path = tmp_path / "runtime_shape.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    with pytest.raises(ModelError, match=r"shape of 'r' \(operator rs, Reshape\) is unknown; .*"
                                         r"\(model inputs: x, s\)"):
        load_model(path)


def _conv_model(path: Path, kernel: int) -> Path:
    """A Conv whose kernel is ``kernel`` square over an 8x8 input: its output shape is negative
    when the kernel is larger than the input (the weight is an input, so nothing is allocated)."""
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["y"], name="big_conv")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8]),
         helper.make_tensor_value_info("w", TensorProto.FLOAT, [4, 3, kernel, kernel])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    return path


def test_a_model_with_a_dimension_that_is_not_positive_is_refused_naming_the_operator(
        tmp_path: Path) -> None:
    """Issue 29: a kernel of 100000x100000 gave negative output shapes, then a `math domain
    error` after 10 add events, or policies recorded for negative dimensions."""
    path = _conv_model(tmp_path / "huge_kernel.onnx", 100_000)
    with pytest.raises(ModelError, match=r"huge_kernel.onnx: operator 'big_conv' \(Conv\): tensor "
                                         r"'y' has shape \[1, 4, -99991, -99991\]; every dimension "
                                         r"must be positive"):
        load_model(path)
    assert load_model(_conv_model(tmp_path / "fits.onnx", 3)).operators[0].outputs[0].shape == \
        (1, 4, 6, 6)


@pytest.mark.parametrize("text", ["x:1," + "9" * 400, "x:1,2147483648", "x:0,3", "x:-1"])
def test_input_shapes_beyond_any_real_dimension_are_refused(text: str) -> None:
    with pytest.raises(ModelError, match="with dimensions from 1 to 2,147,483,647"):
        parse_input_shapes(text)


def test_a_fixed_dimension_given_otherwise_names_the_input_dimension_and_both_values(
        bert_models: tuple[Path, Path]) -> None:
    """Issue 41: a hidden size of 768 given for a model whose hidden size is fixed at 128 was
    "shape inference failed: ... expected to have type but instead is null"."""
    v1, _ = bert_models
    with pytest.raises(ModelError, match=r"^--input-shape: input 'input_ids_embedded': dimension "
                                         r"2 is 128 in .*bert_v1\.onnx, 768 given"):
        load_model(v1, {"input_ids_embedded": (1, 64, 768)})


def test_a_model_read_allocates_what_the_file_holds_not_the_cap(tmp_path: Path) -> None:
    """Issue 41: reading a model reserved its 2 GiB cap before reading (``read(limit + 1)``),
    so under any address-space limit below that every tune was a MemoryError traceback. Here a
    tune runs under a 1.5 GiB limit, as under a batch scheduler's ``ulimit -v``."""
    import os
    import resource
    import subprocess
    import sys

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (1536 * 2**20, 1536 * 2**20))

    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", "from tunebank.cli.main import run; run()", "tune",
         str(MODELS / "squeezenet.onnx"), "--soc-version", "Ascend910B2", "--db",
         str(tmp_path / "b.db"), "--budget", "4", "-q", "--json"],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(root)}, preexec_fn=limit,
        capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert '"repo_summary"' in done.stdout


def test_a_file_that_says_it_is_empty_is_still_read_whole(tmp_path: Path) -> None:
    """/proc's files report a size of 0: what they hold is read in chunks, up to the cap."""
    from tunebank.bank.formats.jsontext import read_bytes

    data = read_bytes(Path("/proc/self/status"), ModelError)
    assert data.startswith(b"Name:") and len(data) > 100
    with pytest.raises(ModelError, match="more than the 0 MiB"):
        read_bytes(Path("/proc/self/status"), ModelError, limit=10)
