"""Tools for feeding `bank` hostile input: a bank to damage, mutations, and the one check.

The check (:func:`refused_or_sound`): no traceback, ever; a command that fails prints exactly
one ``bank: error:`` line, exits non-zero and leaves the bank byte for byte as it was; a command
that succeeds leaves a bank that verifies.
"""

from __future__ import annotations

import copy
import hashlib
import json
import shutil
import traceback
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from typer.testing import CliRunner, Result

from tunebank.bank import Bank
from tunebank.cli.main import app

runner = CliRunner()

FUZZ_SCALE = 1
"""How many times the default examples each fuzz test runs: 20 under ``pytest -m fuzz`` (set by
tests/conftest.py), 1 in the default run."""
DEEP = "\x00deep\x00"
"""Stands for a list nested 1,000 deep, spliced into the text after encoding (json.dumps itself
cannot write one)."""


def fuzz(examples: int) -> settings:
    """Fuzzing settings: no deadline (a run starts the CLI), ``examples`` inputs per test (times
    :data:`FUZZ_SCALE`)."""
    return settings(deadline=None, suppress_health_check=[HealthCheck.too_slow],
                    max_examples=examples * FUZZ_SCALE)


def dumps(value: Any) -> bytes:
    """``value`` as JSON text, with every :data:`DEEP` string a list nested 1,000 deep."""
    text = json.dumps(value, allow_nan=True)
    return text.replace(json.dumps(DEEP), "[" * 1000 + "]" * 1000).encode()


HOSTILE_VALUES = st.one_of(
    st.none(), st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([10**30, -1, 0, 1e308, 5e-324, 2**63, -(2**63) - 1, 10**400, -(10**400)]),
    st.sampled_from([DEEP, "\ud800", "op\udfff", "\udc80\ud800", "\ud83d\ude00"]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(["NaN", "35.35%", "-1%", "", "tuning successful", "add", "update", "1e999"]),
    st.just([]), st.just({}), st.lists(st.integers(), max_size=3),
)
"""Values a corrupt or forged file might hold where a number, string or list belongs."""


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else "absent"


def fresh_copy(bank: Path, scratch: Path) -> Path:
    """A copy of ``bank`` alone in a new folder under ``scratch``."""
    folder = scratch / uuid.uuid4().hex[:12]
    folder.mkdir(parents=True)
    target = folder / "bank.db"
    shutil.copyfile(bank, target)
    return target


def refused_or_sound(args: list[str], bank: Path) -> Result:
    """Run ``bank ARGS`` against the bank file ``bank`` and apply the check above."""
    before = digest(bank)
    beside = sorted(p.name for p in bank.parent.iterdir())
    result = runner.invoke(app, args)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError("traceback for bank " + " ".join(args) + ":\n" + "".join(
            traceback.format_exception(result.exception)))
    if result.exit_code == 0:
        with Bank.open(str(bank)) as opened:
            report = opened.verify()
        assert report.ok, report.problems
        return result
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("bank: error: "), result.stderr
    assert digest(bank) == before, "a failed command changed the bank"
    assert sorted(p.name for p in bank.parent.iterdir()) == beside, "a failed command left files"
    return result


def _slots(value: Any) -> Iterator[tuple[Any, Any]]:
    """Every (container, key-or-index) inside a JSON value."""
    if isinstance(value, dict):
        for key in list(value):
            yield value, key
            yield from _slots(value[key])
    elif isinstance(value, list):
        for index in range(len(value)):
            yield value, index
            yield from _slots(value[index])


@st.composite
def mutated_json(draw: st.DrawFn, document: Any) -> Any:
    """``document`` with one to three places replaced by hostile values, removed or doubled."""
    doc = copy.deepcopy(document)
    for _ in range(draw(st.integers(1, 3))):
        slots = list(_slots(doc))
        if not slots or draw(st.integers(0, 30)) == 0:
            return draw(HOSTILE_VALUES)
        container, key = draw(st.sampled_from(slots))
        action = draw(st.sampled_from(["replace", "replace", "delete", "double"]))
        if action == "replace":
            container[key] = draw(HOSTILE_VALUES)
        elif action == "delete":
            del container[key]
        elif isinstance(container, list):
            container.insert(key, copy.deepcopy(container[key]))
        else:
            container[draw(st.text(max_size=6))] = copy.deepcopy(container[key])
    return doc


@st.composite
def mutated_text(draw: st.DrawFn, text: str) -> bytes:
    """A JSON text mutated as a value, truncated, or with bytes overwritten."""
    how = draw(st.sampled_from(["json", "json", "truncate", "bytes"]))
    if how == "json":
        return dumps(draw(mutated_json(json.loads(text))))
    data = text.encode()
    if how == "truncate":
        return data[:draw(st.integers(0, max(len(data) - 1, 0)))]
    spots = draw(st.lists(st.tuples(st.integers(0, len(data) - 1), st.integers(0, 255)),
                          min_size=1, max_size=4))
    out = bytearray(data)
    for where, byte in spots:
        out[where] = byte
    return bytes(out)


@st.composite
def mutated_lines(draw: st.DrawFn, text: str) -> bytes:
    """A JSON Lines text with one line mutated (as JSON or as bytes), dropped or doubled."""
    lines = text.splitlines()
    index = draw(st.integers(0, len(lines) - 1))
    how = draw(st.sampled_from(["line", "line", "drop", "double", "file"]))
    if how == "line":
        lines[index] = draw(mutated_text(lines[index])).decode("utf-8", "surrogateescape")
    elif how == "drop":
        del lines[index]
    elif how == "double":
        lines.insert(index, lines[index])
    else:  # junk before the first line
        return draw(st.binary(min_size=1, max_size=64)) + text.encode()
    return "\n".join(lines).encode("utf-8", "surrogateescape") + b"\n"
