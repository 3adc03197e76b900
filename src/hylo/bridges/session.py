"""A served session: one connection's episodes, driven by an external harness.

The harness owns the loop; the session owns what hylo guarantees around the agent — the ChunkExecutor (an agent is
asked again only when its chunk is used up), the SafetyShield (every action reviewed), the trace (observations,
chunks, reviews and actions on an `EventBus` in `served` mode) and an honest record of every episode in the run's
EvalLog. It knows nothing of WebSockets: the bridge feeds it decoded messages.

What the harness does not say is recorded as it happened: an episode abandoned by a new EPISODE_START, or by a
dropped connection, is `infra_invalid` with the reason; an agent that raises is `error`; only EPISODE_END's
`metrics.success` makes an episode `success` or `failure`.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import gymnasium.spaces as spaces
import numpy as np

from hylo.agents.vlaeval_protocol import EncodedImage, ProtocolError, UndecodedImage, wire_action
from hylo.bridges.served_run import SERVED_BENCHMARK, SERVED_SPLIT, ServedRun
from hylo.core.agent import agent_name, gets_images
from hylo.core.bus import EventBus
from hylo.core.context import EpisodeContext
from hylo.core.episode import EndEpisode, raised
from hylo.core.errors import HyloError, InvalidAction
from hylo.core.events import ObservationEvent, StepResultEvent
from hylo.core.jsonable import jsonable
from hylo.core.scaffold import EpisodeScaffold
from hylo.core.shield import SafetyShield
from hylo.core.status import EpisodeOutcome, EpisodeStatus
from hylo.core.types import EnvSpec, Observation, TaskInstance, derive_seed
from hylo.evallog.recording import TraceBuffer, serialize
from hylo.evallog.store import EpisodeRow

log = logging.getLogger(__name__)

_UNKNOWN_SPACE: spaces.Space[Any] = spaces.Box(-np.inf, np.inf, shape=(0,))
_INT64_LIMIT = 2**63
"""Seeds and indices are stored as SQLite integers (signed 64-bit); a harness's value past that is not used as is."""


class EpisodeRefused(HyloError):
    """The session cannot answer this observation with an action; the message is what the harness is told."""


def _storable(value: Any) -> bool:
    """Whether `value` is an int hylo can store as a seed or an index (0 <= value < 2**63)."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool) and 0 <= int(value) < _INT64_LIMIT


def harness_task(payload: Mapping[str, Any]) -> tuple[str, int, Any]:
    """(task name, episode index, the raw task) from an EPISODE_START payload, whatever type its `task` is. An index
    that is not an int in [0, 2**63) is 0 (the raw task, kept in the trace, still has it)."""
    task = payload.get("task")
    if isinstance(task, Mapping):
        name = task.get("name") or task.get("suite") or "task"
        index = task.get("episode_idx", task.get("episode_id", 0))
    else:
        name, index = ("task" if task is None else task), 0
    name = " ".join(str(name).split()).replace("/", "_")[:120] or "task"
    return name, int(index) if _storable(index) else 0, task


def wants_images(agent: Any) -> bool:
    """Whether the agent gets the observation's images: as in driven mode (`hylo.core.agent.gets_images`), one that
    declares `needs_images=False` gets none; one that declares nothing, or `needs_images=True`, gets them."""
    return gets_images(agent)


def to_observation(
    payload: Mapping[str, Any], instruction: str | None, *, images: bool = True
) -> tuple[Observation, dict[str, Any]]:
    """vla-eval's observation (`images`, `state`, `task_description`, ...) under hylo's canonical keys (`images`,
    `state`, `instruction`); every other key is kept as it came. Returns it with its trace summary, in which an image
    is named by its digest (`encoding`, `digest`, `shape`, `dtype`; the digest of its encoded bytes when it arrived
    compressed). With `images=False` (the agent declared `needs_images=False`) the observation has no `images`, as in
    driven mode, where such an agent's env renders none: they are only traced."""
    obs = Observation(payload)
    description = obs.pop("task_description", None)
    if description is not None:
        obs["instruction"] = str(description)
    elif instruction is not None and "instruction" not in obs:
        obs["instruction"] = instruction
    if "images" not in obs:
        return obs, jsonable(obs)
    cameras = obs.pop("images")
    plain, shown = _cameras(cameras)
    summary = jsonable(obs)  # before the cameras go back in: they are traced by digest, not hashed again
    summary["images"] = shown
    if images and not (isinstance(cameras, Mapping) and not plain):
        obs["images"] = plain
    return obs, summary


