"""AOE bank trees through the commands (issue 27): import names what it took and what held no
entry, query and history find entries by their fields, diff compares trees, export merges into
a folder or refuses, and a bad tree leaves the bank as it was."""

from __future__ import annotations

import json
from pathlib import Path

from freezegun import freeze_time
from typer.testing import CliRunner

from fixtures.aoe_banks import quirky_tree
from tests.hostile import refused_or_sound
from tunebank.cli.main import app

runner = CliRunner()


def _ok(*args: str) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def test_import_query_history_and_export_of_a_tree(tmp_path: Path) -> None:
    tree = quirky_tree().write(tmp_path / "tree")
    db = str(tmp_path / "bank.db")
    with freeze_time("2026-12-01T10:00:00Z"):
        out = _ok("import", str(tree), "--db", db)
    assert "17 entries: 17 new, 0 changed, 0 already in the bank as they are" in out
    assert "chips tunebank's tuner cannot tune, kept as data: Ascend910B4-1, " \
           "Ascend950PR_9589, FUSE, MC62CM12AA" in out  # Ascend910_9382 is tunable (issue 42)
    assert "no entry: " in out and "{} holds no entry" in out and "empty file, no entry" in out
    again = _ok("import", str(tree), "--db", db)
    assert "0 new, 0 changed, 17 already in the bank" in again and "0 event(s) added" in again

    rows = json.loads(_ok("query", "--db", db, "--soc-version", "Ascend910_9382", "--op-type",
                          "MatMulV3", "--where", "m=16", "--json"))
    assert rows and all(r["info_dict"]["m"] == 16 for r in rows)
    table = _ok("query", "--db", db, "--op-type", "MatMulV3", "--where", "m<=32",
                "--where", "knowledge.usedCoreNum=16")
    assert "knowledge.usedCoreNum" in table.splitlines()[0] and "Ascend910_9382" in table
    refused = runner.invoke(app, ["query", "--db", db, "--where", "m<big"])
    assert refused.exit_code == 1 and "--where: 'm<big': < compares numbers" in refused.stderr

    history = _ok("history", "--db", db, "--op-type", "QuantBatchMatmulV3")
    assert "source" in history.splitlines()[0]
    assert "Ascend910B4-1_20_AiCore_QuantBatchMatmulV3_runtime_kb.json:1" in history

    out_dir = tmp_path / "out"
    assert "17 entries of 6 chip(s) in 7 bank file(s)" in _ok("export", "--format", "aoe-repo",
                                                         "--out", str(out_dir), "--db", db)


def test_export_into_a_folder_with_entries_the_bank_lacks(tmp_path: Path) -> None:
    tree = quirky_tree().write(tmp_path / "tree")
    db = tmp_path / "bank.db"
    _ok("import", str(tree / "MC62CM12AA"), "--db", str(db))
    target = tmp_path / "target"
    _ok("export", "--format", "aoe-repo", "--out", str(target), "--db", str(db))
    name = target / "MC62CM12AA/unified_bank/MC62CM12AA_4_AiCore_MatMulV3_runtime_kb.json"
    foreign = json.dumps({"id": 1, "info_dict": {"m": 1}, "knowledge": {"a": 1}, "op": "MatMulV3",
                          "version": 0})
    name.write_text(foreign + "\n" + name.read_text(encoding="utf-8"), encoding="utf-8")
    before = name.read_bytes()
    refused = runner.invoke(app, ["export", "--format", "aoe-repo", "--out", str(target), "--db",
                                  str(db)])
    assert refused.exit_code == 1 and "holds 1 entries the bank lacks" in refused.stderr
    assert "--merge keeps them" in refused.stderr and name.read_bytes() == before
    out = _ok("export", "--format", "aoe-repo", "--out", str(target), "--merge", "--db", str(db))
    assert "1 entries the files held and the bank lacks kept (--merge)" in out
    lines = name.read_text(encoding="utf-8").splitlines()
    assert lines[0] == foreign.replace(" ", "") and len(lines) == 2


def test_diff_of_two_trees_and_merge_of_two_machines(tmp_path: Path) -> None:
    tree = quirky_tree().write(tmp_path / "A")
    other = quirky_tree().write(tmp_path / "B")
    changed = other / "MC62CM12AA/unified_bank/MC62CM12AA_4_AiCore_MatMulV3_runtime_kb.json"
    line = json.loads(changed.read_text(encoding="utf-8"))
    line["knowledge"]["baseM"] = 4096
    changed.write_text(json.dumps(line) + "\n", encoding="utf-8")
    total = _ok("diff", str(tree), str(other)).splitlines()[-1]
    assert total.startswith("A 17 keys, B 17: 0 only in A, 0 only in B, 1 differ (1 policy")
    with freeze_time("2026-12-01T10:00:00Z"):
        _ok("import", str(tree), "--db", str(tmp_path / "a.db"))
    with freeze_time("2026-12-02T10:00:00Z"):
        _ok("import", str(other), "--db", str(tmp_path / "b.db"))
    merged = _ok("merge", str(tmp_path / "b.db"), "--db", str(tmp_path / "a.db"))
    assert "newer: keys both banks hold without a measured time" in merged
    assert "MC62CM12AA" in merged and " newer " in merged.splitlines()[-1]


def test_a_bad_tree_leaves_the_bank_as_it_was(tmp_path: Path) -> None:
    tree = quirky_tree().write(tmp_path / "tree")
    db = tmp_path / "bank.db"
    _ok("import", str(tree / "MC62CM12AA"), "--db", str(db))
    bad = tree / "Ascend910_9382/unified_bank/Ascend910_9382_16_AiCore_MatMulV3_runtime_kb.json"
    bad.write_text(bad.read_text(encoding="utf-8") + '{"id": 1, "op": \n', encoding="utf-8")
    result = refused_or_sound(["import", str(tree), "--db", str(db)], db)
    assert result.exit_code == 1
    assert "Ascend910_9382_16_AiCore_MatMulV3_runtime_kb.json: line 5" in result.stderr
    assert "Traceback" not in result.output
