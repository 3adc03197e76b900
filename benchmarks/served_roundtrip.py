"""What serving costs: vla-eval's own client steps a trivial benchmark against hylo's bridge and against a reference
server built on vla-eval's `PredictModelServer`, with the same trivial policy (a zero 7-d action).

The benchmark sends two 224×224 RGB cameras (PNG, as vla-eval's client always does), an 8-d state and an
instruction at every step; vla-eval's `SyncEpisodeRunner` drives it over vla-eval's `Connection`. Each server runs
in its own process; the client runs here. Two figures per server:

- `*_steps_per_s`: environment steps per second of wall time, seen by the client (the whole round trip)
- `*_server_us_per_obs`: time the server spends per observation, from the frame received to the action sent — both
  servers are instrumented the same way, by wrapping the socket their connection handler reads and writes

Repeats are interleaved (hylo, reference, hylo, ...) so that drift in the machine's speed hits both alike; each
figure is the median over repeats. Goals: `ratio` (hylo / reference steps per second) ≥ 1.0, and hylo's server time
per observation at most the reference's. The hylo bridge records everything it serves (EvalLog with the trace,
default shield on), as it does in use.

`--clients N` measures batched serving instead: N vla-eval clients at once, each on its own connection, against
the bridge with one agent per connection and against `--batch N` (one agent answering every connection in
`act_batch` calls). The policy's call costs `--call-sleep-ms` (default 20) on one device that every copy of it shares
(a lock held for the call, as a GPU is to the CPU): unbatched, the N agents queue for the device one call at a time,
batched one call answers up to N, so `throughput_ratio` (batched / unbatched steps per second, all clients together)
should approach N. It prints `clients`, `call_sleep_ms`, `unbatched_steps_per_s`, `batched_steps_per_s`,
`throughput_ratio` and the batched bridge's `mean_batch_size`.

    python benchmarks/served_roundtrip.py            # a short table
    python benchmarks/served_roundtrip.py --json     # one JSON object on stdout
    python benchmarks/served_roundtrip.py --json --clients 4 --call-sleep-ms 20
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ACTION_DIM = 7


# -- the servers (each runs in its own process: `--serve hylo|reference`) ----------------------------------------------


class TimedSocket:
    """Wraps a server's WebSocket: the time from an observation frame received to the next frame sent."""

    def __init__(self, ws: Any, samples: list[float]) -> None:
        self._ws = ws
        self._samples = samples
        self._t0: float | None = None

    def __aiter__(self) -> Any:
        return self._frames()

    async def _frames(self) -> Any:
        async for frame in self._ws:
            self._t0 = time.perf_counter() if b"observation" in frame[:48] else None
            yield frame

    async def send(self, data: Any) -> None:
        await self._ws.send(data)
        if self._t0 is not None:
            self._samples.append(time.perf_counter() - self._t0)
            self._t0 = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ws, name)


def _flush(samples: list[float], timing_file: Path) -> None:
    with timing_file.open("a") as out:
        out.write(json.dumps(samples) + "\n")


def serve_hylo(timing_file: Path, batch: int | None = None, call_sleep_ms: float = 0.0) -> None:
    import threading

    import gymnasium.spaces as spaces

    from hylo.bridges.batched_agent import BatchedAgent
    from hylo.bridges.connections import Agents
    from hylo.bridges.served_run import ServedRun
    from hylo.bridges.vlaeval_server import AgentPool, VlaEvalBridge
    from hylo.core.agent import AgentBase, AgentRequirements
    from hylo.core.chunk import ActionChunk

    device = threading.Lock()  # every copy of the policy shares the one device

    class ZeroAgent(AgentBase):
        requirements = AgentRequirements(
            action_space=spaces.Box(-1.0, 1.0, shape=(ACTION_DIM,), dtype=np.float32), needs_images=False
        )
        zero = np.zeros(ACTION_DIM, dtype=np.float32)

        def _call(self) -> None:
            if call_sleep_ms:
                with device:
                    time.sleep(call_sleep_ms / 1000.0)

        def act(self, obs: Any) -> ActionChunk:
            self._call()
            return ActionChunk.single(self.zero)

        def act_batch(self, observations: list[Any], contexts: list[Any]) -> list[ActionChunk]:
            self._call()  # one call of the device for the whole batch
            return [ActionChunk.single(self.zero) for _ in observations]

    class TimedBridge(VlaEvalBridge):
        async def handle_connection(self, ws: Any) -> None:
            samples: list[float] = []
            try:
                await super().handle_connection(TimedSocket(ws, samples))
            finally:
                _flush(samples, timing_file)

    log_dir = Path(tempfile.mkdtemp(prefix="hylo-served-bench-"))
    run = ServedRun(log_dir, run_id="bench", agent="zero", spec={})
    agent = ZeroAgent()
    agents: Agents = AgentPool(ZeroAgent, agent) if batch is None else BatchedAgent(agent, batch, 0.010)
    bridge = TimedBridge(agents, run, agent_label="zero", action_space=agent.requirements.action_space)
    asyncio.run(bridge.serve("127.0.0.1", 0, started=lambda port: print(f"PORT {port}", flush=True)))


