"""The evaluation spec: one validated model shared by `hylo eval`, `hylo.evaluate()` and the HTTP API.

Fields split in two: those that define the results (benchmark and its options, split, tasks, agent and its args,
seed, step budget, timing, shield, act timeout), which enter the config digest (the benchmark's `env_args` only when
it has some, so that a run made before they existed keeps its digest), and display / parallelism knobs (episodes,
log dir, run id, video, strict, workers, backend, infra retries, batch size and wait), which do not — so a run can
be resumed or extended with more episodes or workers and stay the same run. Batching is a parallelism knob too: it
changes where and how many at a time the agent's calls run, not what they answer (an agent's `act_batch` of a batch
gives each episode what `act` would: checked by the conformance suite), so a run resumed with or without `--batch`
stays the same run. An agent whose floating-point results change with the batch's size would make them differ in
the last bits; the trace records the size of every call (`agent.batch`).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

from hylo.core.errors import shown
from hylo.core.latency import MAX_SAMPLES
from hylo.core.timing import MAX_STEPS as MAX_STEPS
from hylo.core.timing import TIMING_OPTIONS as TIMING_OPTIONS
from hylo.core.timing import check_timing_options, timing_from
from hylo.core.types import MAX_SEED
from hylo.evallog.logdir import NAME_MAX_BYTES, is_run_name
from hylo.graph.model import parse_graph

DIGEST_FIELDS = (
    "benchmark",
    "env_args",
    "split",
    "tasks",
    "agent",
    "agent_args",
    "seed",
    "seeds",
    "max_steps",
    "act_timeout",
    "shield",
    "timing",
    "timing_options",
    "protocol",
    "graph",
    "no_images",
)
"""The fields that define an evaluation's results; everything else is a display or parallelism knob."""

MAX_EPISODES = 100_000
"""The most episodes per task a run may plan."""
MAX_TASKS = 10_000
"""The most tasks a run may name."""
MAX_SECONDS = 86_400.0
"""The longest any time limit may be: one day."""
MAX_RAY_WORKERS = 1024
"""The most Ray actors one run may ask for (the process backend is capped by this machine's CPUs instead)."""
MAX_INFRA = 1_000_000
"""The most infra retries and failures a run may be told to tolerate."""
MAX_NAME = 200
"""The longest benchmark, agent, split or task name."""
MAX_SEEDS = 1000
"""The most seeds one run may run each episode under."""
MAX_RUN_EPISODES = 10_000_000
"""The most episodes one run may plan in all (episodes × seeds × tasks): each field may be within its own bound and
their product still a run no machine finishes."""
MAX_JSON_DEPTH = 16
"""How deeply `agent_args`, `env_args` and `timing_options` may nest (an agent's arguments are a few flat values)."""
MAX_ARGS_BYTES = 64 * 1024
"""The largest `agent_args` (and `env_args`), as JSON."""
MAX_BATCH_WAIT_MS = 10_000.0
"""The longest a batch may be told to wait for more requests: ten seconds."""
MAX_HOST_GPUS = 64.0
"""The most GPUs a policy host may ask Ray for."""
VIDEO_SIDES = (32, 4096)
"""The smallest and largest side of a recorded video's frames, in pixels."""

_RANGES: dict[str, tuple[int, int, str]] = {
    "episodes": (1, MAX_EPISODES, "episodes"),
    "seed": (0, MAX_SEED, "seed"),
    "max_steps": (1, MAX_STEPS, "step budget"),
    "video": (0, MAX_EPISODES, "video"),
    "workers": (1, MAX_RAY_WORKERS, "workers"),
    "batch": (1, MAX_RAY_WORKERS, "batch"),
    "retry_infra": (0, MAX_INFRA, "retry-infra"),
    "max_infra_failures": (1, MAX_INFRA, "max infra failures"),
}
"""The integer fields' bounds, and how an error names them."""

MAX_TIMING_BYTES = 4 * 1024 * 1024
"""The largest `timing_options`, as JSON: room for an empirical latency model's samples."""
MAX_LATENCY_SAMPLES = MAX_SAMPLES
"""The most latencies an empirical latency model may hold."""


