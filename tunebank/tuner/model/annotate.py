"""The tuned model copy: each tuned node carries its key and policy in its metadata_props."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tunebank.bank.atomic import write_bytes_atomic


def annotated_model(model_path: Path, policies: Mapping[str, tuple[str, dict[str, Any]]],
                    target: Path) -> None:
    """Copy the model with each tuned node's key and policy in its metadata_props."""
    import onnx

    proto = onnx.load(str(model_path))
    for index, node in enumerate(proto.graph.node):
        name = node.name or f"{node.op_type}_{index}"
        if name in policies:
            key, knowledge = policies[name]
            for prop_key, value in (("tunebank.repo_key", key),
                                    ("tunebank.policy", json.dumps(knowledge, sort_keys=True))):
                entry = node.metadata_props.add()
                entry.key, entry.value = prop_key, value
    write_bytes_atomic(target, proto.SerializeToString())
