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
        role = live.role
        if role is Role.ACTUATOR:
            self._actuate(live, args)
            return
        t0 = time.perf_counter()
        self._accept(live, self._forward(live, args), time.perf_counter() - t0)

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
        ready = [(lv, args) for lv in level for args in (self._inputs(lv),) if args is not None]
        apart = [(lv, args) for lv, args in ready if lv.planned.role is not Role.ACTUATOR]
        remote = [(lv, args) for lv, args in apart if lv.overlapped]
        gathered = [(lv, args) for lv, args in apart if lv.is_async and not lv.overlapped]
        inline = [(lv, args) for lv, args in ready if (lv, args) not in remote and (lv, args) not in gathered]
        t0 = time.perf_counter()
        failures: dict[str, BaseException] = {}
        ended: EpisodeOutcome | None = None  # how a sync node of the level ended the episode
        begun: list[LiveNode] = []
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

                    for (live, _), result in zip(gathered, run_to_end(self._event_loop(), gather()), strict=True):
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

    def _accept(self, live: LiveNode, result: Any, elapsed: float) -> dict[str, Any]:
        """Check a node's result against its declared outputs and publish it."""
        if type(result) is not dict:
            if not isinstance(result, dict):
                message = f"{live.label} returned a {type(result).__name__}, not a dict of its outputs"
                raise EndEpisode(self._sc.ended(EpisodeStatus.ERROR, f"{message} {sorted(live.allowed)}"))
            result = dict(result)
        if not live.allowed.issuperset(result):
            extra = sorted(set(result) - live.allowed)
            message = f"{live.label} returned undeclared outputs {extra}; it declares {sorted(live.allowed)}"
            if "error" in extra:
                message += f" (its 'error': {str(result['error'])[:300]})"
            raise EndEpisode(self._sc.ended(EpisodeStatus.ERROR, message))
        if not live.required_out.issubset(result):
            missing = sorted(live.required_out - set(result))
            message = f"{live.label} did not return its required outputs {missing}; it returned {sorted(result)}"
            raise EndEpisode(self._sc.ended(EpisodeStatus.ERROR, message))
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
        if isinstance(exc, NodesetCrashed):
            status = EpisodeStatus.INFRA_INVALID if exc.owner is Owner.ENV else EpisodeStatus.ERROR
            return self._sc.ended(status, f"{live.label}: {exc}", detail_of(exc))
        if isinstance(exc, OverLimit):  # the harness's limits, whichever node's env call found them passed
            return self._sc.over_limit(exc)
        if isinstance(exc, AgentTimeout):
            return self._sc.ended(EpisodeStatus.ERROR, "timeout", f"{live.label}: {exc}")
        if isinstance(exc, NodeFailure):
            return self._sc.ended(EpisodeStatus.ERROR, f"{live.label}: {exc}", detail_of(exc))
        if live.planned.cls.owner is Owner.ENV:
            if isinstance(exc, InvalidAction):
                reason = f"{live.label} rejected the agent's action: {exc}"
                return self._sc.ended(EpisodeStatus.ERROR, reason, detail_of(exc))
            if isinstance(exc, SimulationDiverged):
                return self._sc.ended(EpisodeStatus.INFRA_INVALID, f"{live.label}: {exc}", detail_of(exc))
            return self._sc.ended(EpisodeStatus.INFRA_INVALID, raised(live.label, exc), detail_of(exc))
        return self._sc.ended(EpisodeStatus.ERROR, raised(live.label, exc), detail_of(exc))
