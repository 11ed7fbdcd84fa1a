"""Merging banks: idempotent, commutative and associative in what the projection holds."""

from __future__ import annotations

import math
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from freezegun import freeze_time
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import oc
from tunebank.bank import Bank, Outcome
from tunebank.bank.exchange.merge import merge_into

SETTINGS = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])


Content = tuple[str, list[list[tuple[str, str, float | None]]]]
"""When a bank was written, and its tasks of (kind, key, time); no time is an entry without
one (as AOE's own banks hold)."""


@st.composite
def bank_contents(draw: st.DrawFn) -> Content:
    """Tasks of (kind, key, time); times drawn from a few values so ties happen, and banks
    written at one of two moments so entries without a time tie on recorded_at too."""
    tasks = []
    for _ in range(draw(st.integers(1, 3))):
        keys = draw(st.lists(st.sampled_from("abcdef"), unique=True, min_size=1, max_size=4))
        tasks.append([(draw(st.sampled_from(["add", "unsatisfied"])), key,
                       draw(st.sampled_from([10.0, 20.0, 30.0, None]))) for key in keys])
    return draw(st.sampled_from(["2026-01-02 03:04:05", "2026-03-04 05:06:07"])), tasks


def _outcome(kind: str, key: str, time: float | None, name: str) -> Outcome:
    made = replace(oc(kind, key, after=time), knowledge={"from": name, "t": time})
    if time is None and kind == "add":
        return replace(made, performance_after_us=None, extra={"performance_unknown": True})
    return made


def build(folder: Path, name: str, content: Content | list[list[tuple[str, str, float]]]) -> str:
    when, tasks = content if isinstance(content, tuple) else ("2026-01-02 03:04:05", content)
    path = str(folder / f"{name}.db")
    with freeze_time(when), Bank.open(path, create=True) as bank:
        for n, outcomes in enumerate(tasks):
            task = bank.start_task("Ascend310", tuning_name=name, task_id=f"{name}-{n}")
            bank.record(task, [_outcome(kind, key, time, name) for kind, key, time in outcomes])
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


def test_among_entries_without_a_time_the_newer_wins_in_any_merge_order(tmp_path: Path) -> None:
    old = build(tmp_path, "old", ("2026-01-02 03:04:05", [[("add", "a", None), ("add", "b", None)]]))
    new = build(tmp_path, "new", ("2026-03-04 05:06:07", [[("add", "a", None), ("add", "c", 40.0)]]))
    timed = build(tmp_path, "timed", ("2026-01-01 00:00:00", [[("add", "b", 90.0)]]))
    for order in ([old, new, timed], [timed, new, old], [new, old, timed]):
        name = "".join(Path(p).stem[0] for p in order)
        with Bank.open(str(tmp_path / f"{name}.db"), create=True) as target:
            for source in order:
                with Bank.open(source) as other:
                    merge_into(target, other)
            held = {p.repo_key: (p.knowledge["from"], p.recorded_at[:10]) for p in target.policies()}
        # a: the newer entry; b: any measured entry beats one without a time, however old
        assert held == {"a": ("new", "2026-03-04"), "b": ("timed", "2026-01-01"),
                        "c": ("new", "2026-03-04")}, name


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
    from tunebank.bank.exchange.diff import diff_policies

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
    # untimed keys (AOE's own entries, no measured time) are decided by the later record and
    # counted apart (untimed_switched); ties are keys of the same measured time
    timed = {p.key for p in target_policies if math.isfinite(p.best_us)}
    tied = [c for c in found.changed if c.faster == "equal" and c.a.key in timed]
    both = {p.key for p in target_policies if p.key in {q.key for q in source_policies}}
    same = both & timed
    assert report.ties == len(tied) + sum(1 for k in same if theirs[k] != before[k]
                                          and k not in {c.a.key for c in found.changed})
    switched = sum(1 for k in both if after[k] != before[k])
    assert report.ties_switched + report.untimed_switched == switched - report.faster
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
