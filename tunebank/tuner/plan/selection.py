"""What narrows a tune: ``--tuning-config`` (ops_to_tune, tiling_range, impl_options) and
``--tune-ops-file`` (AOE's tune_ops_name and tune_ops_type, tuned as their union)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tunebank.bank.errors import BankError
from tunebank.bank.formats.jsontext import read_json_file

KNOB_ALIASES = {"block_m": "baseM", "block_n": "baseN", "block_k": "baseK"}
IMPL_CODES = {"cube": 0, "vector": 1}


class ConfigError(BankError):
    """A tuning config or tune-ops file is malformed."""


@dataclass(frozen=True)
class TuneSelection:
    """Which operators to tune and how far to search; empty fields select everything."""

    op_names: frozenset[str] = frozenset()
    op_types: frozenset[str] = frozenset()
    knob_values: Mapping[str, Sequence[int]] = field(default_factory=dict)

    def selects(self, op_name: str, op_type: str) -> bool:
        """Whole-word match on name or type; with no lists given, every operator is selected."""
        if not self.op_names and not self.op_types:
            return True
        return op_name in self.op_names or op_type in self.op_types


def read_json(path: Path, option: str) -> dict[str, Any]:
    """A JSON object from ``path``; errors name ``option`` and the file."""
    value = read_json_file(path, ConfigError, option)
    if not isinstance(value, dict):
        raise ConfigError(f"{option}: {path} must hold a JSON object")
    return value


def _names(value: Any, where: str) -> frozenset[str]:
    if value is None:
        return frozenset()
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ConfigError(f"{where} must be a list of non-empty strings")
    return frozenset(value)


def load_selection(tuning_config: Path | None, tune_ops_file: Path | None) -> TuneSelection:
    """Read both files (either may be absent) into one selection.

    Raises:
        ConfigError: a file is unreadable, or a field has the wrong shape or an unknown value.
    """
    names: frozenset[str] = frozenset()
    types: frozenset[str] = frozenset()
    knobs: dict[str, list[int]] = {}
    if tune_ops_file is not None:
        data = read_json(tune_ops_file, "--tune-ops-file")
        where = f"--tune-ops-file: {tune_ops_file}"
        names = _names(data.get("tune_ops_name"), f"{where}: tune_ops_name")
        types = _names(data.get("tune_ops_type"), f"{where}: tune_ops_type")
        if not names and not types:
            raise ConfigError(f"{where}: give tune_ops_name or tune_ops_type")
    if tuning_config is not None:
        data = read_json(tuning_config, "--tuning-config")
        where = f"--tuning-config: {tuning_config}"
        unknown = set(data) - {"ops_to_tune", "tiling_range", "impl_options"}
        if unknown:
            raise ConfigError(f"{where}: unknown field {sorted(unknown)[0]!r}")
        names |= _names(data.get("ops_to_tune"), f"{where}: ops_to_tune")
        knobs.update(_tiling_range(data.get("tiling_range"), where))
        impls = data.get("impl_options")
        if impls is not None:
            if not isinstance(impls, list) or not impls \
                    or any(not isinstance(i, str) or i not in IMPL_CODES for i in impls):
                raise ConfigError(f"{where}: impl_options must be a non-empty list of "
                                  f"{' / '.join(IMPL_CODES)}")
            knobs["impl"] = [IMPL_CODES[i] for i in impls]
    return TuneSelection(names, types, knobs)


def _tiling_range(value: Any, where: str) -> dict[str, list[int]]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: tiling_range must be an object of knob: [values]")
    out = {}
    for name, values in value.items():
        if (not isinstance(values, list) or not values
                or not all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2**31
                           for v in values)):
            raise ConfigError(f"{where}: tiling_range.{name} must be a non-empty list of "
                              "non-negative integers below 2^31")
        out[KNOB_ALIASES.get(str(name), str(name))] = values
    return out
