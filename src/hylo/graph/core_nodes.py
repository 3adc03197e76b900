"""The `core` nodeset: the loop pivots, constants, and reads and writes of the graph's state containers."""

from __future__ import annotations

import copy
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from hylo.graph.node import Node, Nodeset, Owner, Port, Role, RunContext
from hylo.graph.wires import Wire


class _Config(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CarryPort(_Config):
    name: str = Field(min_length=1, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    wire: Wire = Wire.ANY


class IterInConfig(_Config):
    pair: str = Field(min_length=1, description="id of the paired iterOut")


class IterOutConfig(_Config):
    pair: str = Field(min_length=1, description="id of the paired iterIn")
    carry: list[CarryPort] = Field(default_factory=list, description="values handed from one iteration to the next")

    @field_validator("carry")
    @classmethod
    def _unique(cls, value: list[CarryPort]) -> list[CarryPort]:
        names = [p.name for p in value]
        if len(set(names)) != len(names):
            raise ValueError(f"carry port names must be unique, got {names}")
        return value


class IterIn(Node):
    """Opens each iteration of the loop: `step` is the iteration's index, each carry port the value iterOut
    collected in the previous iteration (or its `init_<name>` input on the first)."""

    type_name = "iterIn"
    nodeset = "core"
    role = Role.LOOP_IN
    config_model = IterInConfig
    inputs = (Port("start", Wire.ANY, required=False, description="anything that must happen before the loop"),)
    outputs = (Port("step", Wire.INTEGER, description="the iteration's index, from 0"),)

    @staticmethod
    def carry_ports(carry: list[CarryPort]) -> tuple[tuple[Port, ...], tuple[Port, ...]]:
        inputs = IterIn.inputs + tuple(Port(f"init_{p.name}", p.wire, required=False) for p in carry)
        outputs = IterIn.outputs + tuple(Port(p.name, p.wire, required=False) for p in carry)
        return inputs, outputs


class IterOut(Node):
    """Closes each iteration: collects the carry ports and the `stop` flag; when the loop ends it emits
    `final_<name>` for each carry port, `final_stop` (whether `stop` ended it) and `final_steps` once, to the
    after-loop band."""

    type_name = "iterOut"
    nodeset = "core"
    role = Role.LOOP_OUT
    config_model = IterOutConfig
    inputs = (Port("stop", Wire.BOOL, required=False, description="truthy ends the loop after this iteration"),)
    outputs = (
        Port("final_stop", Wire.BOOL, description="whether the stop port ended the loop"),
        Port("final_steps", Wire.INTEGER, description="how many iterations ran"),
    )

    @classmethod
    def ports(cls, config: BaseModel | None) -> tuple[tuple[Port, ...], tuple[Port, ...]]:
        carry = config.carry if isinstance(config, IterOutConfig) else []
        inputs = cls.inputs + tuple(Port(p.name, p.wire) for p in carry)
        outputs = cls.outputs + tuple(Port(f"final_{p.name}", p.wire, required=False) for p in carry)
        return inputs, outputs


class ConstantConfig(_Config):
    value: Any = None
    wire: Wire = Wire.JSON


class Constant(Node):
    """A fixed value (from its config), e.g. a prompt or a threshold."""

    type_name = "constant"
    nodeset = "core"
    config_model = ConstantConfig

    @classmethod
    def ports(cls, config: BaseModel | None) -> tuple[tuple[Port, ...], tuple[Port, ...]]:
        wire = config.wire if isinstance(config, ConstantConfig) else Wire.JSON
        return (), (Port("value", wire),)

    def forward(self, inputs: dict[str, Any]) -> dict[str, Any]:
        assert isinstance(self.config, ConstantConfig)
        return {"value": self.config.value}


class ContainerConfig(_Config):
    container: str = Field(min_length=1, description="name of a state container the graph declares")


class _ContainerNode(Node):
    config_model = ContainerConfig

    @classmethod
    def uses_containers(cls, config: BaseModel | None) -> tuple[str, ...]:
        return (config.container,) if isinstance(config, ContainerConfig) else ()

    def start(self, run: RunContext) -> None:
        assert isinstance(self.config, ContainerConfig)
        self._container = run.containers[self.config.container]


class Recall(_ContainerNode):
    """Reads a state container (wire `trigger` from iterIn to read it in every iteration). It gives a copy: what
    reads it cannot change the container, which only its writes and its signal do."""

    type_name = "recall"
    nodeset = "core"
    inputs = (Port("trigger", Wire.ANY, required=False),)
    outputs = (Port("value", Wire.JSON, required=False),)

    def forward(self, inputs: dict[str, Any]) -> dict[str, Any]:
        return {"value": copy.deepcopy(self._container.read())}


class Remember(_ContainerNode):
    """Writes its input into a state container, merged by the container's reducer."""

    type_name = "remember"
    nodeset = "core"
    inputs = (Port("value", Wire.ANY),)

    def forward(self, inputs: dict[str, Any]) -> dict[str, Any]:
        self._container.write(inputs["value"])
        return {}


CONTAINER_NODES = (Recall, Remember)

CORE = Nodeset(
    "core",
    (IterIn, IterOut, Constant, Recall, Remember),
    "Loop pivots, constants and state-container reads and writes.",
    Owner.GRAPH,
)
