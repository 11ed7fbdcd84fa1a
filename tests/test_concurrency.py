"""8 writer processes and 2 live readers on one bank, on SQLite and on PostgreSQL.

Every event a writer says it appended is in the log exactly once, nothing else is; seqs are
gap-free and chained; the readers never saw a gap or a failed verify; every task keeps AOE's
invariants; and no writer met 'database is locked' (or any error).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from tests.concurrency import ScenarioResult, run_scenario
from tunebank.bank import Bank
from tunebank.bank.formats.jsonl import read_events


@pytest.fixture(params=["sqlite-file", "postgresql"])
def shared_bank(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite-file":
        return str(tmp_path / "shared.db")
    return str(request.getfixturevalue("postgres_url"))


def test_eight_writers_and_two_readers(shared_bank: str, tmp_path: Path) -> None:
    result = run_scenario(shared_bank, tmp_path / "run")
    for writer in result.writers:
        assert writer.returncode == 0, (writer.name, writer.stderr)
        assert writer.stderr == "", (writer.name, writer.stderr)
    with Bank.open(shared_bank) as bank:
        stored = list(bank.events())
        head = bank.head()
        report = bank.verify()
        tasks = {t.task_id: t for t in bank.tasks()}
    assert [s.seq for s in stored] == list(range(1, head + 1))
    assert len({s.event_id for s in stored}) == head
    assert report.ok, report.problems
    for reader in result.readers:
        assert reader["problems"] == [] and reader["verifies"] > 0
        assert reader["last_seq"] == head
    per_task = Counter(s.event.task_id for s in stored)
    assert head == _tune_events(result, per_task, tasks) + _import_events(result)
    for task in tasks.values():
        assert task.finished or task.status == "incomplete"
        assert task.invariant_problems() == []
    assert sum(w.stats["transactions"] for w in result.writers) > head / 10


def _tune_events(result: ScenarioResult, per_task: Counter[str], tasks: dict[str, object]) -> int:
    """Each tune's task holds exactly its own outcomes: started + add + 2 per hit + unsatisfied
    + finished, and the summary it printed is the bank's."""
    total = 0
    for writer in result.writers:
        if writer.command[0] != "tune":
            continue
        report = writer.report
        summary = report["repo_summary"]
        expected = 2 + summary["repo_add_num"] + 2 * summary["repo_hit_num"] \
            + summary["repo_unsatisfied_num"]
        assert per_task[report["task_id"]] == expected, writer.name
        assert tasks[report["task_id"]].repo_summary() == summary  # type: ignore[attr-defined]
        total += expected
    return total


def _import_events(result: ScenarioResult) -> int:
    """What the importers added; two imports of one file add its events once between them."""
    imports = [w for w in result.writers if w.command[0] == "import"]
    added = {w.name: w.report["events_added"] for w in imports}
    events_file = Path(next(w for w in imports if w.name == "import events export").command[1])
    assert added["import events export"] + added["import events export again"] \
        == len(read_events(events_file))
    return sum(added.values())
