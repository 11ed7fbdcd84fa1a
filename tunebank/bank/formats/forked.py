"""An events file read, checked and hashed in a forked worker while this process appends.

Parsing a line, checking it and computing its id and link costs about as much as folding and
writing it, so a large import runs both at once on two cores: the worker runs
:func:`~bank.formats.jsonl.iter_events_file` (every check it makes, in the same order) and sends
each event on as the row the log stores (:data:`~bank.events.EventRow`), with the id and link it
checked; this process folds and writes those rows as they come, building nothing from them. An
error in the file comes back as the same :class:`~bank.formats.jsonl.EventFileError`, and
nothing is written.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import queue
import signal
import sys
import threading
from collections.abc import Iterator
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from tunebank.bank.events import EventRow
from tunebank.bank.formats.jsonl import Anchor, EventFileError, EventsFileInfo, iter_events_file

FORK_FROM_BYTES = 4 << 20
"""Files at least this large are read in a worker (a smaller one costs less than the fork)."""
BATCH = 1000
"""Events per message from the worker."""
QUEUED = 64
"""Messages read ahead of the fold at most (a few tens of megabytes)."""

def forks(path: Path) -> bool:
    """Whether ``path`` is read in a worker: a large file, on Linux with two cores or more."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    try:
        large = path.stat().st_size >= FORK_FROM_BYTES
    except OSError:
        return False  # the reader in this process says what is wrong with it
    return large and cores >= 2 and sys.platform.startswith("linux")


def stream_events_file(path: Path, expect: Anchor | None, info: EventsFileInfo) -> Iterator[EventRow]:
    """The rows of :func:`~bank.formats.jsonl.iter_events_file` (each as the file places it), read
    in a forked worker for a large file.

    Raises:
        EventFileError: as :func:`~bank.formats.jsonl.iter_events_file` raises it.
    """
    if not forks(path):
        for stored in iter_events_file(path, expect, info):
            yield stored.row()
        return
    receive, send = multiprocessing.get_context("fork").Pipe(duplex=False)
    worker = multiprocessing.get_context("fork").Process(
        target=_read, args=(path, expect, send, receive), daemon=True)
    worker.start()
    send.close()
    arrived: queue.Queue[tuple[str, Any]] = queue.Queue(maxsize=QUEUED)
    drain = threading.Thread(target=_drain, args=(receive, arrived), daemon=True)
    drain.start()  # the pipe holds 64 KiB: emptied meanwhile, the worker never waits on it
    try:
        while True:
            kind, body = arrived.get()
            if kind == "rows":
                yield from body
            elif kind == "error":
                raise EventFileError(body)
            elif kind == "gone":
                raise EventFileError(f"{path}: the worker reading it stopped "
                                     f"(exit code {worker.exitcode})")
            else:
                info.bank_id, info.events, info.head_seq, info.head_hash, info.task_ids = body
                return
    finally:
        if worker.is_alive():
            worker.terminate()
        worker.join()
        while drain.is_alive():  # unblock a drain waiting for room in the queue
            with contextlib.suppress(queue.Empty):
                arrived.get(timeout=0.05)
        receive.close()


def _drain(receive: Connection, arrived: queue.Queue[tuple[str, Any]]) -> None:
    """In a thread of this process: move the worker's messages from the pipe to ``arrived``
    (a ``gone`` message when the pipe closes)."""
    try:
        while True:
            message = receive.recv()
            arrived.put(message)
            if message[0] != "rows":
                return
    except (EOFError, OSError):
        arrived.put(("gone", None))


def _read(path: Path, expect: Anchor | None, send: Connection, receive: Connection) -> None:
    """In the worker: read the file, sending its events on in batches, then what was found.

    The worker dies with the importing process: it asks the kernel for SIGKILL when its parent
    goes, and holds only the sending end of the pipe, so a parent gone without a word (SIGKILL)
    breaks the pipe instead of leaving the worker blocked on it, the file and the bank open."""
    receive.close()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the parent's terminate() ends it quietly
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group: the parent
    _die_with_parent()                            # decides, and ends the worker
    info = EventsFileInfo()
    batch: list[EventRow] = []
    try:
        for stored in iter_events_file(path, expect, info):
            batch.append(stored.row())
            if len(batch) == BATCH:
                send.send(("rows", batch))
                batch = []
        send.send(("rows", batch))
        send.send(("done", (info.bank_id, info.events, info.head_seq, info.head_hash,
                            info.task_ids)))
    except EventFileError as exc:
        send.send(("rows", batch))
        send.send(("error", str(exc)))
    finally:
        send.close()


def _die_with_parent() -> None:
    """Linux's PR_SET_PDEATHSIG: this process gets SIGKILL when the one that forked it ends."""
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1: PR_SET_PDEATHSIG
    if os.getppid() == 1:  # the parent went before the request was made
        os._exit(1)
