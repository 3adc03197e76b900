"""`hylo bridge vlaeval` against the real vla-eval 0.8.0: its Connection, its episode runner, its `run` orchestrator
and its CLI's shards step a small benchmark through the bridge; every assertion is on what they got back and on the
bridge's EvalLog (vla-eval's exit code is 0 even when every episode errors)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import anyio
import msgpack
import numpy as np
import pytest
import vla_eval
from vla_eval.connection import Connection
from vla_eval.protocol.messages import MessageType
from vla_eval.runners.base import ModelActError
from vla_eval.runners.sync_runner import SyncEpisodeRunner
from vlaeval_fixtures import BridgeProcess, ToyBenchmark, bridge_env, frame
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

import hylo
from hylo.agents import vlaeval_protocol as wire
from hylo.evallog.store import EvalLog

OBS = {"images": {"front": frame(16, 16, 3, 1)}, "state": np.zeros(5), "task_description": "probe"}


@pytest.fixture(scope="module")
def bridge(tmp_path_factory: pytest.TempPathFactory) -> Any:
    served = BridgeProcess(
        "--agent",
        "vlaeval_fixtures:ScriptedAgent",
        "--max-connections",
        "40",  # the test of 33 busy connections and a late one needs more than the default 32
        log_dir=tmp_path_factory.mktemp("bridge"),
    )
    yield served
    assert served.stop() == 0


def rows_of(bridge: BridgeProcess, *tasks: str, count: int | None = None) -> list[Any]:
    """The bridge's rows for `tasks`, waiting (briefly) until `count` of them are committed."""
    deadline = time.monotonic() + 15
    while True:
        rows = [row for row in bridge.rows() if row.task in tasks]
        if count is None or len(rows) >= count or time.monotonic() > deadline:
            return rows
        time.sleep(0.05)


