"""Canonical JSON and the digests built on it: one byte string per value, whatever the order."""

from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical_json(value: Any) -> str:
    """Serialise ``value`` with sorted keys, no spaces and no NaN, so equal values give equal text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


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
