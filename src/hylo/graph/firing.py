"""How a graph's nodes fire: a band's levels in order, the nodes of one level concurrently when some are coroutines or
live in a server-mode nodeset, a node's result checked against its declared outputs, and a node's failure turned
into the episode's status (an env node's crash is `infra_invalid`, any other node's `error`).

`NodeFiring` is the part of the `GraphRunner` (graph/executor.py) that fires nodes; the runner supplies the loop,
the step node (`_actuate`) and the episode's scaffold.
"""

from __future__ import annotations

import abc
import asyncio
import inspect
import logging
import time
from collections.abc import Callable
from typing import Any

from hylo.core.episode import FAULTS, EndEpisode, detail_of, raised
from hylo.core.errors import AgentTimeout, InvalidAction, OverLimit, SimulationDiverged
from hylo.core.loops import run_to_end
from hylo.core.scaffold import EpisodeScaffold
from hylo.core.status import EpisodeOutcome, EpisodeStatus
from hylo.graph.compile import PlannedNode
from hylo.graph.faults import NodesetCrashed
from hylo.graph.node import Node, NodeFailure, Owner, Role
from hylo.graph.watch import NodeWatch

log = logging.getLogger(__name__)


class LiveNode:
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


class NodeFiring(abc.ABC):
    """Fires the nodes of a graph's bands into `_outs` (node id → its outputs of this iteration)."""

    _sc: EpisodeScaffold
    _outs: dict[str, dict[str, Any]]
    _last: dict[str, Any]
    _latency: float
    _loop: asyncio.AbstractEventLoop | None
    _watch: NodeWatch | None
    observer: Callable[[Any], None] | None

    @abc.abstractmethod
    def _actuate(self, live: LiveNode, args: dict[str, Any]) -> None:
        """Fire the step node (the runner's own: it serves the action through the chunk executor and the shield)."""

    def _fire_level(self, level: tuple[LiveNode, ...]) -> None:
        if len(level) > 1 and any(lv.is_async or lv.overlapped for lv in level):
            self._fire_concurrently(level)
            return
        for live in level:
            args = self._inputs(live)
            if args is not None:
                self._fire(live, args)

    def _inputs(self, live: LiveNode) -> dict[str, Any] | None:
        """The node's input values, or None when it does not fire in this iteration (a required input's source did
        not fire, or it is the policy and the chunk executor still holds actions)."""
        role = live.role
        if role is Role.POLICY and not self._sc.executor.empty:
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

    def _fire(self, live: LiveNode, args: dict[str, Any]) -> None:
        try:
            if live.role is Role.ACTUATOR:
                self._actuate(live, args)
                return
            t0 = time.perf_counter()
            self._accept(live, self._forward(live, args), time.perf_counter() - t0)
        except EndEpisode:
            self._mark_failed(live)
            raise

    def _mark_failed(self, live: LiveNode) -> None:
        """Show `live` as the node whose failure ended the execution (when the execution is watched)."""
        if self._watch is not None:
            self._watch.failed(live.id)

    def _forward(self, live: LiveNode, args: dict[str, Any]) -> Any:
        """The node's raw result (its failure ends the episode)."""
        try:
            result = live.node.forward(args)
            if live.is_async:
                result = run_to_end(self._event_loop(), result)  # type: ignore[arg-type]
        except FAULTS as exc:
            raise EndEpisode(self._node_failed(live, exc)) from None
        return result

    def _fire_concurrently(self, level: tuple[LiveNode, ...]) -> None:
        """Fire a level whose nodes do not depend on each other: the server-mode nodes' requests go out first, the
        sync nodes run, the async ones are gathered, then the server-mode replies are read (always, so that no
        reply is left behind when a node of the level fails). The first failure, in level order, ends the episode."""
        firing = _LevelFiring(level, [(lv, args) for lv in level for args in (self._inputs(lv),) if args is not None])
        t0 = time.perf_counter()
        begun = firing.begin()
        try:
            if not firing.failures:
                for live, args in firing.inline:
                    self._fire(live, args)
                if firing.gathered:
                    firing.collect(run_to_end(self._event_loop(), firing.gather()))
        except EndEpisode as end:
            firing.ended = end.outcome
        finally:
            firing.end(begun)
        failed = firing.first_failure()
        if failed is not None:
            raise EndEpisode(self._node_failed(*failed))
        if firing.ended is not None:
            raise EndEpisode(firing.ended)
        elapsed = time.perf_counter() - t0
        for live in level:
            if live.id in firing.results:
                try:
                    self._accept(live, firing.results[live.id], elapsed)
                except EndEpisode:
                    self._mark_failed(live)
                    raise

    def _accept(self, live: LiveNode, result: Any, elapsed: float) -> dict[str, Any]:
        """Check a node's result against its declared outputs and publish it."""
        if type(result) is not dict:
            if not isinstance(result, dict):
                message = f"{live.label} returned a {type(result).__name__}, not a dict of its outputs"
                raise EndEpisode(self._sc.error(f"{message} {sorted(live.allowed)}"))
            result = dict(result)
        if not live.allowed.issuperset(result):
            extra = sorted(set(result) - live.allowed)
            message = f"{live.label} returned undeclared outputs {extra}; it declares {sorted(live.allowed)}"
            if "error" in extra:
                message += f" (its 'error': {str(result['error'])[:300]})"
            raise EndEpisode(self._sc.error(message))
        if not live.required_out.issubset(result):
            missing = sorted(live.required_out - set(result))
            message = f"{live.label} did not return its required outputs {missing}; it returned {sorted(result)}"
            raise EndEpisode(self._sc.error(message))
        role = live.role
        if role is Role.POLICY:
            self._latency = elapsed
            self._sc.check_latency(elapsed)
        elif role is not Role.PLAIN and "observation" in result:
            self._sc.observed(result["observation"], bool(self._last.get("done")))
            if self.observer is not None:
                try:
                    self.observer(result["observation"])
                except Exception as exc:  # a view of the execution, never its end
                    log.warning("observer %r raised %r; detached", self.observer, exc)
                    self.observer = None
        outputs: dict[str, Any] = result
        self._outs[live.id] = outputs
        if self._watch is not None:
            self._watch.fired(live.id, outputs)
        return outputs

    def _event_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
        return self._loop

    def _call(self, live: LiveNode, hook: Callable[[Any], Any], arg: Any) -> None:
        try:
            hook(arg)
        except FAULTS as exc:
            raise EndEpisode(self._node_failed(live, exc)) from None

    def _node_failed(self, live: LiveNode, exc: BaseException) -> EpisodeOutcome:
        """How a node's failure ends the episode: a crashed nodeset is its owner's fault, a harness limit has its own
        status, an env node's crash is `infra_invalid` (unless it rejected the agent's action), any other `error`."""
        self._mark_failed(live)
        sc = self._sc
        if isinstance(exc, NodesetCrashed):
            status = EpisodeStatus.INFRA_INVALID if exc.owner is Owner.ENV else EpisodeStatus.ERROR
            return sc.ended(status, f"{live.label}: {exc}", detail_of(exc))
        if isinstance(exc, OverLimit):  # the harness's limits, whichever node's env call found them passed
            return sc.over_limit(exc)
        if isinstance(exc, AgentTimeout):
            return sc.error("timeout", f"{live.label}: {exc}")
        if isinstance(exc, NodeFailure):
            return sc.error(f"{live.label}: {exc}", detail_of(exc))
        if live.planned.cls.owner is not Owner.ENV:
            return sc.error(raised(live.label, exc), detail_of(exc))
        if isinstance(exc, InvalidAction):
            return sc.error(f"{live.label} rejected the agent's action: {exc}", detail_of(exc))
        if isinstance(exc, SimulationDiverged):
            return sc.infra_invalid(f"{live.label}: {exc}", detail_of(exc))
        return sc.infra_invalid(raised(live.label, exc), detail_of(exc))


