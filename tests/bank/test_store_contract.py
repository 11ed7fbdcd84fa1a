"""The storage contract: every backend a bank can live on must pass every test here."""

from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path

import pytest

from tests.conftest import backend_url, info, oc
from tests.seams import run_sql, stored_projection
from tunebank.bank import Bank, Event, EventKind, OutcomeRuleError, PolicyFilter, StoreError
from tunebank.bank.events import GENESIS_HASH, chain_hash
from tunebank.bank.store import reads


def finished_task(bank: Bank, outcomes: list, soc: str = "Ascend310") -> str:
    task = bank.start_task(soc, tuning_name="t", model_name="m")
    bank.record(task, outcomes)
    bank.finish_task(task)
    return task


class TestAppend:
    def test_seq_is_gap_free_and_chained(self, bank: Bank) -> None:
        finished_task(bank, [oc("add", "1"), oc("unsatisfied", "2")])
        finished_task(bank, [oc("hit", "1"), oc("reserved", "1")])
        log = list(bank.events())
        assert [s.seq for s in log] == list(range(1, 9))
        prev = GENESIS_HASH
        for stored in log:
            assert stored.prev_hash == prev
            assert stored.hash == chain_hash(prev, stored.seq, stored.event_id,
                                             stored.event.content())
            prev = stored.hash

    def test_same_event_twice_is_skipped(self, bank: Bank) -> None:
        task = bank.start_task("Ascend310", tuning_name="t")
        events = bank.outcome_events(task, [oc("add", "1")])
        first = bank.append(events)
        again = bank.append(events + events)
        assert len(first.appended) == 1 and first.skipped == ()
        assert again.appended == () and again.skipped == (events[0].event_id,) * 2
        assert bank.head() == 2

    def test_batch_is_all_or_nothing(self, bank: Bank) -> None:
        task = bank.start_task("Ascend310", tuning_name="t")
        head = bank.head()
        with pytest.raises(OutcomeRuleError, match="without a hit"):
            bank.record(task, [oc("add", "1"), oc("add", "2"), oc("update", "3")])
        assert bank.head() == head
        assert bank.task(task).add_num == 0
        assert bank.policies() == []

    @pytest.mark.parametrize(
        ("batches", "message"),
        [
            ([[("update", "1")]], "without a hit"),
            ([[("reserved", "1")]], "without a hit"),
            ([[("add", "1")], [("add", "1")]], "already has its add"),
            ([[("add", "1"), ("unsatisfied", "1")]], "already has its add"),
            ([[("hit", "1"), ("update", "1")], [("reserved", "1")]], "after its update"),
            ([[("hit", "1")], [("hit", "1")]], "already has its hit"),
        ],
    )
    def test_outcome_rules(self, bank: Bank, batches: list, message: str) -> None:
        task = bank.start_task("Ascend310", tuning_name="t")
        *good, bad = batches
        for batch in good:
            bank.record(task, [oc(kind, key) for kind, key in batch])
        head = bank.head()
        with pytest.raises(OutcomeRuleError, match=message):
            bank.record(task, [oc(kind, key) for kind, key in bad])
        assert bank.head() == head

    def test_finish_with_open_hit_is_refused(self, bank: Bank) -> None:
        task = bank.start_task("Ascend310", tuning_name="t")
        bank.record(task, [oc("hit", "1")])
        with pytest.raises(OutcomeRuleError, match="still wait"):
            bank.finish_task(task)
        assert bank.task(task).status == "incomplete"

    def test_nothing_after_finish(self, bank: Bank) -> None:
        task = finished_task(bank, [oc("add", "1")])
        with pytest.raises(OutcomeRuleError, match="already finished"):
            bank.record(task, [oc("add", "2")])
        with pytest.raises(OutcomeRuleError, match="already finished"):
            bank.finish_task(task, status="failed")

    def test_outcome_for_unknown_task_or_other_chip(self, bank: Bank) -> None:
        task = bank.start_task("Ascend310", tuning_name="t")
        stray = Event(kind=EventKind.ADD, soc_version="Ascend910B2", task_id=task,
                      recorded_at="2026-01-01T00:00:00.000000Z", origin="test", repo_key="1",
                      payload={"knowledge": {}, "performance_after_us": 1.0})
        with pytest.raises(OutcomeRuleError, match="differs from the task's"):
            bank.append([stray])
        with pytest.raises(OutcomeRuleError, match="never started"):
            bank.append([Event(kind=EventKind.HIT, soc_version="Ascend310", task_id="nope",
                               recorded_at="2026-01-01T00:00:00.000000Z", origin="t",
                               repo_key="1")])

    def test_database_refuses_update_and_delete(self, bank: Bank) -> None:
        finished_task(bank, [oc("add", "1")])
        for statement in ("UPDATE events SET origin = 'x'", "DELETE FROM events"):
            with pytest.raises(StoreError, match="append-only"):
                run_sql(bank, statement)
        assert bank.head() == 3


