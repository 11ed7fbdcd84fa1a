"""Measurement backends as plug-ins: found by name through their entry point, used by a tune,
and recorded with every outcome."""

from __future__ import annotations

import json
import re
import sqlite3
from importlib.metadata import entry_points
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from tests.plugin_dist import install_plugin
from tunebank.cli.main import app
from tunebank.tuner.measure.backend import BackendError, BackendSettings, KeyWork
from tunebank.tuner.measure.costmodel import COST_MODEL_VERSION
from tunebank.tuner.measure.plugins import ENTRY_POINTS, backend_names, open_backend
from tunebank.tuner.measure.sim import SimBackend
from tunebank.tuner.measure.socs import SOCS
from tunebank.tuner.measure.space import vector_space
from tunebank.tuner.model.workload import VectorWork

runner = CliRunner()
MODEL = str(Path(__file__).resolve().parents[2] / "fixtures" / "models" / "squeezenet.onnx")

PLUG_IN = '''
"""A backend a team might ship: the sim model 1.5 times slower, on one chip only."""
from tunebank.tuner.measure.backend import MeasurementBackend
from tunebank.tuner.measure.sim import SimBackend


class Npu(MeasurementBackend):
    name = "npu"
    version = "npu-1"

    def __init__(self, settings):
        self._sim = SimBackend(settings)
        self.repeats = settings.run_loop

    def chips(self):
        return frozenset({"Ascend310"})

    def measure(self, key, candidates, rng):
        return self._sim.measure(key, candidates, rng) * 1.5


class Flaky(Npu):
    """Loses its device after its 20th batch while TEAM_NPU_FLAKY is set."""

    name = "flaky"
    version = "flaky-1"
    batches = 0

    def chips(self):
        return frozenset({"Ascend310"})

    def measure(self, key, candidates, rng):
        import os

        Flaky.batches += 1
        if os.environ.get("TEAM_NPU_FLAKY") and Flaky.batches > 20:
            raise OSError("device lost")
        return super().measure(key, candidates, rng)


def broken(settings):
    raise RuntimeError("no device found")


def not_a_backend(settings):
    return object()
'''


