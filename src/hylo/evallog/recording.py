"""What the runner records around the Kernel: each episode's trace lines, and frames for video."""

from __future__ import annotations

import enum
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np
from pydantic_core import to_json

from hylo.core.environment import Environment, EnvWrapper, VideoCamera
from hylo.core.events import TEMPLATES, BaseEvent, Record, defaults
from hylo.core.imageless import spec_without_images, without_images
from hylo.core.jsonable import jsonable
from hylo.core.types import Action, EnvSpec, Observation, StepResult, TaskInstance
from hylo.evallog.video import VideoWriter

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


class FrameSource(enum.Enum):
    """Where a recorded episode's frames come from (see `FrameTap`)."""

    CAMERA = "camera"  # the env's `video_camera`
    OBSERVATION = "observation"  # the first camera of the observation the agent is given
    RENDERED = "rendered"  # rendered into the observation for the video, and taken out before the agent sees it


class FrameTap(EnvWrapper):
    """Wraps the env an agent acts in so that what the agent is given never depends on recording: it records one
    camera's frames into a video while `writer` is set (`start` / `stop`), and, when the agent gets no camera images
    (`images` False), hands on observations without `images` and a spec that declares none, recorded or not.

    A recorded episode's frames come from (`FrameSource`):
    - the env's own `video_camera` (its `video_frame(size)`), when the agent's frames would not do: it gets none, or a
      `size` was asked for. Meta-World, LIBERO and BabyAI render their first camera at that size for the video alone.
    - else the first camera of the observation the agent is given (scaled to `size` when one was asked for).
    - else, for an env that renders only into its observations (`gym:<id>`), its `render_images` is switched on for
      the recorded episode; the frames it adds are taken out of each observation before the agent sees it.

    A video plays at the env's own rate, its control rate (gymnasium's `render_fps`, or 1/dt): one frame per control
    step, in real time. A frame that cannot be recorded ends the recording, not the episode (`error` says why; the
    frames recorded before it are kept).
    """

    def __init__(self, env: Environment, *, images: bool, size: tuple[int, int] | None = None) -> None:
        super().__init__(env)
        self.images = images
        self.size = size
        self.writer: VideoWriter | None = None
        self.source: FrameSource | None = None
        self.error: str | None = None  # why the current recording stopped early
        self._seen: EnvSpec | None = None  # the env's spec, and the one the agent is shown
        self._shown: EnvSpec | None = None

    @property
    def spec(self) -> EnvSpec:
        spec = self.env.spec
        if self.images:
            return spec
        if spec is not self._seen:
            self._seen, self._shown = spec, spec_without_images(spec)
        assert self._shown is not None
        return self._shown

    @property
    def fps(self) -> float:
        """The rate a video of this env plays at: its own (one frame per control step)."""
        return self.env.spec.control_rate_hz

    def start(self, path: Path) -> None:
        """Record the next episode into `path`."""
        self.writer = VideoWriter(path, fps=self.fps, size=self.size)
        self.error = None
        if self._camera() is not None and (not self.images or self.size is not None):
            self.source = FrameSource.CAMERA
        elif self.images:
            self.source = FrameSource.OBSERVATION
        else:
            self.source = FrameSource.RENDERED
            self._render(True)

    def stop(self) -> Path | None:
        """Stop recording; the video's path, or None when no frame was recorded."""
        writer, self.writer = self.writer, None
        if self.source is FrameSource.RENDERED:
            self._render(False)
        self.source = None
        return None if writer is None else writer.close()

    def _camera(self) -> VideoCamera | None:
        """What renders the env's frames for a video alone, if anything (through the wrappers under this tap)."""
        return self.env.video_camera

    def _render(self, on: bool) -> None:
        self.env.render_images = on  # an env that cannot render ignores it

    def _shown_obs(self, obs: Any) -> Any:
        """Record the frame of `obs` (while recording); `obs` as the agent is given it."""
        if self.writer is not None and self.error is None:
            try:
                self._record(self.writer, obs)
            except Exception as exc:  # a video is a view of the episode, never its end
                self.error = f"{type(exc).__name__}: {exc}"
        return obs if self.images else without_images(obs)

    def _record(self, writer: VideoWriter, obs: Any) -> None:
        frame = first_camera(obs) if self.source is not FrameSource.CAMERA or self.images else None
        camera = self._camera() if self.source is FrameSource.CAMERA else None
        if camera is not None and not (frame is not None and _sized(frame, self.size)):
            frame = camera.video_frame(self.size)  # the agent's frame, when it has the size
        if frame is not None:
            writer.add(frame)

    def reset(self, task: TaskInstance) -> Observation:
        return cast(Observation, self._shown_obs(self.env.reset(task)))

    def step(self, action: Action) -> StepResult:
        result = self.env.step(action)
        shown = self._shown_obs(result.obs)
        return result if shown is result.obs else result._replace(obs=shown)

    def observe(self) -> Observation:
        obs = self.env.observe()
        return obs if self.images else cast(Observation, without_images(obs))

    def close(self) -> None:
        self.stop()
        self.env.close()


def _sized(frame: np.ndarray[Any, Any], size: tuple[int, int] | None) -> bool:
    return size is not None and frame.shape[:2] == (size[1], size[0])


def first_camera(obs: Any) -> np.ndarray[Any, Any] | None:
    """The first camera image of an observation, or None when it has none."""
    images = obs.get("images") if isinstance(obs, Mapping) else None
    if isinstance(images, Mapping) and images:
        frame = next(iter(images.values()))
        if isinstance(frame, np.ndarray):
            return frame
    return None
