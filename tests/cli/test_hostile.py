"""Every reader fed broken and hostile input through the `bank` command.

Hypothesis mutates real files (AOE result files, a bank tree, an events export, tuning configs,
tune-ops files, ONNX models, --input-shape strings) and each run goes through
:func:`tests.hostile.refused_or_sound`: no traceback, one error line, a non-zero exit and the
bank byte for byte unchanged, or a success that verifies.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest
from freezegun import freeze_time
from hypothesis import given
from hypothesis import strategies as st
from onnx import TensorProto, helper

from fixtures.demo_bank import build
from tests.hostile import (
    HOSTILE_VALUES,
    dumps,
    fresh_copy,
    fuzz,
    mutated_json,
    mutated_lines,
    mutated_text,
    refused_or_sound,
    runner,
)
from tests.seams import import_paths
from tunebank.bank import Bank
from tunebank.bank.formats.jsonl import write_event_rows
from tunebank.bank.store.rows import event_values
from tunebank.cli.main import app

ROOT = Path(__file__).resolve().parents[2]
AOE = ROOT / "fixtures" / "aoe"
SQUEEZENET = ROOT / "fixtures" / "models" / "squeezenet.onnx"
CHIP = ["--soc-version", "Ascend310"]
pytestmark = pytest.mark.fuzz  # `pytest -m fuzz` runs these alone, with 20 times the examples
@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("hostile")


@pytest.fixture(scope="module")
def base_bank(scratch: Path) -> Path:
    """The bank every example damages a copy of: the demo bank and one imported AOE file."""
    path = scratch / "base.db"
    with freeze_time("2026-11-30 08:15:00"):
        build(str(path))
    with Bank.open(str(path)) as bank:
        import_paths(bank, [AOE / "aoe_result_opat_20240315143005123_4711.json"], "Ascend310")
    return path


@pytest.fixture(scope="module")
def events_export(scratch: Path) -> str:
    """An events export of another bank (so a clean import of it adds events)."""
    source = scratch / "source.db"
    with freeze_time("2026-05-05 05:05:05"):
        build(str(source))
    out = scratch / "source-events.jsonl"
    with Bank.open(str(source)) as bank, out.open("w", encoding="utf-8") as handle:
        write_event_rows(handle, bank.event_rows(), bank.bank_id)
    return out.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def tree(base_bank: Path, scratch: Path) -> Path:
    out = scratch / "tree"
    result = runner.invoke(app, ["export", "--format", "aoe-repo", "--out", str(out), "--db",
                                 str(base_bank)])
    assert result.exit_code == 0, result.output
    return out


def _write(folder: Path, name: str, data: bytes) -> Path:
    path = folder / name
    path.write_bytes(data)
    return path


# -- AOE result files ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(p.name for p in AOE.glob("*.json")))
def test_mutated_result_files(name: str, base_bank: Path, scratch: Path) -> None:
    original = (AOE / name).read_text(encoding="utf-8")

    @fuzz(30)
    @given(data=mutated_text(original))
    def run(data: bytes) -> None:
        bank = fresh_copy(base_bank, scratch)
        path = _write(bank.parent.parent, f"{bank.parent.name}-{name}", data)
        refused_or_sound(["import", str(path), *CHIP, "--db", str(bank)], bank)

    run()


@pytest.mark.parametrize(("literal", "message"), [
    ("NaN", "must be a non-negative number, not nan"),
    ("Infinity", "must be a non-negative number, not inf"),
    ("-1", "must be a non-negative number, not -1"),
    ("1e400", "must be a non-negative number, not inf"),
    ("-Infinity", "must be a non-negative number, not -inf"),
])
def test_hostile_times(literal: str, message: str, base_bank: Path, scratch: Path) -> None:
    doc = json.loads((AOE / "aoe_result_opat_20240315143005123_4711.json").read_text())
    doc[1]["OPAT"]["repo_modified_operators"]["add_repo_operators"][0][
        "performance_after_tune(us)"] = "PLACEHOLDER"
    bank = fresh_copy(base_bank, scratch)
    text = json.dumps(doc).replace('"PLACEHOLDER"', literal)
    path = _write(bank.parent, "aoe_result_opat_1.json", text.encode())
    result = refused_or_sound(["import", str(path), *CHIP, "--db", str(bank)], bank)
    assert result.exit_code == 1 and message in result.stderr


DEEP = "[" * 1000 + "]" * 1000
V1_FILE = "aoe_result_opat_20240315143005123_4711.json"


@pytest.mark.parametrize(("old", "new", "message"), [
    ('"tuning_time(s)": 1827', '"tuning_time(s)": ' + "9" * 400,
     "basic.tuning_time(s): must be a non-negative number, not an integer of about 401 digits"),
    ('"op_type": "stridedsliced"', '"op_type": ' + DEEP,
     "op_type: must be a string or a list of strings, not a list"),
    ('"performance_improvement": "35.35%"', '"performance_improvement": ' + DEEP,
     "performance_improvement: must be a percentage like \"35.35%\", not a list"),
    ('"op_type": "stridedsliced"', '"op_type": "\\ud800"',
     "a lone surrogate escape such as \\ud800"),
    ('"op_name": "strided_slice_10"', '"op_name": "\\udfff\\ud800"', "a lone surrogate escape"),
    ('"opat_tune_result": "tune success"', '"opat_tune_result": []',  # found by `pytest -m fuzz`
     "OPAT.opat_tune_result: unknown tuning result a list"),
])
def test_what_once_printed_a_traceback(old: str, new: str, message: str, base_bank: Path,
                                       scratch: Path) -> None:
    text = (AOE / V1_FILE).read_text(encoding="utf-8")
    assert old in text
    bank = fresh_copy(base_bank, scratch)
    path = _write(bank.parent, V1_FILE, text.replace(old, new, 1).encode())
    result = refused_or_sound(["import", str(path), *CHIP, "--db", str(bank)], bank)
    assert result.exit_code == 1 and message in result.stderr, result.stderr


def test_an_escaped_surrogate_pair_is_text_and_imports(base_bank: Path, scratch: Path) -> None:
    text = (AOE / V1_FILE).read_text(encoding="utf-8")
    bank = fresh_copy(base_bank, scratch)
    path = _write(bank.parent, "emoji.json", text.replace(
        '"op_type": "stridedsliced"', '"op_type": "sliced\\ud83d\\ude00"', 1).encode())
    result = refused_or_sound(["import", str(path), *CHIP, "--db", str(bank)], bank)
    assert result.exit_code == 0, result.output


# -- bank trees and events files ------------------------------------------------------------------

@fuzz(40)
@given(choice=st.randoms(use_true_random=False), data=st.data())
def test_mutated_bank_trees(tree: Path, base_bank: Path, scratch: Path, choice: random.Random,
                            data: st.DataObject) -> None:
    bank = fresh_copy(base_bank, scratch)
    copied = bank.parent / "tree"
    shutil.copytree(tree, copied)
    target = choice.choice(sorted(p for p in copied.rglob("*") if p.is_file()))
    text = target.read_text(encoding="utf-8")
    mutate = mutated_lines(text) if target.name.endswith("_runtime_kb.json") else mutated_text(text)
    target.write_bytes(data.draw(mutate))
    refused_or_sound(["import", str(copied), "--db", str(bank)], bank)


@pytest.mark.parametrize(("change", "message"), [  # found by `pytest -m fuzz`
    (lambda entry: True, "must be an object, not True"),
    (lambda entry: {**entry, "backend": True}, ".backend: must be a string, not True"),
    (lambda entry: {**entry, "best_us": 10**400}, ".best_us: must be a non-negative number"),
])
def test_hostile_times_tables(change: object, message: str, tree: Path, base_bank: Path,
                              scratch: Path) -> None:
    bank = fresh_copy(base_bank, scratch)
    copied = bank.parent / "tree"
    shutil.copytree(tree, copied)
    (table,) = copied.rglob("tunebank_times.json")
    data = json.loads(table.read_text())
    first = sorted(data["entries"])[0]
    data["entries"][first] = change(data["entries"][first])  # type: ignore[operator]
    table.write_text(json.dumps(data))
    result = refused_or_sound(["import", str(copied), "--db", str(bank)], bank)
    assert result.exit_code == 1 and message in result.stderr, result.stderr


@fuzz(60)
@given(data=st.data())
def test_mutated_events_files(events_export: str, base_bank: Path, scratch: Path,
                              data: st.DataObject) -> None:
    bank = fresh_copy(base_bank, scratch)
    path = _write(bank.parent, "events.jsonl", data.draw(mutated_lines(events_export)))
    result = refused_or_sound(["import", str(path), "--db", str(bank)], bank)
    if result.exit_code == 0:  # only an edit that changes no event's content can pass the chain
        assert json.loads(result.stdout.splitlines()[-1].split(" event(s)")[0] or "0") >= 0


def test_an_events_line_whose_op_name_is_not_text(events_export: str, base_bank: Path,
                                                   scratch: Path) -> None:  # found by -m fuzz
    bank = fresh_copy(base_bank, scratch)
    text = events_export.replace('"op_name":null', '"op_name":false', 1)
    path = _write(bank.parent, "events.jsonl", text.encode())
    result = refused_or_sound(["import", str(path), "--db", str(bank)], bank)
    assert result.exit_code == 1 and "field op_name must be a string or null, not False" in result.stderr


# -- names from every door (issue 28) --------------------------------------------------------------

HOSTILE_NAMES = st.one_of(
    st.text(max_size=30),
    st.sampled_from(["../x", "/abs/chip", "..", "a/b", "x\x1b[2Jy", "=1+2", "@SUM(A1)", "op\x00",
                     "A" * 300, "C:\\x", "\u202eevil", "x\ry", "Ascend910B2", "ok.name-1"]),
)
NAME_DOORS = ["result-op", "result-chip", "tree-op", "tree-file-chip", "events-chip"]
_CONTROLS = {chr(c) for c in (*range(32), *range(127, 160))} - {"\n"}


def _door_input(door: str, name: str, folder: Path) -> list[str]:
    """The import arguments that bring ``name`` in through ``door``."""
    from fixtures.aoe_banks import entry

    rng = random.Random(28)
    if door.startswith("result"):
        op_type = name if door == "result-op" else "Conv2D"
        chip = name if door == "result-chip" else "Ascend310"
        report = [{"basic": {"tuning_name": "t"}}, {"OPAT": {
            "opat_tuning_result": "tuning successful", "repo_modified_operators": [{
                "op_name": "n", "op_type": op_type, "tune_performance": {"Schedule": {
                    "performance_after_tune(us)": 5, "performance_before_tune(us)": 10,
                    "performance_improvement": "100.00%", "update_mode": "add"}}}],
            "repo_summary": {"repo_add_num": 1, "repo_hit_num": 0, "repo_reserved_num": 0,
                             "repo_unsatisfied_num": 0, "repo_update_num": 0, "total_num": 1}}}]
        path = _write(folder, "result.json", json.dumps(report).encode())
        return ["import", str(path), "--soc-version", chip, "--allow-unknown-soc"]
    if door.startswith("tree"):
        line = entry(rng, 1, 24, op=name if door == "tree-op" else "MatMulV3")
        chip = name if door == "tree-file-chip" else "Ascend910B2"
        tree = folder / "tree" / "unified_bank"
        tree.mkdir(parents=True)
        _write(tree, f"{chip}_24_AiCore_MatMulV3_runtime_kb.json", (json.dumps(line) + "\n").encode())
        return ["import", str(folder / "tree")]
    from tunebank.bank.events import Event, EventKind, StoredEvent, format_time, utc_now

    event = Event.of(EventKind.TASK_STARTED, name or "x", "t" * 16, format_time(utc_now()),
                     "bank:hostile", {"job_type": "opat", "tuning_name": "t"})
    link = event.link_hash("0" * 64, 1)
    with (folder / "events.jsonl").open("w", encoding="utf-8") as handle:
        stored = StoredEvent(1, event.event_id, event, "0" * 64, link)
        write_event_rows(handle, [event_values(stored)], "hostile")
    return ["import", str(folder / "events.jsonl")]


@fuzz(40)
@given(name=HOSTILE_NAMES, door=st.sampled_from(NAME_DOORS))
def test_names_from_every_door(name: str, door: str, base_bank: Path, scratch: Path) -> None:
    """Whatever name comes in, by whichever door: no traceback, a refusal leaves the bank as
    it was, no control character reaches the terminal, and an export of what got in writes
    inside --out only."""
    from hypothesis import assume

    assume(door != "tree-file-chip" or ("/" not in name and "\x00" not in name and name not in ("", ".", "..")
                                        and len(name.encode()) < 200))
    bank = fresh_copy(base_bank, scratch)
    folder = bank.parent
    args = _door_input(door, name, folder)
    result = refused_or_sound([*args, "--db", str(bank)], bank)
    outputs = [result.stdout, result.stderr]
    if result.exit_code == 0:
        out = folder / "out"
        before = {p for p in scratch.rglob("*") if out not in p.parents}
        for command in (["export", "--format", "aoe-repo", "--out", str(out), "--core-num", "8"],
                        ["query"], ["tasks"], ["history", "--op-type", name or "x"]):
            ran = runner.invoke(app, [*command, "--db", str(bank)])
            assert ran.exception is None or isinstance(ran.exception, SystemExit), ran.exception
            outputs += [ran.stdout, ran.stderr]
        assert {p for p in scratch.rglob("*") if out not in p.parents and p != out} <= before | {out}
        assert all(os.path.realpath(p).startswith(os.path.realpath(out)) for p in out.rglob("*"))
    for text in outputs:
        assert not _CONTROLS & set(text), repr(text)


# -- what narrows a tune --------------------------------------------------------------------------

TUNING_CONFIG = {"ops_to_tune": ["Conv_0", "fire2/squeeze1x1_1"],
                 "tiling_range": {"block_m": [16, 32], "block_n": [16], "block_k": [32]},
                 "impl_options": ["cube", "vector"]}


@fuzz(25)
@given(config=mutated_json(TUNING_CONFIG))
def test_hostile_tuning_configs(config: object, base_bank: Path, scratch: Path) -> None:
    bank = fresh_copy(base_bank, scratch)
    path = _write(bank.parent, "config.json", dumps(config))
    refused_or_sound(["tune", str(SQUEEZENET), *CHIP, "--db", str(bank), "--budget", "1",
                      "--tuning-config", str(path), "--progress-bar", "off"], bank)


@pytest.mark.parametrize(("config", "message"), [  # found by `pytest -m fuzz`
    ({"impl_options": [["cube"]]}, "impl_options must be a non-empty list of"),
    ({"tiling_range": {"block_m": [10**400]}}, "non-negative integers below 2^31"),
])
def test_tuning_configs_that_once_gave_a_traceback(config: object, message: str, base_bank: Path,
                                                   scratch: Path) -> None:
    bank = fresh_copy(base_bank, scratch)
    path = _write(bank.parent, "config.json", dumps(config))
    result = refused_or_sound(["tune", str(SQUEEZENET), *CHIP, "--db", str(bank), "--budget", "1",
                               "--tuning-config", str(path), "--progress-bar", "off"], bank)
    assert result.exit_code == 1 and message in result.stderr, result.stderr


@fuzz(20)
@given(ops=mutated_json({"tune_ops_name": ["Conv_0"], "tune_ops_type": ["Relu", "Concat"]}))
def test_hostile_tune_ops_files(ops: object, base_bank: Path, scratch: Path) -> None:
    bank = fresh_copy(base_bank, scratch)
    path = _write(bank.parent, "ops.json", dumps(ops))
    refused_or_sound(["tune", str(SQUEEZENET), *CHIP, "--db", str(bank), "--budget", "1",
                      "--tune-ops-file", str(path), "--progress-bar", "off"], bank)


@fuzz(60)
@given(shape=st.one_of(st.text(alphabet="data_0:,;-1234 x\t\n", max_size=30),
                       st.builds("data_0:{}".format, st.text(alphabet="0123456789,-", max_size=16)),
                       st.text(max_size=20)))
def test_hostile_input_shapes(shape: str, base_bank: Path, scratch: Path) -> None:
    bank = fresh_copy(base_bank, scratch)
    refused_or_sound(["plan", str(SQUEEZENET), *CHIP, "--db", str(bank), "--input-shape", shape], bank)


# -- ONNX models ----------------------------------------------------------------------------------

@fuzz(40)
@given(data=st.data())
def test_mutated_models(base_bank: Path, scratch: Path, data: st.DataObject) -> None:
    model = SQUEEZENET.read_bytes()
    how = data.draw(st.sampled_from(["truncate", "bytes", "random"]))
    if how == "truncate":
        body = model[:data.draw(st.integers(0, len(model) - 1))]
    elif how == "random":
        body = data.draw(st.binary(max_size=4096))
    else:
        out = bytearray(model)
        for where, byte in data.draw(st.lists(st.tuples(st.integers(0, len(model) - 1),
                                                        st.integers(0, 255)), min_size=1, max_size=8)):
            out[where] = byte
        body = bytes(out)
    bank = fresh_copy(base_bank, scratch)
    path = _write(bank.parent, "model.onnx", body)
    refused_or_sound(["plan", str(path), *CHIP, "--db", str(bank)], bank)


def _model(nodes: list[onnx.NodeProto], inputs: list[onnx.ValueInfoProto],
           outputs: list[onnx.ValueInfoProto]) -> bytes:
    graph = helper.make_graph(nodes, "hostile", inputs, outputs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


FLOAT = TensorProto.FLOAT
MODELS = {
    "a cycle": (_model([helper.make_node("Relu", ["b"], ["a"], name="r1"),
                        helper.make_node("Relu", ["a"], ["b"], name="r2")],
                       [helper.make_tensor_value_info("x", FLOAT, [1, 4])],
                       [helper.make_tensor_value_info("a", FLOAT, [1, 4])]), 1, "shape"),
    "a missing shape": (_model([helper.make_node("Relu", ["x"], ["y"], name="r")],
                               [helper.make_tensor_value_info("x", FLOAT, ["N", 4])],
                               [helper.make_tensor_value_info("y", FLOAT, ["N", 4])]),
                        1, "input 'x' has a dynamic or missing dimension; give it with --input-shape"),
    "no nodes": (_model([], [helper.make_tensor_value_info("x", FLOAT, [1, 4])],
                        [helper.make_tensor_value_info("x", FLOAT, [1, 4])]), 1,
                 "the model's graph has no operators; there is nothing to tune"),
    "0 bytes": (b"", 1, "is empty (0 bytes), not an ONNX model"),
    "an input name that is not UTF-8": (_model(
        [helper.make_node("Relu", ["x"], ["y"], name="r")],
        [helper.make_tensor_value_info("x", FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", FLOAT, [1, 4])]).replace(b"\x0a\x01x\x12", b"\x0a\x01\xff\x12"),
        1, "a graph input is not valid UTF-8 text"),
    "a node name that is not UTF-8": (_model(
        [helper.make_node("Relu", ["x"], ["y"], name="rr")],
        [helper.make_tensor_value_info("x", FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", FLOAT, [1, 4])]).replace(b"rr", b"r\xc3"),
        1, "node 0's name is not valid UTF-8 text"),
    "an unknown operator": (_model([helper.make_node("NoSuchOp", ["x"], ["y"], name="n")],
                                   [helper.make_tensor_value_info("x", FLOAT, [1, 4])],
                                   [helper.make_tensor_value_info("y", FLOAT, [1, 4])]),
                            0, "Not tunable (no search space, not counted): NoSuchOp x1"),
    "not ONNX": (b"\x00\x01 this is not a protobuf " * 40, 1, "not an ONNX model"),
}
"""Each case: the model, the exit code of `tune` and what it must print (stderr on failure)."""


@pytest.mark.parametrize("case", sorted(MODELS))
def test_broken_models(case: str, base_bank: Path, scratch: Path) -> None:
    body, code, text = MODELS[case]
    bank = fresh_copy(base_bank, scratch)
    path = _write(bank.parent, "model.onnx", body)
    plan = refused_or_sound(["plan", str(path), *CHIP, "--db", str(bank)], bank)
    tune = refused_or_sound(["tune", str(path), *CHIP, "--db", str(bank), "--budget", "1",
                             "--progress-bar", "off"], bank)
    assert plan.exit_code == tune.exit_code == code, (plan.output, tune.output)
    assert text in (tune.stderr if code else tune.stdout + plan.stdout), tune.output


# -- big files, folders, banks that are not banks -------------------------------------------------

def test_a_50_mb_file_wherever_a_file_goes(base_bank: Path, scratch: Path) -> None:
    bank = fresh_copy(base_bank, scratch)
    junk = _write(bank.parent, "aoe_result_opat_junk.json", random.Random(7).randbytes(50 * 2**20))
    big_json = _write(bank.parent, "big.json", b"[" + b"0," * (25 * 2**20) + b"0]")
    runs = [
        ["import", str(junk), *CHIP], ["import", str(big_json), *CHIP],
        ["tune", str(junk), *CHIP], ["tune", str(SQUEEZENET), *CHIP, "--tuning-config", str(big_json)],
        ["tune", str(SQUEEZENET), *CHIP, "--load-tuning-result", str(junk)],
    ]
    for args in runs:
        result = refused_or_sound([*args, "--db", str(bank)], bank)
        assert result.exit_code == 1, args


@pytest.mark.parametrize("option", ["--tuning-config", "--tune-ops-file", "--load-tuning-result"])
def test_a_folder_given_as_a_file(option: str, base_bank: Path, scratch: Path) -> None:
    bank = fresh_copy(base_bank, scratch)
    result = refused_or_sound(["tune", str(SQUEEZENET), *CHIP, option, str(bank.parent),
                               "--db", str(bank)], bank)
    assert result.exit_code == 2 and "is a directory" in result.stderr
    empty = bank.parent / "empty-folder"
    empty.mkdir()
    result = refused_or_sound(["import", str(empty), "--db", str(bank)], bank)
    assert result.exit_code == 1 and "no bank files" in result.stderr
    empty.rmdir()


@pytest.mark.parametrize(("content", "message"), [
    (b"", "an empty database, not a bank yet; `bank init` with the same --db makes one"),
    (b"SQLite format 3\x00" + b"\xff" * 200, "file is not a database"),
    (random.Random(3).randbytes(8192), "file is not a database"),
    (b"just some text\n", "file is not a database"),
])
def test_a_bank_file_that_is_not_a_bank(content: bytes, message: str, tmp_path: Path) -> None:
    bank = tmp_path / "bank.db"
    bank.write_bytes(content)
    writes = [["init"], ["tune", str(SQUEEZENET), *CHIP, "--budget", "1"],
              ["import", str(AOE / "aoe_result_opat_20240315143005123_4711.json"), *CHIP]]
    for args in [["tasks"], ["verify"], ["query", "--json"], ["export", "--format", "jsonl"],
                 *(writes if content else [])]:  # an empty file is an empty SQLite database
        result = refused_or_sound([*args, "--db", str(bank)], bank)
        assert result.exit_code == 1 and message in result.stderr, (args, result.stderr)


def test_an_sqlite_database_of_something_else_gets_no_bank(tmp_path: Path) -> None:
    import sqlite3

    bank = tmp_path / "other.db"
    with sqlite3.connect(bank) as conn:
        conn.execute("CREATE TABLE customers (name TEXT)")
    result = refused_or_sound(["import", str(AOE / "aoe_result_opat_20240315143005123_4711.json"),
                               *CHIP, "--db", str(bank)], bank)
    assert result.exit_code == 1
    assert "an SQLite database of something else (tables: customers); no bank is made in it" \
        in result.stderr


@pytest.mark.parametrize(("url", "message"), [
    ("postgresql://tunebank@127.0.0.1:1/none", "Connection refused"),
    ("postgresql://tunebank@127.0.0.1:notaport/none", "not a valid database URL"),
    ("mysql://u@h/db", "database scheme 'mysql' is not supported"),
])
def test_a_database_url_that_leads_nowhere(url: str, message: str) -> None:
    for args in (["tasks"], ["import", str(AOE / "aoe_result_opat_20240315143005123_4711.json"), *CHIP]):
        result = runner.invoke(app, [*args, "--db", url])
        assert result.exit_code == 1, result.output
        (line,) = result.stderr.splitlines()
        assert line.startswith("bank: error: ") and message in line


def _as_another_user(commands: list[list[str]], bank: Path, out: Path) -> list[dict[str, object]]:
    """Run the commands as a user who may read the bank but not write it, and say what each
    did. As root that is `nobody` in a forked child (every import done first, since the child
    cannot read root's files); otherwise the write permission bits are taken away."""
    import os

    def run_all() -> list[dict[str, object]]:
        done = []
        for args in commands:
            before = hashlib.sha256(bank.read_bytes()).hexdigest()
            result = runner.invoke(app, [*args, "--db", str(bank)])
            done.append({"args": args, "code": result.exit_code, "stderr": result.stderr,
                         "traceback": not isinstance(result.exception, SystemExit | None),
                         "unchanged": hashlib.sha256(bank.read_bytes()).hexdigest() == before})
        return done

    if os.geteuid() != 0:
        bank.chmod(0o444)
        bank.parent.chmod(0o555)
        try:
            return run_all()
        finally:
            bank.parent.chmod(0o755)
            bank.chmod(0o644)
    warm = bank.parent.parent / "warm.db"
    shutil.copyfile(bank, warm)
    for args in commands:  # as root, on a copy: every module the commands need gets imported
        runner.invoke(app, [*args, "--db", str(warm)])
    pid = os.fork()
    if pid == 0:
        try:
            os.setgid(65534)
            os.setuid(65534)
            out.write_text(json.dumps(run_all()))
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    return list(json.loads(out.read_text()))


def test_a_read_only_bank_reads_and_refuses_writes_in_one_line(base_bank: Path) -> None:
    import os
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="tunebank-ro-"))  # outside pytest's root-only folders
    try:
        shared = folder / "shared"
        shared.mkdir()
        bank = shared / "bank.db"
        shutil.copyfile(base_bank, bank)
        inputs = folder / "inputs"
        inputs.mkdir()
        result_file = shutil.copy(AOE / "aoe_result_sgat_20240314101010101_4714.json", inputs)
        model = shutil.copy(SQUEEZENET, inputs)
        report = folder / "report.json"
        for path in (folder, inputs, shared):
            path.chmod(0o755)
        if os.geteuid() == 0:
            report.touch()
            os.chown(report, 65534, 65534)
        reads = [["tasks"], ["query", "--json"], ["verify"], ["events", "--json"],
                 ["history", "--op-type", "Conv"]]
        writes = [["import", result_file, *CHIP], ["tune", model, *CHIP, "--budget", "1"],
                  ["rebuild"], ["upgrade"], ["init"]]
        done = _as_another_user(reads + writes, bank, report)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    for run in done:
        assert not run["traceback"] and run["unchanged"], run
    for run in done[:len(reads)]:
        assert run["code"] == 0, run
    for run in done[len(reads):]:
        assert run["code"] == 1, run
        (line,) = str(run["stderr"]).splitlines()
        assert "read-only for this user (it can be read, not changed)" in line, run


