"""Models for the tuner tests: the bundled model-zoo copies and generated BERT-like encoders."""

from __future__ import annotations

from pathlib import Path

import pytest

from fixtures.make_bert import write

MODELS = Path(__file__).resolve().parents[2] / "fixtures" / "models"
BERT_SHAPE = {"input_ids_embedded": (1, 64, 128)}


@pytest.fixture(scope="session")
def bert_models(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Version 1 and version 2 (last feed-forward layer wider) of the encoder."""
    folder = tmp_path_factory.mktemp("bert")
    return write(folder / "bert_v1.onnx"), write(folder / "bert_v2.onnx", ffn_last=384)
