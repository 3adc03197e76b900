"""The graph executor: runs executions of a compiled graph, one episode each, with the Kernel's honest statuses.

An execution: `run_start` → pre-loop band (entry nodes and `reset`, each once) → the loop, one iteration at a time
(`step_start` when iterIn opens it, `step_end` when iterOut closes it, scope id `<iterIn>:<i>`; the `stop` port, the
end of the episode or the step budget ends it) → iterOut's `final_*` side feeds the after-loop band (`evaluate`
fires once) → `run_end`, on clean and on error paths.

Within a band, nodes fire in levels; the nodes of one level do not depend on each other, and the coroutine nodes
(and nodes of a server-mode nodeset) of a level run concurrently. The policy node fires only when the chunk
executor is empty; the step node's `action` is served by the chunk executor through the safety shield, exactly as
in the Kernel, so a Kernel run and the equivalent graph give the same actions and the same outcome.

A node that raises, or returns anything but a dict of its declared outputs, ends the episode with its id in the
reason: an env node's crash is `infra_invalid` (as an env's in the Kernel), any other node's is `error`.
"""

from __future__ import annotations

import collections
import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from hylo.core.bus import EventBus
from hylo.core.episode import FAULTS, EndEpisode, noted, raised
from hylo.core.episode_loop import EpisodeLoop, step_budget
from hylo.core.errors import IncompatibleComponents
from hylo.core.events import ContainerCheckpointEvent
from hylo.core.jsonable import jsonable
from hylo.core.scaffold import EpisodeScaffold
from hylo.core.shield import SafetyShield
from hylo.core.signals import ContainerSet, ContainerSpec, Signal
from hylo.core.status import EpisodeOutcome
from hylo.core.types import EMPTY_INFO, EnvSpec, NodesetMode, StepResult, TaskInstance
from hylo.graph.compile import Plan, PlannedNode
from hylo.graph.faults import ExecutionStopped, GraphSetupError, NodesetCrashed
from hylo.graph.firing import LiveNode, NodeFiring
from hylo.graph.node import Node, Role, RunContext, Runtime, overrides
from hylo.graph.watch import NodeWatch

__all__ = ["CHECKPOINTS_KEPT", "ExecutionStopped", "GraphRunner", "GraphSetupError", "NodesetCrashed", "RemoteNodesets"]

log = logging.getLogger(__name__)

CHECKPOINTS_KEPT = 1000
"""How many per-iteration container checkpoints an execution keeps (the most recent)."""


class RemoteNodesets(Protocol):
    """Where the nodes of server-mode nodesets live: `proxy(planned)` builds a node's proxy (starting its nodeset's
    subprocess on first use); `close()` stops every subprocess."""

    def proxy(self, planned: PlannedNode) -> Node: ...

    def env_panel(self, nodeset: str) -> Any:
        """The proxy of the env panel living in `nodeset`'s subprocess (None when there is none)."""

    def close(self) -> None: ...


# -- building -----------------------------------------------------------------------------------------------------


def _node_containers(live: Iterable[LiveNode]) -> Iterator[ContainerSpec]:
    """The containers the nodes declare (an agent node's, its agent's)."""
    for node in live:
        yield from getattr(node.node, "container_specs", ()) or ()


def _budget(plan: Plan, spec: EnvSpec | None, max_steps: int | None) -> int:
    """The step budget: `max_steps`, else the graph's `step_budget`, else the env's `max_episode_steps`; a graph
    without a loop needs none (it runs once)."""
    missing = None
    if plan.loop_in is not None:
        missing = f"graph {plan.graph.name!r} needs a step budget: neither it nor its env gives one"
    env_budget = None if spec is None else spec.max_episode_steps
    return step_budget(max_steps, plan.graph.step_budget, env_budget, missing=missing) or 1


