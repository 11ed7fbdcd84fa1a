"""What the recorder's callers pass in (filters) and get back (results): plain frozen values."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tunebank.bank.events import StoredEvent
from tunebank.bank.projection import PolicyKey
from tunebank.bank.tasks import TaskView


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
class Replay:
    """Projections a replay of the log made, for a rebuild to adopt: every task, the stored
    policy keys no winner makes, and the seqs of the winners not stored as they should be."""

    tasks: dict[str, TaskView]
    unmade: Sequence[PolicyKey]
    unstored: Sequence[int]
    head: int


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
