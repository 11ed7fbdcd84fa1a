"""Campaigns spread over Dask workers: the time against a serial run, and the bank compared.

Two measurements (used by bench/run.py, section ``campaign``; not a test):

- the bundled models x 3 chips from an empty bank, serial (in this process) against a
  LocalCluster of 2 worker processes: wall time of each and whether the banks hold the same
  policies and task counts;
- scaling when a measurement costs wall time, as on a device: the sim backend with
  ``delay_ms`` per run, one model on one chip, at 1, 2, 4 and 8 workers: speed-up against one
  worker, and its share of linear.

A LocalCluster's start is timed apart: it is paid once per campaign, not per search.
"""

from __future__ import annotations

import sqlite3
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from tunebank.bank import Bank
from tunebank.tuner.campaign.file import CampaignModel
from tunebank.tuner.campaign.runner import run_campaign
from tunebank.tuner.options import TuneOptions
from tunebank.tuner.search.executors import OnDask

MODELS = Path(__file__).resolve().parent.parent / "fixtures" / "models"
CHIPS = ["Ascend310", "Ascend910B2", "Ascend310P3"]


def _state(db: Path) -> tuple[list[Any], list[Any]]:
    with sqlite3.connect(db) as conn:
        return (conn.execute("SELECT soc_version, repo_key, info_digest, best_us, knowledge "
                             "FROM policy ORDER BY 1, 2, 3").fetchall(),
                conn.execute("SELECT tuning_name, add_num, hit_num, update_num, reserved_num, "
                             "unsatisfied_num FROM task ORDER BY first_seq").fetchall())


def _campaign(folder: Path, name: str, options: TuneOptions, models: list[Path],
              chips: list[str], executor: OnDask | None) -> float:
    db = folder / f"{name}.db"
    started = time.perf_counter()
    run_campaign(lambda: Bank.open(str(db), create=True),
                 replace(options, work_dir=folder / name), [CampaignModel(m) for m in models],
                 chips, executor)
    return time.perf_counter() - started


def zoo(budget: int = 64) -> dict[str, Any]:
    """Every bundled model on three chips: serial against 2 worker processes."""
    models = sorted(MODELS.glob("*.onnx"))
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        options = TuneOptions(model=models[0], soc_version=CHIPS[0], budget=budget, seed=1)
        serial_s = _campaign(folder, "serial", options, models, CHIPS, None)
        started = time.perf_counter()
        cluster = OnDask(workers=2)
        start_s = time.perf_counter() - started
        try:
            spread_s = _campaign(folder, "spread", options, models, CHIPS, cluster)
        finally:
            cluster.close()
        same = _state(folder / "serial.db") == _state(folder / "spread.db")
        policies = len(_state(folder / "serial.db")[0])
    return {"models": [m.stem for m in models], "chips": CHIPS, "budget": budget,
            "serial_s": round(serial_s, 2), "workers_2_s": round(spread_s, 2),
            "cluster_start_s": round(start_s, 2), "same_bank": same, "policies": policies}


def scaling(delay_ms: float = 5.0, budget: int = 32, workers: tuple[int, ...] = (1, 2, 4, 8),
            model: str = "resnet50") -> dict[str, Any]:
    """One model on one chip, each run of a measurement taking ``delay_ms``, at each number
    of workers."""
    path = MODELS / f"{model}.onnx"
    options = TuneOptions(model=path, soc_version=CHIPS[1], budget=budget, seed=1,
                          sim_delay_s=delay_ms / 1000)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for count in workers:
            cluster = OnDask(workers=count)
            try:
                seconds = _campaign(folder, f"w{count}", options, [path], [CHIPS[1]], cluster)
            finally:
                cluster.close()
            rows.append({"workers": count, "seconds": round(seconds, 2)})
        same = len({repr(_state(folder / f"w{count}.db")) for count in workers}) == 1
    one = rows[0]["seconds"]
    for row in rows:
        row["speedup"] = round(one / row["seconds"], 2)
        row["of_linear"] = round(one / row["seconds"] / row["workers"], 2)
    return {"model": model, "chip": CHIPS[1], "budget": budget, "delay_ms": delay_ms,
            "rows": rows, "same_bank": same}


def table(results: dict[str, Any]) -> str:
    """The Markdown of docs/performance.md for these figures."""
    z, s = results["zoo"], results["scaling"]
    lines = [f"{len(z['models'])} bundled models x {len(z['chips'])} chips from an empty bank "
             f"(budget {z['budget']}): serial {z['serial_s']} s, 2 worker processes "
             f"{z['workers_2_s']} s ({z['serial_s'] / z['workers_2_s']:.2f}x; the cluster's "
             f"start, {z['cluster_start_s']} s, apart); same policies and task counts: "
             f"{'yes' if z['same_bank'] else 'NO'} ({z['policies']:,} policies).", "",
             f"Scaling, {s['model']} on {s['chip']}, budget {s['budget']}, each run of a "
             f"measurement taking {s['delay_ms']} ms (same bank at every count: "
             f"{'yes' if s['same_bank'] else 'NO'}):", "",
             "| workers | seconds | speed-up | share of linear |", "|---|---|---|---|"]
    lines += [f"| {r['workers']} | {r['seconds']} | {r['speedup']}x | {r['of_linear']} |"
              for r in s["rows"]]
    return "\n".join(lines)
