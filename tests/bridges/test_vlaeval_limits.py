"""The bridge's limits, on real sockets against `hylo bridge vlaeval` processes: who may connect (Host, Origin), how
many at once, how long a silent connection is kept, what one frame may make it decode, what a burst of clients
leaves behind in its memory, and the command's refusals (one line, exit 2)."""

from __future__ import annotations

import http.client
import io
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import anyio
import msgpack
import numpy as np
import psutil
import pytest
from PIL import Image
from vla_eval.connection import Connection
from vlaeval_fixtures import BridgeProcess, HeavyAgent, bridge_env, frame, refused_in_one_line
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import ClientConnection, connect

from hylo.agents import vlaeval_protocol as wire
from hylo.bridges.vlaeval_server import AgentPool
from hylo.cli import main

AGENT = "vlaeval_fixtures:ScriptedAgent"
OBS = {"images": {"front": frame(16, 16, 3, 1)}, "state": np.zeros(5), "task_description": "probe"}
MiB = 2**20
Start = Callable[..., BridgeProcess]


@pytest.fixture(scope="module")
def bridge(tmp_path_factory: pytest.TempPathFactory) -> Any:
    served = BridgeProcess("--agent", AGENT, log_dir=tmp_path_factory.mktemp("limits"))
    yield served
    assert served.stop() == 0


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Start]:
    """`start(*flags)`: a bridge of its own for one test, killed after it should the test fail before stopping it."""
    started: list[BridgeProcess] = []

    def start(*flags: str, agent: str = AGENT) -> BridgeProcess:
        started.append(BridgeProcess("--agent", agent, *flags, log_dir=tmp_path))
        return started[-1]

    yield start
    for served in started:
        if served.proc.poll() is None:
            served.proc.kill()
            served.proc.wait(timeout=30)


def ask(ws: ClientConnection, kind: wire.MessageType, payload: dict[str, Any], seq: int) -> wire.Message:
    ws.send(wire.pack(kind, payload, seq, images=True))
    return wire.unpack(ws.recv(timeout=10))


def exchange(ws: ClientConnection, task: str) -> None:
    """HELLO, EPISODE_START, one OBSERVATION answered with an ACTION: what a harness does first."""
    assert ask(ws, wire.MessageType.HELLO, {}, 1).type is wire.MessageType.HELLO
    ws.send(wire.pack(wire.MessageType.EPISODE_START, {"task": {"name": task}}, 2))
    assert ask(ws, wire.MessageType.OBSERVATION, OBS, 3).type is wire.MessageType.ACTION


def rows_of(served: BridgeProcess, task: str, count: int = 1) -> list[Any]:
    """The bridge's rows for `task`, waiting (briefly) until `count` of them are committed."""
    deadline = time.monotonic() + 15
    while len(rows := [row for row in served.rows() if row.task == task]) < count and time.monotonic() < deadline:
        time.sleep(0.05)
    return rows


def refused(url: str, **kwargs: Any) -> tuple[int, str]:
    """The HTTP status and body with which the bridge refused a websocket handshake."""
    with pytest.raises(InvalidStatus) as refusal:
        connect(url, open_timeout=10, **kwargs).close()
    response = refusal.value.response
    return response.status_code, response.body.decode()


def test_connections_past_the_cap_are_refused_with_503_while_health_answers(
    start: Start,
) -> None:
    served = start("--max-connections", "8")
    with ExitStack() as stack:
        held = [stack.enter_context(connect(served.url)) for _ in range(8)]
        for ws in held:
            assert ask(ws, wire.MessageType.HELLO, {}, 1).type is wire.MessageType.HELLO
        health = served.health()
        assert (health["connections"], health["max_connections"]) == (8, 8)

        with ThreadPoolExecutor(16) as pool:  # 64 at once: the handshakes in flight are counted too
            knocks = [pool.submit(refused, served.url) for _ in range(64)]
            counts = [served.health()["connections"]]
            while not all(knock.done() for knock in knocks):
                counts.append(served.health()["connections"])  # /health answers throughout
            answers = {knock.result() for knock in knocks}
        assert answers == {(503, "hylo bridge: the bridge is serving its maximum of 8 connections; try again later\n")}
        assert set(counts) == {8}

        async def vla_eval_client() -> BaseException:  # vla-eval's own client gives up, it does not hang
            with pytest.raises(ConnectionError) as failed:
                await Connection(served.url, timeout=10, max_retries=1).connect()
            return failed.value

        failure = anyio.run(vla_eval_client)
        assert isinstance(failure.__cause__, InvalidStatus) and failure.__cause__.response.status_code == 503

        held.pop().close()  # a freed place is taken again
        served.wait_health(lambda health: health["connections"] == 7)
        with connect(served.url) as late:
            assert ask(late, wire.MessageType.HELLO, {}, 1).type is wire.MessageType.HELLO
    assert served.stop() == 0


