"""Laws the log must keep, checked on random outcome sequences (hypothesis)."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import oc
from tests.seams import stored_projection
from tunebank.bank import Bank, Outcome, OutcomeRuleError, Projection
from tunebank.bank.projection import info_digest

PATHS = ["add", "unsatisfied", "update", "reserved", "withdrawn"]
KEYS = [str(k) for k in range(6)]
SETTINGS = settings(max_examples=40, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


@st.composite
def task_plans(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Tasks, each a set of keys with the path each key takes and a batching of its events."""
    plans = []
    for _ in range(draw(st.integers(1, 4))):
        keys = draw(st.lists(st.sampled_from(KEYS), unique=True, max_size=5))
        steps = []
        for key in keys:
            path = draw(st.sampled_from(PATHS))
            after = float(draw(st.integers(0, 6)) * 10) or None  # None: an entry without a time
            if path in ("update", "reserved"):
                steps.append([("hit", key, None), (path, key, after)])
            else:
                steps.append([(path, key, after)])
        plans.append({"steps": steps, "finish": draw(st.booleans()),
                      "batch": draw(st.integers(1, 3)), "soc": draw(st.sampled_from(["A", "B"]))})
    return plans


def _outcome(kind: str, key: str, after: float | None) -> Outcome:
    made = oc(kind, key, after)
    if after is None and kind in ("add", "update"):
        return replace(made, performance_after_us=None, extra={"performance_unknown": True})
    return made


def run_plan(bank: Bank, plans: list[dict[str, Any]]) -> None:
    for plan in plans:
        task = bank.start_task(plan["soc"], tuning_name="h")
        flat = [step for key_steps in plan["steps"] for step in key_steps]
        size = plan["batch"]
        for start in range(0, len(flat), size):
            bank.record(task, [_outcome(k, key, after) for k, key, after in flat[start:start + size]])
        if plan["finish"]:
            bank.finish_task(task)


def naive_fold(bank: Bank) -> tuple[dict[Any, tuple[float, str, str]], dict[str, Counter[str]]]:
    """An independent fold of the log: min (time, newest first, event_id) per key over the
    entries no withdrawal retired (an untimed one recorded at or before the key's latest
    withdrawal); kinds counted per task."""
    entries: dict[Any, list[tuple[float, str, str, str]]] = {}
    withdrawn: dict[Any, str] = {}
    counts: dict[str, Counter[str]] = {}
    for stored in bank.events():
        event = stored.event
        counts.setdefault(event.task_id, Counter())[str(event.kind)] += 1
        key = (event.soc_version, event.repo_key, info_digest(event.payload.get("info_dict")))
        if str(event.kind) == "withdrawn":
            withdrawn[key] = max(withdrawn.get(key, ""), event.recorded_at)
        if str(event.kind) in ("add", "update"):
            after = event.payload.get("performance_after_us", float("inf"))
            newest = "" if after != float("inf") else "".join(
                str(9 - int(c)) if c.isdigit() else c for c in event.recorded_at)
            entries.setdefault(key, []).append((after, newest, stored.event_id, event.recorded_at))
    best: dict[Any, tuple[float, str, str]] = {}
    for key, candidates in entries.items():
        kept = [c[:3] for c in candidates
                if c[0] != float("inf") or c[3] > withdrawn.get(key, "")]
        if kept:
            best[key] = min(kept)
    return best, counts


