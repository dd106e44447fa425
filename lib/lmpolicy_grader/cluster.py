"""The Dask cluster the grader runs on: a local one it starts itself, or an existing scheduler.

Grading asks three things of a Dask cluster, whoever starts it:

- one thread per worker (``dask worker --nthreads 1``): nbgrader's converters and the course's
  incident log are per-process state, and a worker that dies must take only its own notebook down;
- no memory-based killing (``--memory-limit 0``): the grading kernel has its own ``prlimit --as``,
  and a worker killed for its kernel's memory would be a death the student did not cause;
- a bounded number of attempts when workers die (``distributed.scheduler.allowed-failures``,
  ``ALLOWED_FAILURES``): a notebook whose worker died is tried once more elsewhere, in case the
  machine, not the notebook, was at fault, and FAILED with Dask's ``KilledWorker`` after that.

The local cluster is made that way here. A cluster started by Dask's own tools (``dask scheduler``
and ``dask worker``, dask-kubernetes, dask-jobqueue, ``dask ssh``) is told the same on its command
lines and in ``DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES``; the grader checks the thread count
on every worker when it joins (``grading.GraderStartup``).
"""
from __future__ import annotations

import logging
from contextlib import contextmanager
from typing import Iterator

# A notebook whose worker died is tried on one more worker: a machine lost or a worker killed from
# outside gets its second chance, while a notebook that kills every worker it runs on costs two.
ALLOWED_FAILURES = 1
CONNECT_SECONDS = 30
# How long the local cluster waits for a dead worker's replacement before it gives that worker up for good
# (Dask's default, 15 s, is less than a worker's start-up takes on a loaded 2-core machine: the class then
# waited for ever on a cluster without workers).
RESTART_WAIT = "30 minutes"
# What a grading worker need not do while its one thread waits on a kernel: sample every thread's stack
# each 10 ms for Dask's profiler, wake its event loop every 20 ms to see whether it is blocked.
QUIET_WORKERS = {"distributed.worker.profile.enabled": False, "distributed.admin.tick.interval": "1s"}


class ClusterUnavailable(RuntimeError):
    """The Dask cluster cannot grade: no scheduler answers at the address, or a worker lacks what grading
    needs (one thread, the course folder in view); the message says what to change."""


@contextmanager
def grading_client(scheduler: str | None = None, workers: int = 1) -> Iterator["distributed.Client"]:  # noqa: F821
    """A Dask client on the cluster at ``scheduler``, or on a fresh local cluster of ``workers``
    worker processes (one thread each, no dashboard, no memory limit) that is closed afterwards."""
    import dask
    from distributed import Client, LocalCluster

    if scheduler is not None:
        try:
            client = Client(scheduler, timeout=CONNECT_SECONDS, set_as_default=False)
        except (OSError, TimeoutError) as error:
            raise ClusterUnavailable(
                f"no Dask scheduler answers at {scheduler} ({error}). Start one with `dask scheduler` and workers "
                "with `dask worker <address> --nthreads 1 --memory-limit 0`, or grade on this machine alone "
                "without --scheduler") from None
        try:
            yield client
        finally:
            client.close()
        return
    # The scheduler and the nannies read these when they start; the cluster object reads the second when a
    # worker is lost, so the settings hold for as long as the cluster runs.
    with dask.config.set({"distributed.scheduler.allowed-failures": ALLOWED_FAILURES,
                          "distributed.deploy.lost-worker-timeout": RESTART_WAIT, **QUIET_WORKERS}):
        # No dashboard; the scheduler's small HTTP server (health, metrics) on any free loopback port, not 8787.
        # Dask's own log stays quiet: the grader says which notebook a dead worker took down, and why.
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                               dashboard_address=None, scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
                               memory_limit=0, silence_logs=logging.CRITICAL)
        try:
            client = Client(cluster, set_as_default=False)
            try:
                yield client
            finally:
                client.close()
        finally:
            cluster.close()


def describe(client) -> str:
    """The scheduler's address, its workers and how often it tries a notebook whose worker died."""
    workers = client.nthreads()
    allowed = client.run_on_scheduler(_allowed_failures)
    return (f"the Dask scheduler at {client.scheduler.address}: {len(workers)} workers, "
            f"{sum(workers.values())} threads; a notebook whose worker dies is tried {allowed + 1} times")


def _allowed_failures(dask_scheduler) -> int:
    return dask_scheduler.allowed_failures
