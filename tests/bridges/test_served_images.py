"""Served sessions driven in process: images decoded for an agent that needs them, only traced for one that declared
it needs none; and an agent acting with no known action space."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium.spaces as spaces
import msgpack
import numpy as np

from hylo.agents.vlaeval_protocol import MessageType, encode_image, pack, unpack
from hylo.bridges.served_run import ServedRun
from hylo.bridges.session import ServedSession
from hylo.bridges.vlaeval_server import AgentPool, ConnectionHandler, VlaEvalBridge
from hylo.core.agent import AgentBase, AgentRequirements
from hylo.core.chunk import ActionChunk
from hylo.core.shield import SafetyShield
from hylo.evallog.store import EvalLog

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


def test_an_agent_that_declared_no_images_gets_no_images_key_whatever_form_they_come_in(tmp_path: Path) -> None:
    """Raw frames and arrays under `images` are kept from it too (traced by digest); a PNG elsewhere is decoded."""
    agent = Recorder()
    run = ServedRun(tmp_path, run_id="raw", agent="recorder", spec={})
    bridge = VlaEvalBridge(AgentPool(Recorder, agent), run, agent_label="recorder", action_space=BOX)
    session = ServedSession(run, agent, shield=SafetyShield(), action_space=BOX, connection="conn-1")
    handler = ConnectionHandler(bridge, session)
    camera = (np.arange(8 * 8 * 3) % 251).astype(np.uint8).reshape(8, 8, 3)
    raw = {"__image__": True, "format": "raw", "data": camera.tobytes(), "dtype": "|u1", "shape": [8, 8, 3]}
    depth = {"__ndarray__": True, "data": np.ones((8, 8), np.float32).tobytes(), "dtype": "<f4", "shape": [8, 8]}
    mask = encode_image(camera[:, :, :1])
    payload = {"images": {"raw": raw, "depth": depth, "png": encode_image(camera)}, "mask": mask, "state": [0.0]}
    handler.handle(pack(MessageType.EPISODE_START, {"task": {"name": "raw"}}, 1))
    frame = msgpack.packb({"type": "observation", "payload": payload, "seq": 2, "timestamp": 0.0})
    assert unpack(handler.handle(frame) or b"").type is MessageType.ACTION
    handler.handle(pack(MessageType.EPISODE_END, {"metrics": {"success": True}}, 3))
    run.close()
    assert agent.seen == [{"keys": ["mask", "state"], "images": {}}]
    with EvalLog.open(tmp_path / "raw") as log:
        (row,) = log.final_episodes()
        (observation,) = [e for e in log.trace(row.episode_id) if e["event"] == "observation"]
    shown = observation["obs"]["images"]
    assert {name: (s["encoding"], s["shape"], s["dtype"]) for name, s in shown.items()} == {
        "raw": ("raw", [8, 8, 3], "uint8"),
        "depth": ("raw", [8, 8], "float32"),
        "png": ("png", [8, 8, 3], "uint8"),
    }
    assert all(len(s["digest"]) == 24 for s in shown.values())
    assert np.shape(observation["obs"]["mask"]) == (8, 8, 1)  # decoded: it is not a camera under `images`
    assert "UndecodedImage" not in repr(observation)


def test_an_agent_with_no_action_space_that_returns_empty_actions_gets_an_error_naming_the_fix(tmp_path: Path) -> None:
    """`--agent random` with no `--action-dim`: the bridge knows no space, so the agent samples an empty one."""
    from hylo.agents.registry import make_agent

    agent = make_agent("random", {}, None)
    run = ServedRun(tmp_path, run_id="random", agent="random", spec={})
    bridge = VlaEvalBridge(AgentPool(lambda: agent, agent), run, agent_label="random")
    handler = ConnectionHandler(bridge, ServedSession(run, agent, shield=SafetyShield(), action_space=None,
                                                      connection="conn-1"))  # fmt: skip
    handler.handle(pack(MessageType.EPISODE_START, {"task": {"name": "unbounded"}}, 1))
    reply = unpack(handler.handle(pack(MessageType.OBSERVATION, {"state": np.zeros(3)}, 2)) or b"")
    assert reply.type is MessageType.ERROR and reply.seq == 2
    assert "empty action (shape (0,))" in reply.payload["error"] and "--action-dim" in reply.payload["error"]
    assert unpack(handler.handle(pack(MessageType.HELLO, {}, 3)) or b"").type is MessageType.HELLO
    run.close()
    with EvalLog.open(tmp_path / "random") as log:
        (row,) = log.final_episodes()
    assert (row.status.value, row.steps) == ("error", 0) and "--action-dim" in row.reason
