"""--where conditions on entries' fields (bank/where.py)."""

from __future__ import annotations

import pytest

from tunebank.bank.where import WhereError, all_hold, parse_condition, parse_conditions

INFO = {"m": 8192, "ratio": 1.0, "bias_flag": False, "name": "x"}
KNOWLEDGE = {"baseM": 256}


@pytest.mark.parametrize(("text", "holds"), [
    ("m=8192", True), ("m=8192.0", True), ("m!=8192", False), ("m>=8192", True), ("m<8192", False),
    ("ratio=1", True), ("bias_flag=false", True), ("bias_flag=0", False), ("m=true", False),
    ("name=x", True), ("knowledge.baseM=256", True), ("baseM=256", False),
    ("missing!=1", False), ("info_dict.m > 100", True),
])
def test_a_condition_compares_numbers_as_numbers_and_never_with_a_bool(text: str, holds: bool) -> None:
    assert all_hold([parse_condition(text)], INFO, KNOWLEDGE) is holds


def test_every_condition_must_hold() -> None:
    assert all_hold(parse_conditions(["m=8192", "knowledge.baseM<512"]), INFO, KNOWLEDGE)
    assert not all_hold(parse_conditions(["m=8192", "knowledge.baseM>512"]), INFO, KNOWLEDGE)
    assert all_hold(parse_conditions(None), None, None)


@pytest.mark.parametrize(("text", "message"), [
    ("m", "is not FIELD=VALUE"), ("=3", "is not FIELD=VALUE"), ("m<abc", "< compares numbers"),
    ("knowledge.=1", "names no field after knowledge"),
])
def test_a_malformed_condition_is_named(text: str, message: str) -> None:
    with pytest.raises(WhereError, match=message):
        parse_condition(text)