# -- the doors of issue 29: plug-in answers, campaign files, model shapes -------------------------

@fuzz(200)
@given(answer=st.one_of(
    HOSTILE_VALUES,
    st.lists(st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-10, 10**12)),
             max_size=6),
    st.builds(lambda n, v: np.full(n, v), st.integers(0, 6),
              st.floats(allow_nan=True, allow_infinity=True)),
    st.builds(lambda n: np.zeros((n, 2)), st.integers(0, 3)),
    st.just(np.array(["1.0", "2.0", "3.0"])), st.just(np.array([object()] * 3))))
def test_whatever_a_backend_answers_is_checked_times_or_one_refusal(answer: object) -> None:
    """tuner/measure/plugins.py's boundary: three candidates, any answer. Either three times, each a
    plausible positive time or inf, or MeasurementFailed: never another exception, never a
    bad value let through."""
    from tunebank.tuner.measure.backend import MeasurementFailed
    from tunebank.tuner.measure.plugins import MAX_US, MIN_US, checked_times

    try:
        times = checked_times(answer, 3, "backend 'x' measuring key 1 on Ascend310")
    except MeasurementFailed as exc:
        assert str(exc).startswith("backend 'x' measuring key 1 on Ascend310: returned")
        return
    assert times.dtype == np.float64 and times.shape == (3,)
    assert all(t == np.inf or MIN_US <= t <= MAX_US for t in times)


