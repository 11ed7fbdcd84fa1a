"""The policy row an event makes, built straight from it, and the fingerprints verify keeps."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tunebank.bank.events import Event, EventKind, StoredEvent
from tunebank.bank.projection import policy_of
from tunebank.bank.store.rows import policy_row_of, policy_values, row_fingerprint

_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70),
                     st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=6))
_JSON = st.recursive(_SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=5), inner, max_size=3)),
    max_leaves=8)


@st.composite
def policy_events(draw: st.DrawFn) -> StoredEvent:
    """An add or update event with an arbitrary policy in its payload."""
    payload: dict[str, Any] = {"knowledge": draw(st.dictionaries(st.text(max_size=5), _JSON, max_size=4))}
    if draw(st.booleans()):
        payload["info_dict"] = draw(st.dictionaries(st.text(max_size=5), _JSON, max_size=4))
    if draw(st.booleans()):
        payload["performance_after_us"] = draw(st.floats(0, 1e6) | st.integers(0, 10**6))
    else:
        payload["performance_unknown"] = True
    for name in ("backend", "cost_model_version"):
        if draw(st.booleans()):
            payload[name] = draw(st.text(max_size=6))
    if draw(st.booleans()):
        payload["tune_mode"] = draw(st.sampled_from(["Format", "Schedule", "Impl"]))
    kind = draw(st.sampled_from([EventKind.ADD, EventKind.UPDATE]))
    event = Event.of(kind, "Ascend910B2", "t1", "2026-12-05T00:00:00Z", "here", payload,
                     repo_key=draw(st.text(min_size=1, max_size=6)), op_name="op",
                     op_type=draw(st.none() | st.text(max_size=6)))
    return StoredEvent(draw(st.integers(1, 10**9)), event.event_id, event, "", "")


@settings(max_examples=300, deadline=None)
@given(stored=policy_events())
def test_the_row_built_straight_from_an_event_is_the_policy_it_makes(stored: StoredEvent) -> None:
    row, payload = stored.row(), stored.event.payload
    assert policy_row_of(row, payload) == policy_values(policy_of(row, payload))
    assert policy_of(row) == policy_of(row, payload)  # the payload decoded from the row is the same


@settings(max_examples=300, deadline=None)
@given(stored=policy_events(), column=st.integers(0, 13), other=_SCALARS)
def test_a_row_changed_in_any_column_has_another_fingerprint(stored: StoredEvent, column: int,
                                                            other: object) -> None:
    row = policy_row_of(stored.row(), stored.event.payload)
    assert row_fingerprint(row) == row_fingerprint(tuple(list(row)))
    changed = list(row)
    changed[column] = other
    if type(other) is type(row[column]) and other == row[column]:
        return
    assert row_fingerprint(tuple(changed)) != row_fingerprint(row)


def test_a_float_one_bit_away_has_another_fingerprint() -> None:
    row = ("soc", "key", 61.117)
    nearby = ("soc", "key", 61.117 + 7.105427357601002e-15)
    assert nearby[2] != row[2]
    assert row_fingerprint(row) != row_fingerprint(nearby)
