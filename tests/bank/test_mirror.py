"""Release mirroring (issue 41): `bank import --mirror` takes the trees given as the whole new
state of the bank's AOE knowledge. An entry they no longer hold (a release withdrew it, its
file was emptied to ``{}``, its chip was renamed) gets a ``withdrawn`` event: the log keeps
every version, ``query`` and ``export`` leave it out, its history ends in the withdrawal, and
a plain (union) import is as it was.

The releases are CANN's real ones (../shared/aoe-banks/releases, read in place), and trees
made from them here: a FUSE bank whose entry is another operator's, then emptied, and a chip
renamed between two releases, as CANN's repository did."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from freezegun import freeze_time
from typer.testing import CliRunner

from tests.bank.test_real_banks import RELEASES, _entries
from tunebank.bank import Bank
from tunebank.bank.formats.aoe_repo import bank_files, read_tree
from tunebank.cli.main import app

runner = CliRunner()
FILE = "Ascend950PR_9589_32_AiCore_Conv3DBackpropInputV2_runtime_kb.json"
FUSE = "FUSE_8_AiCore_ExtendConvTranspose_runtime_kb.json"


def _release_lines(number: int) -> list[str]:
    release = next(r for r in RELEASES if r.name.startswith(f"{number}_"))
    return _entries(release / "Ascend950PR_9589" / "unified_bank" / FILE)


def _tree(root: Path, files: dict[str, list[str] | str]) -> Path:
    """A bank tree under ``root``: each ``chip/file`` with its lines (or its whole text)."""
    for name, lines in files.items():
        chip, file = name.split("/")
        path = root / chip / "unified_bank" / file
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(lines if isinstance(lines, str) else "\n".join(lines) + "\n", encoding="utf-8")
    return root


def _renamed(lines: list[str], chip: str) -> tuple[str, list[str]]:
    return f"{chip}/{FILE.replace('Ascend950PR_9589', chip)}", lines


@pytest.fixture
def releases(tmp_path: Path) -> list[Path]:
    """Three releases of a bank: CANN's file as of release 13 with a FUSE bank holding one
    Conv3DBackpropInputV2 entry and a chip Ascend910_9579; then release 16's file, the FUSE bank
    emptied to ``{}`` and the chip renamed to Ascend950PR_9579; then release 27's file alone."""
    old = _renamed(_release_lines(11), "Ascend910_9579")
    new = _renamed(_release_lines(11), "Ascend950PR_9579")
    return [
        _tree(tmp_path / "r1", {f"Ascend950PR_9589/{FILE}": _release_lines(13),
                                f"FUSE/{FUSE}": _release_lines(13)[:1], old[0]: old[1]}),
        _tree(tmp_path / "r2", {f"Ascend950PR_9589/{FILE}": _release_lines(16),
                                f"FUSE/{FUSE}": "{}", new[0]: new[1]}),
        _tree(tmp_path / "r3", {f"Ascend950PR_9589/{FILE}": _release_lines(27)}),
    ]


