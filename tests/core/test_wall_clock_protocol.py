"""The wall clock checked against the virtual one under the chunked-execution protocol: an agent that sleeps a known
latency, paced in real time, gives the statuses and stale-action counts (per chunk, within one) the virtual clock
gives with that latency fixed. The control rate is slow (10 Hz) and the latency sits mid-step (0.25 s = 2.5 steps,
charged as 3), so a scheduler's jitter below 50 ms cannot move a merge to another step; a busy machine may still,
now and then."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

from hylo.core import ActionChunk, EpisodeOutcome, EventBus, Kernel, MemoryRecorder, Observation, TaskInstance
from hylo.core.timing import RealtimeTiming
from hylo.envs import PointReach, PointReachExpert

LATENCY_S = 0.25
EPISODES = 10


class SleepyExpert(PointReachExpert):
    """The expert, taking LATENCY_S of wall time per call."""

    def act(self, obs: Observation) -> ActionChunk:
        time.sleep(LATENCY_S)
        return super().act(obs)


def episode(index: int, clock: str) -> tuple[EpisodeOutcome, list[int]]:
    options = {"latency_s": LATENCY_S} if clock == "virtual" else {}
    timing = RealtimeTiming(schedule="chunked", execution_steps=3, clock=clock, **options)
    agent = SleepyExpert(chunk=8) if clock == "wall" else PointReachExpert(chunk=8)
    bus = EventBus(run_id=clock)
    recorder = MemoryRecorder()
    bus.subscribe(recorder)
    with Kernel(PointReach(max_episode_steps=22), agent, timing=timing, bus=bus) as kernel:
        outcome = kernel.run(TaskInstance("point_reach", "reach", index=index))
    return outcome, [event.dropped for event in recorder.of("agent.chunk")]


def test_the_wall_clock_gives_the_virtual_clocks_statuses_and_stale_counts() -> None:
    virtual = [episode(i, "virtual") for i in range(EPISODES)]
    with ThreadPoolExecutor(5) as pool:  # the wall-clock episodes sleep most of the time: run them side by side
        wall = list(pool.map(episode, range(EPISODES), ["wall"] * EPISODES))
    statuses = [(v.status, v.reason) for v, _ in virtual]
    assert len(set(statuses)) > 1, statuses  # the budget is tight enough that latency decides some episodes
    assert {d for _, drops in virtual for d in drops} == {3}  # 0.25 s at 10 Hz: every chunk loses 3 actions
    same = sum((v.status, v.reason) == (w.status, w.reason) for (v, _), (w, _) in zip(virtual, wall, strict=True))
    assert same >= 0.9 * EPISODES, (statuses, [(w.status, w.reason) for w, _ in wall])
    close = [
        len(w_drops) >= len(v_drops) - 1 and all(abs(a - b) <= 1 for a, b in zip(v_drops, w_drops, strict=False))
        for (_, v_drops), (_, w_drops) in zip(virtual, wall, strict=True)
    ]  # every chunk of the episode lost as many stale actions, give or take one
    assert sum(close) >= 0.9 * EPISODES, [(v[1], w[1]) for v, w in zip(virtual, wall, strict=True)]
    for w, _ in wall:
        assert w.metrics["realtime"]["virtual_latency_s"] is None
        assert min(w.metrics["realtime"]["latency_s"]) >= LATENCY_S  # measured: the sleep, at least
