"""`bank tune` and `bank socs` through typer's CliRunner."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tunebank.cli.main import app

runner = CliRunner()
MODEL = str(Path(__file__).resolve().parents[2] / "fixtures" / "models" / "vgg19.onnx")


def test_tune_json_has_the_promised_fields(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["tune", MODEL, "--soc-version", "Ascend310", "--db", "b.db",
                                 "--budget", "32", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    for field in ("task_id", "repo_summary", "opat_tuning_result", "measurements",
                  "model_baseline_ms", "model_result_ms", "result_file"):
        assert field in report
    assert report["opat_tuning_result"] == "tuning successful"
    assert Path(report["result_file"]).parent == tmp_path
    assert report["not_tunable"] == {"ConstantOfShape": 36}
    summary = runner.invoke(app, ["summary", report["task_id"], "--db", "b.db", "--json"])
    assert json.loads(summary.stdout) == report["repo_summary"]


def test_result_files_go_to_ascend_work_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """AOE's rule: $ASCEND_WORK_PATH, else the working folder; the bank is not affected."""
    monkeypatch.setenv("ASCEND_WORK_PATH", str(tmp_path / "work"))
    (tmp_path / "work").mkdir()
    result = runner.invoke(app, ["tune", MODEL, "--soc-version", "Ascend310", "--db",
                                 str(tmp_path / "b.db"), "--budget", "8", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert Path(report["result_file"]).parent == tmp_path / "work"
    assert Path(report["tuning_result_file"]) == tmp_path / "work" / "tuning_result.json"
    assert not list(Path.cwd().iterdir())


def test_tune_prints_progress_and_closing_lines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["tune", MODEL, "--soc-version", "Ascend310", "--db", "b.db",
                                 "--budget", "64", "--mode", "ga"])
    assert result.exit_code == 0, result.output
    lines = result.stderr.splitlines()  # not a terminal: a first line, then one per quarter
    assert lines[0] == "vgg19 on Ascend310: 0 key(s) known or already recorded; searching 26"
    assert len(lines) == 5
    spent = int(next(line for line in result.stdout.splitlines()
                     if line.startswith("measurements: ")).split()[1])
    assert lines[-1].startswith(f"[{'#' * 30}] 26/26 keys, {spent:,} measurements, best gain ")
    assert "Performance improved by" in result.stdout
    for off in (["--progress-bar", "off"], ["--quiet"], ["-q"]):
        quiet = runner.invoke(app, ["tune", MODEL, "--soc-version", "Ascend310", "--db", "b.db", *off])
        assert quiet.stderr == ""
        assert "Performance improved by 0.00%" in quiet.stdout


def test_on_a_terminal_the_bar_fits_the_width_and_shows_the_facts() -> None:
    """rich draws the bar (tests/cli/test_progress_terminal.py counts the rows it leaves in a
    real terminal); here, what one finished bar says, 100 columns wide."""
    import io

    from tunebank.bank import EventKind, Outcome
    from tunebank.cli.progress import TuneProgress

    out = io.StringIO()
    progress = TuneProgress(out, interactive=True, width=100)
    progress.task_begins("m\x1b[2J on A, task 2/3")  # a name with a terminal's command in it
    progress.start(4, 1)
    for n in range(4):
        progress.key_done(n + 1, 4, None, Outcome(  # type: ignore[arg-type]
            EventKind.ADD, str(n), performance_before_us=10.0, performance_after_us=10.0 - n,
            extra={"measurements": 8}))
    text = out.getvalue()
    assert text.startswith("m\\x1b[2J on A, task 2/3: 1 key(s) known or already recorded; searching 4\n")
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text)
    last = [line for line in re.split(r"[\r\n]", plain) if line.strip()][-1]
    assert "4/4 keys" in last and "32 measurements, best gain 30.0%" in last and len(last) <= 100


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--soc-version", "Ascend999"], "unknown soc_version 'Ascend999'; known: Ascend310"),
        (["--soc-version", "Ascend310", "--input-shape", "data_0"], "--input-shape: 'data_0' is not"),
        (["--soc-version", "Ascend310", "--reload"], "--reload: no unfinished task"),
    ],
)
def test_tune_errors_are_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    result = runner.invoke(app, ["tune", MODEL, "--db", str(tmp_path / "b.db"), *args])
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines() == [f"bank: error: {result.stderr.split('error: ')[1].strip()}"]
    assert message in result.stderr


def test_missing_model_is_a_usage_error(tmp_path: Path) -> None:
    result = runner.invoke(app, ["tune", str(tmp_path / "no.onnx"), "--soc-version", "Ascend310"])
    assert result.exit_code == 2
    assert "does not exist" in result.output


