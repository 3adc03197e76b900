"""A policy server that speaks openpi's websocket protocol, for the openpi-remote tests; run it as a process.

    python openpi_server.py [--horizon H] [--dim D] [--sleep S] [--fail-at N] [--drop-at N] [--exit-at N]
                            [--record FILE]

It listens on an ephemeral loopback port and prints the port on stdout once it accepts connections. Like openpi's
`WebsocketPolicyServer` it sends its metadata on connect, answers each binary frame with `{"actions": ...}` and, on a
failure, sends the traceback as a text frame and closes. Its codec is written here from openpi-client's
`msgpack_numpy`, independently of hylo's, so the tests check that the two interoperate.

The actions depend on the observation: row i of every column is `0.5 * state[0] + 0.1 * i`. Calls are counted over
all connections, from 1: `--fail-at N` fails call N, `--drop-at N` closes the connection instead of answering call
N, `--exit-at N` ends the process on call N. `--record FILE` appends one JSON line per call: the connection, the
call, the observation's keys, its state, its images' shapes and dtypes, its prompt, and the actions sent (or what
happened instead).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import traceback
from typing import Any

import msgpack
import numpy as np
import websockets.asyncio.server as ws_server
from websockets.exceptions import ConnectionClosed
from websockets.frames import CloseCode


def pack_array(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        return {b"__ndarray__": True, b"data": obj.tobytes(), b"dtype": obj.dtype.str, b"shape": obj.shape}
    if isinstance(obj, np.generic):
        return {b"__npgeneric__": True, b"data": obj.item(), b"dtype": obj.dtype.str}
    return obj


def unpack_array(obj: dict[Any, Any]) -> Any:
    if b"__ndarray__" in obj:
        return np.ndarray(buffer=obj[b"data"], dtype=np.dtype(obj[b"dtype"]), shape=obj[b"shape"])
    if b"__npgeneric__" in obj:
        return np.dtype(obj[b"dtype"]).type(obj[b"data"])
    return obj


class Policy:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.calls = 0
        self.connections = 0

    def record(self, entry: dict[str, Any]) -> None:
        if self.args.record:
            with open(self.args.record, "a") as out:
                out.write(json.dumps(entry) + "\n")

    def infer(self, obs: dict[str, Any], call: int) -> np.ndarray:
        if call == self.args.fail_at:
            raise RuntimeError(f"policy failed on call {call}")
        state = np.asarray(obs["observation/state"], dtype=np.float64)
        rows = [[0.5 * float(state[0]) + 0.1 * i] * self.args.dim for i in range(self.args.horizon)]
        return np.asarray(rows, dtype=np.float32)

    async def handle(self, websocket: ws_server.ServerConnection) -> None:
        self.connections += 1
        conn = self.connections
        await websocket.send(msgpack.packb({"policy": "test", "horizon": self.args.horizon}, default=pack_array))
        while True:
            try:
                frame = await websocket.recv()
            except ConnectionClosed:
                return
            self.calls += 1
            call = self.calls
            obs = msgpack.unpackb(frame, object_hook=unpack_array)
            state = obs.get("observation/state")
            image = obs.get("observation/image")
            wrist = obs.get("observation/wrist_image")
            entry: dict[str, Any] = {
                "conn": conn,
                "call": call,
                "keys": sorted(obs),
                "state": None if state is None else np.asarray(state).tolist(),
                "image": None if image is None else [list(np.shape(image)), str(np.asarray(image).dtype)],
                "wrist_image": None if wrist is None else [list(np.shape(wrist)), str(np.asarray(wrist).dtype)],
                "prompt": obs.get("prompt"),
            }
            if call == self.args.exit_at:
                self.record({**entry, "outcome": "exit"})
                os._exit(0)
            if call == self.args.drop_at:
                self.record({**entry, "outcome": "dropped"})
                await websocket.close(CloseCode.GOING_AWAY, "dropped on purpose")
                return
            await asyncio.sleep(self.args.sleep)
            try:
                actions = self.infer(obs, call)
            except Exception:
                self.record({**entry, "outcome": "failed"})
                try:
                    await websocket.send(traceback.format_exc())
                    await websocket.close(CloseCode.INTERNAL_ERROR, "Internal server error")
                except ConnectionClosed:
                    return
                return
            self.record({**entry, "outcome": "answered", "actions": actions.tolist()})
            try:
                await websocket.send(msgpack.packb({"actions": actions, "server_call": call}, default=pack_array))
            except ConnectionClosed:
                return


async def serve(args: argparse.Namespace) -> None:
    policy = Policy(args)
    async with ws_server.serve(policy.handle, "127.0.0.1", 0, compression=None, max_size=None) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        print(port, flush=True)
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--horizon", type=int, default=4)
    parser.add_argument("--dim", type=int, default=1)
    parser.add_argument("--sleep", type=float, default=0.0)
    parser.add_argument("--fail-at", type=int, default=0)
    parser.add_argument("--drop-at", type=int, default=0)
    parser.add_argument("--exit-at", type=int, default=0)
    parser.add_argument("--record", default="")
    asyncio.run(serve(parser.parse_args()))


if __name__ == "__main__":
    main()
