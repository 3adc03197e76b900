"""Resolving a run's spec: everything a run needs, checked before anything runs.

The runner (before it starts a run), a worker (in its own process, to build its env manager from the same spec) and
`plan_run` (a job queued over HTTP) all resolve a spec the same way: the benchmark, split, tasks and step budgets,
the compiled graph of a graph run, the timing and where the episodes run. An interactive session compiles its graph
for one benchmark as a graph run does (`compile_for`). Kept apart from the runner so that a worker resolves its spec
without reaching back into the runner that dispatches to it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import psutil

from hylo.agents.registry import agent_factory, args_model, vet_agent
from hylo.core.errors import HyloError, UnknownChoice
from hylo.core.timing import SyncTiming, Timing, check_horizon, timing_from
from hylo.core.types import NodesetMode
from hylo.cpus import usable_cpus
from hylo.envs.benchmark import Benchmark, BenchmarkOptionError
from hylo.envs.gym_adapter import NamespaceRefused
from hylo.envs.registry import get_benchmark
from hylo.eval.code_identity import CodeIdentity, CodeIdentityError, run_code
from hylo.eval.protocols import Protocol, ProtocolError, get_protocol, registered_protocols
from hylo.eval.spec import EvalSpec, check_run_size
from hylo.evallog.logdir import ReservedRunId, check_run_id
from hylo.evallog.provenance import package_versions_of
from hylo.graph.agent_nodes import vet_agents
from hylo.graph.compile import GraphInvalid, Plan, compile_graph
from hylo.graph.model import Graph
from hylo.panels.benchmark import BenchmarkPanel
from hylo.panels.budget import resolve_step_budget


class EvalError(HyloError):
    """A run that cannot start (bad input, a changed configuration); the message says what to do, and `field`
    names the spec field at fault when one is."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class ForeignEnvNodes(HyloError):
    """A graph whose env nodes belong to other benchmarks than the one whose episodes it runs on; `others` names
    them."""

    def __init__(self, graph: Graph, benchmark: Benchmark, others: list[str]) -> None:
        super().__init__(f"graph {graph.name!r} uses env nodes of {others}, but runs on benchmark {benchmark.name!r}")
        self.others = others


@dataclass(frozen=True)
class Resolved:
    """A resolved spec: the benchmark, split, tasks and step budget of each task."""

    benchmark: Benchmark
    split: str
    tasks: list[str]
    budgets: dict[str, int]
    spec: EvalSpec  # split and tasks filled in
    plan: Plan | None = None  # the compiled graph of a graph run
    versions: dict[str, str | None] = field(default_factory=dict)  # of the packages the results depend on


def foreign_benchmarks(plan: Plan, benchmark: Benchmark) -> list[str]:
    """The benchmarks other than `benchmark` whose env nodes a compiled graph uses (a run, or a session, places the
    episodes of one benchmark)."""
    return [name for name in plan.benchmarks if name != benchmark.name]


def compile_for(graph: Graph, benchmark: Benchmark, *, allow_import: bool = True) -> Plan:
    """`graph` compiled to run `benchmark`'s episodes; raises `GraphInvalid`, or `ForeignEnvNodes` when its env
    nodes belong to another benchmark."""
    plan = compile_graph(graph, allow_import=allow_import)
    others = foreign_benchmarks(plan, benchmark)
    if others:
        raise ForeignEnvNodes(graph, benchmark, others)
    return plan