def _import(db: Path, *args: str) -> Any:
    result = runner.invoke(app, ["import", *args, "--db", str(db), "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _held(tree: Path) -> set[tuple[str, str]]:
    return {(e.soc_version, e.repo_key) for e in read_tree(tree).entries}


def _current(db: Path) -> set[tuple[str, str]]:
    with Bank.open(str(db)) as bank:
        return {(p.soc_version, p.repo_key) for p in bank.policies()}


def test_mirrored_releases_end_as_the_newest_tree_entry_for_entry(releases: list[Path],
                                                                   tmp_path: Path) -> None:
    db = tmp_path / "b.db"
    for n, release in enumerate(releases):
        with freeze_time(f"2026-12-0{n + 1} 08:00:00"):
            _import(db, str(release), "--mirror")
        assert _current(db) == _held(release)  # after every release, not only the last
    out = tmp_path / "out"
    assert runner.invoke(app, ["export", "--format", "aoe-repo", "--out", str(out), "--db",
                               str(db)]).exit_code == 0
    written = {p.relative_to(out).as_posix(): _entries(p) for p in bank_files(out)}
    newest = {p.relative_to(releases[-1]).as_posix(): _entries(p) for p in bank_files(releases[-1])}
    assert {k: v for k, v in written.items() if v} == newest  # the withdrawn are left out
    with Bank.open(str(db)) as bank:
        assert bank.verify().ok
        assert bank.rebuild().policies == len(newest[f"Ascend950PR_9589/unified_bank/{FILE}"])


def test_each_withdrawn_entry_s_history_ends_in_its_withdrawal_with_the_tree(
        releases: list[Path], tmp_path: Path) -> None:
    db = tmp_path / "b.db"
    for n, release in enumerate(releases):
        with freeze_time(f"2026-12-0{n + 1} 08:00:00"):
            _import(db, str(release), "--mirror")
    gone = _held(releases[0]) - _held(releases[-1])
    assert {soc for soc, _ in gone} == {"FUSE", "Ascend910_9579"}
    for soc, key in gone:
        with Bank.open(str(db)) as bank:
            history = bank.history(repo_key=key, soc_version=soc)
        assert [s.event.kind for s in history][-1] == "withdrawn"
        assert history[-1].event.payload["source"]["tree"] == str(releases[1])
    # the FUSE entry is found by its file's operator, withdrawn or not
    found = runner.invoke(app, ["history", "--db", str(db), "--op-type", "ExtendConvTranspose",
                                "--json"])
    assert [e["kind"] for e in json.loads(found.stdout)] == ["add", "withdrawn"]


def test_a_dry_run_lists_what_would_be_withdrawn_and_writes_nothing(releases: list[Path],
                                                                    tmp_path: Path) -> None:
    db = tmp_path / "b.db"
    _import(db, str(releases[0]), "--mirror")
    before = db.read_bytes()
    planned = _import(db, str(releases[1]), "--mirror", "--dry-run")
    assert planned["dry_run"] is True
    assert {(w["soc_version"], w["op_type"]) for w in planned["withdrawn"]} == \
        {("FUSE", "Conv3DBackpropInputV2"), ("Ascend910_9579", "Conv3DBackpropInputV2")}
    assert len(planned["withdrawn"]) == 1 + len(_release_lines(11))
    assert db.read_bytes() == before
    shown = runner.invoke(app, ["import", str(releases[1]), "--mirror", "--dry-run", "--db", str(db)])
    assert "would be withdrawn" in shown.stdout and "nothing was written" in shown.stdout
    done = _import(db, str(releases[1]), "--mirror")
    assert {(w["soc_version"], w["repo_key"]) for w in done["withdrawn"]} == \
        {(w["soc_version"], w["repo_key"]) for w in planned["withdrawn"]}
    tasks = json.loads(runner.invoke(app, ["tasks", "--db", str(db), "--json"]).stdout)
    assert sum(t["withdrawn_num"] for t in tasks) == len(done["withdrawn"])
    assert all(t["repo_summary"]["total_num"] == 0 for t in tasks if t["withdrawn_num"])
    table = runner.invoke(app, ["tasks", "--db", str(db)]).stdout
    assert table.splitlines()[0].split()[-1] == "withdrawn"


def test_a_union_import_withdraws_nothing_and_a_re_added_entry_comes_back(
        releases: list[Path], tmp_path: Path) -> None:
    db = tmp_path / "b.db"
    with freeze_time("2026-12-01 08:00:00"):
        _import(db, str(releases[0]))
    with freeze_time("2026-12-02 08:00:00"):
        union = _import(db, str(releases[2]))
    assert "withdrawn" not in union and _current(db) == _held(releases[0]) | _held(releases[2])
    with freeze_time("2026-12-03 08:00:00"):
        _import(db, str(releases[2]), "--mirror")
    assert _current(db) == _held(releases[2])
    with freeze_time("2026-12-04 08:00:00"):
        _import(db, str(releases[0]), "--mirror")  # an older release mirrored again: it is back
    assert _current(db) == _held(releases[0])
    with Bank.open(str(db)) as bank:
        assert bank.verify().ok


def test_a_measured_entry_is_never_withdrawn(releases: list[Path], tmp_path: Path) -> None:
    """A tree is AOE's knowledge; a time measured here is the team's own, and a release does
    not take it back."""
    from tunebank.bank import EventKind, Outcome

    db = tmp_path / "b.db"
    _import(db, str(releases[0]), "--mirror")
    soc, key = sorted(_held(releases[0]) - _held(releases[2]))[0]
    with Bank.open(str(db)) as bank:
        info = bank.history(repo_key=key, soc_version=soc)[0].event.payload["info_dict"]
        task = bank.start_task(soc, tuning_name="measured")
        bank.record(task, [Outcome(EventKind.HIT, key, info_dict=info),
                           Outcome(EventKind.UPDATE, key, info_dict=info, knowledge={"t": 1},
                                   performance_after_us=3.0, backend="sim")])
        bank.finish_task(task)
    done = _import(db, str(releases[2]), "--mirror")
    assert (soc, key) not in {(w["soc_version"], w["repo_key"]) for w in done["withdrawn"]}
    assert (soc, key) in _current(db)


def _two_banks_one_mirrored(releases: list[Path], tmp_path: Path) -> tuple[Path, Path]:
    """Banks a and b that imported the first release alike; a then mirrored the last."""
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    with freeze_time("2026-12-01 08:00:00"):
        _import(a, str(releases[0]))
        _import(b, str(releases[0]))
    with freeze_time("2026-12-02 08:00:00"):
        _import(a, str(releases[2]), "--mirror")
    return a, b


def test_banks_merged_either_way_agree_on_withdrawals(releases: list[Path], tmp_path: Path) -> None:
    """The fold reads only the events: an entry recorded before a withdrawal of its key is
    retired whichever bank it arrives from, and in whichever order."""
    a, b = _two_banks_one_mirrored(releases, tmp_path)
    with freeze_time("2026-12-03 08:00:00"):
        _import(b, str(releases[1]))  # later than a's withdrawal: r2's entries hold
    for into, other in ((a, b), (b, a)):
        assert runner.invoke(app, ["merge", str(other), "--db", str(into)]).exit_code == 0
    assert _current(a) == _current(b)
    assert ("FUSE", next(k for s, k in _held(releases[0]) if s == "FUSE")) not in _current(a)
    assert {s for s, _ in _current(a)} == {"Ascend950PR_9589", "Ascend950PR_9579"}


def test_mirror_takes_bank_trees_only(tmp_path: Path) -> None:
    source = Path(__file__).resolve().parents[2] / "fixtures" / "aoe"
    result = runner.invoke(app, ["import", str(next(source.glob("*.json"))), "--soc-version",
                                 "Ascend310", "--mirror", "--db", str(tmp_path / "b.db")])
    assert result.exit_code == 2
    assert "--mirror: takes AOE bank trees only" in result.stderr
    assert not (tmp_path / "b.db").exists()


def test_a_merge_says_how_many_entries_the_source_s_withdrawals_retired(
        releases: list[Path], tmp_path: Path) -> None:
    a, b = _two_banks_one_mirrored(releases, tmp_path)
    merged = runner.invoke(app, ["merge", str(a), "--db", str(b), "--json"])
    (report,) = json.loads(merged.stdout)
    assert report["policies_withdrawn"] == len(_held(releases[0]) - _held(releases[2])) > 0
    assert _current(b) == _held(releases[2])
    shown = runner.invoke(app, ["merge", str(a), "--db", str(tmp_path / "c.db")])
    assert "withdrawn by the source's mirror imports" not in shown.stdout  # a new bank held none