def _cameras(value: Any) -> tuple[Any, Any]:
    """(what the agent gets, what the trace shows) for the value of an observation's `images`, at any depth."""
    if isinstance(value, UndecodedImage):
        return None, {"encoding": value.encoding, "digest": value.digest, "shape": list(value.shape), "dtype": "uint8"}
    if isinstance(value, EncodedImage):
        encoded = {
            "encoding": value.encoding,
            "digest": value.encoded_digest,
            "shape": list(value.shape),
            "dtype": str(value.dtype),
        }
        return value.view(np.ndarray), encoded
    if isinstance(value, np.ndarray):
        digest = hashlib.blake2b(np.ascontiguousarray(value).data, digest_size=12).hexdigest()
        return value, {"encoding": "raw", "digest": digest, "shape": list(value.shape), "dtype": str(value.dtype)}
    if isinstance(value, Mapping):
        plain: dict[Any, Any] = {}
        shown: dict[str, Any] = {}
        for name, item in value.items():
            plain[name], shown[str(name)] = _cameras(item)
        return plain, shown
    if isinstance(value, (list, tuple)):
        pairs = [_cameras(item) for item in value]
        return [p for p, _ in pairs], [s for _, s in pairs]
    return value, jsonable(value)


@dataclass(slots=True)
class _Episode:
    episode_id: str
    task: TaskInstance
    """The episode as placed (its id is the run's, `episode_id`: the harness may send one task and index twice)."""
    started_at: float
    outcome: EpisodeOutcome | None = None
    recorded: bool = False

    def row(self, outcome: EpisodeOutcome, ended: float, connection: str) -> EpisodeRow:
        """The EvalLog row of this episode ending with `outcome` (its metrics plus `wall_s`)."""
        metrics = {**outcome.metrics, "wall_s": round(ended - self.started_at, 6)}
        row = EpisodeRow.of(
            self.task, outcome, started_at=self.started_at, ended_at=ended, metrics=metrics, worker=connection
        )
        return replace(row, episode_id=self.episode_id)


