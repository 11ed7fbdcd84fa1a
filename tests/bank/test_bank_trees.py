"""AOE bank trees generated with each quirk of the real ones (issue 27): read as they are,
kept exactly, written back entry for entry, merged between machines, and refused, with the
file and line named, only where a line is not an entry."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from freezegun import freeze_time

from fixtures.aoe_banks import Quirks, TreeSpec, entry, quirky_tree
from tests.seams import import_paths
from tunebank.bank import Bank, BankError
from tunebank.bank.exchange.diff import diff_policies, tree_policies
from tunebank.bank.exchange.exports import export_tree
from tunebank.bank.exchange.merge import merge_into
from tunebank.bank.formats.aoe_repo import bank_files, read_tree
from tunebank.bank.store import reads


def _entries(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8-sig")
    return [json.dumps(v) for v in (json.loads(t) for t in text.splitlines() if t.strip()) if v]


def _tree(root: Path) -> dict[str, list[str]]:
    return {p.relative_to(root).as_posix(): _entries(p) for p in bank_files(root)}


def test_every_quirk_reads_and_comes_back_entry_for_entry(tmp_path: Path) -> None:
    tree = quirky_tree().write(tmp_path / "tree")
    with Bank.open(str(tmp_path / "bank.db"), create=True) as bank:
        report = import_paths(bank, [tree], None)
        counts = report.files[0].tree
        assert counts is not None and counts.new == counts.entries == 17 == reads.policy_count(bank.store)
        gaps = report.files[0].gaps
        assert any("FUSE_8_AiCore" in g and "{} holds no entry" in g for g in gaps)
        assert any("Ascend910B2_24_AiCore_Conv3D" in g and "empty file" in g for g in gaps)
        assert any("QuantBatchMatmulV3" in g and "blank line" in g for g in gaps)
        assert counts.socs == ["Ascend910B2", "Ascend910B4-1", "Ascend910_9382", "Ascend950PR_9589",
                               "FUSE", "MC62CM12AA"]
        export_tree(bank, tmp_path / "out", {})
        assert _tree(tmp_path / "out") == _tree(tree)  # fields in their order, 1.0 stays 1.0
        assert (tmp_path / "out" / "FUSE/unified_bank/FUSE_8_AiCore_ExtendConvTranspose_runtime_kb"
                ".json").read_text() == "{}\n"
        assert import_paths(bank, [tree], None).appended == 0
        assert import_paths(bank, [tmp_path / "out"], None).appended == 0
        assert bank.verify().ok


def test_two_core_counts_with_one_info_dict_are_two_entries(tmp_path: Path) -> None:
    tree = quirky_tree().write(tmp_path / "tree")
    entries = read_tree(tree).entries
    chip = [e for e in entries if e.soc_version == "Ascend910_9382"]
    assert len(chip) == 10 and len({e.repo_key for e in chip}) == 10
    sixteen = {json.dumps(e.entry.info_dict, sort_keys=True): e.entry.knowledge
               for e in chip if e.entry.scope.core_num == 16}
    differ = [e for e in chip if e.entry.scope.core_num == 24
              and sixteen.get(json.dumps(e.entry.info_dict, sort_keys=True), e.entry.knowledge)
              != e.entry.knowledge]
    assert len(differ) == 2


def test_ids_and_values_are_kept_exactly(tmp_path: Path) -> None:
    line = {"id": 2**70 + 3, "info_dict": {"m": 16, "flag": True, "ratio": 1.0},
            "knowledge": {"b": 1, "a": 1.0, "c": True}, "op": "MatMulV3", "version": 0}
    spec = TreeSpec()
    spec.add("Ascend910B2", 24, "MatMulV3", [line, dict(line, info_dict={"m": 32}, id=2**70 + 3)])
    tree = spec.write(tmp_path / "tree")
    with Bank.open("sqlite://", create=True) as bank:
        import_paths(bank, [tree], None)
        export_tree(bank, tmp_path / "out", {})
    assert _tree(tmp_path / "out") == _tree(tree)
    written = (tmp_path / "out").rglob("*_runtime_kb.json").__next__().read_text().splitlines()[0]
    assert written.startswith('{"id":1180591620717411303427,') and '"a":1.0' in written


def test_a_value_of_another_type_is_a_change(tmp_path: Path) -> None:
    """1, 1.0 and true are three values: a release that writes 1.0 where it wrote 1 changed."""
    line = {"id": 7, "info_dict": {"m": 16}, "knowledge": {"a": 1}, "op": "MatMulV3", "version": 0}
    first, second = TreeSpec(), TreeSpec()
    first.add("Ascend910B2", 24, "MatMulV3", [line])
    second.add("Ascend910B2", 24, "MatMulV3", [dict(line, knowledge={"a": 1.0})])
    with Bank.open("sqlite://", create=True) as bank:
        import_paths(bank, [first.write(tmp_path / "a")], None)
        report = import_paths(bank, [second.write(tmp_path / "b")], None)
        assert report.files[0].tree is not None and report.files[0].tree.changed == 1
        assert json.dumps(bank.policies()[0].knowledge) == '{"a": 1.0}'


def test_a_repeated_entry_is_kept_once_and_a_conflicting_one_refused(tmp_path: Path) -> None:
    line = {"id": 7, "info_dict": {"m": 16}, "knowledge": {"a": 1}, "op": "MatMulV3", "version": 0}
    spec = TreeSpec()
    spec.add("Ascend910B2", 24, "MatMulV3", [line, line])
    read = read_tree(spec.write(tmp_path / "same"))
    assert len(read.entries) == 1 and "line 2: repeats" in str(read.gaps[0])
    spec.files[next(iter(spec.files))] = [line, dict(line, knowledge={"a": 2})]
    with Bank.open("sqlite://", create=True) as bank:
        with pytest.raises(BankError, match=r"line 2: the same chip, cores, op and info_dict as "
                                            r".*: line 1, with other content"):
            import_paths(bank, [spec.write(tmp_path / "other")], None)
        assert bank.head() == 0


@pytest.mark.parametrize(("name", "text", "message"), [
    ("Ascend910B2_24_AiCore_MatMulV3_runtime_kb.json", '{"id": 1, "info_dict": {}, "knowledge": {}, '
     '"op": "MatMulV3", "version": 0}\n{"id": 1,', "line 2: "),
    ("Ascend910B2_24_AiCore_MatMulV3_runtime_kb.json", '{"id": true, "info_dict": {}, "knowledge": '
     '{}, "op": "MatMulV3", "version": 0}\n', "line 1: id must be a whole number"),
    ("Ascend910B2_24_AiCore_MatMulV3_runtime_kb.json", '{"id": 1, "info_dict": {}, "knowledge": '
     '{"a": NaN}, "op": "MatMulV3", "version": 0}\n', "line 1: knowledge.a is nan"),
    ("Ascend910B2_24_AiCore_MatMulV3_runtime_kb.json", '{"id": 1, "info_dict": {}, "knowledge": '
     '{}, "op": "../../evil", "version": 0}\n', "line 1: op '../../evil' is not a plain name"),
    ("Ascend\x1b[31m_24_AiCore_MatMulV3_runtime_kb.json", "", "the chip in the name"),
    ("MatMulV3_runtime_kb.json", "", "name is not {soc}_{cores}_AiCore_{op}_runtime_kb.json"),
])
def test_a_line_or_a_name_that_is_not_an_entry_refuses_the_import(
        tmp_path: Path, name: str, text: str, message: str) -> None:
    folder = tmp_path / "tree" / "chip" / "unified_bank"
    folder.mkdir(parents=True)
    (folder / name).write_text(text, encoding="utf-8")
    with Bank.open("sqlite://", create=True) as bank:
        with pytest.raises(BankError) as raised:
            import_paths(bank, [tmp_path / "tree"], None)
        assert message in str(raised.value) and "\n" not in str(raised.value)
        assert bank.head() == 0


def _machines(tmp_path: Path) -> tuple[Path, Path, int]:
    """Two machines' trees: shared chips, B changed two entries and added three, and A holds a
    chip B lacks. Returns the trees and how many keys their union holds."""
    spec_a = quirky_tree(seed=1)
    spec_b = quirky_tree(seed=1)
    name = next(p for p in spec_b.files if "Ascend950PR_9589" in p)
    lines = spec_b.files[name]
    lines[0] = dict(lines[0], knowledge={**lines[0]["knowledge"], "baseM": 4096})
    lines[1] = dict(lines[1], knowledge={**lines[1]["knowledge"], "stepM": 99})
    import random

    rng = random.Random(5)
    lines += [entry(rng, 900 + n, 32) for n in range(3)]
    spec_b.files = {p: v for p, v in spec_b.files.items() if "MC62CM12AA" not in p}
    return spec_a.write(tmp_path / "A"), spec_b.write(tmp_path / "B"), 17 + 3


def test_two_machines_trees_merge_to_the_union_with_the_changed_entries_reported(tmp_path: Path) -> None:
    tree_a, tree_b, union = _machines(tmp_path)
    with freeze_time("2026-12-01T09:00:00Z"), Bank.open(str(tmp_path / "a.db"), create=True) as a:
        import_paths(a, [tree_a], None)
    with freeze_time("2026-12-02T09:00:00Z"), Bank.open(str(tmp_path / "b.db"), create=True) as b:
        import_paths(b, [tree_b], None)
    with Bank.open(str(tmp_path / "a.db")) as a, Bank.open(str(tmp_path / "b.db")) as b:
        report = merge_into(a, b)
        assert reads.policy_count(a.store) == union  # nothing lost
        assert report.new_keys == 3 and report.newer == 2
        assert len(report.conflicts) == 2 and {c.rule for c in report.conflicts} == {"newer"}
        merged = {p.repo_key: p.knowledge for p in a.policies()}
        from_b = {p.repo_key: p.knowledge for p in b.policies()}
        assert all(merged[c.repo_key] == from_b[c.repo_key] for c in report.conflicts)
        assert a.verify().ok
    with Bank.open(str(tmp_path / "b.db")) as b, Bank.open(str(tmp_path / "a.db")) as a:
        merge_into(b, a)  # the other way round: the same entries hold
        assert {p.repo_key: p.knowledge for p in b.policies()} == merged


def test_two_trees_in_one_import_the_last_given_wins(tmp_path: Path) -> None:
    tree_a, tree_b, union = _machines(tmp_path)
    with Bank.open("sqlite://", create=True) as bank:
        report = import_paths(bank, [tree_a, tree_b], None)
        assert report.files[1].tree is not None and report.files[1].tree.changed == 2
        assert reads.policy_count(bank.store) == union
        found = diff_policies(bank.policies(), tree_policies(read_tree(tree_b)))
        assert not found.changed  # every entry B holds is B's


def test_diff_of_two_trees_names_added_changed_and_gone(tmp_path: Path) -> None:
    tree_a, tree_b, _ = _machines(tmp_path)
    found = diff_policies(tree_policies(read_tree(tree_a)), tree_policies(read_tree(tree_b)))
    assert (len(found.only_b), len(found.changed), len(found.only_a)) == (3, 2, 1)
    assert found.only_a[0].soc_version == "MC62CM12AA"


def test_a_renamed_chip_and_an_emptied_bank_are_history(tmp_path: Path) -> None:
    """Releases rename a chip and empty a bank to {}: the old entries stay in the log (a bank
    keeps what it was told), the import names the emptied file, and a diff of the releases'
    trees names the entries gone and added."""
    line = {"id": 7, "info_dict": {"m": 16}, "knowledge": {"a": 1}, "op": "MatMulV3", "version": 0}
    old, new = TreeSpec(), TreeSpec()
    old.add("Ascend910_9579", 32, "MatMulV3", [line])
    old.add("Ascend910B2", 24, "MatMulV3", [dict(line, info_dict={"m": 32})], Quirks(bom=True))
    new.add("Ascend950PR_9579", 32, "MatMulV3", [line])
    new.raw["Ascend910B2/unified_bank/Ascend910B2_24_AiCore_MatMulV3_runtime_kb.json"] = "{}\n"
    with Bank.open("sqlite://", create=True) as bank:
        import_paths(bank, [old.write(tmp_path / "r1")], None)
        report = import_paths(bank, [new.write(tmp_path / "r2")], None)
        assert any("{} holds no entry" in gap for gap in report.files[0].gaps)
        assert {p.soc_version for p in bank.policies()} == {"Ascend910_9579", "Ascend910B2",
                                                            "Ascend950PR_9579"}
        assert bank.verify().ok
    found = diff_policies(tree_policies(read_tree(tmp_path / "r1")),
                          tree_policies(read_tree(tmp_path / "r2")))
    assert {p.soc_version for p in found.only_a} == {"Ascend910_9579", "Ascend910B2"}
    assert [p.soc_version for p in found.only_b] == ["Ascend950PR_9579"]
