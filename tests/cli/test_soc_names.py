"""Every command takes the same chip names (issue 16): those `bank socs` lists and those the
bank already holds; a wrong case is refused with the name meant, and a chip tunebank does not
know is imported only with --allow-unknown-soc (from a result file; a bank tree is AOE's own word
for its chips, issue 27)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.hostile import refused_or_sound
from tunebank.cli.main import app

ROOT = Path(__file__).resolve().parents[2]
RESULT = ROOT / "fixtures" / "aoe" / "aoe_result_opat_20240315143005123_4711.json"
MODEL = ROOT / "fixtures" / "models" / "squeezenet.onnx"
runner = CliRunner()


@pytest.fixture
def bank(tmp_path: Path) -> Path:
    path = tmp_path / "bank" / "bank.db"
    path.parent.mkdir()
    result = runner.invoke(app, ["import", str(RESULT), "--soc-version", "Ascend310", "--db", str(path)])
    assert result.exit_code == 0, result.output
    return path


def commands(soc: str, bank: Path) -> list[list[str]]:
    chip = ["--soc-version", soc]
    return [["import", str(RESULT), *chip], ["tune", str(MODEL), *chip, "--budget", "1"],
            ["plan", str(MODEL), *chip], ["tasks", *chip], ["query", *chip],
            ["history", "--op-type", "conv2d", *chip],
            ["report", "--out", str(bank.parent / "r.html"), *chip],
            ["diff", str(bank), str(bank), *chip]]


@pytest.mark.parametrize("soc", ["ascend310", "ASCEND310", "AsCeNd310"])
def test_a_wrong_case_is_refused_by_every_command_with_the_name_meant(soc: str, bank: Path) -> None:
    for args in commands(soc, bank):
        result = refused_or_sound([*args, "--db", str(bank)], bank)
        assert result.exit_code == (2 if args[0] == "diff" else 1), (args, result.output)
        assert "did you mean 'Ascend310'?" in result.stderr, (args, result.stderr)
    assert not (bank.parent / "r.html").exists()


def test_an_unknown_chip_needs_the_opt_in_then_every_reader_takes_it(bank: Path) -> None:
    chip = ["--soc-version", "Ascend999"]
    refused = refused_or_sound(["import", str(RESULT), *chip, "--db", str(bank)], bank)
    assert refused.exit_code == 1 and "--allow-unknown-soc" in refused.stderr
    for args in commands("Ascend999", bank)[1:]:  # no bank holds it yet: the others refuse it too,
        other = refused_or_sound([*args, "--db", str(bank)], bank)  # and name no flag they lack
        assert other.exit_code != 0 and "unknown soc_version 'Ascend999'" in other.stderr, args
        assert "--allow-unknown-soc" not in other.stderr, args
    taken = refused_or_sound(["import", str(RESULT), *chip, "--allow-unknown-soc", "--db", str(bank)],
                             bank)
    assert taken.exit_code == 0 and "38 event(s) added" in taken.stdout
    for args in commands("Ascend999", bank)[3:]:
        assert refused_or_sound([*args, "--db", str(bank)], bank).exit_code == 0, args
    again = refused_or_sound(["import", str(RESULT), "--soc-version", "ASCEND999", "--allow-unknown-soc",
                              "--db", str(bank)], bank)  # one chip, one name, opt-in or not
    assert again.exit_code == 1 and "did you mean 'Ascend999'?" in again.stderr
    tune = refused_or_sound(["tune", str(MODEL), *chip, "--db", str(bank)], bank)  # no cost model
    assert tune.exit_code == 1


def _renamed_tree(bank: Path, tmp_path: Path, chip: str) -> Path:
    tree = tmp_path / "tree"
    if not tree.exists():
        assert runner.invoke(app, ["export", "--format", "aoe-repo", "--out", str(tree), "--db",
                                   str(bank)]).exit_code == 0
    renamed = tmp_path / chip
    for path in tree.rglob("*"):
        target = renamed / str(path.relative_to(tree)).replace("Ascend310", chip)
        if path.is_dir():
            target.mkdir(parents=True, exist_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
    return renamed


def test_a_bank_tree_is_aoe_word_for_its_chips(bank: Path, tmp_path: Path) -> None:
    """A tree's chips are AOE's (issue 27): one tunebank cannot tune is taken as data and named
    in the closing lines, and one differing only in case from a chip known is named too."""
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    db = fresh / "bank.db"
    taken = refused_or_sound(["import", str(_renamed_tree(bank, tmp_path, "Ascend777")),
                              "--db", str(db)], db)
    assert taken.exit_code == 0, taken.output
    assert "chips tunebank's tuner cannot tune, kept as data: Ascend777" in taken.output
    cased = refused_or_sound(["import", str(_renamed_tree(bank, tmp_path, "ASCEND310")),
                              "--db", str(db)], db)
    assert cased.exit_code == 0, cased.output
    assert "ASCEND310 differs only in case from Ascend310" in cased.output
