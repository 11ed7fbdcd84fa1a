"""A forged events file: what the hash chain catches, and what only an anchored head catches.

These tests pin down docs/reliability.md: a payload changed without recomputing the hashes is
caught by the chain alone; one whose ids and hashes were recomputed is a consistent chain that
imports, until it is checked against a head recorded elsewhere (`bank verify --head`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from freezegun import freeze_time
from typer.testing import CliRunner

from fixtures.demo_bank import build
from tests.conftest import oc
from tunebank.bank import Bank
from tunebank.bank.canonical import canonical_json
from tunebank.bank.events import GENESIS_HASH, chain_hash, event_id_of
from tunebank.bank.formats.jsonl import write_event_rows
from tunebank.cli.main import app

runner = CliRunner()


def _export(db: Path, out: Path) -> str:
    """Export the bank's log to ``out``; return its head as `bank verify --head` prints it."""
    with Bank.open(str(db)) as bank, out.open("w", encoding="utf-8") as handle:
        write_event_rows(handle, bank.event_rows(), bank.bank_id)
    head = json.loads(runner.invoke(app, ["verify", "--db", str(db), "--json"]).stdout)["head"]
    return str(head)


def _forge(source: Path, target: Path, seq: int, change: dict[str, Any], rechain: bool) -> None:
    """Copy an events file with event ``seq``'s payload changed; with ``rechain``, recompute its
    id and every hash after it, as a forger who knows the format would."""
    header, *rows = [json.loads(line) for line in source.read_text().splitlines()]
    prev = GENESIS_HASH
    for row in rows:
        if row["seq"] == seq:
            row["payload"] = {**row["payload"], **change}
        if rechain and row["seq"] >= seq:
            content = {k: row[k] for k in ("kind", "soc_version", "repo_key", "task_id", "op_name",
                                           "op_type", "recorded_at", "origin")}
            content["payload"] = canonical_json(row["payload"])
            row["event_id"] = event_id_of(content)
            row["prev_hash"] = prev
            row["hash"] = chain_hash(prev, row["seq"], row["event_id"], content)
        prev = row["hash"]
    target.write_text("\n".join(json.dumps(r) for r in [header, *rows]) + "\n")


@pytest.fixture
def genuine(tmp_path: Path) -> tuple[Path, str]:
    db = tmp_path / "team.db"
    with freeze_time("2026-11-30 08:15:00"):
        build(str(db))
    return db, _export(db, tmp_path / "team.jsonl")


def _import(path: Path, db: Path, *extra: str) -> Any:
    return runner.invoke(app, ["import", str(path), "--db", str(db), *extra])


def test_a_changed_payload_without_new_hashes_is_caught_by_the_chain(
        genuine: tuple[Path, str], tmp_path: Path) -> None:
    forged = tmp_path / "forged.jsonl"
    _forge(tmp_path / "team.jsonl", forged, 4, {"performance_after_us": 1.0}, rechain=False)
    result = _import(forged, tmp_path / "b.db")
    assert result.exit_code == 1 and "line 5 (seq 4): event_id does not match" in result.stderr
    assert not (tmp_path / "b.db").exists()


def test_a_rechained_forgery_passes_alone_and_fails_against_the_anchor(
        genuine: tuple[Path, str], tmp_path: Path) -> None:
    _, anchor = genuine
    forged = tmp_path / "forged.jsonl"
    _forge(tmp_path / "team.jsonl", forged, 4, {"performance_after_us": 1.0}, rechain=True)
    alone = _import(forged, tmp_path / "fooled.db")
    assert alone.exit_code == 0  # a consistent chain: nothing in the file itself gives it away
    assert "not checked against an anchor" in alone.stdout
    fooled_head = json.loads(runner.invoke(app, ["verify", "--db", str(tmp_path / "fooled.db"),
                                                 "--json"]).stdout)["head"]
    assert fooled_head != anchor and fooled_head.split(":")[0] == anchor.split(":")[0]
    checked = _import(forged, tmp_path / "careful.db", "--expect-head", anchor)
    assert checked.exit_code == 1
    assert checked.stderr.startswith(f"bank: error: {forged}: at seq 13 the hash is ")
    assert checked.stderr.rstrip().endswith("its history differs from the anchored one")
    assert not (tmp_path / "careful.db").exists()
    genuine_import = _import(tmp_path / "team.jsonl", tmp_path / "careful.db", "--expect-head", anchor)
    assert genuine_import.exit_code == 0 and "matches --expect-head" in genuine_import.stdout


def test_an_anchor_vouches_for_history_up_to_its_seq_and_no_further(
        genuine: tuple[Path, str], tmp_path: Path) -> None:
    db, anchor = genuine
    with Bank.open(str(db)) as bank:  # the team goes on working after the anchor was recorded
        task = bank.start_task("Ascend310", tuning_name="later")
        bank.record(task, [oc("add", "later-key")])
        bank.finish_task(task)
    later = tmp_path / "later.jsonl"
    _export(db, later)
    assert _import(later, tmp_path / "a.db", "--expect-head", anchor).exit_code == 0
    forged = tmp_path / "forged-after.jsonl"
    _forge(later, forged, 15, {"performance_after_us": 1.0}, rechain=True)  # after seq 13
    assert _import(forged, tmp_path / "b.db", "--expect-head", anchor).exit_code == 0
    forged_before = tmp_path / "forged-before.jsonl"
    _forge(later, forged_before, 2, {"performance_after_us": 1.0}, rechain=True)
    assert _import(forged_before, tmp_path / "c.db", "--expect-head", anchor).exit_code == 1


@pytest.mark.parametrize(("value", "message"), [
    ("xyz", "is not HASH or SEQ:HASH"), ("12:" + "0" * 63, "is not HASH or SEQ:HASH"),
    ("a:" + "0" * 64, "is not HASH or SEQ:HASH"),
])
def test_a_malformed_anchor_is_a_usage_error(genuine: tuple[Path, str], tmp_path: Path, value: str,
                                            message: str) -> None:
    result = _import(tmp_path / "team.jsonl", tmp_path / "b.db", "--expect-head", value)
    assert result.exit_code == 1 and message in result.stderr


def test_verify_head_prints_the_bank_and_its_last_link(genuine: tuple[Path, str]) -> None:
    db, anchor = genuine
    out = runner.invoke(app, ["verify", "--db", str(db), "--head"]).stdout.splitlines()
    with Bank.open(str(db)) as bank:
        assert out[-1] == f"head of bank {bank.bank_id}: {anchor}"
        assert anchor == f"{bank.head()}:{list(bank.events())[-1].hash}"
