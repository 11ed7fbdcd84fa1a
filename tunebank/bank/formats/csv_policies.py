"""The current policies as CSV, one row per key."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import IO

from tunebank.bank.canonical import canonical_json
from tunebank.bank.formats.spreadsheet import csv_writer, safe_cell
from tunebank.bank.projection import Policy

COLUMNS = ("soc_version", "repo_key", "op_type", "best_us", "tune_mode", "backend",
           "cost_model_version", "task_id", "seq", "origin", "info_dict", "knowledge")


def write_policies(handle: IO[str], policies: Iterable[Policy], *, raw: bool = False) -> int:
    """Write a header and one row per policy; return the number of rows. Text cells are made
    safe for a spreadsheet (:func:`bank.formats.spreadsheet.safe_cell`) unless ``raw``."""
    writer = csv_writer(handle)
    writer.writerow(COLUMNS)
    text = (lambda value: value) if raw else safe_cell
    count = 0
    for p in policies:
        writer.writerow([text(p.soc_version), text(p.repo_key), text(p.op_type or ""),
                         repr(p.best_us) if math.isfinite(p.best_us) else "",
                         text(p.tune_mode or ""), text(p.backend or ""),
                         text(p.cost_model_version or ""), text(p.task_id), p.seq, text(p.origin),
                         text(canonical_json(p.info_dict)), text(canonical_json(p.knowledge))])
        count += 1
    return count