def test_a_silent_connection_is_closed_after_the_idle_timeout_and_its_episode_recorded(
    start: Start, tmp_path: Path
) -> None:
    served = start("--idle-timeout", "1")
    gate = tmp_path / "gate"
    with connect(served.url) as ws:
        ws.send(wire.pack(wire.MessageType.EPISODE_START, {"task": {"name": "gated", "instruction": str(gate)}}, 1))
        opener = threading.Timer(2.5, gate.touch)  # the agent takes 2.5 s: its time is not the harness's silence
        opener.start()
        assert ask(ws, wire.MessageType.OBSERVATION, OBS, 2).type is wire.MessageType.ACTION
        began = time.monotonic()
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=20)
        silent_for = time.monotonic() - began
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1001
    assert closed.value.rcvd.reason == "idle for 1 s: the harness sent nothing"
    assert 0.9 < silent_for < 15
    with connect(served.url) as mute, pytest.raises(ConnectionClosed):  # one that never says anything is closed too
        mute.recv(timeout=20)
    (row,) = rows_of(served, "gated")
    assert row.status.value == "infra_invalid"
    assert row.reason == "the connection was idle for 1 s and closed mid-episode; 1 actions served"
    assert served.wait_health(lambda health: health["connections"] == 0)["connections"] == 0
    assert served.stop() == 0


def test_memory_and_threads_come_back_after_64_clients_leave(start: Start) -> None:
    """Each HeavyAgent holds 8 MiB: the pool keeps one for the next connection and closes the others."""
    served = start("--max-connections", "64", "--no-shield", agent="vlaeval_fixtures:HeavyAgent")
    process = psutil.Process(served.proc.pid)
    with connect(served.url) as ws:  # what the first client loads stays (the codec, the trace): part of the base
        exchange(ws, "warm-up")
    served.wait_health(lambda health: health["connections"] == 0)
    before, threads_before = process.memory_info().rss, process.num_threads()
    with ExitStack() as stack:
        clients = [stack.enter_context(connect(served.url)) for _ in range(64)]
        for k, ws in enumerate(clients):
            exchange(ws, f"client-{k}")
        assert served.health()["agents"] == 64
        during = process.memory_info().rss
    health = served.wait_health(lambda health: health["connections"] == 0 and health["agents"] == 1)
    after, threads_after = process.memory_info().rss, process.num_threads()
    assert (health["connections"], health["agents"]) == (0, 1)
    assert during - before > 64 * HeavyAgent.BALLAST_BYTES * 0.75  # the agents did hold their memory
    assert after - before < 100 * MiB, f"RSS {before / MiB:.0f} MiB before, {after / MiB:.0f} MiB after"
    assert threads_after <= threads_before + 2  # not one per client that left
    assert len([row for row in served.rows() if row.task.startswith("client-")]) == 64
    assert served.stop() == 0


def test_host_and_origin_are_checked_on_the_handshake_and_on_health(start: Start) -> None:
    served = start("--allow-origin", "http://localhost:5173", "--allow-host", "bridge.internal")
    port = served.port

    def health(headers: dict[str, str]) -> tuple[int, str]:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("GET", "/health", headers=headers)
        response = conn.getresponse()
        answer = response.status, response.read().decode()
        conn.close()
        return answer

    status, body = health({"Host": f"evil.example:{port}"})  # DNS rebinding: a page's name pointed at 127.0.0.1
    assert (status, body) == (403, f"hylo bridge: this server does not answer to host 'evil.example:{port}' (an "
                                   "operator adds names with --allow-host)\n")  # fmt: skip
    assert health({"Host": f"bridge.internal:{port}"})[0] == 200
    assert health({"Host": f"localhost:{port}"})[0] == 200
    assert health({"Host": f"127.0.0.1:{port}", "Origin": "http://evil.example"})[0] == 403
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:  # a handshake for another host
        raw.sendall(
            f"GET / HTTP/1.1\r\nHost: evil.example:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n".encode()
        )
        assert raw.recv(4096).startswith(b"HTTP/1.1 403 Forbidden\r\n")

    status, body = refused(served.url, origin="http://evil.example")
    assert (status, body) == (
        403,
        "hylo bridge: requests from the page at 'http://evil.example' are not accepted here (an operator allows an "
        "origin with --allow-origin)\n",
    )
    assert refused(served.url, origin="null")[0] == 403  # a sandboxed frame or a local file
    for origin in (None, "http://localhost:5173", f"http://127.0.0.1:{port}"):  # no page, an allowed one, its own
        with connect(served.url, origin=origin) as ws:
            assert ask(ws, wire.MessageType.HELLO, {}, 1).type is wire.MessageType.HELLO
    assert served.stop() == 0


