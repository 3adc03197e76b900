"""The subprocess of a server-mode nodeset, started by `hylo.graph.remote`:

    python -m hylo.graph.host --socket PATH --nodeset NAME --tag TAG --parent PID [--source module:attr]

It connects to the worker's socket, takes the worker's Python path and placement (`init`) and builds its runtime:
an env nodeset builds its benchmark's env (shared by its env nodes); any other nodeset gets the placement's benchmark
and the worker's env spec and capabilities. Privileged simulator state is never available here. Then it builds, sets
up and runs its nodes on request, one request at a time, until the worker tells it to stop or its socket closes;
either way it closes its nodes and its env first. It dies with the worker (`hylo.core.child`: PR_SET_PDEATHSIG on
Linux, and a watch of the worker's pid) and ignores a terminal's Ctrl-C (the worker stops it).

A node is found by type name in the nodeset, which is `get_nodeset(NAME)` or, with `--source`, the `Nodeset` at
`module:attr` (a nodeset defined in code; the worker's `sys.path` is this process' too).

An env nodeset that is a benchmark's also hosts that benchmark's env panel (`BenchmarkPanel`, placed at its
defaults) and answers the panel requests: `/env-panel/info` (its declaration), `/env-panel/state` (`on_load`),
`/env-panel/field` {name, value}, `/env-panel/action` {name}, `/env-panel/options` {name}, `/env-panel/place` {task}
(`place`: a planned episode at once) and `/env-panel/task` (the placed `TaskInstance`); the worker reaches it through
a `RemoteEnvPanelProxy`. Any other nodeset refuses them.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import os
import signal
import socket
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from hylo.core.bus import EventBus
from hylo.core.child import die_with_parent
from hylo.core.environment import Environment
from hylo.core.errors import UnknownChoice
from hylo.core.signals import ContainerSet
from hylo.envs.registry import get_benchmark
from hylo.graph.node import Node, Nodeset, NodesetError, Owner, RunContext, Runtime
from hylo.graph.nodesets import get_nodeset, load_nodeset
from hylo.graph.remote.wire import encode_frame, error_payload, read_frame
from hylo.panels.benchmark import BenchmarkPanel
from hylo.panels.remote import ACTION_OP, FIELD_OP, INFO_OP, OPTIONS_OP, PLACE_OP, STATE_OP, TASK_OP


class Host:
    """One nodeset's nodes and runtime in this subprocess; `handle` answers one request."""

    def __init__(self, nodeset: str, source: str | None, tag: str) -> None:
        self.name = nodeset
        self.source = source
        self.tag = tag
        self.nodeset: Nodeset | None = None
        self.runtime = Runtime()
        self.env: Environment | None = None
        self.panel: BenchmarkPanel | None = None
        self.nodes: dict[str, Node] = {}
        self.runs: dict[str, RunContext] = {}
        self.containers = ContainerSet()
        self.bus = EventBus()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ops: dict[str, Callable[[dict[str, Any]], Any]] = {
            "init": self._init,
            "setup": self._setup,
            "start": self._start,
            "forward": self._forward,
            "after_step": lambda m: self._node(m).after_step(m["value"]),
            "on_signal": self._on_signal,
            "finish": lambda m: self._node(m).finish(m["value"]),
            "close": self._close,
            INFO_OP: lambda m: self._panel().info(),
            STATE_OP: lambda m: self._await(self._panel().on_load()),
            FIELD_OP: lambda m: self._await(self._panel().on_field_change(m["name"], m.get("value"))),
            ACTION_OP: lambda m: self._await(self._panel().on_action(m["name"])),
            OPTIONS_OP: lambda m: self._await(self._panel().on_options(m["name"])),
            TASK_OP: lambda m: self._panel().task_instance(),
            PLACE_OP: lambda m: self._panel().place(m["task"]),
        }

    def handle(self, message: dict[str, Any]) -> Any:
        op = message.get("op")
        handler = self._ops.get(op) if isinstance(op, str) else None
        if handler is None:
            raise ValueError(f"unknown request {op!r}; known: {sorted(self._ops)}")
        if self.nodeset is None and op != "init":
            raise RuntimeError(f"request {op!r} before init")
        return handler(message)

    def serve(self, sock: socket.socket) -> None:
        """Answer requests in order until `shutdown` or the end of the connection."""
        while True:
            message = read_frame(sock)
            if message is None or message.get("op") == "shutdown":
                return
            request = message.get("id")
            try:
                value = self.handle(message)
            except Exception as exc:
                data = encode_frame({"id": request, "error": error_payload(exc)})
            else:
                try:
                    data = encode_frame({"id": request, "value": value})
                except Exception as exc:
                    node = message.get("node")
                    who = f"node {node!r}" if node is not None else f"subprocess {self.tag}"
                    what = f"{who}: its {message.get('op')} result cannot be sent back: {exc}"
                    data = encode_frame({"id": request, "error": error_payload(TypeError(what))})
            try:
                sock.sendall(data)
            except OSError:  # the worker is gone
                return

    def shutdown(self) -> None:
        """Close every node and the env (each failure reported on stderr, none stopping the others)."""
        for node_id, node in list(self.nodes.items()):
            try:
                node.close()
            except Exception as exc:
                print(f"hylo.graph.host {self.tag}: node {node_id!r} failed to close: {exc!r}", file=sys.stderr)
        self.nodes.clear()
        if self.env is not None:
            try:
                self.env.close()
            except Exception as exc:
                print(f"hylo.graph.host {self.tag}: env {self.name!r} failed to close: {exc!r}", file=sys.stderr)
            self.env = None
        if self._loop is not None:
            self._loop.close()

    # -- requests ---------------------------------------------------------------------------------------------------

    def _init(self, message: dict[str, Any]) -> dict[str, Any]:
        sys.path[:] = [str(p) for p in message.get("path") or sys.path]
        allow_import = bool(message.get("allow_import", True))
        nodeset = (
            load_nodeset(self.name, self.source) if self.source else get_nodeset(self.name, allow_import=allow_import)
        )
        if nodeset.name != self.name:
            raise NodesetError(f"{self.source} is nodeset {nodeset.name!r}, not {self.name!r}")
        worker = str(message.get("worker") or "main")
        benchmark = None
        if nodeset.owner is Owner.ENV:
            try:
                benchmark = get_benchmark(nodeset.name, allow_import=allow_import)
            except UnknownChoice:  # an env nodeset that is not a benchmark's
                benchmark = None
        if benchmark is not None:
            self.env = env = benchmark.make_env(render_images=bool(message.get("render_images")))
            self.runtime = Runtime(worker=worker, envs=self._env, benchmark=benchmark, env_spec=env.spec,
                                   env_capabilities=env.capabilities, allow_import=allow_import)  # fmt: skip
            self.panel = BenchmarkPanel(benchmark)
        else:
            placement = message.get("benchmark")
            self.runtime = Runtime(
                worker=worker,
                benchmark=get_benchmark(placement, allow_import=allow_import) if placement else None,
                env_spec=message.get("env_spec"),
                env_capabilities=message.get("env_capabilities"),
                allow_import=allow_import,
            )
        self.nodeset = nodeset
        return {"pid": os.getpid(), "env_panel": self.panel is not None}

    def _env(self, benchmark: str) -> Environment:
        if self.env is None or benchmark != self.name:
            raise RuntimeError(f"subprocess {self.tag} has the env of {self.name!r} only, not {benchmark!r}")
        return self.env

    def _panel(self) -> BenchmarkPanel:
        if self.panel is None:
            raise LookupError(f"nodeset {self.name!r} ({self.tag}) has no env panel: only the env nodeset of a "
                              "benchmark hosts one")  # fmt: skip
        return self.panel

    def _await(self, hook: Awaitable[Any]) -> Any:
        """Run an async hook (a panel's, an async node's forward) on this process' one event loop."""
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
        return self._loop.run_until_complete(hook)

    def _node(self, message: dict[str, Any]) -> Node:
        node_id = message.get("node")
        node = self.nodes.get(node_id) if isinstance(node_id, str) else None
        if node is None:
            raise KeyError(f"no node {node_id!r} in subprocess {self.tag}; it has {sorted(self.nodes)}")
        return node

    def _setup(self, message: dict[str, Any]) -> dict[str, bool]:
        assert self.nodeset is not None
        type_name = message.get("type")
        cls = self.nodeset.types.get(type_name) if isinstance(type_name, str) else None
        if cls is None:
            raise NodesetError(f"nodeset {self.nodeset.name!r} has no node type {type_name!r}; it has "
                               f"{sorted(self.nodeset.types)}")  # fmt: skip
        node = cls(str(message["node"]), cls.parse_config(message.get("config") or {}))
        node.setup(self.runtime)
        for spec in getattr(node, "container_specs", ()) or ():
            self.containers.add(spec)
        self.nodes[node.id] = node
        return {"wants_signals": bool(node.wants_signals), "wants_steps": bool(node.wants_steps)}

    def _start(self, message: dict[str, Any]) -> None:
        node = self._node(message)
        run = RunContext(message["task"], self.containers, self.bus, 0, None)
        self.runs[node.id] = run
        node.start(run)

    def _forward(self, message: dict[str, Any]) -> Any:
        node = self._node(message)
        run = self.runs.get(node.id)
        if run is not None:
            run.step = int(message.get("step") or 0)
        result = node.forward(message["inputs"])
        if inspect.isawaitable(result):
            result = self._await(result)
        return result

    def _on_signal(self, message: dict[str, Any]) -> None:
        self.containers.on_signal(message["value"])
        self._node(message).on_signal(message["value"])

    def _close(self, message: dict[str, Any]) -> None:
        node = self._node(message)
        del self.nodes[node.id]
        node.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hylo.graph.host", description="A server-mode nodeset's process.")
    parser.add_argument("--socket", required=True, help="the worker's unix-domain socket")
    parser.add_argument("--nodeset", required=True, help="the nodeset's name")
    parser.add_argument("--source", help="module:attr of a nodeset defined in code")
    parser.add_argument("--tag", required=True, help="the replica's tag, <nodeset>#<k>")
    parser.add_argument("--parent", type=int, required=True, help="the worker's pid")
    args = parser.parse_args(argv)
    if not die_with_parent(args.parent):  # the worker died before this process could ask to die with it
        return 1
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    host = Host(args.nodeset, args.source, args.tag)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        try:
            sock.connect(args.socket)
        except OSError as exc:
            print(f"hylo.graph.host {args.tag}: cannot connect to {args.socket}: {exc}", file=sys.stderr)
            return 1
        try:
            host.serve(sock)
        finally:
            host.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
