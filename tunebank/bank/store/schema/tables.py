"""The bank's tables. Rows are storage, not domain objects: the store converts them both ways.

``events`` is the log and the only source of truth; ``policy``, ``task`` and ``checkpoint``
are projections that ``bank rebuild`` can throw away and derive again.
"""

from __future__ import annotations

from sqlalchemy import Index
from sqlmodel import Field, SQLModel

from tunebank.bank.store.schema.version import SCHEMA_VERSION as SCHEMA_VERSION


class EventRow(SQLModel, table=True):
    """One event of the append-only log."""

    __tablename__ = "events"
    __table_args__ = (Index("ix_events_task_key", "task_id", "repo_key"),)

    seq: int = Field(primary_key=True)
    event_id: str = Field(unique=True, max_length=32)
    kind: str = Field(max_length=16, index=True)
    soc_version: str = Field(max_length=64)
    repo_key: str | None = Field(default=None, max_length=64, index=True)
    task_id: str = Field(max_length=64)
    op_name: str | None = Field(default=None, index=True)
    op_type: str | None = Field(default=None, max_length=128, index=True)
    recorded_at: str = Field(max_length=32)
    origin: str
    payload: str
    prev_hash: str = Field(max_length=64)
    hash: str = Field(max_length=64)


class PolicyRow(SQLModel, table=True):
    """The best entry per (soc_version, repo_key, info_digest)."""

    __tablename__ = "policy"

    soc_version: str = Field(primary_key=True, max_length=64)
    repo_key: str = Field(primary_key=True, max_length=64)
    info_digest: str = Field(primary_key=True, max_length=32)
    op_type: str | None = Field(default=None, max_length=128, index=True)
    info_dict: str
    knowledge: str
    best_us: float
    seq: int = Field(index=True)
    task_id: str = Field(max_length=64)
    event_id: str = Field(max_length=32)
    origin: str
    tune_mode: str | None = Field(default=None, max_length=16)
    backend: str | None = Field(default=None, max_length=64, index=True)
    cost_model_version: str | None = Field(default=None, max_length=32, index=True)
    recorded_at: str = Field(max_length=32)
    file_op: str | None = Field(default=None, max_length=128, index=True)
    """The operator of the bank file the entry was read from, where it is not the entry's own
    ``op`` (CANN's FUSE bank of ExtendConvTranspose holds Conv3DBackpropInputV2 entries)."""


class TaskRow(SQLModel, table=True):
    """One tuning task with its derived repo_summary counts."""

    __tablename__ = "task"

    task_id: str = Field(primary_key=True, max_length=64)
    soc_version: str = Field(max_length=64)
    origin: str
    started_at: str = Field(max_length=32)
    first_seq: int
    last_seq: int
    tuning_name: str | None = None
    model_name: str | None = None
    model_hash: str | None = None
    job_type: str | None = Field(default=None, max_length=16)
    search_mode: str | None = Field(default=None, max_length=16)
    status: str = Field(max_length=16)
    finished_at: str | None = Field(default=None, max_length=32)
    tuning_time_s: float | None = None
    model_baseline_ms: float | None = None
    model_result_ms: float | None = None
    failed_operators: str = "[]"
    add_num: int = 0
    hit_num: int = 0
    update_num: int = 0
    reserved_num: int = 0
    unsatisfied_num: int = 0
    open_hits: int = 0
    withdrawn_num: int = 0


class CheckpointRow(SQLModel, table=True):
    """The last seq the projections reflect, written in the same transaction as the events."""

    __tablename__ = "checkpoint"

    name: str = Field(primary_key=True, max_length=32)
    last_seq: int
    schema_version: int = SCHEMA_VERSION


class MetaRow(SQLModel, table=True):
    """Facts about the bank itself (its id, used as the origin of the events made here)."""

    __tablename__ = "bank_meta"

    name: str = Field(primary_key=True, max_length=32)
    value: str
