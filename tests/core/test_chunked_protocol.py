"""The chunked-execution protocol (RealtimeTiming(schedule="chunked")): cadence, stale dropping, latency models,
the ensemble strategy and the horizon rule, checked action by action on an env that records what it executed."""

from __future__ import annotations

import itertools
import math
from typing import Any

import gymnasium.spaces as spaces
import numpy as np
import pytest

from hylo.core import (
    ActionChunk,
    EnvCapabilities,
    Environment,
    EnvSpec,
    EpisodeStatus,
    EventBus,
    Kernel,
    MemoryRecorder,
    Observation,
    RealtimeTiming,
    StepResult,
    TaskInstance,
)
from hylo.core.latency import EmpiricalLatency, LognormalLatency, episode_rng, parse_latency_model
from hylo.core.timing import check_horizon

HOLD = (-1.0, -1.0)
DT = 0.1


class Clock(Environment):
    """Observes the step count t; executes 2-D actions and records them; holds with (-1, -1)."""

    def __init__(self, max_episode_steps: int = 40) -> None:
        self._spec = EnvSpec(
            observation_space=spaces.Dict({"t": spaces.Box(0.0, 1e6, (1,), np.float64)}),
            action_space=spaces.Box(-1e6, 1e6, (2,), np.float64),
            control_rate_hz=1 / DT,
            max_episode_steps=max_episode_steps,
            name="clock",
        )
        self.t = 0
        self.executed: list[tuple[float, float]] = []

    @property
    def spec(self) -> EnvSpec:
        return self._spec

    @property
    def capabilities(self) -> EnvCapabilities:
        return EnvCapabilities(hold_action=True)

    def reset(self, task: TaskInstance) -> Observation:
        self.t, self.executed = 0, []
        return Observation(t=np.array([0.0]))

    def step(self, action: Any) -> StepResult:
        a = np.asarray(action, dtype=np.float64)
        self.executed.append((float(a[0]), float(a[1])))
        self.t += 1
        return StepResult(Observation(t=np.array([float(self.t)])))

    def observe(self) -> Observation:
        return Observation(t=np.array([float(self.t)]))

    def hold_action(self) -> Any:
        return np.array(HOLD)


class Planner:
    """A chunk of H actions asked at step r plans (r, r + i) for step r + i: each executed action says when it was
    planned and for which step."""

    def __init__(self, chunk_size: int = 8, execution_steps: int | None = None, declare: bool = True) -> None:
        if declare:
            self.chunk_size = chunk_size
        self.size = chunk_size
        self.execution_steps = execution_steps

    def act(self, obs: Observation) -> ActionChunk:
        r = float(obs["t"][0])
        return ActionChunk([np.array([r, r + i]) for i in range(self.size)], self.execution_steps)


def run(agent: Any, timing: RealtimeTiming, seed: int = 0, steps: int = 40) -> tuple[Any, Clock, MemoryRecorder]:
    env = Clock(steps)
    bus = EventBus(run_id="chunked")
    recorder = MemoryRecorder()
    bus.subscribe(recorder)
    with Kernel(env, agent, timing=timing, bus=bus) as kernel:
        outcome = kernel.run(TaskInstance("clock", "count", seed=seed))
    return outcome, env, recorder


def chunked(**options: Any) -> RealtimeTiming:
    return RealtimeTiming(schedule="chunked", **options)


@pytest.mark.parametrize(("h", "d", "s"), [(8, 0, 1), (8, 0, 8), (8, 1, 1), (8, 2, 2), (8, 2, 6), (8, 3, 5), (8, 4, 4)])
def test_every_step_executes_the_latest_merged_chunk_at_its_own_time(h: int, d: int, s: int) -> None:
    outcome, env, recorder = run(Planner(h), chunked(latency_steps=d, execution_steps=s))
    assert outcome.status is EpisodeStatus.FAILURE and outcome.reason == "max_steps"
    assert env.executed[:d] == [HOLD] * d  # the first chunk has no plan to run beside it
    for k in range(d, 40):
        asked = (k - d) // s * s  # the last request merged by step k: requests go out every s steps
        assert env.executed[k] == (asked, k), f"step {k}"  # never stale: the action planned for step k
    chunks = recorder.of("agent.chunk")
    assert [e.requested_at for e in chunks] == list(range(0, 40 - d, s))
    assert {e.delay_steps for e in chunks} == {d} and {e.dropped for e in chunks} == {d}
    assert [e.virtual_latency_s for e in chunks] == pytest.approx([d * DT] * len(chunks))
    realtime = outcome.metrics["realtime"]
    assert realtime["chunks"] == math.ceil(40 / s) and realtime["holds"] == d
    assert (realtime["executed"], realtime["dropped"], realtime["steps"]) == (40 - d, d * len(chunks), 40)
    assert realtime["delay_steps"] == [d] * len(chunks)


