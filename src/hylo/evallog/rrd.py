"""A run's episodes as a Rerun recording (`.rrd`), to scrub through in the Rerun viewer (`rerun FILE.rrd`).

Each episode is built from its trace (`EvalLog.iter_trace`), cut into steps as the episode viewer cuts it
(`hylo.evallog.steps`), and, when the run recorded its video, the frames of that video (decoded with PyAV: frame k is
the observation the agent acted on at step k, frame 0 the reset's), under `/episodes/<name>/`, where `<name>` is the
episode id made path-safe (`episode_name`):

    camera                  the video's frames (JPEG), one per step (a run recorded with --video N)
    observation/<key>       each number and small array of the observation, as scalars (one series per element;
                            the trace keeps arrays of more than 64 elements, images among them, by digest alone),
                            at the step that acts on it, as its camera frame
    action/<i>              the action, one scalar series per dimension (`action/<key>/<i>` for a dict action)
    reward                  the step's reward
    shield                  the shield's review of each action, as a text log (an intervention at warning level)
    events                  every other trace event (signals, the agent's chunks, the episode's start and end)
    outcome                 the status, reason, steps and return, as a text document at the last step

on two timelines: `step` (the control step, a sequence) and `sim_time` (the env's simulated time when the step began,
in seconds). Every column is sent whole (`send_columns`), one call per entity and episode, never spawning a viewer nor
touching the network: the recording goes to a file alone.

rerun-sdk (`pip install 'hylo[rerun]'`) is imported only here, when a recording is written.
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import json
import os
import re
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from PIL import Image

from hylo.core.errors import HyloError
from hylo.evallog.recording import TraceEntry, serialize
from hylo.evallog.rows import EpisodeRow
from hylo.evallog.steps import place_events
from hylo.evallog.store import EvalLog
from hylo.evallog.video import read_frames

if TYPE_CHECKING:
    import rerun as rr

INSTALL_HINT = "pip install 'hylo[rerun]'"
APPLICATION_ID = "hylo"
JPEG_QUALITY = 90
MAX_TEXT = 2000
"""The longest text one trace event is logged as (the rest is cut)."""

DATA_EVENTS = frozenset({"observation", "action", "step.result", "safety.review"})
"""The trace events logged as data of their own; every other event goes to the `events` text log."""

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")
_MAX_NAME = 120
_ENVELOPE = ("event", "run_id", "episode_id", "seq", "sim_time", "wall_time")


class RerunError(HyloError):
    """A recording cannot be written: rerun-sdk missing, a bad output path, unknown episodes."""


def require_rerun() -> None:
    """Raise `RerunError` saying how to install rerun-sdk when it is not importable."""
    if importlib.util.find_spec("rerun") is None:
        raise RerunError(f"writing a Rerun recording needs rerun-sdk: {INSTALL_HINT}")


def check_rrd_path(path: Path) -> None:
    """Refuse an output that is not a `.rrd` file name in an existing directory, or that this process cannot write
    (its directory, or the file it would replace: an existing file is replaced)."""
    if path.suffix != ".rrd":
        raise RerunError(f"a Rerun recording is a .rrd file; got {str(path)!r}")
    if path.is_dir():
        raise RerunError(f"{str(path)!r} is a directory; name the .rrd file to write")
    if not path.parent.is_dir():
        raise RerunError(f"cannot write {str(path)!r}: directory {str(path.parent)!r} does not exist")
    target = path if path.exists() else path.parent
    if not os.access(target, os.W_OK):
        raise RerunError(f"cannot write the recording {str(path)!r}: {str(target)!r} is not writable")


def episode_name(episode_id: str) -> str:
    """An episode id as one entity path part: every character outside [A-Za-z0-9_.-] becomes `_`
    (`metaworld/mt10/reach-v3/0000@s0` → `metaworld_mt10_reach-v3_0000_s0`); a long id is cut and given a hash."""
    name = _UNSAFE.sub("_", episode_id) or "episode"
    if len(name) > _MAX_NAME:
        name = f"{name[: _MAX_NAME - 17]}-{_hash(episode_id)}"
    return name


def _hash(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=8).hexdigest()


class EpisodeNames:
    """The entity path part of each episode of one recording: `episode_name`, and a hash of the id after it for an
    id whose name another id of the recording took already."""

    def __init__(self) -> None:
        self._taken: dict[str, str] = {}

    def __call__(self, episode_id: str) -> str:
        name = episode_name(episode_id)
        if self._taken.setdefault(name, episode_id) != episode_id:
            name = f"{name}-{_hash(episode_id)}"
            self._taken[name] = episode_id
        return name


def events_of(trace: Sequence[TraceEntry] | Sequence[bytes]) -> list[dict[str, Any]]:
    """A trace as event dicts, as `EvalLog.trace` gives them back: from the JSON lines of another process, or from
    the records and field dicts of this one's trace buffer (written as the EvalLog writes them)."""
    lines = [line for line in trace if isinstance(line, bytes)]
    if len(lines) < len(trace):
        lines = serialize([entry for entry in trace if not isinstance(entry, bytes)])
    return [json.loads(line) for line in lines]


