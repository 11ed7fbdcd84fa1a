"""A deterministic bank of any size, shaped like a team's: many tasks on two chips, keys shared
between them, payloads like the tuner's.

Each task tunes ~500 operators drawn from a pool of keys per chip (a tenth of the events):
a key the chip already has a policy for is a hit, then an update (one in four) or reserved; a
new key is an add, or unsatisfied (one in seven). Payloads carry an info_dict of shapes and
formats, a tiling policy, the two times and the tuner's bookkeeping fields, about 700 bytes,
as `bank tune` writes them. Same size and seed, same events, byte for byte.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from tunebank.bank import EventKind, Outcome
from tunebank.bank.events import Event, format_time

SOCS = ("Ascend910B2", "Ascend310P3")
OPS_PER_TASK = 500
ORIGIN = "bank:0123456789abcdef"
START = datetime(2026, 1, 5, 8, 0, tzinfo=UTC)
OP_TYPES = ("Conv2D", "MatMulV2", "BatchMatMul", "Add", "Relu", "Softmax", "LayerNorm", "Gelu")


def info_dict(rng: random.Random, op_type: str) -> dict[str, Any]:
    """An operator description like the tuner's (shapes, dtypes, formats, attributes)."""
    n, c = rng.choice((1, 4, 8, 16, 32)), rng.choice((64, 128, 256, 512, 1024))
    h = rng.choice((7, 14, 28, 56))
    return {
        "op_type": op_type,
        "attrs": {"strides": [1, 1], "pads": [1, 1, 1, 1], "dilations": [1, 1], "groups": 1},
        "inputs": [{"dtype": "float16", "format": "NC1HWC0", "shape": [n, c // 16, h, h, 16]},
                   {"dtype": "float16", "format": "FRACTAL_Z", "shape": [c * 9 // 16, c // 16, 16, 16]}],
        "outputs": [{"dtype": "float16", "format": "NC1HWC0", "shape": [n, c // 16, h, h, 16]}],
    }


def knowledge(rng: random.Random) -> dict[str, Any]:
    """A tiling policy like the sim backend's."""
    return {"batchDim": rng.choice((1, 2, 4)), "nDim": rng.choice((1, 2)), "mL0": rng.choice((16, 32, 64)),
            "kL0": rng.choice((16, 32)), "nL0": rng.choice((16, 32, 64)), "kAL1": rng.choice((1, 2, 4)),
            "kBL1": rng.choice((1, 2, 4)), "dbL0A": rng.choice((1, 2)), "dbL0B": rng.choice((1, 2)),
            "format": "NC1HWC0"}


@dataclass(frozen=True)
class PlannedTask:
    """One task of the workload: its chip, its name and its outcomes in order."""

    task_id: str
    soc_version: str
    tuning_name: str
    outcomes: tuple[Outcome, ...]


def plan(events: int, seed: int = 0) -> Iterator[PlannedTask]:
    """Tasks whose events (start, outcomes, finish) add up to about ``events``."""
    rng = random.Random(seed)
    pool = max(200, events // 10)
    known: dict[str, set[int]] = {soc: set() for soc in SOCS}
    written = 0
    number = 0
    while written < events:
        soc = SOCS[number % len(SOCS)]
        keys = rng.sample(range(pool), min(OPS_PER_TASK, pool))
        outcomes: list[Outcome] = []
        for key in keys:
            if written + len(outcomes) + 3 > events:
                break
            op_type = OP_TYPES[key % len(OP_TYPES)]
            op_rng = random.Random(key)  # the same key has the same operator everywhere
            info = info_dict(op_rng, op_type)
            repo_key = str(10**18 + key * 7919)
            name = f"{op_type.lower()}_{key}"
            before = round(rng.uniform(5.0, 500.0), 3)
            after = round(before * rng.uniform(0.55, 0.98), 3)
            extra = {"measurements": rng.randint(16, 512), "cost_model_version": "sim-2",
                     "tool_version": "0.1.0", "op_names": [name]}
            common = dict(repo_key=repo_key, op_name=name, op_type=op_type, info_dict=info,
                          backend="sim", extra=extra)
            if key in known[soc]:
                outcomes.append(Outcome(EventKind.HIT, **common))  # type: ignore[arg-type]
                if rng.random() < 0.25:
                    outcomes.append(Outcome(EventKind.UPDATE, knowledge=knowledge(rng),
                                            performance_before_us=before, performance_after_us=after,
                                            tune_mode="Schedule", **common))  # type: ignore[arg-type]
                else:
                    outcomes.append(Outcome(EventKind.RESERVED, performance_before_us=before,
                                            **common))  # type: ignore[arg-type]
            elif rng.random() < 1 / 7:
                outcomes.append(Outcome(EventKind.UNSATISFIED, performance_before_us=before,
                                        reason="no_gain", **common))  # type: ignore[arg-type]
            else:
                known[soc].add(key)
                outcomes.append(Outcome(EventKind.ADD, knowledge=knowledge(rng),
                                        performance_before_us=before, performance_after_us=after,
                                        tune_mode="Schedule", **common))  # type: ignore[arg-type]
        number += 1
        written += len(outcomes) + 2
        yield PlannedTask(f"{seed:04d}{number:012d}", soc, f"model{number % 97}_{soc}", tuple(outcomes))


def events(count: int, seed: int = 0) -> Iterator[Event]:
    """The workload as events, with times one millisecond apart from :data:`START`."""
    tick = 0

    def at() -> str:
        nonlocal tick
        tick += 1
        return format_time(START + timedelta(milliseconds=tick))

    for task in plan(count, seed):
        yield Event(kind=EventKind.TASK_STARTED, soc_version=task.soc_version, task_id=task.task_id,
                    recorded_at=at(), origin=ORIGIN,
                    payload={"tuning_name": task.tuning_name, "job_type": "opat", "search_mode": "ga"})
        for outcome in task.outcomes:
            yield Event(kind=outcome.kind, soc_version=task.soc_version, task_id=task.task_id,
                        recorded_at=at(), origin=ORIGIN, payload=outcome.payload(),
                        repo_key=outcome.repo_key, op_name=outcome.op_name, op_type=outcome.op_type)
        yield Event(kind=EventKind.TASK_FINISHED, soc_version=task.soc_version, task_id=task.task_id,
                    recorded_at=at(), origin=ORIGIN,
                    payload={"status": "successful", "tuning_time_s": 60.0})
