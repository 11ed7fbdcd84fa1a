"""tuning_result.json for a model from the bank's current policies (``bank export``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tunebank.bank import Bank
from tunebank.bank.formats.opat import tuning_result
from tunebank.tuner.measure.socs import get_soc
from tunebank.tuner.model.reading import load_model
from tunebank.tuner.plan.grouping import plan_tune
from tunebank.tuner.plan.selection import TuneSelection


def model_tuning_result(bank: Bank, model: Path, soc_version: str,
                        input_shapes: dict[str, tuple[int, ...]] | None = None) -> dict[str, Any]:
    """``{"op_tuning": {op_name: knowledge}}`` for every operator of ``model`` the bank knows."""
    plan = plan_tune(load_model(model, input_shapes), get_soc(soc_version), TuneSelection())
    found = bank.lookup(soc_version, [(g.repo_key, g.info) for g in plan.groups])
    return tuning_result({key: p.knowledge for key, p in found.items()},
                         {g.repo_key: g.op_names for g in plan.groups})


def model_resolver(model: Path,
                   input_shapes: dict[str, tuple[int, ...]] | None = None) -> tuple[Any, str, str]:
    """For ``bank import --model``: op name -> (repo_key, info_dict, op_type), the model's name
    and content hash. Every operator is keyed, tunable or not, so any name AOE reports resolves."""
    from tunebank.tuner.model.keys import info_dict, repo_key

    loaded = load_model(model, input_shapes)
    table = {}
    for op in loaded.operators:
        info = info_dict(op)
        table[op.name] = (repo_key(info), info, op.op_type)
    return table.get, loaded.name, loaded.sha256
