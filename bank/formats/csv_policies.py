"""The current policies as CSV, one row per key."""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable
from typing import IO

from bank.canonical import canonical_json
from bank.projection import Policy

COLUMNS = ("soc_version", "repo_key", "op_type", "best_us", "tune_mode", "backend",
           "cost_model_version", "task_id", "seq", "origin", "info_dict", "knowledge")


def write_policies(handle: IO[str], policies: Iterable[Policy]) -> int:
    """Write a header and one row per policy; return the number of rows."""
    writer = csv.writer(handle, lineterminator="\n")
    writer.writerow(COLUMNS)
    count = 0
    for p in policies:
        writer.writerow([p.soc_version, p.repo_key, p.op_type or "",
                         repr(p.best_us) if math.isfinite(p.best_us) else "", p.tune_mode or "",
                         p.backend or "", p.cost_model_version or "", p.task_id, p.seq, p.origin,
                         canonical_json(p.info_dict), canonical_json(p.knowledge)])
        count += 1
    return count
