"""The hash chain's per-event checks, from raw events rows: each event's id and link computed
again from its stored content. Each link covers its own row and the stored ``prev_hash``, so
the rows can be checked in any order: a long log is checked in ranges by worker processes
while verify folds it (``prev_hash`` against the row before is checked there), and by verify's
own process too once its fold and comparisons are done.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from tunebank.bank.events import content_halves, link_hash, readable_row

if TYPE_CHECKING:
    from tunebank.bank.store.base import EventStore

PARALLEL_FROM = 50_000
"""Logs at least this long are checked in worker processes (fewer: the start-up costs more)."""

CHUNK = 20_000
"""Events per range of the chain a process takes at a time."""

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


class Chunks:
    """The seq ranges of the chain still to be checked, handed out one at a time to whichever
    process asks first: the workers, and verify's own process once its fold is done, so
    neither waits while the other still has work. A counter in shared memory, inherited by the
    forked workers."""

    def __init__(self, head: int, size: int | None = None) -> None:
        self._next = multiprocessing.get_context("fork").Value("q", 0)
        self.head, self.size = head, size or CHUNK

    def take(self) -> tuple[int, int] | None:
        """The next range ``(after, until]`` to check, or ``None`` when all are taken."""
        with self._next.get_lock():
            after = self._next.value
            if after >= self.head:
                return None
            self._next.value = until = min(after + self.size, self.head)
        return after, until


def check_chunks(store: EventStore, chunks: Chunks) -> list[Problem]:
    """Check ranges of ``store``'s log taken from ``chunks`` until none are left."""
    from tunebank.bank.store import EventFilter, reads

    found: list[Problem] = []
    while (taken := chunks.take()) is not None:
        rows = reads.event_rows(store, EventFilter(since_seq=taken[0], until_seq=taken[1]))
        found.extend(rows_problems(rows))
    return found


_chunks: Chunks | None = None
"""In a worker: the ranges it takes from (inherited when the pool forks it)."""


def _adopt(chunks: Chunks) -> None:
    global _chunks
    _chunks = chunks


def _check_chunks(url: str) -> list[Problem]:
    """In a worker: :func:`check_chunks` on its own connection to the bank."""
    from tunebank.bank.store import open_store

    assert _chunks is not None
    store = open_store(url, read_only=True)
    try:
        return check_chunks(store, _chunks)
    finally:
        store.close()


def _structure_then_chunks(url: str) -> tuple[tuple[list[str], str | None], list[Problem]]:
    """In a worker: the structure check first (one piece of work that cannot be split), then
    ranges of the chain."""
    return _structure(url), _check_chunks(url)


def _structure(url: str) -> tuple[list[str], str | None]:
    """In a worker: the database's own structure check (see ``EventStore.structure_problems``)."""
    from tunebank.bank.store import open_store

    store = open_store(url, read_only=True)
    try:
        return store.structure_problems()
    finally:
        store.close()


@contextmanager
def checked_in_workers(url: str, head: int, workers: int) -> Iterator[Any]:
    """Start ``workers`` processes: one runs the database's own structure check, and all check
    ranges of seqs 1 to ``head`` of the bank at ``url`` (:class:`Chunks`); the block runs
    meanwhile. Yields a function that, given this process's store, checks ranges with them
    until none are left, then returns the chain's problems, in seq order, and the structure
    check's result.

    The workers are forked and open their own connections (rows up to ``head`` never change:
    the log is append-only). They exit without running the parent's finalisers, so the
    connections they inherited are not touched."""
    chunks = Chunks(head)
    pool = multiprocessing.get_context("fork").Pool(workers, initializer=_adopt, initargs=(chunks,))
    try:
        first = pool.apply_async(_structure_then_chunks, (url,))
        others = [pool.apply_async(_check_chunks, (url,)) for _ in range(workers - 1)]

        def results(store: EventStore) -> tuple[list[Problem], tuple[list[str], str | None]]:
            found = check_chunks(store, chunks)
            structure, theirs = first.get()
            found += theirs
            for other in others:
                found += other.get()
            return sorted(found, key=lambda problem: problem[0]), structure

        yield results
    finally:
        pool.terminate()
        pool.join()