@dataclass(frozen=True, slots=True)
class Written:
    """What one episode's recording holds: its steps and camera frames."""

    steps: int
    frames: int


@dataclass
class Steps:
    """An episode's trace cut into the columns of its steps (`hylo.evallog.steps`' cut, the episode viewer's too): the
    step each event belongs to, and the sim time at which each step began.

    `observations` are logged at the instant they were taken: the reset's at step 0, the one step k returned (step
    k's own event) at step k + 1, the step that acts on it, beside its camera frame. Every other event is logged at
    the step it belongs to; `belongs` holds that step for every event, by its `seq`."""

    count: int = 0
    start_times: list[float] = field(default_factory=lambda: [0.0])
    actions: dict[int, Any] = field(default_factory=dict)
    rewards: dict[int, float] = field(default_factory=dict)
    observations: list[tuple[int, Any]] = field(default_factory=list)
    reviews: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    others: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    end: dict[str, Any] | None = None
    belongs: dict[int, int] = field(default_factory=dict)

    def time(self, step: int) -> float:
        """The sim time at which `step` began (the last known one past the episode's end)."""
        return self.start_times[min(step, len(self.start_times) - 1)]


def cut_steps(events: Iterable[Mapping[str, Any]]) -> Steps:
    """Sort an episode's events into the steps they belong to (`place_events`), read once, in order: an action,
    review, reward or any other event the step it belongs to, an observation the step it was taken at (the reset's
    step 0's, the one step k returned step k + 1's)."""
    steps = Steps()
    reset_time: float | None = None
    ended: dict[int, float] = {}  # each step's sim time at its result, where the result tells
    for placed in place_events(events):
        event, step = placed.event, placed.step
        steps.belongs[placed.seq] = step
        kind = event.get("event")
        if kind == "observation":
            at = step + 1 if placed.after_result else step
            steps.observations.append((at, event.get("obs")))
            if reset_time is None:
                reset_time = _number(event.get("sim_time"), 0.0)
        elif kind == "action":
            steps.actions[step] = event.get("action")
        elif kind == "step.result":
            steps.rewards[step] = _number(event.get("reward"), float("nan"))
            if _is_number(event.get("sim_time")):
                ended[step] = float(event["sim_time"])
        elif kind == "safety.review":
            steps.reviews.append((step, dict(event)))
        else:
            if kind == "episode.end":
                steps.end = dict(event)
            steps.others.append((step, dict(event)))
    steps.count = max(steps.rewards) + 1 if steps.rewards else 0
    steps.start_times = _start_times(reset_time or 0.0, steps.count, ended)
    return steps


def _start_times(reset_time: float, count: int, ended: Mapping[int, float]) -> list[float]:
    """The sim time at which each step began, and at which the episode ended (`count + 1` of them): the reset's
    observation's, then each step's result's (the one before where a step has none)."""
    times = [reset_time]
    for step in range(count):
        times.append(ended.get(step, times[-1]))
    return times


def _number(value: Any, default: float) -> float:
    return float(value) if _is_number(value) else default


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def numeric_leaves(value: Any, prefix: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], np.ndarray[Any, Any]]]:
    """The numeric arrays in a JSON value (a dict's by key), each as a float array with its key path; text, the
    digest the trace keeps of a large array (`hylo.core.jsonable`) and anything else not a number are left out."""
    if isinstance(value, Mapping) and "digest" in value:
        return
    if isinstance(value, Mapping):
        for key, item in value.items():
            if key != "images":
                yield from numeric_leaves(item, (*prefix, str(key)))
        return
    if isinstance(value, str) or value is None:
        return
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        return
    if array.size:
        yield prefix, array