def test_socs_lists_every_chip_with_estimates_marked() -> None:
    result = runner.invoke(app, ["socs", "--json"])
    chips = {c["soc_version"]: c for c in json.loads(result.stdout)}
    assert set(chips) == {"Ascend310", "Ascend310P3", "Ascend910A", "Ascend910B2", "Ascend910B1",
                          "Ascend910B2C", "Ascend910B3", "Ascend910B4", "Ascend910_9372",
                          "Ascend910_9381", "Ascend910_9382", "Ascend910_9391", "Ascend910_9392"}
    # issue 42: every chip CANN ships a MatMulV3 bank for, its AI cores from those banks' names
    assert (chips["Ascend910B3"]["ai_cores"], chips["Ascend910_9382"]["ai_cores"]) == (20, 24)
    assert "freq_ghz" in chips["Ascend910B3"]["estimates"] and \
        "ai_cores" not in chips["Ascend910B3"]["estimates"]
    assert chips["Ascend910B2"]["ai_cores"] == 24 and "ai_cores" not in chips["Ascend910B2"]["estimates"]
    table = runner.invoke(app, ["socs"])
    assert "Ascend910B2" in table.stdout
    rows = {line.split()[0]: line.split() for line in table.stdout.splitlines()}
    assert rows["Ascend910B2"][1:3] == ["24", "48"]  # published: no mark
    assert rows["Ascend910B2"][9] == "1600*"  # GM bandwidth: an estimate, marked
    assert table.stdout.splitlines()[-1].startswith("* an estimate")


def test_plan_before_and_after_a_tune(tmp_path: Path) -> None:
    db = str(tmp_path / "b.db")
    runner.invoke(app, ["init", "--db", db])
    before = json.loads(runner.invoke(app, ["plan", MODEL, "--soc-version", "Ascend310", "--db", db,
                                            "--json"]).stdout)
    assert {k["status"] for k in before} == {"new"} and len(before) == 26
    runner.invoke(app, ["tune", MODEL, "--soc-version", "Ascend310", "--db", db, "--budget", "16",
                        "--progress-bar", "off"], catch_exceptions=False)
    after = runner.invoke(app, ["plan", MODEL, "--soc-version", "Ascend310", "--db", db])
    assert after.exit_code == 0
    assert after.stdout.strip().splitlines()[-1].startswith("26 keys: 26 known to the bank, 0 to tune")


def test_plan_names_the_nearest_known_keys_and_history_what_was_borrowed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from fixtures.model_versions import dilated

    monkeypatch.chdir(tmp_path)
    resnet = Path(__file__).resolve().parents[2] / "fixtures" / "models" / "resnet50.onnx"
    dilated(resnet, tmp_path / "v2.onnx")
    chip = ["--soc-version", "Ascend310", "--db", "b.db"]
    first = runner.invoke(app, ["tune", str(resnet), *chip, "--budget", "16", "--json"])
    assert first.exit_code == 0, first.output
    planned = json.loads(runner.invoke(app, ["plan", "v2.onnx", *chip, "--json"]).stdout)
    new = [k for k in planned if k["status"] == "new"]
    assert len(new) == 7 and all(k["nearest"][0]["distance"] == 1.0 for k in new)  # dilation only
    shown = runner.invoke(app, ["plan", "v2.onnx", *chip])
    assert f"{new[0]['nearest'][0]['repo_key']} (1)" in shown.stdout
    second = json.loads(runner.invoke(app, ["tune", "v2.onnx", *chip, "--budget", "16",
                                            "--json"]).stdout)
    history = runner.invoke(app, ["history", "--repo-key", new[0]["repo_key"], "--db", "b.db"])
    first_task = json.loads(first.stdout)["task_id"]
    from tunebank.tuner.search.transfer import SAME_CHIP_NEIGHBOURS

    nearest = new[0]["nearest"][0]["repo_key"]
    assert f"{nearest} of {first_task} (1.0) +{SAME_CHIP_NEIGHBOURS - 1}" in history.stdout
    assert second["task_id"] in history.stdout
    # what plan names is what a tune borrows: its own chip's only, never another's
    other = json.loads(runner.invoke(app, ["plan", "v2.onnx", "--soc-version", "Ascend910B2",
                                           "--db", "b.db", "--json"]).stdout)
    assert other and all(k["nearest"] == [] for k in other)


@pytest.mark.parametrize(("option", "value", "message"), [
    ("--seed", "-1", "--seed: -1 is out of bounds: must be between 0 and"),
    ("--budget", str(2**63), "--budget: 9223372036854775808 is out of bounds"),
    ("--noise", "1.5", "--noise: 1.5 is out of bounds"),
    ("--run-loop", "0", "--run-loop: 0 is out of bounds"),
    ("--measure-timeout", "0", "--measure-timeout: 0 is out of bounds"),
    ("--input-shape", "data_0:1," + "9" * 400, "--input-shape: 'data_0:1,999"),
])
def test_an_option_out_of_bounds_is_refused_before_the_bank_is_touched(
        option: str, value: str, message: str, tmp_path: Path) -> None:
    """Issue 29: `--seed -1` failed after the bank was made and task_started written."""
    db = tmp_path / "b.db"
    model = str(Path(__file__).resolve().parents[2] / "fixtures" / "models" / "squeezenet.onnx")
    result = CliRunner().invoke(app, ["tune", model, "--soc-version", "Ascend310", "--db", str(db),
                                      option, value])
    assert result.exit_code == 1, result.output
    (line,) = result.stderr.strip().splitlines()
    assert message in line, line
    assert not db.exists()