def compile_spec_graph(spec: EvalSpec, benchmark: Benchmark, *, allow_import: bool = True) -> Plan | None:
    """The compiled graph of a graph run (None for an agent run); refuses an invalid graph, or one whose env nodes
    belong to another benchmark, naming the problem."""
    if spec.graph is None:
        return None
    graph = Graph.model_validate(spec.graph)
    if spec.timing != "sync":
        raise EvalError(
            f"graph {graph.name!r} runs with sync timing; --timing {spec.timing} is for agents", field="timing"
        )
    try:
        plan = compile_graph(graph, allow_import=allow_import)
    except GraphInvalid as exc:
        raise EvalError(str(exc), field="graph") from None
    served = graph.nodesets.get(benchmark.name)
    if spec.env_args and served is not None and served.mode == NodesetMode.SERVER:
        raise EvalError(
            f"graph {graph.name!r} runs the {benchmark.name} env nodeset in server mode (its own subprocess), which "
            f"builds the benchmark without options: drop the options {sorted(spec.env_args)} or the server mode",
            field="env_args",
        )
    if spec.video and served is not None and served.mode == NodesetMode.SERVER:
        raise EvalError(
            f"--video records the env of the worker; graph {graph.name!r} runs the {benchmark.name} env nodeset in "
            "server mode (its own subprocess), so there is nothing to record: drop --video or the server mode",
            field="video",
        )
    others = foreign_benchmarks(plan, benchmark)
    if others:
        raise EvalError(str(ForeignEnvNodes(graph, benchmark, others)), field="graph")
    return plan


def resolve(spec: EvalSpec, *, allow_import: bool = True, request: bool | None = None) -> Resolved:
    """Check everything a run needs before anything runs; raise a clear error naming the bad value. A `request`'s
    benchmark options (by default: without `allow_import`) are only those the benchmark declares (`get_benchmark`)."""
    try:
        benchmark = get_benchmark(spec.benchmark, allow_import=allow_import, options=spec.env_args, request=request)
    except BenchmarkOptionError as exc:
        raise EvalError(str(exc), field="env_args") from None
    except NamespaceRefused as exc:
        raise EvalError(str(exc), field="benchmark") from None
    available, why = benchmark.available()
    if not available:
        raise EvalError(f"benchmark {benchmark.name!r} is not available here: {why}", field="benchmark")
    spec = apply_protocol(spec)
    check_grid(spec, benchmark, allow_import=allow_import)
    split = benchmark.check_split(spec.split)
    tasks = benchmark.check_tasks(split, spec.tasks)
    try:  # the split's tasks, when the spec named none, are known only now
        check_run_size(spec.episodes, len(spec.seed_list), len(tasks))
    except ValueError as exc:
        raise EvalError(str(exc), field="episodes") from None
    plan = compile_spec_graph(spec, benchmark, allow_import=allow_import)
    graph_budget = plan.graph.step_budget if plan is not None else None
    panel = BenchmarkPanel(benchmark, split=split, task=tasks[0], default_step_budget=graph_budget)
    budgets: dict[str, int] = {}
    for task in tasks:
        panel.change("task", task)
        try:
            budgets[task] = resolve_step_budget(spec.max_steps, panel.state(), benchmark.default_step_budget(task))
        except ValueError as exc:
            raise EvalError(str(exc), field="max_steps") from None
    spec = spec.model_copy(update={"split": split, "tasks": tasks})
    return Resolved(benchmark, split, tasks, budgets, spec, plan, package_versions_of(benchmark.result_packages))


def run_id_for(
    spec: EvalSpec, budgets: dict[str, int], versions: Mapping[str, str | None] | None, *, code: CodeIdentity
) -> str:
    """The run a spec names: its `run_id`, else benchmark-agent-digest, the digest taken with the agent's `code`
    (so that edited code makes another run); with `fresh`, a new id that no run in the log dir has yet (refused when
    a named run exists)."""
    run_id = spec.run_id or spec.default_run_id(budgets, versions, code.digest)
    try:
        check_run_id(run_id)
    except ReservedRunId as exc:
        raise EvalError(str(exc), field="run_id") from None
    if spec.fresh:
        if spec.run_id is not None and (spec.log_path / run_id).exists():
            raise EvalError(
                f"--fresh: run {run_id!r} already exists in {spec.log_dir}; choose another --run-id", field="run_id"
            )
        if spec.run_id is None:
            run_id = f"{run_id}-{time.strftime('%Y%m%d-%H%M%S')}"
            base, n = run_id, 1
            while (spec.log_path / run_id).exists():
                n += 1
                run_id = f"{base}-{n}"
    return run_id


