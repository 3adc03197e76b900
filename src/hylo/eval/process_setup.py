"""Setting up the process a worker or a policy host runs in: its BLAS / OpenMP threads, and a batched run's worker
that leaves the GPU to the policy host. The process and Ray pools call these in each worker they start; a failure is a
`WorkerFailed`."""

from __future__ import annotations

import contextlib
import os

from threadpoolctl import threadpool_limits

from hylo.core.errors import HyloError
from hylo.cpus import usable_cpus
from hylo.envs.headless import without_cuda_devices


class WorkerFailed(HyloError):
    """A worker could not start (bad agent arguments, a benchmark it cannot build); the message says why."""


THREADS_ENV = "HYLO_WORKER_THREADS"
"""The environment variable that sets how many BLAS / OpenMP threads each worker process uses (default 1)."""

HOST_THREADS_ENV = "HYLO_HOST_THREADS"
"""The environment variable that sets how many BLAS / OpenMP threads a policy host uses (default: every CPU)."""


def limit_threads() -> None:
    """Keep a worker's BLAS and OpenMP pools to `HYLO_WORKER_THREADS` threads (default 1): N workers on N cores, each
    with a pool as wide as the machine, would fight over the cores. Call it after the simulator's libraries load."""
    set_threads(_threads(THREADS_ENV, 1))


def host_threads(default: int | None = None) -> int:
    """The BLAS and OpenMP threads a policy host gets: `HYLO_HOST_THREADS`, else `default` (None: every CPU this
    process may use). The workers whose requests are in a batch wait for its call, so their cores are the call's to
    use, as a GPU would be."""
    return _threads(HOST_THREADS_ENV, usable_cpus() if default is None else default)


def set_threads(count: int) -> None:
    """Give this process's BLAS and OpenMP pools `count` threads (after the libraries they belong to are loaded)."""
    threadpool_limits(limits=count)


def serve_as_batched_worker() -> None:
    """Make this process an env worker of a batched run; call it before anything in it could initialise CUDA.

    - It sees no CUDA device (its renderer keeps its EGL device): the agent, and the GPU, are the policy host's.
    - It is a batch process (Linux's SCHED_BATCH): a worker woken by its answer does not take the core from the
      process running on it. A policy host answers a batch's requests one after another; without this, the first
      worker it wakes takes the host's core before the others are answered, and the last answer of a batch waits for
      a worker's step. Nothing changes where there is no SCHED_BATCH (the worker runs as it would).
    """
    without_cuda_devices(os.environ)
    with contextlib.suppress(AttributeError, OSError):
        os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))


def _threads(variable: str, default: int) -> int:
    text = os.environ.get(variable, str(default))
    try:
        threads = int(text)
    except ValueError:
        raise WorkerFailed(f"{variable} must be a positive integer, got {text!r}") from None
    if threads < 1:
        raise WorkerFailed(f"{variable} must be a positive integer, got {text!r}")
    return threads
