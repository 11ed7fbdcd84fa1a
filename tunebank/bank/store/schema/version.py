"""The bank's schema version, in a module of its own so the light read path (bank/quick.py)
knows it without importing the tables."""

from tunebank.bank.errors import BankError

SCHEMA_VERSION = 7
"""The bank's schema version, recorded in ``bank_meta`` (schema_version). A bank of another
version is not opened: an older one is brought up to date by ``bank upgrade`` (bank/store/migrate.py),
a newer one needs a newer tunebank.

1. the events log, its projections, the checkpoint and the bank id.
2. policy.cost_model_version; policy.backend indexed.
3. the version recorded in bank_meta (versions 1 and 2 kept it in checkpoint.schema_version).
4. no task_key table: the outcome rules read a running task's key states from the log itself,
   through the events index on (task_id, repo_key), which replaces the index on task_id.
5. policy indexed on seq: verify pages the policies in log order, and each page was a scan of
   the whole table and a sort without it.
6. policy.recorded_at (the winning entry's time): among entries without a time (AOE's own
   banks), the newer one wins its key; the policies are derived again under that rule.
7. ``withdrawn`` events (``bank import --mirror``), which retire a key's untimed entries and
   are counted in task.withdrawn_num, and policy.file_op (the operator of the bank file an
   entry came from, where it is not the entry's own); the projections are derived again.

The events table's columns are the same in every version."""


class SchemaVersionError(BankError):
    """The bank was written with a schema version this tunebank does not open as it is."""


def check_version(found: int, where: str) -> None:
    """Refuse a bank of schema version ``found`` unless it is this tunebank's, saying what to
    do about it.

    Raises:
        SchemaVersionError: the bank is older (run ``bank upgrade``) or newer than this tunebank.
    """
    if found > SCHEMA_VERSION:
        raise SchemaVersionError(
            f"{where}: bank schema {found} is newer than this tunebank reads (up to "
            f"{SCHEMA_VERSION}); install a newer tunebank to use it")
    if found < SCHEMA_VERSION:
        raise SchemaVersionError(
            f"{where}: bank schema {found} is older than this tunebank's {SCHEMA_VERSION}; run "
            "`bank upgrade` on it first (the log is kept as it is)")
