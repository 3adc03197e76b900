"""Env nodesets: every registered benchmark yields one, with no extra code.

- `<bench>.reset`: idempotent ensure-live, once per execution in the pre-loop band. It brings the env to the episode
  the panel placed (re-arming an episode a previous execution finished); it never chooses one.
- `<bench>.observe`, `.observe_instruction`, `.observe_state`, `.observe_image`: pure reads. After the episode's end
  they return the terminal frame.
- `<bench>.step`: the only in-episode advance. Its `action` input is served by the execution's chunk executor through
  the safety shield; it emits reward / terminated / truncated / success / info and never an observation.
- `<bench>.evaluate`: the verdict, once, in the after-loop band.

The env is the worker's (built once by its env manager and shared by all env nodes of the worker).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from pydantic import BaseModel, ConfigDict

from hylo.core.environment import Environment
from hylo.core.types import Observation, StepResult, TaskInstance
from hylo.graph.node import Node, Nodeset, Owner, Port, Role, RunContext, Runtime
from hylo.graph.wires import Wire


@dataclass
class Liveness:
    """What the env nodes of one env know about its episode: which task it was last reset to, and whether it has
    been stepped since."""

    task: str | None = None
    fresh: bool = False


_LIVENESS: weakref.WeakKeyDictionary[Environment, Liveness] = weakref.WeakKeyDictionary()


def liveness(env: Environment) -> Liveness:
    state = _LIVENESS.get(env)
    if state is None:
        state = _LIVENESS[env] = Liveness()
    return state


class EnvNode(Node):
    owner = Owner.ENV
    benchmark: ClassVar[str] = ""
    _TRIGGER = Port("trigger", Wire.ANY, required=False, description="anything that must happen first")

    def setup(self, runtime: Runtime) -> None:
        self.env = runtime.env(self.benchmark)
        self.live = liveness(self.env)

    def start(self, run: RunContext) -> None:
        self.task = run.task


class EnvReset(EnvNode):
    """Ensure the placed episode is live: reset the env to it unless it was just reset to it and not stepped."""

    role = Role.RESET
    inputs = (EnvNode._TRIGGER,)
    outputs = (
        Port("observation", Wire.OBSERVATION),
        Port("instruction", Wire.TEXT, required=False),
    )

    def forward(self, inputs: dict[str, Any]) -> dict[str, Any]:
        task: TaskInstance = self.task
        live = self.live
        if live.fresh and live.task == task.digest:
            obs = self.env.observe()
        else:
            live.fresh = False
            obs = self.env.reset(task)
            live.task, live.fresh = task.digest, True
        return _with_instruction(obs)


def _with_instruction(obs: Any) -> dict[str, Any]:
    instruction = obs.get("instruction") if hasattr(obs, "get") else None
    if instruction is None:
        return {"observation": obs}
    return {"observation": obs, "instruction": str(instruction)}


class EnvObserve(EnvNode):
    """The current observation (a pure read; after the end, the terminal frame)."""

    role = Role.OBSERVE
    inputs = (EnvNode._TRIGGER,)
    outputs = EnvReset.outputs

    def forward(self, inputs: dict[str, Any]) -> dict[str, Any]:
        return _with_instruction(self.env.observe())


class EnvObserveInstruction(EnvNode):
    """The episode's language instruction."""

    role = Role.OBSERVE
    inputs = (EnvNode._TRIGGER,)
    outputs = (Port("instruction", Wire.TEXT),)

    def forward(self, inputs: dict[str, Any]) -> dict[str, Any]:
        instruction = Observation(self.env.observe()).instruction
        if instruction is None:
            raise KeyError(f"benchmark {self.benchmark!r} gives no instruction in its observation")
        return {"instruction": instruction}


class EnvObserveState(EnvNode):
    """The observation's `state` vector."""

    role = Role.OBSERVE
    inputs = (EnvNode._TRIGGER,)
    outputs = (Port("state", Wire.VECTOR),)

    def forward(self, inputs: dict[str, Any]) -> dict[str, Any]:
        obs = self.env.observe()
        if "state" not in obs:
            raise KeyError(f"benchmark {self.benchmark!r} has no 'state' in its observation; it has {sorted(obs)}")
        return {"state": obs["state"]}


class ImageConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    camera: str | None = None


class EnvObserveImage(EnvNode):
    """One camera's latest frame (the first camera unless `camera` names one); the env renders frames from the
    execution that uses this node on."""

    role = Role.OBSERVE
    config_model = ImageConfig
    inputs = (EnvNode._TRIGGER,)
    outputs = (Port("image", Wire.IMAGE),)

    def setup(self, runtime: Runtime) -> None:
        super().setup(runtime)
        runtime.need_images(self.benchmark)

    def forward(self, inputs: dict[str, Any]) -> dict[str, Any]:
        images = Observation(self.env.observe()).images
        assert isinstance(self.config, ImageConfig)
        camera = self.config.camera or next(iter(images), None)
        if camera is None or camera not in images:
            raise KeyError(f"no camera {camera!r} in the observation of {self.benchmark!r}; it has {sorted(images)}")
        return {"image": images[camera]}


class EnvStep(EnvNode):
    """Advance the episode by one action."""

    role = Role.ACTUATOR
    inputs = (Port("action", Wire.CHUNK, description="served one action at a time through the safety shield"),)
    outputs = (
        Port("reward", Wire.NUMBER),
        Port("terminated", Wire.BOOL),
        Port("truncated", Wire.BOOL),
        Port("success", Wire.BOOL),
        Port("done", Wire.BOOL, description="the episode ended (success, terminated or truncated)"),
        Port("info", Wire.JSON),
        Port("result", Wire.STEP, description="all of the above in one value"),
    )

    last_result: StepResult | None = None
    """The env's own result of the last step (observation included), which the executor hands to the agents'
    `on_step`; it never travels on a wire."""

    def forward(self, inputs: dict[str, Any]) -> dict[str, Any]:
        self.live.fresh = False
        self.last_result = result = self.env.step(inputs["action"])
        reward, terminated, truncated = float(result.reward), bool(result.terminated), bool(result.truncated)
        success = bool(result.success)
        info = result.info
        step = {"reward": reward, "terminated": terminated, "truncated": truncated, "success": success, "info": info}
        return {**step, "done": success or terminated or truncated, "result": step}


class EnvEvaluate(EnvNode):
    """The verdict: success of the episode's final step (fed by the loop's `final_*` side); its numeric info
    fields become the episode's metrics."""

    role = Role.EVALUATE
    inputs = (Port("result", Wire.STEP, required=False, description="the final step's result"), EnvNode._TRIGGER)
    outputs = (Port("success", Wire.BOOL), Port("metrics", Wire.JSON))

    def forward(self, inputs: dict[str, Any]) -> dict[str, Any]:
        result = inputs.get("result") or {}
        info = result.get("info") or {}
        metrics = {
            str(k): float(v)
            for k, v in info.items()
            if isinstance(v, (int, float, np.number)) and not isinstance(v, bool)
        }
        return {"success": bool(result.get("success", False)), "metrics": metrics}


_NODES: tuple[tuple[str, type[EnvNode]], ...] = (
    ("reset", EnvReset),
    ("observe", EnvObserve),
    ("observe_instruction", EnvObserveInstruction),
    ("observe_state", EnvObserveState),
    ("observe_image", EnvObserveImage),
    ("step", EnvStep),
    ("evaluate", EnvEvaluate),
)


def env_nodeset(benchmark: str) -> Nodeset:
    """The env nodeset of a benchmark: one subclass of each env node bound to it."""
    classes = tuple(
        type(
            f"{base.__name__}[{benchmark}]",
            (base,),
            {
                "type_name": f"{benchmark}.{suffix}",
                "nodeset": benchmark,
                "benchmark": benchmark,
                "__doc__": base.__doc__,
                "__module__": __name__,
            },
        )
        for suffix, base in _NODES
    )
    return Nodeset(benchmark, classes, f"The {benchmark} benchmark's env: reset, observe, step, evaluate.", Owner.ENV)
