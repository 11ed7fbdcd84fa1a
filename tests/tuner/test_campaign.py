"""Campaigns: several models on several chips, each key searched once per chip, the same bank
however the searches are spread."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import tunebank.tuner.search.executors
from tunebank.bank import Bank
from tunebank.cli.main import app
from tunebank.tuner.campaign.file import CampaignModel
from tunebank.tuner.campaign.runner import run_campaign
from tunebank.tuner.errors import TuneError
from tunebank.tuner.flow import Reporter, tune
from tunebank.tuner.options import TuneOptions
from tunebank.tuner.search.executors import InProcess, OnDask

runner = CliRunner()
MODELS = Path(__file__).resolve().parents[2] / "fixtures" / "models"
CHIPS = ["Ascend310", "Ascend910B2"]


def _options(tmp_path: Path, model: Path, chip: str = CHIPS[0]) -> TuneOptions:
    return TuneOptions(model=model, soc_version=chip, budget=8, seed=3, work_dir=tmp_path)


def _entries(paths: list[Path]) -> list[CampaignModel]:
    return [CampaignModel(path) for path in paths]


def _models(tmp_path: Path) -> list[Path]:
    """squeezenet and a copy of it under another name: every key of the copy is shared."""
    copy = tmp_path / "squeezenet_copy.onnx"
    shutil.copyfile(MODELS / "squeezenet.onnx", copy)
    return [MODELS / "squeezenet.onnx", copy]


def _bank_state(path: Path) -> tuple[list[Any], list[Any], int]:
    """What must not depend on how a campaign ran: every policy, every task's counts (by
    name), and the measurements recorded."""
    with sqlite3.connect(path) as conn:
        policies = conn.execute("SELECT soc_version, repo_key, info_digest, best_us, knowledge, "
                                "tune_mode, backend FROM policy ORDER BY 1, 2, 3").fetchall()
        tasks = conn.execute("SELECT tuning_name, status, add_num, hit_num, update_num, "
                             "reserved_num, unsatisfied_num FROM task ORDER BY first_seq").fetchall()
        spent = sum(json.loads(p).get("measurements", 0)
                    for p, in conn.execute("SELECT payload FROM events"))
    return policies, tasks, spent


def test_each_model_records_what_tuning_it_after_the_others_records(tmp_path: Path) -> None:
    models = _models(tmp_path)
    with_campaign = tmp_path / "campaign.db"
    run_campaign(lambda: Bank.open(str(with_campaign), create=True),
                 _options(tmp_path / "c", models[0]), _entries(models), CHIPS)
    one_by_one = tmp_path / "sequential.db"
    for chip in CHIPS:
        for model in models:
            tune(lambda: Bank.open(str(one_by_one), create=True),
                 _options(tmp_path / "s", model, chip))
    campaign, sequential = _bank_state(with_campaign), _bank_state(one_by_one)
    assert campaign[0] == sequential[0]  # the same policies
    assert campaign[1] == sequential[1]  # each task's repo_summary
    copies = campaign[1][1::2]  # the copy, tuned after squeezenet on each chip: all known
    assert len(copies) == 2 and all(row[2] == 0 and row[3] > 0 for row in copies)
    assert campaign[2] == sequential[2]  # the same measurements: a shared key searched once


def test_the_same_campaign_gives_the_same_bank_serially_and_on_two_worker_processes(
        tmp_path: Path) -> None:
    models = [MODELS / "squeezenet.onnx", MODELS / "inception_v1.onnx"]
    serial, spread = tmp_path / "serial.db", tmp_path / "spread.db"
    run_campaign(lambda: Bank.open(str(serial), create=True), _options(tmp_path / "a", models[0]),
                 _entries(models), CHIPS)
    cluster = OnDask(workers=2)
    try:
        assert len(cluster.client.scheduler_info()["workers"]) == 2
        run_campaign(lambda: Bank.open(str(spread), create=True),
                     _options(tmp_path / "b", models[0]), _entries(models), CHIPS, cluster)
    finally:
        cluster.close()
    assert _bank_state(serial) == _bank_state(spread)
    with Bank.open(str(spread)) as bank:
        assert bank.verify().ok
        assert len(bank.tasks()) == 4 and all(t.status == "successful" for t in bank.tasks())


def test_a_campaign_writes_each_tasks_files_in_a_folder_of_its_own(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    models = _models(tmp_path)
    chips = [arg for chip in CHIPS for arg in ("--soc-version", chip)]
    result = runner.invoke(app, ["tune", *map(str, models), *chips, "--db", "b.db", "--budget", "8",
                                 "--json"])
    assert result.exit_code == 0, result.output
    reports = json.loads(result.stdout)
    assert [r["soc_version"] for r in reports] == [CHIPS[0], CHIPS[0], CHIPS[1], CHIPS[1]]
    assert len({r["task_id"] for r in reports}) == 4
    files = [Path(r["result_file"]) for r in reports]
    assert all(f.exists() for f in files)
    assert [f.parent.name for f in files] == [f"{m.stem}_{c}" for c in CHIPS for m in models]
    assert all((f.parent / "tuning_result.json").exists() for f in files)


@pytest.mark.parametrize(("args", "message"), [
    (["--workers", "2", "--scheduler", "tcp://127.0.0.1:1"], "--workers and --scheduler: give one"),
    (["--input-shape", "data_0:1,3,224,224"], "--input-shape: names one model's operators or inputs"),
    (["--job-type", "subgraph"], "--job-type: a campaign tunes operators"),
    (["--scheduler", "tcp://127.0.0.1:9"], "--scheduler: cannot reach the Dask scheduler at "
                                           "tcp://127.0.0.1:9"),
])
def test_a_campaign_refused_is_one_line_and_writes_nothing(tmp_path: Path, args: list[str],
                                                           message: str,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tunebank.tuner.search.executors, "CONNECT_TIMEOUT_S", 1)
    models = _models(tmp_path)
    result = runner.invoke(app, ["tune", *map(str, models), "--soc-version", "Ascend310",
                                 "--db", str(tmp_path / "b.db"), *args])
    assert result.exit_code == 1, result.output
    assert result.stderr.strip().splitlines() == [result.stderr.strip()]
    assert message in result.stderr
    assert not (tmp_path / "b.db").exists()


def test_without_dask_the_cluster_flags_say_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    real = builtins.__import__

    def no_distributed(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "distributed" or name.startswith("distributed."):
            raise ImportError(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_distributed)
    with pytest.raises(TuneError, match=r"--workers: needs dask and distributed \(pip install -e "
                                        r"'\.\[cluster\]'\)"):
        OnDask(workers=2)


def test_a_worker_killed_mid_campaign_costs_only_its_task(tmp_path: Path) -> None:
    """A worker process is killed with SIGKILL while it searches: Dask runs its task again on
    the other worker (or the one the nanny restarts), and the bank is the one a serial run
    makes, nothing recorded twice."""
    models = [MODELS / "squeezenet.onnx"]
    serial, spread = tmp_path / "serial.db", tmp_path / "spread.db"
    run_campaign(lambda: Bank.open(str(serial), create=True), _options(tmp_path / "a", models[0]),
                 _entries(models), CHIPS)
    cluster = OnDask(workers=2)
    finished = threading.Event()
    killed: list[bool] = []  # whether the campaign was still running when the worker died

    def kill_a_busy_worker() -> None:
        time.sleep(0.8)  # searches are under way: each measurement takes 10 ms
        pids = cluster.client.run(os.getpid)
        busy = [address for address, tasks in cluster.client.processing().items() if tasks]
        if busy:
            os.kill(pids[busy[0]], signal.SIGKILL)
            killed.append(not finished.is_set())

    killer = threading.Thread(target=kill_a_busy_worker)
    try:
        killer.start()
        slow = replace(_options(tmp_path / "b", models[0]), sim_delay_s=0.01)
        run_campaign(lambda: Bank.open(str(spread), create=True), slow, _entries(models), CHIPS, cluster)
        finished.set()
        killer.join()
    finally:
        cluster.close()
    assert killed == [True], "no busy worker was killed while the campaign ran"
    assert _bank_state(serial) == _bank_state(spread)
    with Bank.open(str(spread)) as bank:
        assert bank.verify().ok


def test_searches_run_as_jobs_record_what_the_search_loop_records(tmp_path: Path) -> None:
    """The executor path (jobs, results in batches) against the key-by-key loop, in one
    process: the same bank."""
    models = _models(tmp_path)
    loop, jobs = tmp_path / "loop.db", tmp_path / "jobs.db"
    run_campaign(lambda: Bank.open(str(loop), create=True), _options(tmp_path / "a", models[0]),
                 _entries(models), CHIPS)
    run_campaign(lambda: Bank.open(str(jobs), create=True), _options(tmp_path / "b", models[0]),
                 _entries(models), CHIPS, InProcess())
    assert _bank_state(loop) == _bank_state(jobs)


class _StopAfter(Reporter):
    """Stops the campaign, as a kill would, once ``keys`` outcomes of searched keys are
    recorded."""

    def __init__(self, keys: int) -> None:
        self.left = keys

    def key_done(self, index: int, total: int, key: Any, outcome: Any) -> None:
        self.left -= 1
        if self.left == 0:
            raise KeyboardInterrupt


def test_a_stopped_campaign_goes_on_with_reload_and_measures_nothing_twice(tmp_path: Path) -> None:
    models = [MODELS / "squeezenet.onnx", MODELS / "inception_v1.onnx"]
    whole, stopped = tmp_path / "whole.db", tmp_path / "stopped.db"
    options = _options(tmp_path / "w", models[0])
    run_campaign(lambda: Bank.open(str(whole), create=True), options, _entries(models), CHIPS)
    with Bank.open(str(whole)) as bank:
        first_task_keys = bank.tasks()[0].add_num + bank.tasks()[0].unsatisfied_num
    with pytest.raises(KeyboardInterrupt):  # in the second task, 5 keys in
        run_campaign(lambda: Bank.open(str(stopped), create=True), options, _entries(models), CHIPS,
                     reporter=_StopAfter(first_task_keys + 5))
    with Bank.open(str(stopped)) as bank:
        assert [t.status for t in bank.tasks()] == ["successful", "incomplete"]
    again = run_campaign(lambda: Bank.open(str(stopped), create=True),
                         replace(options, reload=True), _entries(models), CHIPS)
    assert [t.status for t in again.finished_before] == ["successful"]
    assert [r.resumed for r in again.reports] == [True, False, False]
    assert _bank_state(whole) == _bank_state(stopped)  # measurements included: none twice
    with Bank.open(str(stopped)) as bank:
        assert bank.verify().ok
    assert run_campaign(lambda: Bank.open(str(stopped), create=True), replace(options, reload=True),
                        _entries(models), CHIPS).reports == []  # all finished: nothing to run


@pytest.fixture
def chip_workers() -> Any:
    """A Dask scheduler with two worker processes started by `dask worker`, one declaring
    each chip (as hosts with different devices would)."""
    from distributed import LocalCluster

    cluster = LocalCluster(n_workers=0, processes=True, dashboard_address=None, silence_logs=40)
    workers = [subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker",
                                 cluster.scheduler_address, "--nthreads", "1", "--no-dashboard",
                                 "--resources", f"chip-{chip}=1"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
               for chip in CHIPS]
    try:
        from distributed import Client

        with Client(cluster.scheduler_address) as client:
            client.wait_for_workers(len(CHIPS), timeout=60)
        yield cluster.scheduler_address
    finally:
        for worker in workers:
            worker.terminate()
            worker.wait(timeout=30)
        cluster.close()


def test_each_search_goes_to_a_worker_that_declares_its_chip(tmp_path: Path,
                                                             chip_workers: str) -> None:
    from distributed import get_task_stream

    models = [MODELS / "squeezenet.onnx"]
    serial, spread = tmp_path / "serial.db", tmp_path / "spread.db"
    run_campaign(lambda: Bank.open(str(serial), create=True), _options(tmp_path / "a", models[0]),
                 _entries(models), CHIPS)
    executor = OnDask(scheduler=chip_workers)
    try:
        resources = {address: set(info["resources"]) for address, info
                     in executor.client.scheduler_info()["workers"].items()}
        with get_task_stream(client=executor.client) as stream:
            run_campaign(lambda: Bank.open(str(spread), create=True),
                         _options(tmp_path / "b", models[0]), _entries(models), CHIPS, executor)
        with pytest.raises(TuneError, match="no worker declares chip-Ascend310P3"):
            executor.check_chips(["Ascend310P3"])
    finally:
        executor.close()
    ran = [(record["key"], record["worker"]) for record in stream.data
           if str(record["key"]).startswith("search-")]
    assert len(ran) > 20
    for key, worker in ran:
        chip = str(key).split("-")[1]
        assert resources[worker] == {f"chip-{chip}"}, (key, worker)
    assert _bank_state(serial) == _bank_state(spread)


def test_a_campaign_killed_with_sigkill_resumes_to_the_bank_of_one_never_killed(
        tmp_path: Path) -> None:
    from tests.crash import kill_tune_at

    models = [str(MODELS / "squeezenet.onnx"), str(MODELS / "inception_v1.onnx")]
    args = ["tune", *models, "--soc-version", CHIPS[0], "--soc-version", CHIPS[1],
            "--budget", "8", "--seed", "3"]
    whole, killed = tmp_path / "whole.db", tmp_path / "killed.db"
    assert runner.invoke(app, [*args, "--db", str(whole), "--progress-bar", "off"]).exit_code == 0
    code = kill_tune_at([*args, "--db", str(killed)], tmp_path / "work", 12, 0.01)
    assert code == -9, (tmp_path / "work" / "stderr").read_text()
    with Bank.open(str(killed)) as bank:
        assert [t.status for t in bank.tasks()] == ["incomplete"]
    resumed = runner.invoke(app, [*args, "--db", str(killed), "--reload", "--json"])
    assert resumed.exit_code == 0, resumed.output
    assert [r["resumed"] for r in json.loads(resumed.stdout)] == [True, False, False, False]
    assert _bank_state(whole) == _bank_state(killed)


def test_a_failed_search_anywhere_in_a_batch_raises_its_own_error() -> None:
    """distributed's batches raise for a batch's first future only; a failed search later in
    the batch must raise its own error too, not arrive as a (type, error, traceback) result."""
    from tunebank.tuner.measure.backend import MeasurementFailed
    from tunebank.tuner.search.executors import raise_failed

    class Done:
        def __init__(self, error: Exception | None = None) -> None:
            self.status, self.error = ("error", error) if error else ("finished", None)

        def result(self) -> object:
            if self.error:
                raise self.error
            return "result"

    lost = MeasurementFailed("backend 'npu' failed measuring key 1 on Ascend310: OSError: lost")
    raise_failed([(Done(), "result"), (Done(), "result")])
    with pytest.raises(MeasurementFailed) as raised:
        raise_failed([(Done(), "result"), (Done(lost), (type(lost), lost, None)), (Done(), "result")])
    assert raised.value is lost


def test_workers_stay_quiet_when_another_cluster_holds_8787(tmp_path: Path) -> None:
    """Issue 31: `--workers 2 -q` printed distributed's four-line warning `Port 8787 is already
    in use` when another cluster ran on the machine."""
    import socket

    held = socket.socket()
    try:
        held.bind(("", 8787))  # as another cluster's dashboard holds it
        held.listen()
    except OSError:
        pass  # something on this machine holds it already: the same case
    try:
        done = subprocess.run(
            [sys.executable, "-c", "from tunebank.cli.main import run; run()", "tune",
             str(MODELS / "squeezenet.onnx"), "--soc-version", "Ascend310", "--db", "b.db",
             "--workers", "2", "--budget", "8", "-q"],
            cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False)
    finally:
        held.close()
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
