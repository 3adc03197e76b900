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

import asyncio
import collections
import inspect
import logging
import time
from collections.abc import Callable
from typing import Any, Protocol

from hylo.core.bus import EventBus
from hylo.core.chunk import ActionChunk, ChunkExecutor, as_chunk
from hylo.core.episode import (
    FAULTS,
    EndEpisode,
    detail_of,
    noted,
    raised,
    trace_end,
    trace_start,
    traced_review,
    unrecorded,
)
from hylo.core.errors import (
    AgentTimeout,
    HyloError,
    IncompatibleComponents,
    InvalidAction,
    OverLimit,
    SafetyAbort,
    SignalFailed,
    SimulationDiverged,
)
from hylo.core.events import (
    AgentChunkEvent,
    ContainerCheckpointEvent,
    ObservationEvent,
    SignalEvent,
    StepResultEvent,
)
from hylo.core.jsonable import jsonable
from hylo.core.shield import SafetyShield
from hylo.core.signals import ContainerSet, Signal
from hylo.core.status import EpisodeOutcome, EpisodeStatus
from hylo.core.types import EMPTY_INFO, NodesetMode, StepResult, TaskInstance
from hylo.graph.compile import Plan, PlannedNode
from hylo.graph.node import Node, NodeFailure, Owner, Role, RunContext, Runtime, overrides

log = logging.getLogger(__name__)

CHECKPOINTS_KEPT = 1000
"""How many per-iteration container checkpoints an execution keeps (the most recent)."""


class NodesetCrashed(Exception):
    """The subprocess of a server-mode nodeset died during a call; `owner` says whose fault it is."""

    def __init__(self, nodeset: str, owner: Owner, why: str) -> None:
        super().__init__(f"nodeset {nodeset!r} crashed: {why}")
        self.nodeset = nodeset
        self.owner = owner
        self.why = why


class ExecutionStopped(Exception):
    """Raised by a runner's `gate` to end the execution between two iterations (Stop pressed, the episode moved);
    the execution ends `infra_invalid` (an abstention: neither the agent's success nor its failure) with `reason`."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class GraphSetupError(HyloError):
    """A node could not be set up (bad agent arguments, an env it cannot build); the message names the node."""


class RemoteNodesets(Protocol):
    """Where the nodes of server-mode nodesets live: `proxy(planned)` builds a node's proxy (starting its nodeset's
    subprocess on first use); `close()` stops every subprocess."""

    def proxy(self, planned: PlannedNode) -> Node: ...

    def env_panel(self, nodeset: str) -> Any:
        """The proxy of the env panel living in `nodeset`'s subprocess (None when there is none)."""

    def close(self) -> None: ...


class _Live:
    """A planned node with its instance and what firing it needs, precomputed."""

    __slots__ = (
        "allowed", "id", "is_async", "label", "node", "overlapped", "planned", "required_out", "role", "wiring",
    )  # fmt: skip

    def __init__(self, planned: PlannedNode, node: Node) -> None:
        self.id = planned.id
        self.role = planned.role
        self.planned = planned
        self.node = node
        self.wiring = tuple(
            (name, src, port, planned.inputs[name].required) for name, (src, port) in planned.sources.items()
        )
        self.allowed = frozenset(planned.outputs)
        self.required_out = frozenset(p.name for p in planned.outputs.values() if p.required)
        self.is_async = inspect.iscoroutinefunction(node.forward)
        self.overlapped = node.split_forward
        self.label = f"node {planned.id!r} ({planned.cls.type_name})"