def events(trace: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [event for event in trace if event["event"] == kind]


def run_episodes(url: str, tasks: list[str]) -> list[Any]:
    """vla-eval's SyncEpisodeRunner on one connection; an episode that raises gives its exception."""

    async def main() -> list[Any]:
        conn = Connection(url, timeout=10)
        await conn.connect()
        benchmark = ToyBenchmark(tasks=tasks)
        results: list[Any] = []
        for task in benchmark.get_tasks():
            try:
                results.append(await SyncEpisodeRunner().run_episode(benchmark, task, conn, max_steps=20))
            except Exception as exc:
                results.append(exc)
        await conn.close()
        return results

    return anyio.run(main)


def test_hello_is_answered_again_on_reconnect_and_health_answers_200(bridge: BridgeProcess) -> None:
    async def main() -> tuple[dict[str, Any], dict[str, Any]]:
        conn = Connection(bridge.url, timeout=10)
        await conn.connect()
        first = conn.server_info
        await conn.reconnect()
        second = conn.server_info
        await conn.close()
        return first, second

    first, second = anyio.run(main)
    assert first == second
    assert first["protocol_version"] == 1
    assert first["model_server"] == "hylo-bridge"
    assert first["server_version"] == hylo.__version__
    assert first["agent"] == "vlaeval_fixtures:ScriptedAgent"
    assert first["action_spec"] == {"actions": {"name": "actions", "dims": 4, "format": "continuous", "range": [-1, 1]}}
    with urllib.request.urlopen(f"http://127.0.0.1:{bridge.port}/health", timeout=10) as response:
        assert response.status == 200
        assert json.loads(response.read())["status"] == "ok"


def test_runner_episode_is_recorded_with_the_observations_the_agent_saw(bridge: BridgeProcess) -> None:
    (result,) = run_episodes(bridge.url, ["reach"])
    assert result["metrics"] == {"success": True} and result["steps"] == 6

    (row,) = rows_of(bridge, "reach", count=1)
    assert (row.status.value, row.reason, row.steps, row.success) == ("success", "success", 6, True)
    with EvalLog.open(bridge.run_dir) as log:
        assert log.info().mode == "served"
    trace = bridge.trace(row.episode_id)
    assert trace[0]["event"] == "episode.start" and trace[0]["mode"] == "served"
    assert trace[-1]["event"] == "episode.end" and trace[-1]["status"] == "success"
    (final,) = events(trace, "step.result")  # served mode: no per-step results, only the harness's verdict
    assert final["success"] is True and final["info"]["final"] is True
    decisions = [event["content"] for event in events(trace, "agent.decision")]
    assert len(decisions) == 6
    for t, seen in enumerate(decisions):
        assert seen["keys"] == ["images", "instruction", "state"]
        assert seen["instruction"] == "reach the cube"
        assert seen["image_shapes"] == {"front": [16, 16, 3], "wrist": [8, 8, 4]}
        assert seen["image_sums"] == {"front": int(frame(16, 16, 3, 1).sum()), "wrist": int(frame(8, 8, 4, 2).sum())}
        assert seen["state"] == [float(t + k) for k in range(5)]
    assert [event["action"] for event in events(trace, "action")] == [[0.25] * 4] * 6
    assert len(events(trace, "observation")) == 6


def test_chunked_agent_is_asked_once_per_chunk_and_each_action_travels_alone(bridge: BridgeProcess) -> None:
    async def main() -> list[Any]:
        conn = Connection(bridge.url, timeout=10)
        await conn.connect()
        await conn.start_episode({"task": {"name": "chunked", "episode_idx": 3}})
        replies = []
        for _ in range(8):
            seq = await conn.send(MessageType.OBSERVATION, OBS)
            reply = await conn.recv(timeout=10)
            replies.append((seq, reply))
        await conn.end_episode({"metrics": {"success": False}, "steps": 8, "elapsed_sec": 0.1})
        await conn.close()
        return replies

    replies = anyio.run(main)
    for k, (seq, reply) in enumerate(replies):
        assert reply.type is MessageType.ACTION and reply.seq == seq
        assert set(reply.payload) == {"actions"}
        np.testing.assert_allclose(reply.payload["actions"], np.full(4, 0.01 * k, dtype=np.float32))
    (row,) = rows_of(bridge, "chunked", count=1)
    assert (row.status.value, row.reason, row.index, row.steps) == ("failure", "harness reported failure", 3, 8)
    trace = bridge.trace(row.episode_id)
    assert [chunk["size"] for chunk in events(trace, "agent.chunk")] == [4, 4]
    assert [d["content"]["call"] for d in events(trace, "agent.decision")] == [1, 2]


def test_agent_failure_answers_error_and_the_next_episode_starts_without_episode_end(bridge: BridgeProcess) -> None:
    failed, after = run_episodes(bridge.url, ["fail", "after-fail"])
    assert isinstance(failed, ModelActError) and "agent raised ValueError" in str(failed)
    assert after["metrics"] == {"success": True}
    (row,) = rows_of(bridge, "fail", count=1)
    assert row.status.value == "error"
    assert row.reason == "agent raised ValueError: scripted failure at the third act"
    assert row.steps == 2
    assert [r.status.value for r in rows_of(bridge, "after-fail", count=1)] == ["success"]


def test_shield_clips_an_out_of_range_action_and_blocks_a_non_finite_one(bridge: BridgeProcess) -> None:
    async def main() -> list[Any]:
        conn = Connection(bridge.url, timeout=10)
        await conn.connect()
        await conn.start_episode({"task": {"name": "wild"}})
        replies = []
        for _ in range(2):
            await conn.send(MessageType.OBSERVATION, OBS)
            replies.append(await conn.recv(timeout=10))
        await conn.close()
        return replies

    clipped, blocked = anyio.run(main)
    assert clipped.type is MessageType.ACTION
    np.testing.assert_array_equal(clipped.payload["actions"], np.ones(4, dtype=np.float32))
    assert blocked.type is MessageType.ERROR and "safety_abort" in blocked.payload["error"]
    (row,) = rows_of(bridge, "wild", count=1)
    assert row.status.value == "safety_abort" and row.reason.startswith("finite:")
    assert row.safety_interventions == 2
    reviews = events(bridge.trace(row.episode_id), "safety.review")
    assert reviews[0]["modified"] is True and "clipped" in reviews[0]["reasons"][0]
    assert reviews[1]["approved"] is False and reviews[1]["guard"] == "finite"


def test_abandoned_and_dropped_episodes_are_recorded_and_any_task_type_is_accepted(bridge: BridgeProcess) -> None:
    async def main() -> list[Any]:
        conn = Connection(bridge.url, timeout=10)
        await conn.connect()
        types = []
        for task in ("a plain string", 7, None, ["a", "list"]):
            await conn.start_episode({"task": task} if task is not None else {})
            types.append((await conn.act(OBS))["actions"].shape)
            await conn.end_episode({"metrics": {"success": True}, "steps": 1, "elapsed_sec": 0.0})
        await conn.start_episode({"task": {"name": "abandoned"}})
        await conn.act(OBS)
        await conn.act(OBS)
        await conn.start_episode({"task": {"name": "dropped"}})
        await conn.act(OBS)
        await conn.close()
        return types

    assert anyio.run(main) == [(4,)] * 4
    assert {r.task for r in rows_of(bridge, "a plain string", "7", "task", "['a', 'list']", count=4)} == {
        "a plain string",
        "7",
        "task",
        "['a', 'list']",
    }
    (abandoned,) = rows_of(bridge, "abandoned", count=1)
    assert abandoned.status.value == "infra_invalid" and "new EPISODE_START" in abandoned.reason
    assert abandoned.steps == 2
    (dropped,) = rows_of(bridge, "dropped", count=1)
    assert dropped.status.value == "infra_invalid" and "connection closed" in dropped.reason


def _config(url: str, tasks: list[str], output: Path, episodes: int = 2) -> dict[str, Any]:
    return {
        "server": {"url": url, "timeout": 20},
        "output_dir": str(output),
        "benchmarks": [
            {
                "benchmark": "vlaeval_fixtures:ToyBenchmark",
                "episodes_per_task": episodes,
                "params": {"tasks": tasks, "steps": 4},
            }
        ],
    }


def test_two_vla_eval_orchestrators_at_once(bridge: BridgeProcess, tmp_path: Path) -> None:
    results: dict[str, Any] = {}

    def orchestrate(name: str) -> None:
        config = _config(bridge.url, [f"{name}-1", f"{name}-2"], tmp_path / name)
        results[name] = vla_eval.run(config, docker=False, no_save=True)

    threads = [threading.Thread(target=orchestrate, args=(name,)) for name in ("orch-a", "orch-b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=90)
    for name in ("orch-a", "orch-b"):
        (benchmark,) = results[name]
        episodes = [episode for task in benchmark["tasks"] for episode in task["episodes"]]
        assert len(episodes) == 4 and all(e["metrics"]["success"] is True for e in episodes)
        assert not any(e.get("failure_reason") for e in episodes)
    rows = rows_of(bridge, "orch-a-1", "orch-a-2", "orch-b-1", "orch-b-2", count=8)
    assert len(rows) == 8 and {row.status.value for row in rows} == {"success"}
    assert len({row.episode_id for row in rows}) == 8
    assert sorted((row.task, row.index) for row in rows) == sorted(
        (f"{name}-{k}", index) for name in ("orch-a", "orch-b") for k in (1, 2) for index in (0, 1)
    )
    assert len({row.worker for row in rows}) == 2  # one connection per orchestrator


def test_vla_eval_cli_shards_share_one_bridge(bridge: BridgeProcess, tmp_path: Path) -> None:
    import yaml

    config = tmp_path / "eval.yaml"
    config.write_text(yaml.safe_dump(_config(bridge.url, ["shard-1", "shard-2"], tmp_path / "out", episodes=3)))
    vla_cli = Path(sys.executable).with_name("vla-eval")
    run_args = [str(vla_cli), "run", "-c", str(config), "--no-docker", "--no-save"]
    shards = [
        subprocess.Popen(
            [*run_args, "--shard-id", str(shard), "--num-shards", "2"],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=bridge_env(),
            cwd=tmp_path,
        )
        for shard in (0, 1)
    ]
    for shard in shards:
        shard.communicate(timeout=90)
    rows = rows_of(bridge, "shard-1", "shard-2", count=6)
    assert sorted((row.task, row.index) for row in rows) == [(t, i) for t in ("shard-1", "shard-2") for i in range(3)]
    assert {row.status.value for row in rows} == {"success"}
    assert len({row.worker for row in rows}) == 2


@pytest.mark.parametrize(
    ("agent", "message"),
    [("no-such-agent", "unknown agent 'no-such-agent'"), ("no_such_module:Agent", "cannot import agent module")],
)
def test_an_agent_that_cannot_be_built_is_one_line_and_exit_2(agent: str, message: str, tmp_path: Path) -> None:
    command = [sys.executable, "-m", "hylo", "bridge", "vlaeval", "--agent", agent, "--port", "0"]
    result = subprocess.run(
        [*command, "--log-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        env=bridge_env(),
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hylo: error: ") and message in lines[0]
    assert not any(tmp_path.iterdir())  # no run was created


def test_stopping_the_bridge_records_the_open_episode(tmp_path: Path) -> None:
    served = BridgeProcess("--agent", "vlaeval_fixtures:ScriptedAgent", "--no-shield", log_dir=tmp_path)

    async def main() -> Any:
        conn = Connection(served.url, timeout=10)
        await conn.connect()
        await conn.start_episode({"task": {"name": "interrupted"}})
        reply = await conn.act(OBS)
        assert served.stop() == 0
        await conn.close()
        return reply

    anyio.run(main)
    (row,) = served.rows()
    assert row.status.value == "infra_invalid" and "bridge stopped" in row.reason and row.steps == 1
    with EvalLog.open(served.run_dir) as log:
        info = log.info()
    assert (info.status, info.mode, info.n_done) == ("complete", "served", 1)
    assert events(served.trace(row.episode_id), "episode.start")[0]["guards"] == []


# -- frames sent with hylo's own codec, for what vla-eval's client never sends ----------------------------------------


def ask(ws: ClientConnection, kind: wire.MessageType, payload: dict[str, Any], seq: int) -> wire.Message:
    ws.send(wire.pack(kind, payload, seq, images=True))
    return wire.unpack(ws.recv(timeout=10))


def start(ws: ClientConnection, task: dict[str, Any], seq: int = 2) -> None:
    ws.send(wire.pack(wire.MessageType.EPISODE_START, {"task": task}, seq))


def test_an_action_that_cannot_travel_is_an_error_and_never_served(bridge: BridgeProcess) -> None:
    with connect(bridge.url) as ws:
        assert ask(ws, wire.MessageType.HELLO, {}, 1).type is wire.MessageType.HELLO
        start(ws, {"name": "text"})
        reply = ask(ws, wire.MessageType.OBSERVATION, OBS, 3)
        assert reply.type is wire.MessageType.ERROR and reply.seq == 3
        assert "cannot be sent: a str action (dtype <U5)" in reply.payload["error"]
        assert ask(ws, wire.MessageType.HELLO, {}, 4).type is wire.MessageType.HELLO  # the connection goes on
    (row,) = rows_of(bridge, "text", count=1)
    assert (row.status.value, row.steps) == ("error", 0) and "dtype <U5" in row.reason
    assert not events(bridge.trace(row.episode_id), "action")


def test_a_seed_and_index_past_int64_are_kept_in_the_trace_and_the_episode_is_recorded(bridge: BridgeProcess) -> None:
    with connect(bridge.url) as ws:
        start(ws, {"name": "bigseed", "seed": 2**63, "episode_idx": 2**64 - 1})
        assert ask(ws, wire.MessageType.OBSERVATION, OBS, 3).type is wire.MessageType.ACTION
        ws.send(wire.pack(wire.MessageType.EPISODE_END, {"metrics": {"success": True}}, 4))
        assert ask(ws, wire.MessageType.HELLO, {}, 5).type is wire.MessageType.HELLO
    (row,) = rows_of(bridge, "bigseed", count=1)
    assert (row.status.value, row.index) == ("success", 0) and 0 <= row.seed < 2**63
    harness = events(bridge.trace(row.episode_id), "episode.start")[0]["task"]["harness_task"]
    assert (harness["seed"], harness["episode_idx"]) == (2**63, 2**64 - 1)


def test_an_episode_whose_record_fails_is_recorded_without_its_trace(bridge: BridgeProcess) -> None:
    with connect(bridge.url) as ws:
        start(ws, {"name": "surrogate"})
        reply = ask(ws, wire.MessageType.OBSERVATION, OBS, 3)
        assert reply.type is wire.MessageType.ERROR and "agent raised ValueError" in reply.payload["error"]
    (row,) = rows_of(bridge, "surrogate", count=1)
    assert row.status.value == "error" and row.reason == "agent raised ValueError: bad \\udcff text"
    assert "recording the episode raised UnicodeEncodeError" in (row.detail or "")


def test_bad_frames_and_verdicts_are_answered_and_recorded_and_the_connection_goes_on(bridge: BridgeProcess) -> None:
    nested: list[Any] = [0]
    for _ in range(1000):
        nested = [nested]
    with connect(bridge.url) as ws:
        start(ws, {"name": "deep"})
        reply = ask(ws, wire.MessageType.OBSERVATION, {"state": nested}, 3)
        assert reply.type is wire.MessageType.ERROR and reply.seq == 3 and "nested too deeply" in reply.payload["error"]
        ws.send(msgpack.packb({"type": "observation", "payload": {}, "seq": "three", "timestamp": 0.0}))
        reply = wire.unpack(ws.recv(timeout=10))
        assert (
            reply.type is wire.MessageType.ERROR and reply.seq == 0 and "seq must be an integer" in str(reply.payload)
        )
        start(ws, {"name": "verdict"}, 4)
        assert ask(ws, wire.MessageType.OBSERVATION, OBS, 5).type is wire.MessageType.ACTION
        ws.send(wire.pack(wire.MessageType.EPISODE_END, {"metrics": {"success": "false"}}, 6))
        assert ask(ws, wire.MessageType.HELLO, {}, 7).type is wire.MessageType.HELLO
    (deep,) = rows_of(bridge, "deep", count=1)
    assert deep.status.value == "infra_invalid" and "undecodable observation" in deep.reason
    (verdict,) = rows_of(bridge, "verdict", count=1)
    assert verdict.status.value == "infra_invalid" and verdict.success is False
    assert verdict.reason == "EPISODE_END metrics.success must be true or false, got 'false'"


def test_a_new_connection_is_served_while_33_others_wait_on_their_agents(bridge: BridgeProcess, tmp_path: Path) -> None:
    """More busy connections than the 32 threads a shared pool had: each connection has its own thread."""
    gate = tmp_path / "gate"
    with ExitStack() as stack:
        stack.callback(gate.touch)  # whatever happens, the agents stop waiting
        busy = [stack.enter_context(connect(bridge.url)) for _ in range(33)]
        for ws in busy:
            start(ws, {"name": "gated", "instruction": str(gate)})
            ws.send(wire.pack(wire.MessageType.OBSERVATION, OBS, 3, images=True))
        with connect(bridge.url) as late:
            assert ask(late, wire.MessageType.HELLO, {}, 1).type is wire.MessageType.HELLO
        assert not gate.exists()  # answered while every one of the 33 was still acting
        gate.touch()
        assert {wire.unpack(ws.recv(timeout=20)).type for ws in busy} == {wire.MessageType.ACTION}


def test_sigterm_during_a_stuck_act_records_the_episode_and_completes_the_run(tmp_path: Path) -> None:
    served = BridgeProcess("--agent", "vlaeval_fixtures:ScriptedAgent", "--max-frame-mb", "1", log_dir=tmp_path)
    with connect(served.url, max_size=None) as big:  # a frame over --max-frame-mb closes its connection
        big.send(wire.pack(wire.MessageType.HELLO, {"pad": b"\0" * 2**21}, 1))
        with pytest.raises(ConnectionClosed) as closed:
            big.recv(timeout=10)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009
    with connect(served.url) as ws:
        start(ws, {"name": "gated", "instruction": str(tmp_path / "never")})
        ws.send(wire.pack(wire.MessageType.OBSERVATION, OBS, 3, images=True))
        time.sleep(0.5)  # let the act begin (the episode is recorded the same way if it has not)
        served.proc.send_signal(signal.SIGTERM)
        assert served.proc.wait(timeout=30) == 0
    (row,) = served.rows()
    assert row.status.value == "infra_invalid" and row.reason.startswith("the bridge stopped mid-episode")
    with EvalLog.open(served.run_dir) as log:
        assert log.info().status == "complete"
