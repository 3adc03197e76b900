"""What a watching client costs a live session: executions with one websocket client reading the session's stream
against the same executions with nobody watching.

A real `hylo serve` app (uvicorn, loopback, an ephemeral port) runs in this process, holding one interactive session:
by default BabyAI's `random` agent in the canonical loop on GoToLocal, rendering a frame per step (what the live view
shows), the same episode every time (placement is sticky, so Play replays it). A repeat presses Play `--executions`
times through the env panel and waits for each to end; its figure is env steps per second of the executions
themselves (their steps over their wall time, as the session reports them).

- `headless`: no client is connected;
- `streamed`: one websocket client, in a process of its own (as a browser would be), reads every message of
  `/api/sessions/{id}/stream` and fetches the latest frame (PNG) at most 10 times a second.

Repeats are interleaved (headless, streamed, headless, ...) so that drift in the machine's speed hits both alike;
each figure is the median over repeats. Goal: ratio = streamed / headless ≥ 0.9.

    python benchmarks/live_stream.py            # a short table
    python benchmarks/live_stream.py --json     # {"headless_steps_per_s", "streamed_steps_per_s", "ratio", ...}
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

os.environ.setdefault("MUJOCO_GL", "egl")

import httpx
import uvicorn

from hylo.jobs import JobScheduler
from hylo.server import create_app
from hylo.sessions import SessionManager

GOAL_RATIO = 0.9

CLIENT = r"""
import json, signal, sys, time, urllib.request
from websockets.sync.client import connect

base, path = sys.argv[1], sys.argv[2]
messages = events = frames = 0
last_fetch = 0.0
stop = False
def finish(*_):
    global stop
    stop = True
signal.signal(signal.SIGTERM, finish)
with connect(base.replace("http://", "ws://") + path, open_timeout=30) as ws:
    print("connected", flush=True)
    while not stop:
        try:
            message = json.loads(ws.recv(timeout=0.2))
        except TimeoutError:
            continue
        messages += 1
        events += len(message.get("events", ()))
        frame = (message.get("session") or {}).get("frame")
        if frame and time.monotonic() - last_fetch > 0.1:
            last_fetch = time.monotonic()
            urllib.request.urlopen(base + frame["url"]).read()
            frames += 1
print(json.dumps({"messages": messages, "events": events, "frames": frames}), flush=True)
"""


class Server:
    def __init__(self, log_dir: str) -> None:
        self.scheduler = JobScheduler(log_dir)
        self.sessions = SessionManager()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        app = create_app(self.scheduler, sessions=self.sessions)
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [sock]}, daemon=True)
        self.thread.start()
        while not self.server.started:
            time.sleep(0.02)
        self.client = httpx.Client(base_url=self.url, timeout=300)

    def close(self) -> None:
        self.client.close()
        self.server.should_exit = True
        self.thread.join(60)
        self.scheduler.close()


def run_executions(server: Server, session: dict[str, Any], executions: int) -> tuple[int, float]:
    """Press Play `executions` times, each after the last has ended; returns (steps, wall seconds) of the
    executions as the session measured them."""
    client, sid, panel = server.client, session["id"], session["panel"]
    steps, wall = 0, 0.0
    for _ in range(executions):
        before = client.get(f"/api/sessions/{sid}").json()["executions"]
        response = client.post(f"/api/env-panels/{panel}/action", json={"name": "play"})
        response.raise_for_status()
        while True:
            state = client.get(f"/api/sessions/{sid}").json()
            if state["state"] == "idle" and state["executions"] == before + 1:
                break
            time.sleep(0.05)  # the figure is the execution's own time: polling only has to notice its end
        steps += state["last_execution"]["steps"]
        wall += state["last_execution"]["wall_s"]
    return steps, wall


def watch(server: Server, session_id: str) -> subprocess.Popen[str]:
    client = subprocess.Popen(
        [sys.executable, "-c", CLIENT, server.url, f"/api/sessions/{session_id}/stream"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert client.stdout is not None
    if client.stdout.readline().strip() != "connected":
        raise RuntimeError("the stream client could not connect")
    return client


def measure(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as log_dir:
        server = Server(log_dir)
        try:
            request = {"agent": args.agent, "placement": {"benchmark": args.benchmark, "episode_index": 0},
                       "step_budget": args.max_steps, "render": not args.no_render}  # fmt: skip
            if args.task:
                request["placement"]["task"] = args.task
            response = server.client.post("/api/sessions", json=request)
            if response.status_code != 201:
                raise RuntimeError(f"could not start the session: {response.text}")
            session = response.json()
            run_executions(server, session, 1)  # warm-up: the agent's and env's first calls
            rates: dict[str, list[float]] = {"headless": [], "streamed": []}
            received: list[dict[str, int]] = []
            total_steps = 0
            for _ in range(args.repeats):
                for variant in ("headless", "streamed"):
                    client = watch(server, session["id"]) if variant == "streamed" else None
                    steps, wall = run_executions(server, session, args.executions)
                    if client is not None:
                        time.sleep(0.2)  # let the client read the tail of the stream
                        client.terminate()
                        out, _ = client.communicate(timeout=30)
                        received.append(json.loads(out.strip().splitlines()[-1]))
                    rates[variant].append(steps / wall)
                    total_steps += steps
            server.client.delete(f"/api/sessions/{session['id']}")
        finally:
            server.close()
    headless, streamed = (statistics.median(rates[v]) for v in ("headless", "streamed"))
    return {
        "headless_steps_per_s": round(headless, 1),
        "streamed_steps_per_s": round(streamed, 1),
        "ratio": round(streamed / headless, 3),
        "benchmark": args.benchmark,
        "agent": args.agent,
        "repeats": args.repeats,
        "executions_per_repeat": args.executions,
        "steps": total_steps,
        "client_events_per_repeat": statistics.median(r["events"] for r in received),
        "client_messages_per_repeat": statistics.median(r["messages"] for r in received),
        "client_frames_per_repeat": statistics.median(r["frames"] for r in received),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--benchmark", default="babyai")
    parser.add_argument("--task", default="GoToLocal")
    parser.add_argument("--agent", default="random")
    parser.add_argument("--max-steps", type=int, default=None, help="the session's step budget")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--executions", type=int, default=20, help="executions per repeat")
    parser.add_argument("--no-render", action="store_true", help="no frames (the env renders none)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    figures = measure(args)
    if args.json:
        print(json.dumps(figures))
        return 0
    print(
        f"hylo live stream: {args.benchmark} / {args.agent}, median of {args.repeats} interleaved repeats of "
        f"{args.executions} executions\n"
        f"  headless  {figures['headless_steps_per_s']:>10.1f} steps/s\n"
        f"  streamed  {figures['streamed_steps_per_s']:>10.1f} steps/s   (the client got "
        f"{figures['client_events_per_repeat']:.0f} events in {figures['client_messages_per_repeat']:.0f} messages "
        f"and {figures['client_frames_per_repeat']:.0f} frames per repeat)\n"
        f"  ratio     {figures['ratio']:>10.3f}   (goal >= {GOAL_RATIO})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
