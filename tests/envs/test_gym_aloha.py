"""LeRobot's ALOHA sim (gym-aloha, bimanual, rendered by MuJoCo through EGL) through `gym:gym_aloha/<id>`: a short
rendered episode with LeRobot's keys mapped to hylo's, the same episode twice giving the same frames."""

from __future__ import annotations

from pathlib import Path

import pytest

from hylo.core.status import EpisodeStatus
from hylo.eval import EvalLog, evaluate

pytest.importorskip("gym_aloha")

INSERTION = "gym:gym_aloha/AlohaInsertion-v0"


def _observations(log_dir: Path, episode_id: str) -> list[dict[str, object]]:
    with EvalLog.open(log_dir) as log:
        return [e["obs"] for e in log.trace(episode_id) if e["event"] == "observation"]


def test_a_short_aloha_episode_runs_rendered_with_lerobots_keys_mapped(tmp_path: Path) -> None:
    command = {"agent": "camera_agents:RandomWithCameras", "env_args": {"obs_type": "pixels_agent_pos"}, "episodes": 1,
               "max_steps": 3}  # fmt: skip
    first = evaluate(INSERTION, **command, log_dir=str(tmp_path / "a"))
    (row,) = first.episodes
    assert (row.status, row.reason, row.steps) == (EpisodeStatus.FAILURE, "max_steps", 3)
    assert first.summary.success_signal  # gym-aloha reports `is_success`: a failure is a real 0, not a missing signal
    observations = _observations(first.log_dir, row.episode_id)
    assert len(observations) == 4  # after reset, and after each of the 3 steps
    for obs in observations:
        assert set(obs) == {"images", "state"}  # `pixels` → images, `agent_pos` → state
        frame = {"shape": [480, 640, 3], "dtype": "uint8"}  # the env's own camera; nothing more is rendered
        assert obs["images"] == {"top": {"digest": obs["images"]["top"]["digest"], **frame}}  # type: ignore[index]
        assert len(obs["state"]) == 14  # type: ignore[arg-type]  # both arms' joints and grippers
    frames = [obs["images"]["top"]["digest"] for obs in observations]  # type: ignore[index]
    assert len(set(frames)) > 1  # the arms move in the picture

    again = evaluate(INSERTION, **command, log_dir=str(tmp_path / "b"))
    assert [obs["images"]["top"]["digest"] for obs in _observations(again.log_dir, row.episode_id)] == frames  # type: ignore[index]
