"""The hash chain's per-event checks, from raw events rows: each event's id and link computed
again from its stored content. Each link covers its own row and the stored ``prev_hash``, so
the rows can be checked in any order, and a long log is checked in worker processes, a seq
range each, while verify folds it (``prev_hash`` against the row before is checked there).
"""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from bank.events import content_halves, link_hash, readable_row

PARALLEL_FROM = 50_000
"""Logs at least this long are checked in worker processes (fewer: the start-up costs more)."""

Problem = tuple[int, str]
"""A seq and what is wrong with its row."""


def row_problems(row: tuple[Any, ...]) -> list[Problem]:
    """What is wrong with one events row's id and link (empty when both match its content)."""
    (seq, event_id, kind, soc, repo_key, task_id, op_name, op_type, recorded_at, origin,
     payload, prev_hash, link) = row
    head, tail = content_halves(kind, soc, repo_key, task_id, op_name, op_type, recorded_at,
                                origin, payload)
    found = []
    if hashlib.sha256((head + tail).encode("utf-8")).hexdigest()[:32] != event_id:
        found.append((seq, f"seq {seq}: event_id does not match the event's content"))
    if link_hash(prev_hash, seq, event_id, head, tail) != link:
        found.append((seq, f"seq {seq}: hash does not match the event's content"))
    return found


def rows_problems(rows: Iterable[tuple[Any, ...]]) -> Iterator[Problem]:
    """:func:`row_problems` of every readable row; a row that is not an event is left to the
    fold, which reports it as unreadable (and checks nothing else of it, in one process too)."""
    for row in rows:
        if not readable_row(row):
            continue
        try:
            yield from row_problems(row)
        except (TypeError, ValueError, AttributeError):
            continue


def workers_for(url: str, events: int) -> int:
    """How many worker processes should check a log of ``events`` in the bank at ``url``: none
    for a short log, a bank in memory (a worker could not open it), one core, or a platform
    without ``fork``; else one per core but the one that folds."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    in_memory = url in ("sqlite://", "sqlite:///:memory:") or "mode=memory" in url
    if events < PARALLEL_FROM or in_memory or cores < 2 or not sys.platform.startswith("linux"):
        return 0
    return min(cores - 1, 8)


def _check_range(url: str, after: int, until: int) -> list[Problem]:
    """In a worker: the problems of the rows with ``after < seq <= until``."""
    from bank.store import EventFilter, open_store

    store = open_store(url, read_only=True)
    try:
        return list(rows_problems(store.iter_event_rows(EventFilter(since_seq=after, until_seq=until))))
    finally:
        store.close()


def _structure(url: str) -> tuple[list[str], str | None]:
    """In a worker: the database's own structure check (see ``EventStore.structure_problems``)."""
    from bank.store import open_store

    store = open_store(url, read_only=True)
    try:
        return store.structure_problems()
    finally:
        store.close()


@contextmanager
def checked_in_workers(url: str, head: int, workers: int) -> Iterator[Any]:
    """Start ``workers`` processes checking seqs 1 to ``head`` of the bank at ``url``, and then
    the database's own structure check; the block runs meanwhile. Yields a function that waits
    for them and returns the chain's problems, in seq order, and the structure check's result.

    The workers are forked and open their own connections (rows up to ``head`` never change:
    the log is append-only). They exit without running the parent's finalisers, so the
    connections they inherited are not touched."""
    bounds = [head * n // workers for n in range(workers + 1)]
    pool = multiprocessing.get_context("fork").Pool(workers)
    try:
        pending = pool.starmap_async(_check_range, [(url, bounds[n], bounds[n + 1])
                                                     for n in range(workers)])
        structure = pool.apply_async(_structure, (url,))

        def results() -> tuple[list[Problem], tuple[list[str], str | None]]:
            return [problem for part in pending.get() for problem in part], structure.get()

        yield results
    finally:
        pool.terminate()
        pool.join()
