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
from collections.abc import Callable
from typing import Any, Protocol

from hylo.core.bus import EventBus
from hylo.core.episode import FAULTS, EndEpisode, detail_of, noted, raised
from hylo.core.errors import IncompatibleComponents, SignalFailed
from hylo.core.events import ContainerCheckpointEvent
from hylo.core.jsonable import jsonable
from hylo.core.scaffold import EpisodeScaffold
from hylo.core.shield import SafetyShield
from hylo.core.signals import ContainerSet, Signal
from hylo.core.status import EpisodeOutcome, EpisodeStatus
from hylo.core.types import EMPTY_INFO, NodesetMode, StepResult, TaskInstance
from hylo.graph.compile import Plan, PlannedNode
from hylo.graph.faults import ExecutionStopped, GraphSetupError, NodesetCrashed
from hylo.graph.firing import LiveNode, NodeFiring
from hylo.graph.node import Node, Role, RunContext, Runtime, overrides

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


class GraphRunner(NodeFiring):
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
        self._live: dict[str, LiveNode] = {}
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
                self._live[planned.id] = LiveNode(planned, node)
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
        self._loop = None
        self._outs = {}
        self._last = {}
        self._latency = 0.0
        self.checkpoints: collections.deque[tuple[int, dict[str, Any]]] = collections.deque(maxlen=CHECKPOINTS_KEPT)
        self._sc = EpisodeScaffold(
            self.bus,
            self.shield,
            self._space,
            deliver=self._deliver if self._listens else None,
            auto_episode_reset=auto_episode_reset,
            act_timeout_s=act_timeout_s,
            dt=spec.dt if spec is not None else 0.0,
        )
        self._sc.scope = ""

    @property
    def auto_episode_reset(self) -> bool:
        return self._sc.auto_episode_reset

    @auto_episode_reset.setter
    def auto_episode_reset(self, value: bool) -> None:
        self._sc.auto_episode_reset = value

    # -- public -------------------------------------------------------------------------------------------------

    def run(self, task: TaskInstance) -> EpisodeOutcome:
        """Run one execution of the graph on the placed `task` and return its outcome."""
        if self._closed:
            raise RuntimeError("this GraphRunner is closed")
        sc = self._sc
        self._last = {}
        self._latency = 0.0
        self._outs = {}
        self.checkpoints.clear()
        stopped = False
        try:
            sc.open(task, agent=self.name, timing="sync")
            run = RunContext(task, self.containers, self.bus, 0, self.runtime.privileged)
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
            outcome = sc.ended(EpisodeStatus.INFRA_INVALID, halt.reason)
        except FAULTS as exc:  # a fault in the executor itself: not the graph's
            outcome = sc.ended(EpisodeStatus.INFRA_INVALID, raised("graph executor", exc), detail_of(exc))
        return sc.finish(outcome, self._tell)

    @property
    def remote(self) -> RemoteNodesets | None:
        """Where this runner's server-mode nodesets live (None when every nodeset is local)."""
        return self._remote

    @property
    def steps_taken(self) -> int:
        """The env steps of the current (or last) execution."""
        return self._sc.steps

    def signal(self, signal: Signal | str) -> None:
        """Deliver a lifecycle signal from its owner (`episode_reset` from an env panel) between executions; raises
        `SignalFailed` if a node fails on it."""
        try:
            self._sc.signal(Signal(signal))
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
        sc = self._sc
        i = 0
        while i < self.max_steps:
            if gate is not None:
                gate(i)
            run.step = i
            if listens or bus.active:  # as in the Kernel: a step signal nobody hears is not sent
                sc.scope = f"{loop_in_id}:{i}"
                sc.signal(Signal.STEP_START)
            else:
                sc.step_open = True
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
                sc.signal(Signal.STEP_END)
            else:
                sc.step_open = False
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

    def _actuate(self, live: LiveNode, args: dict[str, Any]) -> None:
        """Serve the step node one action from the chunk executor, reviewed by the shield; account for the step."""
        sc = self._sc
        executor = sc.executor
        fresh = args.pop("action", None)
        if fresh is not None:
            sc.load(sc.chunk_of(fresh, f"{live.label} got"), self._latency, sc.steps)
        if executor.empty:
            raise EndEpisode(sc.ended(EpisodeStatus.ERROR, f"{live.label} got no action: its 'action' input is "
                                      "unfilled and the chunk executor is empty"))  # fmt: skip
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
        if self._after_step:
            step = getattr(live.node, "last_result", None)  # the env's own result, observation included
            if not isinstance(step, StepResult):
                step = StepResult(EMPTY_INFO, reward, terminated, truncated, success, info)
            for other in self._after_step:
                self._call(other, other.node.after_step, step)

    # -- signals, verdicts ----------------------------------------------------------------------------------------

    def _deliver(self, signal: Signal) -> None:
        self.containers.on_signal(signal)
        for live in self._signals:
            self._call(live, live.node.on_signal, signal)

    def _tell(self, outcome: EpisodeOutcome) -> EpisodeOutcome:
        for live in self._finishes:
            try:
                live.node.finish(outcome)
            except FAULTS as exc:
                outcome = noted(outcome, f"{live.label} on finish: {raised('finish', exc)}")
        return outcome

    def _verdict(self, stopped: bool) -> EpisodeOutcome:
        last = self._last
        metrics: dict[str, Any] = {}
        success = bool(last.get("success"))
        if self._evaluate is not None:
            judged = self._outs.get(self._evaluate.id)
            if judged is None:
                unfired = f"{self._evaluate.label} did not fire: a required input of it got no value"
                return self._sc.ended(EpisodeStatus.ERROR, unfired)
            metrics = dict(judged.get("metrics") or {})
            if success and not judged.get("success"):  # a judge may deny the env's success, never invent one
                return self._sc.ended(EpisodeStatus.FAILURE, "judged unsuccessful", metrics=metrics)
        if success:
            return self._sc.ended(EpisodeStatus.SUCCESS, "success", metrics=metrics)
        if last.get("terminated"):
            reason = "terminated"
        elif last.get("truncated"):
            reason = "truncated"
        elif stopped:
            reason = "stopped"
        else:
            reason = "max_steps"
        return self._sc.ended(EpisodeStatus.FAILURE, reason, metrics=metrics)