class TomlText(str):
    """A value written into a campaign file as it is: what JSON cannot spell (an integer of
    5,000 digits, which Python will not even turn into text, ``inf``, ``nan``)."""


CAMPAIGN_TEXT = '''chips = ["Ascend310"]
budget = 4
seed = 1

[[models]]
path = "squeezenet.onnx"
'''


@fuzz(40)
@given(field=st.sampled_from(["budget", "seed", "noise", "run_loop", "measure_timeout_s", "mode",
                              "backend", "chips", "retune", "transfer"]),
       value=st.one_of(st.integers(-(2**70), 2**70), st.floats(allow_nan=False),
                       st.text(max_size=20), st.booleans(), st.lists(st.integers(), max_size=3),
                       st.builds(lambda sign, n: TomlText(sign + "9" * n), st.sampled_from(["", "-"]),
                                 st.integers(4000, 6000)),
                       st.sampled_from([TomlText(t) for t in ("inf", "-inf", "nan", "1e400",
                                                              "0x" + "f" * 4000)])))
def test_hostile_campaign_values(field: str, value: object, scratch: Path) -> None:
    """Any value for any field of a campaign file: a tune, or one line naming the file and the
    field, and no bank. (A tune that runs is kept short: budget and chips stay small.)"""
    import uuid

    folder = scratch / uuid.uuid4().hex[:12]
    folder.mkdir()
    shutil.copyfile(SQUEEZENET, folder / "squeezenet.onnx")
    lines = [line for line in CAMPAIGN_TEXT.splitlines() if not line.startswith(f"{field} =")]
    lines.insert(0, f"{field} = {value if isinstance(value, TomlText) else json.dumps(value)}")
    (folder / "c.toml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    if field in ("budget", "run_loop") and isinstance(value, int) and not isinstance(value, bool) \
            and value > 4:
        return  # in bounds but long to run: the bounds themselves are tested above
    bank = folder / "b.db"
    result = runner.invoke(app, ["tune", "--campaign", str(folder / "c.toml"), "--db", str(bank),
                                 "-q"])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    if result.exit_code != 0:
        (line,) = result.stderr.strip().splitlines()
        assert line.startswith("bank: error: ") and "c.toml" in line, line
        assert not bank.exists()


@fuzz(40)
@given(kernel=st.integers(1, 10**6), stride=st.integers(1, 64), pad=st.integers(0, 64),
       size=st.integers(1, 64))
def test_conv_shapes_are_positive_or_refused(kernel: int, stride: int, pad: int, size: int,
                                             scratch: Path) -> None:
    """A Conv of any kernel, stride and padding: loaded with every shape positive, or refused
    naming the operator."""
    import uuid

    from tunebank.tuner.model.reading import ModelError, load_model

    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["y"], name="c", strides=[stride, stride],
                          pads=[pad] * 4)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, size, size]),
         helper.make_tensor_value_info("w", TensorProto.FLOAT, [4, 3, kernel, kernel])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    path = scratch / f"{uuid.uuid4().hex[:12]}.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    try:
        model = load_model(path)
    except ModelError as exc:
        assert "operator 'c' (Conv)" in str(exc) or "shape inference failed" in str(exc), exc
        return
    assert all(d > 0 for op in model.operators for t in op.outputs for d in t.shape)