class _LevelFiring:
    """One concurrent firing of a level's ready nodes (with their inputs), split by how each runs: `remote` (a
    server-mode node: its request goes out with `begin`, its reply comes back with `end`), `gathered` (a coroutine
    node, awaited together with the others) and `inline` (the rest, the step node included, run one by one). Keeps
    each node's result, or its first failure, and how an inline node ended the episode (`ended`)."""

    __slots__ = ("ended", "failures", "gathered", "inline", "level", "remote", "results")

    def __init__(self, level: tuple[LiveNode, ...], ready: list[tuple[LiveNode, dict[str, Any]]]) -> None:
        self.level = level
        self.remote: list[tuple[LiveNode, dict[str, Any]]] = []
        self.gathered: list[tuple[LiveNode, dict[str, Any]]] = []
        self.inline: list[tuple[LiveNode, dict[str, Any]]] = []
        for live, args in ready:
            if live.role is Role.ACTUATOR or not (live.overlapped or live.is_async):
                self.inline.append((live, args))
            elif live.overlapped:
                self.remote.append((live, args))
            else:
                self.gathered.append((live, args))
        self.failures: dict[str, BaseException] = {}
        self.results: dict[str, Any] = {}
        self.ended: EpisodeOutcome | None = None

    def begin(self) -> list[LiveNode]:
        """Send the server-mode nodes' requests, up to the first that fails; returns those sent."""
        begun: list[LiveNode] = []
        for live, args in self.remote:
            try:
                live.node.begin(args)  # type: ignore[attr-defined]
            except FAULTS as exc:
                self.failures[live.id] = exc
                break
            begun.append(live)
        return begun

    async def gather(self) -> list[Any]:
        """The coroutine nodes' results (or what each raised), awaited together."""
        calls = [live.node.forward(args) for live, args in self.gathered]
        return await asyncio.gather(*calls, return_exceptions=True)  # type: ignore[arg-type]

    def collect(self, gathered: list[Any]) -> None:
        for (live, _), result in zip(self.gathered, gathered, strict=True):
            if isinstance(result, BaseException):
                self.failures.setdefault(live.id, result)
            else:
                self.results[live.id] = result

    def end(self, begun: list[LiveNode]) -> None:
        """Read the replies of the requests sent."""
        for live in begun:
            try:
                self.results[live.id] = live.node.end()  # type: ignore[attr-defined]
            except FAULTS as exc:
                self.failures.setdefault(live.id, exc)

    def first_failure(self) -> tuple[LiveNode, BaseException] | None:
        """The first node of the level, in level order, that failed, and how."""
        return next(((live, self.failures[live.id]) for live in self.level if live.id in self.failures), None)
