"""What incremental tuning saves: a model's next version against tuning it from scratch.

Usage: python bench/retune.py [--mode ga]

Tunes the generated BERT-like encoder v1 into a bank, then v2 (last feed-forward layer wider)
into the same bank, and v2 into an empty bank as the baseline; prints measurements and time of
each side by side. Not a test.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fixtures.make_bert import write  # noqa: E402
from tunebank.bank import Bank  # noqa: E402
from tunebank.tuner.flow import TuneReport, tune  # noqa: E402
from tunebank.tuner.options import TuneOptions  # noqa: E402

SHAPE = {"input_ids_embedded": (4, 128, 128)}


def run(db: Path, model: Path, work: Path, mode: str) -> tuple[TuneReport, float]:
    started = time.perf_counter()
    report = tune(lambda: Bank.open(str(db), create=True),
                  TuneOptions(model=model, soc_version="Ascend910B2", mode=mode,
                              input_shapes=SHAPE, work_dir=work))
    return report, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mode", default="ga")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        v1 = write(folder / "v1.onnx", layers=4)
        v2 = write(folder / "v2.onnx", layers=4, ffn_last=384)
        run(folder / "inc.db", v1, folder, args.mode)
        incremental, inc_s = run(folder / "inc.db", v2, folder, args.mode)
        scratch, scratch_s = run(folder / "scratch.db", v2, folder, args.mode)
    print(f"v2 keys: {scratch.repo_summary['total_num']}")
    print(f"v2 from scratch (baseline): {scratch.measurements:6d} measurements {scratch_s:6.2f} s")
    print(f"v2 after v1 (incremental):  {incremental.measurements:6d} measurements {inc_s:6.2f} s"
          f"  ({incremental.repo_summary['repo_hit_num']} hits)")
    print(f"ratio scratch/incremental: {scratch.measurements / max(incremental.measurements, 1):.1f}x "
          "measurements")


if __name__ == "__main__":
    main()
