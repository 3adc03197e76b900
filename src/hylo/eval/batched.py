"""A pool whose workers share one policy host (`--batch B`): the host starts before the workers and stops after them.

Every worker of the pool (inline, or processes) holds a `HostedAgent` (its `WorkerConfig` names the host), so the
agent is built once, in the host, and each worker's Kernel sends its `act` there. The pool itself is unchanged: an
episode's placement, limits and row are those of an unbatched run.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from hylo.agents.registry import agent_factory, make_agent
from hylo.core.agent import acts_in_batches
from hylo.eval.batching import BatchFigures, HostFailed, PolicyHost
from hylo.eval.limits import EpisodeLimits
from hylo.eval.pool import Pool
from hylo.eval.process_setup import WorkerFailed, host_threads, set_threads
from hylo.eval.resolve import EvalError, Resolved, resolve
from hylo.eval.spec import EvalSpec
from hylo.eval.worker import EpisodeJob, EpisodeResult


def build_agent(spec: EvalSpec) -> Any:
    """The run's agent, as a worker would build it (in the host's process: it is the factory the host is given).
    Only a benchmark's expert needs the benchmark: any other agent's host never imports the simulator."""
    benchmark = resolve(spec).benchmark if spec.agent == "expert" else None
    return make_agent(spec.agent, spec.agent_args, benchmark)


def check_batched(spec: EvalSpec, resolved: Resolved, backend: str) -> None:
    """Refuse a `--batch` run that cannot be batched, before anything starts: a graph run, GPUs asked for a host
    that is not a Ray actor, an agent whose class has no `act_batch` (the host checks the built agent again)."""
    if resolved.plan is not None:
        raise EvalError("--batch batches a bare agent's calls; a graph run cannot be batched", field="batch")
    if spec.host_gpus and backend != "ray":
        raise EvalError(
            f"--host-gpus {spec.host_gpus:g} asks Ray for the policy host's GPUs: it needs --backend ray (on "
            f"--backend {backend} the host sees the GPUs hylo eval was started with: CUDA_VISIBLE_DEVICES)",
            field="host_gpus",
        )
    factory = agent_factory(spec.agent, resolved.benchmark)
    if not acts_in_batches(factory):
        raise EvalError(
            f"agent {spec.agent!r} has no act_batch(observations, contexts): --batch needs an agent that acts on a "
            "batch of observations (README, Batched inference); run it without --batch",
            field="batch",
        )


def check_live(spec: EvalSpec, resolved: Resolved, backend: str, agent: object) -> None:
    """Refuse a run of a live agent object (`hylo.evaluate(agent=obj)`) that cannot be served from this process."""
    if resolved.plan is not None:
        raise EvalError("a live agent object runs as the run's agent; a graph run builds its own agents", field="graph")
    if backend == "ray":
        raise EvalError(
            "a live agent object is served from this process to workers on this machine: use --backend process "
            "(or inline), not ray",
            field="backend",
        )
    if (spec.batch is not None or backend != "inline") and not acts_in_batches(agent):
        raise EvalError(
            f"agent object {type(agent).__name__} has no act_batch(observations, contexts): with workers={spec.workers}"
            f"{'' if spec.batch is None else f' and batch={spec.batch}'} this process serves it to every worker, "
            "which needs act_batch (hylo.agents.lerobot.LeRobotAgent has one); or evaluate it with workers=1",
            field="agent",
        )


def policy_host(spec: EvalSpec, backend: str, limits: Iterable[EpisodeLimits] = ()) -> PolicyHost:
    """The (unstarted) policy host of a `--batch` run: a process beside the run's, or on Ray an actor. It is killed
    (and started again) when one `act_batch` call runs longer than any episode's agent may run between env calls
    (`overdue_limit`)."""
    assert spec.batch is not None
    serves = (functools.partial(build_agent, spec), spec.batch, spec.batch_wait_ms / 1000.0)
    overdue = overdue_limit(limits)
    if backend == "ray":
        try:  # optional: Ray, the `ray` extra
            from hylo.eval.rayhost import HOST_CPUS, RayPolicyHost
        except ImportError as exc:
            raise EvalError(f"--backend ray needs Ray ({exc}): pip install 'hylo[ray]'") from None
        threads = _threads_of_host(HOST_CPUS)  # the CPUs its actor reserves: it shares a node
        return RayPolicyHost(*serves, overdue_s=overdue, setup=threads, gpus=spec.host_gpus, address=spec.address,
                             workers=spec.workers)  # fmt: skip
    return PolicyHost(*serves, overdue_s=overdue, setup=_threads_of_host(None))


def _threads_of_host(default: int | None) -> Callable[[], None]:
    """The host's setup: its threads (`host_threads`), read here, so that a bad `HYLO_HOST_THREADS` refuses the run."""
    try:
        return functools.partial(set_threads, host_threads(default))
    except WorkerFailed as exc:
        raise EvalError(str(exc)) from None


def overdue_limit(limits: Iterable[EpisodeLimits]) -> float | None:
    """How long one `act_batch` call may run: as long as the most lenient episode lets its agent run between env
    calls (the act timeout with its grace; without one, its agent allowance or its time cap). A call past it cannot
    be answered in time for any episode in it, and without the kill it would hold every later batch back forever."""
    allowances = [
        min(x for x in (each.act_kill_s, each.agent_s, each.episode_s) if x is not None)
        for each in limits
        if any(x is not None for x in (each.act_kill_s, each.agent_s, each.episode_s))
    ]
    return max(allowances) if allowances else None


class ServingHost(Protocol):
    """What a batched pool starts first and stops last: a policy-host process (`PolicyHost`, `RayPolicyHost`) or
    a live object's host thread (`LocalPolicyHost`)."""

    def start(self) -> None: ...

    def close(self) -> None: ...

    def figures(self) -> BatchFigures: ...


class BatchedPool:
    """`pool`, its workers fed by `host` (see the module's docstring)."""

    def __init__(self, pool: Pool, host: ServingHost) -> None:
        self.pool = pool
        self.host = host
        self.size = pool.size

    def start(self) -> None:
        try:
            self.host.start()
        except HostFailed as exc:
            raise WorkerFailed(str(exc)) from None
        try:
            self.pool.start()
        except BaseException:
            self.host.close()
            raise

    def idle(self) -> int:
        return self.pool.idle()

    def busy(self) -> int:
        return self.pool.busy()

    def submit(self, job: EpisodeJob) -> bool:
        return self.pool.submit(job)

    def poll(self, timeout: float) -> list[EpisodeResult]:
        return self.pool.poll(timeout)

    def close(self, *, kill: bool = False) -> None:
        try:
            self.pool.close(kill=kill)
        finally:
            self.host.close()

    def figures(self) -> BatchFigures:
        return self.host.figures()
