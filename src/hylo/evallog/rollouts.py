"""Recorded rollouts: every step of an episode kept as data, in the run's directory, for a dataset
(`hylo runs export RUN --format lerobot`).

A recorded attempt is a directory `rollouts/<episode>.<attempt>` holding
- `rollout.json`: the episode id, attempt, task text, frame rate and each feature's kind, shape and dtype;
- `steps.npz`: per frame, each vector feature of the observation, `action`, `next.reward`, `next.done` and
  `next.success`;
- `<feature>.mkv`: each camera's frames, lossless (FFV1: every pixel as the env gave it).

Frame t is the observation step t acted on, with that step's action (as the env received it) and what the step
produced: LeRobot's layout. The observation after the last step is no frame. The features are named as the
benchmark declares them (`EnvSpec.feature_names`: `images/agentview` is `observation.images.image`); an env that
declares none has each key named `observation.<key>` (`images/top` is `observation.images.top`).

A rollout is written under a hidden name and renamed when its episode ends, so a crash never leaves half a rollout
under its final name; a frame that cannot be recorded ends the recording, never the episode (`error` says why).
"""

from __future__ import annotations

import contextlib
import json
import shutil
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from hylo.core.environment import Environment, EnvWrapper
from hylo.core.features import FeatureSource, default_feature_names, resolve_features
from hylo.core.types import Action, EnvSpec, Observation, StepResult, TaskInstance
from hylo.evallog.video import VideoWriter, file_stem, read_frames

ROLLOUTS_DIR = "rollouts"
META_FILE = "rollout.json"
STEPS_FILE = "steps.npz"
STEP_KEYS = ("next.reward", "next.done", "next.success")
"""What each frame holds beside the observation and the action: what its step produced."""


def rollout_name(episode_id: str, attempt: int) -> str:
    """The directory name of an attempt's rollout (file-safe, as video names are)."""
    return f"{file_stem(episode_id)}.{attempt}"


@dataclass(frozen=True, slots=True)
class Feature:
    """One recorded feature: its name, kind ("image", "vector" or "action"), shape and dtype."""

    name: str
    kind: str
    shape: tuple[int, ...]
    dtype: str

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "shape": list(self.shape), "dtype": self.dtype}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Feature:
        return cls(str(data["name"]), str(data["kind"]), tuple(int(n) for n in data["shape"]), str(data["dtype"]))


def _as_action(action: Action) -> np.ndarray[Any, Any]:
    """The action as a recorded vector: floats as float32, integers (a discrete action) as int64; at least 1-d."""
    value = np.asarray(action)
    if value.dtype.kind in "biu":
        return np.atleast_1d(value.astype(np.int64))
    if value.dtype.kind == "f":
        return np.atleast_1d(value.astype(np.float32))
    raise TypeError(f"an action of type {type(action).__name__} is not a numeric array and cannot be recorded")


def _each_once(sources: Mapping[str, FeatureSource]) -> dict[str, FeatureSource]:
    """The features with each part of the observation under its first name only (gym's `images/pixels` is
    `observation.image`, not also `observation.images.pixels`)."""
    seen: set[tuple[str, int | None, int | None]] = set()
    out: dict[str, FeatureSource] = {}
    for name, source in sources.items():
        where = (source.path, source.start, source.stop)
        if where not in seen:
            seen.add(where)
            out[name] = source
    return out


def _is_camera(source: FeatureSource) -> bool:
    """A camera is an image under `images/` (hylo's canonical place); another array of bytes shaped like one (BabyAI's
    7x7x3 symbolic `grid`) is data, recorded as numbers."""
    return source.kind == "image" and source.path.startswith("images/")


class _Recording:
    """One attempt's rollout while it is written (in `part`, its hidden directory)."""

    def __init__(self, part: Path, spec: EnvSpec, task: TaskInstance, obs: Observation) -> None:
        self.part = part
        declared = spec.feature_names or default_feature_names(spec.observation_space)
        sources = _each_once(resolve_features(spec.observation_space, declared))
        text = sources.get("task")
        self.task = str(text.read(obs)) if text is not None else (task.instruction or task.task)
        self.episode_id, self.fps = task.episode_id, float(spec.control_rate_hz)
        self.cameras = {name: s for name, s in sources.items() if _is_camera(s)}
        self.vectors = {name: s for name, s in sources.items() if s.kind != "text" and not _is_camera(s)}
        self.read = {**self.cameras, **self.vectors}  # what each frame keeps of an observation
        self.writers = {name: VideoWriter(part / f"{name}.mkv", fps=self.fps, lossless=True) for name in self.cameras}
        self.columns: dict[str, list[np.ndarray[Any, Any]]] = {name: [] for name in [*self.vectors, "action"]}
        self.steps: dict[str, list[Any]] = {key: [] for key in STEP_KEYS}
        self.pending: dict[str, Any] = {}
        self.observed(obs)

    def observed(self, obs: Mapping[str, Any]) -> None:
        """Keep the observation the next step acts on."""
        self.pending = {name: source.read(obs) for name, source in self.read.items()}

    def stepped(self, action: Action, result: StepResult) -> None:
        """Record the pending observation as a frame, with the action and what the step produced."""
        recorded = _as_action(action)
        for name in self.cameras:
            self.writers[name].add(self.pending[name])
        for name in self.vectors:
            self.columns[name].append(np.asarray(self.pending[name], dtype=np.float32).copy())
        self.columns["action"].append(recorded)
        self.steps["next.reward"].append(float(result.reward))
        self.steps["next.done"].append(bool(result.terminated or result.truncated))
        self.steps["next.success"].append(bool(result.success))
        self.observed(result.obs)

    def features(self) -> list[Feature]:
        out = [Feature(name, "image", tuple(int(n) for n in s.shape), "uint8") for name, s in self.cameras.items()]
        for name in [*self.vectors, "action"]:
            first = self.columns[name][0]
            out.append(Feature(name, "action" if name == "action" else "vector", tuple(first.shape), str(first.dtype)))
        return out

    def close(self, attempt: int, status: str) -> int:
        """Write the rollout's files; how many frames it holds."""
        frames = len(self.steps["next.reward"])
        for writer in self.writers.values():
            writer.close()
        if frames == 0:
            return 0
        self.steps["next.done"][-1] = True  # the episode ended after its last frame, whatever ended it
        arrays: dict[str, Any] = {name: np.stack(values) for name, values in self.columns.items()}
        arrays["next.reward"] = np.asarray(self.steps["next.reward"], dtype=np.float32)
        arrays["next.done"] = np.asarray(self.steps["next.done"], dtype=bool)
        arrays["next.success"] = np.asarray(self.steps["next.success"], dtype=bool)
        np.savez(self.part / STEPS_FILE, **arrays)
        meta = {
            "episode_id": self.episode_id,
            "attempt": attempt,
            "status": status,
            "task": self.task,
            "fps": self.fps,
            "frames": frames,
            "features": [feature.to_json() for feature in self.features()],
        }
        (self.part / META_FILE).write_text(json.dumps(meta, indent=1))
        return frames

    def abort(self) -> None:
        for writer in self.writers.values():
            with contextlib.suppress(Exception):  # a half-written video goes with its rollout
                writer.close()
        shutil.rmtree(self.part, ignore_errors=True)


