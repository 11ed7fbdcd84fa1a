"""Cost-model throughput: a whole batch in one NumPy call versus one candidate per call.

Usage: python bench/costmodel.py [--candidates N] [--soc Ascend910B2]

Scores the same random candidates of ResNet-50's operators both ways, side by side, and prints
candidates per second and the ratio. Not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tunebank.tuner.measure.costmodel import CostModel  # noqa: E402
from tunebank.tuner.measure.socs import get_soc  # noqa: E402
from tunebank.tuner.model.reading import load_model  # noqa: E402
from tunebank.tuner.plan.grouping import plan_tune  # noqa: E402
from tunebank.tuner.plan.selection import TuneSelection  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--candidates", type=int, default=2000, help="candidates per operator")
    parser.add_argument("--soc", default="Ascend910B2")
    args = parser.parse_args()
    soc = get_soc(args.soc)
    plan = plan_tune(load_model(ROOT / "fixtures" / "models" / "resnet50.onnx"), soc, TuneSelection())
    cost = CostModel(soc)
    rng = np.random.default_rng(0)
    batches = [(g, np.stack([rng.integers(0, len(k.values), args.candidates) for k in g.space.knobs], 1))
               for g in plan.groups]
    total = len(batches) * args.candidates
    started = time.perf_counter()
    vectorised = [cost.evaluate(g.work, g.space, c) for g, c in batches]
    batch_s = time.perf_counter() - started
    started = time.perf_counter()
    single = [np.array([cost.evaluate(g.work, g.space, row[None, :])[0] for row in c]) for g, c in batches]
    single_s = time.perf_counter() - started
    assert all(np.array_equal(a, b) for a, b in zip(vectorised, single, strict=True))
    print(f"candidates scored per run: {total} ({len(batches)} ResNet-50 keys on {args.soc})")
    print(f"one candidate per call (baseline): {total / single_s:12.0f} candidates/s")
    print(f"one batch per key:                 {total / batch_s:12.0f} candidates/s")
    print(f"ratio batch/baseline: {single_s / batch_s:.0f}x (identical latencies)")


if __name__ == "__main__":
    main()
