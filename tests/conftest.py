"""Fixtures shared by every test package: banks on each storage backend, outcome builders."""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings
from hypothesis.configuration import set_hypothesis_home_dir

from tests import hostile
from tests.postgres import Cluster, no_server_message, server_bin
from tests.repo_guard import RepoSnapshot
from tunebank.bank import Bank, EventKind, Outcome

BACKENDS = ["sqlite-file", "sqlite-memory", "postgresql"]
PG_ENV = "TUNEBANK_TEST_PG_URL"  # an existing server to use instead of starting one
CALLER_ENV = ("TUNEBANK_DB", "TUNE_BANK_PATH", "ASCEND_WORK_PATH", "ASCEND_CACHE_PATH")
"""What an AOE user's shell sets and tunebank reads: cleared for every test."""

# Deterministic property tests that write nothing in the repo folder: no example database, and
# hypothesis's own caches in a temporary folder removed at the end.
settings.register_profile("tunebank", database=None, derandomize=True)
settings.load_profile("tunebank")
_HYPOTHESIS_HOME = tempfile.mkdtemp(prefix="tunebank-hypothesis-")
set_hypothesis_home_dir(_HYPOTHESIS_HOME)
_SNAPSHOT: RepoSnapshot | None = None
_CALLERS: dict[str, str] = {}


def pytest_configure(config: pytest.Config) -> None:
    """Clear the caller's AOE variables for the whole run, before any fixture of any scope runs
    (the per-test fixture below clears them again, for tests that set them)."""
    for name in CALLER_ENV:
        if name in os.environ:
            _CALLERS[name] = os.environ.pop(name)
    if "fuzz" in (config.option.markexpr or ""):  # the opt-in long fuzz: `pytest -m fuzz`
        hostile.FUZZ_SCALE = 20


def pytest_unconfigure(config: pytest.Config) -> None:
    os.environ.update(_CALLERS)


def pytest_sessionstart(session: pytest.Session) -> None:
    global _SNAPSHOT
    _SNAPSHOT = RepoSnapshot.take()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the run if it left, removed or changed any file in the repository folder."""
    shutil.rmtree(_HYPOTHESIS_HOME, ignore_errors=True)
    if _SNAPSHOT is None:
        return
    changed = _SNAPSHOT.changes()
    if changed:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(f"the tests changed the repository folder: {', '.join(changed[:10])}",
                                red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(autouse=True)
def hermetic(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Every test runs as on a machine with no AOE set-up: the variables an AOE user has set are
    cleared, HOME is an empty folder and the working folder a fresh one, so nothing the caller
    has set is read and nothing lands in the repository."""
    for name in CALLER_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path_factory.mktemp("home")))
    monkeypatch.chdir(tmp_path_factory.mktemp("cwd"))


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """The URL of a PostgreSQL server for the whole run (started here unless PG_ENV names one)."""
    if os.environ.get(PG_ENV):
        yield os.environ[PG_ENV]
        return
    bin_dir = server_bin()
    if bin_dir is None:
        must_fail, why = no_server_message()
        if must_fail:
            pytest.fail(f"CI=true: {why}")
        pytest.skip(why)
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