def test_the_horizon_defaults_to_each_chunks_own_execution_steps() -> None:
    _, env, recorder = run(Planner(8, execution_steps=3), chunked(latency_steps=2))
    assert [e.requested_at for e in recorder.of("agent.chunk")][:4] == [0, 3, 6, 9]
    assert env.executed[7] == (3.0, 7.0)


def test_the_horizon_rule_is_refused_before_any_episode() -> None:
    with pytest.raises(ValueError, match=r"s=1 with latency d=2 .*max\(1, d\) <= s <= H - d"):
        chunked(latency_steps=2, execution_steps=1)
    with pytest.raises(ValueError, match=r"s=7 with latency d=2 .*\(H=8\)"):
        run(Planner(8), chunked(latency_steps=2, execution_steps=7))  # the agent declares H
    with pytest.raises(ValueError, match=r"s=2 with latency d=3"):  # 0.25 s at 10 Hz is 3 steps
        run(Planner(8), chunked(latency_s=0.25, execution_steps=2))
    with pytest.raises(ValueError, match="no refill_steps and no adaptive_refill"):
        chunked(refill_steps=2)
    with pytest.raises(ValueError, match="add schedule='chunked'"):
        RealtimeTiming(execution_steps=2)
    check_horizon(8, 0, 8)
    check_horizon(8, 4, 4)


def test_a_chunk_too_short_for_the_horizon_ends_its_episode_as_error() -> None:
    outcome, _, _ = run(Planner(4, declare=False), chunked(latency_steps=2, execution_steps=3))
    assert outcome.status is EpisodeStatus.ERROR
    assert "breaks the protocol" in outcome.reason and "(H=4)" in outcome.reason


def test_the_naive_strategy_is_what_the_refill_schedule_gave_for_the_full_chunk() -> None:
    """With s = H - d the protocol is the refill schedule with the whole chunk, no refill lead and no adaptation."""
    _, ours, _ = run(Planner(8), chunked(latency_steps=2, execution_steps=6))
    _, refill, _ = run(Planner(8), RealtimeTiming(latency_steps=2, refill_steps=2, adaptive_refill=False))
    assert ours.executed == refill.executed


def test_the_ensemble_averages_every_prediction_for_a_step_oldest_weighted_most() -> None:
    d, s, h, m = 1, 2, 6, 0.5
    _, env, _ = run(Planner(h), chunked(latency_steps=d, execution_steps=s, strategy="ensemble", ensemble_m=m))
    for k in range(d, 40):
        planned = [r for r in range(0, k - d + 1, s) if k - r < h]  # chunks merged by k that cover step k
        weights = np.exp(-m * np.arange(len(planned)))
        assert env.executed[k][0] == pytest.approx(float(np.dot(weights / weights.sum(), planned))), f"step {k}"
        assert env.executed[k][1] == pytest.approx(k)  # every prediction is for step k
    _, naive, _ = run(Planner(h), chunked(latency_steps=d, execution_steps=s))
    assert naive.executed != env.executed


def test_the_ensemble_refuses_actions_it_cannot_average() -> None:
    class Words:
        chunk_size = 4

        def act(self, obs: Observation) -> ActionChunk:
            return ActionChunk([{"say": "hi"}] * 4)

    outcome, _, _ = run(Words(), chunked(latency_steps=0, execution_steps=2, strategy="ensemble"))
    assert outcome.status is EpisodeStatus.ERROR and "averages array actions" in outcome.reason


def test_a_lognormal_latency_repeats_per_seed_and_differs_between_seeds() -> None:
    timing = chunked(latency_model={"kind": "lognormal", "median_s": 0.2, "sigma": 0.6}, execution_steps=2)
    first, env_a, rec_a = run(Planner(8), timing, seed=5)
    again, env_b, _ = run(Planner(8), timing, seed=5)
    other, _, _ = run(Planner(8), timing, seed=6)
    assert env_a.executed == env_b.executed
    charged = first.metrics["realtime"]["virtual_latency_s"]
    assert charged == again.metrics["realtime"]["virtual_latency_s"] != other.metrics["realtime"]["virtual_latency_s"]
    assert [e.virtual_latency_s for e in rec_a.of("agent.chunk")] == charged
    assert first.metrics["realtime"]["delay_steps"] == [math.ceil(c / DT - 1e-9) for c in charged]
    assert len(set(charged)) > 3  # jitter, not a constant
    asked = [e.requested_at for e in rec_a.of("agent.chunk")]
    assert all(b - a >= 2 for a, b in itertools.pairwise(asked))  # one request in flight at most


