"""`bank diff` through typer's CliRunner: two banks, and two versions of a model."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fixtures.model_versions import dilated
from tests.conftest import oc
from tunebank.bank import Bank
from tunebank.bank.exchange.diff import diff_policies
from tunebank.cli.main import app

runner = CliRunner()
MODELS = Path(__file__).resolve().parents[2] / "fixtures" / "models"
RESNET = MODELS / "resnet50.onnx"


def bank_with(path: Path, name: str, outcomes: list[tuple[str, float, dict[str, int] | None]],
              soc: str = "Ascend310") -> str:
    with Bank.open(str(path), create=True) as bank:
        task = bank.start_task(soc, tuning_name=name)
        bank.record(task, [replace(oc("add", key, after), knowledge=knowledge or {"baseM": 64, "key": key})
                           for key, after, knowledge in outcomes])
        bank.finish_task(task)
    return str(path)


@pytest.fixture
def two_banks(tmp_path: Path) -> tuple[str, str]:
    a = bank_with(tmp_path / "a.db", "alice", [("1", 50.0, None), ("2", 40.0, None), ("3", 30.0, None),
                                               ("5", 25.0, None)])
    b = bank_with(tmp_path / "b.db", "bob", [("2", 40.0, None), ("3", 20.0, {"baseM": 128}),
                                             ("4", 10.0, None), ("5", 35.0, None)])
    bank_with(tmp_path / "b.db", "bob-910", [("9", 5.0, None)], soc="Ascend910B2")
    return a, b


def test_two_banks_key_by_key(two_banks: tuple[str, str]) -> None:
    a, b = two_banks
    result = runner.invoke(app, ["diff", a, b, "--json"])
    assert result.exit_code == 0, result.output
    found = json.loads(result.stdout)
    rows = found["rows"]
    assert [e["repo_key"] for e in rows if e["change"] == "only_a"] == ["1"]
    assert sorted(e["repo_key"] for e in rows if e["change"] == "only_b") == ["4", "9"]
    assert all(e["b"] is None for e in rows if e["change"] == "only_a")
    assert found["same"] == 1  # key 2: recorded apart, same knowledge and time
    assert (found["only_a"], found["only_b"], found["differ"], found["faster_a"]) == (1, 2, 2, 1)
    differ = {e["repo_key"]: e for e in rows if e["change"] == "differ"}
    assert set(differ) == {"3", "5"}
    assert (differ["3"]["what"], differ["3"]["faster"]) == ("policy", "b")
    assert (differ["5"]["what"], differ["5"]["faster"]) == ("time", "a")
    assert (differ["3"]["a"]["best_us"], differ["3"]["b"]["best_us"]) == (30.0, 20.0)
    assert (differ["3"]["a"]["tuning_name"], differ["3"]["b"]["tuning_name"]) == ("alice", "bob")
    assert differ["3"]["a"]["origin"] != differ["3"]["b"]["origin"]  # two banks, two origins
    assert found["total"] == ("A 4 keys, B 5: 1 only in A, 2 only in B, 2 differ (1 policy, 1 time "
                              "only; faster in A 1, in B 1), 1 the same")


def test_the_table_and_the_exit_code(two_banks: tuple[str, str]) -> None:
    a, b = two_banks
    result = runner.invoke(app, ["diff", a, b, "--soc-version", "Ascend310"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == f"A is {a}, B is {b}"
    assert lines[1].split() == ["change", "soc_version", "repo_key", "op_type", "what", "a_best_us",
                                "b_best_us", "faster", "a_recorded_by", "b_recorded_by"]
    assert [line.split()[:3] for line in lines[3:5]] == [["only", "in", "A"], ["only", "in", "B"]]
    assert any(line.split()[:8] == ["differ", "Ascend310", "3", "MatMul", "policy", "30", "20", "B"]
               for line in lines)
    assert lines[-1].startswith("A 4 keys, B 4: 1 only in A, 1 only in B, 2 differ")
    assert runner.invoke(app, ["diff", a, b, "--exit-code"]).exit_code == 1
    assert runner.invoke(app, ["diff", a, a, "--exit-code"]).exit_code == 0


def test_a_merged_bank_holds_the_same_policies_as_its_sources_best(two_banks: tuple[str, str],
                                                                   tmp_path: Path) -> None:
    a, b = two_banks
    merged = tmp_path / "merged.db"
    merged.write_bytes(Path(a).read_bytes())
    assert runner.invoke(app, ["merge", b, "--db", str(merged)]).exit_code == 0
    with Bank.open(a) as bank_a, Bank.open(str(merged)) as bank_m:
        found = diff_policies(bank_a.policies(), bank_m.policies())
    assert not found.only_a
    assert sorted(p.repo_key for p in found.only_b) == ["4", "9"]
    assert [(c.a.repo_key, c.faster) for c in found.changed] == [("3", "b")]  # B's faster entry won
    with Bank.open(b) as bank_b:
        brought = ["bob", f"({bank_b.origin})"]
    table = runner.invoke(app, ["diff", a, str(merged), "--sort", "repo_key"]).stdout.splitlines()
    by_key = {line.split()[2]: line for line in table[3:-1]}
    assert by_key["3"].split()[-3:] == ["alice", *brought]  # merged: named with the bank it came from


@pytest.mark.parametrize(("args", "message"), [
    (["{a}"], "give two banks (bank diff A B) or two models"),
    (["{a}", "{tmp}/nope.db"], "B: no bank at"),
    (["--model", str(RESNET), "--model", str(RESNET)], "--soc-version: needed to plan the models"),
    (["{a}", "{a}", "--model", str(RESNET)], "give two banks (bank diff A B) or two models"),
    (["--model", str(RESNET), "--model", str(RESNET), "--soc-version", "Ascend999"],
     "--soc-version: unknown soc_version 'Ascend999'"),
])
def test_bad_diffs_are_one_line(two_banks: tuple[str, str], tmp_path: Path, args: list[str],
                                message: str) -> None:
    a, _ = two_banks
    result = runner.invoke(app, ["diff", *(arg.format(a=a, tmp=tmp_path) for arg in args), "--exit-code"])
    assert result.exit_code == 2  # never 1, which --exit-code gives a difference
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"bank: error: {message}")


def test_two_model_versions(tmp_path: Path) -> None:
    v2 = tmp_path / "resnet50_v2.onnx"
    dilated(RESNET, v2)
    args = ["diff", "--model", str(RESNET), "--model", str(v2), "--soc-version", "Ascend310P3", "--json"]
    alone = runner.invoke(app, args)  # no bank anywhere (the tests' HOME is empty)
    assert alone.exit_code == 0, alone.output
    found = json.loads(alone.stdout)
    assert (found["v1_keys"], found["v2_keys"], found["kept"]) == (57, 57, 50)
    assert (found["new"], found["gone"], found["changed_key"], found["to_search"]) == (7, 7, 16, 7)
    changed = [r for r in found["rows"] if r["change"] == "changed_key"]
    assert len(changed) == 16 and all(c["op_type"] == "Conv" and c["v1_repo_key"] != c["v2_repo_key"]
                                      for c in changed)
    new = [r for r in found["rows"] if r["change"] == "new"]
    assert len(new) == 7 and "bank" not in new[0] and new[0]["v1_repo_key"] is None

    db = tmp_path / "bank.db"
    tuned = runner.invoke(app, ["tune", str(v2), "--soc-version", "Ascend310P3", "--db", str(db),
                                "--budget", "8", "--json"])
    assert tuned.exit_code == 0, tuned.output
    known = json.loads(runner.invoke(app, [*args, "--db", str(db)]).stdout)
    known_new = [r for r in known["rows"] if r["change"] == "new"]
    assert new == [{k: v for k, v in g.items() if k not in ("bank", "best_us")} for g in known_new]
    assert {g["bank"] for g in known_new} <= {"known", "no_gain"} and known["to_search"] == 0
    assert known["total"].endswith("the bank knows 7 of the new keys; a tune of V2 searches 0 keys "
                                   "(0 operators)")
    table = runner.invoke(app, [*args[:-1], "--db", str(db)])
    lines = table.stdout.splitlines()
    assert lines[0] == f"V1 is {RESNET}, V2 is {v2}"
    assert sum(line.startswith("new ") for line in lines) == 7
    assert sum(line.startswith("changed key ") for line in lines) == 16


def test_banks_named_by_url(two_banks: tuple[str, str]) -> None:
    a, b = two_banks
    by_path = runner.invoke(app, ["diff", a, b, "--json"])
    by_url = runner.invoke(app, ["diff", f"sqlite:///{a}", f"sqlite:///{b}", "--json"])
    assert by_url.exit_code == 0, by_url.output
    assert {k: v for k, v in json.loads(by_url.stdout).items() if k not in ("a", "b")} == \
        {k: v for k, v in json.loads(by_path.stdout).items() if k not in ("a", "b")}


def test_limit_sort_and_csv_choose_the_rows_of_every_form(two_banks: tuple[str, str]) -> None:
    a, b = two_banks
    cut = ["--sort", "-b_best_us", "--limit", "2"]
    found = json.loads(runner.invoke(app, ["diff", a, b, *cut, "--json"]).stdout)
    assert [(r["repo_key"], r["b"]["best_us"]) for r in found["rows"]] == [("5", 35.0), ("3", 20.0)]
    assert found["only_b"] == 2 and found["total"].startswith("A 4 keys, B 5")  # counts: all rows

    table = runner.invoke(app, ["diff", a, b, *cut]).stdout.splitlines()
    assert [line.split()[2] for line in table[3:-1]] == ["5", "3"]
    assert table[-1] == found["total"]

    csv = runner.invoke(app, ["diff", a, b, *cut, "--csv"])
    assert csv.exit_code == 0, csv.output
    assert csv.stdout.splitlines()[0].startswith("change,soc_version,repo_key,")
    assert [line.split(",")[2] for line in csv.stdout.splitlines()[1:]] == ["5", "3"]

    empty_a = [line.split(",")[5] for line in runner.invoke(
        app, ["diff", a, b, "--sort", "a_best_us", "--csv"]).stdout.splitlines()[1:]]
    assert empty_a[-2:] == ["", ""]  # the keys only B holds have no A time: last either way


@pytest.mark.parametrize(("args", "message"), [
    (["--json", "--csv"], "--json and --csv: give one"),
    (["--sort", "speed"], "--sort: no column 'speed'"),
])
def test_bad_output_flags_are_usage_errors(two_banks: tuple[str, str], args: list[str],
                                           message: str) -> None:
    result = runner.invoke(app, ["diff", *two_banks, *args])
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.startswith(f"bank: error: {message}")


def test_no_difference_is_the_total_alone(two_banks: tuple[str, str]) -> None:
    a, _ = two_banks
    lines = runner.invoke(app, ["diff", a, a]).stdout.splitlines()
    assert lines == [f"A is {a}, B is {a}", "A 4 keys, B 4: 0 only in A, 0 only in B, 0 differ "
                     "(0 policy, 0 time only; faster in A 0, in B 0), 4 the same"]