class TestProjections:
    def test_summary_invariants(self, bank: Bank) -> None:
        finished_task(bank, [oc("add", "1"), oc("add", "2"), oc("unsatisfied", "3")])
        task = finished_task(bank, [oc("hit", "1"), oc("update", "1", after=40.0),
                                    oc("hit", "2"), oc("reserved", "2"), oc("add", "4")])
        assert bank.task(task).repo_summary() == {
            "repo_add_num": 1, "repo_hit_num": 2, "repo_reserved_num": 1,
            "repo_unsatisfied_num": 0, "repo_update_num": 1, "total_num": 3,
        }

    def test_only_strictly_faster_replaces(self, bank: Bank) -> None:
        finished_task(bank, [oc("add", "1", after=50.0)])
        finished_task(bank, [oc("hit", "1"), oc("update", "1", after=60.0)])
        assert bank.policies()[0].best_us == 50.0
        task = finished_task(bank, [oc("hit", "1"), oc("update", "1", after=30.0)])
        best = bank.policies()[0]
        assert (best.best_us, best.task_id) == (30.0, task)

    def test_policy_times_stream_what_the_policies_hold(self, bank: Bank) -> None:
        finished_task(bank, [oc("add", str(k), after=10.0 + k) for k in range(5)])
        task = bank.start_task("Ascend910B2", tuning_name="other chip")
        bank.record(task, [oc("add", "7", after=3.5)])
        every = {(p.soc_version, p.repo_key, p.op_type, p.best_us) for p in bank.policies()}
        assert set(bank.policy_times()) == every and len(every) == 6 == reads.policy_count(bank.store)
        assert list(bank.policy_times("Ascend910B2")) == [("Ascend910B2", "7", "MatMul", 3.5)]

    def test_lookup_many_keys_checks_info_dict(self, bank: Bank) -> None:
        finished_task(bank, [oc("add", str(k)) for k in range(700)])
        asked = [(str(k), info(str(k))) for k in range(0, 800, 3)]
        found = bank.lookup("Ascend310", asked)
        assert sorted(found, key=int) == [str(k) for k in range(0, 700, 3)]
        # A repo_key collision: same key, another operator's features.
        assert bank.lookup("Ascend310", [("5", {"op": "Conv"})]) == {}
        assert bank.lookup("Ascend910B2", [("5", info("5"))]) == {}

    def test_colliding_keys_keep_their_own_policies(self, bank: Bank) -> None:
        task = bank.start_task("Ascend310", tuning_name="t")
        first = oc("add", "9", after=10.0)
        other = replace(first, info_dict={"op": "Conv"}, performance_after_us=5.0)
        bank.record(task, [first])
        task2 = bank.start_task("Ascend310", tuning_name="t2")
        bank.record(task2, [other])
        found = bank.lookup("Ascend310", [("9", info("9"))])
        assert found["9"].best_us == 10.0
        assert len(bank.policies()) == 2

    def test_filters_and_time_travel(self, bank: Bank) -> None:
        finished_task(bank, [oc("add", "1", after=50.0)])
        seq_after_first = bank.head()
        finished_task(bank, [oc("hit", "1"), oc("update", "1", after=20.0)], )
        finished_task(bank, [oc("add", "7")], soc="Ascend910B2")
        assert [p.best_us for p in bank.policies(at_seq=seq_after_first)] == [50.0]
        assert [p.best_us for p in bank.policies(PolicyFilter(soc_version="Ascend310"))] == [20.0]
        assert [p.repo_key for p in bank.policies(PolicyFilter(soc_version="Ascend910B2"))] == ["7"]
        assert bank.policies(at_seq=0) == []
        assert bank.policies(PolicyFilter(backend="other")) == []

    def test_a_withdrawal_retires_untimed_entries_up_to_it(self, bank: Bank) -> None:
        """Issue 41 (`bank import --mirror`): a key's entries without a time recorded up to its
        withdrawal are retired, on every backend; a timed one stays, a later one comes back,
        and verify, rebuild and time travel agree."""
        def untimed(kind: str, key: str) -> object:
            made = oc(kind, key)
            return replace(made, performance_after_us=None, extra={"performance_unknown": True})

        finished_task(bank, [untimed("add", "1"), untimed("add", "2"), oc("add", "3", after=9.0)])
        before = bank.head()
        finished_task(bank, [oc("withdrawn", "1"), oc("withdrawn", "3")])
        assert sorted(p.repo_key for p in bank.policies()) == ["2", "3"]  # 3 is timed: kept
        assert sorted(p.repo_key for p in bank.policies(at_seq=before)) == ["1", "2", "3"]
        assert bank.lookup("Ascend310", [("1", info("1"))]) == {}
        summary = bank.task(bank.tasks()[-1].task_id).repo_summary()
        assert summary["total_num"] == 0  # a withdrawal is no AOE outcome
        finished_task(bank, [untimed("add", "1")])  # recorded after the withdrawal: it holds
        assert sorted(p.repo_key for p in bank.policies()) == ["1", "2", "3"]
        projection = stored_projection(bank)
        assert bank.verify().ok
        bank.rebuild()
        assert stored_projection(bank) == projection
        with pytest.raises(OutcomeRuleError, match="already has its withdrawn"):
            finished_task(bank, [oc("withdrawn", "2"), oc("withdrawn", "2")])

    def test_rebuild_gives_the_same_projection(self, bank: Bank) -> None:
        finished_task(bank, [oc("add", "1"), oc("unsatisfied", "2")])
        task = bank.start_task("Ascend310", tuning_name="open")
        bank.record(task, [oc("hit", "1")])
        before = stored_projection(bank)
        bank.rebuild()
        assert stored_projection(bank) == before
        assert bank.verify().ok

    def test_rebuild_rewrites_every_damaged_projection_row(self, bank: Bank) -> None:
        finished_task(bank, [oc("add", "1"), oc("add", "2"), oc("add", "3"), oc("unsatisfied", "4")])
        finished_task(bank, [oc("hit", "1"), oc("update", "1", after=5.0)])
        before = stored_projection(bank)
        extra = ("INSERT INTO policy SELECT soc_version, repo_key, 'x', op_type, info_dict, "
                 "knowledge, best_us, seq, task_id, event_id, origin, tune_mode, backend, "
                 "cost_model_version, recorded_at, file_op FROM policy WHERE repo_key = '3'")
        run_sql(bank, "DELETE FROM policy WHERE repo_key = '2'",  # missing
                "UPDATE policy SET best_us = 99.0 WHERE repo_key = '1'",  # stale
                extra,  # made by no event
                "UPDATE task SET add_num = 9")
        assert len(bank.verify().problems) == 5
        report = bank.rebuild()
        assert len(report.replaced) == 5 and report.head == bank.head() == 10
        assert stored_projection(bank) == before
        assert bank.verify().ok

    def test_task_prefix(self, bank: Bank) -> None:
        task = bank.start_task("Ascend310", tuning_name="t", task_id="abc123")
        bank.start_task("Ascend310", tuning_name="t", task_id="abd456")
        assert bank.task("abc").task_id == task
        with pytest.raises(Exception, match="ambiguous"):
            bank.task("ab")


