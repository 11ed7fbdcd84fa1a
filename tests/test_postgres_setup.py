"""Finding PostgreSQL's server: an empty prefix finds nothing, and under CI that is a failure."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.postgres import no_server_message, server_bin

ROOT = Path(__file__).resolve().parent.parent


def test_an_empty_prefix_has_no_server_and_ci_fails_rather_than_skips(tmp_path: Path) -> None:
    env = {"TUNEBANK_PG_PREFIX": str(tmp_path)}
    assert server_bin(env) is None
    assert no_server_message({**env, "CI": "true"}) == (True, no_server_message(env)[1])
    assert no_server_message(env)[0] is False
    assert str(tmp_path) in no_server_message(env)[1]


def test_a_prefix_with_a_server_finds_the_newest(tmp_path: Path) -> None:
    for version in ("9", "15", "13"):
        (tmp_path / version / "bin").mkdir(parents=True)
        (tmp_path / version / "bin" / "initdb").touch()
    assert server_bin({"TUNEBANK_PG_PREFIX": str(tmp_path)}) == tmp_path / "15" / "bin"


def test_the_ci_check_finds_a_server_or_fails(tmp_path: Path) -> None:
    """.ci/postgres-server: with the binaries present it names them and installs nothing."""
    fake = tmp_path / "16" / "bin"
    fake.mkdir(parents=True)
    (fake / "initdb").touch()
    done = subprocess.run([str(ROOT / ".ci" / "postgres-server")], capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "TUNEBANK_PG_PREFIX": str(tmp_path)},
                          check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"PostgreSQL server binaries: {fake}"
