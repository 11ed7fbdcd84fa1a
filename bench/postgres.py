"""A bank a team shares, on PostgreSQL: `bank import` and `bank verify` of the workload beside
plain COPY on the same server in the same run.

The server is a private one started for the run (tests/postgres.py's Cluster: initdb into a
temporary folder, fsync off, as the tests run it), so both sides meet the same settings. Each
side gets a schema of its own, made by `bank init`, so the baseline copies into the very table
and indexes a bank has. Baselines:

- import: every row of the events file sent by psycopg's ``COPY events FROM STDIN`` in one
  transaction (no hashing, no checks, no projections: the floor an import cannot go below);
- verify: ``COPY (SELECT every column FROM events ORDER BY seq) TO STDOUT``, the log read once
  in order as raw bytes (no parsing, no hashing: the floor of any verify).

Used by bench/run.py (``--only postgres``); not a test. Needs the PostgreSQL server binaries
(Debian's postgresql package).
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

from bench.scale import child, event_rows, write_events_file


def postgres_at(size: int, folder: Path) -> dict[str, Any]:
    """Import and verify figures for a log of ``size`` events, with their COPY baselines."""
    from tests.postgres import Cluster, server_bin

    bin_dir = server_bin()
    if bin_dir is None:
        raise SystemExit("bench postgres: no PostgreSQL server binaries (install Debian's "
                         "postgresql package, as .ci/postgres-server does)")
    source = folder / f"pg-events-{size}.jsonl"
    count = write_events_file(source, size)
    cluster = Cluster(bin_dir)
    cluster.start()
    try:
        plain_url, bank_url = _schema(cluster.url), _schema(cluster.url)
        for url in (plain_url, bank_url):
            child("init", url)
        rows = event_rows(source)
        copy_in = plain_copy_in(plain_url, rows)
        del rows
        imported = child("import", str(source), bank_url)
        verified = child("verify", bank_url)
        copy_out = plain_copy_out(plain_url)
    finally:
        cluster.stop()
        source.unlink()
    return {"events": count,
            "plain_copy_in_per_s": round(count / copy_in),
            "import_per_s": round(count / imported.seconds),
            "import_peak_mb": round(imported.peak_mb),
            "plain_copy_out_per_s": round(count / copy_out),
            "verify_per_s": round(count / verified.seconds),
            "verify_peak_mb": round(verified.peak_mb)}


def _schema(server_url: str) -> str:
    """A bank URL on a new, empty schema of the server."""
    import psycopg

    from tunebank.bank.store.postgres import conninfo

    name = f"bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(conninfo(server_url), autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {name}")
    return f"{server_url}?options=-csearch_path%3D{name}"


def plain_copy_in(url: str, rows: list[tuple[Any, ...]]) -> float:
    """Seconds for psycopg to COPY ``rows`` into the events table in one transaction."""
    import psycopg

    from tunebank.bank.store.postgres import conninfo
    from tunebank.bank.store.schema.statements import EVENT_COLUMNS

    with psycopg.connect(conninfo(url)) as conn:
        started = time.perf_counter()
        with conn.cursor() as cursor, \
                cursor.copy(f"COPY events ({','.join(EVENT_COLUMNS)}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
        conn.commit()
        return time.perf_counter() - started


def plain_copy_out(url: str) -> float:
    """Seconds for psycopg to read every events row, in seq order, through COPY TO STDOUT."""
    import psycopg

    from tunebank.bank.store.postgres import conninfo
    from tunebank.bank.store.schema.statements import select_events

    with psycopg.connect(conninfo(url)) as conn:
        started = time.perf_counter()
        with conn.cursor() as cursor, \
                cursor.copy(f"COPY ({select_events()}) TO STDOUT") as copy:
            for _block in copy:
                pass
        return time.perf_counter() - started


def table(figures: dict[str, Any]) -> str:
    """The Markdown lines of docs/performance.md for these figures."""
    f = figures
    return "\n".join([
        f"| PostgreSQL, {f['events']:,} events | events/s | against plain COPY |",
        "|---|---|---|",
        f"| plain `COPY events FROM STDIN`, one transaction (baseline) | {f['plain_copy_in_per_s']:,} | |",
        f"| `bank import` of the events file (peak MB) | {f['import_per_s']:,} "
        f"({f['import_peak_mb']}) | {f['import_per_s'] / f['plain_copy_in_per_s']:.2f}x |",
        f"| plain `COPY (SELECT ... ORDER BY seq) TO STDOUT` (baseline) | {f['plain_copy_out_per_s']:,} | |",
        f"| `bank verify` (peak MB) | {f['verify_per_s']:,} ({f['verify_peak_mb']}) | "
        f"{f['verify_per_s'] / f['plain_copy_out_per_s']:.2f}x |",
    ])
