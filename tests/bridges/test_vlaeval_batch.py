"""`hylo bridge vlaeval --batch B`: one agent answers every connection, their acts gathered into `act_batch` calls.

Several vla-eval clients at once (vla-eval's own runner, and hand-driven connections whose order pins which requests
share a batch) against a batched bridge and an unbatched one serving `ExactBatchAgent`, whose batched arithmetic is
exact: every episode gets the actions and the record it gets unbatched, batches of more than one form, a failing
`act_batch` costs only the episodes in it, and a connection that drops mid-batch costs only its own episode."""

from __future__ import annotations

import signal
import socket
import threading
import time
import zlib
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest
from vla_eval.connection import Connection
from vla_eval.runners.sync_runner import SyncEpisodeRunner
from vlaeval_fixtures import BridgeProcess, ToyBenchmark, refused_in_one_line
from websockets.exceptions import InvalidStatus
from websockets.sync.client import ClientConnection, connect
from websockets.typing import Origin

from hylo.agents import vlaeval_protocol as wire
from hylo.cli import main

AGENT = "vlaeval_fixtures:ExactBatchAgent"
CLIENTS = 4
STEPS = 8
EXPLODED = "error: agent raised RuntimeError: policy exploded"


@pytest.fixture(scope="module")
def unbatched(tmp_path_factory: pytest.TempPathFactory) -> Any:
    served = BridgeProcess("--agent", AGENT, log_dir=tmp_path_factory.mktemp("unbatched"))
    yield served
    assert served.stop() == 0


@pytest.fixture(scope="module")
def batched(tmp_path_factory: pytest.TempPathFactory) -> Any:
    # a long wait: a batch closes only when it is full or every open episode waits, so which requests share a
    # batch follows from the order the tests send them in
    served = BridgeProcess(
        "--agent", AGENT, "--batch", str(CLIENTS), "--batch-wait-ms", "10000", log_dir=tmp_path_factory.mktemp("b")
    )
    yield served
    assert served.stop() == 0
    assert "act_batch calls for" in "".join(served.lines)  # its figures, for tuning B and W


class Varied(ToyBenchmark):
    """The toy benchmark with a state that differs by task (an episode given another's observation would act
    otherwise); keeps the actions each task's episode was sent."""

    def __init__(self, tasks: list[str]) -> None:
        super().__init__(tasks=tasks, steps=STEPS)
        self.sent: dict[str, list[list[float]]] = {}

    def reset(self, task: dict[str, Any]) -> Any:
        self.current = task["name"]
        return super().reset(task)

    def step(self, action: dict[str, Any]) -> Any:
        self.sent.setdefault(self.current, []).append(np.asarray(action["actions"]).tolist())
        return super().step(action)

    def make_obs(self, raw_obs: Any, task: dict[str, Any]) -> dict[str, Any]:
        obs = super().make_obs(raw_obs, task)
        obs["state"] = obs["state"] * (1 + zlib.crc32(task["name"].encode()) % 13) / 7
        return obs


