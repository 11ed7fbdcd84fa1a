"""Where a campaign's searches run: in this process (the default), or on a Dask cluster.

An executor takes the campaign's :class:`~tuner.search.keysearch.SearchJob` list and yields their
results in batches, as they complete, each result with its job's index. Only the process that
reads them writes to the bank, so a bank on SQLite serves a cluster as well as a shared
PostgreSQL one. Dask is an existing engine: tunebank schedules nothing itself. A job's result
depends on the job alone (its generators come from the seed and the key), so the order in
which jobs complete, and where, changes nothing recorded.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Protocol

from tunebank.tuner.errors import TuneError
from tunebank.tuner.search.keysearch import KeyResult, SearchJob, run_search

Batch = list[tuple[int, KeyResult]]
"""Results that completed together, each with the index of its job."""

CLUSTER_EXTRA = "pip install -e '.[cluster]'"
"""How to install what --workers and --scheduler need."""
CHIP_RESOURCE = "chip-"
"""A worker that can measure only some chips declares a Dask resource ``chip-SOC`` for each
(``dask worker ADDRESS --resources chip-Ascend910B2=1``): a search then goes only to a worker
that has its chip. When no worker declares one, every worker measures every chip."""
CONNECT_TIMEOUT_S = 10
"""How long reaching a running scheduler may take before it is an error."""


class Executor(Protocol):
    """Runs search jobs and yields their results as they complete."""

    def run(self, jobs: Sequence[SearchJob]) -> Iterator[Batch]:
        """Every job's result, once, in batches as they complete."""
        ...

    def busy(self) -> int:
        """How many workers are running a job now."""
        ...

    def check_chips(self, chips: Sequence[str]) -> None:
        """Refuse, before anything is written, chips no worker can measure.

        Raises:
            TuneError: a chip no worker can measure.
        """
        ...

    def close(self) -> None:
        """Release what the executor started."""
        ...


class InProcess:
    """Runs each job in this process, one after the other, in order."""

    def run(self, jobs: Sequence[SearchJob]) -> Iterator[Batch]:
        for index, job in enumerate(jobs):
            yield [(index, run_search(job))]

    def busy(self) -> int:
        return 1

    def check_chips(self, chips: Sequence[str]) -> None:
        pass

    def close(self) -> None:
        pass


class OnDask:
    """Runs each job as one Dask task, on a LocalCluster of ``workers`` processes started
    here, or on the running cluster at ``scheduler``.

    A task lost with its worker is run again elsewhere by Dask; its result is the same, and it
    is recorded once, when it first arrives.

    Raises:
        TuneError: dask or distributed is not installed, or the cluster cannot be reached.
    """

    def __init__(self, *, workers: int | None = None, scheduler: str | None = None) -> None:
        try:
            from distributed import Client, LocalCluster
        except ImportError:
            flag = "--workers" if workers is not None else "--scheduler"
            raise TuneError(f"{flag}: needs dask and distributed ({CLUSTER_EXTRA})") from None
        self._cluster: Any = None
        self._runs = 0  # each run's task keys are its own, whatever the jobs
        try:
            if scheduler is not None:
                self.client: Any = Client(scheduler, timeout=f"{CONNECT_TIMEOUT_S}s")
            else:
                self._cluster = LocalCluster(
                    n_workers=workers, threads_per_worker=1, processes=True,
                    # no dashboard, and the scheduler's own HTTP server (health checks) on a
                    # free port: on 8787, taken by any other cluster on the machine, distributed
                    # warned in four lines through a quiet tune
                    dashboard_address=None, scheduler_kwargs={"dashboard_address": ":0"},
                    silence_logs=50)  # CRITICAL: a failed search is the one line the tune
                # prints, not the worker's "Compute Failed" log and traceback
                self.client = Client(self._cluster)
        except (OSError, TimeoutError, RuntimeError) as exc:
            self.close()
            if scheduler is None:
                raise TuneError(f"--workers: the Dask cluster did not start ({exc})") from None
            raise TuneError(f"--scheduler: cannot reach the Dask scheduler at {scheduler} "
                            f"({exc})") from None

    def run(self, jobs: Sequence[SearchJob]) -> Iterator[Batch]:
        from distributed import as_completed

        index = {}
        futures = []
        needs = self._chip_resources({job.key.soc.soc_version for job in jobs})
        self._runs += 1
        for n, job in enumerate(jobs):
            chip = job.key.soc.soc_version
            future = self.client.submit(run_search, job, pure=False,
                                        key=f"search-{chip}-{job.key.repo_key}-{self._runs}.{n}",
                                        resources=needs.get(chip))
            index[future.key] = n
            futures.append(future)
        try:
            for batch in as_completed(futures, with_results=True).batches():
                raise_failed(batch)
                yield [(index[future.key], result) for future, result in batch]
        finally:
            for future in futures:
                future.release()

    def check_chips(self, chips: Sequence[str]) -> None:
        self._chip_resources(set(chips))

    def _chip_resources(self, chips: set[str]) -> dict[str, dict[str, float]]:
        """The Dask resource each chip's searches need: none when no worker declares a chip
        (every worker measures every chip), else ``chip-SOC``, which some worker must have.

        Raises:
            TuneError: workers declare chips, but none of them this one.
        """
        declared = {name for worker in self.client.scheduler_info()["workers"].values()
                    for name in worker.get("resources", {}) if name.startswith(CHIP_RESOURCE)}
        if not declared:
            return {}
        for chip in sorted(chips):
            if CHIP_RESOURCE + chip not in declared:
                raise TuneError(f"--scheduler: no worker declares {CHIP_RESOURCE}{chip} (they "
                                f"declare {', '.join(sorted(declared))}); start one with "
                                f"`dask worker ADDRESS --resources {CHIP_RESOURCE}{chip}=1`")
        return {chip: {CHIP_RESOURCE + chip: 1} for chip in chips}

    def busy(self) -> int:
        processing = self.client.processing()
        return sum(1 for tasks in processing.values() if tasks)

    def close(self) -> None:
        client = getattr(self, "client", None)
        if client is not None:
            client.close()
        if self._cluster is not None:
            self._cluster.close()


def raise_failed(batch: Sequence[tuple[Any, Any]]) -> None:
    """Raise the error of the first search in a batch of ``(future, result)`` that failed.

    ``as_completed(..., with_results=True).batches()`` raises only for a batch's first future:
    distributed's ``next_batch`` (2026.8) takes the rest off its queue unchecked, so a failed
    search among them would arrive as a ``(type, exception, traceback)`` result.
    """
    for future, _ in batch:
        if future.status != "finished":
            future.result()  # raises the search's own error (or CancelledError)