def _png(height: int, width: int, channels: int) -> bytes:
    buffer = io.BytesIO()
    pixels = np.zeros((height, width, channels), np.uint8)
    Image.fromarray(pixels if channels > 1 else pixels[:, :, 0]).save(buffer, format="PNG", compress_level=9)
    return buffer.getvalue()


def _peak_rss(pid: int) -> int:
    """The process's peak resident memory (VmHWM) since `_reset_peak`, in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM in /proc/<pid>/status")


def _reset_peak(pid: int) -> int:
    """Start measuring the peak afresh (Linux: 5 > clear_refs); returns it, which is the memory resident now."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")
    return _peak_rss(pid)


def test_a_frame_whose_images_exceed_the_pixel_budget_together_is_refused_before_decoding(
    start: Start,
) -> None:
    """Four 4096×4096 RGBA PNGs (64 MiB each once decoded, 16 Mi pixels: the budget) in one frame of under a MiB."""
    assert wire.MAX_FRAME_PIXELS == 4096 * 4096
    served = start()
    camera = {"__image__": True, "format": "png", "data": _png(4096, 4096, 4), "shape": [4096, 4096, 4]}
    cameras = {name: camera for name in ("front", "wrist", "left", "right")}
    bomb = msgpack.packb({"type": "observation", "payload": {"images": cameras}, "seq": 7, "timestamp": 0.0})
    assert len(bomb) < MiB
    with connect(served.url) as ws:
        ws.send(wire.pack(wire.MessageType.EPISODE_START, {"task": {"name": "glance"}}, 1))
        assert ask(ws, wire.MessageType.HELLO, {}, 2).type is wire.MessageType.HELLO
        base = _reset_peak(served.proc.pid)
        ws.send(bomb)
        reply = wire.unpack(ws.recv(timeout=10))
        assert reply.type is wire.MessageType.ERROR and reply.seq == 7
        assert reply.payload["error"] == (
            "bad frame: the frame's 4 compressed images declare 67108864 pixels together, over the 16777216 pixel "
            "budget of a frame; none was decoded"
        )
        assert _peak_rss(served.proc.pid) - base < 32 * MiB  # decoding one image would take 64 MiB
        ws.send(wire.pack(wire.MessageType.EPISODE_START, {"task": {"name": "glance"}}, 8))
        base = _reset_peak(served.proc.pid)
        alone = {"type": "observation", "payload": {"images": {"front": camera}}, "seq": 9, "timestamp": 0.0}
        ws.send(msgpack.packb(alone))  # one of them alone is within the budget: decoded, and the agent acts
        assert wire.unpack(ws.recv(timeout=30)).type is wire.MessageType.ACTION
        assert _peak_rss(served.proc.pid) - base > 64 * MiB  # which the peak shows
    first, second = sorted(rows_of(served, "glance", count=2), key=lambda row: row.started_at)
    assert first.status.value == "infra_invalid" and "over the 16777216 pixel budget" in first.reason
    assert second.steps == 1
    assert served.stop() == 0


def test_message_fields_past_their_bounds_are_refused_and_the_connection_goes_on(bridge: BridgeProcess) -> None:
    deep: Any = 0
    for _ in range(40):  # deeper than MAX_NESTING, well within what msgpack and Python could recurse into
        deep = [deep]
    with connect(bridge.url, max_size=None) as ws:
        for seq in (2**64 - 1, -(2**63)):  # the largest and smallest seq msgpack carries come back as they were
            ws.send(wire.pack(wire.MessageType.EPISODE_START, {"task": {"name": "seq"}}, 1))
            assert ask(ws, wire.MessageType.OBSERVATION, OBS, seq).seq == seq
        huge = {"name": "x" * 500_000, "episode_id": "9" * 500_000, "instruction": "do it"}
        ws.send(wire.pack(wire.MessageType.EPISODE_START, {"task": huge}, 2))
        assert ask(ws, wire.MessageType.OBSERVATION, OBS, 3).type is wire.MessageType.ACTION
        ws.send(wire.pack(wire.MessageType.EPISODE_END, {"metrics": {"success": True}}, 4))
        for payload, reason in (
            ({**OBS, "task_description": "y" * (wire.MAX_STRING_BYTES + 1)}, "exceeds max_str_len(1048576)"),
            ({**OBS, "state": deep}, "nested too deeply (more than 32 levels"),
            ({**OBS, "state": [0] * 200_000}, "200000 exceeds max_array_len(100000)"),
            ({**OBS, "state": [{}] * 99_999}, "holds more than 100000 values"),  # a byte each, 64 each decoded
        ):
            reply = ask(ws, wire.MessageType.OBSERVATION, payload, 5)
            assert reply.type is wire.MessageType.ERROR and reply.seq == 5 and reason in reply.payload["error"]
        assert ask(ws, wire.MessageType.HELLO, {}, 6).type is wire.MessageType.HELLO
    (row,) = rows_of(bridge, "x" * 120)  # the name is cut short for the row; the trace keeps the task whole
    assert (row.status.value, row.index) == ("success", 0)
    assert bridge.health()["status"] == "ok"


