"""Nodesets for the server-mode tests. A nodeset's subprocess imports this module by name (`source=
"remote_fixtures:PROBE"`): pytest puts this directory on `sys.path`, and the worker hands its `sys.path` on.

`probe` (owner agent) and `probe_env` (owner env) have the same two nodes:
- `<nodeset>.tick`: takes iterIn's step, returns its process' pid; on step `fail_at` it fails as `how` says (once
  per `marker` file when one is given: the first process to create the file fails)
- `<nodeset>.verdict`: the evaluate node; success, with the pid it is fed as a metric

`probe_plan` compiles a graph of the two.
"""

from __future__ import annotations

import os
import resource
import signal
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict

from hylo.core.errors import AgentTimeout, InvalidAction, OverLimit, SimulationDiverged
from hylo.graph import GraphBuilder, Node, Nodeset, Owner, Plan, Port, Role, Wire, compile_graph


def _first_time(marker: str | None) -> bool:
    if marker is None:
        return True
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return False
    os.close(fd)
    return True


class TickConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    fail_at: int | None = None
    how: Literal["exit", "kill", "segv", "raise", "invalid", "diverged", "timeout", "over_limit"] = "exit"
    marker: str | None = None


class Tick(Node):
    """Reports its pid; fails on a chosen step."""

    config_model = TickConfig
    inputs = (Port("step", Wire.INTEGER),)
    outputs = (Port("pid", Wire.INTEGER),)

    def forward(self, inputs: dict[str, Any]) -> dict[str, Any]:
        config = self.config
        assert isinstance(config, TickConfig)
        if inputs["step"] == config.fail_at and _first_time(config.marker):
            _fail(config.how, inputs["step"])
        return {"pid": os.getpid()}


def _fail(how: str, step: int) -> None:
    if how == "exit":
        os._exit(3)
    if how == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    if how == "segv":
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        os.kill(os.getpid(), signal.SIGSEGV)
    if how == "invalid":
        raise InvalidAction(f"action refused at step {step}")
    if how == "diverged":
        raise SimulationDiverged("BADQACC", f"step {step}")
    if how == "timeout":  # a node's own remote call that timed out
        raise AgentTimeout(None, 0.25, f"infer at step {step}")
    if how == "over_limit":
        raise OverLimit("infra_invalid", "env timeout", f"env step at step {step} ran past its limit")
    raise ValueError(f"tick failed at step {step}")


class Verdict(Node):
    """Judges success (which, with no step node, cannot make the episode a success), with the pid it is fed as the
    metric `pid`."""

    role = Role.EVALUATE
    inputs = (Port("pid", Wire.INTEGER, required=False),)
    outputs = (Port("success", Wire.BOOL), Port("metrics", Wire.JSON))

    def forward(self, inputs: dict[str, Any]) -> dict[str, Any]:
        return {"success": True, "metrics": {"pid": inputs.get("pid")}}


def _nodeset(name: str, owner: Owner) -> Nodeset:
    classes = tuple(
        type(
            f"{base.__name__}[{name}]",
            (base,),
            {"type_name": f"{name}.{suffix}", "nodeset": name, "owner": owner, "__module__": __name__},
        )
        for suffix, base in (("tick", Tick), ("verdict", Verdict))
    )
    return Nodeset(name, classes, "Test nodes for server mode.", owner, source=f"{__name__}:{name.upper()}")


PROBE = _nodeset("probe", Owner.AGENT)
PROBE_ENV = _nodeset("probe_env", Owner.ENV)


def probe_plan(nodeset: str = "probe", mode: str = "server", budget: int = 3, **tick: Any) -> Plan:
    """iterIn → `<nodeset>.tick` (its pid carried) → iterOut → `<nodeset>.verdict`, `budget` iterations."""
    g = GraphBuilder("probe", step_budget=budget)
    loop_in, loop_out = g.loop(carry={"pid": "integer"})
    node = g.node(f"{nodeset}.tick", "tick", **tick)
    verdict = g.node(f"{nodeset}.verdict", "verdict")
    g.connect(loop_in["step"], node["step"]).connect(node["pid"], loop_out["pid"])
    g.connect(loop_out["final_pid"], verdict["pid"])
    g.nodeset(nodeset, mode)
    return compile_graph(g.build(), nodesets={"probe": PROBE, "probe_env": PROBE_ENV})


class Frame(Node):
    """A 3 MB camera frame, larger than a socket's buffers."""

    type_name = "frames.frame"
    nodeset = "frames"
    outputs = (Port("image", Wire.IMAGE),)

    def forward(self, inputs: dict[str, Any]) -> dict[str, Any]:
        return {"image": np.full((1024, 1024, 3), 7, np.uint8)}


class Echo(Node):
    """Gives back the frame it got."""

    type_name = "echo.echo"
    nodeset = "echo"
    inputs = (Port("image", Wire.IMAGE),)
    outputs = (Port("image", Wire.IMAGE),)

    def forward(self, inputs: dict[str, Any]) -> dict[str, Any]:
        return {"image": inputs["image"]}


FRAMES = Nodeset("frames", (Frame,), "A big frame.", Owner.GRAPH, source=f"{__name__}:FRAMES")
ECHO = Nodeset("echo", (Echo,), "Echoes a frame.", Owner.GRAPH, source=f"{__name__}:ECHO")


def echo_plan() -> Plan:
    """One big frame fed to two echo nodes of one server-mode nodeset: both in the same level."""
    g = GraphBuilder("echoes")
    frame = g.node("frames.frame", "frame")
    for name in ("a", "b"):
        g.connect(frame["image"], g.node("echo.echo", name)["image"])
    g.nodeset("echo", "server")
    return compile_graph(g.build(), nodesets={"frames": FRAMES, "echo": ECHO})