class RolloutTap(EnvWrapper):
    """Wraps an env so that the episode between `start(directory)` and `finish(...)` is recorded as a rollout.

    It sits below any wrapper that takes images away from the agent: it records the cameras the env renders whether
    or not the agent is given them."""

    def __init__(self, env: Environment) -> None:
        super().__init__(env)
        self.directory: Path | None = None  # where the episode being recorded goes (set by `start`)
        self.error: str | None = None  # why the current recording stopped early
        self._recording: _Recording | None = None

    def start(self, directory: Path) -> None:
        """Record the next episode into `directory` (its final name; it is written under a hidden one)."""
        self.discard()
        self.directory, self.error = directory, None

    def reset(self, task: TaskInstance) -> Observation:
        obs = self.env.reset(task)
        if self.directory is not None and self.error is None:
            self._drop()
            part = self._part(self.directory)
            shutil.rmtree(part, ignore_errors=True)  # an earlier, crashed worker's
            self._guard(lambda: self._begin(part, task, obs))
        return obs

    def _begin(self, part: Path, task: TaskInstance, obs: Observation) -> None:
        part.mkdir(parents=True)
        self._recording = _Recording(part, self.env.spec, task, obs)

    def step(self, action: Action) -> StepResult:
        result = self.env.step(action)
        recording = self._recording
        if recording is not None:
            self._guard(lambda: recording.stepped(action, result))
        return result

    def finish(self, attempt: int, status: str) -> Path | None:
        """End the recording: the rollout's directory, or None when it recorded no step (or failed: `error`)."""
        recording, directory = self._recording, self.directory
        self._recording = self.directory = None
        if recording is None or directory is None:
            return None
        try:
            frames = recording.close(attempt, status)
        except Exception as exc:
            recording.abort()
            self.error = self.error or f"{type(exc).__name__}: {exc}"
            return None
        if frames == 0:
            recording.abort()
            return None
        shutil.rmtree(directory, ignore_errors=True)  # an earlier run of the same attempt (resumed)
        recording.part.replace(directory)
        return directory

    def discard(self) -> None:
        """Drop an unfinished recording."""
        self._drop()
        self.directory = None

    def _drop(self) -> None:
        recording, self._recording = self._recording, None
        if recording is not None:
            recording.abort()

    def _guard(self, record: Any) -> None:
        """Run a recording step; a failure ends the recording (kept in `error`), never the episode."""
        try:
            record()
        except Exception as exc:  # a rollout is a copy of the episode, never its end
            self.error = f"{type(exc).__name__}: {exc}"
            self._drop()

    def close(self) -> None:
        self.discard()
        self.env.close()

    @staticmethod
    def _part(directory: Path) -> Path:
        return directory.with_name(f".{directory.name}.part")


@dataclass(frozen=True, slots=True)
class Rollout:
    """A recorded rollout, read back: its metadata, and its frames one at a time (`frames`)."""

    path: Path
    episode_id: str
    attempt: int
    task: str
    fps: float
    length: int
    features: tuple[Feature, ...]

    @classmethod
    def open(cls, path: Path) -> Rollout:
        meta = json.loads((path / META_FILE).read_text())
        features = tuple(Feature.from_json(f) for f in meta["features"])
        return cls(path, str(meta["episode_id"]), int(meta["attempt"]), str(meta["task"]), float(meta["fps"]),
                   int(meta["frames"]), features)  # fmt: skip

    def frames(self) -> Iterator[dict[str, Any]]:
        """Each frame: every feature by name, `action`, `next.reward`, `next.done` and `next.success`."""
        with np.load(self.path / STEPS_FILE) as data:
            arrays = {name: data[name] for name in data.files}
        cameras = {f.name: read_frames(self.path / f"{f.name}.mkv") for f in self.features if f.kind == "image"}
        for index in range(self.length):
            frame: dict[str, Any] = {name: next(stream) for name, stream in cameras.items()}
            frame.update({name: values[index] for name, values in arrays.items()})
            yield frame


def rollout_path(run_dir: Path, episode_id: str, attempt: int) -> Path:
    """Where an attempt's rollout is kept in its run's directory."""
    return run_dir / ROLLOUTS_DIR / rollout_name(episode_id, attempt)
