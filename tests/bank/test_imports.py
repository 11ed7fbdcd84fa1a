"""Importing AOE result files: every format, exact summaries, validation, idempotence."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from fixtures.make_aoe_files import FILES, write
from tests.seams import import_paths
from tunebank.bank import Bank, BankError
from tunebank.bank.exchange.exports import task_result
from tunebank.bank.exchange.imports import ImportSource, task_id_of
from tunebank.bank.formats.aoe_results import load_result_file

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "aoe"


@pytest.fixture
def bank() -> Any:
    with Bank.open("sqlite://", create=True) as opened:
        yield opened


def test_fixture_files_are_what_the_generator_writes(tmp_path: Path) -> None:
    for path in write(tmp_path):
        assert path.read_text() == (FIXTURES / path.name).read_text()


def test_every_report_becomes_a_task_with_the_files_summary(bank: Bank) -> None:
    paths = sorted(FIXTURES.glob("*.json"))
    import_paths(bank, paths, "Ascend310")
    reports = {r.tuning_name + (r.report_id or r.file.name): r
               for p in paths for r in load_result_file(p)}
    tasks = bank.tasks()
    assert len(tasks) == len(reports) == 6
    by_name = {(t.tuning_name, t.status) for t in tasks}
    assert ("bert_tune_2", "failed") in by_name and ("bert_tune_3", "incomplete") in by_name
    by_id = {t.task_id: t for t in tasks}
    for report in reports.values():
        source = ImportSource(hashlib.sha256(report.file.read_bytes()).hexdigest(), "Ascend310")
        task = by_id[task_id_of(report, source)]
        assert task.tuning_name == report.tuning_name
        assert task.started_at.startswith((report.recorded_at or "1970-01-01")[:19])
        assert task.repo_summary() == report.summary
        assert list(task.failed_operators) == report.failed_operators
    assert bank.verify().ok


def test_importing_again_adds_nothing(bank: Bank) -> None:
    paths = sorted(FIXTURES.glob("*.json"))
    first = import_paths(bank, paths, "Ascend310")
    head = bank.head()
    again = import_paths(bank, paths, "Ascend310")
    assert first.appended == head and again.appended == 0
    assert sum(f.tasks_present for f in again.files) == 6
    assert bank.head() == head


def test_the_chip_is_part_of_the_import(bank: Bank) -> None:
    path = FIXTURES / "aoe_result_sgat_20240314101010101_4714.json"
    import_paths(bank, [path], "Ascend310")
    import_paths(bank, [path], "Ascend910B2")
    assert {t.soc_version for t in bank.tasks()} == {"Ascend310", "Ascend910B2"}


def _mutated(tmp_path: Path, name: str, change: Any) -> Path:
    content = json.loads(json.dumps(FILES[name]))
    change(content)
    path = tmp_path / name
    path.write_text(json.dumps(content))
    return path


V1 = "aoe_result_opat_20240315143005123_4711.json"
V2 = "aoe_result_opat_20240315_14300512_4713.json"
SG = "aoe_result_sgat_20240314101010101_4714.json"


def _set(path: list[Any], value: Any) -> Any:
    def change(content: Any) -> None:
        node = content
        for step in path[:-1]:
            node = node[step]
        node[path[-1]] = value
    return change


BAD = [
    (V1, _set([1, "OPAT", "repo_summary", "repo_hit_num"], 18), "repo_hit_num 18 != repo_update_num 2"),
    (V1, _set([1, "OPAT", "repo_summary", "total_num"], 20), "total_num 20 != repo_add_num"),
    (V1, _set([1, "OPAT", "repo_summary", "repo_add_num"], -1), "repo_add_num must be a non-negative"),
    (V1, _set([1, "OPAT", "repo_modified_operators", "add_repo_operators", 0,
               "performance_after_tune(us)"], "99"), "add_repo_operators[0].performance_after_tune(us)"),
    (V1, _set([1, "OPAT", "repo_modified_operators", "update_repo_operators", 1,
               "performance_improvement"], "2.60%"),
     "performance_improvement 2.60% but before/after give 2.53%"),
    (V1, _set([1, "OPAT", "model_performance_improvement"], "1.31%"), "model_performance_improvement"),
    (V1, _set([1, "OPAT", "opat_tune_result"], "tune maybe"), "unknown tuning result 'tune maybe'"),
    (V1, _set([0, "basic"], None), "missing the 'basic' section"),
    (V1, lambda c: c[1]["OPAT"]["repo_modified_operators"]["add_repo_operators"].pop(),
     "lists 1 add operator(s) but repo_summary.repo_add_num is 2"),
    (V1, lambda c: c[1]["OPAT"]["repo_modified_operators"]["add_repo_operators"].append(
        dict(c[1]["OPAT"]["repo_modified_operators"]["add_repo_operators"][0], op_name="slice_11")),
     "(resnet_tune): lists 3 add operator(s) but repo_summary.repo_add_num is 2"),
    (V1, lambda c: c[1]["OPAT"]["repo_modified_operators"]["update_repo_operators"].pop(),
     "lists 1 update operator(s) but repo_summary.repo_update_num is 2"),
    (V2, lambda c: c["report_20240315_14300512_140001"][1]["OPAT"]["repo_modified_operators"].append(
        c["report_20240315_14300512_140001"][1]["OPAT"]["repo_modified_operators"][0]),
     "report_20240315_14300512_140001 (bert_tune): lists 20 add operator(s) but "
     "repo_summary.repo_add_num is 19"),
    (V2, _set(["report_20240315_14300512_140001", 1, "OPAT", "repo_modified_operators", 0,
               "tune_performance"], {"Tiling": {}}), "unknown mode 'Tiling'"),
    (SG, _set([1, "SGAT", "repo_modified_subgraphs", "add_repo_subgraphs", 0, "repo_key"], "k-1"),
     "repo_key: must be a decimal key"),
]


@pytest.mark.parametrize(("name", "change", "message"), BAD)
def test_a_bad_file_writes_nothing(bank: Bank, tmp_path: Path, name: str, change: Any,
                                   message: str) -> None:
    good = FIXTURES / SG if name != SG else FIXTURES / V1
    bad = _mutated(tmp_path, name, change)
    with pytest.raises(BankError) as caught:
        import_paths(bank, [good, bad], "Ascend310")
    text = str(caught.value)
    assert str(bad) in text and message in text
    assert "\n" not in text
    assert bank.head() == 0


def test_not_json_names_the_line(bank: Bank, tmp_path: Path) -> None:
    broken = tmp_path / "aoe_result_opat_1.json"
    broken.write_text('[\n  {"basic": {"tuning_name": "x"}},\n  {"OPAT": }\n]')
    with pytest.raises(BankError, match=r"aoe_result_opat_1\.json: not valid JSON \(line 3"):
        import_paths(bank, [broken], "Ascend310")


def test_result_files_need_a_chip(bank: Bank) -> None:
    with pytest.raises(BankError, match="--soc-version is required"):
        import_paths(bank, [FIXTURES / V1], None)


@pytest.mark.parametrize("name", sorted(FILES))
def test_import_then_export_gives_back_the_file(bank: Bank, name: str, tmp_path: Path) -> None:
    import_paths(bank, [FIXTURES / name], "Ascend310")
    originals = load_result_file(FIXTURES / name)
    for task, original in zip(bank.tasks(), originals, strict=True):
        fmt = "sgat" if original.job_type == "sgat" else "opat"
        exported = task_result(bank, task.task_id, fmt, original.result_format
                               if original.result_format in ("v1", "v2") else "v2")
        again_path = tmp_path / name
        again_path.write_text(json.dumps(exported))
        (again,) = load_result_file(again_path)
        assert again.summary == original.summary
        assert again.status == original.status
        assert sorted(map(repr, again.ops)) == sorted(map(repr, original.ops))
        assert again.failed_operators == original.failed_operators
        assert again.tuning_time_s == original.tuning_time_s
        assert (again.model_baseline_ms, again.model_result_ms) == (original.model_baseline_ms,
                                                                    original.model_result_ms)


def test_ops_the_model_keys_alike_still_count_apart(bank: Bank) -> None:
    """Two listed ops that resolve to one key keep the file's counts (the second by name)."""
    def same_key(name: str) -> tuple[str, dict[str, Any], str]:
        return "42", {"op_type": "StridedSlice"}, "StridedSlice"

    path = FIXTURES / V1
    (report,) = load_result_file(path)
    from tunebank.bank.exchange.imports import ImportSource, report_events

    events, unresolved = report_events(report, ImportSource("ab" * 32, "Ascend310"), same_key)
    bank.append(events)
    (task,) = bank.tasks()
    assert task.repo_summary() == report.summary
    assert unresolved == 3  # every op after the first that took key 42


