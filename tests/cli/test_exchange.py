"""`bank import`, `bank export` and `bank merge` through typer's CliRunner."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tunebank.cli.main import app

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[2]
AOE = sorted(str(p) for p in (ROOT / "fixtures" / "aoe").glob("*.json"))
VGG = str(ROOT / "fixtures" / "models" / "vgg19.onnx")


def ok(*args: str) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.stdout


def test_import_reports_per_file_and_is_idempotent(tmp_path: Path) -> None:
    db = str(tmp_path / "b.db")
    first = json.loads(ok("import", *AOE, "--soc-version", "Ascend310", "--db", db, "--json"))
    assert first["events_added"] > 0
    assert {f["kind"] for f in first["files"]} == {"opat-v1", "opat-v2", "sgat"}
    again = json.loads(ok("import", *AOE, "--soc-version", "Ascend310", "--db", db, "--json"))
    assert again["events_added"] == 0
    tasks = json.loads(ok("tasks", "--db", db, "--json"))
    assert sorted(t["status"] for t in tasks) == ["failed", "failed", "incomplete", "successful",
                                                  "successful", "successful"]


def test_a_bad_import_is_one_line_and_writes_nothing(tmp_path: Path) -> None:
    bad = tmp_path / "aoe_result_opat_x.json"
    bad.write_text('[{"basic": {"tuning_name": "t"}}, {"OPAT": {"repo_summary": {}}}]')
    db = tmp_path / "b.db"
    result = runner.invoke(app, ["import", AOE[0], str(bad), "--soc-version", "Ascend310",
                                 "--db", str(db)])
    assert result.exit_code == 1
    assert result.stderr.count("\n") == 1 and "repo_summary.repo_add_num" in result.stderr
    assert not db.exists()  # the files are checked before the bank is even created


def test_tuned_result_file_imports_with_the_model_to_the_same_keys(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    report = json.loads(ok("tune", VGG, "--soc-version", "Ascend310", "--db", "a.db", "--budget", "32",
                           "--json"))
    exported = tmp_path / "aoe_result_opat_20260101120000000_1.json"
    ok("export", "--format", "opat", "--task", report["task_id"], "--db", "a.db", "--out", str(exported))
    ok("import", str(exported), "--soc-version", "Ascend310", "--model", VGG, "--db", "b.db")
    keys_a = {p["repo_key"] for p in json.loads(ok("query", "--db", "a.db", "--json"))}
    keys_b = {p["repo_key"] for p in json.loads(ok("query", "--db", "b.db", "--json"))}
    assert keys_a == keys_b
    (task,) = json.loads(ok("tasks", "--db", "b.db", "--json"))
    assert task["repo_summary"] == report["repo_summary"]
    assert task["model_name"] == "vgg19"


def test_export_formats(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    ok("tune", VGG, "--soc-version", "Ascend310", "--db", "a.db", "--budget", "32", "--json")
    said = ok("export", "--format", "aoe-repo", "--out", "tree", "--db", "a.db")
    assert list((tmp_path / "tree" / "Ascend310" / "unified_bank").glob("Ascend310_2_AiCore_*"))
    # the files it names add up to the files on disk (it named the bank files alone, one short)
    bank_files, times_files = (int(n) for n in re.findall(r"(\d+) (?:bank file|tunebank_)", said))
    written = [p.name for p in (tmp_path / "tree").rglob("*") if p.is_file()]
    assert (bank_files, times_files) == (len(written) - 1, 1)
    assert written.count("tunebank_times.json") == 1
    ok("export", "--format", "jsonl", "--out", "events.jsonl", "--db", "a.db")
    ok("import", "events.jsonl", "--db", "c.db")
    ok("import", "tree", "--db", "d.db")
    for db in ("c.db", "d.db"):
        assert ok("verify", "--db", db).startswith("OK")
    policies = {db: {p["repo_key"]: p["best_us"] for p in json.loads(ok("query", "--db", db, "--json"))}
                for db in ("a.db", "c.db", "d.db")}
    assert policies["a.db"] == policies["c.db"] == policies["d.db"]
    tuning = json.loads(ok("export", "--format", "tuning-result", "--model", VGG,
                           "--soc-version", "Ascend310", "--db", "a.db"))
    assert "n0" in tuning["op_tuning"]
    rows = ok("export", "--format", "csv", "--db", "a.db").splitlines()
    assert rows[0].startswith("soc_version,repo_key") and len(rows) == len(policies["a.db"]) + 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--format", "opat"], "--format opat needs --task"),
        (["--format", "aoe-repo"], "--format aoe-repo needs --out"),
        (["--format", "tuning-result"], "needs --model and --soc-version"),
        (["--format", "opat", "--task", "zzz"], "task 'zzz': no such task"),
    ],
)
def test_export_errors(tmp_path: Path, args: list[str], message: str) -> None:
    db = str(tmp_path / "b.db")
    ok("import", AOE[0], "--soc-version", "Ascend310", "--db", db)
    result = runner.invoke(app, ["export", *args, "--db", db])
    assert result.exit_code != 0 and message in result.stderr


def test_merge_reports_and_is_idempotent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    ok("tune", VGG, "--soc-version", "Ascend310", "--db", "a.db", "--budget", "16", "--seed", "1")
    ok("tune", VGG, "--soc-version", "Ascend310", "--db", "b.db", "--budget", "64", "--seed", "2")
    first = json.loads(ok("merge", "b.db", "--db", "a.db", "--json"))[0]
    assert first["events_added"] > 0 and first["conflicts"]
    conflict = first["conflicts"][0]
    assert conflict["winner"]["best_us"] <= conflict["loser"]["best_us"]
    second = json.loads(ok("merge", "b.db", "--db", "a.db", "--json"))[0]
    assert second["events_added"] == 0 and second["policies_changed"] == 0
    assert ok("verify", "--db", "a.db").startswith("OK")
    table = ok("merge", "b.db", "--db", "a.db")
    assert "events_added" in table
    history = json.loads(ok("history", "--op-name", "n0", "--db", "a.db", "--json"))
    assert len({h["origin"] for h in history}) == 2
    result = runner.invoke(app, ["merge", "missing.db", "--db", "a.db"])
    assert result.exit_code == 1 and "no bank at missing.db" in result.stderr


def test_query_finds_entries_by_what_made_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    ok("tune", VGG, "--soc-version", "Ascend310", "--db", "a.db", "--budget", "16")
    ok("import", AOE[0], "--soc-version", "Ascend310", "--db", "a.db")
    everything = json.loads(ok("query", "--db", "a.db", "--json"))
    from tunebank.tuner.measure.costmodel import COST_MODEL_VERSION

    simulated = json.loads(ok("query", "--db", "a.db", "--cost-model-version", COST_MODEL_VERSION,
                              "--json"))
    imported = json.loads(ok("query", "--db", "a.db", "--backend", "aoe", "--json"))
    assert simulated and imported and len(simulated) + len(imported) == len(everything)
    assert {p["backend"] for p in simulated} == {"sim"}
    assert {p["origin"].split(":")[0] for p in imported} == {"aoe-file"}
    assert json.loads(ok("query", "--db", "a.db", "--cost-model-version", "sim-0", "--json")) == []


def test_a_team_bank_on_postgresql(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                   postgres_url: str) -> None:
    monkeypatch.chdir(tmp_path)
    first = json.loads(ok("tune", VGG, "--soc-version", "Ascend310", "--db", postgres_url,
                          "--budget", "16", "--json"))
    assert first["measurements"] > 0
    second = json.loads(ok("tune", VGG, "--soc-version", "Ascend310", "--db", postgres_url, "--json"))
    assert second["measurements"] == 0
    ok("import", *AOE, "--soc-version", "Ascend310", "--db", postgres_url)
    ok("tune", VGG, "--soc-version", "Ascend310", "--db", "local.db", "--budget", "32", "--seed", "5")
    report = json.loads(ok("merge", "local.db", "--db", postgres_url, "--json"))[0]
    assert report["events_added"] > 0
    assert ok("verify", "--db", postgres_url).startswith("OK")
    assert ok("rebuild", "--db", postgres_url)
    assert ok("verify", "--db", postgres_url).startswith("OK")


def test_merging_the_same_banks_again_reports_nothing_new(tmp_path: Path) -> None:
    """Issue 31: a second `bank merge s1.db s2.db --db m.db` added nothing, yet reported the
    ties and conflicts of the first run again."""
    model = str(Path(__file__).resolve().parents[2] / "fixtures" / "models" / "squeezenet.onnx")
    for seed in ("1", "2"):
        tuned = runner.invoke(app, ["tune", model, "--soc-version", "Ascend310", "--db",
                                    str(tmp_path / f"s{seed}.db"), "--seed", seed, "--budget", "16",
                                    "-q"], env={"ASCEND_WORK_PATH": str(tmp_path)})
        assert tuned.exit_code == 0, tuned.output
    args = ["merge", str(tmp_path / "s1.db"), str(tmp_path / "s2.db"), "--db",
            str(tmp_path / "m.db"), "--json"]
    first = json.loads(runner.invoke(app, args).stdout)
    assert first[1]["policies_tied"] + first[1]["policies_faster"] > 0 and first[1]["conflicts"]
    again = json.loads(runner.invoke(app, args).stdout)
    for report in again:
        assert report["events_added"] == 0 and report["events_already_present"] > 0
        assert report["policies_changed"] == report["policies_tied"] == 0
        assert report["conflicts"] == []
