"""Images in served mode: decoded for an agent that needs them, only traced for one that declared it needs none."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium.spaces as spaces
import numpy as np

from hylo.bridges.served_run import ServedRun
from hylo.bridges.session import ServedSession
from hylo.bridges.vlaeval_protocol import MessageType, pack, unpack
from hylo.bridges.vlaeval_server import AgentPool, ConnectionHandler, VlaEvalBridge
from hylo.core.agent import AgentBase, AgentRequirements
from hylo.core.chunk import ActionChunk
from hylo.core.shield import SafetyShield
from hylo.eval.store import EvalLog

BOX = spaces.Box(-1.0, 1.0, shape=(2,), dtype=np.float32)


class Recorder(AgentBase):
    needs_images = False

    def __init__(self) -> None:
        self.requirements = AgentRequirements(action_space=BOX, needs_images=self.needs_images)
        self.seen: list[dict[str, Any]] = []

    def act(self, obs: Any) -> ActionChunk:
        images = obs.get("images", {})
        self.seen.append({"keys": sorted(obs), "images": {k: v.shape for k, v in images.items()}})
        return ActionChunk.single(np.zeros(2, dtype=np.float32))


class Looker(Recorder):
    needs_images = True


def _serve(tmp_path: Path, agent: Recorder) -> tuple[ServedRun, list[dict[str, Any]]]:
    run = ServedRun(tmp_path, run_id="images", agent="recorder", spec={})
    bridge = VlaEvalBridge(AgentPool(type(agent), agent), run, agent_label="recorder", action_space=BOX)
    handler = ConnectionHandler(bridge, ServedSession(run, agent, shield=SafetyShield(), action_space=BOX,
                                                      connection="conn-1"))  # fmt: skip
    camera = (np.arange(12 * 10 * 3) % 251).astype(np.uint8).reshape(12, 10, 3)
    handler.handle(pack(MessageType.EPISODE_START, {"task": {"name": "look", "episode_idx": 0}}, 1))
    for seq in (2, 3):
        obs = {"images": {"front": camera}, "state": np.zeros(3), "task_description": "look"}
        reply = unpack(handler.handle(pack(MessageType.OBSERVATION, obs, seq, images=True)) or b"")
        assert reply.type is MessageType.ACTION and reply.seq == seq
    handler.handle(pack(MessageType.EPISODE_END, {"metrics": {"success": True}, "steps": 2}, 4))
    run.close()
    with EvalLog.open(tmp_path / "images") as log:
        (row,) = log.final_episodes()
        observations = [e for e in log.trace(row.episode_id) if e["event"] == "observation"]
    return run, observations


def test_an_agent_that_needs_images_gets_them_decoded(tmp_path: Path) -> None:
    agent = Looker()
    _, observations = _serve(tmp_path, agent)
    assert agent.seen == [{"keys": ["images", "instruction", "state"], "images": {"front": (12, 10, 3)}}] * 2
    assert len(observations) == 2


def test_an_agent_that_declared_no_images_gets_none_but_the_trace_names_them(tmp_path: Path) -> None:
    agent = Recorder()
    _, observations = _serve(tmp_path, agent)
    assert agent.seen == [{"keys": ["instruction", "state"], "images": {}}] * 2  # as in driven mode: none rendered
    shown = [event["obs"]["images"]["front"] for event in observations]
    assert shown[0]["encoding"] == "png" and shown[0]["shape"] == [12, 10, 3] and len(shown[0]["digest"]) == 24
    assert shown[0] == shown[1]