class RrdWriter:
    """A Rerun recording written to one `.rrd` file, an episode at a time (`write_episode`), then `close()`d."""

    def __init__(self, path: Path, *, recording_id: str) -> None:
        import rerun as rr  # optional: the rerun extra

        self.path = path
        self._rr = rr
        self.names = EpisodeNames()
        self.stream: rr.RecordingStream = rr.RecordingStream(APPLICATION_ID, recording_id=recording_id)
        try:
            self.stream.save(str(path))
        except RuntimeError as exc:  # rerun's own: the file cannot be created
            raise RerunError(f"cannot write the recording {str(path)!r}: {exc}") from None
        self.stream.send_recording_name(recording_id)

    def write_episode(
        self, row: EpisodeRow, events: Iterable[Mapping[str, Any]], frames: Iterable[np.ndarray[Any, Any]] = ()
    ) -> Written:
        """Write one episode: its trace's steps and events (read once), its outcome, and `frames` (its video's,
        frame k being the observation step k acted on)."""
        root = f"/episodes/{self.names(row.episode_id)}"
        steps = cut_steps(events)
        self._observations(root, steps)
        self._actions(root, steps)
        self._rewards(root, steps)
        self._texts(f"{root}/shield", [(step, _review_text(e), _review_level(e)) for step, e in steps.reviews], steps)
        self._texts(f"{root}/events", [(step, _event_text(e), _event_level(e)) for step, e in steps.others], steps)
        self._outcome(root, steps, row)
        count = self._frames(f"{root}/camera", frames, steps)
        return Written(steps.count, count)

    def close(self) -> None:
        """Flush everything to the file and close it."""
        self.stream.flush()
        self.stream.disconnect()

    def _send(self, entity: str, steps: Steps, at: Sequence[int], columns: Any) -> None:
        rr = self._rr
        indexes = [
            rr.TimeColumn("step", sequence=np.asarray(at, dtype=np.int64)),
            rr.TimeColumn("sim_time", duration=np.asarray([steps.time(s) for s in at], dtype=np.float64)),
        ]
        self.stream.send_columns(entity, indexes=indexes, columns=columns)

    def _observations(self, root: str, steps: Steps) -> None:
        series: dict[tuple[str, ...], tuple[list[int], list[np.ndarray[Any, Any]]]] = {}
        for step, obs in steps.observations:
            for key, array in numeric_leaves(obs if isinstance(obs, Mapping) else {"value": obs}):
                at, values = series.setdefault(key, ([], []))
                at.append(step)
                values.append(array.ravel())
        for key, (at, values) in series.items():
            entity = f"{root}/observation/{'/'.join(map(_part, key))}"
            columns = self._rr.Scalars.columns(scalars=np.concatenate(values)).partition([len(v) for v in values])
            self._send(entity, steps, at, columns)

    def _actions(self, root: str, steps: Steps) -> None:
        series: dict[tuple[str, ...], tuple[list[int], list[float]]] = {}
        for step in sorted(steps.actions):
            for key, array in numeric_leaves(steps.actions[step]):
                for i, value in enumerate(array.ravel()):
                    at, values = series.setdefault((*key, str(i)), ([], []))
                    at.append(step)
                    values.append(float(value))
        for key, (at, values) in series.items():
            entity = f"{root}/action/{'/'.join(map(_part, key))}"
            self._send(entity, steps, at, self._rr.Scalars.columns(scalars=np.asarray(values)))

    def _rewards(self, root: str, steps: Steps) -> None:
        if steps.rewards:
            at = sorted(steps.rewards)
            values = np.asarray([steps.rewards[s] for s in at])
            self._send(f"{root}/reward", steps, at, self._rr.Scalars.columns(scalars=values))

    def _texts(self, entity: str, lines: Sequence[tuple[int, str, str]], steps: Steps) -> None:
        if lines:
            columns = self._rr.TextLog.columns(text=[text for _, text, _ in lines], level=[lv for _, _, lv in lines])
            self._send(entity, steps, [step for step, _, _ in lines], columns)

    def _outcome(self, root: str, steps: Steps, row: EpisodeRow) -> None:
        columns = self._rr.TextDocument.columns(text=[outcome_text(row)], media_type=["text/markdown"])
        self._send(f"{root}/outcome", steps, [steps.count], columns)

    def _frames(self, entity: str, frames: Iterable[np.ndarray[Any, Any]], steps: Steps) -> int:
        """Log the frames as JPEG images, frame k at step k; how many (none past the episode's last step)."""
        blobs: list[bytes] = []
        for frame in frames:
            if len(blobs) > steps.count:  # frame k is step k's: the last is the observation the episode ended on
                break
            buffer = io.BytesIO()
            Image.fromarray(np.ascontiguousarray(frame)).save(buffer, format="JPEG", quality=JPEG_QUALITY)
            blobs.append(buffer.getvalue())
        if blobs:
            columns = self._rr.EncodedImage.columns(blob=blobs, media_type=["image/jpeg"] * len(blobs))
            self._send(entity, steps, list(range(len(blobs))), columns)
        return len(blobs)


