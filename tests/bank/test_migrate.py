"""Schema versions: an older bank is refused until `bank upgrade`, a newer one always.

The schema-2 to schema-6 banks are files written by earlier tunebank commits
(fixtures/banks/README.md); the tests upgrade copies of them and never the files themselves.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.conftest import oc
from tunebank.bank import Bank, BankError, upgrade_bank
from tunebank.bank.store.migrate import SchemaVersionError
from tunebank.bank.store.schema.tables import SCHEMA_VERSION
from tunebank.cli.main import app

SCHEMA2 = Path(__file__).resolve().parents[2] / "fixtures" / "banks" / "schema2.db"
SCHEMA3 = SCHEMA2.with_name("schema3.db")
SCHEMA4 = SCHEMA2.with_name("schema4.db")
SCHEMA5 = SCHEMA2.with_name("schema5.db")
SCHEMA6 = SCHEMA2.with_name("schema6.db")
SCHEMA6_EXPORT = "49c1e10e834537e046acd363ddf571bf1bacfca2793a12f78f929113f22e1c94"
"""The digest of the aoe-repo tree that commit 87c6cc7 (schema 6) exported from schema6.db:
``sha256sum`` of each file, sorted by path, then of that list (fixtures/banks/README.md)."""
OLD_POLICY = ("soc_version, repo_key, info_digest, op_type, info_dict, knowledge, best_us, seq, "
              "task_id, event_id, origin, tune_mode, backend")
"""The policy columns every schema since 2 has (6 added recorded_at)."""
OLD_TASK = ("task_id, soc_version, origin, started_at, first_seq, last_seq, tuning_name, "
            "model_name, model_hash, job_type, search_mode, status, finished_at, tuning_time_s, "
            "model_baseline_ms, model_result_ms, failed_operators, add_num, hit_num, update_num, "
            "reserved_num, unsatisfied_num, open_hits")
"""The task columns every schema before 7 has (7 added withdrawn_num)."""
runner = CliRunner()


def _copy(tmp_path: Path, source: Path = SCHEMA2) -> Path:
    target = tmp_path / "old.db"
    shutil.copyfile(source, target)
    return target


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _raw(path: Path, query: str) -> list[tuple[object, ...]]:
    with sqlite3.connect(path) as conn:
        return conn.execute(query).fetchall()


def test_a_new_bank_records_this_version(tmp_path: Path) -> None:
    with Bank.open(str(tmp_path / "b.db"), create=True) as bank:
        assert bank.store.schema_version() == SCHEMA_VERSION == 7
    assert _raw(tmp_path / "b.db", "SELECT value FROM bank_meta WHERE name = 'schema_version'") == [("7",)]


FIXTURES = SCHEMA2.parents[1]
CHIP = ["--soc-version", "Ascend310"]


@pytest.mark.parametrize("command", [
    ["tasks"], ["verify"], ["rebuild"],
    ["tune", str(FIXTURES / "models" / "squeezenet.onnx"), *CHIP, "--budget", "4"],
    ["import", str(FIXTURES / "aoe" / "aoe_result_opat_20240315143005123_4711.json"), *CHIP],
])
def test_an_older_bank_is_refused_and_left_as_it_was(tmp_path: Path, command: list[str]) -> None:
    path = _copy(tmp_path)
    before = _digest(path)
    with pytest.raises(SchemaVersionError, match="bank schema 2 is older than this tunebank's 7; "
                                                 "run `bank upgrade`"):
        Bank.open(str(path))
    result = runner.invoke(app, [*command, "--db", str(path)])
    assert result.exit_code == 1
    assert result.stderr == f"bank: error: {path} (from --db): bank schema 2 is older than this " \
                            "tunebank's 7; run `bank upgrade` on it first (the log is kept as it is)\n"
    assert _digest(path) == before and [p.name for p in tmp_path.iterdir()] == ["old.db"]


def test_upgrading_the_schema_2_file_keeps_every_event_task_and_policy(tmp_path: Path) -> None:
    path = _copy(tmp_path)
    events = _raw(path, "SELECT seq, event_id, hash FROM events ORDER BY seq")
    tasks = _raw(path, "SELECT task_id, add_num, hit_num, update_num, reserved_num, unsatisfied_num, "
                       "status FROM task ORDER BY task_id")
    policies = _raw(path, "SELECT soc_version, repo_key, best_us, knowledge FROM policy ORDER BY 1, 2")
    report = upgrade_bank(str(path))
    assert (report.from_version, report.to_version, report.last_seq) == (2, 7, 90)
    with Bank.open(str(path)) as bank:
        verdict = bank.verify()
        assert verdict.ok and (verdict.events, verdict.tasks, verdict.policies) == (90, 6, 48)
        task = bank.start_task("Ascend310", tuning_name="after the upgrade")
        bank.record(task, [oc("add", "new-key")])
        bank.finish_task(task)
        assert bank.verify().ok
    assert _raw(path, "SELECT seq, event_id, hash FROM events WHERE seq <= 90 ORDER BY seq") == events
    assert [t for t in _raw(path, "SELECT task_id, add_num, hit_num, update_num, reserved_num, "
                                  "unsatisfied_num, status FROM task ORDER BY task_id")
            if t[0] != task] == tasks
    assert len(_raw(path, "SELECT 1 FROM policy")) == len(policies) + 1
    again = upgrade_bank(str(path))
    assert (again.from_version, again.to_version, again.steps) == (7, 7, ())


def test_upgrading_the_schema_3_file_reads_key_states_from_the_log(tmp_path: Path) -> None:
    path = _copy(tmp_path, SCHEMA3)
    events = _raw(path, "SELECT seq, event_id, hash FROM events ORDER BY seq")
    projection = _raw(path, f"SELECT {OLD_POLICY} FROM policy ORDER BY 1, 2, 3"), \
        _raw(path, f"SELECT {OLD_TASK} FROM task")
    report = upgrade_bank(str(path))
    assert (report.from_version, report.to_version, len(report.steps)) == (3, 7, 4)
    indexes = {row[0] for row in _raw(path, "SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert "ix_events_task_key" in indexes and "ix_events_task_id" not in indexes
    assert _raw(path, "SELECT name FROM sqlite_master WHERE name = 'task_key'") == []
    assert _raw(path, "SELECT seq, event_id, hash FROM events ORDER BY seq") == events
    assert (_raw(path, f"SELECT {OLD_POLICY} FROM policy ORDER BY 1, 2, 3"),
            _raw(path, f"SELECT {OLD_TASK} FROM task")) == projection
    with Bank.open(str(path)) as bank:
        assert bank.verify().ok
        running = bank.start_task("Ascend310", tuning_name="after the upgrade")
        bank.record(running, [oc("hit", "k1")])
        with pytest.raises(BankError, match="already has its hit"):
            bank.record(running, [oc("hit", "k1")])  # the hit's state comes from the log
        bank.record(running, [oc("reserved", "k1")])
        bank.finish_task(running)
        assert bank.verify().ok


def test_upgrading_the_schema_4_file_indexes_the_policies_by_seq(tmp_path: Path) -> None:
    path = _copy(tmp_path, SCHEMA4)
    events = _raw(path, "SELECT seq, event_id, hash FROM events ORDER BY seq")
    policies = _raw(path, f"SELECT {OLD_POLICY} FROM policy ORDER BY 1, 2, 3")
    plan = "EXPLAIN QUERY PLAN SELECT * FROM policy WHERE seq > 0 ORDER BY seq LIMIT 10"
    assert any("SCAN policy" in str(row) for row in _raw(path, plan))
    report = upgrade_bank(str(path))
    assert (report.from_version, report.to_version, len(report.steps)) == (4, 7, 3)
    assert any("ix_policy_seq" in str(row) for row in _raw(path, plan))
    assert _raw(path, "SELECT seq, event_id, hash FROM events ORDER BY seq") == events
    assert _raw(path, f"SELECT {OLD_POLICY} FROM policy ORDER BY 1, 2, 3") == policies
    with Bank.open(str(path)) as bank:
        verdict = bank.verify()
        assert verdict.ok and (verdict.events, verdict.tasks, verdict.policies) == (90, 6, 57)


def test_upgrading_the_schema_5_file_dates_each_policy_by_its_winning_event(tmp_path: Path) -> None:
    path = _copy(tmp_path, SCHEMA5)
    events = _raw(path, "SELECT seq, event_id, hash FROM events ORDER BY seq")
    policies = _raw(path, f"SELECT {OLD_POLICY} FROM policy ORDER BY 1, 2, 3")
    report = upgrade_bank(str(path))
    assert (report.from_version, report.to_version, len(report.steps)) == (5, 7, 2)
    assert "newer wins" in report.steps[0]
    assert _raw(path, "SELECT seq, event_id, hash FROM events ORDER BY seq") == events
    assert _raw(path, f"SELECT {OLD_POLICY} FROM policy ORDER BY 1, 2, 3") == policies
    assert _raw(path, "SELECT COUNT(*) FROM policy p JOIN events e ON e.seq = p.seq "
                      "WHERE p.recorded_at = e.recorded_at") == [(58,)]
    with Bank.open(str(path)) as bank:
        verdict = bank.verify()
        assert verdict.ok and (verdict.events, verdict.tasks, verdict.policies) == (90, 6, 58)


def _tree_digest(out: Path) -> str:
    """``find . -type f | sort | xargs sha256sum | sha256sum`` of a tree, in Python."""
    lines = "".join(f"{_digest(path)}  ./{path.relative_to(out)}\n"
                    for path in sorted(out.rglob("*"), key=lambda p: str(p.relative_to(out)))
                    if path.is_file())
    return hashlib.sha256(lines.encode()).hexdigest()


def test_upgrading_the_schema_6_file_finds_bank_file_operators_and_exports_as_before(
        tmp_path: Path) -> None:
    """Issue 41: schema 7 keeps each entry's bank-file operator (policy.file_op) and can hold
    withdrawals. The upgrade adds rows, never edits an event; the upgraded bank verifies, finds
    the FUSE entry by its file's operator, and exports byte for byte what schema 6 exported."""
    path = _copy(tmp_path, SCHEMA6)
    events = _raw(path, "SELECT * FROM events ORDER BY seq")
    report = upgrade_bank(str(path))
    assert (report.from_version, report.to_version, len(report.steps)) == (6, 7, 1)
    assert _raw(path, "SELECT * FROM events ORDER BY seq") == events
    with Bank.open(str(path)) as bank:
        verdict = bank.verify()
        assert verdict.ok and (verdict.events, verdict.tasks, verdict.policies) == (93, 7, 59)
    fused = runner.invoke(app, ["query", "--db", str(path), "--op-type", "ExtendConvTranspose",
                                "--json"])
    assert [(p["op_type"], p["file_op"]) for p in json.loads(fused.stdout)] == \
        [("Conv3DBackpropInputV2", "ExtendConvTranspose")]
    out = tmp_path / "exported"
    done = runner.invoke(app, ["export", "--format", "aoe-repo", "--out", str(out), "--db", str(path)])
    assert done.exit_code == 0, done.output
    assert _tree_digest(out) == SCHEMA6_EXPORT


