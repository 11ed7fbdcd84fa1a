"""The hand-built content JSON is byte for byte the reference canonical JSON, for any content.

The write, read and verify paths build an event's content and chain body from pre-encoded
pieces (bank.events.content_halves); event_id_of and chain_hash are the definitions. If the two
ever differ, every bank written by one would fail verification by the other.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tunebank.bank.events import Event, EventKind, chain_hash, event_id_of

text = st.text(min_size=1, max_size=12)  # any code point but lone surrogates: \x00, quotes, emoji
maybe = st.none() | text
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)


@given(kind=st.sampled_from([EventKind.TASK_STARTED, EventKind.TASK_FINISHED, EventKind.HIT]),
       soc=text, key=text, task=text, op_name=maybe, op_type=maybe, at=text, origin=text,
       payload=st.dictionaries(st.text(max_size=6), json_values, max_size=4),
       seq=st.integers(min_value=1, max_value=10**12), prev=st.text(max_size=64))
def test_the_built_id_and_link_equal_the_reference_definitions(
        kind: EventKind, soc: str, key: str, task: str, op_name: str | None, op_type: str | None,
        at: str, origin: str, payload: dict[str, object], seq: int, prev: str) -> None:
    event = Event(kind=kind, soc_version=soc, task_id=task, recorded_at=at, origin=origin,
                  payload=payload, repo_key=key, op_name=op_name, op_type=op_type)
    content = event.content()
    assert event.event_id == event_id_of(content)
    assert event.link_hash(prev, seq) == chain_hash(prev, seq, event.event_id, content)


def test_a_foreign_event_id_is_chained_as_given() -> None:
    event = Event(kind=EventKind.TASK_STARTED, soc_version="s", task_id="t", recorded_at="r",
                  origin="o", payload={"a": "\u00e9\"\\\n"})
    forged = 'x"y\u2028'
    assert event.link_hash("p", 7, forged) == chain_hash("p", 7, forged, event.content())


any_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70) | st.floats()
    | st.text(max_size=8) | st.sampled_from(["1e5", "2e-3", "null"]),
    lambda inner: st.lists(inner, max_size=3) | st.tuples(inner)
    | st.dictionaries(st.text(max_size=5) | st.integers(-3, 3), inner, max_size=3),
    max_leaves=10,
)


def _reference(value: object) -> str:
    import json

    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False)


@given(any_values)
def test_canonical_json_is_json_dumps_with_the_canonical_options(value: object) -> None:
    """Whatever the value (exponents, NaN, huge integers, integer keys), the fast path writes
    the reference's bytes or raises the reference's error."""
    import pytest

    from tunebank.bank.canonical import canonical_json

    try:
        expected = _reference(value)
    except (TypeError, ValueError) as exc:
        with pytest.raises(type(exc)):
            canonical_json(value)
        return
    assert canonical_json(value) == expected


def test_types_orjson_knows_and_json_does_not_are_refused_as_json_refuses_them() -> None:
    import datetime
    import enum
    from dataclasses import dataclass

    import numpy as np
    import pytest

    from tunebank.bank.canonical import canonical_json

    @dataclass
    class Point:
        x: int

    class Colour(enum.StrEnum):
        RED = "red"

    for refused in (Point(1), datetime.date(2026, 12, 3), np.float32(1.5), {"k": {1, 2}}):
        with pytest.raises(TypeError):
            canonical_json(refused)
    for subclass in (np.float64(0.1), Colour.RED, {"c": Colour.RED}):
        assert canonical_json(subclass) == _reference(subclass)


@given(any_values)
def test_parse_json_reads_what_json_reads(value: object) -> None:
    import json

    from tunebank.bank.canonical import parse_json

    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        return
    decoded = json.loads(text)
    assert repr(parse_json(text)) == repr(decoded)  # repr: NaN is not equal to itself


def test_a_payload_that_contains_itself_is_a_validation_error() -> None:
    import pytest

    from tunebank.bank.errors import EventValidationError

    loop: dict[str, object] = {}
    loop["self"] = loop
    with pytest.raises(EventValidationError, match="not JSON-serialisable"):
        Event(kind=EventKind.TASK_STARTED, soc_version="s", task_id="t", recorded_at="r",
              origin="o", payload=loop)
