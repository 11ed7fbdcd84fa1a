"""Many writers and live readers on one bank at once, as a cluster of tuners sharing it would be.

``run_scenario`` starts 8 writer processes (tunes of different models and of the same model,
imports of AOE result files and of an events export, some of them overlapping) and 2 reader
processes that follow the log and verify it while it grows, then returns what each did.
tests/test_concurrency.py checks the result; bench/concurrency.py prints its figures.

Run as a module, this file is the worker those processes start:
``python -m tests.concurrency write STATS -- BANK-ARGS...`` or
``python -m tests.concurrency read DB STOP OUT``.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "fixtures" / "models"
AOE = ROOT / "fixtures" / "aoe"


@dataclass
class WriterResult:
    """One writer process: its command, exit code, output and store statistics."""

    name: str
    argv: list[str]
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def command(self) -> list[str]:
        """The bank arguments the writer ran (``tune MODEL ...``)."""
        return self.argv[self.argv.index("--") + 1:]

    @property
    def report(self) -> Any:
        return json.loads(self.stdout)


@dataclass
class ScenarioResult:
    """Everything the writers and readers of one run did."""

    writers: list[WriterResult]
    readers: list[dict[str, Any]]
    seconds: float


def writer_commands(events_file: Path) -> list[tuple[str, list[str]]]:
    """The 8 writers: (name, bank arguments without --db)."""
    aoe = sorted(str(p) for p in AOE.glob("*.json"))
    v2 = str(AOE / "aoe_result_opat_20240315_14300512_4713.json")
    quick = ["--progress-bar", "off", "--json"]
    return [
        ("tune squeezenet seed 1", ["tune", str(MODELS / "squeezenet.onnx"), "--soc-version", "Ascend310",
                                    "--budget", "16", "--seed", "1", *quick]),
        ("tune squeezenet seed 2", ["tune", str(MODELS / "squeezenet.onnx"), "--soc-version", "Ascend310",
                                    "--budget", "16", "--seed", "2", *quick]),
        ("tune vgg19", ["tune", str(MODELS / "vgg19.onnx"), "--soc-version", "Ascend910B2",
                        "--budget", "8", *quick]),
        ("tune resnet50", ["tune", str(MODELS / "resnet50.onnx"), "--soc-version", "Ascend310",
                           "--budget", "8", *quick]),
        ("import aoe files", ["import", *aoe, "--soc-version", "Ascend310", "--json"]),
        ("import aoe v2 file", ["import", v2, "--soc-version", "Ascend310", "--json"]),
        ("import events export", ["import", str(events_file), "--json"]),
        ("import events export again", ["import", str(events_file), "--json"]),
    ]


def make_events_file(folder: Path) -> Path:
    """An events export of a small bank of its own (the demo bank), to import concurrently."""
    sys.path.insert(0, str(ROOT))
    from fixtures.demo_bank import build
    from tunebank.bank import Bank
    from tunebank.bank.formats.jsonl import write_event_rows

    source = folder / "source.db"
    build(str(source))
    out = folder / "source-events.jsonl"
    with Bank.open(str(source)) as bank, out.open("w", encoding="utf-8") as handle:
        write_event_rows(handle, bank.event_rows(), bank.bank_id)
    return out


def run_scenario(db: str, folder: Path, *, serial: bool = False) -> ScenarioResult:
    """Run the 8 writers and 2 readers against the bank ``db`` (a path or URL) at once, or with
    ``serial`` the writers one after another (the baseline a benchmark compares with)."""
    folder.mkdir(parents=True, exist_ok=True)
    events_file = make_events_file(folder)
    stop = folder / "stop"
    env = {k: v for k, v in os.environ.items()
           if k not in ("TUNEBANK_DB", "TUNE_BANK_PATH", "ASCEND_WORK_PATH", "ASCEND_CACHE_PATH")}
    env["PYTHONPATH"] = str(ROOT)
    readers = []
    for n in range(2):
        out = folder / f"reader{n}.json"
        readers.append((out, subprocess.Popen(
            [sys.executable, "-m", "tests.concurrency", "read", db, str(stop), str(out)],
            cwd=ROOT, env=env)))
    started = time.monotonic()
    running = []
    ended: dict[int, float] = {}
    for n, (name, args) in enumerate(writer_commands(events_file)):
        work = folder / f"writer{n}"
        work.mkdir()
        stats = work / "stats.json"
        argv = [sys.executable, "-m", "tests.concurrency", "write", str(stats), "--", *args, "--db", db]
        with (work / "stdout").open("w") as out, (work / "stderr").open("w") as err:
            running.append((name, argv, work, subprocess.Popen(argv, cwd=work, env=env, stdout=out,
                                                               stderr=err)))
        if serial:
            running[-1][-1].wait(timeout=600)
            ended[n] = time.monotonic() - started
    while len(ended) < len(running):
        for n, (*_, process) in enumerate(running):
            if n not in ended and process.poll() is not None:
                ended[n] = time.monotonic() - started
        if time.monotonic() - started > 600:
            raise TimeoutError("the writers did not finish in 600 s")
        time.sleep(0.01)
    seconds = max(ended.values())
    writers = []
    for n, (name, argv, work, process) in enumerate(running):
        stats = work / "stats.json"
        writers.append(WriterResult(name, argv, process.returncode, (work / "stdout").read_text(),
                                    (work / "stderr").read_text(), ended[n],
                                    json.loads(stats.read_text()) if stats.exists() else {}))
    stop.touch()
    for _, reader in readers:
        reader.wait(timeout=600)
    return ScenarioResult(writers, [json.loads(out.read_text()) for out, _ in readers], seconds)


class _StoreStats(logging.Handler):
    """Counts what the store logs: lock waits and refused writes that were tried again."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lock_waits: list[float] = []
        self.retries = 0

    def emit(self, record: logging.LogRecord) -> None:
        if record.msg.startswith("write lock after"):
            self.lock_waits.append(float(record.args[0]))  # type: ignore[index]
        elif record.msg.startswith("write refused"):
            self.retries += 1