def build_nodes(plan: Plan, runtime: Runtime, remote: RemoteNodesets | None, live: dict[str, LiveNode]) -> None:
    """Build every node of `plan` into `live` (a server-mode nodeset's as proxies, from `remote`), then set each up
    with `runtime`. `live` fills as it goes, so that whoever catches a failure can close what was built."""
    for planned in plan.nodes.values():
        live[planned.id] = LiveNode(planned, _instance(plan, planned, remote))
    for node in live.values():
        try:
            node.node.setup(runtime)
        except (IncompatibleComponents, GraphSetupError):
            raise
        except Exception as exc:
            raise GraphSetupError(f"{node.label} could not be set up: {exc}") from exc


def _instance(plan: Plan, planned: PlannedNode, remote: RemoteNodesets | None) -> Node:
    """The node `planned` stands for: here, or the proxy of a node living in its server-mode nodeset."""
    server = plan.graph.nodesets.get(planned.nodeset.name)
    if server is None or server.mode != NodesetMode.SERVER:
        return planned.cls(planned.id, planned.config)
    if remote is None:
        raise GraphSetupError(
            f"node {planned.id!r}: nodeset {planned.nodeset.name!r} is set to run in server mode, "
            "which needs a runner with server-mode support"
        )
    return remote.proxy(planned)


Level = tuple[LiveNode, ...]


@dataclass(frozen=True, slots=True)
class GraphSchedule:
    """When the live nodes of a plan fire: the bands' levels (`pre`, the loop's `body` between its ends, `post`);
    the loop's ends, what iterIn takes in (`carry_in`: name, source node, port), what iterOut carries over
    (`carry_out`) and where its `stop` comes from; and the nodes with a hook (`start`, `on_signal`, `after_step`,
    `finish`) or the evaluate role."""

    pre: list[Level]
    body: list[Level]
    post: list[Level]
    body_ids: tuple[str, ...]
    loop_in: LiveNode | None
    loop_out: LiveNode | None
    carry_in: list[tuple[str, str, str]]
    carry_out: list[tuple[str, str, str]]
    stop: tuple[str, str] | None
    starts: list[LiveNode]
    signals: list[LiveNode]
    after_step: list[LiveNode]
    finishes: list[LiveNode]
    evaluate: LiveNode | None

    @classmethod
    def of(cls, plan: Plan, live: dict[str, LiveNode]) -> GraphSchedule:
        def levels(band: Sequence[Sequence[str]]) -> list[Level]:
            return [tuple(live[n] for n in level) for level in band]

        def hooked(hook: str, wants: str | None = None) -> list[LiveNode]:
            return [
                lv for lv in live.values() if overrides(lv.node, hook) and (wants is None or getattr(lv.node, wants))
            ]

        loop_in = live[plan.loop_in] if plan.loop_in else None
        loop_out = live[plan.loop_out] if plan.loop_out else None
        return cls(
            pre=levels(plan.pre),
            body=levels(plan.body[1:-1]),
            post=levels(plan.post),
            body_ids=tuple(n for level in plan.body for n in level),
            loop_in=loop_in,
            loop_out=loop_out,
            carry_in=_carried_in(loop_in),
            carry_out=_carried_out(loop_out),
            stop=None if loop_out is None else loop_out.planned.sources.get("stop"),
            starts=hooked("start"),
            signals=hooked("on_signal", "wants_signals"),
            after_step=hooked("after_step", "wants_steps"),
            finishes=hooked("finish"),
            evaluate=next((lv for lv in live.values() if lv.role is Role.EVALUATE), None),
        )


def _carried_in(loop_in: LiveNode | None) -> list[tuple[str, str, str]]:
    """iterIn's `init_*` inputs: (the carried value's name, source node, port)."""
    if loop_in is None:
        return []
    return [
        (name.removeprefix("init_"), src, port) for name, src, port, _ in loop_in.wiring if name.startswith("init_")
    ]


def _carried_out(loop_out: LiveNode | None) -> list[tuple[str, str, str]]:
    """iterOut's carried values: (name, source node, port)."""
    if loop_out is None:
        return []
    sources = loop_out.planned.sources
    return [(p.name, *sources[p.name]) for p in getattr(loop_out.planned.config, "carry", [])]


# -- running ------------------------------------------------------------------------------------------------------


