"""Synthetic evaluation runs for the web tests: real EvalLogs (as `hylo eval` writes them) with a deterministic,
plausible mix of episode statuses, written straight into a log dir so a page can show thousands of episodes without
running any."""

from __future__ import annotations

import hashlib
import json
import math
import random
from collections.abc import Sequence
from pathlib import Path

from hylo.core.status import EpisodeStatus
from hylo.evallog.store import EpisodeRow, EvalLog

SPLIT = "default"

_FAILURE_REASONS = ("max_steps", "truncated", "terminated")
_ABSTAIN_REASONS = {
    EpisodeStatus.ERROR: ("agent raised ValueError: bad observation", "agent raised TimeoutError: act took too long"),
    EpisodeStatus.INFRA_INVALID: ("env reset failed: renderer crashed", "watchdog"),
    EpisodeStatus.SAFETY_ABORT: ("safety: joint limit", "safety: workspace bounds"),
}


def episode_id(benchmark: str, task: str, index: int, base_seed: int) -> str:
    """An episode id as hylo writes it, e.g. `babyai/default/GoToLocal/0003@s0`."""
    return f"{benchmark}/{SPLIT}/{task}/{index:04d}@s{base_seed}"


def _status(rng: random.Random, success_p: float, abstentions: bool) -> EpisodeStatus:
    """Mostly success or failure, with a few of each abstention and safety aborts (unless not `abstentions`)."""
    draw = rng.random() if abstentions else 1.0
    if draw < 0.03:
        return EpisodeStatus.ERROR
    if draw < 0.05:
        return EpisodeStatus.INFRA_INVALID
    if draw < 0.06:
        return EpisodeStatus.SAFETY_ABORT
    return EpisodeStatus.SUCCESS if rng.random() < success_p else EpisodeStatus.FAILURE


def _reason(rng: random.Random, status: EpisodeStatus) -> str:
    if status is EpisodeStatus.SUCCESS:
        return "success"
    if status is EpisodeStatus.FAILURE:
        return rng.choice(_FAILURE_REASONS)
    return rng.choice(_ABSTAIN_REASONS[status])


def _trace(run_id: str, row: EpisodeRow) -> list[bytes]:
    """A short trace: the episode's start, a step or two, its end."""
    base = {"run_id": run_id, "episode_id": row.episode_id}
    events = [
        {**base, "event": "episode.start", "seq": 0, "sim_time": 0.0, "seed": row.seed, "agent": "synthetic"},
        {**base, "event": "action", "seq": 1, "sim_time": 0.0, "step": 0, "action": 2, "hold": False},
        {**base, "event": "step.result", "seq": 2, "sim_time": 0.1, "step": 0, "reward": 0.0},
        {**base, "event": "episode.end", "seq": 3, "sim_time": 0.1, "status": row.status.value, "reason": row.reason},
    ]
    return [json.dumps(event).encode() for event in events]