def test_a_version_1_bank_has_its_projections_derived_again(tmp_path: Path) -> None:
    path = _copy(tmp_path)
    with sqlite3.connect(path) as conn:  # what a version-1 bank looked like
        conn.execute("DROP INDEX ix_policy_cost_model_version")
        conn.execute("ALTER TABLE policy DROP COLUMN cost_model_version")
        conn.execute("UPDATE checkpoint SET schema_version = 1")
    report = upgrade_bank(str(path))
    assert report.from_version == 1 and len(report.steps) == 6
    with Bank.open(str(path)) as bank:
        assert bank.verify().ok and len(bank.policies()) == 48


def test_a_newer_bank_is_refused_even_by_upgrade(tmp_path: Path) -> None:
    path = _copy(tmp_path)
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO bank_meta VALUES ('schema_version', '99')")
    before = _digest(path)
    for attempt in (lambda: Bank.open(str(path)), lambda: upgrade_bank(str(path))):
        with pytest.raises(SchemaVersionError, match="bank schema 99 is newer than this tunebank "
                                                     "reads \\(up to 7\\); install a newer"):
            attempt()
    assert _digest(path) == before


def test_an_upgrade_that_cannot_replay_the_log_changes_nothing(tmp_path: Path) -> None:
    path = _copy(tmp_path)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE checkpoint SET schema_version = 1")  # needs a replay
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TRIGGER events_refuse_delete")
        conn.execute("DELETE FROM events WHERE seq = 1")  # a task that never started
    before = _digest(path)
    with pytest.raises(BankError, match="was never started"):
        upgrade_bank(str(path))
    assert _digest(path) == before
    assert _raw(path, "SELECT schema_version FROM checkpoint") == [(1,)]


def test_the_upgrade_command(tmp_path: Path) -> None:
    path = _copy(tmp_path)
    first = runner.invoke(app, ["upgrade", "--db", str(path)])
    assert first.exit_code == 0, first.output
    assert first.stdout.splitlines()[0] == f"Upgraded {path} (from --db) from schema 2 to 7, 90 events kept:"
    assert first.stdout.splitlines()[-1] == "verify: OK"
    again = json.loads(runner.invoke(app, ["upgrade", "--db", str(path), "--json"]).stdout)
    assert again == {"from_version": 7, "to_version": 7, "steps": [], "events": 90, "verify_ok": True,
                     "problems": []}
    missing = runner.invoke(app, ["upgrade", "--db", str(tmp_path / "none.db")])
    assert missing.exit_code == 1 and "no bank at" in missing.stderr
