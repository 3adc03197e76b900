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

from pydantic import BaseModel, ConfigDict

from hylo.core.errors import InvalidAction, SimulationDiverged
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
    how: Literal["exit", "kill", "segv", "raise", "invalid", "diverged"] = "exit"
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
    raise ValueError(f"tick failed at step {step}")


class Verdict(Node):
    """Success, with the pid it is fed as the metric `pid`."""

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