def test_a_second_tune_in_one_folder_keeps_the_first_tuning_result(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 31: two tunes started in one folder overwrote one tuning_result.json without a
    word; their AOE result files were distinct."""
    monkeypatch.chdir(tmp_path)
    args = ["tune", MODEL, "--soc-version", "Ascend310", "--db", "b.db", "--budget", "8", "--json"]
    first = json.loads(runner.invoke(app, args).stdout)
    kept = (tmp_path / "tuning_result.json").read_bytes()
    assert Path(first["tuning_result_file"]) == tmp_path / "tuning_result.json"
    again = runner.invoke(app, [*args[:-1], "--retune", "--json"])
    second = json.loads(again.stdout)
    own = Path(second["tuning_result_file"])
    assert own != tmp_path / "tuning_result.json" and own.parent == tmp_path and own.is_file()
    assert own.name.startswith("tuning_result_") and json.loads(own.read_text())["op_tuning"]
    assert (tmp_path / "tuning_result.json").read_bytes() == kept
    assert any("tuning_result.json was there already" in n for n in second["notices"])


def test_with_output_the_tuning_result_lies_beside_the_model(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As AOE: with --output, tuning_result.json is written with the tuned model, in OUTPUT."""
    monkeypatch.chdir(tmp_path)
    done = runner.invoke(app, ["tune", MODEL, "--soc-version", "Ascend310", "--db", "b.db",
                               "--budget", "8", "--output", "out", "--json"])
    report = json.loads(done.stdout)
    tuning = Path(report["tuning_result_file"])
    assert tuning.parent == Path(report["output_model"]).parent and tuning.is_file()
    assert Path("out") in tuning.parents  # --output as given
    assert not (tmp_path / "tuning_result.json").exists()


def test_aicore_num_tunes_part_of_a_chip_under_keys_of_its_own(tmp_path: Path) -> None:
    """Issue 42 (AOE's --aicore_num): CANN's Ascend910_9382 banks hold a 16-core file beside the
    24-core one. A tune on 16 cores records keys of its own (a tiling for 16 cores is not one for
    24), times of its own, and the count in its task; a plan on 16 cores knows them; the whole
    chip's keys stay as they always were."""
    db = str(tmp_path / "b.db")
    small = ["--soc-version", "Ascend910_9382", "--db", db, "--budget", "8", "--json", "-q"]
    part = json.loads(runner.invoke(app, ["tune", MODEL, *small, "--aicore-num", "16"]).stdout)
    whole = json.loads(runner.invoke(app, ["tune", MODEL, *small, "--no-transfer"]).stdout)
    assert part["repo_summary"]["repo_add_num"] + part["repo_summary"]["repo_unsatisfied_num"] \
        == part["repo_summary"]["total_num"] == whole["repo_summary"]["total_num"]
    assert whole["repo_summary"]["repo_hit_num"] == 0  # no key of the 16-core tune is a 24-core one
    assert part["model_result_ms"] != whole["model_result_ms"]
    from tunebank.bank import Bank

    with Bank.open(db) as bank:
        started = [s.event.payload for s in bank.events() if s.event.kind == "task_started"]
    assert [p.get("aicore_num") for p in started] == [16, 24]
    plan = runner.invoke(app, ["plan", MODEL, "--soc-version", "Ascend910_9382", "--db", db,
                               "--aicore-num", "16"])
    assert plan.stdout.strip().splitlines()[-1].startswith("26 keys: 26 known to the bank")
    again = json.loads(runner.invoke(app, ["tune", MODEL, *small]).stdout)
    assert again["repo_summary"]["repo_hit_num"] == whole["repo_summary"]["repo_add_num"]


@pytest.mark.parametrize(("cores", "message"), [
    ("25", "--aicore-num: 25 is not between 1 and Ascend910_9382's 24 AI cores"),
    ("0", "Invalid value for '--aicore-num'"),
])
def test_aicore_num_beyond_the_chip_is_refused_before_the_bank(tmp_path: Path, cores: str,
                                                               message: str) -> None:
    result = runner.invoke(app, ["tune", MODEL, "--soc-version", "Ascend910_9382", "--db",
                                 str(tmp_path / "b.db"), "--aicore-num", cores])
    assert result.exit_code != 0 and message in result.stderr
    assert not (tmp_path / "b.db").exists()
