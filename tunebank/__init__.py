"""tunebank: an event-sourced manager of AOE's operator-tuning knowledge banks.

One package, four rooms: :mod:`tunebank.bank` (the event log, its store, projections and AOE's
file formats), :mod:`tunebank.tuner` (reading models, searching, measuring, campaigns),
:mod:`tunebank.cli` (the ``bank`` command) and :mod:`tunebank.report` (the HTML report).
"""