def _part(key: str) -> str:
    return _UNSAFE.sub("_", key) or "_"


def _payload(event: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in event.items() if key not in _ENVELOPE}


def _cut(text: str) -> str:
    return text if len(text) <= MAX_TEXT else f"{text[: MAX_TEXT - 1]}…"


def _event_text(event: Mapping[str, Any]) -> str:
    payload = _payload(event)
    if event.get("event") == "signal":
        return _cut(f"signal {payload.get('signal')} ({payload.get('scope_id')})")
    return _cut(f"{event.get('event')}: {json.dumps(payload, separators=(',', ':'), default=str)}")


def _event_level(event: Mapping[str, Any]) -> str:
    if event.get("event") == "episode.end" and event.get("status") != "success":
        return "WARN"
    return "DEBUG" if event.get("event") == "signal" else "INFO"


def _review_text(event: Mapping[str, Any]) -> str:
    verdict = "rejected" if not event.get("approved", True) else "modified" if event.get("modified") else "approved"
    details = [str(reason) for reason in event.get("reasons") or []]
    if event.get("guard"):
        details.insert(0, f"guard {event['guard']}")
    return _cut(f"{verdict}: {', '.join(details)}" if details else verdict)


def _review_level(event: Mapping[str, Any]) -> str:
    if not event.get("approved", True):
        return "ERROR"
    return "WARN" if event.get("modified") else "INFO"


def outcome_text(row: EpisodeRow) -> str:
    """An episode's outcome as a short markdown document: status, reason, steps, return, seed and detail."""
    lines = [
        f"**{row.status.value}** ({row.reason}) after {row.steps} steps",
        f"episode {row.episode_id}, attempt {row.attempt}, seed {row.seed}",
    ]
    if isinstance(row.metrics.get("return"), (int, float)):
        lines.append(f"return {row.metrics['return']:.6g}")
    if row.detail:
        lines.append(_cut(str(row.detail)))
    return "\n\n".join(lines)


@dataclass(frozen=True, slots=True)
class RrdExport:
    """What an export wrote: the file, its size, and the episodes, steps and frames it holds."""

    path: Path
    episodes: int
    steps: int
    frames: int
    size_bytes: int

    def to_json(self) -> dict[str, Any]:
        return {"path": str(self.path), "episodes": self.episodes, "steps": self.steps, "frames": self.frames,
                "size_bytes": self.size_bytes}  # fmt: skip


def video_frames(run_dir: Path, row: EpisodeRow) -> Iterator[np.ndarray[Any, Any]]:
    """The frames of the episode's video, when the run recorded one and it is in `run_dir`; else none."""
    if row.video is None:
        return iter(())
    path = run_dir / row.video
    return read_frames(path) if path.is_file() else iter(())


def chosen_rows(
    final: Sequence[EpisodeRow], episodes: Collection[str] | None, statuses: Collection[str] | None
) -> list[EpisodeRow]:
    """The final episodes named (all when `episodes` is None) and of `statuses` (any when None); an id the run does
    not hold is refused, named."""
    if episodes is not None:
        known = {row.episode_id for row in final}
        unknown = [episode for episode in episodes if episode not in known]
        if unknown:
            more = f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
            named = ", ".join(repr(episode) for episode in unknown[:5])
            raise RerunError(f"the run holds no episode {named}{more}; `hylo runs export RUN` lists its episode ids")
    return [
        row
        for row in final
        if (episodes is None or row.episode_id in episodes) and (statuses is None or row.status.value in statuses)
    ]


def export_rrd(
    run_dir: Path, out: Path, *, episodes: Collection[str] | None = None, statuses: Collection[str] | None = None
) -> RrdExport:
    """Write the run's final episodes (those named, of `statuses`, when given) as a Rerun recording at `out`."""
    require_rerun()
    check_rrd_path(out)
    steps = frames = 0
    with EvalLog.open(run_dir) as log:
        rows = chosen_rows(log.final_episodes(), episodes, statuses)
        writer = RrdWriter(out, recording_id=log.info().run_id)
        try:
            for row in rows:
                events = log.iter_trace(row.episode_id, row.attempt)
                written = writer.write_episode(row, events, video_frames(run_dir, row))
                steps += written.steps
                frames += written.frames
        finally:
            writer.close()
    return RrdExport(out, len(rows), steps, frames, out.stat().st_size)
