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

    python benchmarks/served_roundtrip.py            # a short table
    python benchmarks/served_roundtrip.py --json     # one JSON object on stdout
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


def serve_hylo(timing_file: Path) -> None:
    import gymnasium.spaces as spaces

    from hylo.bridges.served_run import ServedRun
    from hylo.bridges.vlaeval_server import AgentPool, VlaEvalBridge
    from hylo.core.agent import AgentBase, AgentRequirements
    from hylo.core.chunk import ActionChunk

    class ZeroAgent(AgentBase):
        requirements = AgentRequirements(action_space=spaces.Box(-1.0, 1.0, shape=(ACTION_DIM,), dtype=np.float32))
        zero = np.zeros(ACTION_DIM, dtype=np.float32)

        def act(self, obs: Any) -> ActionChunk:
            return ActionChunk.single(self.zero)

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
    bridge = TimedBridge(
        AgentPool(ZeroAgent, agent), run, agent_label="zero", action_space=agent.requirements.action_space
    )
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


class Server:
    def __init__(self, kind: str, timing_file: Path) -> None:
        self.timing_file = timing_file
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--serve", kind, "--timing-file", str(timing_file)],
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    parser.add_argument("--size", type=int, default=224, help="camera height and width (default 224)")
    parser.add_argument("--steps", type=int, default=50, help="steps per episode (default 50)")
    parser.add_argument("--episodes", type=int, default=4, help="episodes per repeat (default 4)")
    parser.add_argument("--repeats", type=int, default=5, help="interleaved repeats per server (default 5)")
    parser.add_argument("--serve", choices=("hylo", "reference"), help=argparse.SUPPRESS)
    parser.add_argument("--timing-file", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve is not None:
        (serve_hylo if args.serve == "hylo" else serve_reference)(args.timing_file)
        return
    figures = measure(args.size, args.steps, args.episodes, args.repeats)
    if args.json:
        print(json.dumps(figures))
        return
    for key, value in figures.items():
        print(f"{key:32s} {value}")


if __name__ == "__main__":
    main()
