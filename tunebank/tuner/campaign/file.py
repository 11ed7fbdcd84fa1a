"""A campaign file (TOML): the models with their inputs and tuning configs, the chips and the
search settings of a campaign, so that it can be run again as it was.

```toml
chips = ["Ascend310", "Ascend910B2"]
mode = "ga"          # and budget, seed, retune, transfer, backend, noise, run_loop,
                     # measure_timeout_s
budget = 64
seed = 1

[[models]]
path = "resnet50.onnx"                  # relative to this file
input_shapes = "data_0:1,3,224,224"     # as --input-shape (optional)
tuning_config = "resnet_tiling.json"    # as --tuning-config (optional)
tune_ops_file = "resnet_ops.json"       # as --tune-ops-file (optional)
```
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tunebank.bank.canonical import shown
from tunebank.bank.formats.jsontext import UNCAPPED, file_problem, read_text
from tunebank.tuner.errors import TuneError
from tunebank.tuner.measure.socs import check_soc_name, get_soc, with_cores
from tunebank.tuner.model.reading import ModelError, parse_input_shapes
from tunebank.tuner.settings import IN_CAMPAIGN_FILES, check_settings

SETTINGS = IN_CAMPAIGN_FILES
"""The search settings a campaign file may hold, with the TOML types each takes."""
MODEL_FIELDS = ("path", "input_shapes", "tuning_config", "tune_ops_file")


@dataclass(frozen=True)
class CampaignModel:
    """One model of a campaign, with what names its inputs and selects its operators."""

    path: Path
    input_shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    tuning_config: Path | None = None
    tune_ops_file: Path | None = None


@dataclass(frozen=True)
class CampaignFile:
    """What a campaign file holds."""

    models: tuple[CampaignModel, ...]
    chips: tuple[str, ...]
    settings: dict[str, Any]
    """The search settings it sets, by TuneOptions field name."""


def read_campaign(path: Path) -> CampaignFile:
    """Read and check a campaign file; paths in it are taken from its own folder.

    Raises:
        TuneError: the file cannot be read, is not TOML, or a field is missing or wrong
            (the message names the file and the field).
    """
    text = read_text(path, TuneError, "--campaign")  # a regular file, under the cap
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TuneError(f"--campaign: {path}: not TOML ({exc})") from None
    except RecursionError:  # tomllib parses nested arrays and tables recursively
        raise TuneError(f"--campaign: {path}: arrays or tables nested too deep to read") from None
    except ValueError as exc:  # an integer of more digits than Python converts (issue 41)
        reason = str(exc).split(":")[0].split(";")[0]
        raise TuneError(f"--campaign: {path}: a value cannot be read ({reason})") from None
    where = f"--campaign: {path}"
    unknown = sorted(set(data) - {"chips", "models", *SETTINGS})
    if unknown:
        raise TuneError(f"{where}: unknown field {unknown[0]!r} (fields: chips, models, "
                        f"{', '.join(SETTINGS)})")
    chips = data.get("chips")
    if not isinstance(chips, list) or not chips or not all(isinstance(c, str) and c for c in chips):
        raise TuneError(f"{where}: chips: must be a non-empty list of soc_versions")
    for n, chip in enumerate(chips):
        check_soc_name(chip, option=f"{where}: chips[{n}]")
    entries = data.get("models")
    if not isinstance(entries, list) or not entries or not all(isinstance(m, dict) for m in entries):
        raise TuneError(f"{where}: models: must be one [[models]] table or more")
    settings: dict[str, Any] = {}
    for name, types in SETTINGS.items():
        if name in data:
            value = data[name]
            if not isinstance(value, types) or (bool in types) != isinstance(value, bool):
                raise TuneError(f"{where}: {name}: must be {_kind(types)}, not "
                                f"{_shown(value)}")
            check_settings({name: value}, where)
            settings[name] = float(value) if float in types and isinstance(value, int | float) \
                else value
    if "aicore_num" in settings:  # a count every chip of the file has, named as the file's
        for chip in chips:
            with_cores(get_soc(chip), settings["aicore_num"], option=f"{where}: aicore_num")
    models = tuple(_model(entry, path.parent, f"{where}: models[{n}]")
                   for n, entry in enumerate(entries))
    return CampaignFile(models, tuple(chips), settings)


def _model(entry: dict[str, Any], folder: Path, where: str) -> CampaignModel:
    unknown = sorted(set(entry) - set(MODEL_FIELDS))
    if unknown:
        raise TuneError(f"{where}: unknown field {unknown[0]!r} (fields: {', '.join(MODEL_FIELDS)})")
    for name in MODEL_FIELDS:
        if name in entry and not (isinstance(entry[name], str) and entry[name]):
            raise TuneError(f"{where}.{name}: must be a non-empty string")
    if "path" not in entry:
        raise TuneError(f"{where}.path: missing (the ONNX model, from the campaign file's folder)")
    files = {name: folder / entry[name] for name in ("path", "tuning_config", "tune_ops_file")
             if name in entry}
    for name, file in files.items():
        try:
            problem = file_problem(file.stat(), UNCAPPED)  # the size is checked when it is read
        except FileNotFoundError:
            problem = "no such file"
        except OSError as exc:  # a name too long for the file system, a loop of links
            raise TuneError(f"{where}.{name}: {_shown(entry[name])}: {exc.strerror}") from None
        if problem:  # a folder, a FIFO or /dev/zero exists: it is no model (issue 41)
            raise TuneError(f"{where}.{name}: {file}: {problem}")
    try:
        shapes = parse_input_shapes(entry.get("input_shapes"))
    except ModelError as exc:
        raise TuneError(f"{where}.input_shapes: {exc}") from None
    return CampaignModel(files["path"], shapes, files.get("tuning_config"),
                         files.get("tune_ops_file"))


def _shown(value: Any) -> str:
    """A value from the file in a message: at most 60 characters of it."""
    return shown(value, 60)


def _kind(types: tuple[type, ...]) -> str:
    return {str: "a string", int: "an integer", bool: "true or false",
            float: "a number"}[types[0]]