def serve_reference(timing_file: Path) -> None:
    import anyio
    from vla_eval.model_servers import serve as vla_serve
    from vla_eval.model_servers.predict import PredictModelServer

    class ZeroPolicy(PredictModelServer):
        zero = np.zeros(ACTION_DIM, dtype=np.float32)

        def predict(self, obs: Any, ctx: Any) -> dict[str, Any]:
            return {"actions": self.zero}

        def get_action_spec(self) -> dict[str, Any]:
            return {}

        def get_observation_spec(self) -> dict[str, Any]:
            return {}

    handle = vla_serve._handle_connection

    async def timed(ws: Any, model_server: Any) -> None:
        samples: list[float] = []
        try:
            await handle(TimedSocket(ws, samples), model_server)
        finally:
            _flush(samples, timing_file)

    vla_serve._handle_connection = timed

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            port = await tg.start(vla_serve.serve_async, ZeroPolicy(), "127.0.0.1", 0)
            print(f"PORT {port}", flush=True)

    anyio.run(main)


# -- the client -------------------------------------------------------------------------------------------------------


def make_benchmark(size: int, steps: int) -> Any:
    from vla_eval.benchmarks.base import StepBenchmark, StepResult

    yy, xx = np.mgrid[0:size, 0:size]
    front = np.stack([xx % 256, yy % 256, (xx + yy) % 256], axis=-1).astype(np.uint8)
    wrist = np.ascontiguousarray(front[::-1])

    class Trivial(StepBenchmark):
        def get_tasks(self) -> list[dict[str, Any]]:
            return [{"name": "trivial"}]

        def reset(self, task: Any) -> int:
            return 0

        def step(self, action: Any) -> StepResult:
            self.t = getattr(self, "t", 0) + 1
            return StepResult(obs=self.t, reward=0.0, done=self.t % steps == 0, info={})

        def make_obs(self, raw_obs: Any, task: Any) -> dict[str, Any]:
            return {
                "images": {"front": front, "wrist": wrist},
                "state": np.zeros(8),
                "task_description": "do nothing",
            }

        def get_step_result(self, step_result: StepResult) -> dict[str, Any]:
            return {"success": False}

    return Trivial()


def client_run(url: str, size: int, steps: int, episodes: int) -> float:
    """Steps per second over `episodes` episodes of `steps` steps on one connection."""
    import anyio
    from vla_eval.connection import Connection
    from vla_eval.runners.sync_runner import SyncEpisodeRunner

    async def main() -> float:
        conn = Connection(url, timeout=60)
        await conn.connect()
        benchmark = make_benchmark(size, steps)
        (task,) = benchmark.get_tasks()
        runner = SyncEpisodeRunner()
        await runner.run_episode(benchmark, task, conn, max_steps=2)  # warm-up
        t0 = time.perf_counter()
        total = 0
        for _ in range(episodes):
            result = await runner.run_episode(benchmark, task, conn, max_steps=steps)
            total += int(result["steps"])
        elapsed = time.perf_counter() - t0
        await conn.close()
        return total / elapsed

    return float(anyio.run(main))