def _realtime(rng: random.Random, steps: int, reason: str) -> dict[str, object]:
    """A plausible `metrics["realtime"]` of a chunked run with jittered latency (dt 0.05 s, a chunk every 4 steps)."""
    chunks = max(1, steps // 4)
    virtual = [round(rng.lognormvariate(-3.0, 0.3), 4) for _ in range(chunks)]
    holds = steps if reason == "watchdog" else rng.randint(0, steps // 10)
    return {
        "dt": 0.05,
        "steps": steps,
        "executed": steps - holds,
        "holds": holds,
        "dropped": sum(min(4, math.ceil(v / 0.05)) for v in virtual[1:]),
        "chunks": chunks,
        "latency_s": [round(v / 60, 6) for v in virtual],
        "virtual_latency_s": virtual,
        "delay_steps": [math.ceil(v / 0.05) for v in virtual],
    }


def write_run(
    log_dir: Path,
    run_id: str,
    n_episodes: int,
    tasks: Sequence[str],
    *,
    seed: int = 0,
    base_seed: int = 0,
    benchmark: str = "babyai",
    agent: str = "random",
    success_p: Sequence[float] | None = None,
    status: str = "complete",
    timing_options: dict[str, object] | None = None,
    protocol: str | None = None,
    seeds: Sequence[int] | None = None,
    abstentions: bool = True,
    agent_args: dict[str, object] | None = None,
    statuses: Sequence[EpisodeStatus] | None = None,
) -> Path:
    """Write a run of `n_episodes` episodes spread evenly over `tasks` into `log_dir/run_id` and mark it `status`.

    Episode ids depend only on benchmark, tasks, counts and `base_seed`, so two runs written with different `seed`s
    pair episode for episode; `seed` draws the outcomes (per task success probability `success_p`, by default
    falling from 0.9 across the tasks). With `timing_options` the run is a realtime one (under `protocol`, when given):
    every episode carries a `metrics["realtime"]` record. With `seeds` (two or more, in place of `base_seed`) the run
    is one of `--seeds`: every (task, index) under each seed, `n_episodes` keys and so `n_episodes * len(seeds)`
    episodes, whose outcomes share a probability drawn per key (episodes of a key alike, as of one start). Without
    `abstentions` every episode succeeds or fails; with `statuses` the episodes end with these, in turn, instead.
    `agent_args` are the agent's arguments, as `-A` records them. Returns the run directory."""
    if not tasks:
        raise ValueError("a run needs at least one task")
    if seeds is not None and (len(seeds) < 2 or len(set(seeds)) != len(seeds)):
        raise ValueError(f"seeds must be two or more distinct seeds, got {list(seeds)}")
    base_seeds = list(seeds) if seeds is not None else [base_seed]
    rng = random.Random(seed)
    default_p = [0.9 - 0.6 * i / len(tasks) for i in range(len(tasks))]
    probabilities = list(success_p) if success_p is not None else default_p
    per_task = [n_episodes // len(tasks) + (1 if i < n_episodes % len(tasks) else 0) for i in range(len(tasks))]
    digest = hashlib.blake2b(f"{run_id}:{seed}".encode(), digest_size=8).hexdigest()
    spec: dict[str, object] = {"benchmark": benchmark, "agent": agent, "split": SPLIT, "tasks": list(tasks)}
    if agent_args is not None:
        spec["agent_args"] = agent_args
    spec["seed"] = base_seeds[0]
    if seeds is not None:
        spec["seeds"] = base_seeds
    if timing_options is not None:
        spec |= {"timing": "realtime", "timing_options": timing_options}
    if protocol is not None:
        spec["protocol"] = protocol
    run_dir = log_dir / run_id
    items: list[tuple[EpisodeRow, Sequence[bytes]]] = []
    clock = 1_700_000_000.0
    for task, count, success_rate in zip(tasks, per_task, probabilities, strict=True):
        for index in range(count):
            key_p = success_rate if seeds is None else min(1.0, max(0.0, success_rate + rng.uniform(-0.5, 0.5)))
            for under in base_seeds:
                drawn = _status(rng, key_p, abstentions)
                outcome = drawn if statuses is None else statuses[len(items) % len(statuses)]
                steps = rng.randint(3, 60)
                seed = rng.randrange(2**31)
                reason = _reason(rng, outcome)
                metrics: dict[str, object] = {"return": round(rng.random(), 4)}
                if timing_options is not None:
                    metrics["realtime"] = _realtime(rng, steps, reason)
                row = EpisodeRow(
                    episode_id=episode_id(benchmark, task, index, under),
                    task=task,
                    split=SPLIT,
                    index=index,
                    base_seed=under,
                    seed=seed,
                    status=outcome,
                    reason=reason,
                    success=outcome is EpisodeStatus.SUCCESS,
                    steps=steps,
                    metrics=metrics,
                    started_at=clock,
                    ended_at=clock + steps * 0.01,
                    worker="synthetic",
                )
                clock += 1.0
                items.append((row, _trace(run_id, row)))
    with EvalLog.create(
        run_dir,
        run_id=run_id,
        benchmark=benchmark,
        split=SPLIT,
        agent=agent,
        digest=digest,
        spec=spec,
        n_planned=n_episodes * len(base_seeds),
        versions={"hylo": "synthetic"},
    ) as log:
        log.record_many(items)
        log.update_run(status=status, message=f"synthetic: {len(items)} episodes")
    return run_dir
