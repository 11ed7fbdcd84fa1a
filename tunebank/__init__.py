"""tunebank: an event-sourced manager of AOE's operator-tuning knowledge banks.

One package, four rooms: :mod:`tunebank.bank` (the event log, its store, projections and AOE's
file formats), :mod:`tunebank.tuner` (reading models, searching, measuring, campaigns),
:mod:`tunebank.cli` (the ``bank`` command) and :mod:`tunebank.report` (the HTML report).
"""

import functools


@functools.cache
def tool_version() -> str:
    """tunebank's installed version ("0+unknown" where its metadata is not installed)."""
    from importlib.metadata import PackageNotFoundError, version  # a few ms: only when asked

    try:
        return version("tunebank")
    except PackageNotFoundError:
        return "0+unknown"
