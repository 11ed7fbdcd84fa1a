"""Canonical JSON and the digests built on it: one byte string per value, whatever the order;
and how a value read from JSON is checked as a time (:func:`finite_number`) and shown in an
error (:func:`shown`)."""

from __future__ import annotations

import hashlib
import json
import math
import re
from typing import Any

import orjson

_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                            allow_nan=False)
_FAST = (orjson.OPT_SORT_KEYS | orjson.OPT_PASSTHROUGH_SUBCLASS | orjson.OPT_PASSTHROUGH_DATACLASS
         | orjson.OPT_PASSTHROUGH_DATETIME)

_EXPONENT = re.compile(rb"e(?<=[0-9]e)[-0-9]")  # json: 1e-07, 1e+16; orjson: 1e-7, 1e16


def _refuse(value: Any) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def canonical_json(value: Any) -> str:
    """Serialise ``value`` with sorted keys, no spaces and no NaN, so equal values give equal text.

    The definition is ``json.dumps(value, sort_keys=True, separators=(",", ":"),
    ensure_ascii=False, allow_nan=False)``. orjson writes the same bytes ten times faster for
    every JSON value but two cases, so it is used unless the text shows one of them: a float
    with an exponent (the two spell exponents differently) and a ``null`` that stood for NaN or
    an infinity (orjson writes those as null, json refuses them). Types json does not know and
    orjson does not pass on (a subclass, a dataclass, a datetime, a non-string key, an integer
    beyond 64 bits) go to json itself. tests/bank/test_encoding.py holds the two equal.

    Raises:
        TypeError: a value JSON has no form for.
        ValueError: NaN or an infinity.
        RecursionError: a value that contains itself (or is nested too deeply).
    """
    try:
        text = orjson.dumps(value, default=_refuse, option=_FAST)
    except (orjson.JSONEncodeError, RecursionError):
        return _ENCODER.encode(value)
    if _EXPONENT.search(text) or (b"null" in text and orjson.loads(text) != value):
        return _ENCODER.encode(value)
    return text.decode("utf-8")


_DIGITS = bytes.maketrans(b"123456789", b"000000000")
_RUN = b"0" * 19
_NUMBER_STARTS = frozenset(b":,[ \t\r\n-")


def _long_number(data: bytes) -> bool:
    """Whether ``data`` may hold a number of 19 digits or more, which orjson reads as a float
    when it is beyond 64 bits. A run of digits in a string (AOE's repo_keys have 19 or 20)
    follows a quote, not what a number follows, and does not count. Done with translate and
    find: a regular expression over a kilobyte line costs more than parsing it."""
    mapped = data.translate(_DIGITS)
    at = mapped.find(_RUN)
    while at != -1:
        if at == 0 or data[at - 1] in _NUMBER_STARTS:
            return True
        end = at + len(_RUN)
        while end < len(mapped) and mapped[end] == 0x30:
            end += 1
        at = mapped.find(_RUN, end)
    return False


def parse_json(text: str | bytes) -> Any:
    """Decode JSON text as ``json.loads`` does: through orjson where that gives the same value,
    through json where orjson would differ (an integer beyond 64 bits, which orjson turns into
    a float) or refuses what json accepts (an escaped lone surrogate, NaN)."""
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    if _long_number(data):
        return json.loads(text)
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(text)


def sha256_hex(text: str) -> str:
    """The SHA-256 of ``text`` (UTF-8) as 64 hex digits."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def xxh64_key(value: Any) -> str:
    """xxh64 of the canonical JSON bytes of ``value``, as a decimal string (AOE's key style)."""
    import xxhash

    return str(xxhash.xxh64_intdigest(canonical_json(value).encode("utf-8")))


def digest(value: Any) -> str:
    """The SHA-256 of the canonical JSON of ``value``."""
    return sha256_hex(canonical_json(value))


def shown(value: Any, limit: int = 40) -> str:
    """A short rendering of a value read from a file, for an error message: a list or an object
    by its kind (one nested a thousand deep has no safe repr), a huge integer by its length, any
    other value as its repr cut to ``limit`` characters."""
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return f"an integer of about {int(value.bit_length() * 0.30103) + 1} digits"
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def finite_number(value: Any) -> bool:
    """Whether ``value`` read from a file is a number a time can be: an int or a float (never a
    bool), finite, and within a float's range (an integer of hundreds of digits is not)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False
