"""`vlaeval-remote` drives real vla-eval model servers (vla-eval's PredictModelServer, served by vla-eval) from
`hylo eval`, on a Gymnasium env whose action is one float: chunks, cameras, a hard deadline (a slow and a frozen
server), an unreachable server, a server that dies mid-run, and one that refuses the handshake."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from vlaeval_fixtures import bridge_env
from websockets.exceptions import ConnectionClosed
from websockets.sync.server import ServerConnection, serve

from hylo.agents.vlaeval_protocol import MessageType, pack, unpack
from hylo.agents.vlaeval_remote import RemotePolicyUnreachable, VlaEvalRemoteAgent
from hylo.evallog.store import EvalLog

HERE = Path(__file__).resolve().parent
AGENT = "vlaeval-remote"
ENV = "gym:MountainCarContinuous-v0"


class ModelServer:
    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / "vlaeval_model_server.py"), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )

    def wait_port(self) -> int:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line.startswith("PORT "), line
        self.port = int(line.split()[1])
        return self.port

    def wait_observations(self, n: int) -> list[dict[str, Any]]:
        """The cameras (name → [shape, dtype]) of the next `n` observations the server gets."""
        assert self.proc.stdout is not None
        seen = []
        for _ in range(n):
            line = self.proc.stdout.readline()
            assert line.startswith("OBS"), line
            seen.append(json.loads(line.split(" ", 2)[2]))
        return seen

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=10)


@pytest.fixture(scope="module")
def servers() -> Any:
    started = {"chunk": ModelServer("--horizon", "4"), "slow": ModelServer("--delay", "5")}
    for server in started.values():
        server.wait_port()
    yield started
    for server in started.values():
        server.kill()


def hylo_eval(*args: str, cwd: Path, images: bool = False) -> subprocess.Popen[str]:
    """`hylo eval` of the remote agent on MountainCar, whose only camera is its render: no images unless `images`."""
    if not images:
        args = (*args, "-A", "images=false")
    return subprocess.Popen(
        [sys.executable, "-m", "hylo", "eval", ENV, "--agent", AGENT, "--json", "--log-dir", str(cwd), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
        env=bridge_env(),
    )


def finish(proc: subprocess.Popen[str]) -> tuple[int, dict[str, Any] | None, str]:
    out, err = proc.communicate(timeout=120)
    return proc.returncode, (json.loads(out) if out.strip() else None), err


def test_remote_policy_chunks_are_played_out_by_hylo(servers: dict[str, ModelServer], tmp_path: Path) -> None:
    url = servers["chunk"].url
    code, result, err = finish(hylo_eval("-A", f"url={url}", "--episodes", "2", "--max-steps", "10", cwd=tmp_path))
    assert code == 0, err
    assert result is not None
    assert [(e["status"], e["reason"], e["steps"]) for e in result["episodes"]] == [("failure", "max_steps", 10)] * 2
    with EvalLog.open(Path(result["log_dir"])) as log:
        trace = log.trace(result["episodes"][0]["episode_id"])
    chunks = [event for event in trace if event["event"] == "agent.chunk"]
    assert [chunk["size"] for chunk in chunks] == [4, 4, 4]  # asked at steps 0, 4 and 8 of 10
    assert [event["action"] for event in trace if event["event"] == "action"] == [[0.5]] * 10


def test_a_reply_past_the_deadline_is_an_error_timeout(servers: dict[str, ModelServer], tmp_path: Path) -> None:
    url = servers["slow"].url
    args = ("-A", f"url={url}", "-A", "timeout=0.5", "--episodes", "1", "--max-steps", "3")
    code, result, err = finish(hylo_eval(*args, cwd=tmp_path))
    assert code == 0, err
    assert result is not None
    assert [(e["status"], e["reason"]) for e in result["episodes"]] == [("error", "timeout")]


def test_an_unreachable_server_fails_the_run_before_any_episode(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"ws://127.0.0.1:{port}"
    code, result, err = finish(hylo_eval("-A", f"url={url}", "-A", "timeout=2", "--episodes", "2", cwd=tmp_path))
    assert code == 2 and result is None
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[-1].startswith("hylo: error: ") and url in lines[-1]
    assert not list(tmp_path.rglob("evallog.sqlite"))


def test_a_server_restarted_mid_run_is_reconnected(tmp_path: Path) -> None:
    server = ModelServer("--delay", "0.01")
    port = server.wait_port()
    args = ("-A", f"url={server.url}", "-A", "retries=8", "-A", "backoff=0.2", "--episodes", "3", "--max-steps", "40")
    run = hylo_eval(*args, cwd=tmp_path)
    server.wait_observations(10)
    server.kill()
    replacement = ModelServer("--delay", "0.01", "--port", str(port))
    try:
        replacement.wait_port()
        code, result, err = finish(run)
    finally:
        replacement.kill()
    assert code == 0, err
    assert result is not None
    assert [(e["status"], e["steps"]) for e in result["episodes"]] == [("failure", 40)] * 3


def test_a_server_killed_for_good_makes_the_remaining_episodes_errors(tmp_path: Path) -> None:
    server = ModelServer("--delay", "0.01")
    server.wait_port()
    args = ("-A", f"url={server.url}", "-A", "retries=1", "-A", "backoff=0.1", "--episodes", "3", "--max-steps", "60")
    run = hylo_eval(*args, cwd=tmp_path)
    server.wait_observations(10)
    server.kill()
    code, result, err = finish(run)
    assert code == 0, err
    assert result is not None
    episodes = result["episodes"]
    assert len(episodes) == 3 and {e["status"] for e in episodes} == {"error"}
    assert all(server.url in e["reason"] for e in episodes)
    assert "lost the vla-eval model server" in episodes[0]["reason"]


def test_the_policy_gets_the_env_camera_by_default(tmp_path: Path) -> None:
    server = ModelServer("--horizon", "4")
    server.wait_port()
    try:
        args = ("-A", f"url={server.url}", "--episodes", "1", "--max-steps", "4")
        code, result, err = finish(hylo_eval(*args, cwd=tmp_path, images=True))
        (cameras,) = server.wait_observations(1)
    finally:
        server.kill()
    assert code == 0, err
    assert result is not None and result["episodes"][0]["steps"] == 4
    assert list(cameras) == ["render"]
    (height, width, channels), dtype = cameras["render"]
    assert (channels, dtype) == (3, "uint8") and height > 0 and width > 0


def test_a_frozen_server_times_out_near_the_deadline(tmp_path: Path) -> None:
    server = ModelServer()
    server.wait_port()
    args = ("-A", f"url={server.url}", "-A", "timeout=1", "-A", "retries=0", "--episodes", "1", "--max-steps", "50")
    run = hylo_eval(*args, cwd=tmp_path)
    try:
        server.wait_observations(1)
        server.proc.send_signal(signal.SIGSTOP)  # the server stops answering, and never closes its side
        frozen = time.monotonic()
        code, result, err = finish(run)
        took = time.monotonic() - frozen
    finally:
        server.proc.send_signal(signal.SIGCONT)
        server.kill()
    assert code == 0, err
    assert result is not None and [(e["status"], e["reason"]) for e in result["episodes"]] == [("error", "timeout")]
    assert took < 1 + 5  # the deadline, plus a generous margin: closing the dead connection must not take 10 s


class _Refusing:
    """A server that answers HELLO with ERROR (or, `silent`, not at all), noting when each connection ends."""

    def __init__(self, silent: bool) -> None:
        self.silent = silent
        self.ended = threading.Event()
        self.server = serve(self.handle, "127.0.0.1", 0)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"ws://127.0.0.1:{self.server.socket.getsockname()[1]}"

    def handle(self, ws: ServerConnection) -> None:
        try:
            for frame in ws:
                message = unpack(frame)
                if message.type is MessageType.HELLO and not self.silent:
                    ws.send(pack(MessageType.ERROR, {"error": "no"}, message.seq))
        except ConnectionClosed:
            return
        finally:
            self.ended.set()


@pytest.mark.parametrize("silent", [False, True])
def test_a_failed_handshake_closes_its_connection(silent: bool) -> None:
    refusing = _Refusing(silent)
    try:
        with pytest.raises(RemotePolicyUnreachable, match=refusing.url):
            VlaEvalRemoteAgent(refusing.url, timeout=0.5)
        assert refusing.ended.wait(10), "the agent left its connection open"
    finally:
        refusing.server.shutdown()
