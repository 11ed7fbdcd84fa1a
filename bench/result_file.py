"""Bytes a tune writes to its result file: a rewrite per key (the baseline) against the
doubling schedule (tuner/flow.py RESULT_FILE_EVERY_S), on the same model and seed.

Usage: python bench/result_file.py [--model fixtures/models/resnet50.onnx]

Counts every byte write_json_atomic writes to the result file during one tune into an empty
bank, and the size of the final file. Not a test.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import tunebank.bank.atomic  # noqa: E402
import tunebank.tuner.flow as flow  # noqa: E402
from tunebank.bank import Bank  # noqa: E402
from tunebank.tuner.options import TuneOptions  # noqa: E402


def measure(model: Path, every_key: bool) -> dict[str, Any]:
    written = {"bytes": 0, "rewrites": 0}
    real = tunebank.bank.atomic.write_json_atomic

    def counting(path: Path, content: Any, pretty: bool = False) -> None:
        real(path, content, pretty=pretty)
        if path.name.startswith("aoe_result_opat_"):
            written["bytes"] += path.stat().st_size
            written["rewrites"] += 1

    flow.write_json_atomic = counting  # type: ignore[assignment]
    saved = flow.RESULT_FILE_EVERY_S
    if every_key:
        flow.RESULT_FILE_EVERY_S = 0.0
    try:
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            report = flow.tune(lambda: Bank.open(str(work / "b.db"), create=True),
                               TuneOptions(model=model, soc_version="Ascend910B2", work_dir=work,
                                                budget=8))
            final = report.result_file.stat().st_size
    finally:
        flow.write_json_atomic = real
        flow.RESULT_FILE_EVERY_S = saved
    keys = report.repo_summary["total_num"]
    return {"keys": keys, "rewrites": written["rewrites"], "bytes": written["bytes"], "final_bytes": final}


def run(model: Path) -> dict[str, Any]:
    """Both schedules, side by side."""
    return {"model": model.name, "per_key": measure(model, True), "doubling": measure(model, False)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", type=Path, default=ROOT / "fixtures" / "models" / "resnet50.onnx")
    figures = run(parser.parse_args().model)
    for name in ("per_key", "doubling"):
        f = figures[name]
        print(f"{name:9} {f['keys']} keys, {f['rewrites']} rewrites, {f['bytes']:,} bytes written "
              f"({f['bytes'] / f['final_bytes']:.1f}x the final file)")
    print(f"ratio per-key/doubling: {figures['per_key']['bytes'] / figures['doubling']['bytes']:.1f}x")


if __name__ == "__main__":
    main()
