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

The local cluster's workers are forked from a Python ``forkserver`` that has already imported
distributed, nbgrader and the grader (``WORKER_PRELOAD``), so those seconds of imports are paid once
in all, as the course's old fork pool paid them once in its parent, not once per worker. The
forkserver lives as long as the grader's process and keeps the environment and working directory it
started with; a process that grades several times (the tests, a notebook) may have changed both
since, so each worker takes the grader's own at the time of grading (``local_surroundings`` here,
``adopt_surroundings`` in the worker). Workers started by Dask's tools are left as they are.
"""
from __future__ import annotations

import logging
import os
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
# What the forkserver imports before it forks the local cluster's workers: what a worker imports to join
# the cluster and to grade (a failed import there is skipped by Python, and the worker then imports it itself).
WORKER_PRELOAD = ["lmpolicy_grader", "distributed", "nbgrader.converters", "nbgrader.coursedir", "lmpolicy_grader.nbgrader_plugins",
                  "lmpolicy_grader.class_grading.gradebook", "lmpolicy_grader.class_grading.grading"]


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
                          "distributed.deploy.lost-worker-timeout": RESTART_WAIT,
                          "distributed.worker.multiprocessing-method": "forkserver", **QUIET_WORKERS}):
        _preload_forkserver()
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


def _preload_forkserver() -> None:
    """Have the forkserver import ``WORKER_PRELOAD`` when it starts (once per grader process; a forkserver
    already running keeps what it imported)."""
    from distributed.utils import get_mp_context

    # Dask sets its own preload list the first time it makes a forkserver context; ours replaces it after.
    get_mp_context().set_forkserver_preload(WORKER_PRELOAD)


def start_forkserver(argv: list[str]) -> None:
    """Start the local cluster's forkserver now if the command line ``argv`` grades on one, so that its
    imports (``WORKER_PRELOAD``, over half a second) run beside the grader's own instead of after them."""
    commands = {"grade", "examples"}
    if commands.isdisjoint(argv) or any(arg.startswith("--scheduler") for arg in argv) or "--help" in argv:
        return
    import multiprocessing
    import multiprocessing.forkserver

    multiprocessing.get_context("forkserver").set_forkserver_preload(WORKER_PRELOAD)
    multiprocessing.forkserver.ensure_running()


def local_surroundings() -> dict:
    """The grader's environment variables and working directory, for the local cluster's workers
    (``adopt_surroundings``): a forked worker has the forkserver's, which may be older."""
    return {"environ": dict(os.environ), "cwd": os.getcwd()}


def adopt_surroundings(surroundings: dict) -> None:
    """Make this worker's environment variables and working directory exactly the grader's
    (``local_surroundings``): none more, none fewer, none different."""
    os.environ.clear()
    os.environ.update(surroundings["environ"])
    os.chdir(surroundings["cwd"])


def describe(client) -> str:
    """The scheduler's address, its workers and how often it tries a notebook whose worker died."""
    workers = client.nthreads()
    allowed = client.run_on_scheduler(_allowed_failures)
    return (f"the Dask scheduler at {client.scheduler.address}: {len(workers)} workers, "
            f"{sum(workers.values())} threads; a notebook whose worker dies is tried {allowed + 1} times")


def _allowed_failures(dask_scheduler) -> int:
    return dask_scheduler.allowed_failures