def _write(stats_file: Path, argv: list[str]) -> int:
    """Run one ``bank`` command in this process, then record the store's statistics."""
    from tunebank.cli.main import run

    handler = _StoreStats()
    logger = logging.getLogger("tunebank.store")
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    sys.argv = ["bank", *argv]
    code = 0
    try:
        run()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    finally:
        waits = handler.lock_waits
        stats_file.write_text(json.dumps({
            "transactions": len(waits), "retries": handler.retries,
            "max_lock_wait_s": max(waits, default=0.0), "total_lock_wait_s": sum(waits)}))
    return code


def _read(db: str, stop: Path, out: Path) -> None:
    """Follow the log until ``stop`` exists: seqs must come 1, 2, 3... each linked to the one
    before; verify the whole bank on every pass."""
    from tunebank.bank import Bank, BankError
    from tunebank.bank.events import GENESIS_HASH

    seen, prev = 0, GENESIS_HASH
    passes = verifies = 0
    problems: list[str] = []
    while not (Path(db).exists() or "://" in db):
        time.sleep(0.01)
        if stop.exists():
            break
    while True:
        final = stop.exists()
        try:
            with Bank.open(db) as bank:
                for stored in bank.events(since=seen):
                    if stored.seq != seen + 1 or stored.prev_hash != prev:
                        problems.append(f"after seq {seen} came seq {stored.seq}")
                    seen, prev = stored.seq, stored.hash
                report = bank.verify()
                verifies += 1
                if not report.ok:
                    problems.append(f"verify at seq {report.events}: {report.problems[:3]}")
        except BankError as exc:
            if not any(before_init in str(exc) for before_init in (
                    "no bank at", "not a tunebank bank", "an empty database, not a bank yet")):
                problems.append(f"read failed: {exc}")
        passes += 1
        if final:
            break
        time.sleep(0.02)
    out.write_text(json.dumps({"passes": passes, "verifies": verifies, "last_seq": seen,
                               "problems": problems}))


def main(args: list[str]) -> int:
    if args[:1] == ["write"]:
        separator = args.index("--")
        return _write(Path(args[1]), args[separator + 1:])
    if args[:1] == ["read"]:
        _read(args[1], Path(args[2]), Path(args[3]))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
