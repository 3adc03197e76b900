"""What the runner records around the Kernel: each episode's trace lines, and frames for video."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic_core import to_json

from hylo.core.environment import Environment
from hylo.core.events import TEMPLATES, BaseEvent, Record, defaults
from hylo.core.jsonable import jsonable
from hylo.core.types import Action, EnvCapabilities, EnvSpec, Observation, StepResult, TaskInstance
from hylo.eval.video import VideoWriter

TraceEntry = Record | dict[str, Any]
"""One event of a buffered trace: the bus's record of it (the loop's own events), or its field dict."""


class TraceBuffer:
    """Keeps the current episode's trace events, as the bus hands them over (records, or field dicts), until the
    runner commits them with the episode's row in one transaction (a crash loses only unfinished episodes, which are
    re-run).

    Events become JSON when committed, on the EvalLog's writer thread (`serialize`), not in the episode loop: the loop
    pays one tuple and one append per event, and a simulator that releases the GIL while it steps (MuJoCo) overlaps
    with the serialisation."""

    def __init__(self) -> None:
        self.events: list[TraceEntry] = []

    def __call__(self, event: BaseEvent) -> None:
        self.events.append(event.model_dump(mode="json"))

    def write_record(self, record: Record) -> None:
        self.events.append(record)

    def write_fields(self, fields: dict[str, Any], kind: str) -> None:
        self.events.append(fields)

    def take(self) -> list[TraceEntry]:
        events, self.events = self.events, []
        return events


_SEPARATOR = b'},{"event":"'
_LINE_BREAK = b'}\n{"event":"'


def serialize(events: Sequence[TraceEntry]) -> list[bytes]:
    """JSON lines of trace events, written as the event models write them (NaN and infinities as null).

    Never raises: a value that cannot be encoded as is (a lone surrogate in an agent's text, say) is written
    escaped; an event that cannot be written at all keeps its envelope and says why. One bad value must not cost
    the episode its record, nor the run its log.

    The whole trace is encoded in one call, then cut into lines where one event ends and the next begins: every
    event's JSON starts with its `event` key, and no JSON string holds the separator unescaped. When that cut is not
    certain (a payload holding a dict that starts like an event), or the one call fails, each event is encoded alone."""
    if not events:
        return []
    template = TEMPLATES.get
    fields = [
        {**(template(e[0]) or defaults(e[0])), "run_id": e[1], "episode_id": e[2], "seq": e[3], "sim_time": e[4],
         "wall_time": e[5], **e[6]} if type(e) is tuple else e
        for e in events
    ]  # fmt: skip
    if all(type(e) is tuple or _starts_with_kind(e) for e in events):
        try:
            blob = to_json(fields, inf_nan_mode="null", fallback=jsonable)
        except Exception:
            blob = b""
        if blob and blob.count(_SEPARATOR) == len(fields) - 1:
            lines = blob[1:-1].replace(_SEPARATOR, _LINE_BREAK).split(b"\n")
            if len(lines) == len(fields):
                return lines
    return [_line(entry) for entry in fields]  # type: ignore[arg-type]


def _starts_with_kind(fields: Any) -> bool:
    """Whether a field dict's JSON starts with `{"event":"`."""
    return isinstance(fields, dict) and bool(fields) and next(iter(fields)) == "event" and type(fields["event"]) is str


def _line(fields: dict[str, Any]) -> bytes:
    try:
        return to_json(fields, inf_nan_mode="null", fallback=jsonable)
    except Exception:
        pass
    try:
        return json.dumps(_finite(fields), ensure_ascii=True, default=repr).encode()
    except Exception as exc:
        envelope = {key: fields.get(key) for key in ("event", "run_id", "episode_id", "seq", "sim_time", "wall_time")}
        envelope["unserializable"] = f"{type(exc).__name__}: {exc}"
        return json.dumps(_finite(envelope), ensure_ascii=True, default=repr).encode()


def _finite(value: Any) -> Any:
    """NaN and infinities as null, as the models write them, for the json module (which would write NaN)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


class FrameTap(Environment):
    """Wraps an environment to copy one camera's frames into a video while `writer` is set.

    The wrapped env renders only when asked: the tap switches its `render_images` on for a recorded episode (when
    the agent does not need images anyway) and off again after.
    """

    def __init__(self, env: Environment, *, agent_needs_images: bool) -> None:
        self.env = env
        self.agent_needs_images = agent_needs_images
        self.writer: VideoWriter | None = None

    @property
    def spec(self) -> EnvSpec:
        return self.env.spec

    @property
    def capabilities(self) -> EnvCapabilities:
        return self.env.capabilities

    def start(self, path: Path, fps: float) -> None:
        self.writer = VideoWriter(path, fps=fps)
        self._render(True)

    def stop(self) -> Path | None:
        writer, self.writer = self.writer, None
        self._render(self.agent_needs_images)
        return None if writer is None else writer.close()

    def _render(self, on: bool) -> None:
        if hasattr(self.env, "render_images"):
            self.env.render_images = on

    def _tap(self, obs: Any) -> None:
        if self.writer is None or not isinstance(obs, dict):
            return
        images = obs.get("images")
        if isinstance(images, dict) and images:
            self.writer.add(next(iter(images.values())))

    def reset(self, task: TaskInstance) -> Observation:
        obs = self.env.reset(task)
        self._tap(obs)
        return obs

    def step(self, action: Action) -> StepResult:
        result = self.env.step(action)
        self._tap(result.obs)
        return result

    def observe(self) -> Observation:
        return self.env.observe()

    def hold_action(self) -> Action:
        return self.env.hold_action()

    def privileged_state(self, name: str) -> Any:
        return self.env.privileged_state(name)

    def prologue(self) -> Sequence[Action]:
        return self.env.prologue()

    def close(self) -> None:
        self.stop()
        self.env.close()
