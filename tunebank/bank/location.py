"""Where a bank lives: an explicit --db, TUNEBANK_DB, or the folders AOE users already know."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from tunebank.bank.errors import READ_ONLY, BankLocationError

BANK_FILE = "bank.db"
MADE_FOLDERS = frozenset({"ASCEND_CACHE_PATH", "the AOE default folder"})
"""The sources whose bank folder is made when missing: AOE's own defaults, as AOE makes them.
AOE itself stops when TUNE_BANK_PATH names no folder, and so does tunebank."""


@dataclass(frozen=True)
class BankLocation:
    """A resolved bank: its URL (``sqlite:///PATH``, ``postgresql+psycopg://...``) and, for a
    file bank, the file."""

    url: str
    path: Path | None
    source: str
    given: str | None = None
    """A server URL as the user spelled it (``postgres://...``), which messages name."""

    @property
    def exists(self) -> bool:
        """Whether there is something to open (always true for memory and server databases)."""
        return self.path is None or self.path.exists()

    @property
    def shown(self) -> str:
        """The bank fit to print: the file path, or the URL as given with its password masked."""
        return str(self.path) if self.path is not None else masked(self.given or self.url)

    def describe(self) -> str:
        """A short human description: :attr:`shown`, and where it came from."""
        return f"{self.shown} (from {self.source})"


def default_folder(env: Mapping[str, str]) -> tuple[Path, str]:
    """AOE's own order: TUNE_BANK_PATH, then ASCEND_CACHE_PATH/aoe_data, then the home default."""
    if env.get("TUNE_BANK_PATH"):
        return Path(env["TUNE_BANK_PATH"]), "TUNE_BANK_PATH"
    if env.get("ASCEND_CACHE_PATH"):
        return Path(env["ASCEND_CACHE_PATH"]) / "aoe_data", "ASCEND_CACHE_PATH"
    home = Path(env.get("HOME") or Path.home())
    return home / "Ascend" / "latest" / "data" / "aoe" / "custom", "the AOE default folder"


def resolve(db: str | None = None, env: Mapping[str, str] | None = None) -> BankLocation:
    """Resolve a bank from ``db`` (a path or URL), else env TUNEBANK_DB, else AOE's folders.

    Raises:
        BankLocationError: the URL names a database this version cannot use.
    """
    env = os.environ if env is None else env
    if db:
        return _from_text(db, "--db")
    if env.get("TUNEBANK_DB"):
        return _from_text(env["TUNEBANK_DB"], "TUNEBANK_DB")
    folder, source = default_folder(env)
    path = folder / BANK_FILE
    return BankLocation(f"sqlite:///{path}", path, source)


def _from_text(text: str, source: str) -> BankLocation:
    if "://" not in text:
        path = Path(text).expanduser()
        if path.is_dir():
            path = path / BANK_FILE
        return BankLocation(f"sqlite:///{path}", path, source)
    if text in ("sqlite://", "sqlite:///:memory:"):
        return BankLocation(text, None, source)
    if text.startswith("sqlite:///"):
        path = Path(text.removeprefix("sqlite:///")).expanduser()
        return BankLocation(f"sqlite:///{path}", path, source)
    scheme = text.split("://", 1)[0]
    if scheme in ("postgresql", "postgres", "postgresql+psycopg"):
        url = "postgresql+psycopg://" + text.split("://", 1)[1]
        _check_url(url, source)
        return BankLocation(url, None, source, given=text)
    raise BankLocationError(
        f"{source}: database scheme {scheme!r} is not supported; use a file path, sqlite:///PATH "
        "or postgresql://USER@HOST/DB"
    )


def _check_url(url: str, source: str) -> None:
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises for a port that is not a number
    except ValueError:  # its message quotes the URL, password and all: never shown
        raise BankLocationError(
            f"{source}: not a valid database URL: its host or port does not parse (a password "
            "holding / ? # or @ must be percent-encoded, e.g. %2F %3F %23 %40)") from None
    if parts.netloc.count("@") > 1:  # libpq splits at the first @, Python at the last
        raise BankLocationError(f"{source}: not a valid database URL: more than one @ before the "
                                "host (a password holding @ must be percent-encoded as %40)")
    if not parts.netloc and not parts.path.strip("/"):
        raise BankLocationError(f"{source}: not a valid database URL (no host or database)")


def writable(path: Path) -> bool:
    """Whether this user can change the bank file at ``path``: the file and its folder, where
    SQLite keeps its -wal and -shm files."""
    return os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)


def prepare_for_write(location: BankLocation) -> None:
    """Make the bank's folder if it is AOE's own (see :data:`MADE_FOLDERS`) and check the bank
    can be written there. A folder a user named (--db, TUNEBANK_DB, TUNE_BANK_PATH) must exist:
    a typo there is a mistake to report, not a path to create.

    Raises:
        BankLocationError: the folder cannot be created, or the folder or file is not writable.
    """
    if location.path is None:
        return
    folder = location.path.parent
    if location.path.is_dir():
        raise BankLocationError(f"bank file {location.path}: is a folder")
    if not folder.is_dir() and location.source not in MADE_FOLDERS:
        raise BankLocationError(f"bank folder {folder} (from {location.source}) does not exist; a "
                                "bank is made only in a folder that does (create it first)")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BankLocationError(f"bank folder {folder}: cannot be created ({exc.strerror})") from exc
    if not os.access(folder, os.W_OK):
        raise BankLocationError(f"bank {location.path}: {READ_ONLY}: its folder is (SQLite "
                                "writes its -wal and -shm files beside the bank)")
    if location.path.exists() and not os.access(location.path, os.W_OK):
        raise BankLocationError(f"bank {location.path}: {READ_ONLY}")


_SECRET_PARAMS = re.compile(r"(?i)([?&](?:password|passfile|sslpassword)=)[^&#]*")


def masked(url: str) -> str:
    """``url`` with its password shown as ``***``, however it was given: in the user part
    (``user:pw@host``, even with an unencoded ``/ ? # @`` in it, which a URL parser splits in
    the wrong place) or as a ``password=`` parameter. Only the URL parser's side ever sees the
    password: every line, table and JSON field names a bank through this (or
    :func:`shown_source`)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    at = rest.rfind("@")
    if at >= 0:  # the last @: a password may hold one (unencoded); a host never does
        user, colon, _ = rest[:at].partition(":")
        rest = f"{user}:***@{rest[at + 1:]}" if colon else rest
    return f"{scheme}://" + _SECRET_PARAMS.sub(r"\1***", rest)


def shown_source(name: str) -> str:
    """A bank as given on the command line, fit to print: a URL masked (see :func:`masked`),
    a path as it is."""
    return masked(name) if "://" in name else name


def scrubbed(text: str, url: str) -> str:
    """``text`` (a driver's message) with every password ``url`` holds replaced by ``***``:
    a driver may quote the part of a URL it could not use."""
    for secret in _passwords(url):
        text = text.replace(secret, "***")
    return text


def _passwords(url: str) -> list[str]:
    rest = url.partition("://")[2]
    at = rest.rfind("@")
    found = [rest[:at].partition(":")[2]] if at >= 0 else []
    found += [match.group(2) for match in re.finditer(
        r"(?i)([?&](?:password|passfile|sslpassword)=)([^&#]*)", rest)]
    return [secret for secret in found if secret]


def remove_stale_staging(target: Path) -> None:
    """Remove the staging files of a write to ``target`` whose process is gone (killed with
    SIGKILL, which no ``finally`` survives): ``.NAME.PID.new`` and its -wal and -shm."""
    with suppress(OSError):
        for leftover in target.parent.glob(f".{target.name}.*.new*"):
            pid, _, rest = leftover.name.removeprefix(f".{target.name}.").partition(".")
            if pid.isdigit() and rest in ("new", "new-wal", "new-shm") and not _alive(int(pid)):
                leftover.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # no signal sent: only whether the process exists
    except ProcessLookupError:
        return False
    except OSError:  # another user's, alive
        return True
    return True