class GraphRunner(EpisodeLoop, NodeFiring):
    """Runs executions of one compiled graph in one worker; the graph's counterpart of the `Kernel`.

    - `runtime`: what nodes are set up with (the worker's env, the placement's benchmark and env spec)
    - `shield`, `max_steps`, `act_timeout_s`, `bus`, `auto_episode_reset`: as for the Kernel. `max_steps` defaults
      to the graph's `step_budget`, then the env's `max_episode_steps`
    - `remote`: builds the proxies of nodes whose nodeset runs in server mode (and is closed with the runner)

    Three attributes let an interactive session drive and watch an execution: `gate(i)`, when set, is called before
    iteration i, in the runner's thread (it may block to pause, run other work there, or raise `ExecutionStopped`),
    `observer(obs)` is handed every observation a reset or observe node produces (the live view's frames), and
    `on_nodes(message)`, when set before an execution, is handed its nodes' states and its edges' last values
    (`hylo.graph.watch`: after the pre-loop band, after iterations, at the end).
    """

    fault_owner = "graph executor"

    def __init__(
        self,
        plan: Plan,
        runtime: Runtime,
        *,
        shield: SafetyShield | None = None,
        max_steps: int | None = None,
        act_timeout_s: float | None = None,
        bus: EventBus | None = None,
        auto_episode_reset: bool = True,
        remote: RemoteNodesets | None = None,
    ) -> None:
        self.plan = plan
        self.runtime = runtime
        self.bus = bus if bus is not None else EventBus()
        self.act_timeout_s = act_timeout_s
        spec = runtime.env_spec
        self.max_steps = _budget(plan, spec, max_steps)
        self.shield = SafetyShield() if shield is None else shield
        if spec is not None:
            self.shield.bind(spec.action_space)
        self.name = f"graph:{plan.graph.name}"
        self.gate: Callable[[int], None] | None = None
        self.observer: Callable[[Any], None] | None = None
        self.on_nodes: Callable[[dict[str, Any]], None] | None = None
        self._watch: NodeWatch | None = None
        self._closed = False
        self._remote = remote
        self._live: dict[str, LiveNode] = {}
        try:
            build_nodes(plan, runtime, remote, self._live)
        except BaseException:
            self.close()
            raise
        self._schedule = GraphSchedule.of(plan, self._live)
        self.containers = ContainerSet([*plan.containers, *_node_containers(self._live.values())])
        self._loop = None
        self._outs = {}
        self._last = {}
        self._latency = 0.0
        self.checkpoints: collections.deque[tuple[int, dict[str, Any]]] = collections.deque(maxlen=CHECKPOINTS_KEPT)
        self._sc = self._scaffold(spec, auto_episode_reset)

    def _scaffold(self, spec: EnvSpec | None, auto_episode_reset: bool) -> EpisodeScaffold:
        """The executions' scaffold: the env's action space and control period, when the runtime has an env; the
        signals delivered when a node or a container listens; the signals' scope the episode's between iterations."""
        listens = bool(self._schedule.signals) or bool(len(self.containers))
        sc = EpisodeScaffold(
            self.bus,
            self.shield,
            None if spec is None else spec.action_space,
            deliver=self._deliver if listens else None,
            auto_episode_reset=auto_episode_reset,
            act_timeout_s=self.act_timeout_s,
            dt=0.0 if spec is None else spec.dt,
        )
        sc.scope = ""
        return sc

    # -- public -------------------------------------------------------------------------------------------------

    @property
    def remote(self) -> RemoteNodesets | None:
        """Where this runner's server-mode nodesets live (None when every nodeset is local)."""
        return self._remote

    @property
    def steps_taken(self) -> int:
        """The env steps of the current (or last) execution."""
        return self._sc.steps

    def report_nodes(self) -> None:
        """Send the watched execution's node states and edge values now, if any changed since its last message."""
        if self._watch is not None:
            self._watch.flush()

    def close(self) -> None:
        """Close every node once (an agent's connection, a server-mode nodeset's subprocess)."""
        if self._closed:
            return
        self._closed = True
        for live in getattr(self, "_live", {}).values():
            try:
                live.node.close()
            except Exception as exc:
                log.warning("%s failed to close: %r", live.label, exc)
        if self._remote is not None:
            self._remote.close()
        loop = getattr(self, "_loop", None)
        if loop is not None:
            loop.close()

    def __enter__(self) -> GraphRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the execution --------------------------------------------------------------------------------------------

    def _open(self, task: TaskInstance) -> None:
        self._last = {}
        self._latency = 0.0
        self._outs = {}
        self.checkpoints.clear()
        self._watch = self._watching()
        self._sc.open(task, agent=self.name, timing="sync")

    def _watching(self) -> NodeWatch | None:
        """The watch of the execution about to open: None unless `on_nodes` is set (kept across executions)."""
        report = self.on_nodes
        if report is None:
            return None
        watch = self._watch
        if watch is None or watch.report is not report:
            watch = NodeWatch(self._live, self.plan.graph.edges, report)
        watch.open()
        return watch

    def _episode(self, task: TaskInstance) -> EpisodeOutcome:
        """The bands in order: the `start` hooks and the pre-loop band, the loop, the after-loop band; the verdict."""
        schedule = self._schedule
        run = RunContext(task, self.containers, self.bus, 0, self.runtime.privileged)
        try:
            for live in schedule.starts:
                self._call(live, live.node.start, run)
            for level in schedule.pre:
                self._fire_level(level)
            if self._watch is not None and schedule.loop_in is not None:
                self._watch.running(schedule.body_ids)
                self._watch.send(phase="loop", step=0)
            stopped = schedule.loop_in is not None and self._iterate(run)
            for level in schedule.post:
                self._fire_level(level)
        except ExecutionStopped as halt:
            return self._sc.infra_invalid(halt.reason)
        return self._verdict(stopped)

    # -- the loop -------------------------------------------------------------------------------------------------

    def _iterate(self, run: RunContext) -> bool:
        """Run the loop to its end (the episode's, the stop port's or the step budget's); returns whether its stop
        port ended it. iterOut's `final_*` outputs feed the after-loop band."""
        loop_out = self._schedule.loop_out
        assert loop_out is not None
        outs = self._outs
        carry = {name: outs.get(src, {}).get(port) for name, src, port in self._schedule.carry_in}
        gate = self.gate
        i = 0
        while i < self.max_steps:
            stop = self._iteration(run, i, carry, gate)
            i += 1
            if self._last.get("done"):
                break
            if stop:
                self._closed_loop(loop_out, self._final(carry, True, i))
                return True
        self._closed_loop(loop_out, self._final(carry, False, i))
        return False

    def _closed_loop(self, loop_out: LiveNode, final: dict[str, Any]) -> None:
        """iterOut's `final_*` outputs, for the after-loop band."""
        self._outs[loop_out.id] = final
        if self._watch is not None:
            self._watch.published(loop_out.id, final)

    def _iteration(self, run: RunContext, i: int, carry: dict[str, Any], gate: Callable[[int], None] | None) -> bool:
        """Iteration `i`: iterIn opens it (`step_start`, scope `<iterIn>:<i>`) with the carried values, the body
        fires, iterOut closes it (`step_end`) and updates `carry`. Returns whether its stop port asks to stop."""
        schedule = self._schedule
        assert schedule.loop_in is not None
        if gate is not None:
            gate(i)
        run.step = i
        sc = self._sc
        sc.scope = f"{schedule.loop_in.id}:{i}"
        sc.step_start()  # as in the Kernel: a step signal nobody hears is not sent
        outs = self._outs
        for node_id in schedule.body_ids:
            outs.pop(node_id, None)
        outs[schedule.loop_in.id] = opened = {"step": i, **carry}
        watch = self._watch
        if watch is not None:
            watch.fired(schedule.loop_in.id, opened)
        for level in schedule.body:
            self._fire_level(level)
        for name, src, port in schedule.carry_out:
            produced = outs.get(src)
            if produced is not None and port in produced:
                carry[name] = produced[port]
        stop = self._stop_asked()
        self._checkpoint(i)
        if watch is not None and schedule.loop_out is not None:
            watch.fired(schedule.loop_out.id, {})
            watch.send(due=False, phase="loop", step=i + 1)
        sc.step_end()
        return stop

    def _stop_asked(self) -> bool:
        """Whether iterOut's `stop` input got a true value in this iteration."""
        source = self._schedule.stop
        if source is None:
            return False
        produced = self._outs.get(source[0])
        return bool(produced.get(source[1])) if produced is not None else False

    def _checkpoint(self, i: int) -> None:
        """Keep (and trace) the containers' values at the end of iteration `i`."""
        containers = self.containers
        if not len(containers):
            return
        snapshot = containers.snapshot()
        self.checkpoints.append((i, snapshot))
        if self.bus.active:
            self.bus.emit_trusted(ContainerCheckpointEvent, step=i, values=jsonable(snapshot))

    @staticmethod
    def _final(carry: dict[str, Any], stopped: bool, steps: int) -> dict[str, Any]:
        return {"final_stop": stopped, "final_steps": steps, **{f"final_{k}": v for k, v in carry.items()}}

    def _actuate(self, live: LiveNode, args: dict[str, Any]) -> None:
        """Serve the step node one action from the chunk executor, reviewed by the shield; account for the step."""
        sc = self._sc
        executor = sc.executor
        fresh = args.pop("action", None)
        if fresh is not None:
            sc.load(sc.chunk_of(fresh, f"{live.label} got"), self._latency, sc.steps)
        if executor.empty:
            unfilled = f"{live.label} got no action: its 'action' input is unfilled and the chunk executor is empty"
            raise EndEpisode(sc.error(unfilled))
        args["action"] = sc.review(executor.next())
        result = self._accept(live, self._forward(live, args), 0.0)
        reward = float(result.get("reward", 0.0))
        success = bool(result.get("success"))
        terminated = bool(result.get("terminated"))
        truncated = bool(result.get("truncated"))
        info = result.get("info") or EMPTY_INFO
        self._last = {"success": success, "terminated": terminated, "truncated": truncated,
                      "done": success or terminated or truncated}  # fmt: skip
        sc.stepped(reward, terminated, truncated, success, info)
        after_step = self._schedule.after_step
        if after_step:
            step = getattr(live.node, "last_result", None)  # the env's own result, observation included
            if not isinstance(step, StepResult):
                step = StepResult(EMPTY_INFO, reward, terminated, truncated, success, info)
            for other in after_step:
                self._call(other, other.node.after_step, step)

    # -- signals, verdicts ----------------------------------------------------------------------------------------

    def _deliver(self, signal: Signal) -> None:
        self.containers.on_signal(signal)
        for live in self._schedule.signals:
            self._call(live, live.node.on_signal, signal)

    def _tell(self, outcome: EpisodeOutcome) -> EpisodeOutcome:
        for live in self._schedule.finishes:
            try:
                live.node.finish(outcome)
            except FAULTS as exc:
                outcome = noted(outcome, f"{live.label} on finish: {raised('finish', exc)}")
        watch = self._watch
        if watch is not None:
            watch.finished()
            watch.send(phase="end", step=self._sc.steps, status=outcome.status.value)
        return outcome

    def _verdict(self, stopped: bool) -> EpisodeOutcome:
        """The execution's verdict: the last step's flags (an evaluate node may deny the env's success, never
        invent one), else how the loop ended (`stopped`, `max_steps`)."""
        sc = self._sc
        last = self._last
        metrics: dict[str, Any] = {}
        success = bool(last.get("success"))
        evaluate = self._schedule.evaluate
        if evaluate is not None:
            judged = self._outs.get(evaluate.id)
            if judged is None:
                return sc.error(f"{evaluate.label} did not fire: a required input of it got no value")
            metrics = dict(judged.get("metrics") or {})
            if success and not judged.get("success"):
                return sc.failure("judged unsuccessful", metrics=metrics)
        verdict = sc.after_step(success, bool(last.get("terminated")), bool(last.get("truncated")), metrics=metrics)
        if verdict is not None:
            return verdict
        return sc.failure("stopped", metrics=metrics) if stopped else sc.step_limit(metrics=metrics)