@pytest.fixture
def plug_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An installed distribution declaring four backends, as pip would leave it."""
    install_plugin(tmp_path / "site", monkeypatch, "team_npu", PLUG_IN,
                   {"npu": "Npu", "broken": "broken", "odd": "not_a_backend", "flaky": "Flaky"})


def test_sim_is_declared_through_the_entry_point_group() -> None:
    assert "sim" in {point.name for point in entry_points(group=ENTRY_POINTS)}
    backend = open_backend("sim", BackendSettings(noise=0.1, run_loop=5))
    assert isinstance(backend.inner, SimBackend)  # type: ignore[attr-defined]
    assert (backend.name, backend.version, backend.noise, backend.repeats) == \
        ("sim", COST_MODEL_VERSION, 0.1, 5)


def test_sim_noise_is_the_median_of_its_repeats_and_follows_the_generator() -> None:
    spec = SOCS["Ascend310"]
    work = VectorWork(200_000, 400_000, 400_000, 1, 5, 3000, 3)
    key = KeyWork("1", spec, work, vector_space(work, spec))
    rows = np.array([key.space.default])
    exact = SimBackend().measure(key, rows, np.random.default_rng(0))
    noisy = SimBackend(BackendSettings(noise=0.05, run_loop=9))
    first = noisy.measure(key, rows, np.random.default_rng(3))
    assert first[0] != exact[0] and abs(first[0] / exact[0] - 1) < 0.1
    assert noisy.measure(key, rows, np.random.default_rng(3))[0] == first[0]


def test_an_unknown_backend_names_the_installed_ones() -> None:
    with pytest.raises(BackendError, match=r"--backend: no measurement backend 'tpu' is installed "
                                           r"\(installed: sim\)"):
        open_backend("tpu", BackendSettings())


def test_a_plug_in_is_found_and_a_failing_one_is_one_error(plug_in: None) -> None:
    assert backend_names() == ["broken", "flaky", "npu", "odd", "sim"]
    assert open_backend("npu", BackendSettings()).version == "npu-1"
    with pytest.raises(BackendError, match="'broken' could not start: RuntimeError: no device found"):
        open_backend("broken", BackendSettings())
    with pytest.raises(BackendError, match="'odd' made a object, not a"):
        open_backend("odd", BackendSettings())


def test_a_tune_measures_with_the_plug_in_and_records_its_name_and_version(
        plug_in: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    args = ["tune", MODEL, "--soc-version", "Ascend310", "--budget", "8", "--json"]
    sim = json.loads(runner.invoke(app, [*args, "--db", "sim.db"]).stdout)
    result = runner.invoke(app, [*args, "--db", "npu.db", "--backend", "npu"])
    assert result.exit_code == 0, result.output
    npu = json.loads(result.stdout)
    assert npu["model_baseline_ms"] == pytest.approx(sim["model_baseline_ms"] * 1.5)
    with sqlite3.connect(tmp_path / "npu.db") as conn:
        rows = conn.execute("SELECT kind, payload FROM events").fetchall()
        backends = {row[0] for row in conn.execute("SELECT DISTINCT backend FROM policy")}
    started = next(json.loads(p) for kind, p in rows if kind == "task_started")
    outcomes = [json.loads(p) for kind, p in rows if kind not in ("task_started", "task_finished")]
    assert (started["backend"], started["cost_model_version"]) == ("npu", "npu-1")
    assert outcomes and {(o["backend"], o["cost_model_version"]) for o in outcomes} == {("npu", "npu-1")}
    assert backends == {"npu"}


def test_a_resumed_task_keeps_its_backend(plug_in: None, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    args = ["tune", MODEL, "--soc-version", "Ascend310", "--db", "b.db", "--budget", "8"]
    started = runner.invoke(app, ["init", "--db", "b.db"])
    assert started.exit_code == 0
    from tunebank.bank import Bank

    with Bank.open("b.db") as bank:  # a task the npu backend started, then was killed
        bank.start_task("Ascend310", tuning_name="t", model_name="squeezenet",
                        model_hash=_model_hash(), job_type="opat", search_mode="ga",
                        extra={"seed": 0, "budget": 8, "retune": False, "transfer": True,
                               "noise": 0.0, "run_loop": 1, "backend": "npu",
                               "cost_model_version": "npu-1"})
    clash = runner.invoke(app, [*args, "--reload", "--backend", "sim"])
    assert clash.exit_code == 1 and "--backend: sim differs from the unfinished task's npu" in clash.stderr
    resumed = runner.invoke(app, [*args, "--reload", "--json"])
    assert resumed.exit_code == 0, resumed.output
    with sqlite3.connect(tmp_path / "b.db") as conn:
        kinds = {json.loads(p)["backend"] for p, in conn.execute(
            "SELECT payload FROM events WHERE kind NOT IN ('task_started', 'task_finished')")}
    assert kinds == {"npu"}


@pytest.mark.parametrize(("args", "message"), [
    (["--backend", "npu", "--soc-version", "Ascend910B2"],
     "--backend: npu cannot measure Ascend910B2 (it measures Ascend310)"),
    (["--backend", "broken", "--soc-version", "Ascend310"], "'broken' could not start"),
    (["--backend", "tpu", "--soc-version", "Ascend310"], "no measurement backend 'tpu'"),
])
def test_a_backend_refused_is_one_line_and_writes_nothing(plug_in: None, tmp_path: Path,
                                                          args: list[str], message: str) -> None:
    result = runner.invoke(app, ["tune", MODEL, "--db", str(tmp_path / "b.db"), *args])
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines() == [result.stderr.strip()]
    assert message in result.stderr
    assert not (tmp_path / "b.db").exists()


def test_a_backend_failing_mid_tune_is_one_line_and_what_it_recorded_stays(
        plug_in: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A plug-in's own error (a lost device) stops the tune with one line naming the backend,
    the key and the chip; the keys measured before it stay, verify passes, and --reload
    finishes the task without measuring them again."""
    from tunebank.bank import Bank

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TEAM_NPU_FLAKY", "1")
    args = ["tune", MODEL, "--soc-version", "Ascend310", "--db", "b.db", "--budget", "8",
            "--backend", "flaky", "--mode", "ga", "-q"]
    failed = runner.invoke(app, args)
    assert failed.exit_code == 1, failed.output
    (line,) = failed.stderr.strip().splitlines()
    assert re.fullmatch(r"bank: error: backend 'flaky' failed measuring key \d+ on Ascend310: OSError: "
                        r"device lost; what was recorded stays, and the same command with --reload "
                        r"continues the task", line), line
    with Bank.open("b.db") as bank:
        (task,) = bank.tasks()
        recorded = task.add_num + task.unsatisfied_num
        assert task.status == "incomplete" and recorded > 0
        assert bank.verify().ok
    monkeypatch.delenv("TEAM_NPU_FLAKY")
    resumed = runner.invoke(app, [*args, "--reload", "--json"])
    assert resumed.exit_code == 0, resumed.output
    with Bank.open("b.db") as bank:
        (task,) = bank.tasks()
        assert task.status == "successful" and task.total_num == 38  # squeezenet's operators
    with sqlite3.connect(tmp_path / "b.db") as conn:  # no key measured twice
        assert conn.execute("SELECT COUNT(*), COUNT(DISTINCT repo_key) FROM events WHERE repo_key "
                            "IS NOT NULL").fetchone() == (38, 38)


def test_a_backend_failing_on_a_dask_worker_is_the_same_one_line(
        plug_in: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The error comes back from the worker process that raised it as the same one line, and
    --reload finishes the task on a new cluster."""
    from tunebank.bank import Bank

    pytest.importorskip("distributed")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TEAM_NPU_FLAKY", "1")  # the workers start with it, and the plug-in's path
    args = ["tune", MODEL, "--soc-version", "Ascend310", "--db", "b.db", "--budget", "8",
            "--backend", "flaky", "--workers", "2", "-q"]
    failed = runner.invoke(app, args)
    assert failed.exit_code == 1, (failed.output, repr(failed.exception))
    assert failed.stderr.strip(), (failed.output, repr(failed.exception))
    (line,) = failed.stderr.strip().splitlines()
    assert re.fullmatch(r"bank: error: backend 'flaky' failed measuring key \d+ on Ascend310: OSError: "
                        r"device lost; what was recorded stays, .*", line), line
    with Bank.open("b.db") as bank:
        assert bank.verify().ok and [t.status for t in bank.tasks()] == ["incomplete"]
    monkeypatch.delenv("TEAM_NPU_FLAKY")
    resumed = runner.invoke(app, [*args, "--reload"])
    assert resumed.exit_code == 0, resumed.output
    with Bank.open("b.db") as bank:
        assert bank.verify().ok and [(t.status, t.total_num) for t in bank.tasks()] == [("successful", 38)]


def _model_hash() -> str:
    from tunebank.tuner.model.reading import load_model

    return load_model(Path(MODEL), {}).sha256
