"""CANN's MatMulV3 key of a matmul (issue 42): a model made from each shipped ND entry of
../shared/aoe-banks (read in place), read as any model is, keys to that entry's info_dict, field
for field and type for type, in CANN's field order."""

from __future__ import annotations

import json
from pathlib import Path

import onnx
import pytest

from fixtures.matmul_models import entries, model_of
from tests.bank.test_real_banks import SAMPLES
from tunebank.tuner.model.cann_keys import FIELDS, MatmulArgs, matmul_args, matmul_v3_info
from tunebank.tuner.model.reading import load_model

BANK_FILES = sorted(SAMPLES.glob("*/unified_bank/*_AiCore_MatMulV3_runtime_kb.json"))
ND = [(path.name, number, entry) for path in BANK_FILES
      for number, entry in enumerate(entries(path), 1)
      if (entry["info_dict"]["a_format"], entry["info_dict"]["b_format"]) == (2, 2)]


def test_the_samples_hold_the_matmul_entries_the_issue_counts() -> None:
    assert len(BANK_FILES) == 3 and len(ND) == 268


def _off_recipe(info: dict[str, object]) -> bool:
    """An entry no operator keys to by today's recipe: its m is not a multiple of 16. CANN
    ships 20 such of its 923 MatMulV3 entries (5 chips, each float32 with m = 60 or 120, with
    and without m_align_flag); 8 of them are in ../shared/aoe-banks."""
    return int(str(info["m"])) % 16 != 0


def test_every_shipped_nd_entry_is_the_key_of_the_model_made_from_it(tmp_path: Path) -> None:
    """Through a file, as a user's model comes: written, loaded with shape inference, keyed.
    Every entry that follows CANN's recipe is matched exactly; the 8 that cannot are named."""
    differ = []
    for name, number, entry in ND:
        path = tmp_path / f"{number}.onnx"
        onnx.save(model_of(entry["info_dict"]), path)
        (op,) = load_model(path).operators
        args = matmul_args(op)
        assert args is not None, (name, number)
        made = matmul_v3_info(args)
        # json.dumps tells 1 from 1.0 from true, and keeps the field order
        if json.dumps(made) != json.dumps(entry["info_dict"]):
            differ.append((name, number))
    off = [(name, number) for name, number, entry in ND if _off_recipe(entry["info_dict"])]
    assert differ == off and len(off) == 8
    assert {(e["info_dict"]["m"], e["info_dict"]["a_dtype"]) for _, _, e in ND
            if _off_recipe(e["info_dict"])} == {(60, 0), (120, 0)}


def test_the_fields_are_cann_s_in_its_order() -> None:
    assert len(FIELDS) == 34 and list(FIELDS) == sorted(FIELDS)
    assert list(entries(BANK_FILES[0])[0]["info_dict"]) == list(FIELDS)


@pytest.mark.parametrize(("args", "expected"), [
    (MatmulArgs(100, 30, 17, "float32", "float32", "float32"),
     {"m": 112, "k": 32, "n": 32, "m_align_flag": False, "k_align_flag": False,
      "n_align_flag": False, "a_dtype": 0}),
    (MatmulArgs(128, 24, 64, "float32", "float32", "float32"),
     {"k": 24, "k_align_flag": True}),  # K to 8 for fp32
    (MatmulArgs(128, 24, 64, "float16", "float16", "float16"),
     {"k": 32, "k_align_flag": False, "a_dtype": 1}),  # to 16 otherwise
    (MatmulArgs(16, 16, 16, "bfloat16", "bfloat16", "bfloat16"),
     {"a_dtype": 1, "b_dtype": 1, "out_dtype": 1}),  # BF16 keyed as FLOAT16
])
def test_the_recipe(args: MatmulArgs, expected: dict[str, object]) -> None:
    made = matmul_v3_info(args)
    assert {name: made[name] for name in expected} == expected


def test_matmuls_that_are_no_matmul_v3(tmp_path: Path) -> None:
    from onnx import TensorProto, helper

    def one(shape_a: list[int], shape_b: list[int]) -> object:
        graph = helper.make_graph(
            [helper.make_node("MatMul", ["a", "b"], ["y"], name="mm")], "g",
            [helper.make_tensor_value_info("a", TensorProto.FLOAT16, shape_a),
             helper.make_tensor_value_info("b", TensorProto.FLOAT16, shape_b)],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT16, None)])
        path = tmp_path / "m.onnx"
        onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
        return matmul_args(load_model(path).operators[0])

    folded = one([4, 100, 64], [64, 48])  # a 2-D weight: the batch folds into M
    assert folded == MatmulArgs(400, 64, 48, "float16", "float16", "float16")
    assert one([4, 100, 64], [4, 64, 48]) is None  # batched on both sides: BatchMatMulV3
