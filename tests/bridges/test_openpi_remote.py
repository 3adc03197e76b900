"""`openpi-remote` against a real policy server process that speaks openpi's websocket protocol, run the way a user
runs it: `hylo eval gym:Pendulum-v1 --agent ... -A url=ws://...` in a subprocess."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import msgpack
import numpy as np
import pytest

from hylo.agents.openpi_remote import (
    DEFAULT_OBS_MAP,
    LIBERO_OBS_MAP,
    LIBERO_REPLAN_STEPS,
    OpenPiRemoteAgent,
    RemotePolicyUnreachable,
    packb,
    unpackb,
)
from hylo.core.agent import AgentRequirements
from hylo.core.context import EpisodeContext
from hylo.core.types import Observation, TaskInstance
from hylo.envs.images import resize_with_pad

SERVER = Path(__file__).with_name("openpi_server.py")
AGENT = "openpi-remote"
STEPS = 10


@dataclass
class Server:
    url: str
    record: Path

    def calls(self) -> list[dict]:
        if not self.record.exists():
            return []
        return [json.loads(line) for line in self.record.read_text().splitlines()]


@contextmanager
def policy_server(tmp_path: Path, *args: str) -> Iterator[Server]:
    record = tmp_path / "calls.jsonl"
    proc = subprocess.Popen(
        [sys.executable, str(SERVER), "--record", str(record), *args], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        port = proc.stdout.readline().strip()
        assert port.isdigit(), f"the policy server did not start (exit {proc.poll()})"
        yield Server(f"ws://127.0.0.1:{port}", record)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def hylo(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hylo", *args], capture_output=True, text=True, timeout=60, cwd=cwd, check=False
    )


def eval_pendulum(url: str, *agent_args: str, cwd: Path, episodes: int = 2, images: bool = False) -> dict:
    """`hylo eval gym:Pendulum-v1` with the remote agent, `STEPS` steps an episode; the `--json` result. Pendulum's
    only camera is its render, so the agent asks for no images unless `images`."""
    if not images:
        agent_args = (*agent_args, "images=false")
    a_args = [item for arg in (f"url={url}", *agent_args) for item in ("-A", arg)]
    result = hylo("eval", "gym:Pendulum-v1", "--agent", AGENT, *a_args, "--episodes", str(episodes),
                  "--max-steps", str(STEPS), "--json", cwd=cwd)  # fmt: skip
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def exported(run_id: str, cwd: Path) -> dict:
    result = hylo("runs", "export", run_id, "--format", "json", "--traces", cwd=cwd)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


# -- the codec ---------------------------------------------------------------------------------------------------------


def test_codec_reads_and_writes_openpi_client_frames():
    actions = np.arange(6, dtype=np.float32).reshape(2, 3)
    frame = msgpack.packb(  # what openpi's server sends, as its msgpack_numpy encodes it
        {
            "actions": {b"__ndarray__": True, b"data": actions.tobytes(), b"dtype": "<f4", b"shape": (2, 3)},
            "step": {b"__npgeneric__": True, b"data": 7, b"dtype": "<i8"},
            "ok": {b"__npgeneric__": True, b"data": True, b"dtype": "|b1"},
            "policy": "pi0",
        }
    )
    reply = unpackb(frame)
    assert reply["actions"].dtype == np.float32 and reply["actions"].shape == (2, 3)
    assert np.array_equal(reply["actions"], actions)
    assert type(reply["step"]) is np.int64 and reply["step"] == 7
    assert type(reply["ok"]) is np.bool_ and reply["ok"]
    assert reply["policy"] == "pi0"

    image = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3)
    sent = packb({"observation/image": image, "gain": np.float32(0.5), "prompt": "swing up"})
    raw = msgpack.unpackb(sent)  # no object hook: the maps exactly as they travel
    assert raw["observation/image"] == {
        b"__ndarray__": True,
        b"data": image.tobytes(),
        b"dtype": "|u1",
        b"shape": [2, 3, 3],
    }
    assert raw["gain"] == {b"__npgeneric__": True, b"data": 0.5, b"dtype": "<f4"}
    assert raw["prompt"] == "swing up"
    back = unpackb(sent)
    assert np.array_equal(back["observation/image"], image) and back["observation/image"].dtype == np.uint8
    assert type(back["gain"]) is np.float32 and back["gain"] == np.float32(0.5)


def test_codec_refuses_object_arrays_both_ways():
    bad = msgpack.packb({"x": {b"__ndarray__": True, b"data": b"\0" * 8, b"dtype": "|O", b"shape": (1,)}})
    with pytest.raises(ValueError, match="object"):
        unpackb(bad)
    with pytest.raises(ValueError, match="object"):
        packb({"x": np.array([None, 1], dtype=object)})


# -- driving a served policy -------------------------------------------------------------------------------------------


def test_served_actions_reach_the_env_as_chunks(tmp_path):
    with policy_server(tmp_path, "--horizon", "4") as server:
        result = eval_pendulum(server.url, "execution_steps=3", cwd=tmp_path)
        calls = server.calls()
    assert [(e["status"], e["reason"], e["steps"]) for e in result["episodes"]] == [("failure", "max_steps", STEPS)] * 2
    per_episode = -(-STEPS // 3)  # 3 of every 4 actions are executed, then the server is asked again
    assert len(calls) == 2 * per_episode
    assert all(call["keys"] == ["observation/state"] and call["outcome"] == "answered" for call in calls)
    assert {call["conn"] for call in calls} == {1}  # one connection, made when the agent was built

    attempts = exported(result["run_id"], tmp_path)["attempts"]
    assert len(attempts) == 2
    for attempt, episode_calls in zip(attempts, (calls[:per_episode], calls[per_episode:]), strict=True):
        trace = attempt["trace"]
        chunks = [e for e in trace if e["event"] == "agent.chunk"]
        assert [c["actions"] for c in chunks] == [call["actions"] for call in episode_calls]
        assert all(c["size"] == 4 and c["execution_steps"] == 3 for c in chunks)
        played = [e["action"] for e in trace if e["event"] == "action"]
        planned = [row for call in episode_calls for row in call["actions"][:3]]
        assert played == planned[:STEPS]
        # the server saw the observation the env produced at each step it was asked at
        observed = [e["obs"]["state"] for e in trace if e["event"] == "observation"]
        assert [call["state"] for call in episode_calls] == [observed[3 * i] for i in range(per_episode)]


def test_observation_mapping(tmp_path):
    obs = Observation(
        images={"front": np.zeros((2, 2, 3), np.uint8), "wrist": np.ones((2, 2, 3), np.uint8)},
        state=np.array([0.5, -1.0], np.float32),
        instruction="pick up the cube",
        grid=np.zeros(3),
    )
    with policy_server(tmp_path) as server:
        with OpenPiRemoteAgent(server.url) as default:
            assert default.metadata == {"policy": "test", "horizon": 4}
            sent = default.request(obs)
            assert set(sent) == set(DEFAULT_OBS_MAP)
            assert sent["observation/image"] is obs["images"]["front"] and sent["prompt"] == "pick up the cube"
            assert default.request(Observation(state=obs["state"])) == {"observation/state": obs["state"]}
            # the default mapping binds to any env, and asks it for camera images (a VLA policy wants them)
            assert default.requirements == AgentRequirements(needs_images=True)
        with OpenPiRemoteAgent(server.url, images=False) as blind:
            assert blind.requirements == AgentRequirements(needs_images=False)

        custom = {"observation/wrist_image": "images/wrist", "observation/state": "state"}
        with OpenPiRemoteAgent(server.url, obs_map=custom, extra={"prompt": "swing up"}) as mapped:
            sent = mapped.request(obs)
            assert sent["observation/wrist_image"] is obs["images"]["wrist"] and sent["prompt"] == "swing up"
            assert mapped.requirements == AgentRequirements(
                observation_keys=("images/wrist", "state"), needs_images=True
            )
            with pytest.raises(ValueError, match="'images/wrist', which the observation lacks"):
                mapped.request(Observation(state=obs["state"]))

        with OpenPiRemoteAgent(server.url, obs_map=custom, images=False) as still_mapped:  # the map reads images
            assert still_mapped.requirements == mapped.requirements

        with OpenPiRemoteAgent(server.url, passthrough=True) as passing:
            assert passing.request(obs) == dict(obs)

        with pytest.raises(ValueError, match="obs_map also maps"):
            OpenPiRemoteAgent(server.url, extra={"prompt": "x"})
        with pytest.raises(ValueError, match="must start with an observation key"):
            OpenPiRemoteAgent(server.url, obs_map={"observation/image": "*/front"})


def test_the_policy_gets_the_env_camera_by_default(tmp_path):
    with policy_server(tmp_path) as server:
        result = eval_pendulum(server.url, cwd=tmp_path, episodes=1, images=True)
        calls = server.calls()
    assert result["episodes"][0]["steps"] == STEPS
    assert calls and all(call["keys"] == ["observation/image", "observation/state"] for call in calls)
    (height, width, channels), dtype = calls[0]["image"]
    assert channels == 3 and height > 0 and width > 0 and dtype == "uint8"


def test_slow_server_is_a_timeout(tmp_path):
    with policy_server(tmp_path, "--sleep", "2") as server:
        result = eval_pendulum(server.url, "timeout=0.3", cwd=tmp_path, episodes=1)
    (episode,) = result["episodes"]
    assert (episode["status"], episode["reason"], episode["steps"]) == ("error", "timeout", 0)


def test_server_error_ends_the_episode_naming_it_and_the_next_one_reconnects(tmp_path):
    with policy_server(tmp_path, "--fail-at", "2") as server:
        result = eval_pendulum(server.url, cwd=tmp_path)
        calls = server.calls()
    failed, recovered = result["episodes"]
    assert failed["status"] == "error" and failed["steps"] == 4
    assert "RuntimeError: policy failed on call 2" in failed["reason"] and server.url in failed["reason"]
    assert (recovered["status"], recovered["reason"]) == ("failure", "max_steps")
    assert [call["conn"] for call in calls] == [1, 1, 2, 2, 2]

    detail = exported(result["run_id"], tmp_path)["attempts"][0]["detail"]
    assert "Traceback" in detail and 'raise RuntimeError(f"policy failed on call {call}")' in detail


def test_dropped_connection_is_reopened_and_the_run_goes_on(tmp_path):
    with policy_server(tmp_path, "--drop-at", "2") as server:
        result = eval_pendulum(server.url, "backoff=0.05", cwd=tmp_path)
        calls = server.calls()
    assert [(e["status"], e["reason"], e["steps"]) for e in result["episodes"]] == [("failure", "max_steps", STEPS)] * 2
    assert [(call["conn"], call["outcome"]) for call in calls[:3]] == [(1, "answered"), (1, "dropped"), (2, "answered")]
    assert calls[2]["state"] == calls[1]["state"]  # the observation whose reply was lost is sent again
    assert sum(call["outcome"] == "answered" for call in calls) == 2 * -(-STEPS // 4)


def test_server_gone_for_good_ends_episodes_naming_the_url(tmp_path):
    with policy_server(tmp_path, "--exit-at", "2") as server:
        result = eval_pendulum(server.url, "retries=2", "backoff=0.05", cwd=tmp_path)
    for episode in result["episodes"]:
        assert episode["status"] == "error"
        assert f"lost the openpi policy server at {server.url}" in episode["reason"]
    assert [e["steps"] for e in result["episodes"]] == [4, 0]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_unreachable_server_stops_the_run_before_any_episode(tmp_path):
    url = f"ws://127.0.0.1:{_free_port()}"
    result = hylo("eval", "gym:Pendulum-v1", "--agent", AGENT, "-A", f"url={url}", "--json", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and f"cannot reach the openpi policy server at {url}" in lines[0], result.stderr
    assert not (tmp_path / "hylo-runs").exists()

    with pytest.raises(RemotePolicyUnreachable, match=url):
        OpenPiRemoteAgent(url)


# -- openpi's LIBERO protocol ------------------------------------------------------------------------------------------


def libero_observation(height: int = 256, width: int = 256) -> Observation:
    agentview = np.full((height, width, 3), 200, np.uint8)
    wrist = np.full((height, width, 3), 50, np.uint8)
    return Observation(
        images={"agentview": agentview, "wrist": wrist},
        state=np.arange(8, dtype=np.float64) / 10,
        instruction="put the bowl on the plate",
    )


def test_resize_with_pad_keeps_the_aspect_ratio_on_black():
    frame = np.full((100, 200, 3), 255, np.uint8)
    out = resize_with_pad(frame, 224, 224)
    assert out.shape == (224, 224, 3) and out.dtype == np.uint8
    assert (out[:56] == 0).all() and (out[-56:] == 0).all()  # 200 wide → 112 high, centred: 56 rows of black above
    assert (out[60:164] == 255).all()
    assert resize_with_pad(out, 224, 224) is out  # already the size: untouched
    assert resize_with_pad(np.ones((4, 4, 3), np.float32), 8, 8).max() == 255  # floats in [0, 1], as openpi converts


def test_a_libero_episode_gets_openpis_libero_keys_images_and_replan_steps(tmp_path):
    libero = EpisodeContext(seed=1, env_spec=None, task=TaskInstance("libero", "task", split="libero_object"))  # type: ignore[arg-type]
    other = EpisodeContext(seed=1, env_spec=None, task=TaskInstance("gym:Pendulum-v1", "Pendulum-v1"))  # type: ignore[arg-type]
    with policy_server(tmp_path, "--horizon", "10", "--dim", "7") as server:
        with OpenPiRemoteAgent(server.url) as agent:
            agent.reset(libero)
            chunk = agent.act(libero_observation())
            assert chunk.execution_steps == LIBERO_REPLAN_STEPS and len(chunk.actions) == 10
            agent.reset(other)  # another benchmark: the generic mapping again, the whole chunk executed
            assert agent.act(libero_observation()).execution_steps == 10
        with OpenPiRemoteAgent(server.url, image_size=128, execution_steps=8) as small:
            small.reset(libero)
            assert small.act(libero_observation(256, 320)).execution_steps == 8
        with OpenPiRemoteAgent(server.url, obs_map={"observation/state": "state"}) as mapped:
            mapped.reset(libero)  # the user's mapping says otherwise
            sent = mapped.request(libero_observation())
            assert list(sent) == ["observation/state"] and sent["observation/state"].shape == (8,)
        calls = server.calls()
    assert calls[0]["keys"] == sorted(LIBERO_OBS_MAP)
    assert calls[0]["image"] == [[224, 224, 3], "uint8"] and calls[0]["wrist_image"] == [[224, 224, 3], "uint8"]
    assert calls[0]["prompt"] == "put the bowl on the plate"
    assert calls[0]["state"] == pytest.approx([i / 10 for i in range(8)])
    assert calls[1]["keys"] == ["observation/image", "observation/state", "prompt"]  # the generic default
    assert calls[1]["image"] == [[256, 256, 3], "uint8"]
    assert calls[2]["image"] == [[128, 128, 3], "uint8"]


def test_the_libero_protocol_refuses_a_mapping_and_names_a_missing_camera(tmp_path):
    with policy_server(tmp_path) as server:
        with pytest.raises(ValueError, match="give it no obs_map"):
            OpenPiRemoteAgent(server.url, protocol="libero", obs_map={"observation/state": "state"})
        with OpenPiRemoteAgent(server.url, protocol="libero") as agent:
            blind = libero_observation()
            del blind["images"]["wrist"]
            with pytest.raises(ValueError, match="'observation/wrist_image' from 'images/wrist'"):
                agent.request(blind)