class ServedSession:
    """The episodes of one connection, in order. Not thread-safe: its owner calls it one message at a time (only
    `abandon` may be called from another thread).

    - `start(payload)` begins an episode (an unfinished one is recorded `infra_invalid` first)
    - `act(observation)` returns the one action to send, or raises `EpisodeRefused` (the episode is then recorded)
    - `end(payload)` records the episode with EPISODE_END's `metrics.success`
    - `close(why)` records an unfinished episode `infra_invalid` (the connection dropped, the bridge stopped)
    - `fail(reason, detail)` records an unfinished episode `infra_invalid` after the bridge itself failed

    `action_space` bounds the shield; when None (the agent declares none and the operator gave none), it is made
    from the first action's shape with infinite bounds, so the shield rejects only non-finite actions.
    `images=False` keeps the observation's `images` from the agent: they are only traced. By default that is so for
    an agent that declares `needs_images=False` (`wants_images`).
    """

    def __init__(
        self,
        run: ServedRun,
        agent: Any,
        *,
        shield: SafetyShield,
        action_space: spaces.Space[Any] | None,
        connection: str,
        images: bool | None = None,
    ) -> None:
        self.run = run
        self.agent = agent
        self.agent_name = agent_name(agent)
        self.shield = shield
        self.connection = connection
        self.images = wants_images(agent) if images is None else images
        self._space = action_space
        if action_space is not None:
            shield.bind(action_space)
        self.bus = EventBus(run_id=run.run_id)
        self._trace = TraceBuffer()
        self.bus.subscribe(self._trace, critical=True)
        self._sc = _ServedScaffold(self.bus, shield, action_space, lifecycle=False)
        self._episode: _Episode | None = None
        self._claim = threading.Lock()  # whoever sets `recorded` first records the episode, exactly once

    @property
    def in_episode(self) -> bool:
        """Whether an episode is open and still waiting for its EPISODE_END."""
        return self._episode is not None and self._episode.outcome is None

    # -- the harness's messages ---------------------------------------------------------------------------------

    def start(self, payload: Mapping[str, Any]) -> None:
        """EPISODE_START: begin an episode; the agent hears `reset`. An agent that fails here ends the episode as
        `error`, and the harness learns it at the first observation."""
        self.close("a new EPISODE_START arrived before EPISODE_END (the harness abandoned the episode)")
        name, index, task = harness_task(payload)
        instruction = None
        if isinstance(task, Mapping):
            found = task.get("instruction") or task.get("task_description") or task.get("language")
            instruction = str(found) if found is not None else None
        seed_value = task.get("seed") if isinstance(task, Mapping) else None
        # a seed that does not fit (negative, past 2**63) is replaced; the raw task in the trace keeps it
        seed = (
            int(seed_value)
            if seed_value is not None and _storable(seed_value)
            else derive_seed(SERVED_BENCHMARK, name, index)
        )
        placed = TaskInstance(SERVED_BENCHMARK, name, index, SERVED_SPLIT, seed=seed, instruction=instruction)
        episode = _Episode(self.run.episode_id(name, index), placed, time.time())
        self._episode = episode
        harness = jsonable(task)
        try:
            self._sc.open(
                placed,
                agent=self.agent_name,
                timing="sync",
                episode_id=episode.episode_id,
                digest=hashlib.blake2b(repr((name, index, harness)).encode(), digest_size=8).hexdigest(),
                extra={"harness_task": harness, "connection": self.connection},
                mode="served",
            )
            space = self._space if self._space is not None else _UNKNOWN_SPACE
            ctx = EpisodeContext(
                seed=seed,
                env_spec=EnvSpec(spaces.Dict({}), space, name=f"{SERVED_BENCHMARK}:{name}"),
                task=placed,
                bus=self.bus,
            )
            self._sc.reset_agent(self.agent, ctx)
        except EndEpisode as end:  # the scaffold could not open it (nothing records it), or the agent failed
            self._conclude(end.outcome)

    def act(self, payload: Mapping[str, Any]) -> np.ndarray[Any, Any]:
        """OBSERVATION: the next action, reviewed by the shield, as the array an ACTION carries. The agent is asked
        only when the executor is empty. Raises `EpisodeRefused` when there is no episode to act in or it ended here
        (agent failure, an action that cannot be sent, shield abort)."""
        episode = self._episode
        if episode is None:
            raise EpisodeRefused("no episode in progress: send EPISODE_START before observations")
        if episode.outcome is not None:
            outcome = episode.outcome
            raise EpisodeRefused(
                f"episode {episode.episode_id} ended ({outcome.status.value}: {outcome.reason}); send EPISODE_START"
            )
        obs, summary = to_observation(payload, episode.task.instruction, images=self.images)
        sc = self._sc
        self.bus.emit_trusted(ObservationEvent, obs=summary)
        try:
            action = sc.next_action(self.agent.act, obs)
            try:
                wire_action(action)
            except ProtocolError as exc:
                hint = (
                    "; the bridge knows no action space: declare requirements.action_space or give --action-dim"
                    if self._space is None and np.size(action) == 0
                    else ""
                )
                reason = f"agent returned an action that cannot be sent: {exc}{hint}"
                raise EndEpisode(sc.error(reason)) from None
            if self._space is None:
                self._space = spaces.Box(-np.inf, np.inf, shape=np.shape(action), dtype=np.float64)
                self.shield.bind(self._space)
                sc.space = self._space
            sent: np.ndarray[Any, Any] = sc.review(action, send=_wire)
        except EndEpisode as end:
            self._conclude(end.outcome)
            raise EpisodeRefused(f"{end.outcome.status.value}: {end.outcome.reason}") from None
        sc.steps += 1
        return sent

    def end(self, payload: Mapping[str, Any]) -> None:
        """EPISODE_END `{"metrics": {"success": ...}, "steps", "elapsed_sec"}`: record the episode with the harness's
        verdict (`success` a bool, or 0 / 1). An episode that already ended here (error, safety abort) keeps its
        record."""
        episode = self._episode
        if episode is None or episode.outcome is not None:
            return
        metrics = payload.get("metrics")
        if not isinstance(metrics, Mapping) or "success" not in metrics:
            self._finish(EpisodeStatus.INFRA_INVALID, "EPISODE_END carried no metrics.success", harness=payload)
            return
        verdict = metrics["success"]
        if not isinstance(verdict, (bool, np.bool_, int, np.integer)) or verdict not in (0, 1):
            shown = repr(verdict)
            shown = shown if len(shown) <= 80 else shown[:77] + "..."
            self._finish(
                EpisodeStatus.INFRA_INVALID,
                f"EPISODE_END metrics.success must be true or false, got {shown}",
                harness=payload,
            )
            return
        success = bool(verdict)
        self.bus.emit_trusted(
            StepResultEvent,
            step=max(self._sc.steps - 1, 0),
            reward=0.0,
            terminated=True,
            truncated=False,
            success=success,
            info={"final": True, "harness": jsonable(dict(payload))},
        )
        metrics = _harness_metrics(payload)
        sc = self._sc
        self._conclude(
            sc.success(metrics=metrics) if success else sc.failure("harness reported failure", metrics=metrics)
        )

    def close(self, why: str) -> None:
        """Record an episode still waiting for its EPISODE_END as `infra_invalid`, reason `why`."""
        episode = self._episode
        if episode is not None and episode.outcome is None:
            self._finish(EpisodeStatus.INFRA_INVALID, f"{why}; {self._sc.steps} actions served")

    def fail(self, reason: str, detail: str | None = None) -> None:
        """Record an episode still open as `infra_invalid` after the bridge failed handling one of its messages."""
        self._finish(EpisodeStatus.INFRA_INVALID, reason, detail)

    def abandon(self, why: str) -> None:
        """From another thread, while the owner is stuck in the agent (the bridge is stopping): record the open
        episode `infra_invalid` from what is known of it, without its trace; the owner records nothing more."""
        episode = self._episode
        if episode is None or not self._take(episode):
            return
        steps = self._sc.steps
        unrecorded = "the agent was still acting; the episode's trace was not recorded"
        outcome = self._sc.ended(EpisodeStatus.INFRA_INVALID, f"{why}; {steps} actions served", unrecorded)
        self._record(episode.row(outcome, time.time(), self.connection), [])

    # -- endings ------------------------------------------------------------------------------------------------

    def _take(self, episode: _Episode) -> bool:
        with self._claim:
            if episode.recorded:
                return False
            episode.recorded = True
            return True

    def _finish(
        self, status: EpisodeStatus, reason: str, detail: str | None = None, harness: Mapping[str, Any] | None = None
    ) -> None:
        metrics = _harness_metrics(harness) if harness is not None else None
        self._conclude(self._sc.ended(status, reason, detail, metrics=metrics))

    def _conclude(self, outcome: EpisodeOutcome) -> None:
        """End the open episode with `outcome`: trace its end, tell the agent, record it (once)."""
        episode = self._episode
        if episode is None or episode.outcome is not None:
            return
        episode.outcome = outcome
        if episode.recorded:  # abandoned while the agent acted: recorded already
            self._trace.take()
            return
        final = self._sc.finish(outcome, self._tell)
        row = episode.row(final, time.time(), self.connection)
        trace = self._trace.take()
        if self._take(episode):
            self._record(row, serialize(trace))

    def _tell(self, outcome: EpisodeOutcome) -> EpisodeOutcome:
        return self._sc.tell_agent(self.agent, outcome)

    def _record(self, row: EpisodeRow, trace: list[bytes]) -> None:
        """Commit the episode; when that fails, commit it again without its trace or the harness's metrics, the
        failure in `detail`, so the episode is never lost."""
        try:
            self.run.record(row, trace)
            return
        except Exception as exc:
            failure = raised("recording the episode", exc)
        log.warning("%s: %s; recording %s without its trace", self.connection, failure, row.episode_id)
        fallback = replace(
            row,
            reason=_storable_text(row.reason),
            metrics={"actions_served": row.steps, "wall_s": row.metrics.get("wall_s", 0.0)},
            detail=_storable_text(_joined(row.detail, f"{failure}; the trace and the harness's metrics were dropped")),
        )
        try:
            self.run.record(fallback, [])
        except Exception as exc:
            log.error(
                "%s: episode %s could not be recorded: %s",
                self.connection,
                row.episode_id,
                f"{type(exc).__name__}: {exc}",
            )


def _harness_metrics(payload: Mapping[str, Any]) -> dict[str, Any]:
    """What an outcome carries of the harness's EPISODE_END: its `metrics`, and its `steps` and `elapsed_sec`."""
    metrics: dict[str, Any] = {}
    reported = payload.get("metrics")
    if isinstance(reported, Mapping):
        metrics.update(jsonable(dict(reported)))
    for key in ("steps", "elapsed_sec"):
        if key in payload:
            metrics[f"harness_{key}"] = jsonable(payload[key])
    return metrics


def _storable_text(text: str) -> str:
    """`text` with what UTF-8 cannot encode (a lone surrogate in an exception's message) escaped."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _joined(detail: str | None, more: str) -> str:
    return f"{detail}\n{more}" if detail else more


def _wire(action: Any) -> np.ndarray[Any, Any]:
    """The reviewed action as the array an ACTION carries; one that cannot be sent is malformed."""
    try:
        return wire_action(action)
    except ProtocolError as exc:
        raise InvalidAction(str(exc)) from None


class _ServedScaffold(EpisodeScaffold):
    """A served episode's outcomes count the actions served (the harness, not hylo, steps the env)."""

    __slots__ = ()

    def tally(self) -> dict[str, Any]:
        return {"actions_served": self.steps}
