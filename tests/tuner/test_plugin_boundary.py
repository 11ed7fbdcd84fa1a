"""A misbehaving measurement plug-in, every way issue 29 found (tuner/measure/plugins.py): each answer
that is not one time per candidate, positive and plausible, and each exception, exit or hang,
is one line naming the backend (the key and chip where it measured); nothing bad is recorded,
and the task stays resumable."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.plugin_dist import install_plugin
from tunebank.bank import Bank
from tunebank.cli.main import app

runner = CliRunner()
MODEL = str(Path(__file__).resolve().parents[2] / "fixtures" / "models" / "squeezenet.onnx")

ROGUE = '''
"""A backend that misbehaves the way TUNEBANK_ROGUE says, from its second batch on."""
import os
import sys
import time

import numpy as np

from tunebank.tuner.measure.backend import MeasurementBackend
from tunebank.tuner.measure.sim import SimBackend


class Rogue(MeasurementBackend):
    name = "sim"          # claims to be the built-in model: must be recorded as "rogue"
    version = "rogue-1"

    def __init__(self, settings):
        self._sim = SimBackend(settings)
        self.calls = 0

    def _how(self):
        return os.environ.get("TUNEBANK_ROGUE", "")

    def chips(self):
        how = self._how()
        if how == "chips-raise":
            raise RuntimeError("no inventory")
        if how == "chips-rubbish":
            return 42
        return None

    def fit_check(self, key):
        how = self._how()
        if how == "fit-raise":
            raise ValueError("no compiler")
        if how == "fit-rubbish":
            return "fits"
        if how == "fit-answer-rubbish":
            from tunebank.tuner.measure.space import FitCheck
            return FitCheck(lambda rows: "yes", frozenset({0}))
        return super().fit_check(key)

    def measure(self, key, candidates, rng):
        times = self._sim.measure(key, candidates, rng)
        self.calls += 1
        if self.calls < 2:
            return times
        how = self._how()
        answers = {
            "short": lambda: times[:-1] if len(times) > 1 else np.array([]),
            "empty": lambda: np.array([]),
            "two-d": lambda: np.vstack([times, times]),
            "strings": lambda: np.array(["1.0"] * len(times)),
            "none": lambda: None,
            "scalar": lambda: 1.0,
            "objects": lambda: np.array([object()] * len(times)),
            "zero": lambda: np.zeros(len(times)),
            "huge": lambda: np.full(len(times), 1e308),
            "negative": lambda: -times,
            "nan": lambda: np.full(len(times), np.nan),
            "minus-inf": lambda: np.full(len(times), -np.inf),
        }
        if how == "exit":
            sys.exit(0)
        if how == "interrupt":
            raise KeyboardInterrupt
        if how == "hang":
            time.sleep(30)
        return answers[how]() if how in answers else times
'''


@pytest.fixture
def rogue(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An installed distribution declaring the backend ``rogue``, as pip would leave it."""
    install_plugin(tmp_path / "site", monkeypatch, "rogue_npu", ROGUE, {"rogue": "Rogue"})
    monkeypatch.chdir(tmp_path)


def _tune(*extra: str) -> tuple[int, list[str]]:
    result = runner.invoke(app, ["tune", MODEL, "--soc-version", "Ascend310", "--db", "b.db",
                                 "--budget", "4", "--backend", "rogue", "-q", *extra])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"traceback: {result.exception!r}")
    return result.exit_code, result.stderr.strip().splitlines()


MEASURE_CASES = {
    "short": "times of shape", "empty": "times of shape", "two-d": "times of shape",
    "strings": "not an array of times", "none": "returned a NoneType",
    "scalar": "returned a float", "objects": "returned an array of object",
    "zero": "returned 0.0 us", "huge": "returned 1e+308 us", "negative": "us for candidate",
    "nan": "returned nan us", "minus-inf": "returned -inf us",
    "exit": "failed measuring key", "fit-answer-rubbish": "its check returned a str",
}


@pytest.mark.parametrize("how", sorted(MEASURE_CASES))
def test_a_bad_answer_mid_tune_is_one_line_and_nothing_bad_is_recorded(
        how: str, rogue: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TUNEBANK_ROGUE", how)
    code, lines = _tune()
    assert code == 1 and len(lines) == 1, lines
    assert lines[0].startswith("bank: error: backend 'rogue' ") and " on Ascend310" in lines[0]
    assert MEASURE_CASES[how] in lines[0], lines[0]
    with Bank.open("b.db") as bank:
        (task,) = bank.tasks()
        assert task.status == "incomplete"  # resumable
        assert bank.verify().ok
        for policy in bank.policies():
            assert policy.backend == "rogue" and 1e-3 <= policy.best_us <= 1e9


@pytest.mark.parametrize(("how", "message"), [
    ("chips-raise", "backend 'rogue' failed listing its chips: RuntimeError: no inventory"),
    ("chips-rubbish", "chips() returned a int, not a set of chip names or None"),
])
def test_a_bad_chip_list_is_refused_before_the_bank_is_touched(
        how: str, message: str, rogue: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TUNEBANK_ROGUE", how)
    code, lines = _tune()
    assert code == 1 and len(lines) == 1 and message in lines[0], lines
    assert not Path("b.db").exists()


@pytest.mark.parametrize(("how", "message"), [
    ("fit-raise", "failed checking the fit of key"),
    ("fit-rubbish", "fit_check() for key"),
])
def test_a_bad_fit_check_is_one_line(how: str, message: str, rogue: None,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TUNEBANK_ROGUE", how)
    code, lines = _tune()
    assert code == 1 and len(lines) == 1 and message in lines[0], lines


def test_the_recorded_backend_is_the_entry_points_name(rogue: None) -> None:
    code, lines = _tune()
    assert code == 0, lines
    with Bank.open("b.db") as bank:
        assert {p.backend for p in bank.policies()} == {"rogue"}


def test_a_hung_backend_stops_at_the_timeout_and_the_task_resumes(
        rogue: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TUNEBANK_ROGUE", "hang")
    code, lines = _tune("--measure-timeout", "0.5")
    assert code == 1 and len(lines) == 1, lines
    assert "no answer within 0.5 s (--measure-timeout)" in lines[0]
    monkeypatch.setenv("TUNEBANK_ROGUE", "")
    code, lines = _tune("--measure-timeout", "0.5", "--reload")
    assert code == 0, lines
    with Bank.open("b.db") as bank:
        (task,) = bank.tasks()
        assert task.status == "successful"


def test_a_plug_in_raising_keyboardinterrupt_is_an_interruption_that_resumes(
        rogue: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TUNEBANK_ROGUE", "interrupt")
    code, lines = _tune()
    assert code != 0 and len(lines) == 1, lines
    assert "backend 'rogue' failed measuring key" in lines[0] and "KeyboardInterrupt" in lines[0]


def test_a_bad_answer_on_a_dask_worker_is_the_same_one_line(
        rogue: None, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("distributed")
    monkeypatch.setenv("TUNEBANK_ROGUE", "exit")  # the workers start with it
    code, lines = _tune("--workers", "1")
    assert code == 1 and len(lines) == 1, lines
    assert lines[0].startswith("bank: error: backend 'rogue' failed measuring key")
    assert "SystemExit" in lines[0]
