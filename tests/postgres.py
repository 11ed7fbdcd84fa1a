"""A throwaway PostgreSQL server for the tests: initdb into a temporary folder, start it on a
free loopback port, stop and delete it at the end. Needs the server binaries (Debian's
``postgresql`` package, which .ci/run installs); as root it runs them as the ``postgres`` user."""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path

PREFIX_ENV = "TUNEBANK_PG_PREFIX"  # where to look for {version}/bin/initdb, as .ci/postgres-server does
DEFAULT_PREFIX = "/usr/lib/postgresql"


def server_bin(env: Mapping[str, str] | None = None) -> Path | None:
    """The folder holding initdb and pg_ctl (the newest version), or None.

    Looks under ``$TUNEBANK_PG_PREFIX`` (default Debian's /usr/lib/postgresql), and on PATH
    only when no prefix is given.
    """
    env = os.environ if env is None else env
    prefix = env.get(PREFIX_ENV) or DEFAULT_PREFIX
    found = sorted(glob.glob(f"{prefix}/*/bin/initdb"),
                   key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0)
    if found:
        return Path(found[-1]).parent
    initdb = None if env.get(PREFIX_ENV) else shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def no_server_message(env: Mapping[str, str] | None = None) -> tuple[bool, str]:
    """What to do without server binaries: (fail, why). Under CI (CI=true) it is a failure."""
    env = os.environ if env is None else env
    prefix = env.get(PREFIX_ENV) or DEFAULT_PREFIX
    in_ci = env.get("CI", "").lower() in ("1", "true", "yes")
    why = (f"PostgreSQL server binaries not found under {prefix} (install Debian's postgresql "
           "package; .ci/postgres-server does)")
    return in_ci, why


class Cluster:
    """One private PostgreSQL server."""

    def __init__(self, bin_dir: Path) -> None:
        self.bin = bin_dir
        self.folder = Path(tempfile.mkdtemp(prefix="tunebank-pg-"))
        self.data = self.folder / "data"
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self._as = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        if self._as:
            shutil.chown(self.folder, "postgres")

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://tunebank@127.0.0.1:{self.port}/postgres"

    def start(self) -> None:
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "tunebank", "-E", "UTF8",
                  "--no-sync")
        options = f"-F -p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1"
        self._run("pg_ctl", "-D", str(self.data), "-o", options, "-l", str(self.folder / "log"),
                  "-w", "start")

    def stop(self) -> None:
        try:
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "stop")
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)

    def _run(self, tool: str, *args: str) -> None:
        done = subprocess.run([*self._as, str(self.bin / tool), *args], capture_output=True,
                              text=True, check=False, cwd=self.folder)
        if done.returncode != 0:
            raise RuntimeError(f"{tool} failed: {done.stderr.strip() or done.stdout.strip()}")
