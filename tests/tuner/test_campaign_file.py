"""`bank tune --campaign FILE`: a campaign run again as it was written down."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tunebank.cli.main import app

runner = CliRunner()
MODELS = Path(__file__).resolve().parents[2] / "fixtures" / "models"

CAMPAIGN = '''
chips = ["Ascend310", "Ascend910B2"]
budget = 8
seed = 4
transfer = false

[[models]]
path = "models/squeezenet.onnx"

[[models]]
path = "models/inception_v1.onnx"
tune_ops_file = "ops.json"
'''


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A campaign's folder: its file, its models (relative paths) and an ops file."""
    (tmp_path / "models").mkdir()
    for name in ("squeezenet.onnx", "inception_v1.onnx"):
        shutil.copyfile(MODELS / name, tmp_path / "models" / name)
    (tmp_path / "ops.json").write_text(json.dumps({"tune_ops_type": ["Conv"]}), encoding="utf-8")
    (tmp_path / "c.toml").write_text(CAMPAIGN, encoding="utf-8")
    return tmp_path


def test_a_campaign_file_runs_its_models_chips_and_settings(folder: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(folder)
    result = runner.invoke(app, ["tune", "--campaign", "c.toml", "--db", "b.db", "--json"])
    assert result.exit_code == 0, result.output
    reports = json.loads(result.stdout)
    assert [r["soc_version"] for r in reports] == ["Ascend310"] * 2 + ["Ascend910B2"] * 2
    with sqlite3.connect(folder / "b.db") as conn:
        started = [json.loads(p) for p, in conn.execute(
            "SELECT payload FROM events WHERE kind = 'task_started' ORDER BY seq")]
        types = {row[0] for row in conn.execute(
            "SELECT DISTINCT op_type FROM events WHERE task_id = ? AND repo_key IS NOT NULL",
            (reports[1]["task_id"],))}
    assert {(s["seed"], s["budget"], s["transfer"]) for s in started} == {(4, 8, False)}
    assert len({s["campaign"].split("/")[0] for s in started}) == 1  # one campaign, four places
    assert types == {"Conv"}  # inception_v1's ops file: only its convolutions
    again = runner.invoke(app, ["tune", "--campaign", "c.toml", "--db", "b.db", "--reload"])
    assert again.exit_code == 0, again.output
    assert again.stdout.count("finished before; not run again") == 4


@pytest.mark.parametrize(("edit", "args", "message"), [
    (("budget = 8", "bugdet = 8"), [], "c.toml: unknown field 'bugdet'"),
    (("budget = 8", 'budget = "8"'), [], "c.toml: budget: must be an integer, not '8'"),
    (("seed = 4", "seed = true"), [], "c.toml: seed: must be an integer, not True"),
    (('chips = ["Ascend310", "Ascend910B2"]', "chips = []"), [],
     "c.toml: chips: must be a non-empty list"),
    (("models/squeezenet.onnx", "models/nope.onnx"), [],
     "c.toml: models[0].path: models/nope.onnx: no such file"),
    (('tune_ops_file = "ops.json"', 'input_shapes = "data_0"'), [],
     "c.toml: models[1].input_shapes:"),
    (("[[models]]", "[[model]]"), [], "c.toml: unknown field 'model'"),
    (("seed = 4", "seed = 4 ="), [], "c.toml: not TOML"),
    (("", ""), ["--seed", "5"], "--seed: 5 differs from 4, which --campaign"),
    (("", ""), ["--soc-version", "Ascend310"], "--campaign: c.toml names the models and chips"),
    # issue 29: each value checked as the CLI's are, naming the file and the field
    (("budget = 8", "budget = -5"), [], "c.toml: budget: -5 is out of bounds: must be between 1 and"),
    (("budget = 8", "budget = 9223372036854775807"), [], "c.toml: budget: 9223372036854775807 is out"),
    (("seed = 4", "seed = -1"), [], "c.toml: seed: -1 is out of bounds"),
    (("seed = 4", "seed = 4\nnoise = 1.5"), [], "c.toml: noise: 1.5 is out of bounds"),
    (("seed = 4", "seed = 4\nrun_loop = 0"), [], "c.toml: run_loop: 0 is out of bounds"),
    (("seed = 4", "seed = 4\nmeasure_timeout_s = 0"), [], "c.toml: measure_timeout_s: 0 is out"),
    (("seed = 4", 'seed = 4\nmode = "annealing"'), [],
     "c.toml: mode: unknown mode 'annealing'; choose one of"),
    (("seed = 4", 'seed = 4\nbackend = "tpu"'), [], "c.toml: backend: no measurement backend 'tpu'"),
    (('"Ascend910B2"]', '"ascend910b2"]'), [], "c.toml: chips[1]: no chip is named 'ascend910b2'"),
    (("seed = 4", "seed = 4\ndeep = " + "[" * 500 + "]" * 500), [], "c.toml: arrays or tables nested"),
    (("models/squeezenet.onnx", "x" * 300 + ".onnx"), [], "c.toml: models[0].path: 'xxxxx"),
    (('tune_ops_file = "ops.json"', 'input_shapes = "data_0:1,' + "9" * 400 + '"'), [],
     "c.toml: models[1].input_shapes: --input-shape: 'data_0:1,999"),
    # issue 41: an integer past Python's 4,300 digits was a ValueError traceback; a path that
    # exists but is no file was "no such file"
    (("budget = 8", "budget = " + "9" * 5000), [], "c.toml: a value cannot be read (Exceeds the"),
    (("seed = 4", "seed = " + "9" * 4000), [], "c.toml: seed: an integer of about 4001 digits is out"),
    (("models/squeezenet.onnx", "models"), [], "c.toml: models[0].path: models: is a folder, not"),
    (("models/squeezenet.onnx", "/dev/zero"), [],
     "c.toml: models[0].path: /dev/zero: not a regular file (a device, a pipe or a socket)"),
    (("models/squeezenet.onnx", "fifo.onnx"), [], "fifo.onnx: not a regular file (a device, a pipe"),
    # issue 42: an aicore_num one of the file's chips does not have, named as the file's field
    (("seed = 4", "seed = 4\naicore_num = 16"), [],
     "--campaign: c.toml: aicore_num: 16 is not between 1 and Ascend310's 2 AI cores"),
])
def test_a_bad_campaign_file_is_one_line_naming_the_field_and_writes_nothing(
        folder: Path, monkeypatch: pytest.MonkeyPatch, edit: tuple[str, str], args: list[str],
        message: str) -> None:
    monkeypatch.chdir(folder)
    os.mkfifo(folder / "fifo.onnx")
    text = (folder / "c.toml").read_text(encoding="utf-8")
    (folder / "c.toml").write_text(text.replace(*edit, 1) if edit[0] else text, encoding="utf-8")
    result = runner.invoke(app, ["tune", "--campaign", "c.toml", "--db", "b.db", *args])
    assert result.exit_code == 1, result.output
    assert result.stderr.strip().splitlines() == [result.stderr.strip()]
    assert message in result.stderr
    assert not (folder / "b.db").exists()
