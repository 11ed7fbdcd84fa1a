"""Exports and their round trips: AOE's bank tree, the event log as JSON Lines, CSV."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import oc
from tests.seams import import_paths
from tunebank.bank import Bank, BankError
from tunebank.bank.exchange.exports import export_tree
from tunebank.bank.formats.aoe_repo import entry_id, read_tree
from tunebank.bank.formats.csv_policies import write_policies
from tunebank.bank.formats.jsonl import write_event_rows


def _filled(path: Path) -> Bank:
    bank = Bank.open(str(path), create=True)
    for soc, op_types in (("Ascend310", ("MatMul", "Conv")), ("Ascend910B2", ("MatMul",))):
        task = bank.start_task(soc, tuning_name="t")
        outcomes = []
        for n, op_type in enumerate(op_types):
            base = oc("add", f"{soc}-{n}", after=10.0 + n)
            outcomes.append(replace(base, op_type=op_type, tune_mode="Schedule"))
        bank.record(task, outcomes)
        bank.finish_task(task)
    return bank


def _policies(bank: Bank) -> dict[Any, Any]:
    return {(p.soc_version, p.repo_key): (p.best_us, p.knowledge, p.info_dict, p.op_type, p.tune_mode)
            for p in bank.policies()}


CORES = {"Ascend310": 2, "Ascend910B2": 24}


def test_aoe_repo_layout_and_round_trip(tmp_path: Path) -> None:
    with _filled(tmp_path / "a.db") as source:
        files = export_tree(source, tmp_path / "tree", CORES).written.files
        names = sorted(p.relative_to(tmp_path / "tree").as_posix() for p in files)
        assert names == ["Ascend310/unified_bank/Ascend310_2_AiCore_Conv_runtime_kb.json",
                         "Ascend310/unified_bank/Ascend310_2_AiCore_MatMul_runtime_kb.json",
                         "Ascend910B2/unified_bank/Ascend910B2_24_AiCore_MatMul_runtime_kb.json"]
        line = json.loads(files[0].read_text().splitlines()[0])
        assert list(line) == ["id", "info_dict", "knowledge", "op", "version"]
        assert line["id"] == entry_id(line["info_dict"]) and 0 <= line["id"] < 2**32
        with Bank.open("sqlite://", create=True) as target:
            import_paths(target, [tmp_path / "tree"], None)
            assert _policies(target) == _policies(source)  # repo_keys and times come back
            again = import_paths(target, [tmp_path / "tree"], None)
            assert again.appended == 0 and again.files[0].tasks == 0
            assert again.files[0].tree is not None and again.files[0].tree.unchanged == 3
            assert target.verify().ok


def test_a_tree_without_times_loses_to_any_measured_entry(tmp_path: Path) -> None:
    with _filled(tmp_path / "a.db") as source:
        export_tree(source, tmp_path / "tree", CORES)
    for times in (tmp_path / "tree").glob("*/unified_bank/tunebank_times.json"):
        times.unlink()
    with Bank.open("sqlite://", create=True) as target:
        import_paths(target, [tmp_path / "tree"], None)
        assert all(p.best_us == float("inf") for p in target.policies())
        policy = next(p for p in target.policies() if p.soc_version == "Ascend310")
        task = target.start_task("Ascend310", tuning_name="measured")
        target.record(task, [replace(oc(kind, policy.repo_key, after=99.0), info_dict=policy.info_dict)
                             for kind in ("hit", "update")])
        best = {p.repo_key: p.best_us for p in target.policies()}
        assert best[policy.repo_key] == 99.0


def test_a_bad_tree_line_is_named(tmp_path: Path) -> None:
    folder = tmp_path / "tree" / "Ascend310" / "unified_bank"
    folder.mkdir(parents=True)
    (folder / "Ascend310_2_AiCore_MatMul_runtime_kb.json").write_text('{"id": 1, "op": "MatMul", '
                                                                     '"info_dict": {}}\n')
    with pytest.raises(BankError, match=r"runtime_kb\.json: line 1: no knowledge"):
        read_tree(tmp_path / "tree")
    (tmp_path / "empty").mkdir()
    with pytest.raises(BankError, match=r"empty: no bank files"):
        read_tree(tmp_path / "empty")


def test_events_file_round_trip_is_idempotent_and_checked(tmp_path: Path) -> None:
    with _filled(tmp_path / "a.db") as source:
        path = tmp_path / "events.jsonl"
        with path.open("w") as handle:
            assert write_event_rows(handle, source.event_rows(), source.bank_id) == source.head()
        with Bank.open("sqlite://", create=True) as target:
            first = import_paths(target, [path], None)
            assert first.appended == source.head()
            assert import_paths(target, [path], None).appended == 0
            assert _policies(target) == _policies(source)
            assert [t.repo_summary() for t in target.tasks()] == [t.repo_summary() for t in source.tasks()]
            assert {s.event.origin for s in target.events()} == {source.origin}
    lines = path.read_text().splitlines()
    header = json.loads(lines[0])
    assert header["schema_version"] == 1 and header["format"] == "tunebank-events"
    event = json.loads(lines[3])
    event["payload"]["performance_after_us"] = 1.0
    lines[3] = json.dumps(event)
    path.write_text("\n".join(lines) + "\n")
    with Bank.open("sqlite://", create=True) as target, \
            pytest.raises(BankError, match=r"events\.jsonl: line 4 \(seq 3\): event_id does not match"):
        import_paths(target, [path], None)


def test_csv_has_one_row_per_policy(tmp_path: Path) -> None:
    with _filled(tmp_path / "a.db") as source:
        out = io.StringIO()
        assert write_policies(out, source.policies()) == 3
    rows = list(csv.DictReader(io.StringIO(out.getvalue())))
    assert len(rows) == 3
    assert {r["soc_version"] for r in rows} == {"Ascend310", "Ascend910B2"}
    assert json.loads(rows[0]["knowledge"])["baseM"] == 64


@pytest.mark.parametrize(("field", "value", "message"), [
    ("op_name", 5, "repo_modified_operators[0].op_name: must be a non-empty string"),
    ("op_type", {"x": 1}, "repo_modified_operators[0].op_type: must be a string or a list"),
])
def test_a_v2_operators_field_error_names_where_the_field_sits(tmp_path: Path, field: str,
                                                                value: object, message: str) -> None:
    """op_name and op_type sit beside tune_performance in the newer format, not inside it."""
    from tunebank.bank.formats.aoe_results import ImportFormatError, load_result_file

    source = Path(__file__).resolve().parents[2] / "fixtures" / "aoe" / \
        "aoe_result_opat_20240315_14300512_4713.json"
    data = json.loads(source.read_text(encoding="utf-8"))
    report = next(iter(data.values()))  # the first report of the file
    report[1]["OPAT"]["repo_modified_operators"][0][field] = value
    broken = tmp_path / source.name
    broken.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ImportFormatError) as raised:
        load_result_file(broken)
    assert message in str(raised.value) and "tune_performance" not in str(raised.value)