def clients_run(url: str, clients: int, size: int, steps: int, episodes: int) -> float:
    """Steps per second of `clients` connections stepping at once: the sum of their rates (each over its own timed
    episodes, which overlap)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(clients) as pool:
        return sum(pool.map(lambda _: client_run(url, size, steps, episodes), range(clients)))


class Server:
    def __init__(self, kind: str, timing_file: Path, *flags: str) -> None:
        self.timing_file = timing_file
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--serve", kind, "--timing-file", str(timing_file), *flags],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.startswith("PORT "):
            raise RuntimeError(f"{kind} server did not start: {line!r}")
        self.url = f"ws://127.0.0.1:{int(line.split()[1])}"

    def take_samples(self, connections: int) -> list[float]:
        """The per-observation times of the last `connections` connections (waits for them to be written)."""
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            lines = self.timing_file.read_text().splitlines() if self.timing_file.exists() else []
            if len(lines) >= connections:
                self.timing_file.write_text("")
                return [s for line in lines for s in json.loads(line)][2:]  # without the warm-up episode
            time.sleep(0.02)
        raise RuntimeError("the server did not report its timings")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)


def measure(size: int, steps: int, episodes: int, repeats: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        servers = {kind: Server(kind, Path(tmp) / f"{kind}.timing") for kind in ("hylo", "reference")}
        rates: dict[str, list[float]] = {kind: [] for kind in servers}
        server_us: dict[str, list[float]] = {kind: [] for kind in servers}
        try:
            for _ in range(repeats):
                for kind, server in servers.items():
                    rates[kind].append(client_run(server.url, size, steps, episodes))
                    server_us[kind].append(statistics.median(server.take_samples(1)) * 1e6)
        finally:
            for server in servers.values():
                server.stop()
    hylo_rate = statistics.median(rates["hylo"])
    reference_rate = statistics.median(rates["reference"])
    return {
        "hylo_bridge_steps_per_s": round(hylo_rate, 2),
        "vlaeval_reference_steps_per_s": round(reference_rate, 2),
        "ratio": round(hylo_rate / reference_rate, 4),
        "hylo_server_us_per_obs": round(statistics.median(server_us["hylo"]), 1),
        "reference_server_us_per_obs": round(statistics.median(server_us["reference"]), 1),
    }


def measure_batched(
    clients: int, call_sleep_ms: float, size: int, steps: int, episodes: int, repeats: int
) -> dict[str, float]:
    """`--clients N`: N clients at once against one agent per connection and against `--batch N`."""
    import urllib.request

    sleep = ["--call-sleep-ms", str(call_sleep_ms)]
    with tempfile.TemporaryDirectory() as tmp:
        servers = {
            "unbatched": Server("hylo", Path(tmp) / "unbatched.timing", *sleep),
            "batched": Server("hylo", Path(tmp) / "batched.timing", *sleep, "--batch", str(clients)),
        }
        rates: dict[str, list[float]] = {kind: [] for kind in servers}
        try:
            for _ in range(repeats):
                for kind, server in servers.items():
                    rates[kind].append(clients_run(server.url, clients, size, steps, episodes))
            health_url = servers["batched"].url.replace("ws://", "http://") + "/health"
            with urllib.request.urlopen(health_url, timeout=10) as response:
                batch = json.loads(response.read())["batch"]
        finally:
            for server in servers.values():
                server.stop()
    unbatched, batched = statistics.median(rates["unbatched"]), statistics.median(rates["batched"])
    return {
        "clients": clients,
        "call_sleep_ms": call_sleep_ms,
        "unbatched_steps_per_s": round(unbatched, 2),
        "batched_steps_per_s": round(batched, 2),
        "throughput_ratio": round(batched / unbatched, 4),
        "mean_batch_size": batch["mean_batch_size"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    parser.add_argument("--size", type=int, default=224, help="camera height and width (default 224)")
    parser.add_argument("--steps", type=int, default=50, help="steps per episode (default 50)")
    parser.add_argument("--episodes", type=int, default=4, help="episodes per repeat (default 4)")
    parser.add_argument("--repeats", type=int, default=5, help="interleaved repeats per server (default 5)")
    parser.add_argument(
        "--clients", type=int, default=None, help="measure batched serving with this many clients at once (below)"
    )
    parser.add_argument(
        "--call-sleep-ms", type=float, default=None, help="with --clients: the device's time per policy call (20)"
    )
    parser.add_argument("--serve", choices=("hylo", "reference"), help=argparse.SUPPRESS)
    parser.add_argument("--batch", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--timing-file", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve == "hylo":
        serve_hylo(args.timing_file, args.batch, args.call_sleep_ms or 0.0)
        return
    if args.serve == "reference":
        serve_reference(args.timing_file)
        return
    if args.clients is not None:
        sleep_ms = 20.0 if args.call_sleep_ms is None else args.call_sleep_ms
        figures = measure_batched(args.clients, sleep_ms, args.size, args.steps, args.episodes, args.repeats)
    else:
        figures = measure(args.size, args.steps, args.episodes, args.repeats)
    if args.json:
        print(json.dumps(figures))
        return
    for key, value in figures.items():
        print(f"{key:32s} {value}")


if __name__ == "__main__":
    main()
