"""The outcome rules of a tune: what each key's search (or its absence) records.

- known, no retune: ``hit`` then ``reserved``, no measurement;
- known, retune: ``hit``, then ``update`` if strictly faster than the stored entry, else
  ``reserved``;
- unknown: ``add`` if strictly faster than the default policy, else ``unsatisfied``;
- a search that fails: ``unsatisfied`` (or ``reserved`` after a hit), reason ``failed``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tunebank import tool_version
from tunebank.bank import EventKind, Outcome, Policy
from tunebank.tuner.measure.space import SearchSpace
from tunebank.tuner.plan.grouping import KeyGroup
from tunebank.tuner.search.transfer import Neighbour


@dataclass(frozen=True)
class MeasuredBy:
    """The backend a tune measures with, as every outcome records it."""

    backend: str
    """Its name: the outcome's ``backend`` (and a policy's)."""
    version: str
    """Its version: the outcome's ``cost_model_version``."""


def payload(by: MeasuredBy, group: KeyGroup, measurements: int, **extra: Any) -> dict[str, Any]:
    if group.members:
        extra = {"subgraphs": [list(names) for names in group.members], **extra}
    return {"op_names": group.op_names, "measurements": measurements,
            "cost_model_version": by.version, "tool_version": tool_version(), **extra}

def outcome(by: MeasuredBy, kind: EventKind, group: KeyGroup, **fields: Any) -> Outcome:
    extra = fields.pop("extra", {})
    return Outcome(kind=kind, repo_key=group.repo_key, op_name=group.ops[0].name,
                   op_type=group.op_type, info_dict=group.info, backend=by.backend, extra=extra,
                   **fields)

def known_outcomes(by: MeasuredBy, group: KeyGroup, stored: Policy | None,
                    default_us: float | None) -> list[Outcome]:
    """No search: a hit kept as it is, or a key the log says gains nothing over the default."""
    extra = payload(by, group, 0)
    if stored is None:
        return [outcome(by, EventKind.UNSATISFIED, group, performance_before_us=default_us,
                         performance_after_us=default_us, reason="no_gain", extra=extra)]
    return [outcome(by, EventKind.HIT, group, performance_before_us=known_time(stored), extra=extra),
            outcome(by, EventKind.RESERVED, group, performance_before_us=known_time(stored),
                     performance_after_us=known_time(stored), reason="known", extra=extra)]

def borrowing_trail(neighbours: Sequence[Neighbour], budget: int, measured: int, size: int) -> dict[str, Any]:
    """What an outcome records of where its search started and how much budget it used."""
    if not neighbours:
        return {}
    return {"borrowed_from": [n.as_json() for n in neighbours], "budget": budget,
            "stopped_early": measured < min(budget, size)}

def decide(by: MeasuredBy, group: KeyGroup, stored: Policy | None, default_us: float, found_us: float,
            candidate: tuple[int, ...], measurements: int, reason: str | None,
            trail: dict[str, Any]) -> list[Outcome]:
    default = finite(default_us)
    extra = payload(by, group, measurements, best_found_us=found_us, default_us=default, **trail)
    knowledge = group.space.knowledge(candidate)
    mode = tune_mode(group.space, candidate)
    if stored is not None:
        hit = outcome(by, EventKind.HIT, group, performance_before_us=known_time(stored), extra=extra)
        if found_us < stored.best_us:
            return [hit, outcome(by, EventKind.UPDATE, group, knowledge=knowledge,
                                  performance_before_us=known_time(stored),
                                  performance_after_us=found_us, tune_mode=mode, extra=extra)]
        return [hit, outcome(by, EventKind.RESERVED, group, performance_before_us=known_time(stored),
                              performance_after_us=known_time(stored), reason="no_gain", extra=extra)]
    if found_us < default_us:
        return [outcome(by, EventKind.ADD, group, knowledge=knowledge, performance_before_us=default,
                         performance_after_us=found_us, tune_mode=mode, reason=reason, extra=extra)]
    return [outcome(by, EventKind.UNSATISFIED, group, performance_before_us=default,
                     performance_after_us=default, reason="no_gain", extra=extra)]

def failed(by: MeasuredBy, group: KeyGroup, stored: Policy | None, default_us: float, measurements: int,
            why: str) -> list[Outcome]:
    extra = payload(by, group, measurements, error=why)
    default = finite(default_us)
    if stored is not None:
        return [outcome(by, EventKind.HIT, group, performance_before_us=known_time(stored), extra=extra),
                outcome(by, EventKind.RESERVED, group, performance_before_us=known_time(stored),
                         performance_after_us=known_time(stored), reason="failed", extra=extra)]
    return [outcome(by, EventKind.UNSATISFIED, group, performance_before_us=default,
                     performance_after_us=default, reason="failed", extra=extra)]

def finite(value: float) -> float | None:
    """A time the log can hold: ``None`` for an infeasible (infinite) one."""
    return value if np.isfinite(value) else None

def known_time(policy: Policy) -> float | None:
    """A stored policy's time, or None when it was imported without one."""
    return finite(policy.best_us)

def tune_mode(space: SearchSpace, candidate: tuple[int, ...]) -> str:
    """Impl if the implementation changed, else Format if the format did, else Schedule."""
    names = [k.name for k in space.knobs]
    for knob, mode in (("impl", "Impl"), ("format", "Format")):
        if knob in names and candidate[names.index(knob)] != space.default[names.index(knob)]:
            return mode
    return "Schedule"
