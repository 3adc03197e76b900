"""A served episode ends as a driven one does, through the same scaffold: an invalid chunk is the agent's `error`
with the Kernel's reason, an unsafe action a `safety_abort`, and each is recorded once with its trace."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium.spaces as spaces
import numpy as np
import pytest

from hylo.bridges.served_run import ServedRun
from hylo.bridges.session import EpisodeRefused, ServedSession
from hylo.core.shield import SafetyShield
from hylo.evallog.store import EvalLog

BOX = spaces.Box(-1.0, 1.0, shape=(2,), dtype=np.float32)


class Answers:
    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.ended: list[str] = []

    def act(self, obs: Any) -> Any:
        return self.answer

    def on_episode_end(self, outcome: Any) -> None:
        self.ended.append(outcome.status.value)


@pytest.mark.parametrize(
    ("answer", "status", "reason"),
    [
        (None, "error", "agent returned an invalid chunk: act returned None"),
        ([], "error", "agent returned an invalid chunk: act returned an empty list"),
        (np.array([np.nan, 0.0], np.float32), "safety_abort", "finite"),
    ],
    ids=["none", "empty", "nan"],
)
def test_a_served_episode_ends_as_the_kernel_would(tmp_path: Path, answer: Any, status: str, reason: str) -> None:
    agent = Answers(answer)
    run = ServedRun(tmp_path, run_id="endings", agent="answers", spec={})
    session = ServedSession(run, agent, shield=SafetyShield(), action_space=BOX, connection="conn-1")
    session.start({"task": {"name": "t", "episode_idx": 0}})
    with pytest.raises(EpisodeRefused, match=f"^{status}: .*{reason}"):
        session.act({"state": np.zeros(2)})
    assert not session.in_episode and agent.ended == [status]
    run.close()
    with EvalLog.open(tmp_path / "endings") as log:
        (row,) = log.final_episodes()
        kinds = [e["event"] for e in log.trace(row.episode_id)]
    assert row.status.value == status and reason in row.reason and row.steps == 0
    assert row.metrics["actions_served"] == 0
    assert kinds[0] == "episode.start" and kinds[-1] == "episode.end"