def test_an_entry_without_times_is_listed_without_them(bank: Bank, tmp_path: Path) -> None:
    """A key imported with no time is still listed (the counts stay exact), its times left out."""
    from tunebank.bank import EventKind, Outcome

    task = bank.start_task("Ascend310", tuning_name="tree", search_mode="ga")
    bank.record(task, [Outcome(EventKind.ADD, "7", op_name="Conv_1", op_type="Conv",
                               info_dict={"k": 7}, knowledge={}, extra={"performance_unknown": True})])
    bank.finish_task(task)
    for result_format in ("v1", "v2"):
        path = tmp_path / f"aoe_result_opat_20260101120000000_{result_format}.json"
        path.write_text(json.dumps(task_result(bank, task, "opat", result_format)))
        (report,) = load_result_file(path)
        (op,) = report.ops
        assert (op.name, op.kind, op.before_us, op.after_us) == ("Conv_1", "add", None, None)
        with Bank.open("sqlite://", create=True) as other:
            import_paths(other, [path], "Ascend310")
            (policy,) = other.policies()
            assert policy.best_us == float("inf") and other.verify().ok


def test_an_unchanged_tree_imported_again_is_hashed_not_parsed(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 41: a no-op re-import parsed, keyed and compared every entry. A file whose bytes
    the chip's latest tree import recorded, with no event of that chip since, is now only read
    and hashed; a changed file, or any event of its chip in between, has it read whole again."""
    from typer.testing import CliRunner

    from fixtures.aoe_banks import big_tree
    from tunebank.bank.formats import aoe_repo
    from tunebank.cli.main import app

    runner = CliRunner()
    tree = big_tree(400).write(tmp_path / "tree")
    db = str(tmp_path / "b.db")
    assert runner.invoke(app, ["import", str(tree), "--db", db]).exit_code == 0
    parsed: list[str] = []
    real = aoe_repo.read_kb_file

    def counting(path: Path, *args: Any) -> Any:
        parsed.append(path.name)
        return real(path, *args)

    monkeypatch.setattr(aoe_repo, "read_kb_file", counting)
    again = runner.invoke(app, ["import", str(tree), "--db", db, "--json"])
    report = json.loads(again.stdout)
    assert parsed == [] and report["events_added"] == 0
    assert sum(f["entries_unchanged"] for f in report["files"]) == 400
    files = sorted(aoe_repo.bank_files(tree))
    first = files[0]
    lines = first.read_text(encoding="utf-8").splitlines()
    entry = json.loads(lines[0])
    entry["knowledge"][next(iter(entry["knowledge"]))] += 1
    first.write_text("\n".join([json.dumps(entry), *lines[1:]]) + "\n", encoding="utf-8")
    changed = json.loads(runner.invoke(app, ["import", str(tree), "--db", db, "--json"]).stdout)
    assert parsed == [first.name] and changed["events_added"] == 2 + 2  # hit, update, task
    parsed.clear()
    with Bank.open(db) as bank:  # any event of the chip in between: every file of it is read
        soc = aoe_repo.KbFile.parse(first.name, "").soc_version
        bank.finish_task(bank.start_task(soc, tuning_name="something else"))
    runner.invoke(app, ["import", str(tree), "--db", db])
    assert sorted(parsed) == sorted(f.name for f in files
                                    if aoe_repo.KbFile.parse(f.name, "").soc_version == soc)
    with Bank.open(db) as bank:
        assert bank.verify().ok


def test_two_trees_of_one_chip_in_one_import_are_both_read(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Of two trees holding one key otherwise, the later given wins: neither can be taken for
    the bank's word unread, even when its bytes are the ones the bank recorded."""
    import shutil

    from typer.testing import CliRunner

    from fixtures.aoe_banks import big_tree
    from tunebank.bank.formats import aoe_repo
    from tunebank.cli.main import app

    runner = CliRunner()
    tree = big_tree(40).write(tmp_path / "tree")
    other = tmp_path / "other"
    shutil.copytree(tree, other)
    db = str(tmp_path / "b.db")
    assert runner.invoke(app, ["import", str(tree), "--db", db]).exit_code == 0
    parsed: list[str] = []
    real = aoe_repo.read_kb_file
    monkeypatch.setattr(aoe_repo, "read_kb_file",
                        lambda path, *args: parsed.append(path.name) or real(path, *args))
    assert runner.invoke(app, ["import", str(other), str(tree), "--db", db]).exit_code == 0
    assert sorted(parsed) == sorted(2 * [p.name for p in aoe_repo.bank_files(tree)])
