"""Real AOE banks, as CANN ships them (issue 27): read in place from ../shared/aoe-banks, never
copied into the project. Each imports without an error, comes back through an export entry for
entry and file for file, adds nothing when imported again, and leaves a bank that verifies;
the five releases of one file, imported in order, end at the newest and keep every version."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from freezegun import freeze_time

from tests.seams import import_paths
from tunebank.bank import Bank
from tunebank.bank.exchange.exports import export_tree
from tunebank.bank.formats.aoe_repo import bank_files, read_tree
from tunebank.bank.store import reads

_CANDIDATES = (Path(__file__).resolve().parents[3] / "shared" / "aoe-banks",
               Path("/work/shared/aoe-banks"))
SAMPLES = next((path for path in _CANDIDATES if path.is_dir()), _CANDIDATES[0])
CHIPS = sorted(p for p in SAMPLES.glob("*") if p.is_dir() and p.name != "releases")
RELEASES = sorted((SAMPLES / "releases").glob("*"), key=lambda p: int(p.name.split("_")[0]))

if not SAMPLES.is_dir():  # CI must have them: a missing sample is a failure there, not a skip
    if os.environ.get("CI") == "true":
        raise RuntimeError(f"{SAMPLES}: the real AOE banks the tests read are missing")
    pytest.skip(f"{SAMPLES} is not on this machine", allow_module_level=True)


def _entries(path: Path) -> list[str]:
    """A file's entries as their JSON text, keys in the file's order (so the order of fields
    and 1 against 1.0 both count); blank lines and ``{}`` hold none."""
    text = path.read_text(encoding="utf-8-sig")
    values = [json.loads(line) for line in text.splitlines() if line.strip()]
    return [json.dumps(value) for value in values if value]


def _tree(root: Path) -> dict[str, list[str]]:
    return {p.relative_to(root).as_posix(): _entries(p) for p in bank_files(root)}


def _chips_tree() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for chip in CHIPS:
        found.update({f"{chip.name}/{name}": lines for name, lines in _tree(chip).items()})
    return found


def test_the_samples_are_the_real_ones() -> None:
    """What the README says they hold: 9 files of 4 chips, one a bare {}, one with a BOM."""
    files = [p for chip in CHIPS for p in bank_files(chip)]
    assert len(files) == 9 and len(CHIPS) == 4
    assert any(p.read_bytes().startswith(b"\xef\xbb\xbf") for p in files)
    assert any(p.read_bytes().strip() == b"{}" for p in files)
    assert len(RELEASES) == 5


def test_every_sample_imports_round_trips_and_re_imports_adding_nothing(tmp_path: Path) -> None:
    with Bank.open(str(tmp_path / "bank.db"), create=True) as bank:
        first = import_paths(bank, CHIPS, None)
        entries = sum(len(lines) for lines in _chips_tree().values())
        new = sum(f.tree.new for f in first.files if f.tree)
        assert new == entries == reads.policy_count(bank.store)
        gaps = [gap for f in first.files for gap in f.gaps]
        assert len(gaps) == 1 and "FUSE_8_AiCore_ExtendConvTranspose" in gaps[0]
        export_tree(bank, tmp_path / "out", {})
        assert _tree(tmp_path / "out") == _chips_tree()  # entry for entry, file for file
        head = bank.head()
        again = import_paths(bank, CHIPS, None)
        assert again.appended == 0 and bank.head() == head
        assert all(f.tree is not None and f.tree.new == f.tree.changed == 0 for f in again.files)
        assert import_paths(bank, [tmp_path / "out"], None).appended == 0
        assert bank.verify().ok


def test_two_core_counts_of_one_chip_stay_two_entries(tmp_path: Path) -> None:
    folder = SAMPLES / "Ascend910_9382" / "unified_bank"
    sixteen = read_tree(folder / "Ascend910_9382_16_AiCore_MatMulV3_runtime_kb.json").entries
    twenty_four = read_tree(folder / "Ascend910_9382_24_AiCore_MatMulV3_runtime_kb.json").entries
    infos = {json.dumps(e.entry.info_dict, sort_keys=True) for e in twenty_four}
    both = [e for e in sixteen if json.dumps(e.entry.info_dict, sort_keys=True) in infos]
    assert both  # the README's two info_dicts held on both core counts
    with Bank.open("sqlite://", create=True) as bank:
        import_paths(bank, [SAMPLES / "Ascend910_9382"], None)
        knowledge = {p.repo_key: p.knowledge for p in bank.policies()}
    for entry in both:
        assert knowledge[entry.repo_key] == entry.entry.knowledge


def _history(bank: Bank) -> dict[str, list[dict[str, Any]]]:
    versions: dict[str, list[dict[str, Any]]] = {}
    for stored in bank.history(op_type="Conv3DBackpropInputV2"):
        if stored.event.kind in ("add", "update"):
            versions.setdefault(stored.event.repo_key or "", []).append(stored.event.payload)
    return versions


def test_releases_imported_in_order_end_at_the_newest_and_keep_every_version(tmp_path: Path) -> None:
    with Bank.open(str(tmp_path / "bank.db"), create=True) as bank:
        for day, release in enumerate(RELEASES, 1):
            with freeze_time(f"2026-12-{day:02d}T10:00:00Z"):
                import_paths(bank, [release], None)
        assert bank.verify().ok
        export_tree(bank, tmp_path / "out", {})
        assert _tree(tmp_path / "out") == _tree(RELEASES[-1])
        versions = _history(bank)
    # each entry's versions, oldest first: the releases in which it came or changed, each
    # with the tree and the file it came from
    per_release = [{e.repo_key: e.entry.knowledge for e in read_tree(r).entries} for r in RELEASES]
    for key, payloads in versions.items():
        expected: list[tuple[str, Any]] = []
        for release, table in zip(RELEASES, per_release, strict=True):
            if key in table and (not expected or expected[-1][1] != table[key]):
                expected.append((str(release), table[key]))
        assert [(p["source"]["tree"], p["knowledge"]) for p in payloads] == expected
        assert all(p["source"]["file"].endswith("Conv3DBackpropInputV2_runtime_kb.json")
                   for p in payloads)
    assert len(versions) == 7 and max(len(v) for v in versions.values()) >= 3