@SETTINGS
@given(task_plans())
def test_projection_equals_a_plain_fold_and_invariants_hold(plans: list[dict[str, Any]]) -> None:
    with Bank.open("sqlite://", create=True) as bank:
        run_plan(bank, plans)
        best, counts = naive_fold(bank)
        stored = stored_projection(bank)
        assert {k: (p.best_us, p.event_id) for k, p in stored.policies.items()} == \
            {k: (after, event_id) for k, (after, _, event_id) in best.items()}
        for task in stored.tasks.values():
            kinds = counts[task.task_id]
            assert (task.add_num, task.hit_num, task.update_num, task.reserved_num,
                    task.unsatisfied_num) == (kinds["add"], kinds["hit"], kinds["update"],
                                              kinds["reserved"], kinds["unsatisfied"])
            if task.finished:
                summary = task.repo_summary()
                assert summary["repo_hit_num"] == (summary["repo_update_num"]
                                                   + summary["repo_reserved_num"])
                assert summary["total_num"] == (summary["repo_add_num"] + summary["repo_hit_num"]
                                                 + summary["repo_unsatisfied_num"])
        assert bank.verify().ok


@st.composite
def broken_batches(draw: st.DrawFn) -> list[tuple[str, str]]:
    """A batch holding at least one outcome the rules forbid, among valid ones."""
    good = [("add", "a"), ("hit", "b"), ("reserved", "b"), ("unsatisfied", "c")]
    bad = draw(st.sampled_from([
        [("update", "x")], [("reserved", "x")], [("add", "y"), ("add", "y")],
        [("hit", "z"), ("hit", "z")], [("unsatisfied", "w"), ("hit", "w")],
        [("hit", "v"), ("update", "v"), ("reserved", "v")],
        [("withdrawn", "u"), ("withdrawn", "u")], [("add", "t"), ("withdrawn", "t")],
        [("hit", "s"), ("withdrawn", "s")],
    ]))
    batch = draw(st.permutations(good))[: draw(st.integers(0, 4))] + bad
    return list(batch)


@SETTINGS
@given(task_plans(), broken_batches())
def test_invalid_batches_write_nothing(plans: list[dict[str, Any]],
                                       batch: list[tuple[str, str]]) -> None:
    with Bank.open("sqlite://", create=True) as bank:
        run_plan(bank, plans)
        task = bank.start_task("A", tuning_name="bad")
        head, before = bank.head(), stored_projection(bank)
        try:
            bank.record(task, [oc(kind, key) for kind, key in batch])
        except OutcomeRuleError:
            pass
        else:
            raise AssertionError("a batch breaking the rules was accepted")
        assert bank.head() == head
        assert stored_projection(bank) == before


def test_merge_order_does_not_change_the_winner() -> None:
    """Equal times: the smaller event_id wins whichever event arrives first."""
    events = []
    with Bank.open("sqlite://", create=True) as source:
        for tag in ("p", "q"):
            task = source.start_task("A", tuning_name=tag)
            events += source.outcome_events(task, [oc("add", "1", after=10.0, tag=tag)])
    winners = set()
    for order in (events, events[::-1]):
        projection = Projection()
        for seq, event in enumerate(order, 1):
            projection.offer_policy(event.row(seq, "", ""))
        winners.add(next(iter(projection.policies.values())).event_id)
    assert winners == {min(e.event_id for e in events)}


@SETTINGS
@given(task_plans(), task_plans())
def test_two_banks_merged_either_way_hold_the_same_policies(first: list[dict[str, Any]],
                                                          second: list[dict[str, Any]]) -> None:
    """Merging is a union of events, and the fold (withdrawals included) reads only the events:
    A merged into B and B into A agree on every key."""
    from tunebank.bank.exchange.merge import merge_into

    with Bank.open("sqlite://", create=True) as a, Bank.open("sqlite://", create=True) as b:
        run_plan(a, first)
        run_plan(b, second)
        a_then_b = Bank.open("sqlite://", create=True)
        b_then_a = Bank.open("sqlite://", create=True)
        for into, sources in ((a_then_b, (a, b)), (b_then_a, (b, a))):
            for source in sources:
                merge_into(into, source)
        winners = [{key: p.event_id for key, p in stored_projection(bank).policies.items()}
                   for bank in (a_then_b, b_then_a)]  # seqs differ: the events came in another order
        assert winners[0] == winners[1]
        assert a_then_b.verify().ok and b_then_a.verify().ok
        a_then_b.close()
        b_then_a.close()
