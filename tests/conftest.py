"""Fixtures shared by every test package: banks on each storage backend, outcome builders."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bank import Bank, EventKind, Outcome
from tests.postgres import Cluster, server_bin

BACKENDS = ["sqlite-file", "sqlite-memory", "postgresql"]
PG_ENV = "TUNEBANK_TEST_PG_URL"  # an existing server to use instead of starting one


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """The URL of a PostgreSQL server for the whole run (started here unless PG_ENV names one)."""
    if os.environ.get(PG_ENV):
        yield os.environ[PG_ENV]
        return
    bin_dir = server_bin()
    if bin_dir is None:
        pytest.skip("PostgreSQL server binaries not found (install Debian's postgresql package)")
    cluster = Cluster(bin_dir)
    cluster.start()
    try:
        yield cluster.url
    finally:
        cluster.stop()


@pytest.fixture
def postgres_url(postgres_server: str) -> Iterator[str]:
    """A bank URL of its own: a fresh schema on the shared server, dropped afterwards."""
    from sqlalchemy import create_engine, text

    schema = f"t_{uuid.uuid4().hex[:12]}"
    admin = create_engine(postgres_server)
    with admin.begin() as conn:
        conn.execute(text(f"CREATE SCHEMA {schema}"))
    try:
        yield f"{postgres_server}?options=-csearch_path%3D{schema}"
    finally:
        with admin.begin() as conn:
            conn.execute(text(f"DROP SCHEMA {schema} CASCADE"))
        admin.dispose()


def backend_url(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """Where a fresh bank on the named backend lives."""
    if kind == "sqlite-file":
        return str(tmp_path / "bank.db")
    if kind == "sqlite-memory":
        return "sqlite://"
    if kind == "postgresql":
        return str(request.getfixturevalue("postgres_url"))
    raise ValueError(kind)


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def bank(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Bank]:
    with Bank.open(backend_url(backend, tmp_path, request), create=True) as opened:
        yield opened


def info(key: str) -> dict[str, Any]:
    """A stand-in info_dict that differs per key."""
    return {"op": "MatMul", "shape": key}


def oc(kind: str, key: str, after: float | None = None, before: float = 100.0,
       **extra: Any) -> Outcome:
    """A compact outcome builder: policy kinds get a knowledge dict and times."""
    policy = kind in ("add", "update")
    return Outcome(
        kind=EventKind(kind),
        repo_key=key,
        op_name=f"op_{key}",
        op_type="MatMul",
        info_dict=info(key),
        knowledge={"baseM": 64, "key": key, "t": after} if policy else None,
        performance_before_us=before,
        performance_after_us=after if after is not None else (50.0 if policy else None),
        backend="sim",
        extra=extra,
    )
