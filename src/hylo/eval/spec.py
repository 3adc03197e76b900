"""The evaluation spec: one validated model shared by `hylo eval`, `hylo.evaluate()` and the HTTP API.

Fields split in two: those that define the results (benchmark, split, tasks, agent and its args, seed, step budget,
timing, shield, act timeout), which enter the config digest, and display / parallelism knobs (episodes, log dir,
run id, video, strict, workers, backend, infra retries), which do not — so a run can be resumed or extended with
more episodes or workers and stay the same run.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

DIGEST_FIELDS = (
    "benchmark",
    "split",
    "tasks",
    "agent",
    "agent_args",
    "seed",
    "max_steps",
    "act_timeout",
    "shield",
    "timing",
    "timing_options",
    "graph",
)
"""The fields that define an evaluation's results; everything else is a display or parallelism knob."""

_MINIMUMS: dict[str, tuple[int, str]] = {
    "episodes": (1, "episodes"),
    "seed": (0, "seed"),
    "max_steps": (1, "step budget"),
    "video": (0, "video"),
    "workers": (1, "workers"),
    "retry_infra": (0, "retry-infra"),
    "max_infra_failures": (1, "max infra failures"),
}
"""The integer fields with a lower bound, and how an error names them."""

TIMING_OPTIONS = ("refill_steps", "max_hold_steps", "latency_s", "clock", "adaptive_refill")


class EvalSpec(BaseModel):
    """What to evaluate and how. `tasks` empty means every task of the split; `split` None means the default."""

    model_config = ConfigDict(extra="forbid")

    benchmark: str = Field(min_length=1)
    agent: str = Field(min_length=1)
    split: str | None = None
    tasks: list[str] = Field(default_factory=list)
    agent_args: dict[str, Any] = Field(default_factory=dict)
    episodes: int = 10
    seed: int = 0
    max_steps: int | None = None
    act_timeout: float | None = None
    shield: bool = True
    timing: Literal["sync", "realtime"] = "sync"
    timing_options: dict[str, Any] = Field(default_factory=dict)
    graph: dict[str, Any] | None = None
    """A graph document (hylo.graph) run instead of a bare agent; `agent` then names it (`graph:<name>`)."""
    # display and parallelism knobs: not in the digest
    log_dir: str = "hylo-runs"
    run_id: str | None = None
    fresh: bool = False
    video: int = 0
    strict: bool = False
    workers: int = 1
    backend: Literal["auto", "inline", "process", "ray"] = "auto"
    address: str | None = None
    retry_infra: int = 0
    max_infra_failures: int | None = None
    episode_timeout: float | None = None
    env_timeout: float | None = None

    @field_validator(*_MINIMUMS)
    @classmethod
    def _at_least(cls, value: int | None, info: ValidationInfo) -> int | None:
        minimum, label = _MINIMUMS[info.field_name or ""]
        if value is not None and value < minimum:
            raise ValueError(f"{label} must be >= {minimum}, got {value}")
        return value

    @field_validator("act_timeout", "episode_timeout", "env_timeout")
    @classmethod
    def _seconds(cls, value: float | None, info: ValidationInfo) -> float | None:
        if value is not None and not (value > 0 and math.isfinite(value)):
            label = (info.field_name or "").replace("_", " ")
            raise ValueError(f"{label} must be a finite number of seconds > 0, got {value}")
        return value

    @field_validator("timing_options")
    @classmethod
    def _timing_options(cls, value: dict[str, Any]) -> dict[str, Any]:
        unknown = sorted(set(value) - set(TIMING_OPTIONS))
        if unknown:
            raise ValueError(f"unknown timing options {unknown}; choose from {list(TIMING_OPTIONS)}")
        return value

    @field_validator("address")
    @classmethod
    def _address(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("address must be a Ray address such as ray://head:10001 or auto, got ''")
        return value

    @field_validator("graph")
    @classmethod
    def _graph(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is None:
            return None
        from hylo.graph.model import parse_graph

        return parse_graph(value).to_json()

    @model_validator(mode="after")
    def _graph_agent(self) -> EvalSpec:
        if self.graph is not None and self.agent != f"graph:{self.graph['name']}":
            raise ValueError(f"a graph run's agent is 'graph:{self.graph['name']}', got {self.agent!r}")
        if self.graph is None and self.agent.startswith("graph:"):
            raise ValueError(f"agent {self.agent!r} names a graph, but the spec holds none")
        return self

    @field_validator("run_id")
    @classmethod
    def _run_id(cls, value: str | None) -> str | None:
        if value is not None and (not value or not all(c.isalnum() or c in "-_." for c in value) or value[0] == "."):
            raise ValueError(f"run id may hold letters, digits, '-', '_' and '.', got {value!r}")
        return value

    def digest(self, step_budget: Mapping[str, int] | None = None) -> str:
        """A hash of the fields that define the results (resolve split and tasks first for a stable digest), and of
        the resolved per-task step budget when given (a benchmark may change its default between versions)."""
        data = self.model_dump(mode="json", include=set(DIGEST_FIELDS))
        if self.graph is not None:  # its layout and description do not change results
            data["graph"] = {k: v for k, v in self.graph.items() if k not in ("layout", "description")}
        if step_budget is not None:
            data["step_budget"] = dict(step_budget)
        text = json.dumps(data, sort_keys=True, separators=(",", ":"))
        return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()

    def default_run_id(self, step_budget: Mapping[str, int] | None = None) -> str:
        """The run a command resumes when it names none: benchmark, agent and digest."""
        bench = "".join(c if c.isalnum() else "-" for c in self.benchmark).strip("-")
        name = (
            f"graph-{self.graph['name']}"
            if self.graph is not None
            else self.agent.rsplit(":", 1)[-1].rsplit(".", 1)[-1]
        )
        agent = "".join(c if c.isalnum() else "-" for c in name)
        return f"{bench}-{agent.strip('-').lower()}-{self.digest(step_budget)}"

    @property
    def log_path(self) -> Path:
        return Path(self.log_dir)