class EvalSpec(BaseModel):
    """What to evaluate and how. `tasks` empty means every task of the split; `split` None means the default."""

    model_config = ConfigDict(extra="forbid")

    benchmark: str = Field(min_length=1, max_length=MAX_NAME)
    env_args: dict[str, Any] = Field(default_factory=dict)
    """The benchmark's options: its factory's keyword arguments, or `gymnasium.make`'s for `gym:<id>`."""
    agent: str = Field(min_length=1, max_length=MAX_NAME)
    split: str | None = Field(default=None, max_length=MAX_NAME)
    tasks: list[str] = Field(default_factory=list, max_length=MAX_TASKS)
    agent_args: dict[str, Any] = Field(default_factory=dict)
    episodes: int = 10
    seed: int = 0
    seeds: list[int] | None = None
    """Several seeds (`--seeds S1 S2 ...`): every (task, index) runs under each, an episode per seed (then `seed` is
    the first); None: `seed` alone."""
    max_steps: int | None = None
    act_timeout: float | None = None
    shield: bool = True
    timing: Literal["sync", "realtime"] = "sync"
    timing_options: dict[str, Any] = Field(default_factory=dict)
    protocol: str | None = Field(default=None, min_length=1, max_length=MAX_NAME)
    """A named protocol (`hylo list protocols`); planning fills `timing` and `timing_options` from it."""
    graph: dict[str, Any] | None = None
    """A graph document (hylo.graph) run instead of a bare agent; `agent` then names it (`graph:<name>`)."""
    no_images: bool = False
    """`--no-images`: no agent of the run is given camera images (nor are any rendered for it), whatever it declares;
    one that declares `needs_images=True` is refused. It changes what the agent sees, so it is in the digest."""
    # display and parallelism knobs: not in the digest
    log_dir: str = Field(default="hylo-runs", max_length=4096)
    run_id: str | None = Field(default=None, max_length=MAX_NAME)
    fresh: bool = False
    video: int = 0
    video_size: tuple[int, int] | None = None
    """`--video-size`: (width, height) of the recorded frames, rendered at that size where the env can render a
    frame of its own for the video (else scaled to it); None: the size of the env's camera. It never changes what
    the agent is given."""
    record_rollouts: bool = False
    """`--record-dataset`: keep every episode's steps (observation features, cameras included, action, reward, done,
    success) in the run's directory (`hylo.evallog.rollouts`), for `hylo runs export RUN --format lerobot`. It renders
    the env's cameras for an agent that takes none, and never changes what the agent is given."""
    strict: bool = False
    workers: int = 1
    backend: Literal["auto", "inline", "process", "ray"] = "auto"
    address: str | None = Field(default=None, max_length=MAX_NAME)
    retry_infra: int = 0
    max_infra_failures: int | None = None
    episode_timeout: float | None = None
    env_timeout: float | None = None
    batch: int | None = None
    """`--batch B`: the agent is built once, in a policy host, and acts for up to B episodes per `act_batch` call."""
    batch_wait_ms: float = 10.0
    """`--batch-wait-ms W`: how long a batch waits for more requests after its first one."""
    host_gpus: float = 0.0
    """`--host-gpus G` (`--backend ray --batch`): the GPUs Ray gives the policy-host actor (`num_gpus`; a fraction
    shares one); the env workers' actors get none."""

    @field_validator(*_RANGES)
    @classmethod
    def _in_range(cls, value: int | None, info: ValidationInfo) -> int | None:
        minimum, maximum, label = _RANGES[info.field_name or ""]
        if value is not None and value < minimum:
            raise ValueError(f"{label} must be >= {minimum}, got {value}")
        if value is not None and value > maximum:
            raise ValueError(f"{label} must be <= {maximum:,}, got {shown(value)}")
        return value

    @field_validator("video_size", mode="before")
    @classmethod
    def _video_size(cls, value: Any) -> tuple[int, int] | None:
        return None if value is None else parse_video_size(value)

    @field_validator("seeds")
    @classmethod
    def _seed_list(cls, value: list[int] | None) -> list[int] | None:
        if value is None:
            return None
        if not 1 <= len(value) <= MAX_SEEDS:
            raise ValueError(f"seeds holds 1 to {MAX_SEEDS} seeds, got {len(value)}")
        for seed in value:
            if not 0 <= seed <= MAX_SEED:
                raise ValueError(f"a seed must be in [0, {MAX_SEED:,}], got {shown(seed)}")
        repeated = sorted({seed for seed in value if value.count(seed) > 1})
        if repeated:
            raise ValueError(f"seeds are run once each; repeated: {repeated}")
        return value

    @model_validator(mode="after")
    def _one_seed_or_several(self) -> EvalSpec:
        """A single seed in `seeds` is `seed` (the same run as `--seed S`); with several, `seed` is the first."""
        if self.seeds is not None:
            self.seed = self.seeds[0]
            if len(self.seeds) == 1:
                self.seeds = None
        return self

    @model_validator(mode="after")
    def _bounded_as_a_whole(self) -> EvalSpec:
        """Refuse a run larger than `MAX_RUN_EPISODES` as its tasks are named (none named: the split's, counted when
        the spec is resolved, `hylo.eval.resolve`). The refusal is `episodes`' (the count the seeds and tasks
        multiply), its message naming all three."""
        try:
            check_run_size(self.episodes, len(self.seed_list), max(1, len(self.tasks)))
        except ValueError as exc:
            raise self._refused("episodes", exc) from None
        return self

    @model_validator(mode="after")
    def _timing_holds(self) -> EvalSpec:
        """`timing_options` as the timing they make (`hylo.core.timing.timing_from`): a realtime timing no protocol
        completes is built; options a protocol, `--timing realtime` or a sweep completes later are checked each on
        its own (sync timing still holding options when it runs is refused then, `hylo.eval.resolve.make_timing`)."""
        try:
            if self.timing == "realtime" and self.protocol is None:
                timing_from(self.timing, self.timing_options)
            else:
                check_timing_options(self.timing_options)
        except ValueError as exc:
            raise self._refused("timing_options", exc) from None
        return self

    def _refused(self, field: str, exc: ValueError) -> ValidationError:
        """A refusal found when the spec is validated as a whole, as `field`'s (named by its loc)."""
        error = PydanticCustomError("value_error", "{reason}", {"reason": str(exc)})
        details = InitErrorDetails(type=error, loc=(field,), input=getattr(self, field))
        return ValidationError.from_exception_data(type(self).__name__, [details])

    @property
    def seed_list(self) -> list[int]:
        """The seeds every (task, index) runs under."""
        return list(self.seeds) if self.seeds is not None else [self.seed]

    @field_validator("tasks")
    @classmethod
    def _task_names(cls, value: list[str]) -> list[str]:
        for task in value:
            if not 0 < len(task) <= MAX_NAME:
                raise ValueError(f"a task name has 1 to {MAX_NAME} characters, got {shown(task)}")
        return value

    @field_validator("agent_args", "env_args", "timing_options")
    @classmethod
    def _plain_json(cls, value: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        field = info.field_name or ""
        check_json_value(value, field, max_bytes=MAX_TIMING_BYTES if field == "timing_options" else MAX_ARGS_BYTES)
        return value

    @field_validator("env_args")
    @classmethod
    def _option_names(cls, value: dict[str, Any]) -> dict[str, Any]:
        for key in value:
            if not key.isidentifier():
                raise ValueError(f"a benchmark option is named by a Python identifier, got {shown(key)}")
        return value

    @field_validator("act_timeout", "episode_timeout", "env_timeout")
    @classmethod
    def _seconds(cls, value: float | None, info: ValidationInfo) -> float | None:
        label = (info.field_name or "").replace("_", " ")
        if value is not None and not (value > 0 and math.isfinite(value)):
            raise ValueError(f"{label} must be a finite number of seconds > 0, got {value}")
        if value is not None and value > MAX_SECONDS:
            raise ValueError(f"{label} must be at most {MAX_SECONDS:g} seconds (one day), got {value:g}")
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
        return parse_graph(value).to_json()

    @field_validator("batch_wait_ms")
    @classmethod
    def _batch_wait(cls, value: float) -> float:
        if not (0 <= value <= MAX_BATCH_WAIT_MS):
            raise ValueError(f"batch wait must be between 0 and {MAX_BATCH_WAIT_MS:g} ms, got {value}")
        return value

    @field_validator("host_gpus")
    @classmethod
    def _host_gpus(cls, value: float) -> float:
        if not (0 <= value <= MAX_HOST_GPUS):
            raise ValueError(f"host gpus must be between 0 and {MAX_HOST_GPUS:g}, got {value}")
        return value

    @model_validator(mode="after")
    def _gpus_for_a_host(self) -> EvalSpec:
        if self.host_gpus and self.batch is None:
            raise ValueError(
                f"--host-gpus {self.host_gpus:g} gives the policy host GPUs, and there is none without --batch"
            )
        return self

    @field_validator("batch")
    @classmethod
    def _batch_fits_workers(cls, value: int | None, info: ValidationInfo) -> int | None:
        workers = info.data.get("workers")
        if value is not None and isinstance(workers, int) and value > workers:
            raise ValueError(
                f"--batch {value} is larger than --workers {workers}: a batch holds at most one request per worker "
                f"(each worker runs one episode at a time); use --batch {workers} or more workers"
            )
        return value

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
        if value is not None and not is_run_name(value):
            raise ValueError(f"run id may hold letters, digits, '-', '_' and '.' (not first), at most {NAME_MAX_BYTES} "
                             f"bytes as UTF-8, got {shown(value)}")  # fmt: skip
        return value

    def digest(
        self,
        step_budget: Mapping[str, int] | None = None,
        versions: Mapping[str, str | None] | None = None,
        code: str | None = None,
    ) -> str:
        """A hash of the fields that define the results (resolve split and tasks first for a stable digest), of the
        resolved per-task step budget when given (a benchmark may change its default between versions), of the
        versions of the packages a benchmark's results depend on, when it names any (`Benchmark.result_packages`),
        and of the agent's code identity when given (`hylo.eval.code_identity`: without it, the configuration
        digest that runs of the same configuration share)."""
        data = self.model_dump(mode="json", include=set(DIGEST_FIELDS))
        if not data["env_args"]:  # the digest of a run without options is the one it had before they existed
            del data["env_args"]
        if data["seeds"] is None:  # likewise for a run of one seed
            del data["seeds"]
        if data["protocol"] is None:  # and for a run under no named protocol
            del data["protocol"]
        if not data["no_images"]:  # and for a run that does not withhold images
            del data["no_images"]
        if self.graph is not None:  # its layout and description do not change results
            data["graph"] = {k: v for k, v in self.graph.items() if k not in ("layout", "description")}
        if step_budget is not None:
            data["step_budget"] = dict(step_budget)
        if versions:
            data["versions"] = dict(versions)
        if code is not None:
            data["code"] = code
        text = json.dumps(data, sort_keys=True, separators=(",", ":"))
        return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()

    def default_run_id(
        self,
        step_budget: Mapping[str, int] | None = None,
        versions: Mapping[str, str | None] | None = None,
        code: str | None = None,
    ) -> str:
        """The run a command resumes when it names none: benchmark, agent and digest (with the agent's code)."""
        bench = "".join(c if c.isalnum() else "-" for c in self.benchmark).strip("-")
        name = (
            f"graph-{self.graph['name']}"
            if self.graph is not None
            else self.agent.rsplit(":", 1)[-1].rsplit(".", 1)[-1]
        )
        agent = "".join(c if c.isalnum() else "-" for c in name)
        return f"{bench}-{agent.strip('-').lower()}-{self.digest(step_budget, versions, code)}"

    @property
    def log_path(self) -> Path:
        return Path(self.log_dir)


def check_run_size(episodes: int, seeds: int, tasks: int) -> None:
    """Refuse a run of more than `MAX_RUN_EPISODES` episodes in all; raises `ValueError` naming the three fields."""
    total = episodes * seeds * tasks
    if total > MAX_RUN_EPISODES:
        raise ValueError(
            f"episodes × seeds × tasks = {episodes:,} × {seeds:,} × {tasks:,} = {total:,} episodes, more than the "
            f"{MAX_RUN_EPISODES:,} a run may plan: lower episodes, seeds or tasks"
        )


def parse_video_size(value: Any) -> tuple[int, int]:
    """(width, height) from `256` or `"256"` (square), `"320x240"`, or `[320, 240]`, each side in `VIDEO_SIDES`.
    Raises `ValueError` naming the value."""
    low, high = VIDEO_SIDES
    expected = f"a video size is SIDE or WIDTHxHEIGHT in pixels, each side {low}-{high} (e.g. 256 or 320x240)"
    sides: list[Any]
    if isinstance(value, str):
        sides = value.strip().lower().split("x")
    elif isinstance(value, (list, tuple)):
        sides = list(value)
    else:
        sides = [value]
    try:
        parsed = [_side(side) for side in sides]
    except ValueError:
        raise ValueError(f"{expected}, got {shown(value)}") from None
    if len(parsed) not in (1, 2) or not all(low <= side <= high for side in parsed):
        raise ValueError(f"{expected}, got {shown(value)}")
    return (parsed[0], parsed[-1])


def _side(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ValueError(value)
    if isinstance(value, str) and not value.strip().isdigit():
        raise ValueError(value)
    return int(value)


def check_json_value(
    value: Any, field: str, *, max_depth: int = MAX_JSON_DEPTH, max_bytes: int = MAX_ARGS_BYTES
) -> None:
    """Refuse what a JSON field must not hold: nesting deeper than `max_depth`, more than `max_bytes` of JSON, or a
    number that is not finite. Raises `ValueError` naming `field`."""

    def walk(node: Any, depth: int) -> None:
        if depth > max_depth:
            raise ValueError(f"{field} nests deeper than {max_depth} levels")
        if isinstance(node, dict):
            for item in node.values():
                walk(item, depth + 1)
        elif isinstance(node, (list, tuple)):
            for item in node:
                walk(item, depth + 1)
        elif isinstance(node, float) and not math.isfinite(node):
            raise ValueError(f"{field} holds a number that is not finite ({node})")

    walk(value, 0)
    try:
        size = len(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{field} must hold JSON values only: {exc}") from None
    if size > max_bytes:
        raise ValueError(f"{field} is {size:,} bytes of JSON, more than the {max_bytes:,} it may hold")
