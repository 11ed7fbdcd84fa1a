"""A bank's tables made without SQLAlchemy: the DDL rendered once from the SQLModel tables of
:mod:`bank.store.schema.tables` and kept here as text, so making a bank (the first ``bank tune``
into a new file) does not import SQLModel, SQLAlchemy and pydantic (about 0.3 s).
tests/bank/test_statements.py renders the tables again for each database and holds this text
equal to what SQLAlchemy writes; ``python -m tunebank.bank.store.schema.ddl`` prints it anew.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tunebank.bank.errors import BankLocationError
from tunebank.bank.store.schema import statements as sql
from tunebank.bank.store.schema.version import SCHEMA_VERSION

if TYPE_CHECKING:
    from tunebank.bank.store.base import EventStore
    from tunebank.bank.store.driver import Db

SQLITE_DDL: tuple[str, ...] = (
    """CREATE TABLE events (
    seq INTEGER NOT NULL,
    event_id VARCHAR(32) NOT NULL,
    kind VARCHAR(16) NOT NULL,
    soc_version VARCHAR(64) NOT NULL,
    repo_key VARCHAR(64),
    task_id VARCHAR(64) NOT NULL,
    op_name VARCHAR,
    op_type VARCHAR(128),
    recorded_at VARCHAR(32) NOT NULL,
    origin VARCHAR NOT NULL,
    payload VARCHAR NOT NULL,
    prev_hash VARCHAR(64) NOT NULL,
    hash VARCHAR(64) NOT NULL,
    PRIMARY KEY (seq),
    UNIQUE (event_id)
)""",
    "CREATE INDEX IF NOT EXISTS ix_events_kind ON events (kind)",
    "CREATE INDEX IF NOT EXISTS ix_events_op_name ON events (op_name)",
    "CREATE INDEX IF NOT EXISTS ix_events_op_type ON events (op_type)",
    "CREATE INDEX IF NOT EXISTS ix_events_repo_key ON events (repo_key)",
    "CREATE INDEX IF NOT EXISTS ix_events_task_key ON events (task_id, repo_key)",
    """CREATE TABLE policy (
    soc_version VARCHAR(64) NOT NULL,
    repo_key VARCHAR(64) NOT NULL,
    info_digest VARCHAR(32) NOT NULL,
    op_type VARCHAR(128),
    info_dict VARCHAR NOT NULL,
    knowledge VARCHAR NOT NULL,
    best_us FLOAT NOT NULL,
    seq INTEGER NOT NULL,
    task_id VARCHAR(64) NOT NULL,
    event_id VARCHAR(32) NOT NULL,
    origin VARCHAR NOT NULL,
    tune_mode VARCHAR(16),
    backend VARCHAR(64),
    cost_model_version VARCHAR(32),
    recorded_at VARCHAR(32) NOT NULL,
    file_op VARCHAR(128),
    PRIMARY KEY (soc_version, repo_key, info_digest)
)""",
    "CREATE INDEX IF NOT EXISTS ix_policy_backend ON policy (backend)",
    "CREATE INDEX IF NOT EXISTS ix_policy_cost_model_version ON policy (cost_model_version)",
    "CREATE INDEX IF NOT EXISTS ix_policy_file_op ON policy (file_op)",
    "CREATE INDEX IF NOT EXISTS ix_policy_op_type ON policy (op_type)",
    "CREATE INDEX IF NOT EXISTS ix_policy_seq ON policy (seq)",
    """CREATE TABLE task (
    task_id VARCHAR(64) NOT NULL,
    soc_version VARCHAR(64) NOT NULL,
    origin VARCHAR NOT NULL,
    started_at VARCHAR(32) NOT NULL,
    first_seq INTEGER NOT NULL,
    last_seq INTEGER NOT NULL,
    tuning_name VARCHAR,
    model_name VARCHAR,
    model_hash VARCHAR,
    job_type VARCHAR(16),
    search_mode VARCHAR(16),
    status VARCHAR(16) NOT NULL,
    finished_at VARCHAR(32),
    tuning_time_s FLOAT,
    model_baseline_ms FLOAT,
    model_result_ms FLOAT,
    failed_operators VARCHAR NOT NULL,
    add_num INTEGER NOT NULL,
    hit_num INTEGER NOT NULL,
    update_num INTEGER NOT NULL,
    reserved_num INTEGER NOT NULL,
    unsatisfied_num INTEGER NOT NULL,
    open_hits INTEGER NOT NULL,
    withdrawn_num INTEGER NOT NULL,
    PRIMARY KEY (task_id)
)""",
    """CREATE TABLE checkpoint (
    name VARCHAR(32) NOT NULL,
    last_seq INTEGER NOT NULL,
    schema_version INTEGER NOT NULL,
    PRIMARY KEY (name)
)""",
    """CREATE TABLE bank_meta (
    name VARCHAR(32) NOT NULL,
    value VARCHAR NOT NULL,
    PRIMARY KEY (name)
)""",
)
"""CREATE TABLE and CREATE INDEX for every table, in the order they are made, for SQLite."""


def ddl_for(dialect: str) -> tuple[str, ...]:
    """The statements that make a bank's tables in ``dialect`` (``sqlite`` or ``postgresql``).
    The two differ in one word: PostgreSQL numbers the log with a SERIAL column."""
    if dialect == "sqlite":
        return SQLITE_DDL
    serial = ("seq INTEGER NOT NULL,\n    event_id", "seq SERIAL NOT NULL,\n    event_id")
    return tuple(statement.replace(*serial) for statement in SQLITE_DDL)


def create_bank(store: EventStore, db: Db, bank_id: str) -> bool:
    """In a write transaction: make a bank in an empty database; return whether one was made
    (``False``: it already holds one).

    Raises:
        BankLocationError: an SQLite file that holds tables of something else.
    """
    tables = store.table_names(db)
    if "events" in tables:
        return False
    if tables and db.dialect == "sqlite":
        raise BankLocationError(f"{store.where}: an SQLite database of something else (tables: "
                                f"{', '.join(sorted(tables)[:5])}); no bank is made in it")
    for statement in ddl_for(db.dialect):
        db.run(statement)
    store.install_triggers(db)
    db.run(sql.insert("checkpoint"), (sql.CHECKPOINT, 0, SCHEMA_VERSION))
    db.run_many(sql.insert("bank_meta"), [("bank_id", bank_id),
                                          ("schema_version", str(SCHEMA_VERSION))])
    return True