class GraphRunner:
    """Runs executions of one compiled graph in one worker; the graph's counterpart of the `Kernel`.

    - `runtime`: what nodes are set up with (the worker's env, the placement's benchmark and env spec)
    - `shield`, `max_steps`, `act_timeout_s`, `bus`, `auto_episode_reset`: as for the Kernel. `max_steps` defaults
      to the graph's `step_budget`, then the env's `max_episode_steps`
    - `remote`: builds the proxies of nodes whose nodeset runs in server mode (and is closed with the runner)

    Two attributes let an interactive session drive an execution: `gate(i)`, when set, is called before iteration
    i, in the runner's thread (it may block to pause, run other work there, or raise `ExecutionStopped`), and
    `observer(obs)` is handed every observation a reset or observe node produces (the live view's frames).
    """

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
        self.auto_episode_reset = auto_episode_reset
        self.act_timeout_s = act_timeout_s
        spec = runtime.env_spec
        budget = max_steps if max_steps is not None else plan.graph.step_budget
        if budget is None and spec is not None:
            budget = spec.max_episode_steps
        if plan.loop_in is not None and budget is None:
            raise ValueError(f"graph {plan.graph.name!r} needs a step budget: neither it nor its env gives one")
        if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int) or budget < 1):
            raise ValueError(f"max_steps must be an int >= 1, got {budget!r}")
        self.max_steps = budget or 1
        self.shield = SafetyShield() if shield is None else shield
        self._space = spec.action_space if spec is not None else None
        if spec is not None:
            self.shield.bind(spec.action_space)
        self.name = f"graph:{plan.graph.name}"
        self.gate: Callable[[int], None] | None = None
        self.observer: Callable[[Any], None] | None = None
        self._closed = False
        self._remote = remote

        modes = plan.graph.nodesets
        self._live: dict[str, _Live] = {}
        try:
            for planned in plan.nodes.values():
                server = modes.get(planned.nodeset.name)
                if server is not None and server.mode == NodesetMode.SERVER:
                    if remote is None:
                        raise GraphSetupError(
                            f"node {planned.id!r}: nodeset {planned.nodeset.name!r} is set to run in server mode, "
                            "which needs a runner with server-mode support"
                        )
                    node = remote.proxy(planned)
                else:
                    node = planned.cls(planned.id, planned.config)
                self._live[planned.id] = _Live(planned, node)
            for live in self._live.values():
                try:
                    live.node.setup(runtime)
                except (IncompatibleComponents, GraphSetupError):
                    raise
                except Exception as exc:
                    raise GraphSetupError(f"{live.label} could not be set up: {exc}") from exc
        except BaseException:
            self.close()
            raise
        specs = list(plan.containers)
        for live in self._live.values():
            specs.extend(getattr(live.node, "container_specs", ()) or ())
        self.containers = ContainerSet(specs)
        self._levels = [tuple(self._live[n] for n in level) for level in plan.pre]
        self._body = [tuple(self._live[n] for n in level) for level in plan.body[1:-1]]
        self._post = [tuple(self._live[n] for n in level) for level in plan.post]
        self._body_ids = tuple(n for level in plan.body for n in level)
        self._loop_in = self._live[plan.loop_in] if plan.loop_in else None
        self._loop_out = self._live[plan.loop_out] if plan.loop_out else None
        self._carry = [p.name for p in getattr(plan.nodes[plan.loop_out].config, "carry", [])] if plan.loop_out else []
        self._starts = [lv for lv in self._live.values() if overrides(lv.node, "start")]
        live_nodes = self._live.values()
        self._signals = [lv for lv in live_nodes if overrides(lv.node, "on_signal") and lv.node.wants_signals]
        self._after_step = [lv for lv in live_nodes if overrides(lv.node, "after_step") and lv.node.wants_steps]
        self._listens = bool(self._signals) or bool(len(self.containers))
        self._finishes = [lv for lv in self._live.values() if overrides(lv.node, "finish")]
        self._evaluate = next((lv for lv in self._live.values() if lv.planned.role is Role.EVALUATE), None)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._executor = ChunkExecutor()
        self._outs: dict[str, dict[str, Any]] = {}
        self._last_task: tuple[str, str] | None = None
        self._step_open = False
        self._scope = ""
        self.checkpoints: collections.deque[tuple[int, dict[str, Any]]] = collections.deque(maxlen=CHECKPOINTS_KEPT)
        self._reset_counters()

    def _reset_counters(self) -> None:
        self._steps = 0
        self._interventions = 0
        self._return = 0.0
        self._last: dict[str, Any] = {}
        self._latency = 0.0

    # -- public -------------------------------------------------------------------------------------------------

    def run(self, task: TaskInstance) -> EpisodeOutcome:
        """Run one execution of the graph on the placed `task` and return its outcome."""
        if self._closed:
            raise RuntimeError("this GraphRunner is closed")
        bus = self.bus
        bus.begin_episode(task.episode_id)
        self._reset_counters()
        self._executor.clear()
        self._outs = {}
        self.checkpoints.clear()
        stopped = False
        lost = unrecorded(bus)  # a critical recorder that failed before records nothing now
        try:
            if lost is not None:
                raise EndEpisode(self._end(EpisodeStatus.INFRA_INVALID, *lost))
            placed = (task.episode_id, task.digest)
            if self.auto_episode_reset and self._last_task != placed:
                self._signal(Signal.EPISODE_RESET)
            self._last_task = placed
            self._signal(Signal.RUN_START)
            trace_start(bus, task, agent=self.name, guards=self.shield.guard_names, timing="sync")
            run = RunContext(task, self.containers, bus, 0, self.runtime.privileged)
            self._run = run
            for live in self._starts:
                self._call(live, live.node.start, run)
            for level in self._levels:
                self._fire_level(level)
            if self._loop_in is not None:
                stopped = self._iterate(run)
            for level in self._post:
                self._fire_level(level)
            outcome = self._verdict(stopped)
        except EndEpisode as end:
            outcome = end.outcome
        except ExecutionStopped as halt:
            outcome = self._end(EpisodeStatus.INFRA_INVALID, halt.reason)
        except FAULTS as exc:  # a fault in the executor itself: not the graph's
            outcome = self._end(EpisodeStatus.INFRA_INVALID, raised("graph executor", exc), detail_of(exc))
        if self._step_open:
            outcome = self._closing_signal(Signal.STEP_END, outcome)
        outcome = trace_end(bus, outcome, recorded=lost is None)
        for live in self._finishes:
            try:
                live.node.finish(outcome)
            except FAULTS as exc:
                outcome = noted(outcome, f"{live.label} on finish: {raised('finish', exc)}")
        return self._closing_signal(Signal.RUN_END, outcome)

    @property
    def remote(self) -> RemoteNodesets | None:
        """Where this runner's server-mode nodesets live (None when every nodeset is local)."""
        return self._remote

    @property
    def steps_taken(self) -> int:
        """The env steps of the current (or last) execution."""
        return self._steps

    def signal(self, signal: Signal | str) -> None:
        """Deliver a lifecycle signal from its owner (`episode_reset` from an env panel) between executions; raises
        `SignalFailed` if a node fails on it."""
        try:
            self._signal(Signal(signal))
        except EndEpisode as end:
            raise SignalFailed(end.outcome.reason, end.outcome.detail, end.outcome.status.value) from None

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

    # -- the loop -------------------------------------------------------------------------------------------------

    def _iterate(self, run: RunContext) -> bool:
        """Run the loop; returns whether its stop port ended it."""
        assert self._loop_in is not None and self._loop_out is not None
        outs = self._outs
        loop_in_id, loop_out = self._loop_in.id, self._loop_out
        body_ids, body = self._body_ids, self._body
        carry: dict[str, Any] = {}
        for name, src, port, _ in self._loop_in.wiring:
            if name.startswith("init_"):
                carry[name.removeprefix("init_")] = outs.get(src, {}).get(port)
        stop_src = self._loop_out.planned.sources.get("stop")
        carry_src = [(name, *self._loop_out.planned.sources[name]) for name in self._carry]
        containers = self.containers
        keep = bool(len(containers))
        listens = self._listens
        bus = self.bus
        gate = self.gate
        i = 0
        while i < self.max_steps:
            if gate is not None:
                gate(i)
            run.step = i
            if listens or bus.active:  # as in the Kernel: a step signal nobody hears is not sent
                self._scope = f"{loop_in_id}:{i}"
                self._signal(Signal.STEP_START)
            else:
                self._step_open = True
            for node_id in body_ids:
                outs.pop(node_id, None)
            outs[loop_in_id] = {"step": i, **carry}
            for level in body:
                self._fire_level(level)
            for name, src, port in carry_src:
                produced = outs.get(src)
                if produced is not None and port in produced:
                    carry[name] = produced[port]
            stop = False
            if stop_src is not None:
                produced = outs.get(stop_src[0])
                stop = bool(produced.get(stop_src[1])) if produced is not None else False
            if keep:
                snapshot = containers.snapshot()
                self.checkpoints.append((i, snapshot))
                if bus.active:
                    bus.emit_trusted(ContainerCheckpointEvent, step=i, values=jsonable(snapshot))
            if listens or bus.active:
                self._signal(Signal.STEP_END)
            else:
                self._step_open = False
            i += 1
            last = self._last
            if last.get("done"):
                break
            if stop:
                outs[loop_out.id] = self._final(carry, True, i)
                return True
        outs[loop_out.id] = self._final(carry, False, i)
        return False

    @staticmethod
    def _final(carry: dict[str, Any], stopped: bool, steps: int) -> dict[str, Any]:
        return {"final_stop": stopped, "final_steps": steps, **{f"final_{k}": v for k, v in carry.items()}}

    # -- firing ---------------------------------------------------------------------------------------------------

    def _fire_level(self, level: tuple[_Live, ...]) -> None:
        if len(level) > 1 and any(lv.is_async or lv.overlapped for lv in level):
            self._fire_concurrently(level)
            return
        for live in level:
            args = self._inputs(live)
            if args is not None:
                self._fire(live, args)

    def _inputs(self, live: _Live) -> dict[str, Any] | None:
        """The node's input values, or None when it does not fire in this iteration (a required input's source did
        not fire, or it is the policy and the chunk executor still holds actions)."""
        role = live.role
        if role is Role.POLICY and not self._executor.empty:
            return None
        outs = self._outs
        args: dict[str, Any] = {}
        for name, src, port, required in live.wiring:
            produced = outs.get(src)
            if produced is not None and port in produced:
                args[name] = produced[port]
            elif required and not (role is Role.ACTUATOR and name == "action"):
                return None
        return args

    def _fire(self, live: _Live, args: dict[str, Any]) -> None:
        role = live.role
        if role is Role.ACTUATOR:
            self._actuate(live, args)
            return
        t0 = time.perf_counter()
        self._accept(live, self._forward(live, args), time.perf_counter() - t0)

    def _forward(self, live: _Live, args: dict[str, Any]) -> Any:
        """The node's raw result (its failure ends the episode)."""
        try:
            result = live.node.forward(args)
            if live.is_async:
                result = self._event_loop().run_until_complete(result)  # type: ignore[arg-type]
        except FAULTS as exc:
            raise EndEpisode(self._node_failed(live, exc)) from None
        return result

    def _fire_concurrently(self, level: tuple[_Live, ...]) -> None:
        """Fire a level whose nodes do not depend on each other: the server-mode nodes' requests go out first, the
        sync nodes run, the async ones are gathered, then the server-mode replies are read (always, so that no
        reply is left behind when a node of the level fails). The first failure, in level order, ends the episode."""
        ready = [(lv, args) for lv in level for args in (self._inputs(lv),) if args is not None]
        apart = [(lv, args) for lv, args in ready if lv.planned.role is not Role.ACTUATOR]
        remote = [(lv, args) for lv, args in apart if lv.overlapped]
        gathered = [(lv, args) for lv, args in apart if lv.is_async and not lv.overlapped]
        inline = [(lv, args) for lv, args in ready if (lv, args) not in remote and (lv, args) not in gathered]
        t0 = time.perf_counter()
        failures: dict[str, BaseException] = {}
        ended: EpisodeOutcome | None = None  # how a sync node of the level ended the episode
        begun: list[_Live] = []
        for live, args in remote:
            try:
                live.node.begin(args)  # type: ignore[attr-defined]
                begun.append(live)
            except FAULTS as exc:
                failures[live.id] = exc
                break
        results: dict[str, Any] = {}
        try:
            if not failures:
                for live, args in inline:
                    self._fire(live, args)
                if gathered:

                    async def gather() -> list[Any]:
                        calls = [lv.node.forward(args) for lv, args in gathered]
                        return await asyncio.gather(*calls, return_exceptions=True)  # type: ignore[arg-type]

                    for (live, _), result in zip(
                        gathered, self._event_loop().run_until_complete(gather()), strict=True
                    ):
                        if isinstance(result, BaseException):
                            failures.setdefault(live.id, result)
                        else:
                            results[live.id] = result
        except EndEpisode as end:
            ended = end.outcome
        finally:
            for live in begun:
                try:
                    results[live.id] = live.node.end()  # type: ignore[attr-defined]
                except FAULTS as exc:
                    failures.setdefault(live.id, exc)
        for live in level:
            if live.id in failures:
                raise EndEpisode(self._node_failed(live, failures[live.id]))
        if ended is not None:
            raise EndEpisode(ended)
        elapsed = time.perf_counter() - t0
        for live in level:
            if live.id in results:
                self._accept(live, results[live.id], elapsed)

    def _accept(self, live: _Live, result: Any, elapsed: float) -> dict[str, Any]:
        """Check a node's result against its declared outputs and publish it."""
        if type(result) is not dict:
            if not isinstance(result, dict):
                raise EndEpisode(self._end(EpisodeStatus.ERROR, f"{live.label} returned a {type(result).__name__}, "
                                            f"not a dict of its outputs {sorted(live.allowed)}"))  # fmt: skip
            result = dict(result)
        if not live.allowed.issuperset(result):
            extra = sorted(set(result) - live.allowed)
            message = f"{live.label} returned undeclared outputs {extra}; it declares {sorted(live.allowed)}"
            if "error" in extra:
                message += f" (its 'error': {str(result['error'])[:300]})"
            raise EndEpisode(self._end(EpisodeStatus.ERROR, message))
        if not live.required_out.issubset(result):
            missing = sorted(live.required_out - set(result))
            raise EndEpisode(self._end(EpisodeStatus.ERROR, f"{live.label} did not return its required outputs "
                                        f"{missing}; it returned {sorted(result)}"))  # fmt: skip
        role = live.role
        if role is Role.POLICY:
            self._latency = elapsed
            if self.act_timeout_s is not None and elapsed > self.act_timeout_s:
                raise EndEpisode(
                    self._end(EpisodeStatus.ERROR, "timeout", str(AgentTimeout(elapsed, self.act_timeout_s)))
                )
        elif role is not Role.PLAIN and "observation" in result:
            if self.bus.active:
                self.bus.emit_trusted(ObservationEvent, obs=_summary(result["observation"]),
                                      terminal=bool(self._last.get("done")))  # fmt: skip
            if self.observer is not None:
                try:
                    self.observer(result["observation"])
                except Exception as exc:  # a view of the execution, never its end
                    log.warning("observer %r raised %r; detached", self.observer, exc)
                    self.observer = None
        outputs: dict[str, Any] = result
        self._outs[live.id] = outputs
        return outputs

    def _actuate(self, live: _Live, args: dict[str, Any]) -> None:
        """Serve the step node one action from the chunk executor, reviewed by the shield; account for the step."""
        executor, bus = self._executor, self.bus
        fresh = args.pop("action", None)
        if fresh is not None:
            try:
                chunk = fresh if isinstance(fresh, ActionChunk) else as_chunk(fresh)
                if not chunk.actions or not 1 <= chunk.execution_steps <= len(chunk.actions):
                    raise ValueError(f"{chunk!r} has no action to execute")
            except (TypeError, ValueError) as exc:
                raise EndEpisode(self._end(EpisodeStatus.ERROR, f"{live.label} got an invalid chunk: {exc}",
                                            detail_of(exc))) from None  # fmt: skip
            executor.load(chunk)
            if bus.active:
                bus.emit_trusted(AgentChunkEvent, size=len(chunk.actions), execution_steps=chunk.execution_steps,
                                 latency_s=self._latency, dropped=0, requested_at=self._steps,
                                 actions=[jsonable(a) for a in chunk.actions])  # fmt: skip
        if executor.empty:
            raise EndEpisode(self._end(EpisodeStatus.ERROR, f"{live.label} got no action: its 'action' input is "
                                        "unfilled and the chunk executor is empty"))  # fmt: skip
        action = executor.next()
        try:
            review = traced_review(self.shield, action, self._space, bus, step=self._steps)
        except SafetyAbort as abort:
            self._interventions += 1
            raise EndEpisode(self._end(EpisodeStatus.SAFETY_ABORT, f"{abort.guard}: {abort.reason}")) from None
        except InvalidAction as exc:
            raise EndEpisode(self._end(EpisodeStatus.ERROR, f"agent returned a malformed action: {exc}")) from None
        except FAULTS as exc:
            raise EndEpisode(self._end(EpisodeStatus.ERROR, raised("shield review of the agent's action", exc),
                                        detail_of(exc))) from None  # fmt: skip
        if review.modified:
            self._interventions += 1
            executor.clear()
        args["action"] = review.action
        result = self._accept(live, self._forward(live, args), 0.0)
        self._steps += 1
        reward = float(result.get("reward", 0.0))
        self._return += reward
        success = bool(result.get("success"))
        terminated = bool(result.get("terminated"))
        truncated = bool(result.get("truncated"))
        info = result.get("info") or EMPTY_INFO
        self._last = {"success": success, "terminated": terminated, "truncated": truncated,
                      "done": success or terminated or truncated}  # fmt: skip
        if bus.active:
            bus.sim_time = self._steps * (self.runtime.env_spec.dt if self.runtime.env_spec else 0.0)
            bus.emit_trusted(StepResultEvent, step=self._steps - 1, reward=reward, terminated=terminated,
                             truncated=truncated, success=success, info=jsonable(info) if info else {})  # fmt: skip
        if self._after_step:
            step = getattr(live.node, "last_result", None)  # the env's own result, observation included
            if not isinstance(step, StepResult):
                step = StepResult(EMPTY_INFO, reward, terminated, truncated, success, info)
            for other in self._after_step:
                self._call(other, other.node.after_step, step)

    def _event_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
        return self._loop

    def _call(self, live: _Live, hook: Callable[[Any], Any], arg: Any) -> None:
        try:
            hook(arg)
        except FAULTS as exc:
            raise EndEpisode(self._node_failed(live, exc)) from None

    # -- signals, verdicts ----------------------------------------------------------------------------------------

    def _signal(self, signal: Signal) -> None:
        if signal is Signal.STEP_START:
            self._step_open = True
        elif signal is Signal.STEP_END:
            self._step_open = False
        self.containers.on_signal(signal)
        for live in self._signals:
            self._call(live, live.node.on_signal, signal)
        if self.bus.active:
            scope = self._scope if signal in (Signal.STEP_START, Signal.STEP_END) else self.bus.episode_id
            self.bus.emit_trusted(SignalEvent, signal=signal.value, scope_id=scope)

    def _closing_signal(self, signal: Signal, outcome: EpisodeOutcome) -> EpisodeOutcome:
        try:
            self._signal(signal)
        except EndEpisode as end:
            return noted(outcome, end.outcome.reason)
        return outcome

    def _verdict(self, stopped: bool) -> EpisodeOutcome:
        last = self._last
        metrics: dict[str, Any] = {}
        success = bool(last.get("success"))
        if self._evaluate is not None:
            judged = self._outs.get(self._evaluate.id)
            if judged is None:
                return self._end(EpisodeStatus.ERROR, f"{self._evaluate.label} did not fire: a required input of it "
                                 "got no value")  # fmt: skip
            metrics = dict(judged.get("metrics") or {})
            if success and not judged.get("success"):  # a judge may deny the env's success, never invent one
                return self._end(EpisodeStatus.FAILURE, "judged unsuccessful", metrics=metrics)
        if success:
            return self._end(EpisodeStatus.SUCCESS, "success", metrics=metrics)
        if last.get("terminated"):
            reason = "terminated"
        elif last.get("truncated"):
            reason = "truncated"
        elif stopped:
            reason = "stopped"
        else:
            reason = "max_steps"
        return self._end(EpisodeStatus.FAILURE, reason, metrics=metrics)

    def _node_failed(self, live: _Live, exc: BaseException) -> EpisodeOutcome:
        if isinstance(exc, NodesetCrashed):
            status = EpisodeStatus.INFRA_INVALID if exc.owner is Owner.ENV else EpisodeStatus.ERROR
            return self._end(status, f"{live.label}: {exc}", detail_of(exc))
        if isinstance(exc, OverLimit):  # the harness's limits, whichever node's env call found them passed
            return self._end(EpisodeStatus(exc.status), exc.reason, exc.detail)
        if isinstance(exc, AgentTimeout):
            return self._end(EpisodeStatus.ERROR, "timeout", f"{live.label}: {exc}")
        if isinstance(exc, NodeFailure):
            return self._end(EpisodeStatus.ERROR, f"{live.label}: {exc}", detail_of(exc))
        if live.planned.cls.owner is Owner.ENV:
            if isinstance(exc, InvalidAction):
                reason = f"{live.label} rejected the agent's action: {exc}"
                return self._end(EpisodeStatus.ERROR, reason, detail_of(exc))
            if isinstance(exc, SimulationDiverged):
                return self._end(EpisodeStatus.INFRA_INVALID, f"{live.label}: {exc}", detail_of(exc))
            return self._end(EpisodeStatus.INFRA_INVALID, raised(live.label, exc), detail_of(exc))
        return self._end(EpisodeStatus.ERROR, raised(live.label, exc), detail_of(exc))

    def _end(
        self, status: EpisodeStatus, reason: str, detail: str | None = None, *, metrics: dict[str, Any] | None = None
    ) -> EpisodeOutcome:
        return EpisodeOutcome.ended(
            status,
            self._steps,
            reason,
            safety_interventions=self._interventions,
            detail=detail,
            metrics={"return": self._return, **(metrics or {})},
        )


def _summary(obs: Any) -> dict[str, Any]:
    summary = jsonable(obs)
    return summary if isinstance(summary, dict) else {"value": summary}