def test_a_busy_port_is_one_line_and_exit_2_and_leaves_no_run(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        command = [sys.executable, "-m", "hylo", "bridge", "vlaeval", "--agent", AGENT, "--port", str(port)]
        result = subprocess.run(
            [*command, "--log-dir", str(tmp_path)], capture_output=True, text=True, timeout=60, env=bridge_env()
        )
    assert result.returncode == 2
    assert result.stderr == f"hylo: error: cannot listen on 127.0.0.1:{port}: address already in use\n"
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--max-connections", "0"], "argument --max-connections: expected a number of connections from 1 to 1024"),
        (["--max-connections", "100000"], "expected a number of connections from 1 to 1024, got '100000'"),
        (["--idle-timeout", "0"], "argument --idle-timeout: expected a number of seconds (> 0, at most 86400)"),
        (["--idle-timeout", "nan"], "expected a number of seconds (> 0, at most 86400), got 'nan'"),
        (["--idle-timeout", "inf"], "expected a number of seconds (> 0, at most 86400), got 'inf'"),
        (["--max-frame-mb", "1e308"], "argument --max-frame-mb: expected a size in MiB (> 0, at most 4096)"),
        (["--max-frame-mb", "0"], "expected a size in MiB (> 0, at most 4096), got '0'"),
        (["--action-dim", "1000000000000"], "expected an action length from 1 to 4096, got '1000000000000'"),
        (["--allow-origin", "evil.example"], "expected an origin such as http://host:port, got 'evil.example'"),
        (["--allow-origin", "http://a.example/page"], "got 'http://a.example/page'"),
        (["--allow-origin", "http://a.example:99999"], "got 'http://a.example:99999'"),
        (["--allow-host", "a b"], "argument --allow-host: expected a host name such as bridge.internal, got 'a b'"),
        (["--host", ""], "argument --host: expected an address to bind, such as 127.0.0.1, got ''"),
        (["--run-id", "../escape"], "argument --run-id: expected a run id of letters, digits"),
        (["--port", "70000"], "argument --port: expected a port number (0-65535), got '70000'"),
        (["-A", "novalue"], "novalue"),
    ],
)
def test_a_bad_command_line_value_is_one_line_naming_it_and_exit_2(
    flags: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["bridge", "vlaeval", "--agent", AGENT, "--port", "0", "--log-dir", str(tmp_path), *flags]
    assert message in refused_in_one_line(argv, tmp_path, lambda: capsys.readouterr().err)


def test_a_log_dir_that_is_a_file_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    taken = tmp_path / "a-file"
    taken.write_text("")
    argv = ["bridge", "vlaeval", "--agent", AGENT, "--port", "0", "--log-dir", str(taken), "--run-id", "r1"]
    assert main(argv) == 2
    assert capsys.readouterr().err == f"hylo: error: log dir {str(taken)!r} is not a directory\n"


def test_the_pool_keeps_one_idle_agent_and_closes_the_rest() -> None:
    closed: list[int] = []

    class Closable:
        serial = 0

        def __init__(self) -> None:
            Closable.serial += 1
            self.number = Closable.serial

        def close(self) -> None:
            closed.append(self.number)

    pool = AgentPool(Closable, Closable())
    agents = [pool.acquire() for _ in range(4)]
    assert pool.size == 4 and [agent.number for agent in agents] == [1, 2, 3, 4]
    for agent in agents:
        pool.release(agent)
    assert pool.size == 1 and closed == [2, 3, 4]
    assert pool.acquire().number == 1  # the one kept serves the next connection
    with pytest.raises(ValueError, match="keep must be an int >= 0, got -1"):
        AgentPool(Closable, Closable(), keep=-1)