def run_clients(url: str) -> dict[str, tuple[Any, list[list[float]]]]:
    """`CLIENTS` vla-eval runners at once, each on its own connection stepping two episodes of its own tasks:
    each task's result and the actions its episode was sent."""
    results: dict[str, tuple[Any, list[list[float]]]] = {}
    failures: list[BaseException] = []

    def client(number: int) -> None:
        async def episodes() -> None:
            conn = Connection(url, timeout=30)
            await conn.connect()
            benchmark = Varied([f"c{number}-a", f"c{number}-b"])
            for task in benchmark.get_tasks():
                result = await SyncEpisodeRunner().run_episode(benchmark, task, conn, max_steps=20)
                verdict = {"metrics": result["metrics"], "steps": result["steps"]}  # not its elapsed time
                results[task["name"]] = (verdict, benchmark.sent[task["name"]])
            await conn.close()

        try:
            anyio.run(episodes)
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=client, args=(n,)) for n in range(CLIENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not failures, failures
    return results


def rows_by_task(served: BridgeProcess, *tasks: str) -> dict[str, Any]:
    """The bridge's rows by task, waiting (briefly) until those of `tasks` are committed."""
    deadline = time.monotonic() + 15
    while True:
        rows = {row.task: row for row in served.rows()}
        if all(task in rows for task in tasks) or time.monotonic() > deadline:
            return rows
        time.sleep(0.05)


def events(trace: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [event for event in trace if event["event"] == kind]


class Client:
    """A hand-driven vla-eval connection (the protocol as vla-eval's client speaks it)."""

    def __init__(self, url: str) -> None:
        self._stack = ExitStack()
        self.ws: ClientConnection = self._stack.enter_context(connect(url, max_size=None, open_timeout=10))
        self.seq = 0
        self.t = 0
        self.hello()

    def send(self, kind: wire.MessageType, payload: dict[str, Any]) -> None:
        self.seq += 1
        self.ws.send(wire.pack(kind, payload, self.seq))

    def recv(self) -> wire.Message:
        return wire.unpack(self.ws.recv(timeout=30))

    def hello(self) -> None:
        """HELLO, answered: the messages sent before it have been handled (a connection's are handled in order)."""
        self.send(wire.MessageType.HELLO, {})
        assert self.recv().type is wire.MessageType.HELLO

    def start(self, task: str) -> None:
        self.t = 0
        self.send(wire.MessageType.EPISODE_START, {"task": {"name": task}})
        self.hello()  # the episode is open before any other connection's request is sent

    def observe(self) -> None:
        self.send(wire.MessageType.OBSERVATION, {"state": np.arange(5.0) + self.t, "task_description": "probe"})
        self.t += 1

    def act(self) -> wire.Message:
        self.observe()
        return self.recv()

    def end(self, success: bool) -> None:
        self.send(wire.MessageType.EPISODE_END, {"metrics": {"success": success}, "steps": self.t})
        self.hello()

    def close(self) -> None:
        self._stack.close()


def test_concurrent_runners_get_the_unbatched_actions_from_batches_of_several(
    unbatched: BridgeProcess, batched: BridgeProcess
) -> None:
    alone = run_clients(unbatched.url)
    shared = run_clients(batched.url)
    assert sorted(shared) == sorted(alone) and len(alone) == 2 * CLIENTS
    for task, (result, sent) in alone.items():
        assert shared[task] == (result, sent), task  # the same actions, bit for bit, and the same verdict
        assert len(sent) == STEPS

    solo, together = rows_by_task(unbatched, *alone), rows_by_task(batched, *alone)
    sizes: list[int] = []
    for task in alone:
        a, b = solo[task], together[task]
        assert (b.status, b.reason, b.steps, b.success) == (a.status, a.reason, a.steps, a.success)
        trace, reference = batched.trace(b.episode_id), unbatched.trace(a.episode_id)
        assert [e["action"] for e in events(trace, "action")] == [e["action"] for e in events(reference, "action")]
        assert not events(reference, "agent.batch")
        kinds = [e["event"] for e in trace if e["event"] in ("agent.batch", "agent.chunk")]
        assert kinds == ["agent.batch", "agent.chunk"] * (STEPS // 2)  # each chunk computed in a recorded batch
        sizes += [e["size"] for e in events(trace, "agent.batch")]
    assert max(sizes) > 1 and all(1 <= size <= CLIENTS for size in sizes)

    health = batched.health()
    assert health["agents"] == 1  # one copy of the model for every connection
    assert health["batch"]["max_batch"] == CLIENTS and health["batch"]["mean_batch_size"] > 1
    assert health["batch"]["requests"] > health["batch"]["calls"]


def test_a_failing_act_batch_costs_the_episodes_in_its_batch_and_the_others_go_on(
    unbatched: BridgeProcess, tmp_path: Path
) -> None:
    served = BridgeProcess("--agent", AGENT, "--batch", "2", "--batch-wait-ms", "10000", log_dir=tmp_path)
    try:
        boom, steady, calm = (Client(served.url) for _ in range(3))
        boom.start("explode")
        steady.start("steady")
        calm.start("calm")
        for _ in range(2):  # the first asks in one full batch of two; the second is served from their chunks
            boom.observe()
            steady.observe()
            assert boom.recv().type is steady.recv().type is wire.MessageType.ACTION
        boom.observe()  # both ask again, in one batch, in which `explode` makes act_batch raise
        steady.observe()
        for client in (boom, steady):
            reply = client.recv()
            assert reply.type is wire.MessageType.ERROR and reply.payload["error"] == EXPLODED
        for _ in range(4):  # the episode that was not in that batch goes on
            assert calm.act().type is wire.MessageType.ACTION
        calm.end(True)
        boom.start("after")  # and so does the agent
        assert boom.act().type is wire.MessageType.ACTION
        boom.end(True)
        for client in (boom, steady, calm):
            client.close()
        rows = rows_by_task(served, "explode", "steady", "calm", "after")
        for task in ("explode", "steady"):
            assert (rows[task].status.value, rows[task].reason, rows[task].steps) == (
                "error",
                "agent raised RuntimeError: policy exploded",
                2,
            )
        assert (rows["calm"].status.value, rows["calm"].steps) == ("success", 4)
        assert rows["after"].status.value == "success"
        sizes = [e["size"] for e in events(served.trace(rows["steady"].episode_id), "agent.batch")]
        assert sizes == [2]  # the failed call has no answer to record
    finally:
        assert served.stop() == 0

    alone = Client(unbatched.url)  # unbatched, the exploding episode ends the same way
    alone.start("explode")
    replies = [alone.act() for _ in range(3)]
    alone.close()
    assert [r.type for r in replies] == [wire.MessageType.ACTION] * 2 + [wire.MessageType.ERROR]
    assert replies[-1].payload["error"] == EXPLODED
    row = rows_by_task(unbatched, "explode")["explode"]
    assert (row.status, row.reason, row.steps) == (rows["explode"].status, rows["explode"].reason, 2)


def test_a_connection_that_drops_mid_batch_costs_only_its_own_episode(batched: BridgeProcess) -> None:
    leaving, staying = Client(batched.url), Client(batched.url)
    leaving.start("leaving")
    staying.start("staying")
    for _ in range(2):
        leaving.observe()
        staying.observe()
        assert leaving.recv().type is staying.recv().type is wire.MessageType.ACTION
    leaving.observe()  # its request waits for the other open episode's ...
    leaving.close()  # ... and it is gone before the batch they share runs
    actions = [staying.act() for _ in range(4)]
    assert [reply.type for reply in actions] == [wire.MessageType.ACTION] * 4
    staying.end(True)
    staying.close()

    rows = rows_by_task(batched, "staying", "leaving")
    assert rows["staying"].status.value == "success" and rows["staying"].steps == 6
    assert rows["leaving"].status.value == "infra_invalid"
    assert rows["leaving"].reason.startswith("the connection closed mid-episode")
    trace = batched.trace(rows["staying"].episode_id)
    assert [e["size"] for e in events(trace, "agent.batch")] == [2, 2, 1]
    probe = Client(batched.url)  # the bridge goes on serving
    probe.start("probe")
    assert probe.act().type is wire.MessageType.ACTION
    probe.close()


def test_a_batched_bridge_checks_host_and_origin_as_any_bridge(batched: BridgeProcess) -> None:
    with pytest.raises(InvalidStatus) as refused:
        connect(batched.url, origin=Origin("http://evil.example"), open_timeout=10)
    assert refused.value.response.status_code == 403
    with socket.create_connection(("127.0.0.1", batched.port), timeout=10) as raw:  # a handshake for another host
        raw.sendall(
            f"GET / HTTP/1.1\r\nHost: evil.example:{batched.port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n".encode()
        )
        assert raw.recv(4096).startswith(b"HTTP/1.1 403 Forbidden\r\n")


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--batch", "0"], "expected a batch size from 1 to 1024, got '0'"),
        (["--batch", "1025"], "expected a batch size from 1 to 1024, got '1025'"),
        (["--batch", "2", "--batch-wait-ms", "-1"], "expected a number of milliseconds from 0 to 10000, got '-1'"),
        (["--batch", "2", "--batch-wait-ms", "10001"], "from 0 to 10000, got '10001'"),
        (["--batch", "2", "--batch-wait-ms", "nan"], "from 0 to 10000, got 'nan'"),
        (["--batch-wait-ms", "5"], "--batch-wait-ms 5 needs --batch"),
        (["--batch", "40"], "--batch 40 is larger than --max-connections 32"),
        (["--batch", "8", "--max-connections", "4"], "--batch 8 is larger than --max-connections 4"),
    ],
)
def test_a_bad_batch_setting_is_one_line_naming_it_and_exit_2(
    flags: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["bridge", "vlaeval", "--agent", AGENT, "--port", "0", "--log-dir", str(tmp_path), *flags]
    assert message in refused_in_one_line(argv, tmp_path, lambda: capsys.readouterr().err)


def test_an_agent_without_act_batch_is_refused_at_start(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["bridge", "vlaeval", "--agent", "vlaeval_fixtures:ScriptedAgent", "--batch", "2", "--port", "0"]
    assert main([*argv, "--log-dir", str(tmp_path)]) == 2
    assert capsys.readouterr().err == (
        "hylo: error: agent 'scripted' has no act_batch(observations, contexts): --batch needs an agent that acts on "
        "a batch of observations (README, Batched inference); run the bridge without --batch\n"
    )
    assert not any(tmp_path.iterdir())


def test_a_stop_while_a_request_waits_for_its_batch_records_every_open_episode(tmp_path: Path) -> None:
    served = BridgeProcess("--agent", AGENT, "--batch", "2", "--batch-wait-ms", "10000", log_dir=tmp_path)
    try:
        waiting, quiet = Client(served.url), Client(served.url)
        waiting.start("waiting")
        quiet.start("quiet")
        waiting.observe()  # waits for `quiet`, which never asks
        served.proc.send_signal(signal.SIGTERM)
        assert served.proc.wait(timeout=60) == 0
        rows = rows_by_task(served, "waiting", "quiet")
        assert {task: rows[task].status.value for task in ("waiting", "quiet")} == {
            "waiting": "infra_invalid",
            "quiet": "infra_invalid",
        }
        assert all(rows[task].reason.startswith("the bridge stopped mid-episode") for task in ("waiting", "quiet"))
    finally:
        served.stop()