def choose_backend(spec: EvalSpec) -> str:
    """Where a spec's episodes run: `inline`, `process` or `ray` (`auto`: inline for one worker, else process);
    refuses combinations that cannot work."""
    if spec.address is not None and spec.backend != "ray":
        raise EvalError(f"--address {spec.address!r} is a Ray address: it needs --backend ray", field="address")
    backend = ("inline" if spec.workers == 1 else "process") if spec.backend == "auto" else spec.backend
    if backend == "inline" and spec.workers > 1:
        raise EvalError(
            f"--backend inline runs one worker, not {spec.workers}; use --backend process or ray", field="backend"
        )
    cpus = usable_cpus()
    if backend == "process" and spec.workers > cpus:
        raise EvalError(
            f"--workers {spec.workers} is more worker processes than this machine's {cpus} usable CPUs; use at most "
            f"{cpus}, or --backend ray to go past one machine",
            field="workers",
        )
    return backend


GB = 1024**3


def available_ram_gb() -> float:
    """The RAM this machine has available now (what processes may still take without swapping), in GB."""
    return float(psutil.virtual_memory().available) / GB


def check_memory(spec: EvalSpec, benchmark: Benchmark, available_gb: float | None = None) -> None:
    """Refuse more workers on this machine than its available RAM holds envs of `benchmark` for (a benchmark that
    declares `env_ram_gb`); Ray's workers live on the cluster's machines, which it places by their own memory."""
    per_env = benchmark.env_ram_gb
    if per_env is None or choose_backend(spec) == "ray":
        return
    available = available_ram_gb() if available_gb is None else available_gb
    fits = int(available // per_env)
    if spec.workers > fits:
        raise EvalError(
            f"--workers {spec.workers} needs about {spec.workers * per_env:.1f} GB for {spec.workers} "
            f"{benchmark.name} envs ({per_env:g} GB each), and this machine has {available:.1f} GB available; use "
            + (f"--workers {fits} or fewer" if fits >= 1 else "a machine with more memory (or --backend ray)"),
            field="workers",
        )


def plan_run(
    spec: EvalSpec,
    *,
    allow_import: bool = True,
    check_url: Callable[[str], None] | None = None,
    request: bool | None = None,
) -> EvalSpec:
    """Validate a spec without running it and fix its run: split, tasks and `run_id` filled in, `fresh` consumed.
    Agents are checked by name and arguments without being built when they declare their `Args` (a remote agent
    would connect to its server: that happens in the run's own process), and `check_url` is asked about every URL
    they would connect to (it raises `ValueError` to refuse one). Without `allow_import` (an HTTP request) only
    registered benchmarks and agents are accepted, never an import path. A `request` (by default: without
    `allow_import`; a job queued over HTTP is one even where the operator allows import paths) sets only the
    benchmark options the benchmark declares, within their bounds. Raises a `HyloError` naming the bad value."""
    choose_backend(spec)
    resolved = resolve(spec, allow_import=allow_import, request=request)
    urls = vet_run_agents(resolved, allow_import=allow_import)
    if check_url is not None:
        for url in urls:
            try:
                check_url(url)
            except ValueError as exc:
                raise EvalError(str(exc), field="agent_args" if resolved.plan is None else "graph") from None
    make_timing(resolved.spec)
    code = code_of(resolved, allow_import=allow_import)
    return resolved.spec.model_copy(
        update={"run_id": run_id_for(resolved.spec, resolved.budgets, resolved.versions, code=code), "fresh": False}
    )


def code_of(resolved: Resolved, *, allow_import: bool = True) -> CodeIdentity:
    """The code identity of a resolved run (`hylo.eval.code_identity`), taken once, in the process that starts or
    plans the run; a file it cannot read is refused naming the argument."""
    try:
        return run_code(resolved.spec, resolved.benchmark, resolved.plan, allow_import=allow_import)
    except CodeIdentityError as exc:
        raise EvalError(str(exc), field="agent_args" if resolved.plan is None else "graph") from None


def vet_run_agents(resolved: Resolved, *, allow_import: bool = True) -> list[str]:
    """Check a resolved run's agent (or its graph's agents) by name and arguments; the URLs they would connect to."""
    spec = resolved.spec
    if resolved.plan is not None:
        return vet_agents(resolved.plan, resolved.benchmark, allow_import=allow_import)
    return vet_agent(spec.agent, spec.agent_args, resolved.benchmark, allow_import=allow_import)


OPTION_FLAGS = {
    "refill_steps": "--refill-steps",
    "max_hold_steps": "--max-hold-steps",
    "latency_s": "--latency",
    "clock": "--clock",
    "adaptive_refill": "timing option adaptive_refill",
    "schedule": "timing option schedule",
    "execution_steps": "--execution-steps",
    "latency_steps": "--latency-steps",
    "latency_model": "--latency-lognormal / --latency-samples",
    "strategy": "--strategy",
    "ensemble_m": "--ensemble-m",
}
"""The flag of `hylo eval` that sets each timing option, as refusals name it."""


def find_protocol(name: str) -> Protocol:
    """The registered protocol `name`; an unknown one is refused listing the known ones."""
    try:
        return get_protocol(name)
    except UnknownChoice:
        raise EvalError(
            f"unknown protocol {name!r}; choose from: {', '.join(registered_protocols())} (hylo list protocols)",
            field="protocol",
        ) from None
    except ProtocolError as exc:
        raise EvalError(str(exc), field="protocol") from None


def timing_conflict(timing: str, protocol: Protocol) -> str:
    """Why `--timing timing` cannot run under `protocol`."""
    return (
        f"--timing {timing} conflicts with protocol {protocol.name!r}, which fixes timing {protocol.timing}: drop "
        "--timing"
    )


def apply_protocol(spec: EvalSpec) -> EvalSpec:
    """`spec` with `timing` and `timing_options` filled from its protocol (unchanged without one). Refused: a
    protocol meant for other benchmarks, `timing` realtime under a sync protocol (sync, the default, yields to the
    protocol: the command line refuses `--timing sync` itself), a timing option it fixes given with another value, or
    one it fixes as unset; the options it leaves open (`Protocol.open_options`) are kept."""
    if spec.protocol is None:
        return spec
    protocol = find_protocol(spec.protocol)
    if not protocol.fits(spec.benchmark):
        fitting = [name for name in registered_protocols() if find_protocol(name).fits(spec.benchmark)]
        raise EvalError(
            f"protocol {protocol.name!r} is for {', '.join(protocol.families)}, not {spec.benchmark!r}; protocols "
            f"that fit {spec.benchmark!r}: {', '.join(fitting)}",
            field="protocol",
        )
    timing, fixed = protocol.fixed_timing()
    if spec.timing != timing and spec.timing != "sync":  # sync is the default: it yields to the protocol
        raise EvalError(timing_conflict(spec.timing, protocol), field="timing")
    opened = protocol.open_options()
    for key, value in spec.timing_options.items():
        flag = OPTION_FLAGS.get(key, f"timing option {key}")
        if key in fixed and value != fixed[key]:
            raise EvalError(
                f"{flag} {option_text(value)} conflicts with protocol {protocol.name!r}, which fixes {key} at "
                f"{option_text(fixed[key])}: drop {flag} or choose another protocol",
                field="timing_options",
            )
        if key not in fixed and key not in opened:
            raise EvalError(
                f"{flag} {option_text(value)} conflicts with protocol {protocol.name!r}, which fixes {key} "
                f"(it leaves it unset): drop {flag} or choose another protocol",
                field="timing_options",
            )
    options = {**fixed, **{key: value for key, value in spec.timing_options.items() if key in opened}}
    return spec.model_copy(update={"timing": timing, "timing_options": options})


def option_text(value: object) -> str:
    """A timing option's value as messages and summaries show it (an empirical model by its number of samples)."""
    if isinstance(value, dict):
        if value.get("kind") == "empirical":
            return f"empirical ({len(value.get('samples_s', []))} samples)"
        return " ".join(f"{key}={item}" for key, item in value.items())
    return str(value).lower() if isinstance(value, bool) else str(value)


def declared_chunking(
    spec: EvalSpec, benchmark: Benchmark, *, allow_import: bool = True
) -> tuple[int | None, int | None]:
    """The chunk size H and execution horizon s a spec's agent declares, read without building it: each from its
    argument (`chunk_size`, `execution_steps`), else its `Args`' default, else its class's attribute. s None: all
    of the chunk (H, when H is declared). (None, None) for a graph run or an agent that declares no H."""
    if spec.graph is not None:
        return None, None
    try:
        factory = agent_factory(spec.agent, benchmark, allow_import=allow_import)
    except (HyloError, ValueError, LookupError):
        return None, None  # vetting the agent names the problem
    chunk_size = _declared(spec.agent_args, factory, "chunk_size")
    if chunk_size is None:
        return None, None
    return chunk_size, _declared(spec.agent_args, factory, "execution_steps") or chunk_size


def _declared(args: dict[str, Any], factory: Any, name: str) -> int | None:
    """An agent's integer `name`: its argument, else its `Args`' default, else its class's attribute; None if none."""
    value = args.get(name)
    if value is None:
        model = args_model(factory)
        if model is not None and name in model.model_fields:
            value = model.model_fields[name].default
    if value is None:
        value = getattr(factory, name, None)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def check_grid(spec: EvalSpec, benchmark: Benchmark, *, allow_import: bool = True) -> None:
    """Refuse a chunked-execution point the protocol's rule forbids, before anything runs (`check_horizon`'s
    message): with a fixed latency of d steps, s (`execution_steps`, else the agent's own) outside
    `max(1, d) <= s <= H - d`, the upper bound only with an agent that declares its chunk size H; and an agent
    whose H is not the one its protocol requires."""
    options = spec.timing_options
    required = find_protocol(spec.protocol).chunk_size if spec.protocol is not None else None
    chunk_size, own_steps = declared_chunking(spec, benchmark, allow_import=allow_import)
    if required is not None and chunk_size != required:
        declared = "declares none" if chunk_size is None else f"declares chunk_size {chunk_size}"
        raise EvalError(
            f"protocol {spec.protocol!r} runs agents with chunk_size H={required}; agent {spec.agent!r} {declared}",
            field="agent_args",
        )
    if spec.timing != "realtime" or options.get("schedule") != "chunked" or options.get("latency_steps") is None:
        return
    d, given = options["latency_steps"], options.get("execution_steps")
    s = given if given is not None else own_steps
    if s is None:
        return
    try:
        check_horizon(chunk_size, d, s)
    except ValueError as exc:
        if given is not None:
            raise EvalError(str(exc), field="timing_options") from None
        raise EvalError(
            f"{exc}; with no --execution-steps s is the agent's own execution_steps: give --execution-steps S (or "
            "the agent's execution_steps argument)",
            field="agent_args",
        ) from None


def make_timing(spec: EvalSpec) -> Timing:
    """The Kernel timing a spec asks for (the one place it is built); refuses options the timing does not take."""
    if spec.timing == "sync":
        if spec.timing_options:
            raise EvalError(
                f"timing options {sorted(spec.timing_options)} need --timing realtime", field="timing_options"
            )
        return SyncTiming()
    try:
        return timing_from("realtime", spec.timing_options)
    except (TypeError, ValueError) as exc:
        raise EvalError(f"bad realtime timing options {spec.timing_options}: {exc}", field="timing_options") from None
