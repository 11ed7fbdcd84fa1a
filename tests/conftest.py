"""Fixtures shared by every test package: banks on each storage backend, outcome builders."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bank import Bank, EventKind, Outcome

BACKENDS = ["sqlite-file", "sqlite-memory"]


def open_backend(kind: str, tmp_path: Path) -> Bank:
    """A fresh bank on the named backend."""
    if kind == "sqlite-file":
        return Bank.open(str(tmp_path / "bank.db"), create=True)
    if kind == "sqlite-memory":
        return Bank.open("sqlite://", create=True)
    raise ValueError(kind)


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def bank(backend: str, tmp_path: Path) -> Iterator[Bank]:
    with open_backend(backend, tmp_path) as opened:
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
