"""What the recorder's callers pass in (filters) and get back (results): plain frozen values."""

from __future__ import annotations

from dataclasses import dataclass

from bank.events import StoredEvent


@dataclass(frozen=True)
class AppendResult:
    """What one append did: the events it wrote and the ids it skipped as already present."""

    appended: tuple[StoredEvent, ...] = ()
    skipped: tuple[str, ...] = ()


@dataclass(frozen=True)
class StreamResult:
    """What one streamed append did: how many events it wrote and skipped, and the head after."""

    appended: int
    skipped: int
    head_seq: int
    head_hash: str


@dataclass(frozen=True)
class EventFilter:
    """Which events to read; every field left ``None`` matches everything."""

    since_seq: int = 0
    until_seq: int | None = None
    until_time: str | None = None
    kinds: tuple[str, ...] | None = None
    repo_key: str | None = None
    op_name: str | None = None
    op_type: str | None = None
    task_id: str | None = None
    soc_version: str | None = None


@dataclass(frozen=True)
class PolicyFilter:
    """Which policies to list."""

    soc_version: str | None = None
    op_type: str | None = None
    repo_key: str | None = None
    backend: str | None = None
    cost_model_version: str | None = None
