"""`bank tune` killed with SIGKILL at random moments, then resumed with --reload.

After every kill the bank verifies, the task reads as incomplete and its result file is whole
JSON; --reload (given no search options) takes mode, seed and budget from the task, measures
only what was never recorded, and ends with exactly the bank an uninterrupted run makes.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tests.crash import kill_tune_at
from tunebank.bank import Bank
from tunebank.cli.main import app

ROOT = Path(__file__).resolve().parents[2]
MODEL = str(ROOT / "fixtures" / "models" / "squeezenet.onnx")
SEARCH = ["--soc-version", "Ascend310", "--mode", "rl", "--seed", "5", "--budget", "16"]
runner = CliRunner()
KILLS = 20


def _bank_state(db: Path) -> dict[str, Any]:
    with Bank.open(str(db)) as bank:
        return {(p.repo_key, p.info_digest): (p.best_us, p.knowledge) for p in bank.policies()}


def _tune(db: Path, *extra: str) -> dict[str, Any]:
    result = runner.invoke(app, ["tune", MODEL, "--soc-version", "Ascend310", "--db", str(db),
                                 "--progress-bar", "off", "--json", *extra])
    assert result.exit_code == 0, result.output
    return dict(json.loads(result.stdout))


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], dict[str, Any]]:
    """The uninterrupted tune: its report and the policies it leaves."""
    folder = tmp_path_factory.mktemp("whole")
    with pytest.MonkeyPatch.context() as patch:  # module scope: before the per-test working folder
        patch.chdir(folder)
        report = _tune(folder / "whole.db", *SEARCH[2:])
    return report, _bank_state(folder / "whole.db")


def _recorded(db: Path) -> tuple[str, int, int]:
    """The killed task's id, how many keys it recorded, and what those keys measured."""
    with Bank.open(str(db)) as bank:
        report = bank.verify()
        assert report.ok, report.problems
        (task,) = bank.tasks()
        assert task.status == "incomplete"
        events = list(bank.events())
    outcomes = [e for e in events if e.event.kind in ("add", "unsatisfied", "reserved", "update")]
    return task.task_id, len(outcomes), sum(e.event.payload.get("measurements", 0) for e in events)


def _check_partial_result_file(work: Path, keys: int) -> None:
    files = list(work.glob("aoe_result_opat_*.json"))
    if keys == 0 and not files:
        return  # killed before the first key was recorded
    (partial,) = files
    ((_, parts),) = json.loads(partial.read_text()).items()  # whole JSON: written atomically
    assert "tuning_time(s)" not in parts[0]["basic"]
    assert parts[1]["OPAT"]["opat_tuning_result"] == "tuning incomplete"
    # rewritten each time the finished keys double (tuner/flow.py RESULT_FILE_EVERY_S): it
    # holds at least half of what the bank has, less the key that was being written
    assert keys / 2 - 1 <= parts[1]["OPAT"]["repo_summary"]["total_num"] <= keys


def test_twenty_kills_each_resume_to_the_uninterrupted_bank(
        tmp_path: Path, reference: tuple[dict[str, Any], dict[str, Any]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    whole, whole_policies = reference
    keys = whole["repo_summary"]["total_num"]
    rng = random.Random(20261203)
    landed = []
    for n in range(KILLS):
        key, delay = rng.randint(1, keys - 2), rng.uniform(0.0, 0.02)
        db, work = tmp_path / f"killed{n}.db", tmp_path / f"work{n}"
        code = kill_tune_at(["tune", MODEL, *SEARCH, "--db", str(db)], work, key, delay)
        assert code == -9, (work / "stderr").read_text()
        task_id, recorded_keys, recorded_measurements = _recorded(db)
        _check_partial_result_file(work, recorded_keys)
        monkeypatch.chdir(work)
        resumed = _tune(db, "--reload")
        assert resumed["resumed"] and resumed["task_id"] == task_id
        assert resumed["measurements"] == whole["measurements"] - recorded_measurements
        assert resumed["repo_summary"] == whole["repo_summary"]
        assert _bank_state(db) == whole_policies
        with Bank.open(str(db)) as bank:
            assert bank.verify().ok
            (task,) = bank.tasks()
            assert task.status == "successful" and task.search_mode == "rl"
        landed.append(recorded_keys)
    assert len(set(landed)) > KILLS // 2  # the kills fell at many different points of the run


def test_reload_refuses_a_search_option_that_differs_from_the_task(tmp_path: Path) -> None:
    db = tmp_path / "b.db"
    assert kill_tune_at(["tune", MODEL, *SEARCH, "--db", str(db)], tmp_path / "w", 3, 0.0) == -9
    result = runner.invoke(app, ["tune", MODEL, "--soc-version", "Ascend310", "--db", str(db),
                                 "--reload", "--seed", "6"])
    assert result.exit_code == 1
    assert result.stderr == ("bank: error: --seed: 6 differs from the unfinished task's 5; leave it "
                             "out to continue the task as it started\n")
    same = runner.invoke(app, ["tune", MODEL, "--soc-version", "Ascend310", "--db", str(db),
                               "--reload", "--seed", "5", "--mode", "rl", "--json"])
    assert same.exit_code == 0, same.output


def test_kills_during_start_up_leave_a_bank_a_new_tune_can_use(tmp_path: Path) -> None:
    """Killed before the first key (opening, creating the bank, starting the task)."""
    for n in range(5):
        db = tmp_path / f"early{n}.db"
        code = kill_tune_at(["tune", MODEL, *SEARCH, "--db", str(db)], tmp_path / f"w{n}", 1, 0.0)
        assert code == -9
        with Bank.open(str(db)) as bank:
            assert bank.verify().ok and [t.status for t in bank.tasks()] == ["incomplete"]
        report = _tune(db, *SEARCH[2:])
        assert report["notices"] and not report["resumed"]


def test_a_killed_bank_tune_process_resumes(tmp_path: Path,
                                            reference: tuple[dict[str, Any], dict[str, Any]]) -> None:
    """The same kill, in a `bank` process started from scratch rather than forked."""
    db = tmp_path / "b.db"
    argv = [sys.executable, "-m", "tests.crash", "7", "0.001", "--", "tune", MODEL, *SEARCH,
            "--db", str(db)]
    done = subprocess.run(argv, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, check=False)
    assert done.returncode == -9, done.stderr
    _, recorded_keys, _ = _recorded(db)
    assert recorded_keys >= 6
    resumed = _tune(db, "--reload")
    assert resumed["repo_summary"] == reference[0]["repo_summary"]
    assert _bank_state(db) == reference[1]
