"""Merging banks: idempotent, commutative and associative in what the projection holds."""

from __future__ import annotations

import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from freezegun import freeze_time
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bank import Bank
from bank.merge import merge_into
from tests.conftest import oc

SETTINGS = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def bank_contents(draw: st.DrawFn) -> list[list[tuple[str, str, float]]]:
    """Tasks of (kind, key, time); times drawn from a few values so ties happen."""
    tasks = []
    for _ in range(draw(st.integers(1, 3))):
        keys = draw(st.lists(st.sampled_from("abcdef"), unique=True, min_size=1, max_size=4))
        tasks.append([(draw(st.sampled_from(["add", "unsatisfied"])), key,
                       float(draw(st.sampled_from([10, 20, 30])))) for key in keys])
    return tasks


def build(folder: Path, name: str, tasks: list[list[tuple[str, str, float]]]) -> str:
    path = str(folder / f"{name}.db")
    with freeze_time("2026-01-02 03:04:05"), Bank.open(path, create=True) as bank:
        for n, outcomes in enumerate(tasks):
            task = bank.start_task("Ascend310", tuning_name=name, task_id=f"{name}-{n}")
            bank.record(task, [replace(oc(kind, key, after=time), knowledge={"from": name, "t": time})
                               for kind, key, time in outcomes])
            bank.finish_task(task)
    return path


def merged(folder: Path, name: str, sources: list[str]) -> dict[Any, Any]:
    with Bank.open(str(folder / f"{name}.db"), create=True) as target:
        for source in sources:
            with Bank.open(source) as other:
                merge_into(target, other)
        assert target.verify().ok
        return {p.key: (p.best_us, p.event_id, p.knowledge) for p in target.policies()}


@SETTINGS
@given(bank_contents(), bank_contents(), bank_contents())
def test_merge_laws(a: Any, b: Any, c: Any) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        pa, pb, pc = build(folder, "a", a), build(folder, "b", b), build(folder, "c", c)
        assert merged(folder, "ab", [pa, pb]) == merged(folder, "ba", [pb, pa])  # commutative
        assert merged(folder, "aa", [pa, pa]) == merged(folder, "a1", [pa])  # idempotent
        merged(folder, "bc", [pb, pc])
        left = merged(folder, "ab_c", [str(folder / "ab.db"), pc])
        right = merged(folder, "a_bc", [pa, str(folder / "bc.db")])
        assert left == right == merged(folder, "abc", [pa, pb, pc])  # associative


def test_merge_report_names_conflicts_and_keeps_origins(tmp_path: Path) -> None:
    fast = build(tmp_path, "fast", [[("add", "a", 10.0), ("add", "b", 30.0)]])
    slow = build(tmp_path, "slow", [[("add", "a", 20.0), ("add", "b", 20.0), ("add", "c", 5.0)]])
    with Bank.open(fast) as target, Bank.open(slow) as source:
        report = merge_into(target, source)
        again = merge_into(target, source)
        origins = {s.event.origin for s in target.history(repo_key="a")}
        source_origin = source.origin
        assert target.verify().ok
    assert report.added == 5 and report.present == 0
    assert again.added == 0 and again.present == 5
    assert report.policies_changed == 2  # b now comes from the slow bank's faster entry, c is new
    winners = {c.repo_key: (c.winner.best_us, c.loser.best_us) for c in report.conflicts}
    assert winners == {"a": (10.0, 20.0), "b": (20.0, 30.0)}
    assert source_origin in origins and len(origins) == 2


@SETTINGS
@given(a=bank_contents(), b=bank_contents())
def test_merge_says_what_changed_as_diff_predicts(a: Any, b: Any) -> None:
    """New keys are the keys only the source held, faster ones are those whose source policy
    was strictly faster, and ties (another policy of the same time winning by event id) are
    counted apart: they are the keys ``bank diff`` shows as the same time."""
    from bank.diff import diff_policies

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        pa, pb = build(folder, "a", a), build(folder, "b", b)
        with Bank.open(pa) as target, Bank.open(pb) as source:
            target_policies, source_policies = target.policies(), source.policies()
            found = diff_policies(target_policies, source_policies)
            before = {p.key: p.event_id for p in target_policies}
            theirs = {p.key: p.event_id for p in source_policies}
            report = merge_into(target, source)
            after = {p.key: p.event_id for p in target.policies()}
    assert report.new_keys == len(found.only_b)
    assert report.faster == sum(1 for c in found.changed if c.faster == "b")
    tied = [c for c in found.changed if c.faster == "equal"]
    same = {p.key for p in target_policies if p.key in {q.key for q in source_policies}}
    assert report.ties == len(tied) + sum(1 for k in same if theirs[k] != before[k]
                                          and k not in {c.a.key for c in found.changed})
    assert report.ties_switched == sum(1 for k in same if after[k] != before[k]) - report.faster
    assert report.policies_changed == sum(1 for k, e in after.items() if before.get(k) != e)


def test_a_merge_of_equal_times_reports_ties_not_changes(tmp_path: Path) -> None:
    first = build(tmp_path, "x", [[("add", "a", 10.0), ("add", "b", 10.0)]])
    second = build(tmp_path, "y", [[("add", "a", 10.0), ("add", "b", 10.0), ("add", "c", 5.0)]])
    with Bank.open(first) as target, Bank.open(second) as source:
        mine = {p.repo_key: p.event_id for p in target.policies()}
        theirs = {p.repo_key: p.event_id for p in source.policies()}
        report = merge_into(target, source)
    assert (report.new_keys, report.faster) == (1, 0)
    assert report.ties == 2  # both keys, whichever record stands
    assert report.ties_switched == sum(theirs[key] < mine[key] for key in "ab")  # smaller id wins
    assert report.as_json()["policies_tied"] == 2