def test_a_latency_beyond_the_horizon_delays_the_next_request_and_may_hold() -> None:
    # one call in four takes 0.45 s (5 steps at 10 Hz), beyond s = 2: the next request waits, the plan may run dry
    samples = {"kind": "empirical", "samples_s": [0.1, 0.1, 0.1, 0.45]}
    outcome, env, recorder = run(Planner(6), chunked(latency_model=samples, execution_steps=2), seed=2, steps=60)
    chunks = recorder.of("agent.chunk")
    delays = [e.delay_steps for e in chunks]
    assert 5 in delays[1:] and set(delays) == {1, 5}
    asked = [e.requested_at for e in chunks]
    assert [b - a for a, b in itertools.pairwise(asked)] == [max(2, d) for d in delays[:-1]]
    slow = delays[1:].count(5)
    assert outcome.metrics["realtime"]["holds"] >= delays[0] + slow  # each slow call outlasts the 4 steps left
    for k, (planned, target) in enumerate(env.executed):
        assert (planned, target) == HOLD or target == k  # a held step, or the action planned for this very step


def test_latency_models_parse_and_draw_from_their_own_stream() -> None:
    model = parse_latency_model({"kind": "empirical", "samples_s": [0.01, 0.02, 0.03]})
    assert isinstance(model, EmpiricalLatency)
    rng = episode_rng(3)
    assert {model.draw(rng, 0.01)[0] for _ in range(50)} == {0.01, 0.02, 0.03}
    lognormal = parse_latency_model({"kind": "lognormal", "median_s": 0.05, "sigma": 0.3})
    assert isinstance(lognormal, LognormalLatency) and lognormal.nominal_steps(0.0125) == 4
    draws = [lognormal.draw(episode_rng(1), 0.0125)[0] for _ in range(3)]
    assert draws[0] == draws[1] == draws[2]  # the same episode seed, the same first draw
    for bad, message in [
        ({"kind": "gamma"}, "unknown latency model kind 'gamma'"),
        ({"kind": "lognormal", "median_s": 0.05}, r"missing \['sigma'\]"),
        ({"kind": "lognormal", "median_s": -1, "sigma": 0.1}, "median_s must be a finite number"),
        ({"kind": "empirical", "samples_s": []}, "1 to 100,000 samples, got 0"),
        ({"kind": "empirical", "samples_s": [0.1, float("nan")]}, "a latency sample must be a finite number"),
        ([0.1], "an object with a 'kind'"),
    ]:
        with pytest.raises(ValueError, match=message):
            parse_latency_model(bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"give one latency, got \['latency_s', 'latency_steps'\]"):
        chunked(latency_s=0.1, latency_steps=1)
    with pytest.raises(ValueError, match="the wall clock measures it"):
        chunked(clock="wall", latency_steps=1)


class OutOfBounds(Planner):
    """Plans as Planner does, but the action at chunk index `bad` is out of the action space: the shield clips it."""

    def __init__(self, bad: int, **args: Any) -> None:
        super().__init__(**args)
        self.bad = bad

    def act(self, obs: Observation) -> ActionChunk:
        actions = [np.array(a) for a in super().act(obs).actions]
        actions[self.bad] = np.array([2e6, 2e6])
        return ActionChunk(actions, self.execution_steps)


def test_a_plan_the_shield_dropped_is_asked_for_again_at_once() -> None:
    # H = 8, d = 2, s = 4: index 2 of every chunk, the first to run, is clipped, and the plan dropped
    outcome, env, recorder = run(OutOfBounds(2, chunk_size=8), chunked(latency_steps=2, execution_steps=4))
    clipped = [k for k, action in enumerate(env.executed) if action == (1e6, 1e6)]  # clipped to the bounds
    assert clipped and outcome.safety_interventions == len(clipped)
    asked = [e.requested_at for e in recorder.of("agent.chunk")]
    for step in clipped[:-1]:
        assert step + 1 in asked  # the replan is asked for at the next step, not at the next s boundary
    holds = [k for k, action in enumerate(env.executed) if action == HOLD]
    assert len(holds) <= 2 + 2 * len(clipped)  # the first chunk's wait, then d steps for each replan


def test_the_ensemble_refuses_a_chunk_whose_actions_change_shape_as_the_agents_error() -> None:
    class Growing(Planner):
        def act(self, obs: Observation) -> ActionChunk:
            width = 2 if obs["t"][0] == 0 else 3
            return ActionChunk([np.zeros(width)] * self.size)

    outcome, _, _ = run(Growing(8), chunked(latency_steps=0, execution_steps=2, strategy="ensemble"))
    assert outcome.status is EpisodeStatus.ERROR  # the agent's fault, not the harness's
    assert "one shape: got (3,) beside (2,)" in outcome.reason