class TestConcurrency:
    @pytest.mark.parametrize("kind", ["sqlite-file", "postgresql"])
    def test_parallel_writers_keep_the_chain(self, kind: str, tmp_path: Path,
                                             request: pytest.FixtureRequest) -> None:
        path = backend_url(kind, tmp_path, request)
        Bank.open(path, create=True).close()
        errors: list[BaseException] = []
        gaps: list[tuple[int, int]] = []
        done = threading.Event()

        def writer(n: int) -> None:
            try:
                with Bank.open(path) as mine:
                    for round_ in range(5):
                        finished_task(mine, [oc("add", f"{n}-{round_}-{k}") for k in range(4)])
            except (StoreError, OutcomeRuleError) as exc:  # pragma: no cover - reported below
                errors.append(exc)

        def reader() -> None:
            """A live reader following the log must never see a later seq before an earlier one."""
            seen = 0
            with Bank.open(path) as mine:
                while not done.is_set() or seen < mine.head():
                    for stored in mine.events(since=seen):
                        if stored.seq != seen + 1:
                            gaps.append((seen, stored.seq))
                        seen = stored.seq

        threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
        follower = threading.Thread(target=reader)
        follower.start()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        done.set()
        follower.join()
        assert errors == [] and gaps == []
        with Bank.open(path) as bank:
            assert bank.head() == 4 * 5 * 6
            report = bank.verify()
            assert report.ok, report.problems
            assert len(bank.policies()) == 80


class TestSchemaVersion:
    def test_an_older_bank_is_refused_then_upgraded_in_place(self, bank: Bank) -> None:
        from tunebank.bank.store.migrate import upgrade
        from tunebank.bank.store.schema.version import SCHEMA_VERSION, SchemaVersionError, check_version

        finished_task(bank, [oc("add", "1"), oc("unsatisfied", "2")])
        before = stored_projection(bank)
        run_sql(bank, "DELETE FROM bank_meta WHERE name = 'schema_version'",  # a version-1 bank
                "UPDATE checkpoint SET schema_version = 1")
        with pytest.raises(SchemaVersionError, match="bank schema 1 is older"):
            check_version(bank.store.schema_version(), "b")
        report = upgrade(bank.store, "b")
        assert (report.from_version, report.to_version, report.last_seq) == (1, SCHEMA_VERSION, bank.head())
        check_version(bank.store.schema_version(), "b")
        assert stored_projection(bank) == before
        assert bank.verify().ok
